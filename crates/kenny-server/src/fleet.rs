//! The fleet: [`Fleet`], what the handlers that reach the PCs share, and the fleet as a
//! principal sees it (known agents merged with their live state).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::alerts::Alerts;
use crate::audit::AuditLog;
use crate::clock::Clock;
use crate::forward::{CallFailure, Forwarder};
use crate::health::{Assessment, HealthBook, Status};
use crate::policy::PolicyBook;
use crate::principal::Principal;
use crate::registry::{AgentLink, Registry, Remote, Route};
use crate::store::{AgentRecord, Store, StoreError};
use crate::tunnel::pushed::PushedBook;
use kenny_proto::error::ErrorCode;

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
    /// This replica's place in a cluster, when it is one of several.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    /// Whether this server runs the fleet-wide background work.
    pub leader: crate::leader::Leader,
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
    /// The stored agents, read again only when they change.
    pub directory: Arc<AgentDirectory>,
    /// Each PC's web filter, kept in force by the server.
    pub webfilter: crate::webfilter::WebFilter,
    /// What `/metrics` shows.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Most PCs one `fleet_run` may name.
    pub fleet_run_max: usize,
    /// The audit chain's state as this server last verified it.
    pub ledger: Arc<crate::ledger::LastCheck>,
}

/// The agent list, cached: listing 10,000 PCs many times a minute should not read
/// 10,000 rows each time. `Store::agents_version` says when to read it again.
#[derive(Default)]
pub struct AgentDirectory {
    cached: std::sync::Mutex<Option<(i64, Arc<Vec<AgentRecord>>)>>,
}

impl AgentDirectory {
    /// Every stored agent, sorted by id.
    pub(crate) fn agents(&self, store: &Store) -> Result<Arc<Vec<AgentRecord>>, StoreError> {
        let version = store.agents_version()?;
        if let Some((v, list)) = self.lock().as_ref()
            && *v == version
        {
            return Ok(list.clone());
        }
        // Read after the version: a change in between only makes the next call read again.
        let list = Arc::new(store.agents()?);
        *self.lock() = Some((version, list.clone()));
        Ok(list)
    }

    // A panic while holding it leaves plain data: go on with it.
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(i64, Arc<Vec<AgentRecord>>)>> {
        self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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
    /// The Ed25519 public key enrolled for it (base64): what checks its signed results.
    pub public_key: Option<String>,
    /// Whether its connection signs every result (protocol 0.18 or later); `None` when
    /// it is offline or another replica holds it.
    pub signs_results: Option<bool>,
    /// RFC 3339; for an online agent, its last frame.
    pub last_seen: Option<String>,
    /// As the server judged its latest snapshot; `None` before the first one.
    pub health: Option<Status>,
    /// The worst reason, `"<section>: <reason>"`; `None` when all is well.
    pub health_reason: Option<String>,
    /// The update channel (`stable` or `beta`) campaigns may target.
    pub channel: String,
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
        if let Some(section) = snapshot.get("web_activity") {
            self.webfilter.take_activity(agent_id, section);
        }
        // Not a time: the server's own, so ages and lists stay sound.
        let collected_at = if crate::clock::parse(&collected_at).is_some() {
            collected_at
        } else {
            now.clone()
        };
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
        self.with_visible(who, |views| views.iter().map(AgentView::summary).collect())
            .await
    }

    /// Runs `f` over every PC `who` may reach, sorted by id, as borrowed views: a
    /// listing of 10,000 PCs filters and counts without copying any of them, and
    /// copies only what it returns.
    pub(crate) async fn with_visible<T>(
        &self,
        who: &Principal,
        f: impl FnOnce(&[AgentView<'_>]) -> T,
    ) -> Result<T, StoreError> {
        let directory = self.directory.clone();
        let records = self.store.blocking(move |s| directory.agents(s)).await?;
        let remote = self.registry.remote_snapshot();
        Ok(self.registry.with_links(|links| {
            self.health.with_all(|health| {
                let views: Vec<AgentView<'_>> = records
                    .iter()
                    .filter(|r| who.may_reach(&r.agent_id))
                    .map(|r| AgentView {
                        record: r,
                        link: links.get(r.agent_id.as_str()).map(Arc::as_ref),
                        remote: remote.get(r.agent_id.as_str()).map(Arc::as_ref),
                        health: health.get(r.agent_id.as_str()).map(|j| j.assessment.as_ref()),
                    })
                    .collect();
                f(&views)
            })
        }))
    }

    /// One agent for a call about it that reaches no PC (the server's own tools): out of
    /// scope is `forbidden`, as for a forwarded call, and unknown is `unknown_agent`.
    pub(crate) async fn reachable(&self, who: &Principal, agent_id: &str) -> Result<AgentSummary, CallFailure> {
        self.forwarder.check_reach(who, agent_id)?;
        match self.one(who, agent_id).await {
            Ok(Some(agent)) => Ok(agent),
            Ok(None) => Err(CallFailure::refusal(
                ErrorCode::UnknownAgent,
                format!("no agent with id {agent_id:?}; list_agents shows the ids you can use"),
            )),
            Err(e) => Err(CallFailure::new(
                ErrorCode::Internal,
                format!("cannot read agent {agent_id}: {e}; see the server log"),
            )),
        }
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
        let judged = self.health.get(agent_id);
        let (link, remote) = match self.registry.route(agent_id) {
            Some(Route::Local(link)) => (Some(link), None),
            Some(Route::Remote(remote)) => (None, Some(remote)),
            None => (None, None),
        };
        let view = AgentView {
            record: &record,
            link: link.as_deref(),
            remote: remote.as_deref(),
            health: judged.as_deref(),
        };
        Ok(Some(view.summary()))
    }
}

/// One PC as a listing sees it: its stored record, its live connection if any (here,
/// or on another replica of a cluster), and the server's verdict if any, all borrowed.
pub(crate) struct AgentView<'a> {
    pub record: &'a AgentRecord,
    pub link: Option<&'a AgentLink>,
    pub remote: Option<&'a Remote>,
    pub health: Option<&'a Assessment>,
}

impl AgentView<'_> {
    pub(crate) fn id(&self) -> &str {
        self.record.agent_id.as_str()
    }

    pub(crate) fn online(&self) -> bool {
        self.link.is_some() || self.remote.is_some()
    }

    pub(crate) fn status(&self) -> Option<Status> {
        self.health.map(|h| h.status)
    }

    fn meta(&self) -> Option<&kenny_proto::frame::AgentMeta> {
        match (self.link, self.remote) {
            (Some(l), _) => l.meta.as_ref(),
            (None, Some(r)) => r.meta.as_ref(),
            (None, None) => None,
        }
    }

    /// As the connection says, else as last stored.
    pub(crate) fn os(&self) -> Option<&str> {
        self.meta().map(|m| m.os.as_str()).or(self.record.os.as_deref())
    }

    pub(crate) fn hostname(&self) -> Option<&str> {
        self.meta()
            .map(|m| m.hostname.as_str())
            .or(self.record.hostname.as_deref())
    }

    pub(crate) fn version(&self) -> Option<&str> {
        self.meta()
            .map(|m| m.version.as_str())
            .or(self.record.version.as_deref())
    }

    pub(crate) fn reason(&self) -> Option<&str> {
        self.health.and_then(Assessment::top_reason)
    }

    pub(crate) fn summary(&self) -> AgentSummary {
        let r = self.record;
        let health = self.health;
        let meta = self.meta();
        AgentSummary {
            health: health.map(|h| h.status),
            health_reason: health.and_then(|h| h.top_reason().map(|t| crate::health::clean(t, LISTED_REASON))),
            online: self.online(),
            os: meta.map(|m| m.os.clone()).or_else(|| r.os.clone()),
            hostname: meta.map(|m| m.hostname.clone()).or_else(|| r.hostname.clone()),
            version: meta.map(|m| m.version.clone()).or_else(|| r.version.clone()),
            arch: meta.and_then(|m| m.arch.clone()).or_else(|| r.arch.clone()),
            enrolled: r.public_key.is_some(),
            public_key: r.public_key.clone(),
            signs_results: self.link.map(AgentLink::signs_results),
            // A connection here knows its last frame; another replica's is as stored.
            last_seen: match self.link {
                Some(l) => time::OffsetDateTime::from_unix_timestamp(l.last_frame_unix())
                    .ok()
                    .map(crate::clock::format),
                None => r.last_seen.clone(),
            },
            agent_id: r.agent_id.clone(),
            channel: r.channel.clone(),
        }
    }
}

/// Longest top reason a listing carries (a page of 100 PCs stays small); the whole
/// of it is in `agent_health`.
const LISTED_REASON: usize = 160;
