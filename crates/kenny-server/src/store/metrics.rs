//! The compact history: one small point per snapshot, and the hourly and daily points
//! older ones are averaged into (see `crate::history`).

use super::db::{Conn, Row, args};
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
    "INSERT INTO metrics (agent_id, tier, at, health, cpu, load, memory, temperature, disks)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
     ON CONFLICT (agent_id, tier, at) DO UPDATE SET health = excluded.health, cpu = excluded.cpu,
         load = excluded.load, memory = excluded.memory, temperature = excluded.temperature, disks = excluded.disks";

const COLUMNS: &str = "SELECT agent_id, at, tier, health, cpu, load, memory, temperature, disks FROM metrics";

pub(super) fn insert(c: &Conn, m: &MetricRow) -> Result<()> {
    c.execute(
        INSERT_METRIC,
        args![
            &m.agent_id,
            m.tier,
            &m.at,
            m.health,
            m.cpu,
            m.load,
            m.memory,
            m.temperature,
            &m.disks
        ],
    )?;
    Ok(())
}

impl Store {
    /// One PC's points at or after `since`, oldest first, every resolution together.
    pub fn metrics(&self, agent_id: &str, since: &str) -> Result<Vec<MetricRow>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{COLUMNS} WHERE agent_id = ?1 AND at >= ?2 ORDER BY at"),
                args![agent_id, since],
                metric_row,
            )
        })
    }

    /// The PCs with points of `tier` older than `before`.
    pub fn agents_with_metrics_before(&self, tier: i64, before: &str) -> Result<Vec<String>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT DISTINCT agent_id FROM metrics WHERE tier = ?1 AND at < ?2",
                args![tier, before],
                |r| r.get(0),
            )
        })
    }

    /// One PC's points of `tier` older than `before`, oldest first.
    pub fn metrics_before(&self, agent_id: &str, tier: i64, before: &str) -> Result<Vec<MetricRow>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{COLUMNS} WHERE agent_id = ?1 AND tier = ?2 AND at < ?3 ORDER BY at"),
                args![agent_id, tier, before],
                metric_row,
            )
        })
    }

    /// Replaces one PC's points of `tier` older than `before` with `merged`, at once.
    pub fn merge_metrics(&self, agent_id: &str, tier: i64, before: &str, merged: &[MetricRow]) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                tx.execute(
                    "DELETE FROM metrics WHERE agent_id = ?1 AND tier = ?2 AND at < ?3",
                    args![agent_id, tier, before],
                )?;
                for m in merged {
                    insert(tx, m)?;
                }
                Ok(())
            })
        })
    }

    /// Deletes points of `tier` older than `before`; returns how many.
    pub fn prune_metrics(&self, tier: i64, before: &str) -> Result<usize> {
        self.write_db(|c| {
            Ok(c.execute("DELETE FROM metrics WHERE tier = ?1 AND at < ?2", args![tier, before])? as usize)
        })
    }
}

fn metric_row(r: &Row) -> Result<MetricRow> {
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

/// What `/metrics` reads from the database when scraped: alert deliveries kept, by
/// channel kind and state, and the dashboard chat's use on `day` (all users).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrapeCounts {
    pub deliveries: Vec<(String, String, i64)>,
    pub chat_input_tokens: i64,
    pub chat_output_tokens: i64,
    pub chat_turns: i64,
}

impl Store {
    pub fn scrape_counts(&self, day: &str) -> Result<ScrapeCounts> {
        self.read_db(|c| {
            let deliveries = c.query_all(
                "SELECT ch.kind, d.status, COUNT(*) FROM alert_deliveries d
                 JOIN alert_channels ch ON ch.id = d.channel_id GROUP BY ch.kind, d.status",
                args![],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            // PostgreSQL sums integers as NUMERIC; the casts keep the sums integers there.
            let (chat_input_tokens, chat_output_tokens, chat_turns) = c.query_one(
                "SELECT CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT),
                        CAST(COALESCE(SUM(turns), 0) AS BIGINT)
                 FROM chat_usage WHERE day = ?1",
                args![day],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            Ok(ScrapeCounts {
                deliveries,
                chat_input_tokens,
                chat_output_tokens,
                chat_turns,
            })
        })
    }
}

#[cfg(test)]
mod scrape_tests {
    use super::*;

    #[test]
    fn deliveries_are_counted_by_channel_kind_and_state_and_chat_use_by_day() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.scrape_counts("2026-12-01").unwrap(), ScrapeCounts::default());
        store
            .with(|c| {
                c.execute_batch(
                    "INSERT INTO alert_channels (id, name, kind, config, created_at) VALUES
                         (1, 'phone', 'ntfy', '{}', 't'), (2, 'hook', 'webhook', '{}', 't');
                     INSERT INTO alert_deliveries (channel_id, event, message, status, next_at, created_at) VALUES
                         (1, 'open', 'm', 'sent', 't', 't'), (1, 'open', 'm', 'sent', 't', 't'),
                         (2, 'open', 'm', 'failed', 't', 't');
                     INSERT INTO users (id, username, password_hash, role, created_at) VALUES (1, 'a', 'h', 'user', 't');
                     INSERT INTO chat_usage (user_id, day, input_tokens, output_tokens, turns) VALUES
                         (1, '2026-12-01', 100, 20, 2), (1, '2026-11-30', 5, 5, 1);",
                )?;
                Ok(())
            })
            .unwrap();
        let counts = store.scrape_counts("2026-12-01").unwrap();
        let mut deliveries = counts.deliveries.clone();
        deliveries.sort();
        assert_eq!(
            deliveries,
            vec![
                ("ntfy".into(), "sent".into(), 2),
                ("webhook".into(), "failed".into(), 1)
            ]
        );
        assert_eq!(
            (counts.chat_input_tokens, counts.chat_output_tokens, counts.chat_turns),
            (100, 20, 2)
        );
    }
}
