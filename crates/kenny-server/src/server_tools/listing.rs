//! Fleet-wide answers: `list_agents` (filtered, paged) and `fleet_overview`. Both work
//! on the fleet as the caller may see it, built in memory from the agent directory,
//! the live connections and the health book.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::fleet::{AgentSummary, AgentView};
use crate::forward::CallFailure;
use crate::health::{FleetHealth, Status};
use crate::principal::Principal;
use crate::state::Fleet;
use kenny_proto::error::ErrorCode;
use kenny_proto::server_args::{HealthFilter, LIST_LIMIT_DEFAULT, ListAgentsArgs};

/// PCs named in `fleet_overview`'s attention and offline lists.
const OVERVIEW_LISTED: usize = 20;

pub(super) async fn list_agents(fleet: &Fleet, who: &Principal, args: ListAgentsArgs) -> Result<Value, CallFailure> {
    let query = args.query.as_deref().map(str::to_lowercase);
    let limit = args.limit.unwrap_or(LIST_LIMIT_DEFAULT) as usize;
    let keep = |a: &AgentView<'_>| {
        args.online.is_none_or(|online| a.online() == online)
            && args.health.is_none_or(|h| health_matches(h, a.status()))
            && args
                .os
                .is_none_or(|os| a.os().is_some_and(|o| o.eq_ignore_ascii_case(os.as_str())))
            && query.as_deref().is_none_or(|q| text_matches(a, q))
    };
    let (page, total, next_cursor) = fleet
        .with_visible(who, |views| {
            let matching: Vec<&AgentView<'_>> = views.iter().filter(|a| keep(a)).collect();
            // Listed by agent_id, so a cursor (the last id of a page) stays put while
            // PCs come and go, and the next page goes on after it.
            let start = match args.cursor.as_deref() {
                Some(after) => matching.partition_point(|a| a.id() <= after),
                None => 0,
            };
            let end = start.saturating_add(limit).min(matching.len());
            let page: Vec<AgentSummary> = matching[start.min(end)..end].iter().map(|a| a.summary()).collect();
            let next = (end < matching.len())
                .then(|| page.last().map(|a| a.agent_id.to_string()))
                .flatten();
            (page, matching.len(), next)
        })
        .await
        .map_err(unreadable)?;
    Ok(json!({
        "agents": page,
        "total": total,
        "next_cursor": next_cursor,
    }))
}

pub(super) async fn fleet_overview(fleet: &Fleet, who: &Principal) -> Result<Value, CallFailure> {
    fleet
        .with_visible(who, |all| {
            let mut health = FleetHealth::default();
            let mut os: BTreeMap<&str, usize> = BTreeMap::new();
            let mut versions: BTreeMap<&str, usize> = BTreeMap::new();
            for a in all {
                health.count(a.status());
                *os.entry(a.os().unwrap_or("unknown")).or_default() += 1;
                *versions.entry(a.version().unwrap_or("unknown")).or_default() += 1;
            }
            let online = all.iter().filter(|a| a.online()).count();
            let mut attention: Vec<&AgentView<'_>> = all.iter().filter(|a| a.status() >= Some(Status::Warn)).collect();
            attention.sort_by(|a, b| b.status().cmp(&a.status()).then_with(|| a.id().cmp(b.id())));
            let mut offline: Vec<&AgentView<'_>> = all.iter().filter(|a| !a.online()).collect();
            // Longest gone first; never seen before anything.
            offline.sort_by(|a, b| {
                a.record
                    .last_seen
                    .cmp(&b.record.last_seen)
                    .then_with(|| a.id().cmp(b.id()))
            });
            json!({
                "total": all.len(),
                "online": online,
                "offline": all.len() - online,
                "health": health,
                "attention_total": attention.len(),
                "attention": attention.iter().take(OVERVIEW_LISTED).map(|a| json!({
                    "agent_id": a.id(),
                    "hostname": a.hostname(),
                    "online": a.online(),
                    "health": a.status(),
                    "reason": a.summary().health_reason,
                })).collect::<Vec<_>>(),
                "offline_longest": offline.iter().take(OVERVIEW_LISTED).map(|a| json!({
                    "agent_id": a.id(),
                    "hostname": a.hostname(),
                    "last_seen": a.record.last_seen,
                })).collect::<Vec<_>>(),
                "os": os,
                "versions": versions,
            })
        })
        .await
        .map_err(unreadable)
}

fn unreadable(e: crate::store::StoreError) -> CallFailure {
    CallFailure::new(
        ErrorCode::Internal,
        format!("cannot read the fleet: {e}; see the server log"),
    )
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
fn text_matches(a: &AgentView<'_>, query: &str) -> bool {
    [Some(a.id()), a.hostname(), a.os(), a.version(), a.reason()]
        .into_iter()
        .flatten()
        .any(|field| field.to_lowercase().contains(query))
}
