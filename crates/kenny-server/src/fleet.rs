//! The fleet: [`Fleet`], what the handlers that reach the PCs share, and the fleet as a
//! principal sees it (known agents merged with their live state).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::alerts::Alerts;
use crate::audit::AuditLog;
use crate::clock::Clock;
use crate::forward::Forwarder;
use crate::health::{Assessment, HealthBook, Status};
use crate::policy::PolicyBook;
use crate::principal::Principal;
use crate::registry::{AgentLink, Registry};
use crate::store::{AgentRecord, Store, StoreError};
use crate::tunnel::pushed::PushedBook;

/// The PCs and everything that reaches them: the agents known in the store and
/// connected now, the forwarder every call to one goes through, the operator's rules
/// pushed to them, what each may still push unasked, and the audit writer that records
/// it all. The agent tunnel, `/mcp`, the host and agent routes, the policy routes, the
/// dashboard pages and the chat's tool calls work with this.
#[derive(Clone)]
pub struct Fleet {
    pub store: Arc<Store>,
    /// What time it is for every decision by time; see [`crate::clock::Clock`].
    pub clock: Clock,
    pub registry: Arc<Registry>,
    pub forwarder: Arc<Forwarder>,
    /// The operator's guard rules, pushed to agents.
    pub policy: Arc<PolicyBook>,
    pub audit: AuditLog,
    /// What each agent may still push (log lines, telemetry), kept across reconnects.
    pub pushed: Arc<PushedBook>,
    /// Every PC's health as the server judges it.
    pub health: Arc<HealthBook>,
    /// Where alerts are made and sent from.
    pub alerts: Alerts,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct AgentSummary {
    pub agent_id: kenny_proto::AgentId,
    pub online: bool,
    pub os: Option<String>,
    pub hostname: Option<String>,
    pub version: Option<String>,
    pub arch: Option<String>,
    pub enrolled: bool,
    /// RFC 3339; for an online agent, its last frame.
    pub last_seen: Option<String>,
    /// As the server judged its latest snapshot; `None` before the first one.
    pub health: Option<Status>,
    /// The worst reason, `"<section>: <reason>"`; `None` when all is well.
    pub health_reason: Option<String>,
}

impl Fleet {
    /// A snapshot from `agent_id` (running `os`): judged now, stored with its verdict
    /// by the storage writer.
    pub(crate) fn ingest_telemetry(
        &self,
        agent_id: &str,
        os: Option<&str>,
        collected_at: String,
        snapshot: &Map<String, Value>,
        snapshot_json: String,
    ) -> Arc<Assessment> {
        let now = self.clock.now();
        self.health
            .judge(agent_id, os, &collected_at, snapshot, &now, |assessment, row| {
                // History is dated by this server's clock: a PC's own may be wrong.
                let point = crate::history::point(agent_id, &now, snapshot, assessment.status);
                self.audit.telemetry(
                    agent_id.to_owned(),
                    collected_at.clone(),
                    snapshot_json,
                    Some(row),
                    Some(point),
                )
            })
    }

    /// Every agent `who` may reach, sorted by id.
    pub(crate) async fn list(&self, who: &Principal) -> Result<Vec<AgentSummary>, StoreError> {
        let records = self.store.blocking(|s| s.agents()).await?;
        let live = self.registry.snapshot();
        Ok(self.health.with_all(|health| {
            records
                .into_iter()
                .filter(|r| who.may_reach(&r.agent_id))
                .map(|r| {
                    let link = live.get(r.agent_id.as_str()).map(|l| l.as_ref());
                    let judged = health.get(r.agent_id.as_str()).map(|j| j.assessment.as_ref());
                    summarize(r, link, judged)
                })
                .collect()
        }))
    }

    /// One agent, if `who` may reach it and it is known here; out of reach and unknown
    /// look the same.
    pub(crate) async fn one(&self, who: &Principal, agent_id: &str) -> Result<Option<AgentSummary>, StoreError> {
        if !who.may_reach(agent_id) {
            return Ok(None);
        }
        let id = agent_id.to_owned();
        let Some(record) = self.store.blocking(move |s| s.agent(&id)).await? else {
            return Ok(None);
        };
        let link = self.registry.get(agent_id);
        let judged = self.health.get(agent_id);
        Ok(Some(summarize(record, link.as_deref(), judged.as_deref())))
    }
}

fn summarize(r: AgentRecord, link: Option<&AgentLink>, health: Option<&Assessment>) -> AgentSummary {
    let meta = link.and_then(|l| l.meta.as_ref());
    AgentSummary {
        health: health.map(|h| h.status),
        health_reason: health.and_then(|h| h.top_reason().map(str::to_owned)),
        online: link.is_some(),
        os: meta.map(|m| m.os.clone()).or(r.os),
        hostname: meta.map(|m| m.hostname.clone()).or(r.hostname),
        version: meta.map(|m| m.version.clone()).or(r.version),
        arch: meta.and_then(|m| m.arch.clone()).or(r.arch),
        enrolled: r.public_key.is_some(),
        last_seen: match link {
            Some(l) => time::OffsetDateTime::from_unix_timestamp(l.last_frame_unix())
                .ok()
                .map(crate::clock::format),
            None => r.last_seen,
        },
        agent_id: r.agent_id,
    }
}
