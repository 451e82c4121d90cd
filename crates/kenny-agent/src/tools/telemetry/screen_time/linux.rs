//! Logon sessions on Linux: closed ones from the login records, open ones from systemd-logind.
//!
//! - `/var/log/wtmp`: glibc `struct utmp` records of 384 bytes on x86_64 and aarch64
//!   (type i16 + pad, pid i32, line[32], id[4], user[32], host[256], exit, session,
//!   tv_sec i32, ...). `USER_PROCESS` (7) opens a session on a line, `DEAD_PROCESS` (8)
//!   closes it, a shutdown record (`RUN_LVL` by "shutdown") closes all, and a boot
//!   (`BOOT_TIME`) with sessions still open means a crash: they end at the last record
//!   before it.
//! - `/var/lib/wtmpdb/wtmp.db` (Debian 13 and others that replaced wtmp): a SQLite
//!   table `wtmp` with `User`, `Login`, `Logout` (microseconds), `TTY`, `RemoteHost`.
//! - `/run/systemd/sessions/<id>`: logind's current sessions (`USER`, `TYPE`, `CLASS`,
//!   `REMOTE`, `REALTIME` in microseconds). When logind runs, it says which sessions
//!   are open now; sessions a record file leaves open but logind does not know ended
//!   with a crash the file did not see, and are not counted.
//!
//! Only local consoles and graphical seats count (`tty*`, `:N`, `seat*`): `pts/*` lines
//! are SSH logins or terminals inside a session already counted.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use time::OffsetDateTime;

use super::super::files::{read_small, read_tail};
use super::super::{Section, not_applicable};
use super::{Session, WINDOW_DAYS, build};

const UTMP_RECORD: usize = 384;
/// The newest records: ~87k logins, reboots and logouts, years of a desktop.
const WTMP_TAIL: u64 = 32 * 1024 * 1024;
const MAX_LOGIND_SESSIONS: usize = 500;
const USER_PROCESS: i16 = 7;
const DEAD_PROCESS: i16 = 8;
const BOOT_TIME: i16 = 2;
const RUN_LVL: i16 = 1;

pub(super) fn collect() -> Section {
    collect_at(Path::new("/"), OffsetDateTime::now_utc())
}

/// `root` stands in for `/` (`var/log/wtmp`, `var/lib/wtmpdb`, `run/systemd/sessions`).
pub(super) fn collect_at(root: &Path, now: OffsetDateTime) -> Section {
    let now_unix = now.unix_timestamp();
    let since = now_unix - (WINDOW_DAYS + 1) * 86_400;
    let mut errors = Vec::new();
    let logind = logind_sessions(&root.join("run/systemd/sessions"));
    let wtmpdb = root.join("var/lib/wtmpdb/wtmp.db");
    let wtmp = root.join("var/log/wtmp");
    let records = if wtmpdb.is_file() {
        Some(("wtmpdb", from_wtmpdb(&wtmpdb, since)))
    } else if wtmp.exists() {
        Some(("wtmp", from_wtmp(&wtmp)))
    } else {
        None
    };
    let mut sessions = Vec::new();
    let mut sources = Vec::new();
    if let Some((name, read)) = records {
        match read {
            Ok((closed, open)) => {
                sources.push(name);
                sessions.extend(closed);
                if logind.is_none() {
                    sessions.extend(open.into_iter().map(|(user, start)| Session {
                        user,
                        start,
                        end: now_unix,
                    }));
                }
            }
            Err(why) => errors.push(why),
        }
    }
    if let Some(current) = logind {
        sources.push("logind");
        sessions.extend(current.into_iter().map(|(user, start)| Session {
            user,
            start,
            end: now_unix,
        }));
    }
    if sources.is_empty() && errors.is_empty() {
        return not_applicable("no login records here: no /var/log/wtmp, no wtmpdb and no systemd-logind sessions");
    }
    build(&sessions, now, &sources.join("+"), errors)
}

/// Closed sessions, and those still open at the end (user, start).
type Sessions = (Vec<Session>, Vec<(String, i64)>);

fn from_wtmp(path: &Path) -> Result<Sessions, String> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return Err("the wtmp record layout of this processor architecture is not known to the agent".to_owned());
    }
    let (bytes, _) =
        read_tail(path, WTMP_TAIL, UTMP_RECORD as u64).map_err(|e| format!("cannot read {} ({e})", path.display()))?;
    Ok(parse_wtmp(&bytes))
}

fn parse_wtmp(bytes: &[u8]) -> Sessions {
    let mut open: HashMap<String, (String, i64)> = HashMap::new();
    let mut closed = Vec::new();
    let mut last = i64::MIN;
    for record in bytes.chunks_exact(UTMP_RECORD) {
        let kind = i16::from_ne_bytes([record[0], record[1]]);
        let line = c_string(&record[8..40]);
        let user = c_string(&record[44..76]);
        let host = c_string(&record[76..332]);
        let at = i64::from(i32::from_ne_bytes([record[340], record[341], record[342], record[343]]));
        match kind {
            USER_PROCESS if is_local(&line, &host) && !user.is_empty() => {
                if let Some((user, start)) = open.insert(line, (user, at)) {
                    closed.push(Session { user, start, end: at });
                }
            }
            DEAD_PROCESS => {
                if let Some((user, start)) = open.remove(&line) {
                    closed.push(Session {
                        user,
                        start,
                        end: at.max(start),
                    });
                }
            }
            BOOT_TIME => close_all(&mut open, last, &mut closed),
            RUN_LVL if user == "shutdown" => close_all(&mut open, at, &mut closed),
            _ => {}
        }
        last = at;
    }
    let mut still: Vec<(String, i64)> = open.into_values().collect();
    still.sort_by_key(|(_, start)| *start);
    (closed, still)
}

fn close_all(open: &mut HashMap<String, (String, i64)>, at: i64, closed: &mut Vec<Session>) {
    let mut ended: Vec<Session> = open
        .drain()
        .map(|(_, (user, start))| Session {
            user,
            start,
            end: at.max(start),
        })
        .collect();
    ended.sort_by_key(|s| s.start);
    closed.extend(ended);
}

/// A console or graphical seat, not a pseudo-terminal or a remote host.
fn is_local(line: &str, host: &str) -> bool {
    let seat = line.starts_with("tty") || line.starts_with(':') || line.starts_with("seat");
    seat && (host.is_empty() || host.starts_with(':'))
}

fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).trim().to_owned()
}

/// Sessions from wtmpdb that were still open or ended after `since`; opened read-only
/// (it is a plain rollback-journal database, never held open by its writers).
fn from_wtmpdb(path: &Path, since: i64) -> Result<Sessions, String> {
    let read = || -> rusqlite::Result<Sessions> {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(std::time::Duration::from_secs(2))?;
        let mut statement = conn.prepare(
            "SELECT User, Login, Logout, TTY, RemoteHost FROM wtmp \
             WHERE User != 'reboot' AND (Logout IS NULL OR Logout >= ?1) ORDER BY Login LIMIT 100000",
        )?;
        let mut rows = statement.query([since.saturating_mul(1_000_000)])?;
        let (mut closed, mut open) = (Vec::new(), Vec::new());
        while let Some(row) = rows.next()? {
            let user: String = row.get(0)?;
            let login: Option<i64> = row.get(1)?;
            let logout: Option<i64> = row.get(2)?;
            let tty: Option<String> = row.get(3)?;
            let host: Option<String> = row.get(4)?;
            let (Some(login), Some(tty)) = (login, tty) else {
                continue;
            };
            if !is_local(&tty, host.as_deref().unwrap_or("")) {
                continue;
            }
            let start = login / 1_000_000;
            match logout {
                Some(end) => closed.push(Session {
                    user,
                    start,
                    end: (end / 1_000_000).max(start),
                }),
                None => open.push((user, start)),
            }
        }
        Ok((closed, open))
    };
    read().map_err(|e| format!("cannot read {} ({e})", path.display()))
}

/// logind's current local user sessions (user, start), or `None` when logind keeps no
/// session files here (not running, or not systemd).
fn logind_sessions(dir: &Path) -> Option<Vec<(String, i64)>> {
    let entries = fs::read_dir(dir).ok()?;
    let mut found: Vec<(String, i64)> = entries
        .filter_map(Result::ok)
        .take(MAX_LOGIND_SESSIONS)
        .filter(|e| !e.file_name().to_string_lossy().contains('.'))
        .filter_map(|e| read_small(&e.path()))
        .filter_map(|text| logind_session(&text))
        .collect();
    found.sort_by_key(|(_, start)| *start);
    Some(found)
}

fn logind_session(text: &str) -> Option<(String, i64)> {
    let values: HashMap<&str, &str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect();
    let graphical_or_tty = matches!(values.get("TYPE"), Some(&("x11" | "wayland" | "tty" | "mir")));
    let person = values.get("CLASS") == Some(&"user");
    let local = values.get("REMOTE") != Some(&"1");
    if !(graphical_or_tty && person && local) {
        return None;
    }
    let user = values.get("USER")?.to_string();
    let start = values.get("REALTIME")?.parse::<i64>().ok()? / 1_000_000;
    Some((user, start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::telemetry::files::put;
    use serde_json::{Value, json};
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-06-05 12:00 UTC);

    fn record(kind: i16, line: &str, user: &str, host: &str, at: OffsetDateTime) -> Vec<u8> {
        let mut r = vec![0u8; UTMP_RECORD];
        r[0..2].copy_from_slice(&kind.to_ne_bytes());
        r[4..8].copy_from_slice(&1234i32.to_ne_bytes());
        r[8..8 + line.len()].copy_from_slice(line.as_bytes());
        r[44..44 + user.len()].copy_from_slice(user.as_bytes());
        r[76..76 + host.len()].copy_from_slice(host.as_bytes());
        let secs = i32::try_from(at.unix_timestamp()).unwrap();
        r[340..344].copy_from_slice(&secs.to_ne_bytes());
        r
    }

    /// Type, User, Login, Logout, TTY, RemoteHost, Service.
    type WtmpdbRow = (
        i64,
        &'static str,
        i64,
        Option<i64>,
        &'static str,
        &'static str,
        &'static str,
    );

    fn minutes_per_day(section: &Section) -> Vec<i64> {
        section["days"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["active_minutes"].as_i64().unwrap())
            .collect()
    }

    /// A desktop's week as `last` shows it: a graphical login, an SSH login (not
    /// counted), a crash, a clean shutdown, and a session open now.
    fn week() -> Vec<u8> {
        [
            record(
                BOOT_TIME,
                "~",
                "reboot",
                "6.8.0-31-generic",
                datetime!(2026-06-03 07:59 UTC),
            ),
            record(USER_PROCESS, "tty2", "alice", "", datetime!(2026-06-03 08:00 UTC)),
            record(
                USER_PROCESS,
                "pts/0",
                "alice",
                "192.0.2.7",
                datetime!(2026-06-03 08:30 UTC),
            ),
            record(DEAD_PROCESS, "pts/0", "", "", datetime!(2026-06-03 11:30 UTC)),
            record(DEAD_PROCESS, "tty2", "", "", datetime!(2026-06-03 10:00 UTC)),
            record(USER_PROCESS, "tty3", "bob", "", datetime!(2026-06-03 20:00 UTC)),
            record(
                RUN_LVL,
                "~",
                "shutdown",
                "6.8.0-31-generic",
                datetime!(2026-06-03 21:00 UTC),
            ),
            record(
                BOOT_TIME,
                "~",
                "reboot",
                "6.8.0-31-generic",
                datetime!(2026-06-04 09:00 UTC),
            ),
            record(USER_PROCESS, "tty2", "alice", "", datetime!(2026-06-04 09:01 UTC)),
            record(USER_PROCESS, "tty2", "bob", "", datetime!(2026-06-04 09:31 UTC)),
            // Power cut: no DEAD_PROCESS, no shutdown; the next boot closes it.
            record(
                BOOT_TIME,
                "~",
                "reboot",
                "6.8.0-31-generic",
                datetime!(2026-06-05 10:00 UTC),
            ),
            record(USER_PROCESS, "tty2", "alice", "", datetime!(2026-06-05 10:01 UTC)),
        ]
        .concat()
    }

    #[test]
    fn wtmp_pairs_logins_and_logouts_and_skips_remote_ones() {
        let root = tempfile::tempdir().unwrap();
        put(root.path(), "var/log/wtmp", &week()).unwrap();
        let got = collect_at(root.path(), NOW);
        // 06-03: alice 8-10, bob 20-21; 06-04: alice 09:01-09:31 (bob's login on the
        // same line replaced hers), bob 09:31 until the last record before the crash
        // (his own login at 09:31): 0; 06-05: alice 10:01 until now.
        assert_eq!(minutes_per_day(&got), [0, 0, 0, 0, 180, 30, 119]);
        assert_eq!(got["source"], "wtmp");
        assert_eq!(
            got["users"],
            json!([{"name": "alice", "minutes": 269}, {"name": "bob", "minutes": 60}])
        );
    }

    #[test]
    fn logind_says_which_sessions_are_open_now() {
        let root = tempfile::tempdir().unwrap();
        let mut wtmp = week();
        wtmp.extend(record(
            USER_PROCESS,
            "tty5",
            "carol",
            "",
            datetime!(2026-06-05 11:00 UTC),
        ));
        put(root.path(), "var/log/wtmp", &wtmp).unwrap();
        let realtime = datetime!(2026-06-05 10:01 UTC).unix_timestamp() * 1_000_000 + 123_456;
        let alice = format!(
            "# This is private data. Do not parse.\nUID=1000\nUSER=alice\nACTIVE=1\nIS_DISPLAY=1\nSTATE=active\nREMOTE=0\nTYPE=wayland\nORIGINAL_TYPE=wayland\nCLASS=user\nSCOPE=session-4.scope\nFIFO=/run/systemd/sessions/4.ref\nSEAT=seat0\nTTY=tty2\nSERVICE=gdm-password\nVTNR=2\nLEADER=2301\nAUDIT=4\nREALTIME={realtime}\nMONOTONIC=98765432\n"
        );
        put(root.path(), "run/systemd/sessions/4", alice.as_bytes()).unwrap();
        put(root.path(), "run/systemd/sessions/4.ref", b"").unwrap();
        put(
            root.path(),
            "run/systemd/sessions/c1",
            b"UID=125\nUSER=gdm\nACTIVE=0\nSTATE=closing\nREMOTE=0\nTYPE=wayland\nCLASS=greeter\nREALTIME=1780531200000000\n",
        ).unwrap();
        put(
            root.path(),
            "run/systemd/sessions/7",
            b"UID=1000\nUSER=alice\nACTIVE=1\nSTATE=active\nREMOTE=1\nREMOTE_HOST=192.0.2.7\nTYPE=tty\nCLASS=user\nSERVICE=sshd\nREALTIME=1780660800000000\n",
        ).unwrap();
        let got = collect_at(root.path(), NOW);
        // carol's tty5 login is open in wtmp but logind has no such session: it ended
        // unseen, and only alice's current session counts today.
        assert_eq!(minutes_per_day(&got), [0, 0, 0, 0, 180, 30, 119]);
        assert_eq!(got["source"], "wtmp+logind");
        assert_eq!(got["users"][0], json!({"name": "alice", "minutes": 269}));
    }

    #[test]
    fn wtmpdb_is_read_where_it_replaced_wtmp() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("var/lib/wtmpdb/wtmp.db");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE wtmp(ID INTEGER PRIMARY KEY, Type INTEGER, User TEXT NOT NULL, Login INTEGER, \
             Logout INTEGER, TTY TEXT, RemoteHost TEXT, Service TEXT) STRICT;",
        )
        .unwrap();
        let us = |t: OffsetDateTime| t.unix_timestamp() * 1_000_000;
        let rows: [WtmpdbRow; 4] = [
            (
                1,
                "reboot",
                us(datetime!(2026-06-04 08:00 UTC)),
                None,
                "~",
                "6.12.12-amd64",
                "",
            ),
            (
                3,
                "dora",
                us(datetime!(2026-06-04 08:05 UTC)),
                Some(us(datetime!(2026-06-04 09:05 UTC))),
                "tty7",
                "",
                "lightdm",
            ),
            (
                3,
                "dora",
                us(datetime!(2026-06-04 08:10 UTC)),
                Some(us(datetime!(2026-06-04 12:00 UTC))),
                "pts/1",
                "198.51.100.4",
                "sshd",
            ),
            (
                3,
                "dora",
                us(datetime!(2026-06-05 11:30 UTC)),
                None,
                "tty7",
                "",
                "lightdm",
            ),
        ];
        for (kind, user, login, logout, tty, host, service) in rows {
            conn.execute(
                "INSERT INTO wtmp(Type, User, Login, Logout, TTY, RemoteHost, Service) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![kind, user, login, logout, tty, host, service],
            )
            .unwrap();
        }
        drop(conn);
        let got = collect_at(root.path(), NOW);
        assert_eq!(got["source"], "wtmpdb");
        assert_eq!(minutes_per_day(&got), [0, 0, 0, 0, 0, 60, 30]);
        assert_eq!(got["summary"], "0.5h today, 1.5h over 7 days");
    }

    #[test]
    fn no_records_at_all_is_not_applicable() {
        let root = tempfile::tempdir().unwrap();
        let got = collect_at(root.path(), NOW);
        assert_eq!(got["applicable"], Value::Bool(false));
        assert_eq!(got["status"], "ok");
    }

    #[test]
    fn the_real_collector_reads_this_pc() {
        let got = collect();
        assert_eq!(got["status"], "ok", "{got:?}");
        assert!(
            got.get("applicable") == Some(&Value::Bool(false)) || got["days"].as_array().is_some_and(|d| d.len() == 7),
            "{got:?}"
        );
    }
}
