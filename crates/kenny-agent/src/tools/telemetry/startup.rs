//! The autostart section: what starts by itself with the PC or at logon.
//!
//! The listing is `tools::autostart`'s (the `diag_autostart` tool's): on Windows the Run
//! keys and Startup folders (Win32_StartupCommand) and scheduled tasks outside
//! `\Microsoft\` with a logon or boot trigger; on Linux enabled systemd units, XDG
//! autostart files and cron `@reboot` lines. This section bounds it and says for each
//! entry whether it is the machine's or one user's. It is informational: what belongs
//! there is the admin's call.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::Output;
use super::files::root_from_env;
use super::services::{capped, counted};
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, section as make_section};
use crate::tools::autostart::{Entry, WINDOWS_SCRIPT, linux_entries, parse_windows};

const MAX_LISTED: usize = 200;
const NAME_CHARS: usize = 200;
/// Command lines carry arguments; a little more room than names.
const COMMAND_CHARS: usize = 300;
const MAX_NOTES: usize = 10;

static QUERY: Query = Query {
    script: WINDOWS_SCRIPT,
    limit: Duration::from_secs(12),
    parse: parse_windows_output,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

pub(super) async fn section() -> Outcome {
    // The same root the diag_autostart tool reads, so tests and odd installs agree.
    let root = root_from_env("KENNY_AUTOSTART_ROOT", "/");
    let (entries, notes) = linux_entries(root).await.map_err(|e| e.message)?;
    Ok(build(entries, notes))
}

fn parse_windows_output(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let (entries, notes) = parse_windows(&value.to_string())?;
    Ok(build(entries, notes))
}

/// `user` for what starts for one account only (a user's Run key, Startup folder,
/// autostart folder or crontab), `system` for what starts for everyone.
fn scope(entry: &Entry) -> &'static str {
    let per_user = match entry.kind {
        "startup" => entry.location.starts_with("HKU\\") || entry.location == "Startup",
        "xdg" => entry.user.is_some(),
        "cron" => entry.location.contains("/var/spool/cron"),
        _ => false,
    };
    if per_user { "user" } else { "system" }
}

fn kind_label(kind: &str, n: usize) -> String {
    let (one, many) = match kind {
        "startup" => ("startup command", "startup commands"),
        "scheduled_task" => ("scheduled task", "scheduled tasks"),
        "systemd" => ("systemd unit", "systemd units"),
        "xdg" => ("XDG autostart entry", "XDG autostart entries"),
        "cron" => ("cron @reboot line", "cron @reboot lines"),
        other => (other, other),
    };
    counted(n, one, many)
}

fn build(entries: Vec<Entry>, notes: Vec<String>) -> Section {
    let count = entries.len();
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &entries {
        *by_kind.entry(entry.kind).or_default() += 1;
    }
    let summary = if count == 0 {
        "nothing starts by itself".to_owned()
    } else {
        let parts: Vec<String> = by_kind.iter().map(|(kind, n)| kind_label(kind, *n)).collect();
        let verb = if count == 1 {
            "starts by itself"
        } else {
            "start by themselves"
        };
        format!("{} {verb}: {}", counted(count, "entry", "entries"), parts.join(", "))
    };
    let listed: Vec<Value> = entries.iter().take(MAX_LISTED).map(entry_json).collect();
    let mut fields = json!({
        "entries": listed,
        "count": count,
        "truncated": count > MAX_LISTED,
    });
    if !notes.is_empty() {
        let notes: Vec<String> = notes.iter().take(MAX_NOTES).map(|n| capped(n, COMMAND_CHARS)).collect();
        fields["notes"] = json!(notes);
    }
    make_section(Status::Ok, summary, fields)
}

fn entry_json(entry: &Entry) -> Value {
    json!({
        "name": capped(&entry.name, NAME_CHARS),
        "command": entry.command.as_deref().map(|c| capped(c, COMMAND_CHARS)),
        "location": capped(&entry.location, NAME_CHARS),
        "scope": scope(entry),
        "enabled": entry.enabled,
        "kind": entry.kind,
        "user": entry.user.as_deref().map(|u| capped(u, NAME_CHARS)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn entry(kind: &'static str, name: &str, location: &str, user: Option<&str>) -> Entry {
        Entry {
            kind,
            name: name.to_owned(),
            command: Some(format!("/usr/bin/{name} --start")),
            location: location.to_owned(),
            enabled: Some(true),
            user: user.map(str::to_owned),
            extra: Map::new(),
        }
    }

    #[test]
    fn linux_entries_with_their_scope() {
        let entries = vec![
            entry(
                "systemd",
                "ssh.service",
                "/lib/systemd/system/ssh.service",
                Some("root"),
            ),
            entry(
                "xdg",
                "Nextcloud",
                "/home/kim/.config/autostart/nextcloud.desktop",
                Some("kim"),
            ),
            entry(
                "xdg",
                "Print Queue Applet",
                "/etc/xdg/autostart/print-applet.desktop",
                None,
            ),
            entry("cron", "backup.sh", "/var/spool/cron/crontabs/kim", Some("kim")),
            entry("cron", "mount-nas", "/etc/cron.d/nas", Some("root")),
        ];
        let section = build(entries, vec!["cannot list /home/x: denied".into()]);
        assert_eq!(section["status"], "ok");
        assert_eq!(
            section["summary"],
            "5 entries start by themselves: 2 cron @reboot lines, 1 systemd unit, 2 XDG autostart entries"
        );
        let scopes: Vec<&str> = section["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["scope"].as_str().unwrap())
            .collect();
        assert_eq!(scopes, ["system", "user", "system", "user", "system"]);
        assert_eq!(
            section["entries"][1],
            json!({"name": "Nextcloud", "command": "/usr/bin/Nextcloud --start",
                   "location": "/home/kim/.config/autostart/nextcloud.desktop", "scope": "user",
                   "enabled": true, "kind": "xdg", "user": "kim"})
        );
        assert_eq!(section["notes"], json!(["cannot list /home/x: denied"]));
    }

    #[test]
    fn nothing_and_too_much() {
        let none = build(Vec::new(), Vec::new());
        assert_eq!(none["summary"], "nothing starts by itself");
        assert_eq!(none["count"], 0);
        assert!(none.get("notes").is_none());
        let long = "x".repeat(1000);
        let many: Vec<Entry> = (0..MAX_LISTED + 3)
            .map(|i| entry("systemd", &format!("{long}{i}"), "/etc/systemd/system", None))
            .collect();
        let many = build(many, Vec::new());
        assert_eq!(many["count"], MAX_LISTED + 3);
        assert_eq!(many["truncated"], true);
        let listed = many["entries"].as_array().unwrap();
        assert_eq!(listed.len(), MAX_LISTED);
        assert_eq!(listed[0]["name"].as_str().unwrap().chars().count(), NAME_CHARS);
        assert_eq!(listed[0]["command"].as_str().unwrap().chars().count(), COMMAND_CHARS);
    }

    #[test]
    fn the_windows_query_is_the_diag_autostart_script() {
        let script = windows_query().unwrap().script;
        assert!(script.contains("Get-CimInstance -ClassName Win32_StartupCommand"));
        assert!(script.contains("Get-ScheduledTask"));
        assert!(script.contains(r"-notlike '\Microsoft\*'"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_fake_root_and_this_machine() {
        let root = tempfile::tempdir().unwrap();
        let autostart = root.path().join("etc/xdg/autostart");
        std::fs::create_dir_all(&autostart).unwrap();
        std::fs::write(
            autostart.join("tray.desktop"),
            "[Desktop Entry]\nName=Tray\nExec=/usr/bin/tray\n",
        )
        .unwrap();
        let (entries, _) = linux_entries(root.path().to_path_buf()).await.unwrap();
        let section = build(entries, Vec::new());
        let tray = section["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "Tray")
            .cloned();
        assert_eq!(
            tray.map(|e| (e["command"].clone(), e["scope"].clone())),
            Some((json!("/usr/bin/tray"), json!("system")))
        );

        let real = super::section().await.unwrap();
        assert_eq!(real["status"], "ok");
        assert!(real["count"].is_u64() && real["entries"].is_array(), "{real:?}");
    }
}
