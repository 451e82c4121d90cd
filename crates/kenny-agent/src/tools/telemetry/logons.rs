//! The logon_failures section: failed logins in the last 24 hours, per local account.
//!
//! Sources, first readable wins (they record the same attempts, so they are not added):
//! 1. `/var/log/btmp`, read directly: glibc `struct utmp` records of 384 bytes on
//!    x86_64 and aarch64 (type i16 + pad, pid i32, line[32], id[4], user[32],
//!    host[256], exit 2×i16, session i32, tv_sec i32, tv_usec i32, addr[16],
//!    reserved[20]). Written by `login` and sshd for every failed attempt.
//! 2. `/var/log/auth.log` (Debian/Ubuntu) or `/var/log/secure` (RHEL-like): sshd's
//!    "Failed password for ..." and login's "FAILED LOGIN ... FOR '...'" lines.
//! 3. The journal (`journalctl -t sshd -t sshd-session -t login`), when systemd runs.
//!
//! Names that are not local accounts are only counted (`unmatched_count`): they are
//! mostly guesses by scanners, sometimes a password typed into the user field.
//! Status: warn when one local account has `WARN_PER_ACCOUNT` or more failures in the
//! window (someone may be guessing a real account's password); scanner noise against
//! unknown names does not warn.
//!
//! On Windows the Security log's event 4625 is read instead: see [`win`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

use super::accounts::parse_passwd;
use super::command;
use super::files::{CONFIG_CAP, etc_root, read_tail, read_text};
use super::{Outcome, Status, not_collected_here, section};
use crate::tools::systemd::is_running as systemd_running;

mod win;

const WINDOW_HOURS: i64 = 24;
const WARN_PER_ACCOUNT: u64 = 10;
const MAX_ACCOUNTS: usize = 50;
const BTMP: &str = "/var/log/btmp";
const AUTH_LOGS: &[&str] = &["/var/log/auth.log", "/var/log/secure"];
const UTMP_RECORD: usize = 384;
/// The newest part of btmp: ~43k attempts, a day of a busy brute-force.
const BTMP_TAIL: u64 = 16 * 1024 * 1024;
const LOG_TAIL: u64 = 8 * 1024 * 1024;
const JOURNAL_TIMEOUT: Duration = Duration::from_secs(8);

/// One failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    user: String,
    at: i64,
    remote: bool,
}

/// What one source yielded: attempts, and whether older ones were left unread.
struct Found {
    source: &'static str,
    failures: Vec<Failure>,
    cut: bool,
}

pub(super) async fn logon_failures_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let now = OffsetDateTime::now_utc();
    let since = now.unix_timestamp() - WINDOW_HOURS * 3600;
    let found = match super::off_thread("logon_failures", move || from_files(now))
        .await
        .map_err(|e| format!("reading login records failed: {e}"))?
    {
        Some(found) => Some(found),
        None if systemd_running() => from_journal(now).await,
        None => None,
    };
    let local: HashSet<String> = read_text(&etc_root().join("passwd"), CONFIG_CAP)
        .map(|(t, _)| parse_passwd(&t).into_iter().map(|u| u.name).collect())
        .unwrap_or_default();
    Ok(build(found, since, &local))
}

fn from_files(now: OffsetDateTime) -> Option<Found> {
    let btmp_layout = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
    if btmp_layout && let Ok((bytes, cut)) = read_tail(Path::new(BTMP), BTMP_TAIL, UTMP_RECORD as u64) {
        return Some(Found {
            source: "btmp",
            failures: parse_btmp(&bytes),
            cut,
        });
    }
    for path in AUTH_LOGS {
        if let Ok((bytes, cut)) = read_tail(Path::new(path), LOG_TAIL, 1) {
            let text = String::from_utf8_lossy(&bytes);
            return Some(Found {
                source: if path.ends_with("secure") { "secure" } else { "auth.log" },
                failures: parse_auth_log(&text, now),
                cut,
            });
        }
    }
    None
}

async fn from_journal(now: OffsetDateTime) -> Option<Found> {
    let since = format!("--since=-{WINDOW_HOURS}h");
    // OpenSSH 9.8 and later log authentication as `sshd-session`. Matched on `_COMM`,
    // which journald takes from the process itself: any user can log under the name
    // `sshd` (`logger -t sshd`), none can be a process named so without running one.
    let args = [
        "-q",
        "--no-pager",
        "-o",
        "short-iso",
        &since,
        "_COMM=sshd",
        "_COMM=sshd-session",
        "_COMM=login",
    ];
    let output = command::run("journalctl", &args, JOURNAL_TIMEOUT).await.ok()?;
    output.success.then(|| Found {
        source: "journal",
        failures: parse_auth_log(&output.stdout, now),
        cut: output.truncated,
    })
}

/// Failed attempts in btmp's records; empty user names (an aborted prompt) are skipped.
fn parse_btmp(bytes: &[u8]) -> Vec<Failure> {
    bytes
        .chunks_exact(UTMP_RECORD)
        .filter_map(|record| {
            let user = c_string(&record[44..76]);
            if user.is_empty() {
                return None;
            }
            let line = c_string(&record[8..40]);
            let host = c_string(&record[76..332]);
            let at = i32::from_ne_bytes(record[340..344].try_into().ok()?);
            Some(Failure {
                user,
                at: i64::from(at),
                remote: line.starts_with("ssh") || !host.is_empty(),
            })
        })
        .collect()
}

fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).trim().to_owned()
}

/// Failed logins in syslog-style lines. Timestamps: RFC 3339 (rsyslog's default on
/// Debian 12), journalctl's short-iso (`+0000` offsets), or the traditional
/// `Nov 30 13:17:01`, which has neither year nor zone: read as UTC in the year that
/// puts it in the past (so the window edge may be off by the PC's UTC offset).
fn parse_auth_log(text: &str, now: OffsetDateTime) -> Vec<Failure> {
    let mut failures = Vec::new();
    for line in text.lines() {
        let Some((at, message)) = timestamp(line, now) else {
            continue;
        };
        let (repeat, message) = repeated(message);
        let Some((user, remote)) = failed_login(message) else {
            continue;
        };
        for _ in 0..repeat {
            failures.push(Failure {
                user: user.clone(),
                at,
                remote,
            });
        }
    }
    failures
}

/// Splits off the timestamp; returns the Unix time and the rest of the line.
fn timestamp(line: &str, now: OffsetDateTime) -> Option<(i64, &str)> {
    let (first, rest) = line.split_once(' ')?;
    if first.len() >= 19 && first.as_bytes()[4] == b'-' {
        let at = OffsetDateTime::parse(first, &Rfc3339)
            .or_else(|_| {
                OffsetDateTime::parse(
                    first,
                    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour][offset_minute]"),
                )
            })
            .ok()?;
        return Some((at.unix_timestamp(), rest));
    }
    // "Nov 30 13:17:01 host ..." (the day is space-padded: "Nov  3").
    let stamp = line.get(..15)?;
    let rest = line.get(16..)?;
    let with_year = format!("{} {stamp}", now.year());
    let format = format_description!("[year] [month repr:short] [day padding:space] [hour]:[minute]:[second]");
    let mut at = PrimitiveDateTime::parse(&with_year, format)
        .ok()?
        .assume_offset(UtcOffset::UTC);
    if at > now + time::Duration::days(1) {
        at = at.replace_year(now.year() - 1).ok()?;
    }
    Some((at.unix_timestamp(), rest))
}

/// rsyslog folds repeats: "message repeated 3 times: [ Failed password for ...]".
/// The most one "message repeated N times" line counts for.
const MAX_REPEAT: u32 = 1000;

fn repeated(message: &str) -> (u32, &str) {
    let Some(at) = message.find("message repeated ") else {
        return (1, message);
    };
    let tail = &message[at + "message repeated ".len()..];
    let Some((count, inner)) = tail.split_once(" times: [") else {
        return (1, message);
    };
    // Anyone can write to syslog: a huge count must not become that many records.
    let count = count.trim().parse::<u32>().unwrap_or(1).clamp(1, MAX_REPEAT);
    (count, inner.trim_end_matches(']').trim())
}

/// The user name of a failed login message, and whether it came over the network.
fn failed_login(message: &str) -> Option<(String, bool)> {
    for marker in [
        "Failed password for ",
        "Failed keyboard-interactive/pam for ",
        "Failed none for ",
    ] {
        if let Some(at) = message.find(marker) {
            let rest = &message[at + marker.len()..];
            let rest = rest.strip_prefix("invalid user ").unwrap_or(rest);
            // The name itself may contain spaces; " from " ends it.
            let user = rest.rsplit_once(" from ").map_or(rest, |(u, _)| u);
            return Some((user.trim().to_owned(), true)).filter(|(u, _)| !u.is_empty());
        }
    }
    // login(1): "FAILED LOGIN (1) on '/dev/tty1' FOR 'papa', Authentication failure"
    let at = message.find("FAILED LOGIN")?;
    let rest = &message[at..];
    let user = rest.split_once(" FOR '")?.1.split_once('\'')?.0;
    let remote = rest.contains(" FROM '");
    Some((user.to_owned(), remote)).filter(|(u, _)| !u.is_empty())
}

fn build(found: Option<Found>, since: i64, local: &HashSet<String>) -> super::Section {
    let Some(found) = found else {
        return section(
            Status::Ok,
            "no login-failure records on this PC".to_owned(),
            json!({
                "window_hours": WINDOW_HOURS,
                "accounts": [],
                "unmatched_count": 0,
                "count": 0,
                "truncated": false,
                "source": null,
            }),
        );
    };
    let recent: Vec<&Failure> = found.failures.iter().filter(|f| f.at >= since).collect();
    // If even the oldest record read is inside the window, older ones in the window
    // may have been left unread.
    let cut = found.cut && found.failures.first().is_none_or(|f| f.at >= since);
    let mut per_account: HashMap<&str, (u64, BTreeSet<&'static str>)> = HashMap::new();
    let mut unmatched = 0u64;
    for failure in &recent {
        if local.contains(&failure.user) {
            let entry = per_account.entry(failure.user.as_str()).or_default();
            entry.0 += 1;
            entry.1.insert(if failure.remote { "remote" } else { "interactive" });
        } else {
            unmatched += 1;
        }
    }
    let accounts: Vec<Tally> = per_account
        .into_iter()
        .map(|(name, (count, types))| Tally {
            name: name.to_owned(),
            count,
            types,
        })
        .collect();
    judged(accounts, recent.len() as u64, unmatched, cut, found.source)
}

/// Failed logons against one local account.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tally {
    name: String,
    count: u64,
    /// How the attempts came in (`remote`, `interactive`, and on Windows the logon
    /// type: `network`, `remote_interactive`, ...).
    types: BTreeSet<&'static str>,
}

/// The section from the per-account tallies, on any OS: most-targeted account first,
/// warn when one local account reaches `WARN_PER_ACCOUNT`.
fn judged(mut accounts: Vec<Tally>, count: u64, unmatched: u64, cut: bool, source: &str) -> super::Section {
    accounts.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    let status = if accounts.first().is_some_and(|a| a.count >= WARN_PER_ACCOUNT) {
        Status::Warn
    } else {
        Status::Ok
    };
    // Cut short, the count is only what was read of the window.
    let at_least = if cut { "at least " } else { "" };
    let summary = match (count, accounts.first()) {
        (0, _) => format!("no failed logons in {WINDOW_HOURS}h"),
        (_, Some(top)) if status == Status::Warn => {
            format!(
                "{at_least}{count} failed logons in {WINDOW_HOURS}h; {} for local account {}",
                top.count, top.name
            )
        }
        _ => format!("{at_least}{count} failed logons in {WINDOW_HOURS}h"),
    };
    let listed: Vec<_> = accounts
        .iter()
        .take(MAX_ACCOUNTS)
        .map(|a| json!({"name": a.name, "count": a.count, "types": a.types}))
        .collect();
    section(
        status,
        summary,
        json!({
            "window_hours": WINDOW_HOURS,
            "accounts": listed,
            "unmatched_count": unmatched,
            "count": count,
            "truncated": cut || accounts.len() > MAX_ACCOUNTS,
            "source": source,
        }),
    )
}

pub(super) fn windows_query() -> Option<&'static super::windows::Query> {
    Some(&win::QUERY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-30 14:00:00 UTC);

    fn utmp(user: &str, line: &str, host: &str, at: i32) -> Vec<u8> {
        let mut record = vec![0u8; UTMP_RECORD];
        record[0..2].copy_from_slice(&6i16.to_ne_bytes()); // LOGIN_PROCESS, as sshd writes
        record[4..8].copy_from_slice(&4242i32.to_ne_bytes());
        record[8..8 + line.len()].copy_from_slice(line.as_bytes());
        record[44..44 + user.len()].copy_from_slice(user.as_bytes());
        record[76..76 + host.len()].copy_from_slice(host.as_bytes());
        record[340..344].copy_from_slice(&at.to_ne_bytes());
        record
    }

    #[test]
    fn btmp_records_are_read_directly() {
        let now = NOW.unix_timestamp() as i32;
        let mut bytes = utmp("papa", "ssh:notty", "203.0.113.9", now - 60);
        bytes.extend(utmp("papa", "tty1", "", now - 30));
        bytes.extend(utmp("", "tty2", "", now - 20));
        bytes.extend(utmp("admin", "ssh:notty", "198.51.100.7", now - 10));
        bytes.extend(&[0u8; 100]); // a torn record at the end is ignored
        assert_eq!(
            parse_btmp(&bytes),
            [
                Failure {
                    user: "papa".into(),
                    at: i64::from(now - 60),
                    remote: true
                },
                Failure {
                    user: "papa".into(),
                    at: i64::from(now - 30),
                    remote: false
                },
                Failure {
                    user: "admin".into(),
                    at: i64::from(now - 10),
                    remote: true
                },
            ]
        );
    }

    const AUTH_LOG: &str = "\
2026-11-30T09:12:01.123456+00:00 pc sshd[1201]: Failed password for papa from 203.0.113.9 port 51234 ssh2
2026-11-30T09:12:05.000000+01:00 pc sshd[1201]: Failed password for invalid user admin from 203.0.113.9 port 51234 ssh2
2026-11-30T09:12:07+00:00 pc sshd[1201]: Invalid user admin from 203.0.113.9 port 51234
2026-11-30T09:13:00+00:00 pc sshd[1201]: message repeated 3 times: [ Failed password for root from 203.0.113.9 port 51234 ssh2]
2026-11-30T09:14:00+00:00 pc sshd[1201]: Accepted publickey for papa from 192.0.2.4 port 40000 ssh2
2026-11-30T09:15:00+00:00 pc login[880]: FAILED LOGIN (1) on '/dev/tty1' FOR 'kid', Authentication failure
2026-11-30T09:16:00+0000 pc sshd[1300]: Failed keyboard-interactive/pam for invalid user oracle from 198.51.100.7 port 2222 ssh2
Nov 30 10:00:00 pc sshd[1400]: Failed password for kid from 192.0.2.5 port 1 ssh2
Nov 28 10:00:00 pc sshd[1400]: Failed password for kid from 192.0.2.5 port 1 ssh2
Dec 31 23:59:59 pc sshd[1400]: Failed password for kid from 192.0.2.5 port 1 ssh2
Nov 30 10:00:00 pc CRON[1]: pam_unix(cron:session): session opened for user root
not a log line
";

    #[test]
    fn auth_log_lines_in_every_timestamp_format() {
        let failures = parse_auth_log(AUTH_LOG, NOW);
        let got: Vec<(&str, i64, bool)> = failures.iter().map(|f| (f.user.as_str(), f.at, f.remote)).collect();
        let t = |dt: OffsetDateTime| dt.unix_timestamp();
        assert_eq!(
            got,
            [
                ("papa", t(datetime!(2026-11-30 09:12:01 UTC)), true),
                ("admin", t(datetime!(2026-11-30 08:12:05 UTC)), true),
                ("root", t(datetime!(2026-11-30 09:13:00 UTC)), true),
                ("root", t(datetime!(2026-11-30 09:13:00 UTC)), true),
                ("root", t(datetime!(2026-11-30 09:13:00 UTC)), true),
                ("kid", t(datetime!(2026-11-30 09:15:00 UTC)), false),
                ("oracle", t(datetime!(2026-11-30 09:16:00 UTC)), true),
                ("kid", t(datetime!(2026-11-30 10:00:00 UTC)), true),
                ("kid", t(datetime!(2026-11-28 10:00:00 UTC)), true),
                ("kid", t(datetime!(2025-12-31 23:59:59 UTC)), true),
            ]
        );
    }

    #[test]
    fn login_failures_from_login_and_sshd_messages() {
        assert_eq!(
            failed_login("Failed password for invalid user a b from 1.2.3.4 port 1 ssh2"),
            Some(("a b".into(), true))
        );
        assert_eq!(
            failed_login("FAILED LOGIN (2) on '/dev/pts/1' FROM 'host.example' FOR 'papa', Authentication failure"),
            Some(("papa".into(), true))
        );
        assert_eq!(failed_login("Accepted password for papa from 1.2.3.4"), None);
        assert_eq!(failed_login("Failed publickey for papa from 1.2.3.4 port 1 ssh2"), None);
    }

    fn local() -> HashSet<String> {
        ["papa", "kid", "root"].map(String::from).into()
    }

    #[test]
    fn counts_per_local_account_and_hides_unknown_names() {
        let since = NOW.unix_timestamp() - WINDOW_HOURS * 3600;
        let found = Found {
            source: "auth.log",
            failures: parse_auth_log(AUTH_LOG, NOW),
            cut: false,
        };
        let section = build(Some(found), since, &local());
        assert_eq!(section["status"], "ok");
        assert_eq!(section["summary"], "8 failed logons in 24h");
        assert_eq!(section["count"], 8);
        assert_eq!(section["unmatched_count"], 2);
        assert_eq!(
            section["accounts"],
            json!([
                {"name": "root", "count": 3, "types": ["remote"]},
                {"name": "kid", "count": 2, "types": ["interactive", "remote"]},
                {"name": "papa", "count": 1, "types": ["remote"]},
            ])
        );
        assert!(
            !serde_json::to_string(&section).unwrap().contains("oracle"),
            "unknown names stay out"
        );
        assert_eq!(section["source"], "auth.log");
        assert_eq!(section["window_hours"], 24);
        assert_eq!(section["truncated"], false);
    }

    #[test]
    fn many_failures_against_a_real_account_warn() {
        let now = NOW.unix_timestamp();
        let failures: Vec<Failure> = (0..12)
            .map(|i| Failure {
                user: "papa".into(),
                at: now - i,
                remote: true,
            })
            .chain((0..500).map(|i| Failure {
                user: format!("guess{i}"),
                at: now,
                remote: true,
            }))
            .collect();
        let section = build(
            Some(Found {
                source: "btmp",
                failures,
                cut: true,
            }),
            now - 86_400,
            &local(),
        );
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "at least 512 failed logons in 24h; 12 for local account papa"
        );
        assert_eq!(section["unmatched_count"], 500);
        assert_eq!(section["truncated"], true, "the tail read started inside the window");

        let noise: Vec<Failure> = (0..500)
            .map(|i| Failure {
                user: format!("guess{i}"),
                at: now,
                remote: true,
            })
            .collect();
        assert_eq!(
            build(
                Some(Found {
                    source: "btmp",
                    failures: noise,
                    cut: false
                }),
                now - 86_400,
                &local()
            )["status"],
            "ok"
        );
    }

    #[test]
    fn empty_and_missing_sources() {
        let empty = build(
            Some(Found {
                source: "btmp",
                failures: vec![],
                cut: false,
            }),
            0,
            &local(),
        );
        assert_eq!(empty["summary"], "no failed logons in 24h");
        assert_eq!(empty["count"], 0);
        let none = build(None, 0, &local());
        assert_eq!(none["status"], "ok");
        assert_eq!(none["summary"], "no login-failure records on this PC");
        assert_eq!(none["accounts"], json!([]));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers() {
        let section = logon_failures_section().await.unwrap();
        assert_eq!(section["window_hours"], 24);
        assert!(section["count"].is_u64());
    }
}
