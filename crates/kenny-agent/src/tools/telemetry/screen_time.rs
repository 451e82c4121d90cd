//! The screen_time section: minutes a person was logged on at this PC's screen, per day over the last 7 days and per user.
//!
//! Time counts while a local (console or graphical) logon session is open, whether or
//! not the person touches the keyboard: logon records tell when a session started and
//! ended, not when the screen was locked. On Linux remote sessions (SSH, terminals
//! inside a session) are left out; on Windows, Winlogon's events do not tell a Remote
//! Desktop session from one at the screen, so those count too. Days are UTC dates; overlapping sessions (two users, or one
//! on two consoles) count once per day, and once per user.
//!
//! Windows: Winlogon's logon/logoff events (7001/7002, System log) with the event log
//! service's start/stop (6005/6006) closing sessions cut by a shutdown or crash; one
//! PowerShell query. Linux: see [`linux`] (wtmp or wtmpdb, and systemd-logind's
//! current sessions).

mod linux;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::browser_extensions::browsers::capped;
use super::command::Output;
use super::format::ymd;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status};
use crate::tools::psjson;

const WINDOW_DAYS: i64 = 7;
const MAX_USERS: usize = 50;
const MAX_ERRORS: usize = 20;

/// One logon session, in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    user: String,
    start: i64,
    end: i64,
}

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(12),
    parse,
};

/// Eight days back, so a session that started before the 7-day window is still seen
/// opening. Names are resolved once per SID; a SID that no longer resolves (a deleted
/// account) stays a SID.
const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$filter = @{ LogName = 'System'; Id = 7001, 7002, 6005, 6006; StartTime = (Get-Date).AddDays(-8) }
try {
  $events = @(Get-WinEvent -FilterHashtable $filter -MaxEvents 20000)
} catch {
  if ($_.FullyQualifiedErrorId -like 'NoMatchingEventsFound*') { $events = @() } else { throw }
}
$names = @{}
$rows = @($events | ForEach-Object {
  $sid = $null; $session = $null; $user = $null
  if ($_.Id -eq 7001 -or $_.Id -eq 7002) {
    $session = $_.Properties[0].Value
    $sid = [string]$_.Properties[1].Value
    if (-not $names.ContainsKey($sid)) {
      try { $names[$sid] = (New-Object System.Security.Principal.SecurityIdentifier($sid)).Translate([System.Security.Principal.NTAccount]).Value } catch { $names[$sid] = $null }
    }
    $user = $names[$sid]
  }
  [ordered]@{ Id = $_.Id; Provider = $_.ProviderName; Time = $_.TimeCreated.ToUniversalTime().ToString('o'); Session = $session; Sid = $sid; User = $user }
})
ConvertTo-Json -InputObject $rows -Compress -Depth 3
"#;

pub(super) async fn section() -> Outcome {
    super::off_thread("screen_time", linux::collect)
        .await
        .map_err(|e| format!("reading login records failed: {e}"))
}

fn parse(output: &Output, now: OffsetDateTime) -> Outcome {
    let rows = psjson::rows_of(json_of(output)?)?;
    let mut events: Vec<(i64, WinEvent)> = rows
        .iter()
        .filter_map(|row| {
            let at = psjson::date(row.get("Time")?)?.unix_timestamp();
            let provider = psjson::text(row, "Provider").unwrap_or_default();
            let event = match (psjson::number(row, "Id")?, provider.as_str()) {
                (7001, "Microsoft-Windows-Winlogon") => WinEvent::Logon(session_key(row)?),
                (7002, "Microsoft-Windows-Winlogon") => WinEvent::Logoff(session_key(row)?),
                (6005, "EventLog") => WinEvent::Boot,
                (6006, "EventLog") => WinEvent::Shutdown,
                _ => return None,
            };
            Some((at, event))
        })
        .collect();
    // Get-WinEvent lists newest first.
    events.sort_by_key(|(at, _)| *at);
    let sessions = windows_sessions(&events, now.unix_timestamp());
    Ok(build(&sessions, now, "eventlog", Vec::new()))
}

/// A Windows session: its session id, and the user (account name, else the SID).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WinSession(i64, String);

#[derive(Debug)]
enum WinEvent {
    Logon(WinSession),
    Logoff(WinSession),
    Boot,
    Shutdown,
}

/// Service and virtual accounts are not people at the screen.
fn is_person(sid: &str) -> bool {
    !matches!(sid, "S-1-5-18" | "S-1-5-19" | "S-1-5-20")
        && !sid.starts_with("S-1-5-90-")
        && !sid.starts_with("S-1-5-96-")
}

fn session_key(row: &serde_json::Map<String, Value>) -> Option<WinSession> {
    let sid = psjson::text(row, "Sid")?;
    if !is_person(&sid) {
        return None;
    }
    let user = psjson::text(row, "User")
        .map(|name| name.rsplit('\\').next().unwrap_or(&name).to_owned())
        .unwrap_or(sid);
    Some(WinSession(psjson::number(row, "Session").unwrap_or(-1), user))
}

/// Pairs logons with logoffs. A clean shutdown ends every open session; a boot with
/// sessions still open means the PC went down without one (power cut, crash), and
/// they are taken to have ended at the last event before it.
fn windows_sessions(events: &[(i64, WinEvent)], now: i64) -> Vec<Session> {
    let mut open: HashMap<WinSession, i64> = HashMap::new();
    let mut sessions = Vec::new();
    let mut last = i64::MIN;
    for (at, event) in events {
        match event {
            WinEvent::Logon(key) => {
                open.entry(key.clone()).or_insert(*at);
            }
            WinEvent::Logoff(key) => {
                if let Some(start) = open.remove(key) {
                    sessions.push(Session {
                        user: key.1.clone(),
                        start,
                        end: *at,
                    });
                }
            }
            WinEvent::Shutdown => close_all(&mut open, *at, &mut sessions),
            WinEvent::Boot => close_all(&mut open, last, &mut sessions),
        }
        last = *at;
    }
    close_all(&mut open, now, &mut sessions);
    sessions
}

fn close_all(open: &mut HashMap<WinSession, i64>, at: i64, sessions: &mut Vec<Session>) {
    let mut ended: Vec<Session> = open
        .drain()
        .map(|(WinSession(_, user), start)| Session {
            user,
            start,
            end: at.max(start),
        })
        .collect();
    // HashMap order is random; keep the output stable.
    ended.sort_by_key(|s| s.start);
    sessions.extend(ended);
}

/// Seconds of the union of `intervals` (which may overlap) inside `[from, to)`.
fn covered(intervals: &mut [(i64, i64)], from: i64, to: i64) -> i64 {
    intervals.sort_unstable();
    let mut total = 0;
    let mut reach = from;
    for &(start, end) in intervals.iter() {
        let (start, end) = (start.max(reach), end.min(to));
        if end > start {
            total += end - start;
            reach = end;
        }
    }
    total
}

fn build(sessions: &[Session], now: OffsetDateTime, source: &str, errors: Vec<String>) -> Section {
    let today = now.date();
    let first_day = today - time::Duration::days(WINDOW_DAYS - 1);
    let window_start = first_day.midnight().assume_utc().unix_timestamp();
    let now_unix = now.unix_timestamp();
    let mut all: Vec<(i64, i64)> = sessions.iter().map(|s| (s.start, s.end.min(now_unix))).collect();
    let mut days = Vec::new();
    let mut today_minutes = 0;
    let mut total_minutes = 0;
    for offset in 0..WINDOW_DAYS {
        let date = first_day + time::Duration::days(offset);
        let from = date.midnight().assume_utc().unix_timestamp();
        let minutes = covered(&mut all, from, from + 86_400) / 60;
        total_minutes += minutes;
        if date == today {
            today_minutes = minutes;
        }
        days.push(json!({"date": ymd(date), "active_minutes": minutes}));
    }
    let mut per_user: BTreeMap<&str, Vec<(i64, i64)>> = BTreeMap::new();
    for s in sessions {
        per_user
            .entry(&s.user)
            .or_default()
            .push((s.start, s.end.min(now_unix)));
    }
    let mut users: Vec<(String, i64)> = per_user
        .into_iter()
        .map(|(name, mut spans)| (capped(name), covered(&mut spans, window_start, now_unix) / 60))
        .filter(|(_, minutes)| *minutes > 0)
        .collect();
    users.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let user_count = users.len();
    let users: Vec<Value> = users
        .into_iter()
        .take(MAX_USERS)
        .map(|(name, minutes)| json!({"name": name, "minutes": minutes}))
        .collect();
    let summary = format!(
        "{} today, {} over {WINDOW_DAYS} days",
        hours(today_minutes),
        hours(total_minutes)
    );
    let errors: Vec<String> = errors.iter().take(MAX_ERRORS).map(|e| capped(e)).collect();
    super::section(
        Status::Ok,
        summary,
        json!({
            "window_days": WINDOW_DAYS,
            "days": days,
            "users": users,
            "user_count": user_count,
            "source": source,
            "errors": errors,
        }),
    )
}

/// Minutes as hours with one decimal, as people say screen time ("3.4h").
fn hours(minutes: i64) -> String {
    format!("{:.1}h", minutes as f64 / 60.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-06-05 12:00 UTC);

    fn at(t: OffsetDateTime) -> i64 {
        t.unix_timestamp()
    }

    #[test]
    fn the_query_reads_winlogon_and_eventlog_start_stop_from_the_system_log() {
        for needle in [
            "LogName = 'System'",
            "Id = 7001, 7002, 6005, 6006",
            "Get-WinEvent -FilterHashtable $filter",
            "NoMatchingEventsFound",
            "System.Security.Principal.NTAccount",
            "ConvertTo-Json -InputObject $rows -Compress -Depth 3",
        ] {
            assert!(QUERY.script.contains(needle), "{needle}");
        }
    }

    #[test]
    fn sessions_are_cut_at_midnight_and_overlaps_count_once() {
        let sessions = [
            // 22:00 to 02:00 across midnight: 2h on each day.
            Session {
                user: "alice".into(),
                start: at(datetime!(2026-06-03 22:00 UTC)),
                end: at(datetime!(2026-06-04 02:00 UTC)),
            },
            // bob overlaps alice for an hour on the 4th.
            Session {
                user: "bob".into(),
                start: at(datetime!(2026-06-04 01:00 UTC)),
                end: at(datetime!(2026-06-04 03:00 UTC)),
            },
            // Still open: counts to now.
            Session {
                user: "alice".into(),
                start: at(datetime!(2026-06-05 09:00 UTC)),
                end: at(datetime!(2026-06-05 12:00 UTC)),
            },
            // Before the window: not counted.
            Session {
                user: "carol".into(),
                start: at(datetime!(2026-05-20 09:00 UTC)),
                end: at(datetime!(2026-05-20 10:00 UTC)),
            },
        ];
        let got = build(&sessions, NOW, "wtmp", Vec::new());
        let days: Vec<(String, i64)> = got["days"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["date"].as_str().unwrap().to_owned(),
                    d["active_minutes"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(days.len(), 7);
        assert_eq!(days[0].0, "2026-05-30");
        assert_eq!(days[4], ("2026-06-03".to_owned(), 120));
        assert_eq!(days[5], ("2026-06-04".to_owned(), 180));
        assert_eq!(days[6], ("2026-06-05".to_owned(), 180));
        assert_eq!(
            got["users"],
            json!([{"name": "alice", "minutes": 420}, {"name": "bob", "minutes": 120}])
        );
        assert_eq!(got["summary"], "3.0h today, 8.0h over 7 days");
    }

    #[test]
    fn windows_events_pair_and_a_crash_ends_sessions_at_the_last_event() {
        let alice = WinSession(1, "alice".into());
        let t = |h: i64| at(datetime!(2026-06-04 00:00 UTC)) + h * 3600;
        let events = vec![
            (t(8), WinEvent::Logon(alice.clone())),
            (t(9), WinEvent::Logoff(alice.clone())),
            (t(10), WinEvent::Logon(alice.clone())),
            (t(11), WinEvent::Logoff(WinSession(2, "alice".into()))),
            (t(12), WinEvent::Boot),
            (t(13), WinEvent::Logon(alice.clone())),
            (t(14), WinEvent::Shutdown),
            (t(15), WinEvent::Boot),
            (t(16), WinEvent::Logon(alice.clone())),
        ];
        let sessions = windows_sessions(&events, t(20));
        let spans: Vec<(i64, i64)> = sessions
            .iter()
            .map(|s| ((s.start - t(0)) / 3600, (s.end - t(0)) / 3600))
            .collect();
        assert_eq!(spans, [(8, 9), (10, 11), (13, 14), (16, 20)]);
    }
}
