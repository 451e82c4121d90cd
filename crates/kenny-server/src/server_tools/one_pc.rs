//! Answers about one PC from what the server stored: `agent_health` (the verdicts) and
//! `agent_snapshot` (the latest snapshot). Both work while the PC is offline.

use serde_json::{Value, json};

use super::{AGENT_CHANGES, AGENT_HEALTH, AGENT_SNAPSHOT};
use crate::forward::CallFailure;
use crate::principal::Principal;
use crate::state::Fleet;
use kenny_proto::error::ErrorCode;
use kenny_proto::server_args::AgentChangesArgs;

pub(super) async fn agent_health(fleet: &Fleet, who: &Principal, agent_id: &str) -> Result<Value, CallFailure> {
    let agent = fleet.reachable(who, agent_id).await?;
    fleet.forwarder.audit_served(who, agent_id, AGENT_HEALTH).await;
    let Some(health) = fleet.health.get(agent_id) else {
        return Ok(json!({
            "agent_id": agent_id,
            "online": agent.online,
            "health": null,
            "reasons": [],
            "sections": [],
            "skipped": [],
            "collected_at": null,
            "assessed_at": null,
            "forecasts": [],
            "note": "no snapshot from this PC yet: it sends one when it connects; telemetry_collect takes one now",
        }));
    };
    let (id, week_ago) = (
        agent_id.to_owned(),
        crate::clock::format(fleet.clock.now_utc() - time::Duration::days(7)),
    );
    let points = fleet.store.blocking(move |s| s.metrics(&id, &week_ago)).await;
    let forecasts = points.map(|p| crate::history::forecast(&p)).unwrap_or_else(|e| {
        tracing::warn!(agent = %agent_id, error = %e, "history unreadable; no disk forecast");
        Vec::new()
    });
    Ok(json!({
        "agent_id": agent_id,
        "online": agent.online,
        "health": health.status,
        "reasons": health.reasons,
        "sections": health.sections,
        "skipped": health.skipped,
        "collected_at": health.collected_at,
        "assessed_at": health.assessed_at,
        "forecasts": forecasts,
    }))
}

pub(super) async fn agent_snapshot(
    fleet: &Fleet,
    who: &Principal,
    agent_id: &str,
    section: Option<&str>,
) -> Result<Value, CallFailure> {
    let agent = fleet.reachable(who, agent_id).await?;
    let id = agent_id.to_owned();
    let latest = fleet
        .store
        .blocking(move |s| s.latest_telemetry(&id))
        .await
        .map_err(|e| {
            CallFailure::new(
                ErrorCode::Internal,
                format!("cannot read the snapshot: {e}; see the server log"),
            )
        })?;
    let Some((collected_at, received_at, snapshot)) = latest else {
        return Err(CallFailure::refusal(
            ErrorCode::NotFound,
            format!(
                "{agent_id} has sent no snapshot yet: it sends one when it connects; telemetry_collect takes one now"
            ),
        ));
    };
    let Ok(Value::Object(mut snapshot)) = serde_json::from_str::<Value>(&snapshot) else {
        tracing::error!(agent = %agent_id, "stored snapshot is not a JSON object");
        return Err(CallFailure::new(
            ErrorCode::Internal,
            "the stored snapshot is unreadable; see the server log, and telemetry_collect takes a new one",
        ));
    };
    let sections: Vec<String> = snapshot.keys().cloned().collect();
    if let Some(name) = section {
        let Some(value) = snapshot.remove(name) else {
            return Err(CallFailure::refusal(
                ErrorCode::BadArgs,
                format!(
                    "{agent_id}'s latest snapshot has no section `{name}`; it has: {}",
                    sections.join(", ")
                ),
            ));
        };
        snapshot = [(name.to_owned(), value)].into_iter().collect();
    }
    fleet.forwarder.audit_served(who, agent_id, AGENT_SNAPSHOT).await;
    Ok(json!({
        "agent_id": agent_id,
        "online": agent.online,
        "collected_at": collected_at,
        "received_at": received_at,
        "sections": sections,
        "snapshot": snapshot,
    }))
}

pub(super) async fn agent_changes(
    fleet: &Fleet,
    who: &Principal,
    args: AgentChangesArgs,
) -> Result<Value, CallFailure> {
    let agent_id = args.agent_id.as_str();
    fleet.reachable(who, agent_id).await?;
    let since = crate::clock::since(args.since.as_deref().unwrap_or("7d"), fleet.clock.now_utc()).map_err(|e| {
        CallFailure::refusal(
            ErrorCode::BadArgs,
            format!("bad arguments for {AGENT_CHANGES}: since: {e}"),
        )
    })?;
    let since = crate::clock::format(since);
    let limit = args.limit.unwrap_or(100);
    let (id, from) = (agent_id.to_owned(), since.clone());
    let mut rows = fleet
        .store
        .blocking(move |s| s.changes_of(&id, &from, limit + 1))
        .await
        .map_err(|e| {
            CallFailure::new(
                ErrorCode::Internal,
                format!("cannot read changes: {e}; see the server log"),
            )
        })?;
    let truncated = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    fleet.forwarder.audit_served(who, agent_id, AGENT_CHANGES).await;
    Ok(json!({
        "agent_id": agent_id,
        "since": since,
        "changes": rows.iter().map(|c| json!({
            "at": c.at,
            "section": c.section,
            "kind": c.kind,
            "item": c.item,
            "detail": c.detail,
            "priority": c.priority,
        })).collect::<Vec<_>>(),
        "truncated": truncated,
    }))
}
