//! The audit trail (one row per forwarded call and per refusal), its retention, and
//! the other background writes: token use, telemetry snapshots.
//!
//! Callers hand rows to a writer thread that commits whatever has queued up in one
//! transaction, so concurrent calls never wait on each other for SQLite and a burst
//! costs one commit instead of hundreds.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::alerts::Alerts;
use crate::clock::Clock;
use crate::health::HealthBook;
use crate::store::{AuditFinish, AuditRow, AuditWrite, HealthRow, MetricRow, NewSnapshot, Store};

const QUEUE: usize = 65_536;
const MAX_BATCH: usize = 1024;
/// Whole snapshots kept per agent (the newest answers `agent_snapshot`, the one before
/// is what changes are found against); history keeps a small point of each instead
/// (`crate::history`), so older ones are pruned as new ones arrive.
const TELEMETRY_KEPT: u32 = 3;

pub(crate) enum Record {
    Audit(Box<AuditWrite>),
    /// `last_used_at` for tokens, coalesced in memory and flushed here.
    TouchTokens(Vec<(i64, String)>),
    /// A telemetry snapshot pushed by an agent, with the server's verdict on it.
    Telemetry(Box<Snapshot>),
    /// The health thresholds changed: judge every PC again, after every snapshot
    /// queued before.
    Rejudge {
        book: Arc<HealthBook>,
        version: u64,
    },
}

/// A snapshot on its way to the store.
pub(crate) struct Snapshot {
    agent_id: String,
    collected_at: String,
    snapshot: String,
    health: Option<HealthRow>,
    metrics: Option<MetricRow>,
}

#[derive(Clone)]
pub struct AuditLog {
    tx: mpsc::Sender<Record>,
}

impl AuditLog {
    /// Starts the writer thread; it ends when every `AuditLog` clone is dropped.
    /// `clock` dates the telemetry it stores as received; `alerts` hears of the
    /// high-priority changes it finds.
    pub fn start(
        store: Arc<Store>,
        clock: Clock,
        alerts: Alerts,
    ) -> std::io::Result<(AuditLog, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let handle = std::thread::Builder::new()
            .name("kenny-audit".into())
            .spawn(move || write_loop(store, clock, alerts, rx))?;
        Ok((AuditLog { tx }, handle))
    }

    /// Queues a row. Waits only if the writer is a whole queue behind.
    /// Records waiting for the writer (for `/metrics`).
    pub fn queue_depth(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    pub async fn record(&self, row: AuditRow) {
        self.write(AuditWrite::Row(Box::new(row))).await
    }

    /// Queues the completion of a call recorded as sent.
    pub async fn finish(&self, finish: AuditFinish) {
        self.write(AuditWrite::Finish(finish)).await
    }

    async fn write(&self, write: AuditWrite) {
        if self.tx.send(Record::Audit(Box::new(write))).await.is_err() {
            tracing::error!("audit writer has stopped; an audit record was not written");
        }
    }

    pub async fn touch_tokens(&self, touched: Vec<(i64, String)>) {
        let _ = self.tx.send(Record::TouchTokens(touched)).await;
    }

    /// Queues a telemetry snapshot; dropped (with a log line) if the writer is a whole
    /// queue behind, since a newer snapshot will follow.
    pub(crate) fn telemetry(
        &self,
        agent_id: String,
        collected_at: String,
        snapshot: String,
        health: Option<HealthRow>,
        metrics: Option<MetricRow>,
    ) {
        if self
            .tx
            .try_send(Record::Telemetry(Box::new(Snapshot {
                agent_id,
                collected_at,
                snapshot,
                health,
                metrics,
            })))
            .is_err()
        {
            tracing::warn!("storage writer is behind; a telemetry snapshot was dropped");
        }
    }

    /// Queues a re-judgement of every PC's health by thresholds of `version`.
    pub(crate) async fn rejudge(&self, book: Arc<HealthBook>, version: u64) {
        if self.tx.send(Record::Rejudge { book, version }).await.is_err() {
            tracing::error!("storage writer has stopped; health is judged again at each PC's next snapshot");
        }
    }
}

fn write_loop(store: Arc<Store>, clock: Clock, alerts: Alerts, mut rx: mpsc::Receiver<Record>) {
    let mut rows = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(record) = next.take() {
            match record {
                Record::Audit(write) => rows.push(*write),
                Record::TouchTokens(t) => {
                    if let Err(e) = store.touch_tokens(&t) {
                        tracing::warn!(error = %e, "could not record token use");
                    }
                }
                Record::Telemetry(t) => {
                    let Snapshot {
                        agent_id,
                        collected_at,
                        snapshot,
                        health,
                        metrics,
                    } = *t;
                    let received_at = clock.now();
                    let changes = crate::changes::since_stored(&store, &agent_id, &received_at, &snapshot);
                    let new = NewSnapshot {
                        agent_id: &agent_id,
                        collected_at: &collected_at,
                        received_at: &received_at,
                        snapshot: &snapshot,
                        health: health.as_ref(),
                        changes: &changes,
                        metrics: metrics.as_ref(),
                    };
                    let stored = store.insert_telemetry(&new, TELEMETRY_KEPT);
                    match stored {
                        Ok(()) => alerts.changes(&agent_id, &changes),
                        Err(e) => tracing::warn!(agent = %agent_id, error = %e, "telemetry not stored"),
                    }
                }
                Record::Rejudge { book, version } => match book.rejudge(&store, version, &clock.now()) {
                    Ok(n) => tracing::info!(agents = n, "health judged again by the new thresholds"),
                    Err(e) => tracing::error!(error = %e, "health not judged again; each PC is at its next snapshot"),
                },
            }
            if rows.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if rows.is_empty() {
            continue;
        }
        if let Err(e) = store.write_audit(&rows) {
            tracing::error!(error = %e, rows = rows.len(), "could not write audit records");
        }
        rows.clear();
    }
}

/// How often rows past the retention period are looked for.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// Rows deleted per transaction: each holds the writer for a moment only.
const PRUNE_BATCH: u32 = 500;
/// The pause between two batches, so queued audit rows and sign-ins go first.
const PRUNE_PAUSE: Duration = Duration::from_millis(20);

/// Deletes audit rows older than `retention` at start-up and then every hour, in small
/// batches, until `shutdown`. The chain's head is signed first (`key`), so pruning can
/// go down to a checkpoint as recent as now.
pub(crate) async fn prune_loop(
    store: Arc<Store>,
    clock: Clock,
    key: Arc<ed25519_dalek::SigningKey>,
    retention: Duration,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) {
    let pass = || {
        let (store, shutdown, key, now) = (store.clone(), shutdown.clone(), key.clone(), clock.now());
        let clock_now = clock.now_utc();
        let cutoff = crate::clock::format(clock_now - retention);
        async move {
            crate::ledger::sign_head(&store, key, now.clone(), "before pruning").await;
            let mut pruned = 0usize;
            loop {
                let at = cutoff.clone();
                match store.blocking(move |s| s.prune_audit(&at, PRUNE_BATCH)).await {
                    Ok(n) => {
                        pruned += n;
                        if n < PRUNE_BATCH as usize {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not prune old audit rows; trying again in an hour");
                        break;
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(PRUNE_PAUSE) => {}
                    _ = shutdown.cancelled() => return,
                }
            }
            if pruned > 0 {
                tracing::info!(rows = pruned, before = %cutoff, "pruned audit rows past the retention period");
            }
            let held_before = crate::clock::format(clock_now - crate::store::HELD_CALLS_KEPT);
            match store.blocking(move |s| s.prune_held_calls(&now, &held_before)).await {
                Ok((0, 0)) => {}
                Ok((forgotten, deleted)) => tracing::info!(
                    secrets_forgotten = forgotten,
                    deleted,
                    "held MCP calls: secrets of expired ones forgotten, old ones deleted"
                ),
                Err(e) => tracing::warn!(error = %e, "could not tidy held MCP calls; trying again in an hour"),
            }
        }
    };
    leader.every(PRUNE_EVERY, &shutdown, pass).await;
}

/// How often a cluster's leader looks for calls a dead replica left unfinished.
const ABANDONED_EVERY: Duration = Duration::from_secs(600);

/// In a cluster, a replica that dies leaves its running calls `sent` (audit) and
/// `running` (chat): no replica can tell them from another's live calls at start. The
/// leader settles them once they are older than any call may run (`longest`), as a
/// single server does when it starts again.
pub(crate) async fn settle_abandoned_loop(
    store: Arc<Store>,
    clock: Clock,
    longest: Duration,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) {
    let pass = || {
        let store = store.clone();
        let now = clock.now_utc();
        let (before, stamp) = (crate::clock::format(now - longest), crate::clock::format(now));
        async move {
            let settled = store
                .blocking(move |s| {
                    Ok((
                        s.interrupt_calls_sent_before(&before)?,
                        s.end_chat_calls_running_before(&before, &stamp)? + s.end_running_held_calls(Some(&before))?,
                    ))
                })
                .await;
            match settled {
                Ok((0, 0)) => {}
                Ok((calls, chat_calls)) => tracing::warn!(
                    calls,
                    chat_and_approved_calls = chat_calls,
                    "calls a stopped replica left unfinished: audited as interrupted"
                ),
                Err(e) => tracing::warn!(error = %e, "could not settle calls a stopped replica left unfinished"),
            }
        }
    };
    leader.every(ABANDONED_EVERY, &shutdown, pass).await;
}

/// A short, stable fingerprint of a call's arguments: it shows whether two calls were
/// the same without storing what they said (commands can hold secrets). Keyed with a
/// secret of this server, so a reader of the audit trail cannot confirm a guessed
/// command by hashing it.
#[derive(Clone)]
pub struct ArgsDigest {
    key: [u8; 32],
}

impl ArgsDigest {
    pub fn new(key: [u8; 32]) -> Self {
        ArgsDigest { key }
    }

    #[expect(clippy::expect_used, reason = "HMAC accepts a key of any length")]
    pub fn of(&self, args: &serde_json::Map<String, serde_json::Value>) -> String {
        let canonical = serde_json::to_vec(&canonical(&serde_json::Value::Object(args.clone()))).unwrap_or_default();
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(&canonical);
        format!("hmac-sha256:{}", hex::encode(&mac.finalize().into_bytes()[..12]))
    }
}

fn canonical(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<_> = m.keys().collect();
            keys.sort();
            serde_json::Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&m[k]))).collect())
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order_hides_content_and_depends_on_the_key() {
        let digest = ArgsDigest::new([7; 32]);
        let a = json!({"command": "echo hunter2", "timeout_s": 5});
        let b = json!({"timeout_s": 5, "command": "echo hunter2"});
        let d = digest.of(a.as_object().unwrap());
        assert_eq!(d, digest.of(b.as_object().unwrap()));
        assert!(d.starts_with("hmac-sha256:") && !d.contains("hunter2"));
        assert_ne!(d, digest.of(json!({"command": "echo other"}).as_object().unwrap()));
        assert_ne!(
            d,
            ArgsDigest::new([8; 32]).of(a.as_object().unwrap()),
            "another server, another digest"
        );
    }
}
