//! The SQL of backups: a consistent copy of the live database (`VACUUM INTO`, on a
//! read-only connection, so it neither takes the writer nor stops the server), the few
//! files a server needs besides its database kept in a table of the copy, and what a
//! backup holds when it is checked.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use super::{Result, StoreError};

/// The table a backup keeps its extra files in (the server key); never in a live
/// database: it is dropped when a backup is restored.
const EXTRAS: &str = "kenny_backup_files";

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BackupInfo {
    /// `PRAGMA integrity_check`'s answer: `ok`, or the first problems found.
    pub integrity: String,
    /// The schema version it was written with.
    pub schema: usize,
    /// The schema version this build writes.
    pub schema_here: usize,
    pub users: i64,
    pub agents: i64,
    pub audit_rows: i64,
    /// The newest audit row's id (0 if none).
    pub last_audit_id: i64,
    /// The extra files it carries, by name.
    pub files: Vec<String>,
}

/// Copies the database at `db` into `out` (an empty file) as one consistent snapshot,
/// then adds `files` to the copy.
pub fn snapshot_into(db: &Path, out: &Path, files: &[(&str, &[u8])]) -> Result<()> {
    let live = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    live.busy_timeout(std::time::Duration::from_secs(30))?;
    let target = out
        .to_str()
        .ok_or_else(|| StoreError::Internal(format!("{} is not a UTF-8 path", out.display())))?;
    live.execute("VACUUM INTO ?1", [target])?;
    drop(live);
    let copy = Connection::open(out)?;
    copy.execute_batch(&format!(
        "CREATE TABLE {EXTRAS} (name TEXT PRIMARY KEY, content BLOB NOT NULL);"
    ))?;
    for (name, content) in files {
        copy.execute(
            &format!("INSERT INTO {EXTRAS} (name, content) VALUES (?1, ?2)"),
            params![name, content],
        )?;
    }
    Ok(())
}

/// Reads what a backup file holds, checking its integrity; refuses a file that is not a
/// kenny database.
pub fn inspect(path: &Path) -> Result<BackupInfo> {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    let problems: Vec<String> = {
        let mut stmt = c.prepare("PRAGMA integrity_check(5)")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let schema: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let has = |table: &str| -> Result<bool> {
        Ok(c.query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
    };
    if !has("users")? || !has("agents")? || !has("audit")? {
        return Err(StoreError::Internal(
            "this is an SQLite file but not a kenny database (it has no users, agents and audit tables)".into(),
        ));
    }
    let count = |sql: &str| -> Result<i64> { Ok(c.query_row(sql, [], |r| r.get(0))?) };
    let files = if has(EXTRAS)? {
        let mut stmt = c.prepare(&format!("SELECT name FROM {EXTRAS} ORDER BY name"))?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    } else {
        Vec::new()
    };
    Ok(BackupInfo {
        integrity: problems.join("; "),
        schema: usize::try_from(schema).unwrap_or(0),
        schema_here: super::migrations::latest(),
        users: count("SELECT COUNT(*) FROM users")?,
        agents: count("SELECT COUNT(*) FROM agents")?,
        audit_rows: count("SELECT COUNT(*) FROM audit")?,
        last_audit_id: count("SELECT COALESCE(MAX(id), 0) FROM audit")?,
        files,
    })
}

/// One extra file a backup carries.
pub fn backup_file(path: &Path, name: &str) -> Result<Option<Vec<u8>>> {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    Ok(
        c.query_row(&format!("SELECT content FROM {EXTRAS} WHERE name = ?1"), [name], |r| {
            r.get(0)
        })
        .optional()?,
    )
}

/// Turns a restored copy back into a plain database: the extra files' table goes, and
/// the space it took is wiped (it held the server key).
pub fn strip_backup_files(db: &Path) -> Result<()> {
    let c = Connection::open(db)?;
    c.execute_batch(&format!("DROP TABLE IF EXISTS {EXTRAS}; VACUUM;"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_snapshot_holds_the_data_and_its_files_and_says_what_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        drop(store);
        let out = dir.path().join("backup.db");
        std::fs::File::create(&out).unwrap();
        snapshot_into(
            &dir.path().join(super::super::DB_FILE),
            &out,
            &[("server_key", b"key bytes")],
        )
        .unwrap();
        let info = inspect(&out).unwrap();
        assert_eq!(info.integrity, "ok");
        assert_eq!(info.schema, info.schema_here);
        assert_eq!(info.files, ["server_key"]);
        assert_eq!(
            backup_file(&out, "server_key").unwrap().as_deref(),
            Some(&b"key bytes"[..])
        );
        strip_backup_files(&out).unwrap();
        assert!(inspect(&out).unwrap().files.is_empty());
        let other = dir.path().join("not-kenny.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        assert!(
            inspect(&other)
                .unwrap_err()
                .to_string()
                .contains("not a kenny database")
        );
    }
}
