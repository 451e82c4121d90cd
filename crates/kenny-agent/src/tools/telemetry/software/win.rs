//! The installed_software section on Windows: the programs "Apps & features" lists, from the Uninstall registry keys.
//!
//! Keys read: the machine's (64-bit and `WOW6432Node` for 32-bit programs) and, for
//! every user hive loaded (users signed in, and services' profiles), the user's own
//! (`HKEY_USERS\<sid>\Software\...\Uninstall`: per-user installs such as Teams, Zoom,
//! VS Code). A user hive that is not loaded (a user not signed in) cannot be read
//! without loading it, which the agent does not do; its per-user programs are missing.
//!
//! Values are read with `Get-ItemProperty` (property access only), so the script also
//! runs where PowerShell is held to Constrained Language mode (AppLocker, WDAC).
//!
//! Skipped as Windows itself hides them: entries without a `DisplayName`, with
//! `SystemComponent` = 1 (parts of other products), and with a `ParentKeyName`
//! (updates of another entry).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::{Date, Month, OffsetDateTime};

use super::super::command::Output;
use super::super::format::clip;
use super::super::format::{parse_ymd, ymd};
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section, Status, section};
use super::MAX_LISTED;
use crate::tools::psjson;

pub(in super::super) static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(12),
    parse,
};

const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$roots = @(
  [pscustomobject]@{ Path = 'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall'; Scope = 'machine'; User = $null },
  [pscustomobject]@{ Path = 'HKLM:\SOFTWARE\WOW6432Node\Microsoft\Windows\CurrentVersion\Uninstall'; Scope = 'machine'; User = $null }
)
foreach ($hive in @(Get-ChildItem -LiteralPath 'Registry::HKEY_USERS' -ErrorAction SilentlyContinue)) {
  $sid = $hive.PSChildName
  if ($sid -like '*_Classes' -or $sid -eq '.DEFAULT') { continue }
  $user = $sid
  try { $user = [System.Security.Principal.SecurityIdentifier]::new($sid).Translate([System.Security.Principal.NTAccount]).Value } catch { }
  $roots += [pscustomobject]@{ Path = "Registry::HKEY_USERS\$sid\Software\Microsoft\Windows\CurrentVersion\Uninstall"; Scope = 'user'; User = $user }
}
$apps = @(foreach ($root in $roots) {
  if (-not (Test-Path -LiteralPath $root.Path)) { continue }
  foreach ($entry in @(Get-ItemProperty -Path "$($root.Path)\*" -ErrorAction SilentlyContinue)) {
    if (-not $entry.DisplayName) { continue }
    [pscustomobject]@{
      DisplayName = [string]$entry.DisplayName
      DisplayVersion = [string]$entry.DisplayVersion
      Publisher = [string]$entry.Publisher
      InstallDate = [string]$entry.InstallDate
      SystemComponent = $entry.SystemComponent
      ParentKeyName = [string]$entry.ParentKeyName
      Scope = $root.Scope
      User = $root.User
    }
  }
})
ConvertTo-Json -InputObject $apps -Compress -Depth 3
"#;

/// One program as listed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Program {
    name: String,
    version: String,
    publisher: Option<String>,
    install_date: Option<String>,
    scope: &'static str,
    /// The account whose hive lists it (`PC\name`), for per-user installs.
    user: Option<String>,
}

fn parse(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let rows = psjson::rows_of(value)?;
    Ok(build(rows.iter().filter_map(program).collect()))
}

fn program(row: &Map<String, Value>) -> Option<Program> {
    let hidden = psjson::number(row, "SystemComponent") == Some(1) || psjson::text(row, "ParentKeyName").is_some();
    if hidden {
        return None;
    }
    let scope = match psjson::text(row, "Scope").as_deref() {
        Some("user") => "user",
        _ => "machine",
    };
    Some(Program {
        name: clip(&psjson::text(row, "DisplayName")?, 200),
        version: psjson::text(row, "DisplayVersion").map_or_else(String::new, |v| clip(&v, 100)),
        publisher: psjson::text(row, "Publisher").map(|p| clip(&p, 200)),
        install_date: psjson::text(row, "InstallDate").and_then(|d| install_date(&d)),
        scope,
        user: (scope == "user")
            .then(|| psjson::text(row, "User"))
            .flatten()
            .map(|u| clip(&u, 200)),
    })
}

/// `InstallDate` is meant to be `yyyyMMdd`; some installers write `yyyy-MM-dd`.
/// Anything else (`3/11/2026`: which is the month?) is left out rather than guessed.
fn install_date(text: &str) -> Option<String> {
    let text = text.trim();
    if text.len() == 8 && text.bytes().all(|b| b.is_ascii_digit()) {
        let year: i32 = text[..4].parse().ok()?;
        let month: u8 = text[4..6].parse().ok()?;
        let day: u8 = text[6..].parse().ok()?;
        let date = Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()?;
        return Some(ymd(date));
    }
    parse_ymd(text).map(ymd)
}

fn build(mut programs: Vec<Program>) -> Section {
    programs.sort_by(|a, b| {
        (a.name.to_lowercase(), &a.version, a.scope, &a.user).cmp(&(
            b.name.to_lowercase(),
            &b.version,
            b.scope,
            &b.user,
        ))
    });
    // The same program registered in both registry views (or twice by its installer).
    let mut seen = HashSet::new();
    programs.retain(|p| seen.insert(p.clone()));
    let count = programs.len();
    let per_user = programs.iter().filter(|p| p.scope == "user").count();
    let listed: Vec<Value> = programs
        .iter()
        .take(MAX_LISTED)
        .map(|p| {
            let mut app = json!({
                "name": p.name,
                "version": p.version,
                "publisher": p.publisher,
                "install_date": p.install_date,
                "scope": p.scope,
            });
            if let Some(user) = &p.user {
                app["user"] = user.as_str().into();
            }
            app
        })
        .collect();
    let per_user_note = match per_user {
        0 => String::new(),
        1 => ", 1 per-user install".to_owned(),
        n => format!(", {n} per-user installs"),
    };
    section(
        Status::Ok,
        format!(
            "{count} {} installed (registry{per_user_note})",
            if count == 1 { "program" } else { "programs" }
        ),
        json!({
            "apps": listed,
            "count": count,
            "truncated": count > MAX_LISTED,
            "source": "registry",
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_reads_every_uninstall_key_machine_and_user() {
        let query = super::super::windows_query().expect("installed_software has a Windows query");
        assert!(std::ptr::eq(query, &QUERY));
        for needle in [
            r"'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall'",
            r"'HKLM:\SOFTWARE\WOW6432Node\Microsoft\Windows\CurrentVersion\Uninstall'",
            r#""Registry::HKEY_USERS\$sid\Software\Microsoft\Windows\CurrentVersion\Uninstall""#,
            "'*_Classes'",
            r#"Get-ItemProperty -Path "$($root.Path)\*""#,
            "$entry.SystemComponent",
            "$entry.ParentKeyName",
            "ConvertTo-Json -InputObject $apps",
        ] {
            assert!(SCRIPT.contains(needle), "the script lacks {needle}");
        }
    }

    #[test]
    fn install_dates_in_the_shapes_installers_write() {
        assert_eq!(install_date("20260311").as_deref(), Some("2026-03-11"));
        assert_eq!(install_date(" 2026-03-11 ").as_deref(), Some("2026-03-11"));
        assert_eq!(install_date("20261399"), None);
        assert_eq!(install_date("3/11/2026"), None);
        assert_eq!(install_date("11.03.2026"), None);
        assert_eq!(install_date(""), None);
    }

    #[test]
    fn hidden_entries_are_skipped_and_the_list_is_capped() {
        let rows = psjson::rows_of(json!([
            {"DisplayName": "Visual C++ runtime part", "SystemComponent": 1, "Scope": "machine"},
            {"DisplayName": "Update for Office (KB5002623)", "ParentKeyName": "Office16.PROPLUS", "Scope": "machine"},
            {"DisplayName": "7-Zip 24.08 (x64)", "DisplayVersion": "24.08", "Publisher": "Igor Pavlov",
             "InstallDate": "", "SystemComponent": null, "ParentKeyName": "", "Scope": "machine", "User": null},
        ]))
        .unwrap();
        let programs: Vec<Program> = rows.iter().filter_map(program).collect();
        assert_eq!(programs.len(), 1);
        assert_eq!(programs[0].install_date, None);
        let many: Vec<Program> = (0..250)
            .map(|i| Program {
                name: format!("App {i:03}"),
                version: "1.0".into(),
                publisher: None,
                install_date: None,
                scope: "machine",
                user: None,
            })
            .collect();
        let section = build(many);
        assert_eq!(section["count"], 250);
        assert_eq!(section["apps"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(section["truncated"], true);
    }
}
