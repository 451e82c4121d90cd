//! Windows event logs, through PowerShell's Get-WinEvent.

use std::time::Duration;

use serde_json::{Map, Value};

use super::{Entry, Priority, Query, render};
use crate::tools::shell::{powershell_literal, run_powershell};
use crate::tools::{ToolError, ToolResult, psjson};

/// The logs an operator may read; anything else is refused rather than passed on.
const LOGS: [&str; 4] = ["System", "Application", "Security", "Setup"];
const LIMIT: Duration = Duration::from_secs(50);
/// Messages are cut to a little over the reply's limit inside PowerShell, so 1000 events
/// stay within this.
const OUTPUT_CAP: usize = 16 * 1024 * 1024;
const KEEP_CHARS_IN_POWERSHELL: usize = super::MESSAGE_CHARS + 100;
const NO_EVENTS: &str = "No events were found";

pub(super) async fn query(query: &Query) -> ToolResult {
    let log = log_name(query.log.as_deref())?;
    let script = script(log, query);
    let out = run_powershell(&script, LIMIT, OUTPUT_CAP).await?;
    let stderr = out.stderr.into_text();
    let mut notes = Vec::new();
    if log == "Security" && query.priority != Priority::Info {
        notes.push(
            "Security audit events carry no level (they are all `info`): use priority `info` to see them".to_owned(),
        );
    }
    if !out.status.success() {
        return failure(log, query, &stderr).map(|()| render("windows", Vec::new(), false, notes));
    }
    let cut = out.stdout.truncated();
    let mut entries = parse(&out.stdout.into_text()).map_err(ToolError::exec_failed)?;
    let more = entries.len() > query.limit;
    entries.truncate(query.limit);
    let mut result = render("windows", entries, more || cut, notes);
    result["log"] = log.into();
    Ok(result)
}

/// A failed Get-WinEvent: "no events" is an empty answer, an unknown provider is
/// `not_found`, anything else is passed on.
fn failure(log: &str, query: &Query, stderr: &str) -> Result<(), ToolError> {
    if stderr.contains(NO_EVENTS) || stderr.contains("NoMatchingEventsFound") {
        return Ok(());
    }
    if stderr.contains("NoMatchingProvidersFound") || stderr.contains("There is not an event provider") {
        return Err(ToolError::not_found(format!(
            "no event source named `{}` on this PC; leave `unit` out to see every source in the {log} log",
            query.unit.as_deref().unwrap_or_default()
        )));
    }
    Err(ToolError::exec_failed(format!(
        "reading the {log} event log with Get-WinEvent failed: {}",
        stderr.trim()
    )))
}

/// The allow-listed log name, spelled as Windows spells it; `System` by default.
pub(super) fn log_name(requested: Option<&str>) -> Result<&'static str, ToolError> {
    let Some(requested) = requested else {
        return Ok("System");
    };
    LOGS.iter()
        .copied()
        .find(|log| log.eq_ignore_ascii_case(requested.trim()))
        .ok_or_else(|| ToolError::bad_args(format!("log must be one of {}, got `{requested}`", LOGS.join(", "))))
}

/// Event levels for a priority: 1 critical, 2 error, 3 warning, 4 information, and 0
/// (LogAlways), which Event Viewer also shows as information.
fn levels(priority: Priority) -> &'static str {
    match priority {
        Priority::Critical => "1",
        Priority::Error => "1,2",
        Priority::Warning => "1,2,3",
        Priority::Info => "0,1,2,3,4",
    }
}

/// The script for `query` on `log`. The provider name is the only text from the caller
/// and goes in as a single-quoted literal; the rest is numbers and allow-listed names.
pub(super) fn script(log: &str, query: &Query) -> String {
    let since_ms = query.since.unix_timestamp_nanos() / 1_000_000;
    let provider = query
        .unit
        .as_deref()
        .map(|p| format!("$filter['ProviderName'] = {}\n", powershell_literal(p)))
        .unwrap_or_default();
    format!(
        "$ErrorActionPreference = 'Stop'
$filter = @{{ LogName = '{log}'; Level = {levels}; StartTime = [DateTimeOffset]::FromUnixTimeMilliseconds({since_ms}).LocalDateTime }}
{provider}try {{
  $events = @(Get-WinEvent -FilterHashtable $filter -MaxEvents {max})
}} catch {{
  if ($_.FullyQualifiedErrorId -like 'NoMatchingEventsFound*') {{ exit 0 }}
  throw
}}
$events | Select-Object TimeCreated,Id,Level,LevelDisplayName,ProviderName,ProcessId,@{{Name='Message';Expression={{ $m = $_.Message; if ($m -and $m.Length -gt {keep}) {{ $m.Substring(0, {keep}) }} else {{ $m }} }}}} | ConvertTo-Json -Compress
",
        levels = levels(query.priority),
        max = query.limit.saturating_add(1),
        keep = KEEP_CHARS_IN_POWERSHELL,
    )
}

pub(super) fn parse(stdout: &str) -> Result<Vec<Entry>, String> {
    Ok(psjson::rows(stdout)?.iter().map(entry).collect())
}

fn entry(row: &Map<String, Value>) -> Entry {
    Entry {
        time: row.get("TimeCreated").and_then(psjson::date),
        severity: psjson::number(row, "Level").map(severity),
        unit: psjson::text(row, "ProviderName"),
        message: psjson::text(row, "Message").unwrap_or_default(),
        pid: psjson::number(row, "ProcessId").and_then(|p| u64::try_from(p).ok()),
        event_id: psjson::number(row, "Id"),
    }
}

/// Windows event level to syslog severity.
fn severity(level: i64) -> u8 {
    match level {
        1 => 2,
        2 => 3,
        3 => 4,
        5 => 7,
        _ => 6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;
    use time::macros::datetime;

    fn query(unit: Option<&str>, priority: Priority, limit: usize) -> Query {
        Query {
            since: datetime!(2023-11-14 22:13:20 UTC),
            priority,
            unit: unit.map(str::to_owned),
            limit,
            log: None,
        }
    }

    #[test]
    fn the_script_for_a_hostile_provider_name() {
        let hostile = "x'; Remove-Item C:\\ -Recurse; '";
        let text = script("System", &query(Some(hostile), Priority::Warning, 50));
        let expected = "$ErrorActionPreference = 'Stop'
$filter = @{ LogName = 'System'; Level = 1,2,3; StartTime = [DateTimeOffset]::FromUnixTimeMilliseconds(1700000000000).LocalDateTime }
$filter['ProviderName'] = 'x''; Remove-Item C:\\ -Recurse; '''
try {
  $events = @(Get-WinEvent -FilterHashtable $filter -MaxEvents 51)
} catch {
  if ($_.FullyQualifiedErrorId -like 'NoMatchingEventsFound*') { exit 0 }
  throw
}
$events | Select-Object TimeCreated,Id,Level,LevelDisplayName,ProviderName,ProcessId,@{Name='Message';Expression={ $m = $_.Message; if ($m -and $m.Length -gt 2100) { $m.Substring(0, 2100) } else { $m } }} | ConvertTo-Json -Compress
";
        assert_eq!(text, expected);
    }

    #[test]
    fn without_a_provider_the_filter_has_none_and_levels_follow_priority() {
        let text = script("Application", &query(None, Priority::Info, 1));
        assert!(!text.contains("ProviderName'] ="));
        assert!(text.contains("LogName = 'Application'; Level = 0,1,2,3,4;"));
        assert!(text.contains("-MaxEvents 2)"));
        assert!(script("System", &query(None, Priority::Critical, 5)).contains("Level = 1;"));
        assert!(script("System", &query(None, Priority::Error, 5)).contains("Level = 1,2;"));
    }

    #[test]
    fn only_allow_listed_logs() {
        assert_eq!(log_name(None), Ok("System"));
        assert_eq!(log_name(Some("application")), Ok("Application"));
        assert_eq!(log_name(Some(" SECURITY ")), Ok("Security"));
        assert_eq!(log_name(Some("Setup")), Ok("Setup"));
        for bad in ["Microsoft-Windows-PowerShell/Operational", "System'; calc; '", "", "*"] {
            let err = log_name(Some(bad)).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadArgs);
            assert!(
                err.message.contains("System, Application, Security, Setup"),
                "{}",
                err.message
            );
        }
    }

    /// Windows PowerShell 5.1 output (recorded shape): dates as /Date(ms)/.
    const MANY: &str = r#"[{"TimeCreated":"\/Date(1700000000000)\/","Id":7031,"Level":2,"LevelDisplayName":"Error","ProviderName":"Service Control Manager","ProcessId":812,"Message":"The Print Spooler service terminated unexpectedly.  It has done this 1 time(s)."},{"TimeCreated":"\/Date(1699999000000)\/","Id":41,"Level":1,"LevelDisplayName":"Critical","ProviderName":"Microsoft-Windows-Kernel-Power","ProcessId":4,"Message":"The system has rebooted without cleanly shutting down first."},{"TimeCreated":"\/Date(1699998000000)\/","Id":10016,"Level":3,"LevelDisplayName":"Warning","ProviderName":"Microsoft-Windows-DistributedCOM","ProcessId":null,"Message":null}]"#;

    #[test]
    fn parses_many_one_and_no_events() {
        let entries = parse(MANY).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[0],
            Entry {
                time: Some(datetime!(2023-11-14 22:13:20 UTC)),
                severity: Some(3),
                unit: Some("Service Control Manager".into()),
                message: "The Print Spooler service terminated unexpectedly.  It has done this 1 time(s).".into(),
                pid: Some(812),
                event_id: Some(7031),
            }
        );
        assert_eq!(entries[1].severity, Some(2));
        assert_eq!(entries[2].severity, Some(4));
        assert_eq!((entries[2].pid, entries[2].message.as_str()), (None, ""));

        let rendered = render("windows", entries, false, Vec::new());
        assert_eq!(rendered["entries"][0]["time"], "2023-11-14T22:13:20Z");
        assert_eq!(rendered["entries"][0]["priority"], "error");
        assert_eq!(rendered["entries"][1]["priority"], "critical");
        assert_eq!(rendered["entries"][0]["event_id"], 7031);

        // PowerShell 7 prints ISO dates; one event is an object, not an array.
        let one = r#"{"TimeCreated":"2023-11-14T23:13:20.5+01:00","Id":1074,"Level":4,"LevelDisplayName":"Information","ProviderName":"User32","Message":"shutdown"}"#;
        let entries = parse(one).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].time, Some(datetime!(2023-11-14 22:13:20.5 UTC)));
        assert_eq!(entries[0].severity, Some(6));

        // No events: the script exits 0 having printed nothing.
        assert!(parse("").unwrap().is_empty());
        assert!(parse("oops").is_err());
    }

    #[test]
    fn failures_from_recorded_stderr() {
        let q = query(Some("NoSuchSource"), Priority::Warning, 10);
        let no_events = "Get-WinEvent : No events were found that match the specified selection criteria.\r\nAt line:4 char:14\r\n    + CategoryInfo          : ObjectNotFound: (:) [Get-WinEvent], Exception\r\n    + FullyQualifiedErrorId : NoMatchingEventsFound,Microsoft.PowerShell.Commands.GetWinEventCommand\r\n";
        assert_eq!(failure("System", &q, no_events), Ok(()));
        let no_provider = "Get-WinEvent : There is not an event provider on the localhost computer that matches \"NoSuchSource\".\r\n    + FullyQualifiedErrorId : NoMatchingProvidersFound,Microsoft.PowerShell.Commands.GetWinEventCommand\r\n";
        let err = failure("System", &q, no_provider).unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(err.message.contains("`NoSuchSource`"), "{}", err.message);
        let denied = "Get-WinEvent : Attempted to perform an unauthorized operation.\r\n";
        let err = failure("Security", &q, denied).unwrap_err();
        assert_eq!(err.code, ErrorCode::ExecFailed);
        assert!(
            err.message.contains("Security event log") && err.message.contains("unauthorized"),
            "{}",
            err.message
        );
    }

    #[test]
    fn levels_map_to_syslog_severities() {
        assert_eq!(
            [
                severity(1),
                severity(2),
                severity(3),
                severity(4),
                severity(0),
                severity(5)
            ],
            [2, 3, 4, 6, 6, 7]
        );
    }
}
