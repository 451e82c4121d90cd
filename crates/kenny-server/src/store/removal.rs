//! Removing a PC: its row in `agents` goes at once (with it the key and the token, so
//! nothing logs in as it any more) and a `removed_agents` row remembers when. Its
//! history (snapshots, points, changes, alerts, filter, updates...) stays until
//! [`Store::purge_removed_agents`] runs past the retention period; adding the same id
//! again before that keeps it (a trigger forgets the removal). The audit log is never
//! purged here: it follows its own retention.

use super::db::{Dialect, args};
use super::{Result, Store, StoreError};

/// Tables that keep their rows of a removed PC: the audit log has its own retention,
/// and these two are the removal itself.
const KEPT: [&str; 3] = ["audit", "agents", "removed_agents"];

/// Every table with an `agent_id` column, as each backend describes its schema.
const SQLITE_AGENT_TABLES: &str = "SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
     WHERE m.type = 'table' AND p.name = 'agent_id'";
// `table_name` is an `sql_identifier`, which reads back as text only once cast; views
// are left out as SQLite's query leaves them out.
const POSTGRES_AGENT_TABLES: &str = "SELECT CAST(c.table_name AS TEXT) FROM information_schema.columns c
     JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
     WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.column_name = 'agent_id'";

impl Store {
    /// Removes `agent_id`; its access to the PCs' users goes too, so a PC added later
    /// under the same id is not reachable by whoever could reach this one.
    pub fn remove_agent(&self, agent_id: &str, by: &str, now: &str) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                if tx.execute("DELETE FROM agents WHERE agent_id = ?1", args![agent_id])? == 0 {
                    return Err(StoreError::NotFound(format!("no agent with id {agent_id:?}")));
                }
                tx.execute("DELETE FROM user_hosts WHERE agent_id = ?1", args![agent_id])?;
                tx.execute(
                    "INSERT INTO removed_agents (agent_id, removed_at, removed_by) VALUES (?1, ?2, ?3)
                     ON CONFLICT (agent_id) DO UPDATE SET removed_at = excluded.removed_at,
                     removed_by = excluded.removed_by",
                    args![agent_id, now, by],
                )?;
                Ok(())
            })
        })
    }

    /// Deletes every row of PCs removed before `before` from every table with an
    /// `agent_id` column (found in the schema, so a new table is covered without a
    /// change here), except the audit log. Returns the PCs purged.
    pub fn purge_removed_agents(&self, before: &str) -> Result<Vec<String>> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let gone: Vec<String> = tx.query_all(
                    "SELECT agent_id FROM removed_agents WHERE removed_at < ?1",
                    args![before],
                    |r| r.get(0),
                )?;
                if gone.is_empty() {
                    return Ok(gone);
                }
                // The schema itself is described differently by each backend; nothing
                // portable lists a table's columns.
                let schema_query = match tx.dialect() {
                    Dialect::Sqlite => SQLITE_AGENT_TABLES,
                    Dialect::Postgres => POSTGRES_AGENT_TABLES,
                };
                let tables: Vec<String> = tx.query_all(schema_query, args![], |r| r.get(0))?;
                for table in tables.iter().filter(|t| !KEPT.contains(&t.as_str())) {
                    // A table name from the schema itself, quoted: not caller input.
                    let sql = format!("DELETE FROM \"{}\" WHERE agent_id = ?1", table.replace('"', "\"\""));
                    for id in &gone {
                        tx.execute(&sql, args![id])?;
                    }
                }
                for id in &gone {
                    tx.execute("DELETE FROM removed_agents WHERE agent_id = ?1", args![id])?;
                }
                Ok(gone)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_pc_logs_in_no_more_and_its_history_goes_after_the_retention_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for id in ["pc-a", "pc-b"] {
            store.create_agent(id, "hash", "2026-01-01T00:00:00.000Z").unwrap();
        }
        let count = |table: &str, id: &str| -> i64 {
            store
                .read(|c| {
                    Ok(c.query_row(
                        &format!("SELECT COUNT(*) FROM {table} WHERE agent_id = ?1"),
                        [id],
                        |r| r.get(0),
                    )?)
                })
                .unwrap()
        };
        store
            .with(|c| {
                c.execute_batch(
                    "INSERT INTO users (id, username, password_hash, role, created_at) VALUES (5, 'kid', 'h', 'user', 't');
                     INSERT INTO user_hosts (user_id, agent_id) VALUES (5, 'pc-a'), (5, 'pc-b');
                     INSERT INTO web_activity (agent_id, domain, first_seen, last_seen, hits, recorded_at)
                         VALUES ('pc-a', 'x.example', 't', 't', 1, 't'), ('pc-b', 'x.example', 't', 't', 1, 't');",
                )?;
                Ok(())
            })
            .unwrap();
        store.remove_agent("pc-a", "alice", "2026-02-01T00:00:00.000Z").unwrap();
        assert!(store.agent_credentials("pc-a").unwrap().is_none(), "no token, no key");
        assert_eq!(count("user_hosts", "pc-a"), 0, "nobody reaches the id any more");
        assert_eq!(count("web_activity", "pc-a"), 1, "history kept for now");
        let err = store.remove_agent("pc-a", "alice", "t").unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err}");

        assert!(
            store
                .purge_removed_agents("2026-02-01T00:00:00.000Z")
                .unwrap()
                .is_empty(),
            "not yet"
        );
        assert_eq!(
            store.purge_removed_agents("2026-03-03T00:00:00.000Z").unwrap(),
            ["pc-a"]
        );
        assert_eq!(count("web_activity", "pc-a"), 0);
        assert_eq!(
            (count("web_activity", "pc-b"), count("user_hosts", "pc-b")),
            (1, 1),
            "other PCs untouched"
        );

        // Added again before the purge: the history stays with it.
        store.remove_agent("pc-b", "alice", "2026-02-01T00:00:00.000Z").unwrap();
        store.create_agent("pc-b", "hash2", "2026-02-02T00:00:00.000Z").unwrap();
        assert!(
            store
                .purge_removed_agents("2026-12-01T00:00:00.000Z")
                .unwrap()
                .is_empty()
        );
        assert_eq!(count("web_activity", "pc-b"), 1);
    }
}
