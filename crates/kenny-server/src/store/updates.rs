//! What became of each agent update: the agent's own report (succeeded or rolled back,
//! and why), or the server's note that no report came.

use super::db::args;
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
    /// Records an outcome. The agent's own report replaces the server's `no_report`
    /// (a report can arrive after the server stopped waiting, e.g. when the new build
    /// took long to reconnect), and who asked is kept; nothing else is ever replaced, so
    /// a replayed report cannot rewrite history.
    pub fn record_update(&self, r: &UpdateRecord) -> Result<()> {
        let detail: String = r.detail.chars().take(MAX_UPDATE_DETAIL).collect();
        self.write_db(|c| {
            c.execute(
                "INSERT INTO agent_updates (order_id, agent_id, requested_by, from_version, to_version, outcome, detail, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (order_id) DO UPDATE SET outcome = excluded.outcome, detail = excluded.detail, at = excluded.at
                 WHERE agent_updates.outcome = 'no_report' AND excluded.outcome <> 'no_report'
                   AND agent_updates.agent_id = excluded.agent_id",
                args![
                    &r.order_id,
                    &r.agent_id,
                    &r.requested_by,
                    &r.from_version,
                    &r.to_version,
                    &r.outcome,
                    &detail,
                    &r.at
                ],
            )?;
            Ok(())
        })
    }

    /// The agent's updates, newest first.
    pub fn agent_updates(&self, agent_id: &str, limit: u32) -> Result<Vec<UpdateRecord>> {
        // Two updates recorded at the same instant come in order id order: PostgreSQL
        // has no insertion order to fall back on as SQLite's rowid was.
        self.read_db(|c| {
            c.query_all(
                "SELECT order_id, agent_id, requested_by, from_version, to_version, outcome, detail, at
                 FROM agent_updates WHERE agent_id = ?1 ORDER BY at DESC, order_id DESC LIMIT ?2",
                args![agent_id, limit],
                |r| {
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
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: &str, requested_by: &str, detail: &str) -> UpdateRecord {
        UpdateRecord {
            order_id: "order-1".into(),
            agent_id: "pc-a".into(),
            requested_by: requested_by.into(),
            from_version: "0.1.0".into(),
            to_version: "0.2.0".into(),
            outcome: outcome.into(),
            detail: detail.into(),
            at: crate::clock::now(),
        }
    }

    #[test]
    fn a_late_report_replaces_no_report_and_nothing_replaces_a_report() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let outcome = |s: &Store| {
            let rows = s.agent_updates("pc-a", 10).unwrap();
            assert_eq!(rows.len(), 1, "{rows:?}");
            let r = &rows[0];
            (r.outcome.clone(), r.requested_by.clone(), r.detail.clone())
        };
        store
            .record_update(&record("no_report", "root", "no report within 150s"))
            .unwrap();
        // The agent's report arrives after the server stopped waiting (who asked is no
        // longer known to it).
        store.record_update(&record("succeeded", "", "")).unwrap();
        assert_eq!(outcome(&store), ("succeeded".into(), "root".into(), String::new()));
        // A replayed or contradicting report, or a late no_report, changes nothing.
        store.record_update(&record("rolled_back", "", "forged")).unwrap();
        store.record_update(&record("no_report", "x", "late")).unwrap();
        assert_eq!(outcome(&store), ("succeeded".into(), "root".into(), String::new()));
        // Another agent cannot claim the order.
        let mut other = record("no_report", "root", "");
        other.order_id = "order-2".into();
        store.record_update(&other).unwrap();
        let mut foreign = record("succeeded", "", "");
        foreign.order_id = "order-2".into();
        foreign.agent_id = "pc-b".into();
        store.record_update(&foreign).unwrap();
        assert!(store.agent_updates("pc-b", 10).unwrap().is_empty());
        assert!(
            store
                .agent_updates("pc-a", 10)
                .unwrap()
                .iter()
                .any(|r| r.order_id == "order-2" && r.outcome == "no_report")
        );
    }
}
