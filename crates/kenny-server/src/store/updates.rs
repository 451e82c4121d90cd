//! What became of each agent update: the agent's own report (succeeded or rolled back,
//! and why), or the server's note that no report came.

use rusqlite::params;

use super::{Result, Store};

/// Most characters of an agent-supplied reason kept (the agent may be hostile).
pub const MAX_UPDATE_DETAIL: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UpdateRecord {
    pub order_id: String,
    pub agent_id: String,
    /// Who asked for it, when the server still knew (empty after a server restart).
    pub requested_by: String,
    pub from_version: String,
    pub to_version: String,
    /// `succeeded`, `rolled_back` or `no_report`.
    pub outcome: String,
    pub detail: String,
    /// RFC 3339.
    pub at: String,
}

impl Store {
    /// Records an outcome; a second report for the same order replaces nothing.
    pub fn record_update(&self, r: &UpdateRecord) -> Result<()> {
        let detail: String = r.detail.chars().take(MAX_UPDATE_DETAIL).collect();
        self.with(|c| {
            c.execute(
                "INSERT OR IGNORE INTO agent_updates (order_id, agent_id, requested_by, from_version, to_version, outcome, detail, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![r.order_id, r.agent_id, r.requested_by, r.from_version, r.to_version, r.outcome, detail, r.at],
            )?;
            Ok(())
        })
    }

    /// The agent's updates, newest first.
    pub fn agent_updates(&self, agent_id: &str, limit: u32) -> Result<Vec<UpdateRecord>> {
        self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT order_id, agent_id, requested_by, from_version, to_version, outcome, detail, at
                 FROM agent_updates WHERE agent_id = ?1 ORDER BY at DESC, rowid DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![agent_id, limit], |r| {
                Ok(UpdateRecord {
                    order_id: r.get(0)?,
                    agent_id: r.get(1)?,
                    requested_by: r.get(2)?,
                    from_version: r.get(3)?,
                    to_version: r.get(4)?,
                    outcome: r.get(5)?,
                    detail: r.get(6)?,
                    at: r.get(7)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
    }
}
