//! How sections are read on Windows: each is one PowerShell query that prints JSON, and a
//! parser that turns what it printed into the section.
//!
//! The query is data (a fixed script, no operator input), so it can be checked here, and
//! the parser is an ordinary function, so it is tested on every platform against outputs
//! recorded from real PCs and the vendors' documentation (`testdata/windows/<section>/`,
//! walked by `recorded::every_windows_query_matches_its_recordings`). Only the run itself
//! needs Windows.
//!
//! Queries run through the agent's one PowerShell runner (script on stdin, killed with
//! its process tree at the time limit), at most [`AT_ONCE`] at a time: each
//! powershell.exe costs ~50 MB and a second of CPU to start, and a collection must not
//! make the PC stutter for its user.

use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;

use super::Outcome;
use super::command::{Output, first_line};

/// One section's query.
pub(super) struct Query {
    /// The script exactly as powershell.exe receives it. Its last line of output is one
    /// JSON value (`ConvertTo-Json -Compress`).
    pub script: &'static str,
    /// Time for this query alone, on top of waiting for a free slot.
    pub limit: Duration,
    /// What the output means; `now` is when it was collected (ages, windows of time).
    pub parse: fn(&Output, OffsetDateTime) -> Outcome,
}

/// PowerShell processes a collection runs at once.
const AT_ONCE: usize = 3;

#[cfg_attr(not(windows), allow(dead_code))]
static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(AT_ONCE);

/// The query of every section read through PowerShell on Windows; `None` for sections
/// read another way there (files, sysinfo, the agent's own probes).
pub(super) fn query(name: &str) -> Option<&'static Query> {
    use super::{
        accounts, app_updates, backup, defender, disk_smart, firewall, logons, net_quality, os, peripherals, ports,
        power, printers, reliability, routing, scheduled_tasks, screen_time, services, software, startup, thermals,
        time_sync, web_activity, wifi, win_update,
    };
    match name {
        "os" => os::windows_query(),
        "time_sync" => time_sync::windows_query(),
        "thermals" => thermals::windows_query(),
        "failed_services" | "services" => services::windows_query(name),
        "scheduled_tasks" => scheduled_tasks::windows_query(),
        "autostart" => startup::windows_query(),
        "routing" => routing::windows_query(),
        "listening_ports" => ports::windows_query(),
        "firewall" => firewall::windows_query(),
        "installed_software" => software::windows_query(),
        "app_updates" => app_updates::windows_query(),
        "local_accounts" => accounts::windows_query(),
        "logon_failures" => logons::windows_query(),
        "defender" | "defender_quarantine" | "av_thirdparty" => defender::windows_query(name),
        "win_update" => win_update::windows_query(),
        "reboot_pending" | "battery" | "encryption" => power::windows_query(name),
        "disk_smart" => disk_smart::windows_query(),
        "peripherals" => peripherals::windows_query(),
        "printers" => printers::windows_query(),
        "wifi_quality" => wifi::windows_query(),
        "net_quality" => net_quality::windows_query(),
        "reliability" => reliability::windows_query(),
        "backup_status" => backup::windows_query(),
        "screen_time" => screen_time::windows_query(),
        "web_activity" => web_activity::windows_query(),
        _ => None,
    }
}

/// Sections whose query is one source among others on Windows (`web_activity` adds the
/// browsers' history to the DNS cache): their own collector runs the query through
/// [`output`] and merges, instead of the query standing for the whole section.
pub(super) const ONE_OF_SEVERAL_SOURCES: &[&str] = &["web_activity"];

/// Runs `query` and parses its output.
#[cfg_attr(not(windows), allow(dead_code))]
pub(super) async fn collect(query: &'static Query) -> Outcome {
    let output = output(query).await?;
    (query.parse)(&output, OffsetDateTime::now_utc())
}

/// Runs `query` when a slot is free and returns what it printed, for a section that
/// reads more than one source on Windows (a query and files).
#[cfg_attr(not(windows), allow(dead_code))]
pub(super) async fn output(query: &Query) -> Result<Output, String> {
    let _slot = SLOTS
        .acquire()
        .await
        .map_err(|_| "the PowerShell runner is shutting down".to_owned())?;
    run(query.script, query.limit).await
}

#[cfg(windows)]
async fn run(script: &str, limit: Duration) -> Result<Output, String> {
    use kenny_proto::error::ErrorCode;

    /// A query's JSON; the biggest (every installed program, every service) is ~1 MB.
    const CAP: usize = 8 * 1024 * 1024;
    let captured = crate::tools::shell::run_powershell(script, limit, CAP)
        .await
        .map_err(|e| match e.code {
            ErrorCode::Timeout => format!("PowerShell gave no answer within {}s and was stopped", limit.as_secs()),
            _ => e.message,
        })?;
    Ok(Output::from(captured))
}

#[cfg(not(windows))]
async fn run(_script: &str, _limit: Duration) -> Result<Output, String> {
    Err("PowerShell queries run on Windows only".to_owned())
}

/// The JSON value a query printed last, or why there is none: a failed script's own
/// error line, or output that is not JSON. An empty pipeline prints nothing, which is
/// `Null` (callers decide whether that means "none" or "not available").
pub(super) fn json_of(output: &Output) -> Result<Value, String> {
    if !output.success {
        return Err(format!("PowerShell failed: {}", first_line(output)));
    }
    if output.truncated {
        return Err("PowerShell printed more than the agent keeps; the output was cut".to_owned());
    }
    let Some(last) = output
        .stdout
        .trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
    else {
        return Ok(Value::Null);
    };
    serde_json::from_str(last).map_err(|e| {
        let shown: String = last.chars().take(80).collect();
        format!("PowerShell printed something that is not JSON ({e}): {shown}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_is_the_value_and_failures_say_why() {
        assert_eq!(
            json_of(&Output::printed("\u{feff}WARNING: x\r\n{\"a\":1}\r\n\r\n", "", true)),
            Ok(serde_json::json!({"a": 1}))
        );
        assert_eq!(json_of(&Output::printed("  \r\n", "", true)), Ok(Value::Null));
        assert_eq!(
            json_of(&Output::printed(
                "",
                "Get-Thing : Access is denied.\r\nAt line:1 char:1\r\n",
                false
            )),
            Err("PowerShell failed: Get-Thing : Access is denied.".to_owned())
        );
        let err = json_of(&Output::printed("Fehler beim Laden", "", true)).unwrap_err();
        assert!(err.contains("not JSON") && err.ends_with("Fehler beim Laden"), "{err}");
        let mut cut = Output::printed("[{\"a\":1}", "", true);
        cut.truncated = true;
        assert!(json_of(&cut).unwrap_err().contains("cut"));
    }
}
