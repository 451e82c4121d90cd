//! Fleet-wide answers: `list_agents` (filtered, paged) and `fleet_overview`. Both work
//! on the fleet as the caller may see it, built in memory from the agent directory,
//! the live connections and the health book.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::fleet::AgentSummary;
use crate::forward::CallFailure;
use crate::health::{FleetHealth, Status};
use crate::principal::Principal;
use crate::state::Fleet;
use kenny_proto::error::ErrorCode;
use kenny_proto::server_args::{HealthFilter, LIST_LIMIT_DEFAULT, ListAgentsArgs};

/// PCs named in `fleet_overview`'s attention and offline lists.
const OVERVIEW_LISTED: usize = 20;

pub(super) async fn list_agents(fleet: &Fleet, who: &Principal, args: ListAgentsArgs) -> Result<Value, CallFailure> {
    let all = visible(fleet, who).await?;
    let query = args.query.as_deref().map(str::to_lowercase);
    let matching: Vec<&AgentSummary> = all
        .iter()
        .filter(|a| args.online.is_none_or(|online| a.online == online))
        .filter(|a| args.health.is_none_or(|h| health_matches(h, a.health)))
        .filter(|a| {
            args.os
                .is_none_or(|os| a.os.as_deref().is_some_and(|o| o.eq_ignore_ascii_case(os.as_str())))
        })
        .filter(|a| query.as_deref().is_none_or(|q| text_matches(a, q)))
        .collect();
    // Listed by agent_id, so a cursor (the last id of a page) stays put while PCs come
    // and go, and the next page goes on after it.
    let start = match args.cursor.as_deref() {
        Some(after) => matching.partition_point(|a| a.agent_id.as_str() <= after),
        None => 0,
    };
    let limit = args.limit.unwrap_or(LIST_LIMIT_DEFAULT) as usize;
    let end = start.saturating_add(limit).min(matching.len());
    let page = &matching[start.min(end)..end];
    let next_cursor = (end < matching.len())
        .then(|| page.last().map(|a| a.agent_id.to_string()))
        .flatten();
    Ok(json!({
        "agents": page,
        "total": matching.len(),
        "next_cursor": next_cursor,
    }))
}

pub(super) async fn fleet_overview(fleet: &Fleet, who: &Principal) -> Result<Value, CallFailure> {
    let all = visible(fleet, who).await?;
    let mut health = FleetHealth::default();
    let mut os: BTreeMap<String, usize> = BTreeMap::new();
    let mut versions: BTreeMap<String, usize> = BTreeMap::new();
    for a in &all {
        health.count(a.health);
        *os.entry(a.os.clone().unwrap_or_else(|| "unknown".into())).or_default() += 1;
        *versions
            .entry(a.version.clone().unwrap_or_else(|| "unknown".into()))
            .or_default() += 1;
    }
    let online = all.iter().filter(|a| a.online).count();
    let mut attention: Vec<&AgentSummary> = all.iter().filter(|a| a.health >= Some(Status::Warn)).collect();
    attention.sort_by(|a, b| b.health.cmp(&a.health).then_with(|| a.agent_id.cmp(&b.agent_id)));
    let mut offline: Vec<&AgentSummary> = all.iter().filter(|a| !a.online).collect();
    // Longest gone first; never seen before anything.
    offline.sort_by(|a, b| a.last_seen.cmp(&b.last_seen).then_with(|| a.agent_id.cmp(&b.agent_id)));
    Ok(json!({
        "total": all.len(),
        "online": online,
        "offline": all.len() - online,
        "health": health,
        "attention_total": attention.len(),
        "attention": attention.iter().take(OVERVIEW_LISTED).map(|a| json!({
            "agent_id": a.agent_id,
            "hostname": a.hostname,
            "online": a.online,
            "health": a.health,
            "reason": a.health_reason,
        })).collect::<Vec<_>>(),
        "offline_longest": offline.iter().take(OVERVIEW_LISTED).map(|a| json!({
            "agent_id": a.agent_id,
            "hostname": a.hostname,
            "last_seen": a.last_seen,
        })).collect::<Vec<_>>(),
        "os": os,
        "versions": versions,
    }))
}

async fn visible(fleet: &Fleet, who: &Principal) -> Result<Vec<AgentSummary>, CallFailure> {
    fleet.list(who).await.map_err(|e| {
        CallFailure::new(
            ErrorCode::Internal,
            format!("cannot read the fleet: {e}; see the server log"),
        )
    })
}

fn health_matches(filter: HealthFilter, health: Option<Status>) -> bool {
    match filter {
        HealthFilter::Ok => health == Some(Status::Ok),
        HealthFilter::Unknown => health == Some(Status::Unknown),
        HealthFilter::Warn => health == Some(Status::Warn),
        HealthFilter::Crit => health == Some(Status::Crit),
        HealthFilter::Attention => health >= Some(Status::Warn),
        HealthFilter::NoData => health.is_none(),
    }
}

/// `query` is already lower case.
fn text_matches(a: &AgentSummary, query: &str) -> bool {
    [
        Some(a.agent_id.as_str()),
        a.hostname.as_deref(),
        a.os.as_deref(),
        a.version.as_deref(),
        a.health_reason.as_deref(),
    ]
    .into_iter()
    .flatten()
    .any(|field| field.to_lowercase().contains(query))
}
