//! The compact history: one small point per snapshot, and the hourly and daily points
//! older ones are averaged into (see `crate::history`).

use rusqlite::params;

use super::{Result, Store};

/// One point. `tier` 0 is as received, 1 hourly, 2 daily. `disks` is a JSON object of
/// mount point to percent used.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    pub agent_id: String,
    pub at: String,
    pub tier: i64,
    pub health: Option<i64>,
    pub cpu: Option<f64>,
    pub load: Option<f64>,
    pub memory: Option<f64>,
    pub temperature: Option<f64>,
    pub disks: String,
}

pub(super) const INSERT_METRIC: &str =
    "INSERT OR REPLACE INTO metrics (agent_id, tier, at, health, cpu, load, memory, temperature, disks)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

const COLUMNS: &str = "SELECT agent_id, at, tier, health, cpu, load, memory, temperature, disks FROM metrics";

pub(super) fn insert(c: &rusqlite::Connection, m: &MetricRow) -> rusqlite::Result<()> {
    c.prepare_cached(INSERT_METRIC)?.execute(params![
        m.agent_id,
        m.tier,
        m.at,
        m.health,
        m.cpu,
        m.load,
        m.memory,
        m.temperature,
        m.disks
    ])?;
    Ok(())
}

impl Store {
    /// One PC's points at or after `since`, oldest first, every resolution together.
    pub fn metrics(&self, agent_id: &str, since: &str) -> Result<Vec<MetricRow>> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(&format!("{COLUMNS} WHERE agent_id = ?1 AND at >= ?2 ORDER BY at"))?;
            let rows = stmt
                .query_map(params![agent_id, since], metric_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// The PCs with points of `tier` older than `before`.
    pub fn agents_with_metrics_before(&self, tier: i64, before: &str) -> Result<Vec<String>> {
        self.read(|c| {
            let mut stmt = c.prepare_cached("SELECT DISTINCT agent_id FROM metrics WHERE tier = ?1 AND at < ?2")?;
            let rows = stmt
                .query_map(params![tier, before], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// One PC's points of `tier` older than `before`, oldest first.
    pub fn metrics_before(&self, agent_id: &str, tier: i64, before: &str) -> Result<Vec<MetricRow>> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "{COLUMNS} WHERE agent_id = ?1 AND tier = ?2 AND at < ?3 ORDER BY at"
            ))?;
            let rows = stmt
                .query_map(params![agent_id, tier, before], metric_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// Replaces one PC's points of `tier` older than `before` with `merged`, at once.
    pub fn merge_metrics(&self, agent_id: &str, tier: i64, before: &str, merged: &[MetricRow]) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM metrics WHERE agent_id = ?1 AND tier = ?2 AND at < ?3",
                params![agent_id, tier, before],
            )?;
            for m in merged {
                insert(&tx, m)?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Deletes points of `tier` older than `before`; returns how many.
    pub fn prune_metrics(&self, tier: i64, before: &str) -> Result<usize> {
        self.with(|c| Ok(c.execute("DELETE FROM metrics WHERE tier = ?1 AND at < ?2", params![tier, before])?))
    }
}

fn metric_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MetricRow> {
    Ok(MetricRow {
        agent_id: r.get(0)?,
        at: r.get(1)?,
        tier: r.get(2)?,
        health: r.get(3)?,
        cpu: r.get(4)?,
        load: r.get(5)?,
        memory: r.get(6)?,
        temperature: r.get(7)?,
        disks: r.get(8)?,
    })
}
