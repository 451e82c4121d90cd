//! What changed on each PC between snapshots, as found when a snapshot is stored.

use super::db::{Dialect, Row, args};
use super::{Result, Store};

/// One change as stored; `at` is when the snapshot that showed it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRow {
    pub id: i64,
    pub agent_id: String,
    pub at: String,
    pub section: String,
    pub kind: String,
    pub item: String,
    pub detail: String,
    pub priority: String,
}

pub(super) const INSERT_CHANGE: &str =
    "INSERT INTO changes (agent_id, at, section, kind, item, detail, priority) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

const COLUMNS: &str = "SELECT id, agent_id, at, section, kind, item, detail, priority FROM changes";

impl Store {
    /// One PC's changes at or after `since`, newest first.
    pub fn changes_of(&self, agent_id: &str, since: &str, limit: u32) -> Result<Vec<ChangeRow>> {
        self.read_db(|c| {
            c.query_all(
                &format!(
                    "{COLUMNS} WHERE agent_id = ?1 AND at >= ?2 ORDER BY at DESC, (priority = 'high') DESC, id LIMIT ?3"
                ),
                args![agent_id, since, limit],
                change_row,
            )
        })
    }

    /// The changes at or after `since`, newest first: of the PCs in `agents` (a JSON
    /// array of ids), or of every PC when `None`. Limited after choosing the PCs, so one
    /// busy PC cannot push a scoped reader's own out of the list.
    pub fn changes_since(&self, since: &str, limit: u32, agents: Option<&str>) -> Result<Vec<ChangeRow>> {
        self.read_db(|c| {
            // Each backend reads a JSON array its own way.
            let ids = match c.dialect() {
                Dialect::Sqlite => "SELECT value FROM json_each(?3)",
                Dialect::Postgres => "SELECT jsonb_array_elements_text(CAST(?3 AS JSONB))",
            };
            c.query_all(
                &format!(
                    "{COLUMNS} WHERE at >= ?1 AND (CAST(?3 AS TEXT) IS NULL OR agent_id IN ({ids}))
                     ORDER BY at DESC, (priority = 'high') DESC, id LIMIT ?2"
                ),
                args![since, limit, agents],
                change_row,
            )
        })
    }

    /// Deletes changes older than `before`, at most `batch` at a time.
    pub fn prune_changes(&self, before: &str, batch: u32) -> Result<usize> {
        self.write_db(|c| {
            Ok(c.execute(
                "DELETE FROM changes WHERE id IN (SELECT id FROM changes WHERE at < ?1 LIMIT ?2)",
                args![before, batch],
            )? as usize)
        })
    }
}

fn change_row(r: &Row) -> Result<ChangeRow> {
    Ok(ChangeRow {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        at: r.get(2)?,
        section: r.get(3)?,
        kind: r.get(4)?,
        item: r.get(5)?,
        detail: r.get(6)?,
        priority: r.get(7)?,
    })
}
