//! The audit trail's tamper evidence: checkpoints that sign the hash chain's head with
//! the server key, the walk that verifies the chain and every row against it
//! (`kenny-server audit verify`), and the export of a range of rows with their proofs.
//!
//! The chain itself is written by the store ([`crate::store::audit_chain`]) in the
//! transaction that writes each row.

use std::collections::HashMap;
use std::time::Duration;

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::store::audit_chain::{self, AuditCheckpoint, GENESIS};
use crate::store::{Store, StoreError};

/// The label every checkpoint signature starts with.
const CHECKPOINT_LABEL: &str = "kenny-audit-checkpoint-v1";
/// How often the leader signs the chain's head when it moved.
pub(crate) const CHECKPOINT_EVERY: Duration = Duration::from_secs(600);
/// Rows and events read per page while verifying or exporting.
const PAGE: u32 = 5_000;

fn checkpoint_message(seq: i64, hash: &str, last_audit_id: i64, at: &str) -> Vec<u8> {
    format!("{CHECKPOINT_LABEL}\0{seq}\0{hash}\0{last_audit_id}\0{at}").into_bytes()
}

/// Signs the chain's head if it moved since the last checkpoint; the new checkpoint.
pub fn checkpoint(store: &Store, key: &SigningKey, now: &str) -> Result<Option<AuditCheckpoint>, StoreError> {
    let Some((seq, hash, last_audit_id)) = store.audit_chain_unsigned_head()? else {
        return Ok(None);
    };
    let sig = kenny_proto::auth::sign(key, &checkpoint_message(seq, &hash, last_audit_id, now));
    let cp = AuditCheckpoint {
        seq,
        hash,
        last_audit_id,
        at: now.to_owned(),
        sig,
    };
    store.add_audit_checkpoint(&cp)?;
    Ok(Some(cp))
}

/// [`checkpoint`] off the async runtime; a failure is logged, saying `when` it was
/// tried, and the chain is signed at the next chance.
pub(crate) async fn sign_head(
    store: &std::sync::Arc<Store>,
    key: std::sync::Arc<SigningKey>,
    now: String,
    when: &'static str,
) {
    match store.blocking(move |s| checkpoint(s, &key, &now)).await {
        Ok(Some(cp)) => tracing::debug!(seq = cp.seq, when, "audit chain checkpoint signed"),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(error = %e, when, "could not sign the audit chain's head; it is signed at the next chance")
        }
    }
}

fn checkpoint_verifies(cp: &AuditCheckpoint, key: &VerifyingKey) -> bool {
    let message = checkpoint_message(cp.seq, &cp.hash, cp.last_audit_id, &cp.at);
    kenny_proto::auth::verify(key, &message, &cp.sig).is_ok()
}

/// What `audit verify` found.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ChainReport {
    /// Events walked.
    pub events: u64,
    /// Rows whose content matched their last event.
    pub rows_verified: u64,
    /// Rows written before the chain began (not covered).
    pub rows_before_chain: u64,
    /// Rows the chain's base checkpoint covers, still being pruned.
    pub rows_pruning: u64,
    pub checkpoints: u64,
    /// The newest checkpoint: up to where the chain is signed.
    pub signed_through: Option<AuditCheckpoint>,
    /// The checkpoint the chain continues from after pruning (none: from the start).
    pub base: Option<AuditCheckpoint>,
    /// The first problem found; `None` when everything verified.
    pub broken: Option<Broken>,
}

/// The first broken link: where, and what it means.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Broken {
    /// The audit row it concerns, when one does.
    pub audit_id: Option<i64>,
    /// The chain event it concerns, when one does.
    pub seq: Option<i64>,
    pub what: String,
}

impl ChainReport {
    pub fn is_intact(&self) -> bool {
        self.broken.is_none()
    }
}

fn broken(audit_id: Option<i64>, seq: Option<i64>, what: String) -> Option<Broken> {
    Some(Broken { audit_id, seq, what })
}

/// Walks the chain from its base and every row against it, with the server's public
/// key for the checkpoints. Stops at the first problem, which it names.
pub fn verify(store: &Store, server_key: &VerifyingKey) -> Result<ChainReport, StoreError> {
    let (before_chain, base_seq) = store.audit_chain_start()?;
    let checkpoints = store.audit_checkpoints()?;
    let mut report = ChainReport {
        events: 0,
        rows_verified: 0,
        rows_before_chain: 0,
        rows_pruning: 0,
        checkpoints: checkpoints.len() as u64,
        signed_through: checkpoints.last().cloned(),
        base: None,
        broken: None,
    };
    if let Some(bad) = checkpoints.iter().find(|cp| !checkpoint_verifies(cp, server_key)) {
        report.broken = broken(
            None,
            Some(bad.seq),
            format!(
                "the checkpoint at event {} ({}) is not signed by this server's key: it was forged or edited",
                bad.seq, bad.at
            ),
        );
        return Ok(report);
    }
    let (mut prev_seq, mut prev_hash, covered_through) = if base_seq == 0 {
        (0, GENESIS.to_owned(), 0)
    } else {
        let Some(base) = checkpoints.iter().find(|cp| cp.seq == base_seq) else {
            report.broken = broken(
                None,
                Some(base_seq),
                format!("the chain continues from checkpoint {base_seq}, which is gone: it was deleted"),
            );
            return Ok(report);
        };
        report.base = Some(base.clone());
        (base.seq, base.hash.clone(), base.last_audit_id)
    };
    let signed: HashMap<i64, &AuditCheckpoint> = checkpoints.iter().map(|cp| (cp.seq, cp)).collect();
    // Each row's newest event digest.
    let mut last_digest: HashMap<i64, (i64, String)> = HashMap::new();
    loop {
        let page = store.audit_chain_page(prev_seq, PAGE)?;
        if page.is_empty() {
            break;
        }
        for event in page {
            let row = Some(event.audit_id);
            if event.seq != prev_seq + 1 {
                report.broken = broken(
                    row,
                    Some(prev_seq + 1),
                    format!(
                        "events {} to {} of the chain are missing (the next is for row {}): the writes they recorded were deleted",
                        prev_seq + 1,
                        event.seq - 1,
                        event.audit_id
                    ),
                );
                return Ok(report);
            }
            let expected = audit_chain::link(&prev_hash, event.seq, event.audit_id, &event.digest);
            if expected != event.hash {
                report.broken = broken(
                    row,
                    Some(event.seq),
                    format!(
                        "event {} (row {}) does not follow from the one before: the chain was edited or reordered there",
                        event.seq, event.audit_id
                    ),
                );
                return Ok(report);
            }
            if let Some(cp) = signed.get(&event.seq)
                && cp.hash != event.hash
            {
                report.broken = broken(
                    row,
                    Some(event.seq),
                    format!(
                        "event {} (row {}) is not what the checkpoint of {} signed: the chain was rewritten",
                        event.seq, event.audit_id, cp.at
                    ),
                );
                return Ok(report);
            }
            report.events += 1;
            prev_seq = event.seq;
            prev_hash = event.hash;
            last_digest.insert(event.audit_id, (event.seq, event.digest));
        }
    }
    if let Some(cp) = checkpoints.last()
        && cp.seq > prev_seq
    {
        report.broken = broken(
            None,
            Some(prev_seq + 1),
            format!(
                "the chain ends at event {prev_seq}, but the checkpoint of {} vouches for event {}: the newest writes were deleted",
                cp.at, cp.seq
            ),
        );
        return Ok(report);
    }
    let mut after_id = 0;
    loop {
        let rows = store.audit_rows_page(after_id, PAGE)?;
        let Some(last) = rows.last() else { break };
        after_id = last["id"].as_i64().unwrap_or(i64::MAX);
        for row in rows {
            let id = row["id"].as_i64().unwrap_or_default();
            match last_digest.remove(&id) {
                Some((seq, digest)) => {
                    if digest != audit_chain::row_digest(&row) {
                        report.broken = broken(
                            Some(id),
                            Some(seq),
                            format!(
                                "row {id} ({}) is not as it was written: it was edited after event {seq} recorded it",
                                describe(&row)
                            ),
                        );
                        return Ok(report);
                    }
                    report.rows_verified += 1;
                }
                None if id <= before_chain => report.rows_before_chain += 1,
                None if id <= covered_through => report.rows_pruning += 1,
                None => {
                    report.broken = broken(
                        Some(id),
                        None,
                        format!(
                            "row {id} ({}) is in no event of the chain: it was added, or moved to this id, outside kenny",
                            describe(&row)
                        ),
                    );
                    return Ok(report);
                }
            }
        }
    }
    // Rows the chain recorded that are gone, other than those pruning let go.
    if let Some((&id, &(seq, _))) = last_digest
        .iter()
        .filter(|(id, _)| **id > covered_through)
        .min_by_key(|(id, _)| **id)
    {
        report.broken = broken(
            Some(id),
            Some(seq),
            format!("row {id}, which event {seq} recorded, is gone: it was deleted outside kenny"),
        );
    }
    Ok(report)
}

fn describe(row: &Map<String, Value>) -> String {
    let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or("-").to_owned();
    format!(
        "{} {} on {} at {}",
        text("tool"),
        text("outcome"),
        text("agent_id"),
        text("at")
    )
}

/// Writes rows with ids in `from..=to` as JSON lines: each row with every column (the
/// agent's proof among them) and its last chain event, then the checkpoints that sign
/// the chain past them. How many rows.
pub fn export(store: &Store, from: i64, to: i64, out: &mut impl std::io::Write) -> anyhow::Result<u64> {
    let mut after_id = from.saturating_sub(1);
    let mut written = 0;
    loop {
        let rows = store.audit_rows_page(after_id, PAGE)?;
        let rows: Vec<_> = rows
            .into_iter()
            .take_while(|r| r["id"].as_i64().is_some_and(|id| id <= to))
            .collect();
        let Some(last) = rows.last() else { break };
        after_id = last["id"].as_i64().unwrap_or(i64::MAX);
        let ids: Vec<i64> = rows.iter().filter_map(|r| r["id"].as_i64()).collect();
        let events: HashMap<i64, _> = store
            .audit_last_events(&ids)?
            .into_iter()
            .map(|e| (e.audit_id, e))
            .collect();
        for row in rows {
            let id = row["id"].as_i64().unwrap_or_default();
            let line = serde_json::json!({"row": row, "event": events.get(&id)});
            serde_json::to_writer(&mut *out, &line)?;
            out.write_all(b"\n")?;
            written += 1;
        }
        if after_id >= to {
            break;
        }
    }
    for cp in store.audit_checkpoints()? {
        serde_json::to_writer(&mut *out, &serde_json::json!({ "checkpoint": cp }))?;
        out.write_all(b"\n")?;
    }
    Ok(written)
}

/// A verification the server ran, and when.
#[derive(Debug, Clone)]
pub struct Checked {
    pub at: String,
    pub report: ChainReport,
}

/// The newest verification this server ran in the background, for the dashboard.
#[derive(Debug, Default)]
pub struct LastCheck(std::sync::Mutex<Option<Checked>>);

impl LastCheck {
    pub fn latest(&self) -> Option<Checked> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, checked: Checked) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(checked);
    }
}

/// Checkpoints signed between two full verifications.
const VERIFY_EVERY_CHECKPOINTS: u32 = 6;

/// On the leading replica: signs the chain's head every [`CHECKPOINT_EVERY`], and
/// walks the whole chain at start-up and hourly, keeping the result in `last` (a
/// broken chain is logged as an error).
pub(crate) async fn checkpoint_loop(
    store: std::sync::Arc<Store>,
    key: std::sync::Arc<SigningKey>,
    clock: crate::clock::Clock,
    leader: crate::leader::Leader,
    last: std::sync::Arc<LastCheck>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut passes = 0u32;
    let pass = || {
        let (store, key, now, last) = (store.clone(), key.clone(), clock.now(), last.clone());
        let full = passes.is_multiple_of(VERIFY_EVERY_CHECKPOINTS);
        passes += 1;
        async move {
            let public = key.verifying_key();
            sign_head(&store, key, now.clone(), "every 10 minutes").await;
            if !full {
                return;
            }
            match store.blocking(move |s| verify(s, &public)).await {
                Ok(report) => {
                    if let Some(b) = &report.broken {
                        tracing::error!(what = %b.what, "the audit trail's hash chain is broken: rows were changed outside kenny");
                    }
                    last.record(Checked { at: now, report });
                }
                Err(e) => tracing::warn!(error = %e, "could not verify the audit trail's hash chain"),
            }
        }
    };
    leader.every(CHECKPOINT_EVERY, &shutdown, pass).await;
}
