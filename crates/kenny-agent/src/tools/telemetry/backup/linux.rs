//! The backup tools a Linux PC has set up, from their own files (see the parent module).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::super::browser_extensions::browsers::{capped, user_homes};
use super::super::files::{etc_root, read_small, read_text, root_from_env};
use super::super::format::rfc3339_from_unix;
use super::super::{Section, Status, section};
use super::{MAX_AGE_DAYS, ago};

/// Words in unit and cron file names or cron lines, and the tool each means. The
/// longer name goes first so `borgmatic` is not taken for `borg`.
const KEYWORDS: &[(&str, &str)] = &[
    ("borgmatic", "borgmatic"),
    ("borg", "borg"),
    ("restic", "restic"),
    ("rsnapshot", "rsnapshot"),
    ("timeshift", "timeshift"),
    ("snapper", "snapper"),
];
const CRON_FILES_MAX: usize = 200;
const CRON_CAP: u64 = 256 * 1024;
const MAX_DETAILS: usize = 5;

#[derive(Default)]
struct Tool {
    configured: bool,
    last_run: Option<i64>,
    details: Vec<String>,
}

#[derive(Default)]
struct Found(BTreeMap<&'static str, Tool>);

impl Found {
    fn note(&mut self, name: &'static str, configured: bool, last_run: Option<i64>, detail: String) {
        let tool = self.0.entry(name).or_default();
        tool.configured |= configured;
        tool.last_run = tool.last_run.max(last_run);
        if tool.details.len() < MAX_DETAILS && !tool.details.contains(&detail) {
            tool.details.push(detail);
        }
    }
}

pub(super) fn collect() -> Section {
    let homes = user_homes(&root_from_env("KENNY_HOME_ROOT", "/home"));
    probe_at(&etc_root(), Path::new("/"), &homes, OffsetDateTime::now_utc())
}

/// `etc` stands in for `/etc`, `fs` for `/` (snapshot folders, timer stamps).
fn probe_at(etc: &Path, fs_root: &Path, homes: &[(String, PathBuf)], now: OffsetDateTime) -> Section {
    let mut found = Found::default();
    timeshift(etc, fs_root, &mut found);
    snapper(etc, fs_root, &mut found);
    borgmatic(etc, &mut found);
    rsnapshot(etc, fs_root, &mut found);
    systemd_units(etc, fs_root, &mut found);
    cron_jobs(etc, &mut found);
    deja_dup(homes, &mut found);
    build(found, now)
}

fn timeshift(etc: &Path, fs_root: &Path, found: &mut Found) {
    let Ok((text, _)) = read_text(&etc.join("timeshift/timeshift.json"), CRON_CAP) else {
        return;
    };
    let Ok(config) = serde_json::from_str::<Value>(&text) else {
        found.note("timeshift", false, None, "timeshift.json is not JSON".to_owned());
        return;
    };
    let flag = |key: &str| config.get(key).and_then(Value::as_str) == Some("true");
    let device = config.get("backup_device_uuid").and_then(Value::as_str).unwrap_or("");
    if device.is_empty() {
        found.note(
            "timeshift",
            false,
            None,
            "installed, no backup device chosen".to_owned(),
        );
        return;
    }
    let mode = if flag("btrfs_mode") { "btrfs" } else { "rsync" };
    let schedule: Vec<&str> = ["hourly", "daily", "weekly", "monthly", "boot"]
        .into_iter()
        .filter(|level| flag(&format!("schedule_{level}")))
        .collect();
    let schedule = if schedule.is_empty() {
        "no schedule (manual snapshots only)".to_owned()
    } else {
        format!("scheduled {}", schedule.join(", "))
    };
    // Snapshots are on the backup device; they are readable here when that is the
    // root file system (or it is mounted at the usual place).
    let last = ["timeshift/snapshots", "timeshift-btrfs/snapshots"]
        .iter()
        .filter_map(|dir| newest_timeshift_snapshot(&fs_root.join(dir)))
        .max();
    found.note("timeshift", true, last, format!("{mode} mode, {schedule}"));
}

/// Snapshot folders are named `YYYY-MM-DD_HH-MM-SS` (local time), so the last in
/// order is the newest; its `info.json` has `created` in Unix seconds.
fn newest_timeshift_snapshot(dir: &Path) -> Option<i64> {
    let newest = sorted_names(dir).into_iter().next_back()?;
    let (text, _) = read_text(&dir.join(newest).join("info.json"), CRON_CAP).ok()?;
    let info: Value = serde_json::from_str(&text).ok()?;
    match info.get("created")? {
        Value::String(s) => s.trim().parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

fn snapper(etc: &Path, fs_root: &Path, found: &mut Found) {
    for name in sorted_names(&etc.join("snapper/configs")) {
        let Ok((text, _)) = read_text(&etc.join("snapper/configs").join(&name), CRON_CAP) else {
            continue;
        };
        let value = |key: &str| shell_value(&text, key);
        let subvolume = value("SUBVOLUME").unwrap_or_else(|| "/".to_owned());
        let timeline = value("TIMELINE_CREATE").as_deref() == Some("yes");
        let snapshots = fs_root.join(subvolume.trim_start_matches('/')).join(".snapshots");
        let last = newest_snapper_snapshot(&snapshots);
        let detail = format!(
            "config {} for {subvolume}, {}",
            capped(&name),
            if timeline { "hourly timeline" } else { "no timeline" }
        );
        found.note("snapper", true, last, detail);
    }
}

/// `KEY="value"` in a shell-style config file.
fn shell_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.trim().split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// The highest-numbered snapshot's `info.xml` `<date>` (UTC, `YYYY-MM-DD HH:MM:SS`).
fn newest_snapper_snapshot(dir: &Path) -> Option<i64> {
    let newest = sorted_names(dir)
        .into_iter()
        .filter_map(|n| n.parse::<u64>().ok())
        .max()?;
    let info = read_small(&dir.join(newest.to_string()).join("info.xml"))?;
    let date = info.split_once("<date>")?.1.split_once("</date>")?.0;
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    let at = time::PrimitiveDateTime::parse(date.trim(), format).ok()?;
    Some(at.assume_utc().unix_timestamp())
}

fn borgmatic(etc: &Path, found: &mut Found) {
    let mut configs: Vec<String> = Vec::new();
    if etc.join("borgmatic/config.yaml").is_file() {
        configs.push("/etc/borgmatic/config.yaml".to_owned());
    }
    for name in sorted_names(&etc.join("borgmatic.d")) {
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            configs.push(format!("/etc/borgmatic.d/{}", capped(&name)));
        }
    }
    if !configs.is_empty() {
        found.note("borgmatic", true, None, format!("configured in {}", configs.join(", ")));
    }
}

fn rsnapshot(etc: &Path, fs_root: &Path, found: &mut Found) {
    let Ok((text, _)) = read_text(&etc.join("rsnapshot.conf"), CRON_CAP) else {
        return;
    };
    let mut root = None;
    let mut levels = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        // Fields are separated by tabs, as rsnapshot requires.
        let fields: Vec<&str> = line.split('\t').filter(|f| !f.is_empty()).collect();
        match fields.as_slice() {
            ["snapshot_root", dir, ..] => root = Some(dir.trim().to_owned()),
            ["retain" | "interval", level, ..] => levels.push(level.trim().to_owned()),
            _ => {}
        }
    }
    let Some(root) = root else {
        found.note(
            "rsnapshot",
            false,
            None,
            "rsnapshot.conf has no snapshot_root".to_owned(),
        );
        return;
    };
    let snapshots = fs_root.join(root.trim_start_matches('/'));
    let last = levels
        .iter()
        .filter_map(|level| modified(&snapshots.join(format!("{level}.0"))))
        .max();
    let detail = format!("snapshots in {}, levels {}", capped(&root), levels.join(", "));
    found.note("rsnapshot", true, last, detail);
}

/// Units and timers the admin installed or enabled (`/etc/systemd/system`, its
/// `*.wants` folders) whose names say restic, borg, ...; a timer's last run is the
/// stamp systemd keeps for persistent timers.
fn systemd_units(etc: &Path, fs_root: &Path, found: &mut Found) {
    let system = etc.join("systemd/system");
    let mut units: Vec<String> = sorted_names(&system);
    for wants in units.clone().iter().filter(|n| n.ends_with(".wants")) {
        units.extend(sorted_names(&system.join(wants)));
    }
    units.retain(|n| n.ends_with(".timer") || n.ends_with(".service"));
    units.sort();
    units.dedup();
    let stamps = fs_root.join("var/lib/systemd/timers");
    for unit in units {
        let Some(tool) = tool_named(&unit) else { continue };
        let last = unit
            .ends_with(".timer")
            .then(|| modified(&stamps.join(format!("stamp-{unit}"))))
            .flatten();
        found.note(tool, true, last, format!("systemd unit {}", capped(&unit)));
    }
}

fn cron_jobs(etc: &Path, found: &mut Found) {
    let mut files = vec![etc.join("crontab")];
    for dir in ["cron.d", "cron.hourly", "cron.daily", "cron.weekly", "cron.monthly"] {
        files.extend(sorted_names(&etc.join(dir)).into_iter().map(|n| etc.join(dir).join(n)));
    }
    for path in files.into_iter().take(CRON_FILES_MAX) {
        let Ok((text, _)) = read_text(&path, CRON_CAP) else {
            continue;
        };
        let shown = path
            .strip_prefix(etc)
            .map_or_else(|_| path.clone(), |p| Path::new("/etc").join(p));
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            if let Some(tool) = tool_named(line) {
                found.note(
                    tool,
                    true,
                    None,
                    format!("cron job in {}", capped(&shown.to_string_lossy())),
                );
            }
        }
    }
}

/// deja-dup keeps its settings in dconf (binary, per user); its cache folder exists once
/// it has run for that user.
fn deja_dup(homes: &[(String, PathBuf)], found: &mut Found) {
    for (user, home) in homes {
        if home.join(".cache/deja-dup").is_dir() {
            found.note("deja-dup", true, None, format!("used by {}", capped(user)));
        }
    }
}

fn tool_named(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    KEYWORDS
        .iter()
        .find(|(word, _)| lower.contains(word))
        .map(|(_, tool)| *tool)
}

fn sorted_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .take(10_000)
        .collect();
    names.sort();
    names
}

fn modified(path: &Path) -> Option<i64> {
    let at = fs::metadata(path).ok()?.modified().ok()?;
    i64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_secs()).ok()
}

fn build(found: Found, now: OffsetDateTime) -> Section {
    let tools: Vec<Value> = found
        .0
        .iter()
        .map(|(name, tool)| {
            json!({
                "name": name,
                "configured": tool.configured,
                "last_run": tool.last_run.and_then(rfc3339_from_unix),
                "detail": tool.details.join("; "),
            })
        })
        .collect();
    let configured: Vec<(&str, &Tool)> = found
        .0
        .iter()
        .filter(|(_, t)| t.configured)
        .map(|(n, t)| (*n, t))
        .collect();
    if configured.is_empty() {
        let (summary, reason) = if found.0.is_empty() {
            (
                "no backup tool found".to_owned(),
                "none of timeshift, snapper, borgmatic, borg, restic, rsnapshot or deja-dup is set up here",
            )
        } else {
            let names: Vec<&str> = found.0.keys().copied().collect();
            (
                format!("backup tools present but not set up: {}", names.join(", ")),
                "a backup tool is installed but has no backup configured",
            )
        };
        return section(
            Status::Ok,
            summary,
            json!({"known": false, "status_reason": reason, "tools": tools}),
        );
    }
    let newest = configured.iter().filter_map(|(_, t)| t.last_run).max();
    let stale = newest.is_some_and(|at| now.unix_timestamp() - at > MAX_AGE_DAYS * 86_400);
    let names: Vec<&str> = configured.iter().map(|(n, _)| *n).collect();
    let when = match newest.and_then(|at| OffsetDateTime::from_unix_timestamp(at).ok()) {
        Some(at) => format!("last run {}", ago(now, at)),
        None => "last run unknown".to_owned(),
    };
    section(
        if stale { Status::Warn } else { Status::Ok },
        format!("{}: {when}", names.join(", ")),
        json!({"known": true, "tools": tools}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::telemetry::files::put;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-06-05 00:00 UTC);

    fn set_mtime(path: &Path, unix: i64) {
        let at = UNIX_EPOCH + std::time::Duration::from_secs(unix as u64);
        fs::File::options()
            .write(true)
            .open(path)
            .or_else(|_| fs::File::open(path))
            .unwrap()
            .set_modified(at)
            .unwrap();
    }

    #[test]
    fn nothing_set_up_is_ok_and_unknown_with_the_reason() {
        let root = tempfile::tempdir().unwrap();
        let got = probe_at(&root.path().join("etc"), root.path(), &[], NOW);
        assert_eq!(
            Value::Object(got),
            json!({"status": "ok", "summary": "no backup tool found", "known": false, "tools": [],
                   "status_reason": "none of timeshift, snapper, borgmatic, borg, restic, rsnapshot or deja-dup is set up here"})
        );
    }

    #[test]
    fn timeshift_without_a_device_is_present_but_not_set_up() {
        let root = tempfile::tempdir().unwrap();
        put(
            root.path(),
            "etc/timeshift/timeshift.json",
            br#"{"backup_device_uuid" : "", "do_first_run" : "true", "btrfs_mode" : "false", "schedule_daily" : "false"}"#,
        ).unwrap();
        let got = probe_at(&root.path().join("etc"), root.path(), &[], NOW);
        assert_eq!(got["summary"], "backup tools present but not set up: timeshift");
        assert_eq!(got["known"], false);
        assert_eq!(got["tools"][0]["configured"], false);
    }

    #[test]
    fn every_tool_is_found_with_its_last_run() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        put(
            r,
            "etc/timeshift/timeshift.json",
            br#"{
  "backup_device_uuid" : "3c1e5f2a-9b7d-4e6f-8a1b-2c3d4e5f6a7b",
  "parent_device_uuid" : "",
  "do_first_run" : "false",
  "btrfs_mode" : "false",
  "include_btrfs_home_for_backup" : "false",
  "stop_cron_emails" : "true",
  "schedule_monthly" : "false",
  "schedule_weekly" : "true",
  "schedule_daily" : "true",
  "schedule_hourly" : "false",
  "schedule_boot" : "false",
  "count_monthly" : "2",
  "count_weekly" : "3",
  "count_daily" : "5",
  "date_format" : "%Y-%m-%d %H:%M:%S",
  "exclude" : ["/root/**", "/home/alice/**"],
  "exclude-apps" : []
}"#,
        )
        .unwrap();
        put(
            r,
            "timeshift/snapshots/2026-06-03_22-00-01/info.json",
            br#"{"created" : "1780524001", "sys-uuid" : "x", "sys-distro" : "Linux Mint 22", "app-version" : "24.01.1", "tags" : "D", "comments" : ""}"#,
        ).unwrap();
        put(
            r,
            "timeshift/snapshots/2026-06-04_22-00-01/info.json",
            br#"{"created" : "1780610401", "sys-uuid" : "x", "sys-distro" : "Linux Mint 22", "app-version" : "24.01.1", "tags" : "D W", "comments" : ""}"#,
        ).unwrap();
        put(
            r,
            "etc/snapper/configs/root",
            b"# subvolume to snapshot\nSUBVOLUME=\"/\"\nFSTYPE=\"btrfs\"\nQGROUP=\"\"\nSPACE_LIMIT=\"0.5\"\nALLOW_USERS=\"\"\nTIMELINE_CREATE=\"yes\"\nTIMELINE_CLEANUP=\"yes\"\n",
        ).unwrap();
        for (num, date) in [(9, "2026-06-04 10:00:01"), (10, "2026-06-04 11:00:01")] {
            let xml = format!(
                "<?xml version=\"1.0\"?>\n<snapshot>\n  <type>single</type>\n  <num>{num}</num>\n  <date>{date}</date>\n  <description>timeline</description>\n  <cleanup>timeline</cleanup>\n</snapshot>\n"
            );
            put(r, &format!(".snapshots/{num}/info.xml"), xml.as_bytes()).unwrap();
        }
        put(
            r,
            "etc/borgmatic/config.yaml",
            b"source_directories:\n    - /home\nrepositories:\n    - path: ssh://backup@nas/./borg\n",
        )
        .unwrap();
        put(
            r,
            "etc/rsnapshot.conf",
            b"config_version\t1.2\nsnapshot_root\t/var/cache/rsnapshot/\n#retain\thourly\t6\nretain\tdaily\t7\nretain\tweekly\t4\n",
        ).unwrap();
        put(r, "var/cache/rsnapshot/daily.0/marker", b"").unwrap();
        set_mtime(&r.join("var/cache/rsnapshot/daily.0"), 1_780_570_800);
        put(
            r,
            "etc/systemd/system/restic-backup.service",
            b"[Service]\nExecStart=/usr/bin/restic backup /home\n",
        )
        .unwrap();
        put(
            r,
            "etc/systemd/system/restic-backup.timer",
            b"[Timer]\nOnCalendar=daily\nPersistent=true\n",
        )
        .unwrap();
        put(r, "etc/systemd/system/timers.target.wants/restic-backup.timer", b"").unwrap();
        put(r, "etc/systemd/system/timers.target.wants/snapper-timeline.timer", b"").unwrap();
        put(r, "var/lib/systemd/timers/stamp-restic-backup.timer", b"").unwrap();
        set_mtime(
            &r.join("var/lib/systemd/timers/stamp-restic-backup.timer"),
            1_780_531_200,
        );
        put(
            r,
            "etc/cron.d/borg",
            b"# nightly\n30 2 * * * root /usr/local/bin/borg create ::{now} /srv\n",
        )
        .unwrap();
        put(r, "etc/cron.d/e2scrub_all", b"30 3 * * 0 root test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron\n").unwrap();
        put(r, "home/alice/.cache/deja-dup/metadata", b"").unwrap();
        let homes = user_homes(&r.join("home"));
        let got = Value::Object(probe_at(&r.join("etc"), r, &homes, NOW));
        assert_eq!(
            got,
            json!({
                "status": "ok",
                "summary": "borg, borgmatic, deja-dup, restic, rsnapshot, snapper, timeshift: last run 1h ago",
                "known": true,
                "tools": [
                    {"name": "borg", "configured": true, "last_run": null, "detail": "cron job in /etc/cron.d/borg"},
                    {"name": "borgmatic", "configured": true, "last_run": null, "detail": "configured in /etc/borgmatic/config.yaml"},
                    {"name": "deja-dup", "configured": true, "last_run": null, "detail": "used by alice"},
                    {"name": "restic", "configured": true, "last_run": "2026-06-04T00:00:00Z",
                     "detail": "systemd unit restic-backup.service; systemd unit restic-backup.timer"},
                    {"name": "rsnapshot", "configured": true, "last_run": "2026-06-04T11:00:00Z",
                     "detail": "snapshots in /var/cache/rsnapshot/, levels daily, weekly"},
                    {"name": "snapper", "configured": true, "last_run": "2026-06-04T11:00:01Z",
                     "detail": "config root for /, hourly timeline; systemd unit snapper-timeline.timer"},
                    {"name": "timeshift", "configured": true, "last_run": "2026-06-04T22:00:01Z",
                     "detail": "rsync mode, scheduled daily, weekly"}
                ]
            }),
            "{got:#}"
        );
    }

    #[test]
    fn an_old_last_run_warns() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        put(
            r,
            "etc/snapper/configs/home",
            b"SUBVOLUME=\"/home\"\nTIMELINE_CREATE=\"no\"\n",
        )
        .unwrap();
        put(
            r,
            "home/.snapshots/3/info.xml",
            b"<?xml version=\"1.0\"?>\n<snapshot>\n  <num>3</num>\n  <date>2026-03-01 08:00:00</date>\n</snapshot>\n",
        )
        .unwrap();
        let got = probe_at(&r.join("etc"), r, &[], NOW);
        assert_eq!(got["status"], "warn");
        assert_eq!(got["summary"], "snapper: last run 95d ago");
        assert_eq!(got["tools"][0]["detail"], "config home for /home, no timeline");
    }

    #[test]
    fn the_real_probe_runs_here() {
        let got = collect();
        assert!(["ok", "warn"].contains(&got["status"].as_str().unwrap()), "{got:?}");
        assert!(got["known"].is_boolean() && got["tools"].is_array(), "{got:?}");
    }
}
