//! The reliability section: crashes and error/critical events of the last 7 days, grouped, with Windows' stability index.
//!
//! Windows: the latest `SystemStabilityIndex` of Win32_ReliabilityStabilityMetrics (1 to
//! 10; null when the Reliability Monitor records nothing, as on servers), and the
//! critical and error events of the System and Application logs grouped by source and
//! event id (`Get-WinEvent`). Crashes are the events that mean one: an application crash
//! or hang, a blue screen, a reboot without a clean shutdown.
//!
//! Linux: the journal's messages of priority 0..3 (`journalctl`), grouped by unit or
//! program; crashes are systemd-coredump's "dumped core" messages and kernel oopses and
//! panics. Ubuntu's apport reports in /var/crash count as crashes too, and without a
//! journal the core files systemd-coredump left in /var/lib/systemd/coredump do.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, RunError, first_line};
use super::format::{one_decimal, rfc3339_from_unix, ymd};
use super::services::{capped, counted};
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, section as make_section};
use crate::tools::eventlog::{JOURNAL_DIRS, has_journal_files, journal_entry, journal_field, severity_name};
use crate::tools::psjson;

const WINDOW_DAYS: i64 = 7;
/// Groups listed; the rest are counted.
const MAX_LISTED: usize = 50;
const SAMPLE_CHARS: usize = 200;
const SOURCE_CHARS: usize = 120;
/// This many crashes in a week is more than bad luck.
const CRASH_WARN: u64 = 5;
/// Below this, Windows itself calls the PC unstable in Reliability Monitor.
const INDEX_WARN: f64 = 5.0;
/// The most recent journal entries read; a week with more is a noisy PC, which the
/// count already says.
const JOURNAL_LINES: usize = 5000;
const JOURNAL_TIMEOUT: Duration = Duration::from_secs(8);
const MAX_FILES: usize = 1000;

/// (source, event id) pairs that are a crash.
const WINDOWS_CRASHES: &[(&str, i64)] = &[
    ("Application Error", 1000),
    ("Application Hang", 1002),
    (".NET Runtime", 1026),
    ("Microsoft-Windows-WER-SystemErrorReporting", 1001),
    ("Microsoft-Windows-Kernel-Power", 41),
];

static QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$since = (Get-Date).AddDays(-7)
$index = $null
$indexTime = $null
$indexError = $null
try {
  $dmtf = [Management.ManagementDateTimeConverter]::ToDmtfDateTime($since)
  $latest = Get-CimInstance -ClassName Win32_ReliabilityStabilityMetrics -Filter "TimeGenerated > '$dmtf'" |
    Sort-Object TimeGenerated -Descending | Select-Object -First 1
  if ($latest) { $index = $latest.SystemStabilityIndex; $indexTime = $latest.TimeGenerated }
} catch {
  $indexError = $_.Exception.Message
}
$events = @()
try {
  $events = @(Get-WinEvent -FilterHashtable @{ LogName = 'System','Application'; Level = 1,2; StartTime = $since } -MaxEvents 1000)
} catch {
  if ($_.FullyQualifiedErrorId -notlike 'NoMatchingEventsFound*') { throw }
}
$all = @($events | Group-Object ProviderName, Id | Sort-Object Count -Descending)
$groups = @($all | Select-Object -First 50 | ForEach-Object {
  $newest = $_.Group[0]
  $message = [string]$newest.Message
  if ($message.Length -gt 300) { $message = $message.Substring(0, 300) }
  [pscustomobject]@{
    Source = $newest.ProviderName
    EventId = $newest.Id
    Level = [int]$newest.Level
    Count = $_.Count
    LastSeen = $newest.TimeCreated
    Sample = $message
    Days = @($_.Group | Group-Object { $_.TimeCreated.ToUniversalTime().ToString('yyyy-MM-dd', [Globalization.CultureInfo]::InvariantCulture) } |
      ForEach-Object { [pscustomobject]@{ Day = $_.Name; Count = $_.Count } })
  }
})
[pscustomobject]@{
  StabilityIndex = $index; IndexTime = $indexTime; IndexError = $indexError
  Total = $events.Count; Capped = ($events.Count -ge 1000); GroupCount = $all.Count; Groups = $groups
} | ConvertTo-Json -Compress -Depth 5
"#,
    limit: Duration::from_secs(12),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

/// Events of one source (and event id, on Windows) in the window.
#[derive(Debug, Clone, PartialEq)]
struct Group {
    source: String,
    event_id: Option<i64>,
    level: String,
    count: u64,
    sample: String,
    last_seen: i64,
    by_day: BTreeMap<String, u64>,
    crash: bool,
}

impl Group {
    fn to_json(&self) -> Value {
        json!({
            "source": capped(&self.source, SOURCE_CHARS),
            "event_id": self.event_id,
            "level": self.level,
            "count": self.count,
            "sample": capped(&self.sample.split_whitespace().collect::<Vec<_>>().join(" "), SAMPLE_CHARS),
            "last_seen": rfc3339_from_unix(self.last_seen),
            "by_day": self.by_day,
            "crash": self.crash,
        })
    }
}

/// What one collection found, before it becomes a section.
#[derive(Debug, Default)]
struct Found {
    stability_index: Option<f64>,
    groups: Vec<Group>,
    /// Every event counted, including groups past the list.
    total: u64,
    /// More groups than listed, or the source stopped at its own cap.
    truncated: bool,
    notes: Vec<String>,
}

// ---- Windows ----

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Some(reply) = psjson::rows_of(value)?.into_iter().next() else {
        return Err("PowerShell printed nothing for the reliability query".to_owned());
    };
    let groups: Vec<Group> = psjson::rows_of(reply.get("Groups").cloned().unwrap_or(Value::Null))?
        .iter()
        .filter_map(windows_group)
        .collect();
    let mut notes = Vec::new();
    if let Some(error) = psjson::text(&reply, "IndexError") {
        notes.push(format!(
            "the stability index could not be read: {}",
            capped(&error, SAMPLE_CHARS)
        ));
    }
    let stability_index = reply.get("StabilityIndex").and_then(Value::as_f64).map(one_decimal);
    if stability_index.is_none() && notes.is_empty() {
        notes.push(
            "Reliability Monitor recorded no stability index this week (its RAC task is off, as on servers)".to_owned(),
        );
    }
    let listed_groups = groups.len();
    let group_count = count_of(&reply, "GroupCount").unwrap_or(listed_groups as u64);
    let capped_at_source = reply.get("Capped").and_then(Value::as_bool).unwrap_or(false);
    Ok(build(Found {
        stability_index,
        total: count_of(&reply, "Total").unwrap_or(0),
        truncated: capped_at_source || group_count > listed_groups as u64,
        groups,
        notes,
    }))
}

fn count_of(row: &Map<String, Value>, key: &str) -> Option<u64> {
    psjson::number(row, key).and_then(|n| u64::try_from(n).ok())
}

fn windows_group(row: &Map<String, Value>) -> Option<Group> {
    let source = psjson::text(row, "Source")?;
    let event_id = psjson::number(row, "EventId");
    let level = match psjson::number(row, "Level") {
        Some(1) => "critical",
        _ => "error",
    };
    let by_day: BTreeMap<String, u64> = psjson::rows_of(row.get("Days").cloned().unwrap_or(Value::Null))
        .unwrap_or_default()
        .iter()
        .filter_map(|day| Some((psjson::text(day, "Day")?, count_of(day, "Count")?)))
        .collect();
    let crash = event_id.is_some_and(|id| WINDOWS_CRASHES.iter().any(|(s, i)| *s == source && *i == id));
    Some(Group {
        event_id,
        level: level.to_owned(),
        count: count_of(row, "Count").unwrap_or(1),
        sample: psjson::text(row, "Sample").unwrap_or_default(),
        last_seen: row
            .get("LastSeen")
            .and_then(psjson::date)
            .map_or(0, |at| at.unix_timestamp()),
        by_day,
        crash,
        source,
    })
}

// ---- Linux ----

pub(super) async fn section() -> Outcome {
    let now = OffsetDateTime::now_utc();
    let since = now.unix_timestamp() - WINDOW_DAYS * 86_400;
    let mut found = Found::default();
    let mut groups: HashMap<String, Group> = HashMap::new();
    match journal(since).await {
        Ok(Some((text, cut))) => {
            for fields in text
                .lines()
                .filter_map(|l| serde_json::from_str::<Map<String, Value>>(l).ok())
            {
                add_journal_entry(&mut groups, &fields);
            }
            found.truncated |= cut;
        }
        Ok(None) => {
            found.notes.push(
                "the systemd journal has no files on this PC: error messages and kernel problems are not counted"
                    .to_owned(),
            );
            core_files(Path::new("/var/lib/systemd/coredump"), since, &mut groups);
        }
        Err(e) => found.notes.push(format!("the journal could not be read: {e}")),
    }
    apport_reports(Path::new("/var/crash"), since, &mut groups, &mut found.notes);
    found.groups = groups.into_values().collect();
    found.total = found.groups.iter().map(|g| g.count).sum();
    Ok(build(found))
}

/// The journal's priority 0..3 entries since `since` as JSON lines, and whether the
/// answer was cut; `None` when there is no journal to ask.
async fn journal(since: i64) -> Result<Option<(String, bool)>, String> {
    if !JOURNAL_DIRS.iter().any(|dir| has_journal_files(Path::new(dir))) {
        return Ok(None);
    }
    let since_arg = format!("--since=@{since}");
    let lines_arg = format!("--lines={JOURNAL_LINES}");
    let args = [
        "--output=json",
        "--no-pager",
        "--quiet",
        "--priority=0..3",
        since_arg.as_str(),
        lines_arg.as_str(),
        "--output-fields=MESSAGE,PRIORITY,SYSLOG_IDENTIFIER,_SYSTEMD_UNIT,UNIT,_COMM,_TRANSPORT,COREDUMP_EXE,COREDUMP_COMM",
    ];
    let output = match command::run("journalctl", &args, JOURNAL_TIMEOUT).await {
        Ok(output) => output,
        Err(RunError::Missing) => return Ok(None),
        Err(e) => return Err(e.describe("journalctl")),
    };
    if !output.success {
        return Err(format!("journalctl failed: {}", first_line(&output)));
    }
    let cut = output.truncated || output.stdout.lines().count() >= JOURNAL_LINES;
    Ok(Some((output.stdout, cut)))
}

fn add_journal_entry(groups: &mut HashMap<String, Group>, fields: &Map<String, Value>) {
    let entry = journal_entry(fields);
    let Some(time) = entry.time else { return };
    // Any user can log with any SYSLOG_IDENTIFIER (`logger -t kernel`); journald's own
    // fields say who really wrote the line: the coredump helper's process name (cut to
    // 15 characters by the kernel), or the kernel transport.
    let from_coredump = journal_field(fields, "_COMM").is_some_and(|c| c.starts_with("systemd-coredum"));
    let from_kernel = journal_field(fields, "_TRANSPORT").as_deref() == Some("kernel");
    let coredump = from_coredump && entry.message.contains("dumped core");
    let kernel_crash = from_kernel && is_kernel_crash(&entry.message);
    let source = if coredump {
        // Grouped by the program that crashed, not by the coredump helper's instance.
        journal_field(fields, "COREDUMP_EXE")
            .or_else(|| journal_field(fields, "COREDUMP_COMM"))
            .unwrap_or_else(|| "unknown program".to_owned())
    } else if from_kernel {
        "kernel".to_owned()
    } else {
        entry.unit.clone().unwrap_or_else(|| "unknown".to_owned())
    };
    let level = severity_name(entry.severity.unwrap_or(3));
    add(
        groups,
        source,
        level,
        time.unix_timestamp(),
        &entry.message,
        coredump || kernel_crash,
    );
}

fn is_kernel_crash(message: &str) -> bool {
    [
        "Oops",
        "Kernel panic",
        "BUG: ",
        "general protection fault",
        "Call Trace",
    ]
    .iter()
    .any(|marker| message.contains(marker))
}

fn add(groups: &mut HashMap<String, Group>, source: String, level: &str, at: i64, message: &str, crash: bool) {
    let day = OffsetDateTime::from_unix_timestamp(at).map_or_else(|_| "unknown".to_owned(), |t| ymd(t.date()));
    let key = format!("{source}\u{0}{crash}");
    let group = groups.entry(key).or_insert_with(|| Group {
        source,
        event_id: None,
        level: level.to_owned(),
        count: 0,
        sample: String::new(),
        last_seen: i64::MIN,
        by_day: BTreeMap::new(),
        crash,
    });
    group.count += 1;
    *group.by_day.entry(day).or_default() += 1;
    if at >= group.last_seen {
        group.last_seen = at;
        group.sample = message.to_owned();
    }
    if severity_rank(level) < severity_rank(&group.level) {
        group.level = level.to_owned();
    }
}

fn severity_rank(level: &str) -> u8 {
    match level {
        "emergency" => 0,
        "alert" => 1,
        "critical" => 2,
        _ => 3,
    }
}

/// Apport's reports: `/var/crash/_usr_bin_gnome-shell.1000.crash`, one per program (a
/// new crash overwrites it), dated by the file.
fn apport_reports(dir: &Path, since: i64, groups: &mut HashMap<String, Group>, notes: &mut Vec<String>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            notes.push(format!("cannot list {}: {e}", dir.display()));
            return;
        }
    };
    for entry in entries.flatten().take(MAX_FILES) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".crash") else {
            continue;
        };
        let Some(at) = modified(&entry.path()).filter(|&at| at >= since) else {
            continue;
        };
        let program = stem
            .rsplit_once('.')
            .map_or(stem, |(path, _uid)| path)
            .replace('_', "/");
        let message = format!("apport crash report {}", entry.path().display());
        add(groups, program, "critical", at, &message, true);
    }
}

/// systemd-coredump's files: `core.<comm>.<uid>.<boot id>.<pid>.<usec>[.zst|.xz|.lz4]`.
fn core_files(dir: &Path, since: i64, groups: &mut HashMap<String, Group>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten().take(MAX_FILES) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((comm, at)) = parse_core_name(&name) else {
            continue;
        };
        if at >= since {
            add(
                groups,
                comm.clone(),
                "critical",
                at,
                &format!("{comm} dumped core"),
                true,
            );
        }
    }
}

fn parse_core_name(name: &str) -> Option<(String, i64)> {
    let rest = name.strip_prefix("core.")?;
    let rest = ["zst", "xz", "lz4"]
        .iter()
        .find_map(|ext| rest.strip_suffix(&format!(".{ext}")))
        .unwrap_or(rest);
    let mut parts = rest.rsplitn(5, '.');
    let usec: i64 = parts.next()?.parse().ok()?;
    let _pid: u64 = parts.next()?.parse().ok()?;
    let _boot_id = parts.next()?;
    let _uid: u64 = parts.next()?.parse().ok()?;
    let comm = parts.next()?.to_owned();
    Some((comm, usec / 1_000_000))
}

fn modified(path: &Path) -> Option<i64> {
    let at = std::fs::metadata(path).ok()?.modified().ok()?;
    let secs = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok()
}

// ---- both ----

fn build(mut found: Found) -> Section {
    // Crashes first, then the most frequent, then the most recent.
    found
        .groups
        .sort_by_key(|g| std::cmp::Reverse((g.crash, g.count, g.last_seen)));
    // Crash groups are few and frequent, so the groups the Windows query keeps (the 50
    // most frequent) hold them all unless the week had more than 50 kinds of errors.
    let crashes: u64 = found.groups.iter().filter(|g| g.crash).map(|g| g.count).sum();
    let crashed = counted(usize::try_from(crashes).unwrap_or(usize::MAX), "crash", "crashes");
    let events = counted(
        usize::try_from(found.total).unwrap_or(usize::MAX),
        "error/critical event",
        "error/critical events",
    );
    let index = found
        .stability_index
        .map(|i| format!("stability index {i:.1}; "))
        .unwrap_or_default();
    let summary = format!("{index}{crashed}, {events} in {WINDOW_DAYS} days");
    let unstable = found.stability_index.is_some_and(|i| i < INDEX_WARN);
    let status = if crashes >= CRASH_WARN || unstable {
        Status::Warn
    } else {
        Status::Ok
    };
    let truncated = found.truncated || found.groups.len() > MAX_LISTED;
    let listed: Vec<Value> = found.groups.iter().take(MAX_LISTED).map(Group::to_json).collect();
    let mut fields = json!({
        "stability_index": found.stability_index,
        "recent_crashes": crashes,
        "total_events": found.total,
        "window_days": WINDOW_DAYS,
        "events": listed,
        "truncated": truncated,
    });
    if !found.notes.is_empty() {
        fields["notes"] = json!(found.notes);
    }
    make_section(status, summary, fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-06-05 00:00:00 UTC);

    // `journalctl --output=json --output-fields=...` lines (systemd 252): a crash, a
    // failing unit twice, a kernel oops and a line cut at the output cap.
    const JOURNAL: &str = r#"{"__REALTIME_TIMESTAMP":"1780480000000000","PRIORITY":"2","SYSLOG_IDENTIFIER":"systemd-coredump","_SYSTEMD_UNIT":"systemd-coredump@0-4242-0.service","_COMM":"systemd-coredum","COREDUMP_EXE":"/usr/bin/gnome-shell","COREDUMP_COMM":"gnome-shell","MESSAGE":"Process 4242 (gnome-shell) of user 1000 dumped core.\n\nStack trace of thread 4242:\n#0  0x00007f g_assertion_message (libglib-2.0.so.0)"}
{"__REALTIME_TIMESTAMP":"1780500000000000","PRIORITY":"3","SYSLOG_IDENTIFIER":"systemd","_SYSTEMD_UNIT":"init.scope","UNIT":"backup.service","_COMM":"systemd","MESSAGE":"Failed to start backup.service - Nightly backup."}
{"__REALTIME_TIMESTAMP":"1780590000000000","PRIORITY":"3","SYSLOG_IDENTIFIER":"systemd","_SYSTEMD_UNIT":"init.scope","UNIT":"backup.service","_COMM":"systemd","MESSAGE":"Failed to start backup.service - Nightly backup (again)."}
{"__REALTIME_TIMESTAMP":"1780595000000000","PRIORITY":"0","SYSLOG_IDENTIFIER":"kernel","_TRANSPORT":"kernel","MESSAGE":"Oops: 0000 [#1] PREEMPT SMP NOPTI"}
{"__REALTIME_TIMESTAMP":"178059"#;

    fn grouped(text: &str) -> Vec<Group> {
        let mut groups = HashMap::new();
        for fields in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Map<String, Value>>(l).ok())
        {
            add_journal_entry(&mut groups, &fields);
        }
        groups.into_values().collect()
    }

    #[test]
    fn crashes_a_user_logs_under_a_borrowed_name_are_not_crashes() {
        // `logger -t kernel "Oops"` and `logger -t systemd-coredump "... dumped core"`.
        const FORGED: &str = r#"{"__REALTIME_TIMESTAMP":"1780596000000000","PRIORITY":"0","SYSLOG_IDENTIFIER":"kernel","_TRANSPORT":"syslog","_COMM":"logger","MESSAGE":"Oops: 0000 [#2] forged"}
{"__REALTIME_TIMESTAMP":"1780597000000000","PRIORITY":"2","SYSLOG_IDENTIFIER":"systemd-coredump","_TRANSPORT":"syslog","_COMM":"logger","MESSAGE":"Process 1 (forged) of user 1000 dumped core."}"#;
        let groups = grouped(FORGED);
        assert_eq!(groups.iter().map(|g| g.count).sum::<u64>(), 2, "still error events");
        assert!(groups.iter().all(|g| !g.crash), "but not crashes");
    }

    #[test]
    fn journal_entries_grouped_with_crashes_first() {
        let groups = grouped(JOURNAL);
        let found = Found {
            total: groups.iter().map(|g| g.count).sum(),
            groups,
            ..Found::default()
        };
        let section = build(found);
        assert_eq!(section["status"], "ok");
        assert_eq!(section["summary"], "2 crashes, 4 error/critical events in 7 days");
        assert_eq!(section["stability_index"], Value::Null);
        assert_eq!(section["window_days"], 7);
        let events = section["events"].as_array().unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0]["source"], "kernel");
        assert_eq!(events[0]["level"], "emergency");
        assert_eq!(
            events[1],
            json!({"source": "/usr/bin/gnome-shell", "event_id": null, "level": "critical", "count": 1,
                   "sample": "Process 4242 (gnome-shell) of user 1000 dumped core. Stack trace of thread 4242: #0 0x00007f g_assertion_message (libglib-2.0.so.0)",
                   "last_seen": "2026-06-03T09:46:40Z", "by_day": {"2026-06-03": 1}, "crash": true})
        );
        assert_eq!(
            (
                events[2]["source"].as_str(),
                events[2]["count"].as_u64(),
                events[2]["crash"].as_bool()
            ),
            (Some("backup.service"), Some(2), Some(false))
        );
        assert_eq!(events[2]["by_day"], json!({"2026-06-03": 1, "2026-06-04": 1}));
        assert_eq!(
            events[2]["sample"],
            "Failed to start backup.service - Nightly backup (again)."
        );
        assert_eq!(events[2]["last_seen"], "2026-06-04T16:20:00Z");
    }

    #[test]
    fn many_crashes_or_a_low_index_warn() {
        let mut groups = HashMap::new();
        for i in 0..CRASH_WARN {
            let at = NOW.unix_timestamp() - 3600 * i64::try_from(i).unwrap();
            add(&mut groups, "/usr/bin/app".into(), "critical", at, "dumped core", true);
        }
        let found = Found {
            total: CRASH_WARN,
            groups: groups.into_values().collect(),
            ..Found::default()
        };
        let section = build(found);
        assert_eq!(section["status"], "warn");
        assert_eq!(section["events"][0]["count"], CRASH_WARN);
        let unstable = build(Found {
            stability_index: Some(3.2),
            ..Found::default()
        });
        assert_eq!(unstable["status"], "warn");
        assert_eq!(
            unstable["summary"],
            "stability index 3.2; 0 crashes, 0 error/critical events in 7 days"
        );
    }

    #[test]
    fn apport_reports_and_core_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("_usr_bin_gnome-shell.1000.crash"),
            "ProblemType: Crash\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("_usr_bin_gnome-shell.1000.upload"), "").unwrap();
        let mut groups = HashMap::new();
        let mut notes = Vec::new();
        apport_reports(dir.path(), NOW.unix_timestamp() - 7 * 86_400, &mut groups, &mut notes);
        let found: Vec<&Group> = groups.values().collect();
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].source.as_str(), found[0].crash),
            ("/usr/bin/gnome-shell", true)
        );
        let mut none = HashMap::new();
        apport_reports(dir.path(), i64::MAX, &mut none, &mut notes);
        assert!(none.is_empty(), "too old");
        assert!(notes.is_empty());

        assert_eq!(
            parse_core_name("core.firefox-bin.1000.8e1c2a4b5d6e7f8091a2b3c4d5e6f708.31337.1780480000123456.zst"),
            Some(("firefox-bin".to_owned(), 1_780_480_000))
        );
        assert_eq!(
            parse_core_name("core.my.app.0.8e1c2a4b5d6e7f8091a2b3c4d5e6f708.12.1780480000000000"),
            Some(("my.app".to_owned(), 1_780_480_000))
        );
        assert_eq!(parse_core_name("core.broken"), None);
        assert_eq!(parse_core_name("README"), None);
    }

    #[test]
    fn the_windows_query_reads_reliability_and_both_logs() {
        let script = windows_query().unwrap().script;
        assert!(script.contains("Get-CimInstance -ClassName Win32_ReliabilityStabilityMetrics"));
        assert!(script.contains("LogName = 'System','Application'; Level = 1,2; StartTime = $since"));
        assert!(script.contains("-MaxEvents 1000"));
        assert!(script.contains("Group-Object ProviderName, Id"));
        assert!(script.contains("NoMatchingEventsFound"), "no events is not an error");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers() {
        let section = section().await.unwrap();
        assert_eq!(section["window_days"], 7);
        assert!(
            section["recent_crashes"].is_u64() && section["events"].is_array(),
            "{section:?}"
        );
        assert_eq!(section["stability_index"], Value::Null);
    }
}
