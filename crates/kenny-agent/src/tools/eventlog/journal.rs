//! The systemd journal, through `journalctl --output=json`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};
use time::OffsetDateTime;
use tokio::process::Command;

use super::{Entry, Query, render};
use crate::tools::ToolError;
use crate::tools::bounded::lossy_text;
use crate::tools::process::run_captured;

const LIMIT: Duration = Duration::from_secs(30);
/// Without `--all`, journalctl prints fields over 4 KiB as null, so an entry stays small;
/// this still fits 1000 entries with every field an entry usually has.
const OUTPUT_CAP: usize = 16 * 1024 * 1024;
const NO_JOURNAL: &str = "No journal files were found";
/// Where journald keeps its files: volatile, then persistent (each in a machine-id folder).
pub(crate) const JOURNAL_DIRS: [&str; 2] = ["/run/log/journal", "/var/log/journal"];

pub(super) enum Answer {
    Entries(Value),
    /// The journal has no files here (volatile storage lost, a container): the caller
    /// should try the syslog file, for this reason.
    NoJournal(String),
}

/// journalctl's arguments: each value in one `--option=value` argument, so a unit name
/// starting with `-` cannot become an option.
pub(super) fn arguments(query: &Query) -> Vec<String> {
    let mut args = vec![
        "--output=json".to_owned(),
        "--reverse".to_owned(),
        "--no-pager".to_owned(),
        "--quiet".to_owned(),
        // One more than asked for, to know whether the answer was cut.
        format!("--lines={}", query.limit.saturating_add(1)),
        format!("--since=@{}", query.since.unix_timestamp()),
        format!("--priority=0..{}", query.priority.max_severity()),
    ];
    if let Some(unit) = &query.unit {
        args.push(format!("--unit={unit}"));
    }
    args
}

pub(super) async fn query(query: &Query) -> Result<Answer, ToolError> {
    let args = arguments(query);
    let mut cmd = Command::new("journalctl");
    cmd.args(&args).env("SYSTEMD_COLORS", "0");
    let out = run_captured(cmd, None, LIMIT, OUTPUT_CAP).await?;
    let stderr = out.stderr.into_text();
    if stderr.contains(NO_JOURNAL) {
        return Ok(Answer::NoJournal(
            "the systemd journal has no files on this PC".to_owned(),
        ));
    }
    if !out.status.success() {
        return Err(ToolError::exec_failed(format!(
            "`journalctl {}` failed ({}): {}",
            args.join(" "),
            out.status,
            stderr.trim()
        )));
    }
    let cut = out.stdout.truncated();
    let (entries, truncated) = parse(&out.stdout.into_text(), query.limit);
    // In JSON mode journalctl does not say that it found no journal files; it prints
    // nothing and succeeds, like a query that matched nothing.
    if entries.is_empty() && !JOURNAL_DIRS.iter().any(|dir| has_journal_files(Path::new(dir))) {
        return Ok(Answer::NoJournal(format!(
            "the systemd journal has no files on this PC (nothing in {})",
            JOURNAL_DIRS.join(" or ")
        )));
    }
    Ok(Answer::Entries(render(
        "journal",
        entries,
        truncated || cut,
        Vec::new(),
    )))
}

/// Journal files sit in `dir` or one folder down (the machine id, or a namespace).
pub(crate) fn has_journal_files(dir: &Path) -> bool {
    let is_journal = |path: &Path| {
        path.extension()
            .is_some_and(|ext| ext == "journal" || ext == "journal~")
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().take(1000).any(|entry| {
        let path = entry.path();
        is_journal(&path)
            || (path.is_dir()
                && std::fs::read_dir(&path)
                    .is_ok_and(|inner| inner.flatten().take(10_000).any(|e| is_journal(&e.path()))))
    })
}

/// One JSON object a line; lines that do not parse (a line cut at the output cap) are
/// skipped. Returns at most `limit` entries and whether there were more.
pub(super) fn parse(stdout: &str, limit: usize) -> (Vec<Entry>, bool) {
    let mut entries: Vec<Entry> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Map<String, Value>>(line).ok())
        .map(|fields| entry(&fields))
        .collect();
    let more = entries.len() > limit;
    entries.truncate(limit);
    (entries, more)
}

pub(crate) fn entry(fields: &Map<String, Value>) -> Entry {
    let time = field(fields, "__REALTIME_TIMESTAMP")
        .and_then(|us| us.parse::<i128>().ok())
        .and_then(|us| OffsetDateTime::from_unix_timestamp_nanos(us.checked_mul(1000)?).ok());
    let systemd_unit = field(fields, "_SYSTEMD_UNIT");
    // systemd's own messages about a unit ("Started ssh.service") come from init.scope
    // and name the unit in UNIT; those belong to that unit.
    let unit = match (systemd_unit, field(fields, "UNIT")) {
        (Some(own), Some(about)) if own == "init.scope" => Some(about),
        (Some(own), _) => Some(own),
        (None, about) => about,
    }
    .or_else(|| field(fields, "SYSLOG_IDENTIFIER"))
    .or_else(|| field(fields, "_COMM"));
    Entry {
        time,
        severity: field(fields, "PRIORITY").and_then(|p| p.parse().ok()),
        unit,
        message: message(fields.get("MESSAGE")),
        pid: field(fields, "_PID")
            .or_else(|| field(fields, "SYSLOG_PID"))
            .and_then(|p| p.parse().ok()),
        event_id: None,
    }
}

/// A journal field as text; journalctl prints numbers as strings, binary data as an
/// array of bytes, and a field repeated in one entry as an array of values.
pub(crate) fn field(fields: &Map<String, Value>, name: &str) -> Option<String> {
    match fields.get(name)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(values) => values.first().and_then(|first| match first {
            Value::String(s) => Some(s.clone()),
            _ => None,
        }),
        _ => None,
    }
    .filter(|s| !s.is_empty())
}

fn message(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.iter().all(Value::is_u64) => {
            let bytes: Vec<u8> = items
                .iter()
                .filter_map(Value::as_u64)
                .map(|b| u8::try_from(b).unwrap_or(b'?'))
                .collect();
            lossy_text(&bytes, false)
        }
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"),
        Some(Value::Null) => "(message over 4 KiB, not shown; read it with journalctl --all)".to_owned(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::eventlog::Priority;
    use serde_json::json;
    use time::macros::datetime;

    /// `journalctl --output=json --reverse` lines as systemd 252 prints them (fields trimmed).
    const RECORDED: &str = r#"{"__CURSOR":"s=1;i=2f1","__REALTIME_TIMESTAMP":"1715342400123456","__MONOTONIC_TIMESTAMP":"99","_BOOT_ID":"b","PRIORITY":"3","SYSLOG_FACILITY":"4","SYSLOG_IDENTIFIER":"sshd","_PID":"1234","_COMM":"sshd","_SYSTEMD_UNIT":"ssh.service","MESSAGE":"error: kex_exchange_identification: Connection closed by remote host"}
{"__REALTIME_TIMESTAMP":"1715342300000000","PRIORITY":"4","SYSLOG_IDENTIFIER":"systemd","_PID":"1","_SYSTEMD_UNIT":"init.scope","UNIT":"nginx.service","MESSAGE":"nginx.service: Failed with result 'exit-code'."}
{"__REALTIME_TIMESTAMP":"1715342200000000","PRIORITY":"2","SYSLOG_IDENTIFIER":"kernel","MESSAGE":[69,88,84,52,45,102,115,32,101,114,114,111,114,32,255]}
{"__REALTIME_TIMESTAMP":"1715342100000000","PRIORITY":"4","SYSLOG_IDENTIFIER":"app","SYSLOG_PID":"77","MESSAGE":null}
{"__REALTIME_TIMESTAMP":"1715342000000000","PRIORITY":"4","_COMM":"weird","MESSAGE":["first","second"]}
"#;

    fn query(unit: Option<&str>, priority: Priority, limit: usize) -> Query {
        Query {
            since: datetime!(2024-05-09 12:00:00 UTC),
            priority,
            unit: unit.map(str::to_owned),
            limit,
            log: None,
        }
    }

    #[test]
    fn arguments_carry_every_filter_as_one_argv_entry() {
        let args = arguments(&query(Some("-x; rm -rf /"), Priority::Error, 50));
        assert_eq!(
            args,
            [
                "--output=json",
                "--reverse",
                "--no-pager",
                "--quiet",
                "--lines=51",
                "--since=@1715256000",
                "--priority=0..3",
                "--unit=-x; rm -rf /"
            ]
        );
        let args = arguments(&query(None, Priority::Info, 1));
        assert!(args.contains(&"--priority=0..6".to_owned()));
        assert!(!args.iter().any(|a| a.starts_with("--unit")));
    }

    #[test]
    fn parses_recorded_entries() {
        let (entries, more) = parse(RECORDED, 100);
        assert!(!more);
        assert_eq!(entries.len(), 5);
        assert_eq!(
            entries[0],
            Entry {
                time: Some(datetime!(2024-05-10 12:00:00.123456 UTC)),
                severity: Some(3),
                unit: Some("ssh.service".into()),
                message: "error: kex_exchange_identification: Connection closed by remote host".into(),
                pid: Some(1234),
                event_id: None,
            }
        );
        assert_eq!(
            entries[1].unit.as_deref(),
            Some("nginx.service"),
            "systemd's message about a unit"
        );
        assert_eq!(entries[1].pid, Some(1));
        assert_eq!(
            entries[2].message, "EXT4-fs error \u{FFFD}",
            "bytes decoded, invalid ones replaced"
        );
        assert_eq!(entries[2].unit.as_deref(), Some("kernel"));
        assert_eq!(entries[2].pid, None);
        assert!(entries[3].message.contains("over 4 KiB"));
        assert_eq!(entries[3].pid, Some(77));
        assert_eq!(entries[4].message, "first\nsecond");
        assert_eq!(entries[4].unit.as_deref(), Some("weird"));

        let rendered = render("journal", entries, false, Vec::new());
        assert_eq!(rendered["entries"][0]["time"], "2024-05-10T12:00:00.123456Z");
        assert_eq!(rendered["entries"][0]["priority"], "error");
        assert_eq!(rendered["entries"][2]["priority"], "critical");
    }

    #[test]
    fn journal_files_are_found_in_the_machine_folder() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!has_journal_files(dir.path()));
        assert!(!has_journal_files(&dir.path().join("missing")));
        let machine = dir.path().join("0123456789abcdef0123456789abcdef");
        std::fs::create_dir(&machine).unwrap();
        std::fs::write(machine.join("notes.txt"), "x").unwrap();
        assert!(!has_journal_files(dir.path()));
        std::fs::write(machine.join("system@0005f-1.journal~"), "x").unwrap();
        assert!(has_journal_files(dir.path()));
        std::fs::remove_file(machine.join("system@0005f-1.journal~")).unwrap();
        std::fs::write(machine.join("system.journal"), "x").unwrap();
        assert!(has_journal_files(dir.path()));
    }

    #[test]
    fn one_extra_entry_means_truncated_and_broken_lines_are_skipped() {
        let (entries, more) = parse(RECORDED, 2);
        assert_eq!(entries.len(), 2);
        assert!(more);
        let cut = format!("{}\n{{\"__REALTIME_TIMESTAMP\":\"17", RECORDED.lines().next().unwrap());
        let (entries, more) = parse(&cut, 10);
        assert_eq!(entries.len(), 1);
        assert!(!more);
        assert_eq!(parse("", 10).0, Vec::new());
        assert_eq!(message(Some(&json!(5))), "");
    }
}
