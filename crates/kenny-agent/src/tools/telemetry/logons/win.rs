//! The logon_failures section on Windows: event 4625 ("An account failed to log on") in the Security log.
//!
//! The script reads the last 24 hours (at most `MaxEvents`, newest first: Get-WinEvent
//! renders every event's message, a few milliseconds each, so more would not fit the
//! time a collection has; the server's worst level starts far below) and groups
//! them in PowerShell by target user and logon type, so a brute force of thousands of
//! attempts comes back as a few lines. Event data is read by its documented position
//! (TargetUserName is the 6th field, LogonType the 11th), which no display language
//! changes. "No events were found" is the quiet case, not an error; reading the
//! Security log needs administrator rights (the agent runs as SYSTEM), so a refusal is
//! a real failure.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::super::command::Output;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section};
use super::{Tally, judged};
use crate::tools::psjson;

/// What the query reports its findings from.
const SOURCE: &str = "security_log";

pub(in super::super) static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(12),
    parse,
};

const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$maxEvents = 2000
$since = (Get-Date).AddHours(-24)
$localUsers = $null
try { $localUsers = @(Get-LocalUser | ForEach-Object { $_.Name }) } catch { }
try {
  $events = @(Get-WinEvent -FilterHashtable @{ LogName = 'Security'; Id = 4625; StartTime = $since } -MaxEvents $maxEvents)
} catch {
  if ($_.FullyQualifiedErrorId -like 'NoMatchingEventsFound*') { $events = @() } else { throw }
}
$groups = @($events | Group-Object -Property { '{0}|{1}' -f $_.Properties[5].Value, $_.Properties[10].Value } | ForEach-Object {
  $first = $_.Group[0]
  [pscustomobject]@{ User = [string]$first.Properties[5].Value; LogonType = [int]$first.Properties[10].Value; Count = $_.Count }
})
[pscustomobject]@{
  MaxEvents = $maxEvents
  Total = $events.Count
  Groups = $groups
  LocalUsers = $localUsers
} | ConvertTo-Json -Compress -Depth 4
"#;

fn parse(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Value::Object(root) = value else {
        return Err(format!("the logon-failures query printed {value} instead of an object"));
    };
    let groups = psjson::rows_of(root.get("Groups").cloned().unwrap_or(Value::Null))?;
    let local = local_users(&root);
    let total = psjson::number(&root, "Total")
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0);
    let max = psjson::number(&root, "MaxEvents").and_then(|n| u64::try_from(n).ok());
    // At the cap, older attempts inside the window were left unread.
    let cut = max.is_some_and(|max| total >= max);
    let mut section = tally(&groups, local.as_ref(), total, cut);
    if local.is_none() {
        section.insert(
            "note".into(),
            "the local accounts could not be listed (Get-LocalUser failed): every name is counted as unmatched".into(),
        );
    }
    Ok(section)
}

/// Local account names, lowercased (Windows compares them without case) and mapped to
/// their own spelling.
fn local_users(root: &Map<String, Value>) -> Option<HashMap<String, String>> {
    let names = match root.get("LocalUsers")? {
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>(),
        Value::String(one) => vec![one.as_str()],
        _ => return None,
    };
    Some(names.into_iter().map(|n| (n.to_lowercase(), n.to_owned())).collect())
}

fn tally(groups: &[Map<String, Value>], local: Option<&HashMap<String, String>>, total: u64, cut: bool) -> Section {
    let mut per_account: HashMap<&str, Tally> = HashMap::new();
    let mut matched = 0u64;
    for group in groups {
        let count = psjson::number(group, "Count")
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0);
        let user = psjson::text(group, "User").unwrap_or_default();
        let Some(name) = local.and_then(|l| l.get(&user.trim().to_lowercase())) else {
            continue;
        };
        matched += count;
        let entry = per_account.entry(name.as_str()).or_insert_with(|| Tally {
            name: name.clone(),
            count: 0,
            types: BTreeSet::new(),
        });
        entry.count += count;
        entry
            .types
            .insert(logon_type(psjson::number(group, "LogonType").unwrap_or(-1)));
    }
    // The groups add up to the total; whatever is not a local account is unmatched,
    // including names the script could not read.
    let total = total.max(matched);
    judged(per_account.into_values().collect(), total, total - matched, cut, SOURCE)
}

/// Logon types as Windows documents them for event 4624/4625.
fn logon_type(code: i64) -> &'static str {
    match code {
        2 => "interactive",
        3 => "network",
        4 => "batch",
        5 => "service",
        7 => "unlock",
        8 => "network_cleartext",
        9 => "new_credentials",
        10 => "remote_interactive",
        11 => "cached_interactive",
        12 => "cached_remote_interactive",
        13 => "cached_unlock",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_query_reads_event_4625_of_the_last_day_from_the_security_log() {
        let query = super::super::windows_query().expect("logon_failures has a Windows query");
        assert!(std::ptr::eq(query, &QUERY));
        for needle in [
            "Get-WinEvent -FilterHashtable @{ LogName = 'Security'; Id = 4625; StartTime = $since }",
            "(Get-Date).AddHours(-24)",
            "-MaxEvents $maxEvents",
            "'NoMatchingEventsFound*'",
            "$_.Properties[5].Value",
            "$_.Properties[10].Value",
            "Get-LocalUser",
        ] {
            assert!(SCRIPT.contains(needle), "the script lacks {needle}");
        }
        assert!(SCRIPT.contains(&format!("AddHours(-{})", super::super::WINDOW_HOURS)));
    }

    #[test]
    fn local_names_match_without_case_and_others_are_only_counted() {
        let groups = psjson::rows_of(json!([
            {"User": "PAPA", "LogonType": 2, "Count": 3},
            {"User": "papa", "LogonType": 10, "Count": 9},
            {"User": "admin", "LogonType": 3, "Count": 400},
            {"User": "", "LogonType": 3, "Count": 2},
        ]))
        .unwrap();
        let local = Some(HashMap::from([("papa".to_owned(), "Papa".to_owned())]));
        let section = tally(&groups, local.as_ref(), 414, false);
        assert_eq!(
            section["accounts"],
            json!([{"name": "Papa", "count": 12, "types": ["interactive", "remote_interactive"]}])
        );
        assert_eq!(section["unmatched_count"], 402);
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "414 failed logons in 24h; 12 for local account Papa"
        );
        assert!(!serde_json::to_string(&section).unwrap().contains("admin"));
        let unknown = tally(&groups, None, 414, true);
        assert_eq!(unknown["accounts"], json!([]));
        assert_eq!(unknown["unmatched_count"], 414);
        assert_eq!(unknown["truncated"], true);
        assert_eq!(logon_type(11), "cached_interactive");
        assert_eq!(logon_type(0), "other");
    }
}
