//! Visits in a browser profile's history database, reduced to domains and times.
//!
//! The database is copied (with its `-wal` file, which holds the newest visits while the
//! browser runs) into a private temporary folder, opened read-only there, and the copy
//! removed: the browser keeps its file locked and busy, and the agent must never change
//! it. Only the host part of each URL leaves this module.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rusqlite::{Connection, OpenFlags};

use crate::tools::telemetry::browser_extensions::browsers::{Family, Profile};
use crate::tools::telemetry::files::open_user_file;

/// Per profile: a day of very busy browsing is a few thousand visits.
pub(super) const MAX_VISITS: usize = 20_000;
/// A history database larger than this is not copied (years of history are ~100 MB),
/// so the copy takes a second or two at most.
const MAX_DB_BYTES: u64 = 256 * 1024 * 1024;
/// Seconds between 1601-01-01 (Chromium's epoch, as Windows' FILETIME) and 1970-01-01.
const CHROMIUM_EPOCH_OFFSET: i64 = 11_644_473_600;
const MAX_DOMAIN: usize = 253;

static NEXT_COPY: AtomicU64 = AtomicU64::new(0);

/// A visit: the domain and when, in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Visit {
    pub domain: String,
    pub at: i64,
}

/// What one profile's history gave: visits since the window start, and whether the row
/// cap or the deadline cut it short.
#[derive(Debug, Default)]
pub(super) struct Read {
    pub visits: Vec<Visit>,
    pub cut: bool,
}

/// Visits since `since` (Unix seconds) in `profile`'s history; a profile without a
/// history file has none.
pub(super) fn read_profile(profile: &Profile, since: i64, deadline: Instant) -> Result<Read, String> {
    let (file, query, to_micros): (&str, &str, fn(i64) -> i64) = match profile.family {
        Family::Chromium => (
            "History",
            "SELECT urls.url, visits.visit_time FROM visits JOIN urls ON urls.id = visits.url \
             WHERE visits.visit_time >= ?1 ORDER BY visits.visit_time DESC LIMIT ?2",
            |unix| (unix + CHROMIUM_EPOCH_OFFSET) * 1_000_000,
        ),
        Family::Firefox => (
            "places.sqlite",
            "SELECT moz_places.url, moz_historyvisits.visit_date FROM moz_historyvisits \
             JOIN moz_places ON moz_places.id = moz_historyvisits.place_id \
             WHERE moz_historyvisits.visit_date >= ?1 ORDER BY moz_historyvisits.visit_date DESC LIMIT ?2",
            |unix| unix * 1_000_000,
        ),
    };
    let source = profile.dir.join(file);
    let database = match open_user_file(&source) {
        Ok(opened) => opened,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Read::default()),
        Err(e) => return Err(format!("cannot read {file} ({e})")),
    };
    let copy = PrivateCopy::of(&source, database)?;
    let conn = Connection::open_with_flags(
        copy.path(),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("cannot open the copy of {file} ({e})"))?;
    let tables: &[&str] = match profile.family {
        Family::Chromium => &["urls", "visits"],
        Family::Firefox => &["moz_places", "moz_historyvisits"],
    };
    harden(&conn, tables).map_err(|e| format!("{file} is not a browser history the agent reads ({e})"))?;
    let from_micros: fn(i64) -> i64 = match profile.family {
        Family::Chromium => |micros| micros / 1_000_000 - CHROMIUM_EPOCH_OFFSET,
        Family::Firefox => |micros| micros / 1_000_000,
    };
    select(&conn, query, to_micros(since), from_micros, deadline).map_err(|e| format!("reading {file} failed ({e})"))
}

/// The database is the user's: it could define `visits` as a view that never ends, or
/// call functions through its schema. Only plain tables are read, no schema function
/// runs, temporary data stays in memory, and a query still running at the deadline is
/// interrupted.
fn harden(conn: &Connection, tables: &[&str]) -> rusqlite::Result<()> {
    conn.pragma_update(None, "trusted_schema", "OFF")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    for table in tables {
        let plain: bool = conn.query_row(
            "SELECT count(*) = 1 FROM sqlite_master WHERE type = 'table' AND name = ?1 \
             AND sql NOT LIKE 'CREATE VIRTUAL%'",
            [table],
            |row| row.get(0),
        )?;
        if !plain {
            return Err(rusqlite::Error::InvalidParameterName(format!(
                "`{table}` is not a plain table"
            )));
        }
    }
    Ok(())
}

/// Interrupts whatever `conn` runs once `deadline` passes, until dropped (dropping the
/// sender wakes the watching thread, which then ends without interrupting).
struct Watchdog {
    _done: std::sync::mpsc::Sender<()>,
}

impl Watchdog {
    fn start(conn: &Connection, deadline: Instant) -> Watchdog {
        let handle = conn.get_interrupt_handle();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(left) {
                handle.interrupt();
            }
        });
        Watchdog { _done: done }
    }
}

/// Runs the visit query, keeping only domains. The queries walk the visit-time index
/// newest first, so each step is short and the deadline is checked between rows.
fn select(
    conn: &Connection,
    query: &str,
    since_micros: i64,
    from_micros: fn(i64) -> i64,
    deadline: Instant,
) -> rusqlite::Result<Read> {
    let mut read = Read::default();
    if Instant::now() > deadline {
        read.cut = true;
        return Ok(read);
    }
    let _watchdog = Watchdog::start(conn, deadline);
    let mut statement = conn.prepare(query)?;
    let limit = i64::try_from(MAX_VISITS).unwrap_or(i64::MAX);
    let mut rows = statement.query(rusqlite::params![since_micros, limit])?;
    let mut seen = 0;
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            // The watchdog stopped a query that ran past the deadline: what was read stays.
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::OperationInterrupted => {
                read.cut = true;
                break;
            }
            Err(e) => return Err(e),
        };
        seen += 1;
        if Instant::now() > deadline {
            read.cut = true;
            break;
        }
        let url: Option<String> = row.get(0).ok();
        let micros: Option<i64> = row.get(1).ok();
        if let (Some(domain), Some(micros)) = (url.as_deref().and_then(domain_of), micros) {
            read.visits.push(Visit {
                domain,
                at: from_micros(micros),
            });
        }
    }
    read.cut |= seen >= MAX_VISITS;
    Ok(read)
}

/// The host of an http(s) URL, lowercased, without user, port or trailing dot. Other
/// schemes (`file:`, `chrome:`, `about:`, extension pages) are not web activity.
pub(super) fn domain_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    clean_domain(host)
}

/// A host name as the section lists it, or `None` when it is not one (empty, too long,
/// or holding characters no host has: the text comes from files anyone can write).
pub(super) fn clean_domain(host: &str) -> Option<String> {
    let host = host.trim().trim_end_matches('.').to_ascii_lowercase();
    let valid = !host.is_empty()
        && host.len() <= MAX_DOMAIN
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    valid.then_some(host)
}

/// A copy of a database (and its `-wal`) in a folder only the agent can read, removed
/// when dropped.
struct PrivateCopy {
    dir: PathBuf,
    file: PathBuf,
}

impl PrivateCopy {
    /// Copies `database` (already opened from `source`) and the `-wal` beside it, each
    /// from the file opened, never by path again, and each cut off at the size limit.
    fn of(source: &Path, database: fs::File) -> Result<PrivateCopy, String> {
        // Random, so no user can take the name first and block the copy.
        let n = NEXT_COPY.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kenny-history-{n}-{:016x}", rand::random::<u64>()));
        private_dir_builder()
            .create(&dir)
            .map_err(|e| format!("cannot make a temporary folder in {} ({e})", dir.display()))?;
        let copy = PrivateCopy {
            file: dir.join("history.sqlite"),
            dir,
        };
        copy_bounded(database, &copy.file).map_err(|e| format!("cannot copy {} ({e})", source.display()))?;
        let wal = with_suffix(source, "-wal");
        match open_user_file(&wal) {
            Ok(opened) => copy_bounded(opened, &with_suffix(&copy.file, "-wal"))
                .map_err(|e| format!("cannot copy {} ({e})", wal.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {} ({e})", wal.display())),
        }
        Ok(copy)
    }

    fn path(&self) -> &Path {
        &self.file
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not remove the copy of a browser history");
        }
    }
}

/// Only the agent's user may enter the folder. On Windows the folder inherits the rights
/// of the agent's temp folder, which for SYSTEM users cannot list or read.
fn private_dir_builder() -> fs::DirBuilder {
    #[cfg(unix)]
    {
        let mut builder = fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
    }
    #[cfg(not(unix))]
    fs::DirBuilder::new()
}

/// Writes `from` into a new file at `to` that only the agent can read, refusing a source
/// over [`MAX_DB_BYTES`] (checked while copying: the file may grow, or be sparse).
fn copy_bounded(from: fs::File, to: &Path) -> std::io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(to)?;
    let copied = std::io::copy(&mut std::io::Read::take(from, MAX_DB_BYTES + 1), &mut out)?;
    if copied > MAX_DB_BYTES {
        return Err(std::io::Error::other(format!(
            "more than the {MAX_DB_BYTES} bytes the agent copies"
        )));
    }
    Ok(())
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Databases shaped like the browsers' own, for the tests here and of the section.
#[cfg(test)]
pub(super) mod fixtures {
    use super::*;

    /// A Chromium `History` database with the tables and columns the agent reads (as
    /// Chrome 125 creates them, trimmed to what matters) and the given visits.
    pub(crate) fn chromium_history(path: &Path, visits: &[(&str, i64)]) -> rusqlite::Result<()> {
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT,url LONGVARCHAR,title LONGVARCHAR,\
             visit_count INTEGER DEFAULT 0 NOT NULL,typed_count INTEGER DEFAULT 0 NOT NULL,\
             last_visit_time INTEGER NOT NULL,hidden INTEGER DEFAULT 0 NOT NULL);\
             CREATE TABLE visits(id INTEGER PRIMARY KEY AUTOINCREMENT,url INTEGER NOT NULL,\
             visit_time INTEGER NOT NULL,from_visit INTEGER,transition INTEGER DEFAULT 0 NOT NULL,\
             segment_id INTEGER,visit_duration INTEGER DEFAULT 0 NOT NULL);\
             CREATE INDEX visits_time_index ON visits (visit_time);",
        )?;
        for (url, unix) in visits {
            let micros = (unix + CHROMIUM_EPOCH_OFFSET) * 1_000_000 + 123_456;
            conn.execute(
                "INSERT INTO urls(url, title, visit_count, last_visit_time) VALUES (?1, 'a page title', 1, ?2)",
                rusqlite::params![url, micros],
            )?;
            conn.execute(
                "INSERT INTO visits(url, visit_time, transition) VALUES (last_insert_rowid(), ?1, 805306368)",
                rusqlite::params![micros],
            )?;
        }
        Ok(())
    }

    /// A Firefox `places.sqlite` in WAL mode, as Firefox keeps it, with the visits left
    /// in the `-wal` file (the connection stays open, so nothing is checkpointed).
    pub(crate) fn firefox_places(path: &Path, visits: &[(&str, i64)]) -> rusqlite::Result<Connection> {
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;\
             CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url LONGVARCHAR, title LONGVARCHAR,\
             rev_host LONGVARCHAR, visit_count INTEGER DEFAULT 0, hidden INTEGER DEFAULT 0 NOT NULL,\
             typed INTEGER DEFAULT 0 NOT NULL, frecency INTEGER DEFAULT -1 NOT NULL,\
             last_visit_date INTEGER, guid TEXT, url_hash INTEGER DEFAULT 0 NOT NULL);\
             CREATE TABLE moz_historyvisits (id INTEGER PRIMARY KEY, from_visit INTEGER,\
             place_id INTEGER, visit_date INTEGER, visit_type INTEGER, session INTEGER,\
             source INTEGER DEFAULT 0 NOT NULL, triggeringPlaceId INTEGER);\
             CREATE INDEX moz_historyvisits_dateindex ON moz_historyvisits (visit_date);",
        )?;
        for (url, unix) in visits {
            let micros = unix * 1_000_000 + 654_321;
            conn.execute(
                "INSERT INTO moz_places(url, title, visit_count, last_visit_date) VALUES (?1, 'a title', 1, ?2)",
                rusqlite::params![url, micros],
            )?;
            conn.execute(
                "INSERT INTO moz_historyvisits(place_id, visit_date, visit_type) VALUES (last_insert_rowid(), ?1, 1)",
                rusqlite::params![micros],
            )?;
        }
        Ok(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{chromium_history, firefox_places};
    use super::*;
    use std::time::Duration;

    fn profile(family: Family, dir: &Path) -> Profile {
        Profile {
            browser: if family == Family::Firefox { "firefox" } else { "chrome" },
            family,
            user: "alice".into(),
            name: "Default".into(),
            dir: dir.to_owned(),
        }
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn hosts_only_from_web_urls() {
        assert_eq!(
            domain_of("https://www.Example.com/path?q=secret#x").as_deref(),
            Some("www.example.com")
        );
        assert_eq!(
            domain_of("http://user:pw@intranet.local:8080/").as_deref(),
            Some("intranet.local")
        );
        assert_eq!(domain_of("HTTPS://[2001:db8::1]:443/x").as_deref(), Some("2001:db8::1"));
        assert_eq!(domain_of("https://example.org./").as_deref(), Some("example.org"));
        assert_eq!(
            domain_of("https://xn--mnchen-3ya.de/").as_deref(),
            Some("xn--mnchen-3ya.de")
        );
        for not_web in [
            "file:///home/alice/a.pdf",
            "chrome://settings/",
            "about:blank",
            "https://",
            "https://a b/",
        ] {
            assert_eq!(domain_of(not_web), None, "{not_web}");
        }
        assert_eq!(domain_of(&format!("https://{}.com/", "a".repeat(300))), None);
    }

    #[test]
    fn chromium_visits_in_the_window_newest_first_and_the_copy_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let since = 1_780_531_200; // 2026-06-04T00:00:00Z
        chromium_history(
            &dir.path().join("History"),
            &[
                ("https://old.example.com/", since - 60),
                ("https://www.example.com/a", since + 60),
                ("chrome://newtab/", since + 90),
                ("https://news.example.org/story?id=1", since + 120),
            ],
        )
        .unwrap();
        let read = read_profile(&profile(Family::Chromium, dir.path()), since, later()).unwrap();
        assert_eq!(
            read.visits,
            [
                Visit {
                    domain: "news.example.org".into(),
                    at: since + 120
                },
                Visit {
                    domain: "www.example.com".into(),
                    at: since + 60
                }
            ]
        );
        assert!(!read.cut);
    }

    #[test]
    fn the_private_copy_takes_the_wal_along_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("places.sqlite");
        fs::write(&source, b"db").unwrap();
        fs::write(dir.path().join("places.sqlite-wal"), b"wal").unwrap();
        let copy = PrivateCopy::of(&source, fs::File::open(&source).unwrap()).unwrap();
        let folder = copy.dir.clone();
        assert_eq!(fs::read(copy.path()).unwrap(), b"db");
        assert_eq!(fs::read(with_suffix(copy.path(), "-wal")).unwrap(), b"wal");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&folder).unwrap().permissions().mode() & 0o777, 0o700);
        }
        drop(copy);
        assert!(!folder.exists());
    }

    #[test]
    fn a_history_that_is_not_plain_tables_is_not_queried() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("History")).unwrap();
        // A `visits` that never ends: read as root, it would spin forever.
        conn.execute_batch(
            "CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT); \
             CREATE VIEW visits AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) \
             SELECT x AS url, x AS visit_time FROM n;",
        )
        .unwrap();
        drop(conn);
        let err = read_profile(&profile(Family::Chromium, dir.path()), 0, later()).unwrap_err();
        assert!(err.contains("`visits` is not a plain table"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_history_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        chromium_history(&elsewhere, &[("https://secret.example.com/", 1_780_531_260)]).unwrap();
        let profile_dir = dir.path().join("Default");
        fs::create_dir(&profile_dir).unwrap();
        std::os::unix::fs::symlink(&elsewhere, profile_dir.join("History")).unwrap();
        let err = read_profile(&profile(Family::Chromium, &profile_dir), 0, later()).unwrap_err();
        assert!(err.starts_with("cannot read History"), "{err}");
    }

    #[test]
    fn firefox_visits_still_in_the_wal_file_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let since = 1_780_531_200;
        let _open = firefox_places(
            &dir.path().join("places.sqlite"),
            &[
                ("https://developer.mozilla.org/en-US/", since + 10),
                ("about:config", since + 20),
            ],
        )
        .unwrap();
        assert!(dir.path().join("places.sqlite-wal").metadata().unwrap().len() > 0);
        let read = read_profile(&profile(Family::Firefox, dir.path()), since, later()).unwrap();
        assert_eq!(
            read.visits,
            [Visit {
                domain: "developer.mozilla.org".into(),
                at: since + 10
            }]
        );
    }

    #[test]
    fn a_profile_without_history_has_none_and_a_broken_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let read = read_profile(&profile(Family::Chromium, dir.path()), 0, later()).unwrap();
        assert!(read.visits.is_empty());
        fs::write(dir.path().join("places.sqlite"), b"not a database at all, just text").unwrap();
        let err = read_profile(&profile(Family::Firefox, dir.path()), 0, later()).unwrap_err();
        assert!(
            err.starts_with("reading places.sqlite failed")
                || err.starts_with("cannot open")
                || err.starts_with("places.sqlite is not a browser history"),
            "{err}"
        );
    }

    #[test]
    fn the_deadline_stops_the_read() {
        let dir = tempfile::tempdir().unwrap();
        chromium_history(
            &dir.path().join("History"),
            &[("https://a.example/", 100), ("https://b.example/", 200)],
        )
        .unwrap();
        let read = read_profile(&profile(Family::Chromium, dir.path()), 0, Instant::now()).unwrap();
        assert!(read.cut && read.visits.is_empty(), "{read:?}");
    }
}
