//! Scheduled backups (`serve --backup-dir`): every interval the server takes a backup
//! the same way `kenny-server backup` does, verifies it, copies it to the optional
//! second directory, and deletes the oldest beyond the number to keep. Only files named
//! the way this module names them are ever deleted, so a directory shared with other
//! files loses none of them. Failures are logged and counted in `/metrics`; they never
//! stop the server, and nothing is pruned unless a new good backup was just made.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use time::OffsetDateTime;
use time::macros::format_description;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::metrics::Metrics;

/// `kenny-20261201T204412Z.kennybackup`: the UTC time in a name that sorts by age.
const PREFIX: &str = "kenny-";
const SUFFIX: &str = ".kennybackup";
/// A backup being written is `.<name>.part` until it is whole and verified, so a crash
/// or a full disk never leaves a file that looks like a good backup.
const PART: &str = ".part";
/// The loop looks at the server's clock at least this often, so a test that moves the
/// clock forward sees a backup fall due without waiting out the interval.
const LOOK_EVERY: Duration = Duration::from_secs(30);
/// A backup that could not be made is tried again this soon (or at the interval if that
/// is shorter): a full disk freed an hour later should not cost a day's backup. Retrying
/// never prunes more, since pruning follows only a new good backup.
const RETRY_AFTER: Duration = Duration::from_secs(3600);

/// What `--backup-dir`, `--backup-copy-dir`, `--backup-every-hours` and `--backup-keep`
/// ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Where backups are written (created owner-only when missing).
    pub dir: PathBuf,
    /// A second place each new backup is copied to (a mounted disk); never created, so
    /// an unmounted disk's empty mount point is not filled instead.
    pub copy_dir: Option<PathBuf>,
    pub every: Duration,
    /// How many backups each directory keeps.
    pub keep: usize,
}

/// The name of a backup taken at `at`.
pub fn file_name(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    let stamp = at
        .format(format_description!("[year][month][day]T[hour][minute][second]Z"))
        .unwrap_or_else(|_| at.unix_timestamp().to_string());
    format!("{PREFIX}{stamp}{SUFFIX}")
}

/// When the backup called `name` was taken, if `name` is one of ours; any other name
/// is `None` and so never pruned.
pub fn parse_name(name: &str) -> Option<OffsetDateTime> {
    let stamp = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let shape = stamp.len() == 16
        && stamp.bytes().enumerate().all(|(i, b)| match i {
            8 => b == b'T',
            15 => b == b'Z',
            _ => b.is_ascii_digit(),
        });
    if !shape {
        return None;
    }
    let part = |from: usize, to: usize| stamp.get(from..to)?.parse::<u16>().ok();
    let month = time::Month::try_from(u8::try_from(part(4, 6)?).ok()?).ok()?;
    let date = time::Date::from_calendar_date(i32::from(part(0, 4)?), month, u8::try_from(part(6, 8)?).ok()?).ok()?;
    let hms = |from| u8::try_from(part(from, from + 2)?).ok();
    let t = date.with_hms(hms(9)?, hms(11)?, hms(13)?).ok()?;
    Some(t.assume_utc())
}

/// Which of `names` to delete so that `keep` backups stay, the oldest going first. The
/// backup just made (`just_made`) always stays, even if a file dated in the future (a
/// clock that was wrong) sorts after it; names that are not ours are never listed.
pub fn to_prune(names: &[String], keep: usize, just_made: &str) -> Vec<String> {
    let mut ours: Vec<(OffsetDateTime, &String)> = names
        .iter()
        .filter(|n| n.as_str() != just_made)
        .filter_map(|n| parse_name(n).map(|t| (t, n)))
        .collect();
    ours.sort();
    let others_kept = keep.saturating_sub(1);
    let excess = ours.len().saturating_sub(others_kept);
    ours.into_iter().take(excess).map(|(_, n)| n.clone()).collect()
}

/// When the next backup is due: an interval after the newest one, or now when there is
/// none. A newest backup dated after `now` counts as made now, so a clock that jumped
/// back does not stop backups until it catches up.
pub fn next_due(newest: Option<OffsetDateTime>, now: OffsetDateTime, every: Duration) -> OffsetDateTime {
    match newest {
        Some(t) => t.min(now) + every,
        None => now,
    }
}

/// The regular files in `dir` named as our backups, by name.
fn backups_in(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        // A directory or symlink with a backup's name is not ours to delete.
        if !entry.file_type()?.is_file() {
            continue;
        }
        if let Some(name) = entry.file_name().to_str()
            && parse_name(name).is_some()
        {
            found.push(name.to_owned());
        }
    }
    Ok(found)
}

/// The time of the newest backup in `dir`, if it has any.
fn newest_in(dir: &Path) -> Option<OffsetDateTime> {
    backups_in(dir).ok()?.iter().filter_map(|n| parse_name(n)).max()
}

fn part_name(name: &str) -> String {
    format!(".{name}{PART}")
}

/// Removes what an interrupted run left half-written (only our own `.part` names).
fn remove_parts(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(PART))
            .is_some_and(|n| parse_name(n).is_some());
        if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Creates the backup directory owner-only; an existing one is left as it is.
fn ensure_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).with_context(|| {
        format!(
            "creating the backup directory {} (check --backup-dir and that the server's user may write there)",
            dir.display()
        )
    })
}

/// Backup files are owner-only whatever the directory allows, but a directory others can
/// list or write is worth a word: they could see when backups are made, or add files.
fn warn_if_open(dir: &Path) {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(dir) {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                dir = %dir.display(),
                "the backup directory is open to other users (mode {mode:o}); the backups in it are owner-only, but `chmod 700` it to keep it private"
            );
        }
    }
}

/// Renames `part` to `name` in `dir` and makes the rename durable.
fn publish(dir: &Path, part: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let done = dir.join(name);
    std::fs::rename(part, &done).with_context(|| format!("renaming {} to {name}", part.display()))?;
    // The rename is in the directory: sync it too, or a power cut could lose the name.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(done)
}

/// Deletes the oldest of our backups in `dir` beyond `keep`; returns how many went.
/// A file that cannot be deleted is logged and left.
fn prune(dir: &Path, keep: usize, just_made: &str) -> usize {
    let names = match backups_in(dir) {
        Ok(names) => names,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "could not list old backups to prune: {e}");
            return 0;
        }
    };
    let mut removed = 0;
    for name in to_prune(&names, keep, just_made) {
        match std::fs::remove_file(dir.join(&name)) {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(file = %dir.join(&name).display(), "could not delete an old backup: {e}"),
        }
    }
    removed
}

/// What one scheduled run did.
#[derive(Debug)]
pub struct Made {
    pub file: PathBuf,
    pub bytes: u64,
    pub pruned: usize,
    /// The copy in `--backup-copy-dir`, when one is set: its path, or why it failed.
    pub copy: Option<anyhow::Result<PathBuf>>,
}

/// Takes, verifies and publishes one backup of `data_dir` into the schedule's
/// directory, prunes it, then does the same for the copy directory.
pub fn run_once(data_dir: &Path, schedule: &Schedule, at: OffsetDateTime) -> anyhow::Result<Made> {
    ensure_dir(&schedule.dir)?;
    remove_parts(&schedule.dir);
    let name = file_name(at);
    if schedule.dir.join(&name).exists() {
        bail!(
            "{} already exists (has the clock gone back?); the next run takes a new name",
            schedule.dir.join(&name).display()
        );
    }
    let part = schedule.dir.join(part_name(&name));
    if let Err(e) = super::make(data_dir, &part) {
        let _ = std::fs::remove_file(&part);
        return Err(e);
    }
    let file = publish(&schedule.dir, &part, &name)?;
    let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let pruned = prune(&schedule.dir, schedule.keep, &name);
    let copy = schedule
        .copy_dir
        .as_deref()
        .map(|to| copy_into(&file, to, &name, schedule.keep));
    Ok(Made {
        file,
        bytes,
        pruned,
        copy,
    })
}

/// Copies a verified backup into `dir` under the same name (written aside, verified
/// there, then renamed) and prunes that directory the same way.
fn copy_into(file: &Path, dir: &Path, name: &str, keep: usize) -> anyhow::Result<PathBuf> {
    if !dir.is_dir() {
        bail!(
            "the backup copy directory {} does not exist or is not a directory; mount the disk or create it (kenny does not create it, so that an unmounted disk's mount point is not filled instead)",
            dir.display()
        );
    }
    remove_parts(dir);
    let part = dir.join(part_name(name));
    let copied = super::copy_private(file, &part)
        .and_then(|()| super::verify(&part).map(drop))
        .and_then(|()| publish(dir, &part, name));
    match copied {
        Ok(done) => {
            prune(dir, keep, name);
            Ok(done)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            Err(e.context(format!("copying the backup into {}", dir.display())))
        }
    }
}

/// Runs the schedule until `shutdown`: the first backup an interval after the newest
/// one already in the directory (at once when there is none or it is older), so a
/// restart does not take an extra one.
pub async fn run(
    data_dir: PathBuf,
    schedule: Schedule,
    clock: Clock,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let dir = schedule.dir.clone();
    let newest = tokio::task::spawn_blocking(move || newest_in(&dir))
        .await
        .ok()
        .flatten();
    if let Some(t) = newest {
        metrics.backup_made(t.unix_timestamp());
    }
    metrics.backup_scheduled(schedule.copy_dir.is_some());
    warn_if_open(&schedule.dir);
    let mut due = next_due(newest, clock.now_utc(), schedule.every);
    tracing::info!(
        dir = %schedule.dir.display(),
        copy_dir = ?schedule.copy_dir,
        every_secs = schedule.every.as_secs(),
        keep = schedule.keep,
        next = %crate::clock::format(due),
        "scheduled backups are on"
    );
    loop {
        let now = clock.now_utc();
        if now < due {
            let wait = Duration::try_from(due - now).unwrap_or(LOOK_EVERY).min(LOOK_EVERY);
            tokio::select! {
                () = tokio::time::sleep(wait) => continue,
                () = shutdown.cancelled() => return,
            }
        }
        let (d, s) = (data_dir.clone(), schedule.clone());
        let started = std::time::Instant::now();
        let result = tokio::task::spawn_blocking(move || run_once(&d, &s, now))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the backup task stopped: {e}")));
        match result {
            Ok(made) => {
                metrics.backup_made(now.unix_timestamp());
                tracing::info!(
                    file = %made.file.display(),
                    bytes = made.bytes,
                    took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    pruned = made.pruned,
                    "scheduled backup written and verified"
                );
                match made.copy {
                    Some(Ok(copy)) => tracing::info!(file = %copy.display(), "scheduled backup copied"),
                    Some(Err(e)) => {
                        metrics.backup_failed(true);
                        tracing::error!(
                            "scheduled backup not copied: {e:#}; the backup in {} is kept; the next backup is copied once the directory is there",
                            schedule.dir.display()
                        );
                    }
                    None => {}
                }
                due = now + schedule.every;
            }
            Err(e) => {
                metrics.backup_failed(false);
                let retry = schedule.every.min(RETRY_AFTER);
                tracing::error!(
                    retry_in_secs = retry.as_secs(),
                    "scheduled backup failed: {e:#}; the backups already made are kept"
                );
                due = clock.now_utc() + retry;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn names_sort_by_time_and_only_ours_parse() {
        let at = datetime!(2026-12-01 20:44:12.734 UTC);
        assert_eq!(file_name(at), "kenny-20261201T204412Z.kennybackup");
        assert_eq!(
            parse_name("kenny-20261201T204412Z.kennybackup"),
            Some(datetime!(2026-12-01 20:44:12 UTC))
        );
        assert!(file_name(at) < file_name(datetime!(2026-12-02 01:00:00 UTC)));
        for other in [
            "kenny-2026-12-01.db",
            "kenny-20261201T204412Z.kennybackup.part",
            ".kenny-20261201T204412Z.kennybackup.part",
            "kenny-20261301T204412Z.kennybackup",
            "kenny-20261201T204412.kennybackup",
            "kenny-2026120xT204412Z.kennybackup",
            "notes.txt",
            "my-kenny-20261201T204412Z.kennybackup",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }

    #[test]
    fn pruning_drops_the_oldest_of_ours_and_keeps_the_new_one_and_everything_else() {
        let all = names(&[
            "kenny-20261203T000000Z.kennybackup",
            "notes.txt",
            "kenny-20261201T000000Z.kennybackup",
            "kenny-20261204T000000Z.kennybackup",
            "kenny-20261202T000000Z.kennybackup",
            "kenny-2026-11-30.db",
        ]);
        let new = "kenny-20261204T000000Z.kennybackup";
        assert_eq!(
            to_prune(&all, 2, new),
            names(&[
                "kenny-20261201T000000Z.kennybackup",
                "kenny-20261202T000000Z.kennybackup"
            ])
        );
        assert!(to_prune(&all, 4, new).is_empty());
        assert!(to_prune(&all, 100, new).is_empty());
        assert_eq!(to_prune(&all, 1, new).len(), 3);
        // A file dated in the future does not push out the backup just made.
        let future = names(&[
            "kenny-20301231T000000Z.kennybackup",
            "kenny-20261204T000000Z.kennybackup",
        ]);
        assert_eq!(
            to_prune(&future, 1, new),
            names(&["kenny-20301231T000000Z.kennybackup"])
        );
    }

    #[test]
    fn the_next_backup_is_an_interval_after_the_newest_or_now() {
        let now = datetime!(2026-12-01 12:00 UTC);
        let day = Duration::from_secs(86_400);
        assert_eq!(next_due(None, now, day), now);
        let recent = datetime!(2026-12-01 02:00 UTC);
        assert_eq!(next_due(Some(recent), now, day), datetime!(2026-12-02 02:00 UTC));
        let old = datetime!(2026-11-20 02:00 UTC);
        assert!(next_due(Some(old), now, day) <= now, "overdue: at once");
        let future = datetime!(2027-06-01 00:00 UTC);
        assert_eq!(next_due(Some(future), now, day), now + day);
    }

    #[test]
    fn a_run_keeps_n_in_both_places_and_touches_nothing_else() {
        let data = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(data.path()).unwrap());
        crate::secrets::load_or_create_server_key(data.path()).unwrap();
        let out = tempfile::tempdir().unwrap();
        let schedule = Schedule {
            dir: out.path().join("backups"),
            copy_dir: Some(out.path().join("copies")),
            every: Duration::from_secs(60),
            keep: 2,
        };
        std::fs::create_dir(out.path().join("copies")).unwrap();
        ensure_dir(&schedule.dir).unwrap();
        std::fs::write(schedule.dir.join("notes.txt"), "mine").unwrap();
        let mut at = datetime!(2026-12-01 00:00 UTC);
        for _ in 0..3 {
            let made = run_once(data.path(), &schedule, at).unwrap();
            assert!(made.copy.unwrap().is_ok());
            at += Duration::from_secs(60);
        }
        for dir in [&schedule.dir, schedule.copy_dir.as_ref().unwrap()] {
            let mut kept = backups_in(dir).unwrap();
            kept.sort();
            assert_eq!(
                kept,
                names(&[
                    "kenny-20261201T000100Z.kennybackup",
                    "kenny-20261201T000200Z.kennybackup"
                ])
            );
            for name in &kept {
                super::super::verify(&dir.join(name)).unwrap();
            }
        }
        assert!(schedule.dir.join("notes.txt").exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&schedule.dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }

        // Without the copy directory the backup is still made, and the copy says why.
        std::fs::remove_dir_all(out.path().join("copies")).unwrap();
        let made = run_once(data.path(), &schedule, at).unwrap();
        let why = made.copy.unwrap().unwrap_err().to_string();
        assert!(why.contains("does not exist"), "{why}");
        assert!(made.file.exists());
    }

    #[test]
    fn a_failed_run_leaves_the_backups_there_and_no_half_written_file() {
        let data = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(data.path()).unwrap());
        crate::secrets::load_or_create_server_key(data.path()).unwrap();
        let out = tempfile::tempdir().unwrap();
        let schedule = Schedule {
            dir: out.path().join("backups"),
            copy_dir: None,
            every: Duration::from_secs(60),
            keep: 1,
        };
        let first = run_once(data.path(), &schedule, datetime!(2026-12-01 00:00 UTC)).unwrap();
        // The database is gone (a data directory on a failed disk): the run fails and
        // the one backup there stays, whatever --backup-keep says.
        std::fs::remove_file(data.path().join(crate::store::DB_FILE)).unwrap();
        let err = run_once(data.path(), &schedule, datetime!(2026-12-01 00:01 UTC)).unwrap_err();
        assert!(err.to_string().contains("no kenny database"), "{err:#}");
        let left: Vec<_> = std::fs::read_dir(&schedule.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, [first.file.file_name().unwrap().to_str().unwrap()]);

        // A backup directory that cannot be made says which and what to check.
        let blocked = Schedule {
            dir: out.path().join("a-file").join("backups"),
            ..schedule
        };
        std::fs::write(out.path().join("a-file"), "").unwrap();
        let err = run_once(data.path(), &blocked, datetime!(2026-12-01 00:02 UTC)).unwrap_err();
        assert!(err.to_string().contains("--backup-dir"), "{err:#}");
    }
}
