//! `webfilter_get`, `webfilter_set`, `webfilter_push`, `web_activity_query`: the MCP
//! face of [`crate::webfilter`]. Changes need the operator role (a `user`, say the
//! child whose PC it is, must not lift its own filter), are scoped like every call and
//! audited; the push itself goes through the forwarder and is audited there too.

use kenny_proto::AgentId;
use kenny_proto::error::ErrorCode;
use kenny_proto::server_args::{WebActivityQueryArgs, WebfilterGetArgs, WebfilterPushArgs, WebfilterSetArgs};
use serde_json::{Value, json};

use super::{WEB_ACTIVITY_QUERY, WEBFILTER_SET};
use crate::forward::{CallFailure, operator_floor};
use crate::principal::Principal;
use crate::state::Fleet;
use crate::webfilter::{Pushed, config};

fn id(agent: &str) -> Result<AgentId, CallFailure> {
    AgentId::parse(agent).map_err(|e| CallFailure::refusal(ErrorCode::UnknownAgent, e.to_string()))
}

fn internal(e: impl std::fmt::Display) -> CallFailure {
    CallFailure::new(
        ErrorCode::Internal,
        format!("the web filter could not be stored: {e}; see the server log"),
    )
}

pub(super) async fn get(fleet: &Fleet, who: &Principal, a: WebfilterGetArgs) -> Result<Value, CallFailure> {
    fleet.reachable(who, &a.agent_id).await?;
    let mut checked = Value::Null;
    if a.check == Some(true) && fleet.webfilter.has(&a.agent_id) {
        checked = match fleet.webfilter.check(who, &id(&a.agent_id)?).await {
            Ok(()) => json!(true),
            Err(f) => json!(format!("the PC could not be asked: {}: {}", f.code, f.message)),
        };
    }
    let mut shown = fleet.webfilter.describe(&a.agent_id);
    shown["checked"] = checked;
    Ok(shown)
}

pub(super) async fn set(fleet: &Fleet, who: &Principal, a: WebfilterSetArgs) -> Result<Value, CallFailure> {
    operator_floor(who, WEBFILTER_SET)?;
    fleet.reachable(who, &a.agent_id).await?;
    let current = fleet.webfilter.config_of(&a.agent_id);
    let (next, said) = config::edit(&current, &a, &fleet.webfilter.catalog())
        .map_err(|why| CallFailure::refusal(ErrorCode::BadArgs, format!("nothing was changed: {why}")))?;
    fleet
        .webfilter
        .store_config(who, &a.agent_id, next)
        .await
        .map_err(internal)?;
    if let Some(cluster) = &fleet.cluster {
        cluster
            .publish_change(crate::cluster::changes::Change::WebFilter {
                agent_id: a.agent_id.clone(),
            })
            .await;
    }
    fleet.forwarder.audit_served(who, &a.agent_id, WEBFILTER_SET).await;
    let mut shown = fleet.webfilter.describe(&a.agent_id);
    shown["changed"] = json!(said);
    shown["note"] = json!(
        "saved; the server applies it to the PC within seconds when it is online, and whenever it comes online (webfilter_push applies it now and reports the result)"
    );
    Ok(shown)
}

pub(super) async fn push(fleet: &Fleet, who: &Principal, a: WebfilterPushArgs) -> Result<Value, CallFailure> {
    operator_floor(who, super::WEBFILTER_PUSH)?;
    fleet.reachable(who, &a.agent_id).await?;
    let target = id(&a.agent_id)?;
    let pushed = fleet
        .webfilter
        .push(who, &target, &format!("webfilter_push by {}", who.username))
        .await?;
    let mut shown = fleet.webfilter.describe(&a.agent_id);
    shown["pushed"] = match pushed {
        Pushed::Applied {
            count,
            hash,
            doh_lockdown,
        } => json!({"action": "applied", "count": count, "list_hash": hash, "doh_lockdown": doh_lockdown}),
        Pushed::Cleared { why } => json!({"action": "cleared", "why": why}),
    };
    Ok(shown)
}

pub(super) async fn activity(fleet: &Fleet, who: &Principal, a: WebActivityQueryArgs) -> Result<Value, CallFailure> {
    fleet.reachable(who, &a.agent_id).await?;
    let hours = a.hours.unwrap_or(24);
    let flagged_only = a.flagged_only.unwrap_or(false);
    let rows = fleet
        .webfilter
        .activity(&a.agent_id, hours, flagged_only, a.limit.unwrap_or(100))
        .await
        .map_err(|e| {
            CallFailure::new(
                ErrorCode::Internal,
                format!("cannot read web activity: {e}; see the server log"),
            )
        })?;
    // Personal data: who looked, and at which PC, is in the audit trail.
    fleet.forwarder.audit_served(who, &a.agent_id, WEB_ACTIVITY_QUERY).await;
    let recording = fleet.webfilter.config_of(&a.agent_id).record_activity;
    Ok(json!({
        "agent_id": a.agent_id,
        "hours": hours,
        "flagged_only": flagged_only,
        "recording": recording,
        "domains": rows,
        "count": rows.len(),
    }))
}
