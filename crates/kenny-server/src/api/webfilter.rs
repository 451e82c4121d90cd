//! The web filter over `/api`: each PC's filter (`/api/agent/{id}/webfilter...`, the
//! dashboard panel's calls, answered by the same server tools as `/mcp` so scope, role
//! floor and audit are the same), and the list sources every filter draws categories
//! from (`/api/webfilter/sources`: everyone signed in reads them, superusers change
//! them, since the server fetches what they name).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value, json};

use super::hosts::{call_error, refusal_for};
use super::{ApiError, BodyShape, JsonBody, SignedIn, Superuser};
use crate::forward::CallFailure;
use crate::principal::Principal;
use crate::server_tools::{self, WEB_ACTIVITY_QUERY, WEBFILTER_GET, WEBFILTER_PUSH, WEBFILTER_SET};
use crate::state::Fleet;
use crate::store::SourceFetch;

/// Runs a server tool about `agent_id` with `args`, as `/mcp` would.
async fn tool(
    fleet: &Fleet,
    who: &Principal,
    agent_id: &str,
    name: &str,
    mut args: Map<String, Value>,
) -> Result<Json<Value>, ApiError> {
    args.insert("agent_id".into(), Value::from(agent_id));
    match server_tools::call(fleet, who, name, args).await {
        Some(Ok(v)) => Ok(Json(v)),
        Some(Err(f)) => Err(refusal_for(who, agent_id, &f)),
        None => Err(call_error(
            agent_id,
            &CallFailure::new(ErrorCode::Internal, format!("{name} is not a server tool")),
        )),
    }
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct GetQuery {
    check: Option<bool>,
}

pub(super) async fn show(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
    Query(q): Query<GetQuery>,
) -> Result<Json<Value>, ApiError> {
    let mut args = Map::new();
    if q.check == Some(true) {
        args.insert("check".into(), Value::Bool(true));
    }
    tool(&fleet, &who, &agent_id, WEBFILTER_GET, args).await
}

/// `webfilter_set`'s arguments without `agent_id` (the path names the PC).
#[derive(Debug, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct FilterChange(Map<String, Value>);

impl BodyShape for FilterChange {
    const SHAPE: &'static str = r#"{"enabled": true, "categories": ["games"], "add_entries": [{"domain": "example.com", "kind": "block"}], ...} with webfilter_set's arguments"#;
}

pub(super) async fn change(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
    JsonBody(FilterChange(args)): JsonBody<FilterChange>,
) -> Result<Json<Value>, ApiError> {
    if args.contains_key("agent_id") {
        return Err(ApiError::bad_request(
            "the PC is named by the path; leave agent_id out of the body",
        ));
    }
    tool(&fleet, &who, &agent_id, WEBFILTER_SET, args).await
}

pub(super) async fn push(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    tool(&fleet, &who, &agent_id, WEBFILTER_PUSH, Map::new()).await
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct ActivityQuery {
    hours: Option<u32>,
    flagged_only: Option<bool>,
    limit: Option<u32>,
}

pub(super) async fn activity(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
    Query(q): Query<ActivityQuery>,
) -> Result<Json<Value>, ApiError> {
    let mut args = Map::new();
    for (k, v) in [("hours", q.hours), ("limit", q.limit)] {
        if let Some(v) = v {
            args.insert(k.into(), json!(v));
        }
    }
    if let Some(f) = q.flagged_only {
        args.insert("flagged_only".into(), json!(f));
    }
    tool(&fleet, &who, &agent_id, WEB_ACTIVITY_QUERY, args).await
}

pub(super) async fn sources(State(fleet): State<Fleet>, SignedIn(_): SignedIn) -> Result<Json<Value>, ApiError> {
    let rows = fleet.webfilter.sources()?;
    let categories = fleet.webfilter.catalog().shown();
    Ok(Json(json!({"sources": rows, "categories": categories})))
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewSource {
    category: String,
    url: String,
    refresh_minutes: Option<i64>,
}

impl BodyShape for NewSource {
    const SHAPE: &'static str = r#"{"category": "adult", "url": "https://...", "refresh_minutes": 1440}"#;
}

pub(super) async fn add_source(
    State(fleet): State<Fleet>,
    Superuser(who): Superuser,
    JsonBody(body): JsonBody<NewSource>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let row = fleet
        .webfilter
        .add_source(&who, &body.category, &body.url, body.refresh_minutes.unwrap_or(1440))
        .await
        .map_err(|why| ApiError::bad_request(format!("list source not added: {why}")))?;
    Ok((StatusCode::CREATED, Json(json!({"source": row}))))
}

pub(super) async fn remove_source(
    State(fleet): State<Fleet>,
    Superuser(_): Superuser,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    if fleet.webfilter.remove_source(id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("there is no list source {id}"),
        ))
    }
}

pub(super) async fn refresh_source(
    State(fleet): State<Fleet>,
    Superuser(_): Superuser,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let Some(source) = fleet.store.blocking(move |s| s.source(id)).await? else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("there is no list source {id}"),
        ));
    };
    let outcome = fleet.webfilter.refresh_source(&source).await;
    let row = fleet.store.blocking(move |s| s.source(id)).await?;
    let said = match outcome {
        SourceFetch::Fresh { domains, .. } => json!({"outcome": "fresh", "domains": domains.len()}),
        SourceFetch::Unchanged => json!({"outcome": "unchanged"}),
        SourceFetch::Failed(why) => {
            json!({"outcome": "failed", "error": why, "kept": "the last good list stays in use"})
        }
    };
    Ok(Json(json!({"source": row, "fetch": said})))
}
