//! [`HealthBook`]: every PC's current assessment, in memory for fleet-wide reads
//! (`list_agents` filters and sorts 10,000 PCs by health without touching the store)
//! and in the store so a restart starts from what was known.
//!
//! Ordering: a snapshot is judged when it arrives and its row is written by the
//! storage writer. A change of thresholds queues a re-judgement on that same writer,
//! behind every snapshot already queued, so it sees them all; judging and queueing
//! happen under the thresholds lock, so no snapshot judged by the old thresholds can
//! slip in behind it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Assessment, Status, Thresholds, assess};
use crate::alerts::Alerts;
use crate::store::{HealthRow, Result, Store, StoredThresholds};

/// A PC's assessment and the thresholds version it was judged by.
#[derive(Debug, Clone)]
pub(crate) struct Judged {
    pub assessment: Arc<Assessment>,
    version: u64,
}

struct Current {
    thresholds: Arc<Thresholds>,
    updated_by: Option<String>,
    updated_at: Option<String>,
    version: u64,
}

pub struct HealthBook {
    current: RwLock<Current>,
    by_agent: RwLock<HashMap<String, Judged>>,
    /// Hears of every verdict, to open and close alerts.
    alerts: Alerts,
    /// Held by whoever changes the thresholds, from reading them to setting the new
    /// ones, so two changes at once cannot lose one's fields.
    pub(crate) changing: tokio::sync::Mutex<()>,
}

/// Counts over a set of PCs.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct FleetHealth {
    pub ok: usize,
    pub unknown: usize,
    pub warn: usize,
    pub crit: usize,
    /// PCs that never sent a snapshot.
    pub no_data: usize,
}

impl FleetHealth {
    pub(crate) fn count(&mut self, status: Option<Status>) {
        match status {
            Some(Status::Ok) => self.ok += 1,
            Some(Status::Unknown) => self.unknown += 1,
            Some(Status::Warn) => self.warn += 1,
            Some(Status::Crit) => self.crit += 1,
            None => self.no_data += 1,
        }
    }
}

impl HealthBook {
    /// The stored thresholds (defaults if none were saved, or if the saved ones no
    /// longer read) and every stored assessment.
    pub(crate) fn load(store: &Store, alerts: Alerts) -> Result<HealthBook> {
        let stored = store.health_thresholds()?;
        let (thresholds, updated_by, updated_at) = match stored {
            Some(s) => match serde_json::from_str::<Thresholds>(&s.thresholds_json) {
                Ok(t) => (t, Some(s.updated_by), Some(s.updated_at)),
                Err(e) => {
                    tracing::error!(error = %e, "stored health thresholds do not read; using the defaults until they are saved again");
                    (Thresholds::default(), None, None)
                }
            },
            None => (Thresholds::default(), None, None),
        };
        let mut by_agent = HashMap::new();
        for (agent_id, json) in store.assessments()? {
            match serde_json::from_str::<Assessment>(&json) {
                Ok(a) => {
                    by_agent.insert(
                        agent_id,
                        Judged {
                            assessment: Arc::new(a),
                            version: 0,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(agent = %agent_id, error = %e, "stored health does not read; judged again at the next snapshot")
                }
            }
        }
        Ok(HealthBook {
            current: RwLock::new(Current {
                thresholds: Arc::new(thresholds),
                updated_by,
                updated_at,
                version: 0,
            }),
            by_agent: RwLock::new(by_agent),
            alerts,
            changing: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn thresholds(&self) -> (Arc<Thresholds>, Option<String>, Option<String>) {
        let c = read(&self.current);
        (c.thresholds.clone(), c.updated_by.clone(), c.updated_at.clone())
    }

    pub(crate) fn get(&self, agent_id: &str) -> Option<Arc<Assessment>> {
        read(&self.by_agent).get(agent_id).map(|j| j.assessment.clone())
    }

    /// Drops a removed PC's verdict, so no listing or roll-up counts it.
    pub(crate) fn forget(&self, agent_id: &str) {
        self.by_agent
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(agent_id);
    }

    /// Runs `f` over every assessment at once, without copying them.
    pub(crate) fn with_all<T>(&self, f: impl FnOnce(&HashMap<String, Judged>) -> T) -> T {
        f(&read(&self.by_agent))
    }

    /// Judges a snapshot that just arrived and keeps the verdict; `queue` is handed
    /// the assessment (to store with the snapshot) while the thresholds cannot change.
    pub(crate) fn judge(
        &self,
        agent_id: &str,
        os: Option<&str>,
        collected_at: &str,
        snapshot: &Map<String, Value>,
        now: &str,
        queue: impl FnOnce(&Assessment, HealthRow),
    ) -> Arc<Assessment> {
        let current = read(&self.current);
        let assessment = Arc::new(assess(snapshot, os, &current.thresholds, collected_at, now));
        write(&self.by_agent).insert(
            agent_id.to_owned(),
            Judged {
                assessment: assessment.clone(),
                version: current.version,
            },
        );
        queue(&assessment, row(agent_id, &assessment));
        self.alerts.judged(agent_id, assessment.clone());
        assessment
    }

    /// New thresholds: stored by the caller, in effect here at once; `queue` is handed
    /// the new version to re-judge every PC with (see [`HealthBook::rejudge`]).
    pub(crate) fn set_thresholds(&self, stored: StoredThresholds, thresholds: Thresholds, queue: impl FnOnce(u64)) {
        let mut current = write(&self.current);
        current.thresholds = Arc::new(thresholds);
        current.updated_by = Some(stored.updated_by);
        current.updated_at = Some(stored.updated_at);
        current.version += 1;
        queue(current.version);
    }

    /// Judges every PC's latest stored snapshot again by the current thresholds and
    /// stores the verdicts; a PC already judged by thresholds of `version` or newer
    /// (a snapshot arrived since) is left alone. Runs on the storage writer.
    pub(crate) fn rejudge(&self, store: &Store, version: u64, now: &str) -> Result<usize> {
        let thresholds = read(&self.current).thresholds.clone();
        let mut rows = Vec::new();
        let mut judged = Vec::new();
        for agent in store.agents()? {
            let id = agent.agent_id.as_str();
            if read(&self.by_agent).get(id).is_some_and(|j| j.version >= version) {
                continue;
            }
            let Some((collected_at, _, snapshot)) = store.latest_telemetry(id)? else {
                continue;
            };
            let Ok(Value::Object(snapshot)) = serde_json::from_str::<Value>(&snapshot) else {
                tracing::warn!(agent = %id, "stored snapshot is not a JSON object; not judged");
                continue;
            };
            let assessment = assess(&snapshot, agent.os.as_deref(), &thresholds, &collected_at, now);
            rows.push(row(id, &assessment));
            judged.push((id.to_owned(), assessment));
        }
        store.save_assessments(&rows)?;
        let mut by_agent = write(&self.by_agent);
        let count = judged.len();
        for (id, assessment) in judged {
            let newer = by_agent.get(&id).is_some_and(|j| j.version >= version);
            if !newer {
                let assessment = Arc::new(assessment);
                self.alerts.judged(&id, assessment.clone());
                by_agent.insert(id, Judged { assessment, version });
            }
        }
        Ok(count)
    }
}

fn row(agent_id: &str, a: &Assessment) -> HealthRow {
    HealthRow {
        agent_id: agent_id.to_owned(),
        status: a.status.as_str(),
        assessment_json: serde_json::to_string(a).unwrap_or_else(|_| "{}".into()),
    }
}

// A panic while holding these locks leaves plain data, still consistent: go on with it.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}
