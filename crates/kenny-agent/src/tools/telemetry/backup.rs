//! The backup_status section: whether this PC keeps backups or restore points, and when they last ran.
//!
//! Windows (one PowerShell query): System Restore (enabled per the registry value
//! `RPSessionInterval` and the `DisableSR` policy; the points from
//! `Get-ComputerRestorePoint`, which needs admin rights), File History (the `fhsvc`
//! service and each user's `FileHistory\Configuration\Config1.xml`), and OneDrive
//! (installed per machine or per user, running). Windows Server Backup (`wbadmin`) is
//! not read: it is a Server feature and its cmdlets are slow.
//!
//! Linux: a probe of the common tools' own files, without running them: timeshift
//! (`/etc/timeshift/timeshift.json`), snapper (`/etc/snapper/configs/*`, the newest
//! snapshot's `info.xml`), borgmatic (`/etc/borgmatic/`, `/etc/borgmatic.d/`),
//! rsnapshot (`/etc/rsnapshot.conf`, the newest `<level>.0` folder), restic and borg
//! (systemd units and cron jobs naming them), deja-dup (a user's cache folder). Last run
//! times come from files that tell them: snapshot metadata, the snapshot folders, and
//! systemd's timer stamps (`/var/lib/systemd/timers/stamp-*`).
//!
//! Status: `warn` when System Restore is off, or the newest restore point or backup run
//! is older than [`MAX_AGE_DAYS`]; a PC with no backup tool is `ok` with `known: false`
//! and the reason (the server decides what that means).

mod linux;

use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::Output;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status};
use crate::tools::psjson;

/// Older than this, a restore point or backup is worth a look.
const MAX_AGE_DAYS: i64 = 30;

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(12),
    parse,
};

/// Each part is read on its own, so an access denied on the restore points still
/// leaves the registry, File History and OneDrive.
const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$restore = [ordered]@{ SessionInterval = $null; PolicyDisabled = $null; Points = $null; PointsError = $null }
$key = Get-ItemProperty -Path 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\SystemRestore' -ErrorAction SilentlyContinue
if ($key) { $restore.SessionInterval = $key.RPSessionInterval }
$policy = Get-ItemProperty -Path 'HKLM:\SOFTWARE\Policies\Microsoft\Windows NT\SystemRestore' -ErrorAction SilentlyContinue
if ($policy) { $restore.PolicyDisabled = $policy.DisableSR }
try {
  $restore.Points = @(Get-ComputerRestorePoint | ForEach-Object {
    [Management.ManagementDateTimeConverter]::ToDateTime($_.CreationTime).ToUniversalTime().ToString('o')
  })
} catch { $restore.PointsError = $_.Exception.Message }
$profiles = @(Get-ChildItem -Path "$env:SystemDrive\Users" -Directory -ErrorAction SilentlyContinue)
$fh = [ordered]@{ ServiceState = $null; Users = $profiles.Count; ConfiguredUsers = 0 }
$svc = Get-Service -Name fhsvc -ErrorAction SilentlyContinue
if ($svc) { $fh.ServiceState = [string]$svc.Status }
$fh.ConfiguredUsers = @($profiles | Where-Object { Test-Path -LiteralPath (Join-Path $_.FullName 'AppData\Local\Microsoft\Windows\FileHistory\Configuration\Config1.xml') }).Count
$perUser = @($profiles | Where-Object { Test-Path -LiteralPath (Join-Path $_.FullName 'AppData\Local\Microsoft\OneDrive\OneDrive.exe') }).Count
$od = [ordered]@{
  Installed = (Test-Path -LiteralPath "$env:ProgramFiles\Microsoft OneDrive\OneDrive.exe") -or (Test-Path -LiteralPath "${env:ProgramFiles(x86)}\Microsoft OneDrive\OneDrive.exe") -or ($perUser -gt 0)
  Running = [bool](Get-Process -Name OneDrive -ErrorAction SilentlyContinue)
}
$result = [ordered]@{ RestorePoints = $restore; FileHistory = $fh; OneDrive = $od }
ConvertTo-Json -InputObject $result -Compress -Depth 4
"#;

pub(super) async fn section() -> Outcome {
    super::off_thread("backup_status", linux::collect)
        .await
        .map_err(|e| format!("probing backup tools failed: {e}"))
}

fn parse(output: &Output, now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Value::Object(all) = value else {
        return Err("the backup query printed no result".to_owned());
    };
    let empty = serde_json::Map::new();
    let part = |key: &str| all.get(key).and_then(Value::as_object).unwrap_or(&empty);
    let mut errors = Vec::new();
    let restore = restore_points(part("RestorePoints"), &mut errors);
    let file_history = file_history(part("FileHistory"));
    let onedrive = part("OneDrive");
    let onedrive = json!({
        "installed": onedrive.get("Installed").and_then(Value::as_bool),
        "running": onedrive.get("Running").and_then(Value::as_bool),
    });
    Ok(windows_section(restore, file_history, onedrive, errors, now))
}

struct RestorePoints {
    enabled: Option<bool>,
    count: Option<usize>,
    latest: Option<OffsetDateTime>,
}

fn restore_points(part: &serde_json::Map<String, Value>, errors: &mut Vec<String>) -> RestorePoints {
    let points: Option<Vec<OffsetDateTime>> = match part.get("Points") {
        Some(Value::Array(items)) => Some(items.iter().filter_map(psjson::date).collect()),
        Some(single @ Value::String(_)) => Some(psjson::date(single).into_iter().collect()),
        _ => None,
    };
    if let Some(why) = psjson::text(part, "PointsError") {
        errors.push(format!(
            "restore points: {} (the agent needs administrator rights to list them)",
            super::browser_extensions::browsers::capped(why.trim())
        ));
    }
    let policy_off = psjson::number(part, "PolicyDisabled") == Some(1);
    let interval = psjson::number(part, "SessionInterval");
    let enabled = if policy_off {
        Some(false)
    } else if let Some(interval) = interval {
        Some(interval > 0)
    } else if points.as_ref().is_some_and(|p| !p.is_empty()) {
        Some(true)
    } else {
        None
    };
    RestorePoints {
        enabled,
        count: points.as_ref().map(Vec::len),
        latest: points.as_ref().and_then(|p| p.iter().max().copied()),
    }
}

fn file_history(part: &serde_json::Map<String, Value>) -> Value {
    let state = psjson::text(part, "ServiceState").map(|s| s.to_ascii_lowercase());
    // With no user folders read, whether anyone set it up is unknown.
    let configured = match psjson::number(part, "Users") {
        Some(users) if users > 0 => psjson::number(part, "ConfiguredUsers").map(|n| n > 0),
        _ => None,
    };
    json!({ "service_state": state, "configured": configured })
}

fn windows_section(
    restore: RestorePoints,
    file_history: Value,
    onedrive: Value,
    errors: Vec<String>,
    now: OffsetDateTime,
) -> Section {
    let age_days = restore.latest.map(|at| (now - at).whole_days());
    let mut status = Status::Ok;
    let restore_text = match (restore.enabled, restore.count, restore.latest) {
        (Some(false), _, _) => {
            status = Status::Warn;
            "System Restore is off".to_owned()
        }
        (_, _, Some(latest)) => {
            if age_days.is_some_and(|d| d > MAX_AGE_DAYS) {
                status = Status::Warn;
            }
            format!("restore point {}", ago(now, latest))
        }
        (Some(true), Some(_), None) => "System Restore on, no restore points yet".to_owned(),
        (Some(true), None, None) => "System Restore on, restore points not readable".to_owned(),
        (None, None, None) => "System Restore state and restore points not readable".to_owned(),
        (None, Some(_), None) => "no System Restore settings and no restore points".to_owned(),
    };
    let mut parts = vec![restore_text];
    if file_history["configured"] == json!(true) {
        parts.push("File History set up".to_owned());
    }
    match (onedrive["installed"].as_bool(), onedrive["running"].as_bool()) {
        (_, Some(true)) => parts.push("OneDrive running".to_owned()),
        (Some(true), _) => parts.push("OneDrive installed, not running".to_owned()),
        _ => {}
    }
    super::section(
        status,
        parts.join("; "),
        json!({
            "known": true,
            "restore_points": {
                "enabled": restore.enabled,
                "count": restore.count,
                "latest": restore.latest.and_then(|at| super::format::rfc3339_from_unix(at.unix_timestamp())),
            },
            "file_history": file_history,
            "onedrive": onedrive,
            "errors": errors,
        }),
    )
}

/// "3h ago", "2d ago": how a person reads the age of a backup.
fn ago(now: OffsetDateTime, at: OffsetDateTime) -> String {
    let secs = (now - at).whole_seconds().max(0);
    match secs {
        s if s < 3600 => format!("{}m ago", s / 60),
        s if s < 86_400 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn the_query_reads_system_restore_file_history_and_onedrive() {
        let script = QUERY.script;
        for needle in [
            r"HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\SystemRestore",
            "RPSessionInterval",
            r"HKLM:\SOFTWARE\Policies\Microsoft\Windows NT\SystemRestore",
            "Get-ComputerRestorePoint",
            "ManagementDateTimeConverter",
            "Get-Service -Name fhsvc",
            r"FileHistory\Configuration\Config1.xml",
            "Get-Process -Name OneDrive",
            "ConvertTo-Json -InputObject $result -Compress -Depth 4",
        ] {
            assert!(script.contains(needle), "{needle}");
        }
        assert!(!script.contains("wbadmin"), "wbadmin is slow and not on client Windows");
    }

    fn out(stdout: &str) -> Output {
        Output::printed(stdout, "", true)
    }

    #[test]
    fn an_old_restore_point_warns_and_the_age_is_in_the_summary() {
        let now = datetime!(2026-06-05 00:00 UTC);
        let old = r#"{"RestorePoints":{"SessionInterval":1,"PolicyDisabled":null,"Points":["2026-04-01T08:00:00.0000000Z"],"PointsError":null},"FileHistory":{"ServiceState":"Stopped","Users":3,"ConfiguredUsers":0},"OneDrive":{"Installed":false,"Running":false}}"#;
        let got = parse(&out(old), now).unwrap();
        assert_eq!(got["status"], "warn");
        assert_eq!(got["summary"], "restore point 64d ago");
        assert_eq!(got["restore_points"]["latest"], "2026-04-01T08:00:00Z");
        assert_eq!(
            got["file_history"],
            json!({"service_state": "stopped", "configured": false})
        );
    }

    #[test]
    fn the_policy_turns_system_restore_off_whatever_the_interval() {
        let text = r#"{"RestorePoints":{"SessionInterval":1,"PolicyDisabled":1,"Points":[],"PointsError":null},"FileHistory":{},"OneDrive":{}}"#;
        let got = parse(&out(text), datetime!(2026-06-05 00:00 UTC)).unwrap();
        assert_eq!(got["restore_points"]["enabled"], false);
        assert_eq!(got["status"], "warn");
        assert_eq!(got["file_history"]["configured"], Value::Null);
    }
}
