//! The system log: the systemd journal (or a syslog file) on Linux, event logs on Windows.

mod journal;
mod since;
mod syslog;
mod windows;

pub(crate) use journal::{JOURNAL_DIRS, entry as journal_entry, field as journal_field, has_journal_files};

use std::path::PathBuf;
use std::time::Duration;

use kenny_proto::args::DiagEventlogArgs;
use kenny_proto::error::ErrorCode;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::bounded::blocking;
use super::{ToolError, ToolResult};

const DEFAULT_LIMIT: usize = 100;
const DEFAULT_SPAN: time::Duration = time::Duration::hours(24);
/// A log line longer than this is cut, with a marker saying so.
const MESSAGE_CHARS: usize = 2000;
const BACKSTOP: Duration = Duration::from_secs(50);

/// The most verbose level a caller wants, as syslog severities (0 emergency .. 7 debug).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Priority {
    Critical,
    Error,
    Warning,
    Info,
}

impl Priority {
    fn parse(text: Option<&str>) -> Result<Self, ToolError> {
        match text.map(str::trim) {
            None | Some("warning") => Ok(Self::Warning),
            Some("critical") => Ok(Self::Critical),
            Some("error") => Ok(Self::Error),
            Some("info") => Ok(Self::Info),
            Some(other) => Err(ToolError::bad_args(format!(
                "priority must be `critical`, `error`, `warning` or `info`, got `{other}`"
            ))),
        }
    }

    /// The highest (least severe) syslog severity included.
    pub(super) fn max_severity(self) -> u8 {
        match self {
            Self::Critical => 2,
            Self::Error => 3,
            Self::Warning => 4,
            Self::Info => 6,
        }
    }
}

/// What the caller asked for, checked.
#[derive(Debug, Clone)]
pub(super) struct Query {
    pub since: OffsetDateTime,
    pub priority: Priority,
    pub unit: Option<String>,
    pub limit: usize,
    pub log: Option<String>,
}

impl Query {
    fn parse(args: DiagEventlogArgs, now: OffsetDateTime) -> Result<Self, ToolError> {
        let since = match args.since.as_deref() {
            Some(text) => since::parse(text, now).map_err(ToolError::bad_args)?,
            None => now - DEFAULT_SPAN,
        };
        let non_blank = |text: Option<String>| {
            text.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Ok(Query {
            since,
            priority: Priority::parse(args.priority.as_deref())?,
            unit: non_blank(args.unit),
            limit: args.limit.unwrap_or(DEFAULT_LIMIT),
            log: non_blank(args.log),
        })
    }
}

/// One log entry, from whichever source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub time: Option<OffsetDateTime>,
    /// Syslog severity, 0 (emergency) to 7 (debug); `None` where the source has none.
    pub severity: Option<u8>,
    pub unit: Option<String>,
    pub message: String,
    pub pid: Option<u64>,
    /// Windows event id.
    pub event_id: Option<i64>,
}

impl Entry {
    fn into_json(self) -> Value {
        let mut entry = json!({
            "time": self.time.map(rfc3339),
            "priority": self.severity.map(severity_name),
            "unit": self.unit,
            "message": bounded_message(&self.message),
            "pid": self.pid,
        });
        if let Some(id) = self.event_id {
            entry["event_id"] = Value::from(id);
        }
        entry
    }
}

pub(crate) fn severity_name(severity: u8) -> &'static str {
    match severity {
        0 => "emergency",
        1 => "alert",
        2 => "critical",
        3 => "error",
        4 => "warning",
        5 => "notice",
        6 => "info",
        _ => "debug",
    }
}

pub(super) fn rfc3339(time: OffsetDateTime) -> String {
    time.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_else(|_| time.unix_timestamp().to_string())
}

fn bounded_message(message: &str) -> String {
    let message = message.trim_end();
    match message.char_indices().nth(MESSAGE_CHARS) {
        None => message.to_owned(),
        Some((cut, _)) => format!(
            "{} … [message truncated: {} characters in all]",
            &message[..cut],
            message.chars().count()
        ),
    }
}

/// The reply every source gives: newest first, at most `limit` entries.
pub(super) fn render(source: &str, entries: Vec<Entry>, truncated: bool, notes: Vec<String>) -> Value {
    let entries: Vec<Value> = entries.into_iter().map(Entry::into_json).collect();
    let mut result = json!({
        "source": source,
        "count": entries.len(),
        "truncated": truncated,
        "entries": entries,
    });
    if !notes.is_empty() {
        result["notes"] = Value::from(notes);
    }
    result
}

pub(super) async fn query(args: DiagEventlogArgs, ctx: &crate::tools::ToolContext) -> ToolResult {
    let query = Query::parse(args, OffsetDateTime::now_utc())?;
    if cfg!(windows) {
        return windows::query(&query).await;
    }
    if let Some(file) = ctx.syslog_file.clone() {
        return from_syslog(file, query, Vec::new()).await;
    }
    let why_not_journal = if super::systemd::is_running() {
        match journal::query(&query).await? {
            journal::Answer::Entries(result) => return Ok(result),
            journal::Answer::NoJournal(why) => why,
        }
    } else {
        super::systemd::not_running_reason()
    };
    match syslog::DEFAULT_FILES.iter().map(PathBuf::from).find(|f| f.is_file()) {
        Some(file) => {
            from_syslog(
                file,
                query,
                vec![format!("{why_not_journal}: read the syslog file instead")],
            )
            .await
        }
        None => Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "this PC keeps no system log the agent can read: {why_not_journal}, and there is no {}",
                syslog::DEFAULT_FILES.join(" or ")
            ),
        )),
    }
}

async fn from_syslog(file: PathBuf, query: Query, notes: Vec<String>) -> ToolResult {
    let now = OffsetDateTime::now_utc();
    blocking("diag_eventlog", BACKSTOP, move || {
        syslog::query(&file, &query, now, notes)
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    use crate::tools::typed;

    const NOW: OffsetDateTime = datetime!(2024-05-10 12:00:00 UTC);

    #[test]
    fn arguments_have_defaults_and_are_checked() {
        let q = Query::parse(typed(json!({})), NOW).unwrap();
        assert_eq!(q.since, datetime!(2024-05-09 12:00:00 UTC));
        assert_eq!(q.priority, Priority::Warning);
        assert_eq!(q.limit, 100);
        assert_eq!((q.unit, q.log), (None, None));

        let q = Query::parse(
            typed(
                json!({"since": "6h", "priority": "info", "unit": " ssh.service ", "limit": 5, "log": "Application"}),
            ),
            NOW,
        )
        .unwrap();
        assert_eq!(q.since, datetime!(2024-05-10 06:00:00 UTC));
        assert_eq!(q.priority.max_severity(), 6);
        assert_eq!(q.unit.as_deref(), Some("ssh.service"));
        assert_eq!(q.limit, 5);

        let err = Query::parse(typed(json!({"since": "yesterday-ish"})), NOW).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(err.message.contains("yesterday-ish"), "{}", err.message);
        let err = Query::parse(typed(json!({"priority": "loud"})), NOW).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(err.message.contains("`critical`, `error`, `warning` or `info`"));
    }

    #[test]
    fn priorities_are_syslog_ranges() {
        let max = |p: &str| Priority::parse(Some(p)).unwrap().max_severity();
        assert_eq!(
            [max("critical"), max("error"), max("warning"), max("info")],
            [2, 3, 4, 6]
        );
        assert_eq!(severity_name(0), "emergency");
        assert_eq!(severity_name(3), "error");
        assert_eq!(severity_name(4), "warning");
        assert_eq!(severity_name(7), "debug");
    }

    #[test]
    fn long_messages_are_cut_with_a_marker() {
        assert_eq!(bounded_message("short\n"), "short");
        let exact = "é".repeat(MESSAGE_CHARS);
        assert_eq!(bounded_message(&exact), exact);
        let long = format!("{exact}xyz");
        let cut = bounded_message(&long);
        assert!(cut.starts_with(&exact));
        assert!(cut.ends_with(" … [message truncated: 2003 characters in all]"), "{cut}");
    }

    #[test]
    fn entries_render_with_names_and_utc_times() {
        let entry = Entry {
            time: Some(datetime!(2024-05-10 14:00:00.25 +02:00)),
            severity: Some(3),
            unit: Some("ssh.service".into()),
            message: "boom".into(),
            pid: Some(42),
            event_id: None,
        };
        let out = render("journal", vec![entry.clone()], false, Vec::new());
        assert_eq!(
            out,
            json!({"source": "journal", "count": 1, "truncated": false, "entries": [
                {"time": "2024-05-10T12:00:00.25Z", "priority": "error", "unit": "ssh.service", "message": "boom", "pid": 42}
            ]})
        );
        let windows = Entry {
            event_id: Some(7031),
            severity: None,
            time: None,
            ..entry
        };
        let out = render("windows", vec![windows], true, vec!["n".into()]);
        assert_eq!(out["entries"][0]["event_id"], 7031);
        assert_eq!(out["entries"][0]["priority"], Value::Null);
        assert_eq!(out["entries"][0]["time"], Value::Null);
        assert_eq!(out["notes"], json!(["n"]));
        assert_eq!(out["truncated"], true);
    }
}
