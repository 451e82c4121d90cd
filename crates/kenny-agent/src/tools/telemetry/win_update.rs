//! The win_update section: what Windows Update last did, what failed, and what it already knows is pending.
//!
//! Everything comes from the Windows Update Agent's COM objects, without contacting an
//! update server: the pending updates from an offline search of what the PC last
//! downloaded from its update source (`Online = $false`), the recent installs from the
//! history, the last successful check and install from `Microsoft.Update.AutoUpdate`,
//! and whether a restart is required from `Microsoft.Update.SystemInfo`. On other
//! systems the section is "n/a on this platform" (see `windows_only`).
//!
//! The agent says `warn` when an install failed in the last [`RECENT_DAYS`] days or the
//! last successful check is older than [`CHECK_MAX_AGE_DAYS`] (or never happened).

use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::command::Output;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, section};
use crate::tools::psjson;

/// How far back `recent` reaches.
const RECENT_DAYS: i64 = 30;
/// The server's default for an update check that is too old.
const CHECK_MAX_AGE_DAYS: i64 = 14;
/// Most updates listed in `recent` and in `pending` each.
const MAX_LISTED: usize = 25;
/// History entries read; the script asks for no more.
const HISTORY_READ: usize = 50;
/// Update titles are cut to this many characters.
const MAX_TITLE: usize = 200;

static QUERY: Query = Query {
    script: SCRIPT,
    // The offline search reads the local update store, which takes a few seconds on a
    // PC with years of history; the collection as a whole has 15.
    limit: Duration::from_secs(13),
    parse,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

/// WUA dates are UTC but reach PowerShell as DateTime values of unspecified kind, which
/// ConvertTo-Json would shift by the local offset; so they are written out here. "Never"
/// may come as an empty value or as the OLE zero date (1899-12-30): both print as null.
/// Failures are caught and printed: a disabled Windows Update service or a locked-down
/// PowerShell is something to report about the PC, not a broken collector. The search
/// is caught on its own, so the history still counts when only it fails.
const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
function Utc($d) {
    if ($d -is [datetime] -and $d.Year -ge 2000) {
        $d.ToString("yyyy-MM-dd'T'HH:mm:ss'Z'", [Globalization.CultureInfo]::InvariantCulture)
    }
}
$history = @()
$total = $null
$lastSearch = $null
$lastInstall = $null
$reboot = $null
$failure = $null
$pending = @()
$pendingCount = $null
$searchError = $null
try {
    $session = New-Object -ComObject Microsoft.Update.Session
    $searcher = $session.CreateUpdateSearcher()
    $total = $searcher.GetTotalHistoryCount()
    if ($total -gt 0) {
        $history = @($searcher.QueryHistory(0, [Math]::Min(50, $total)) | ForEach-Object {
            [pscustomobject]@{
                Title = $_.Title
                Date = Utc $_.Date
                Operation = [int]$_.Operation
                ResultCode = [int]$_.ResultCode
                HResult = [int]$_.HResult
            }
        })
    }
    $results = (New-Object -ComObject Microsoft.Update.AutoUpdate).Results
    $lastSearch = Utc $results.LastSearchSuccessDate
    $lastInstall = Utc $results.LastInstallationSuccessDate
    $reboot = [bool](New-Object -ComObject Microsoft.Update.SystemInfo).RebootRequired
} catch {
    $failure = $_.Exception.Message
}
if (-not $failure) {
    try {
        $searcher.Online = $false
        $found = $searcher.Search('IsInstalled=0 and IsHidden=0')
        $pendingCount = $found.Updates.Count
        $pending = @($found.Updates | Select-Object -First 25 | ForEach-Object {
            [pscustomobject]@{
                Title = $_.Title
                KBArticleIDs = @($_.KBArticleIDs)
                MsrcSeverity = $_.MsrcSeverity
            }
        })
    } catch {
        $searchError = $_.Exception.Message
    }
}
[pscustomobject]@{
    Failure = $failure
    LastSearchSuccessDate = $lastSearch
    LastInstallationSuccessDate = $lastInstall
    RebootRequired = $reboot
    HistoryTotal = $total
    History = $history
    PendingCount = $pendingCount
    Pending = $pending
    SearchError = $searchError
} | ConvertTo-Json -Compress -Depth 4
"#;

/// `IUpdateHistoryEntry.ResultCode` (`OperationResultCode`).
fn result_name(code: i64) -> &'static str {
    match code {
        0 => "not_started",
        1 => "in_progress",
        2 => "succeeded",
        3 => "succeeded_with_errors",
        4 => "failed",
        5 => "aborted",
        _ => "unknown",
    }
}

/// `UpdateOperation`: 1 is an installation, 2 an uninstallation.
const OPERATION_INSTALL: i64 = 1;

fn clip(text: &str) -> String {
    super::format::clip(text, MAX_TITLE)
}

/// The first "KB" number in a title, e.g. "... (KB5058411)" or "... - KB2267602 (Version ...)".
fn kb_in(title: &str) -> Option<String> {
    let bytes = title.as_bytes();
    let mut from = 0;
    while let Some(at) = title[from..].find("KB").map(|i| i + from) {
        let digits: String = title[at + 2..].chars().take_while(char::is_ascii_digit).collect();
        let starts_word = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        if starts_word && (6..=8).contains(&digits.len()) {
            return Some(format!("KB{digits}"));
        }
        from = at + 2;
    }
    None
}

fn date_of(row: &Map<String, Value>, key: &str) -> Option<OffsetDateTime> {
    row.get(key).and_then(psjson::date)
}

fn rfc3339(at: OffsetDateTime) -> Option<String> {
    at.replace_nanosecond(0).ok()?.format(&Rfc3339).ok()
}

struct Recent {
    entries: Vec<Value>,
    /// Installs within the window, all of them (the list is capped).
    count: usize,
    /// Each update that failed to install, by KB (or title), and whether it installed
    /// successfully later.
    failed: Vec<(String, bool)>,
    /// The history read was full and still inside the window: older entries exist.
    cut: bool,
}

/// Installations from the history within the last [`RECENT_DAYS`], newest first (the
/// order QueryHistory gives).
fn recent(history: Vec<Map<String, Value>>, total: Option<i64>, now: OffsetDateTime) -> Recent {
    let since = now - time::Duration::days(RECENT_DAYS);
    let read = history.len();
    let mut oldest_read: Option<OffsetDateTime> = None;
    let mut entries = Vec::new();
    let mut failed = Vec::new();
    let mut succeeded_later: Vec<String> = Vec::new();
    let mut count = 0;
    for row in history {
        let at = date_of(&row, "Date");
        if let Some(at) = at {
            oldest_read = Some(oldest_read.map_or(at, |o| o.min(at)));
        }
        // Entries without a title are leftovers of removed updates; uninstallations are
        // not installs.
        let Some(title) = psjson::text(&row, "Title").map(|t| clip(&t)) else {
            continue;
        };
        if psjson::number(&row, "Operation") != Some(OPERATION_INSTALL) || at.is_none_or(|at| at < since) {
            continue;
        }
        count += 1;
        let result = result_name(psjson::number(&row, "ResultCode").unwrap_or(-1));
        let kb = kb_in(&title);
        // Newest first: a success seen before a failure of the same update came after it.
        let label = kb.clone().unwrap_or_else(|| title.clone());
        match result {
            // An update that failed twice is one failed update; its newest failure says
            // whether it installed since.
            "failed" if !failed.iter().any(|(l, _)| *l == label) => {
                failed.push((label.clone(), succeeded_later.contains(&label)));
            }
            "succeeded" | "succeeded_with_errors" => succeeded_later.push(label),
            _ => {}
        }
        if entries.len() < MAX_LISTED {
            let error_code = psjson::number(&row, "HResult")
                .filter(|&h| h != 0 && result != "succeeded")
                .map(|h| format!("0x{:08X}", h as u32));
            entries.push(json!({
                "kb": kb,
                "title": title,
                "result": result,
                "installed_at": at.and_then(rfc3339),
                "error_code": error_code,
            }));
        }
    }
    let history_full = read >= HISTORY_READ && total.is_some_and(|t| t > read as i64);
    Recent {
        cut: count > entries.len() || (history_full && oldest_read.is_some_and(|o| o >= since)),
        entries,
        count,
        failed,
    }
}

fn pending_entry(row: &Map<String, Value>) -> Value {
    let title = psjson::text(row, "Title").map(|t| clip(&t)).unwrap_or_default();
    let kb = row
        .get("KBArticleIDs")
        .and_then(|ids| match ids {
            Value::Array(ids) => ids.iter().find_map(Value::as_str).map(str::to_owned),
            Value::String(id) => Some(id.clone()),
            Value::Number(id) => Some(id.to_string()),
            _ => None,
        })
        .map(|id| format!("KB{}", id.trim().trim_start_matches("KB")))
        .filter(|kb| kb.len() > 2 && kb.len() <= 12)
        .or_else(|| kb_in(&title));
    let severity = psjson::text(row, "MsrcSeverity").map(|s| clip(&s).to_ascii_lowercase());
    json!({ "kb": kb, "title": title, "severity": severity })
}

fn parse(output: &Output, now: OffsetDateTime) -> Outcome {
    let Value::Object(top) = json_of(output)? else {
        return Err(
            "Windows Update printed no result; check that the Windows Update Agent (wuaueng.dll) is present".to_owned(),
        );
    };
    Ok(build(&top, now))
}

fn build(top: &Map<String, Value>, now: OffsetDateTime) -> Section {
    if let Some(failure) = psjson::text(top, "Failure") {
        return unavailable(&clip(&failure));
    }
    let history = top
        .get("History")
        .cloned()
        .map(psjson::rows_of)
        .and_then(Result::ok)
        .unwrap_or_default();
    let recent = recent(history, psjson::number(top, "HistoryTotal"), now);
    let pending_rows = top
        .get("Pending")
        .cloned()
        .map(psjson::rows_of)
        .and_then(Result::ok)
        .unwrap_or_default();
    let search_error = psjson::text(top, "SearchError").map(|e| clip(&e));
    let pending_count = match &search_error {
        Some(_) => None,
        None => Some(psjson::number(top, "PendingCount").unwrap_or(pending_rows.len() as i64)),
    };
    let pending: Vec<Value> = pending_rows.iter().take(MAX_LISTED).map(pending_entry).collect();
    let pending_cut = pending_count.is_some_and(|n| n > pending.len() as i64);
    let last_check = date_of(top, "LastSearchSuccessDate");
    let last_install = date_of(top, "LastInstallationSuccessDate");
    let reboot_required = top.get("RebootRequired").and_then(Value::as_bool).unwrap_or(false);

    let check_age_days = last_check.map(|at| (now - at).whole_days());
    let critical = pending.iter().filter(|u| u["severity"] == "critical").count();
    let (status, summary) = verdict(&recent.failed, check_age_days, pending_count, critical, reboot_required);
    section(
        status,
        summary,
        json!({
            "last_check": last_check.and_then(rfc3339),
            "last_install": last_install.and_then(rfc3339),
            "recent": recent.entries,
            "recent_count": recent.count,
            "failed_count": recent.failed.len(),
            "pending": pending,
            "pending_count": pending_count,
            "search_error": search_error,
            "reboot_required": reboot_required,
            "truncated": recent.cut || pending_cut,
        }),
    )
}

/// The status and one-line summary: what calls for attention first, then the facts.
fn verdict(
    failed: &[(String, bool)],
    check_age_days: Option<i64>,
    pending_count: Option<i64>,
    critical: usize,
    reboot_required: bool,
) -> (Status, String) {
    let mut problems = Vec::new();
    if !failed.is_empty() {
        let named: Vec<String> = failed
            .iter()
            .take(5)
            .map(|(label, since)| {
                let label: String = label.chars().take(60).collect();
                if *since {
                    format!("{label} (installed since)")
                } else {
                    label
                }
            })
            .collect();
        problems.push(format!(
            "{} failed in the last {RECENT_DAYS} days: {}",
            plural(failed.len(), "update"),
            named.join(", ")
        ));
    }
    match check_age_days {
        None => problems.push("no successful check for updates on record".to_owned()),
        Some(days) if days > CHECK_MAX_AGE_DAYS => {
            problems.push(format!("last successful check for updates {days} days ago"));
        }
        Some(_) => {}
    }
    let status = if problems.is_empty() { Status::Ok } else { Status::Warn };
    let mut facts = Vec::new();
    match pending_count {
        Some(0) => facts.push("nothing pending".to_owned()),
        Some(n) => {
            let mut fact = format!("{} pending", plural(usize::try_from(n).unwrap_or(0), "update"));
            if critical > 0 {
                fact.push_str(&format!(" ({critical} critical)"));
            }
            facts.push(fact);
        }
        None => facts.push("pending updates unknown (the offline search failed)".to_owned()),
    }
    if reboot_required {
        facts.push("restart required".to_owned());
    }
    if let Some(days) = check_age_days.filter(|&d| d <= CHECK_MAX_AGE_DAYS) {
        facts.push(match days {
            0 => "last checked less than a day ago".to_owned(),
            1 => "last checked 1 day ago".to_owned(),
            d => format!("last checked {d} days ago"),
        });
    }
    (status, problems.into_iter().chain(facts).collect::<Vec<_>>().join("; "))
}

/// The HRESULT in a COM error message ("Exception from HRESULT: 0x80070422"), which
/// PowerShell translates around but never changes.
fn hresult_in(message: &str) -> Option<String> {
    let at = message.find("0x")?;
    let hex: String = message[at + 2..].chars().take_while(char::is_ascii_hexdigit).collect();
    (hex.len() == 8).then(|| format!("0x{}", hex.to_ascii_uppercase()))
}

/// What a Windows Update Agent error code means for the PC, and whether it means
/// Windows Update cannot work at all (crit) rather than cannot be read by the agent.
fn meaning_of(code: &str) -> Option<(&'static str, Status)> {
    match code {
        "0x80070422" => Some(("the Windows Update service (wuauserv) is disabled", Status::Crit)),
        "0x80040154" => Some(("the Windows Update Agent is not registered on this PC", Status::Crit)),
        "0x8024A000" => Some((
            "the Windows Update service is shutting down or restarting",
            Status::Warn,
        )),
        "0x80070005" => Some(("access denied to the Windows Update Agent", Status::Warn)),
        _ => None,
    }
}

/// Windows Update did not answer at all.
fn unavailable(message: &str) -> Section {
    let code = hresult_in(message);
    let (status, summary) = match code.as_deref().and_then(meaning_of) {
        Some((meaning, status)) => (status, format!("Windows Update cannot be read: {meaning}")),
        None => (Status::Warn, format!("Windows Update cannot be read: {message}")),
    };
    section(
        status,
        summary,
        json!({
            "last_check": null,
            "last_install": null,
            "recent": [],
            "recent_count": null,
            "failed_count": null,
            "pending": [],
            "pending_count": null,
            "search_error": null,
            "reboot_required": null,
            "truncated": false,
            "error": message,
            "error_code": code,
        }),
    )
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-06-05 00:00:00 UTC);

    fn history_row(title: &str, date: &str, result: i64) -> Value {
        json!({"Title": title, "Date": date, "Operation": 1, "ResultCode": result, "HResult": if result == 4 { -2147023293 } else { 0 }})
    }

    #[test]
    fn the_query_searches_offline_and_reads_the_history_and_last_results() {
        assert!(SCRIPT.contains("New-Object -ComObject Microsoft.Update.Session"));
        assert!(SCRIPT.contains("$searcher.Online = $false"));
        let online_off = SCRIPT.find("$searcher.Online = $false").unwrap();
        assert!(
            online_off < SCRIPT.find("$searcher.Search(").unwrap(),
            "offline before the search"
        );
        assert!(SCRIPT.contains("Search('IsInstalled=0 and IsHidden=0')"));
        assert!(SCRIPT.contains("QueryHistory(0, [Math]::Min(50, $total))"));
        assert_eq!(HISTORY_READ, 50);
        assert!(SCRIPT.contains("(New-Object -ComObject Microsoft.Update.AutoUpdate).Results"));
        assert!(SCRIPT.contains("LastSearchSuccessDate") && SCRIPT.contains("LastInstallationSuccessDate"));
        assert!(SCRIPT.contains("(New-Object -ComObject Microsoft.Update.SystemInfo).RebootRequired"));
        assert!(SCRIPT.contains(&format!("Select-Object -First {MAX_LISTED}")));
    }

    #[test]
    fn kb_numbers_come_from_titles() {
        assert_eq!(
            kb_in("2026-05 Cumulative Update for Windows 11 Version 24H2 for x64-based Systems (KB5058411)").as_deref(),
            Some("KB5058411")
        );
        assert_eq!(
            kb_in("Security Intelligence Update for Microsoft Defender Antivirus - KB2267602 (Version 1.429.93.0)")
                .as_deref(),
            Some("KB2267602")
        );
        assert_eq!(kb_in("Intel - System - 10.1.1.44"), None);
        assert_eq!(kb_in("NOTKB1234567 then (KB123)"), None);
    }

    #[test]
    fn recent_keeps_installs_of_the_last_30_days_and_names_failures() {
        let history = psjson::rows_of(json!([
            history_row("Update (KB5039211)", "2026-06-02T04:00:00Z", 4),
            history_row("Update (KB5037853)", "2026-05-15T04:00:00Z", 2),
            {"Title": "Update (KB5037853)", "Date": "2026-05-20T04:00:00Z", "Operation": 2, "ResultCode": 2, "HResult": 0},
            {"Title": null, "Date": "2026-05-21T04:00:00Z", "Operation": 1, "ResultCode": 0, "HResult": 0},
            history_row("Old (KB5030000)", "2026-04-01T04:00:00Z", 4),
        ]))
        .unwrap();
        let recent = recent(history, Some(5), NOW);
        assert_eq!(recent.count, 2);
        assert_eq!(recent.failed, vec![("KB5039211".to_owned(), false)]);
        assert_eq!(recent.entries[0]["error_code"], "0x80070643");
        assert_eq!(recent.entries[1]["result"], "succeeded");
        assert_eq!(recent.entries[1]["error_code"], Value::Null);
        assert!(!recent.cut);
    }

    #[test]
    fn a_full_history_still_inside_the_window_is_marked_truncated() {
        let rows: Vec<Value> = (0..50)
            .map(|i| history_row(&format!("Definition (KB22676{i:02})"), "2026-06-01T00:00:00Z", 2))
            .collect();
        let recent = recent(psjson::rows_of(Value::Array(rows)).unwrap(), Some(300), NOW);
        assert_eq!((recent.count, recent.entries.len(), recent.cut), (50, MAX_LISTED, true));
    }

    #[test]
    fn warns_on_an_old_check_and_on_failures() {
        let fresh =
            json!({"LastSearchSuccessDate": "2026-06-04T10:00:00Z", "History": [], "PendingCount": 0, "Pending": []});
        let ok = build(fresh.as_object().unwrap(), NOW);
        assert_eq!(
            (ok["status"].as_str(), ok["summary"].as_str()),
            (Some("ok"), Some("nothing pending; last checked less than a day ago"))
        );
        let stale = json!({"LastSearchSuccessDate": "2026-05-20T00:00:00Z", "PendingCount": 0});
        let stale = build(stale.as_object().unwrap(), NOW);
        assert_eq!(stale["status"], "warn");
        assert!(
            stale["summary"]
                .as_str()
                .unwrap()
                .starts_with("last successful check for updates 16 days ago")
        );
        let never = build(json!({}).as_object().unwrap(), NOW);
        assert_eq!(never["status"], "warn");
        assert_eq!(never["last_check"], Value::Null);
        let failed = json!({"LastSearchSuccessDate": "2026-06-04T10:00:00Z", "History": [history_row("X (KB5039211)", "2026-06-02T04:00:00Z", 4)]});
        let failed = build(failed.as_object().unwrap(), NOW);
        assert_eq!(failed["status"], "warn");
        assert_eq!(failed["recent"][0]["result"], "failed");
        let retried = json!({"LastSearchSuccessDate": "2026-06-04T10:00:00Z", "History": [
            history_row("X (KB5039211)", "2026-06-03T04:00:00Z", 2),
            history_row("X (KB5039211)", "2026-06-02T04:00:00Z", 4),
            history_row("Y (KB5039999)", "2026-06-01T04:00:00Z", 4),
            history_row("Y (KB5039999)", "2026-05-30T04:00:00Z", 2),
        ]});
        let retried = build(retried.as_object().unwrap(), NOW);
        assert_eq!(
            retried["status"], "warn",
            "the server warns on any failure; so does the agent"
        );
        assert!(
            retried["summary"]
                .as_str()
                .unwrap()
                .starts_with("2 updates failed in the last 30 days: KB5039211 (installed since), KB5039999;"),
            "{}",
            retried["summary"]
        );
    }

    #[test]
    fn a_silent_windows_update_says_why_in_any_language() {
        let disabled = json!({"Failure": "Ausnahme beim Aufrufen von \"GetTotalHistoryCount\" mit 0 Argument(en):  \"Ausnahme von HRESULT: 0x80070422\""});
        let section = build(disabled.as_object().unwrap(), NOW);
        assert_eq!(section["status"], "crit");
        assert_eq!(
            section["summary"],
            "Windows Update cannot be read: the Windows Update service (wuauserv) is disabled"
        );
        assert_eq!(section["error_code"], "0x80070422");
        let locked = json!({"Failure": "Cannot create type. Only core types are supported in this language mode."});
        let section = build(locked.as_object().unwrap(), NOW);
        assert_eq!(section["status"], "warn");
        assert_eq!(section["error_code"], Value::Null);
        assert_eq!(hresult_in("HRESULT: 0x8024a000."), Some("0x8024A000".to_owned()));
        assert_eq!(hresult_in("0x1234"), None);
    }

    #[test]
    fn pending_updates_carry_kb_and_severity() {
        let row = psjson::rows_of(json!({"Title": "2026-06 Cumulative Update (KB5060842)", "KBArticleIDs": ["5060842"], "MsrcSeverity": "Critical"})).unwrap();
        assert_eq!(
            pending_entry(&row[0]),
            json!({"kb": "KB5060842", "title": "2026-06 Cumulative Update (KB5060842)", "severity": "critical"})
        );
        let row = psjson::rows_of(
            json!({"Title": "Intel - Display - 31.0.101.5590", "KBArticleIDs": [], "MsrcSeverity": null}),
        )
        .unwrap();
        assert_eq!(
            pending_entry(&row[0]),
            json!({"kb": null, "title": "Intel - Display - 31.0.101.5590", "severity": null})
        );
    }
}
