//! Backups of a server's data: `kenny-server backup` takes one while the server runs
//! (a consistent copy of the database plus the server key, which agents pin: without it
//! no agent would trust a restored server), `backup verify` checks one, and `restore`
//! puts one in place with the server stopped, or stages it for the server's next start.
//! The data directory's lock tells a running server from a stopped one. `schedule` takes
//! backups on an interval inside a running server (`serve --backup-dir`).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::secrets::SERVER_KEY_FILE;
use crate::store::DB_FILE;
use crate::store::backup::{self as sql, BackupInfo};

pub mod schedule;

/// The name of the server key inside a backup.
const KEY_IN_BACKUP: &str = "server_key";
/// A backup waiting for the next start, in the data directory.
const STAGED: &str = "restore-pending.db";
/// The lock a running server holds in its data directory.
const LOCK_FILE: &str = "kenny.lock";

/// Held while a server uses a data directory: a second server, or a restore, on the
/// same directory is refused instead of writing under it.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Takes the data directory's lock, or says that a server holds it.
pub fn lock_data_dir(data_dir: &Path) -> anyhow::Result<DataDirLock> {
    let path = data_dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(DataDirLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "a kenny-server is running on {} (it holds {}); stop it first, or use `restore --staged` to restore at its next start",
            data_dir.display(),
            LOCK_FILE
        ),
        Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("locking {}", path.display())),
    }
}

/// A new file only its owner can read (a backup holds the server key and every
/// account's hashes).
fn create_private(path: &Path) -> anyhow::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::AlreadyExists => " (a backup never overwrites a file; pick a new name)",
            std::io::ErrorKind::PermissionDenied => {
                " (this user may not write there; check the directory's owner and mode)"
            }
            _ => "",
        };
        anyhow::Error::new(e).context(format!("creating {}{hint}", path.display()))
    })
}

/// Takes a backup of `data_dir` into `out` (which must not exist), while a server may
/// be running on it.
pub fn make(data_dir: &Path, out: &Path) -> anyhow::Result<BackupInfo> {
    let db = data_dir.join(DB_FILE);
    if !db.is_file() {
        bail!(
            "there is no kenny database in {} ({DB_FILE} is missing)",
            data_dir.display()
        );
    }
    let key = std::fs::read(data_dir.join(SERVER_KEY_FILE))
        .with_context(|| format!("reading the server key {SERVER_KEY_FILE} in {}", data_dir.display()))?;
    create_private(out)?;
    let made = sql::snapshot_into(&db, out, &[(KEY_IN_BACKUP, &key)]);
    if let Err(e) = made {
        let _ = std::fs::remove_file(out);
        return Err(e).context("copying the database");
    }
    verify(out)
}

/// Checks a backup: a kenny database, intact, of a schema this build can run, with the
/// server key.
pub fn verify(path: &Path) -> anyhow::Result<BackupInfo> {
    let info = sql::inspect(path).with_context(|| format!("{} cannot be read as a kenny backup", path.display()))?;
    if info.integrity != "ok" {
        bail!("{} is damaged: {}", path.display(), info.integrity);
    }
    if info.schema > info.schema_here {
        bail!(
            "{} was made by a newer kenny-server (schema {}, this one knows up to {}); restore it with that version or newer",
            path.display(),
            info.schema,
            info.schema_here
        );
    }
    if !info.files.iter().any(|f| f == KEY_IN_BACKUP) {
        bail!(
            "{} holds no server key, so agents would not trust a server restored from it; is it a kenny-server backup?",
            path.display()
        );
    }
    Ok(info)
}

/// What a restore did with the data it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// In place; what was there before is kept in this directory.
    Now { previous: Option<PathBuf> },
    /// Waiting for the server's next start.
    Staged,
}

/// Restores `backup` into `data_dir`: at once when no server runs there, or staged for
/// the next start.
pub fn restore(data_dir: &Path, backup: &Path, staged: bool) -> anyhow::Result<Restored> {
    verify(backup)?;
    std::fs::create_dir_all(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    if staged {
        let pending = data_dir.join(STAGED);
        let _ = std::fs::remove_file(&pending);
        copy_private(backup, &pending)?;
        return Ok(Restored::Staged);
    }
    let _lock = lock_data_dir(data_dir)?;
    let previous = put_in_place(data_dir, backup)?;
    Ok(Restored::Now { previous })
}

/// At start-up, with the lock held: a staged backup replaces the data.
pub(crate) fn apply_staged(data_dir: &Path) -> anyhow::Result<bool> {
    let pending = data_dir.join(STAGED);
    if !pending.exists() {
        return Ok(false);
    }
    verify(&pending).context("the backup staged for restore cannot be used; remove it to start as before")?;
    let previous = put_in_place(data_dir, &pending)?;
    std::fs::remove_file(&pending).with_context(|| format!("removing {}", pending.display()))?;
    tracing::warn!(
        previous = ?previous,
        "restored the staged backup; the data it replaced was kept aside"
    );
    Ok(true)
}

fn copy_private(from: &Path, to: &Path) -> anyhow::Result<()> {
    let mut out = create_private(to)?;
    let mut source = File::open(from).with_context(|| format!("opening {}", from.display()))?;
    std::io::copy(&mut source, &mut out).with_context(|| format!("writing {}", to.display()))?;
    out.sync_all()?;
    Ok(())
}

/// Moves the current database and key aside (never deleted), then writes the backup's.
fn put_in_place(data_dir: &Path, backup: &Path) -> anyhow::Result<Option<PathBuf>> {
    let key = sql::backup_file(backup, KEY_IN_BACKUP)?.context("the backup holds no server key")?;
    let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let aside = data_dir.join(format!("replaced-{stamp}"));
    let mut moved = false;
    for name in [
        DB_FILE.to_owned(),
        format!("{DB_FILE}-wal"),
        format!("{DB_FILE}-shm"),
        SERVER_KEY_FILE.to_owned(),
    ] {
        let from = data_dir.join(&name);
        if from.exists() {
            if !moved {
                std::fs::create_dir(&aside).with_context(|| format!("creating {}", aside.display()))?;
                moved = true;
            }
            std::fs::rename(&from, aside.join(&name)).with_context(|| format!("moving {} aside", from.display()))?;
        }
    }
    let db = data_dir.join(DB_FILE);
    copy_private(backup, &db)?;
    sql::strip_backup_files(&db).context("removing the backup's extra files from the restored database")?;
    crate::secrets::write_new_secret(&data_dir.join(SERVER_KEY_FILE), &key)
        .with_context(|| format!("writing the server key in {}", data_dir.display()))?;
    Ok(moved.then_some(aside))
}
