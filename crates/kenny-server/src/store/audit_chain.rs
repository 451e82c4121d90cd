//! The audit trail as a hash chain: every write of an audit row (its insert, its
//! finish, its interruption) appends an event to `audit_chain` holding the digest of
//! the whole row as written, linked to the event before it. Checkpoints
//! (`audit_checkpoints`) carry the chain's head signed with the server key; they are
//! made and checked in [`crate::ledger`], which also walks the chain to verify it.
//!
//! A row's current content must match the digest of its last event; earlier events of
//! the same row are held by the links only. Events are appended in the transaction
//! that writes the row, under a lock on PostgreSQL, so replicas never fork the chain.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::db::{self, Conn, Dialect, args};
use super::{Result, Store};

/// The hash before the first event.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The label every link hashes first.
const LINK_LABEL: &str = "kenny-audit-chain-v1";
/// The advisory lock audit writers take on PostgreSQL: a number of its own (…0001 is
/// the migrations' lock, …0002 the leader's).
const CHAIN_LOCK: i64 = 0x6b65_6e6e_7900_0003;

/// Every column of `audit`, in the order [`row_from`] reads them: a macro, so the
/// statements that write a row can `concat!` it into their `RETURNING`.
macro_rules! row_columns {
    () => {
        "id, at, user_id, username, credential_kind, credential_id, agent_id, tool, args_digest, outcome, error_code, duration_ms, call_id, client_addr, target, proof"
    };
}
pub(super) use row_columns;
pub(super) const ROW_COLUMNS: &str = row_columns!();
const TEXT_COLUMNS: [(usize, &str); 12] = [
    (1, "at"),
    (3, "username"),
    (4, "credential_kind"),
    (5, "credential_id"),
    (6, "agent_id"),
    (7, "tool"),
    (8, "args_digest"),
    (9, "outcome"),
    (10, "error_code"),
    (12, "call_id"),
    (13, "client_addr"),
    (14, "target"),
];

/// One event of the chain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChainEvent {
    pub seq: i64,
    pub audit_id: i64,
    pub digest: String,
    pub hash: String,
}

/// A signed statement that the chain's event `seq` has hash `hash`, and that every row
/// up to `last_audit_id` had been written by then.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AuditCheckpoint {
    pub seq: i64,
    pub hash: String,
    pub last_audit_id: i64,
    pub at: String,
    pub sig: String,
}

/// An event, from `seq, audit_id, digest, hash`.
fn event_from(r: &db::Row<'_, '_>) -> Result<ChainEvent> {
    Ok(ChainEvent {
        seq: r.get(0)?,
        audit_id: r.get(1)?,
        digest: r.get(2)?,
        hash: r.get(3)?,
    })
}

/// The whole row, every column by name, as its digest sees it.
pub(super) fn row_from(r: &db::Row<'_, '_>) -> Result<Map<String, Value>> {
    let mut row = Map::new();
    row.insert("id".into(), Value::from(r.get::<i64>(0)?));
    for (i, name) in TEXT_COLUMNS {
        row.insert(
            name.into(),
            r.get::<Option<String>>(i)?.map_or(Value::Null, Value::from),
        );
    }
    row.insert(
        "user_id".into(),
        r.get::<Option<i64>>(2)?.map_or(Value::Null, Value::from),
    );
    row.insert("duration_ms".into(), Value::from(r.get::<i64>(11)?));
    row.insert(
        "proof".into(),
        r.get::<Option<String>>(15)?.map_or(Value::Null, Value::from),
    );
    Ok(row)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest of a row: SHA-256 of its canonical JSON.
pub fn row_digest(row: &Map<String, Value>) -> String {
    hex(&Sha256::digest(kenny_proto::proof::canonical_json(&Value::Object(
        row.clone(),
    ))))
}

/// The hash of event `seq`, for row `audit_id` with `digest`, after `prev`.
pub fn link(prev: &str, seq: i64, audit_id: i64, digest: &str) -> String {
    let text = format!("{LINK_LABEL}\0{prev}\0{seq}\0{audit_id}\0{digest}");
    hex(&Sha256::digest(text.as_bytes()))
}

/// Where the chain ends: the last event, else the checkpoint that pruning left as its
/// base, else the start.
pub(super) struct Head {
    seq: i64,
    hash: String,
}

/// Locks the chain for this transaction (PostgreSQL: one writer across replicas;
/// SQLite has only one writer anyway) and reads its head.
pub(super) fn lock_head(c: &Conn<'_>) -> Result<Head> {
    if c.dialect() == Dialect::Postgres {
        c.batch(&format!("SELECT pg_advisory_xact_lock({CHAIN_LOCK})"))?;
    }
    // The last event, else the checkpoint pruning left as the base.
    for newest in [
        "SELECT seq, hash FROM audit_chain ORDER BY seq DESC LIMIT 1",
        "SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1",
    ] {
        let head = c.query_opt(newest, args![], |r| {
            Ok(Head {
                seq: r.get(0)?,
                hash: r.get(1)?,
            })
        })?;
        if let Some(head) = head {
            return Ok(head);
        }
    }
    Ok(Head {
        seq: 0,
        hash: GENESIS.into(),
    })
}

/// Appends the event for `row`, the whole row as just written (read back with
/// `RETURNING` [`ROW_COLUMNS`] by the statement that wrote it).
pub(super) fn append(c: &Conn<'_>, head: &mut Head, row: &Map<String, Value>) -> Result<()> {
    let audit_id = row.get("id").and_then(Value::as_i64).unwrap_or_default();
    let digest = row_digest(row);
    let seq = head.seq + 1;
    let hash = link(&head.hash, seq, audit_id, &digest);
    c.execute(
        "INSERT INTO audit_chain (seq, audit_id, digest, hash) VALUES (?1, ?2, ?3, ?4)",
        args![seq, audit_id, &digest, &hash],
    )?;
    *head = Head { seq, hash };
    Ok(())
}

/// Runs `update` (an `UPDATE audit ... RETURNING` [`ROW_COLUMNS`]) and appends an
/// event for every row it changed; how many.
pub(super) fn update_chained(c: &Conn<'_>, update: &str, values: &[db::Value<'_>]) -> Result<usize> {
    c.in_tx(|tx| {
        let mut head = lock_head(tx)?;
        let rows = tx.query_all(update, values, row_from)?;
        for row in &rows {
            append(tx, &mut head, row)?;
        }
        Ok(rows.len())
    })
}

impl Store {
    /// The chain's last event and the newest row it covers: what a checkpoint signs.
    /// `None` when no event was appended since the newest checkpoint.
    pub fn audit_chain_unsigned_head(&self) -> Result<Option<(i64, String, i64)>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT e.seq, e.hash, (SELECT MAX(audit_id) FROM audit_chain)
                 FROM audit_chain e
                 WHERE e.seq > COALESCE((SELECT MAX(seq) FROM audit_checkpoints), 0)
                 ORDER BY e.seq DESC LIMIT 1",
                args![],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        })
    }

    pub fn add_audit_checkpoint(&self, cp: &AuditCheckpoint) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO audit_checkpoints (seq, hash, last_audit_id, at, sig) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (seq) DO NOTHING",
                args![cp.seq, &cp.hash, cp.last_audit_id, &cp.at, &cp.sig],
            )?;
            Ok(())
        })
    }

    /// Every checkpoint, oldest first.
    pub fn audit_checkpoints(&self) -> Result<Vec<AuditCheckpoint>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT seq, hash, last_audit_id, at, sig FROM audit_checkpoints ORDER BY seq",
                args![],
                |r| {
                    Ok(AuditCheckpoint {
                        seq: r.get(0)?,
                        hash: r.get(1)?,
                        last_audit_id: r.get(2)?,
                        at: r.get(3)?,
                        sig: r.get(4)?,
                    })
                },
            )
        })
    }

    /// Up to `limit` events after `after_seq`, in order.
    pub fn audit_chain_page(&self, after_seq: i64, limit: u32) -> Result<Vec<ChainEvent>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT seq, audit_id, digest, hash FROM audit_chain WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                args![after_seq, limit],
                event_from,
            )
        })
    }

    /// Up to `limit` whole rows with ids above `after_id`, in id order.
    pub fn audit_rows_page(&self, after_id: i64, limit: u32) -> Result<Vec<Map<String, Value>>> {
        self.read_db(|c| {
            c.query_all(
                &format!("SELECT {ROW_COLUMNS} FROM audit WHERE id > ?1 ORDER BY id LIMIT ?2"),
                args![after_id, limit],
                row_from,
            )
        })
    }

    /// The newest event of each of these rows.
    pub fn audit_last_events(&self, ids: &[i64]) -> Result<Vec<ChainEvent>> {
        self.read_db(|c| {
            let mut found = Vec::with_capacity(ids.len());
            for id in ids {
                let event = c.query_opt(
                    "SELECT seq, audit_id, digest, hash FROM audit_chain WHERE audit_id = ?1 ORDER BY seq DESC LIMIT 1",
                    args![*id],
                    event_from,
                )?;
                found.extend(event);
            }
            Ok(found)
        })
    }

    /// Where the chain starts: rows with ids up to the first were written before it
    /// began; the second is the seq of the checkpoint it continues from (0: the start).
    pub fn audit_chain_start(&self) -> Result<(i64, i64)> {
        self.read_db(|c| {
            c.query_one("SELECT before_id, base_seq FROM audit_chain_start", args![], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
        })
    }

    /// Deletes up to `batch` rows older than `cutoff`, only ever down to a checkpoint:
    /// rows written before the chain began go by their own age; chained rows go once a
    /// checkpoint newer than them is older than `cutoff`, which then becomes the chain's
    /// signed base (its events and older checkpoints go with them). How many rows went.
    pub fn prune_audit(&self, cutoff: &str, batch: u32) -> Result<usize> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let _head = lock_head(tx)?;
                let (before_chain, base_seq): (i64, i64) =
                    tx.query_one("SELECT before_id, base_seq FROM audit_chain_start", args![], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?;
                let unchained = tx.execute(
                    "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE id <= ?1 AND at < ?2 ORDER BY id LIMIT ?3)",
                    args![before_chain, cutoff, batch],
                )? as usize;
                if unchained > 0 {
                    return Ok(unchained);
                }
                let covered = |last_id: i64| {
                    tx.execute(
                        "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE id <= ?1 ORDER BY id LIMIT ?2)",
                        args![last_id, batch],
                    )
                    .map(|n| n as usize)
                };
                // Rows the base already covers, left by an earlier pass.
                let base_last = tx.query_opt(
                    "SELECT last_audit_id FROM audit_checkpoints WHERE seq = ?1",
                    args![base_seq],
                    |r| r.get::<i64>(0),
                )?;
                if let Some(last_id) = base_last {
                    let rows = covered(last_id)?;
                    if rows > 0 {
                        return Ok(rows);
                    }
                }
                let next = tx.query_opt(
                    "SELECT c.seq, c.last_audit_id FROM audit_checkpoints c
                     WHERE c.seq > ?1 AND (SELECT at FROM audit WHERE id = c.last_audit_id) < ?2
                     ORDER BY c.seq DESC LIMIT 1",
                    args![base_seq, cutoff],
                    |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)),
                )?;
                let Some((seq, last_id)) = next else { return Ok(0) };
                tx.execute("DELETE FROM audit_chain WHERE seq <= ?1", args![seq])?;
                tx.execute("DELETE FROM audit_checkpoints WHERE seq < ?1", args![seq])?;
                tx.execute("UPDATE audit_chain_start SET base_seq = ?1", args![seq])?;
                covered(last_id)
            })
        })
    }
}
