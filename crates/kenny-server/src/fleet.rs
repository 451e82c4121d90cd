//! The fleet as a principal sees it: known agents merged with their live state.

use serde::Serialize;

use crate::principal::Principal;
use crate::registry::AgentLink;
use crate::state::AppState;
use crate::store::{AgentRecord, StoreError};

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
}

/// Every agent `who` may reach, sorted by id.
pub(crate) async fn list(state: &AppState, who: &Principal) -> Result<Vec<AgentSummary>, StoreError> {
    let records = state.store.blocking(|s| s.agents()).await?;
    let live = state.registry.snapshot();
    Ok(records
        .into_iter()
        .filter(|r| who.may_reach(&r.agent_id))
        .map(|r| {
            let link = live.get(r.agent_id.as_str()).map(|l| l.as_ref());
            summarize(r, link)
        })
        .collect())
}

/// One agent, if `who` may reach it and it is known here; out of reach and unknown
/// look the same.
pub(crate) async fn one(state: &AppState, who: &Principal, agent_id: &str) -> Result<Option<AgentSummary>, StoreError> {
    if !who.may_reach(agent_id) {
        return Ok(None);
    }
    let id = agent_id.to_owned();
    let Some(record) = state.store.blocking(move |s| s.agent(&id)).await? else {
        return Ok(None);
    };
    let link = state.registry.get(agent_id);
    Ok(Some(summarize(record, link.as_deref())))
}

fn summarize(r: AgentRecord, link: Option<&AgentLink>) -> AgentSummary {
    let meta = link.and_then(|l| l.meta.as_ref());
    AgentSummary {
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
