//! `/api/install-links` (make, list, revoke; superusers only, since a link enrolls a
//! PC and, for an existing id, forgets the key it had) and `/api/releases` (the agent
//! builds this server hands out, per OS and architecture).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{ApiError, BodyShape, JsonBody, SignedIn, Superuser};
use crate::onboarding::{self, LinkSpec};
use crate::state::{Fleet, Site};
use crate::updates::releases;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewLink {
    agent_id: String,
    os: String,
    expires_minutes: Option<u64>,
}

impl BodyShape for NewLink {
    const SHAPE: &'static str = r#"{"agent_id": "pc-new", "os": "linux", "expires_minutes": 1440}"#;
}

pub(super) async fn create(
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    Superuser(who): Superuser,
    JsonBody(body): JsonBody<NewLink>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let spec = LinkSpec::new(&body.agent_id, &body.os, body.expires_minutes)
        .map_err(|why| ApiError::bad_request(format!("no install link made: {why}")))?;
    let base_url = site.base_url.clone();
    let now = fleet.clock.now_utc();
    let link = fleet
        .store
        .blocking(move |s| onboarding::create(s, &base_url, &spec, &who.username, now))
        .await?;
    Ok((StatusCode::CREATED, Json(json!(link))))
}

pub(super) async fn list(State(fleet): State<Fleet>, Superuser(_): Superuser) -> Result<Json<Value>, ApiError> {
    let rows = fleet.store.blocking(|s| s.install_links(200)).await?;
    let now = fleet.clock.now();
    let links: Vec<Value> = rows
        .iter()
        .map(|row| {
            let mut v = json!(row);
            v["state"] = json!(row.state(&now));
            v
        })
        .collect();
    Ok(Json(json!({ "links": links })))
}

pub(super) async fn revoke(
    State(fleet): State<Fleet>,
    Superuser(who): Superuser,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let now = fleet.clock.now();
    let row = fleet
        .store
        .blocking(move |s| s.revoke_install_link(id, &who.username, &now))
        .await?;
    let state = row.state(&fleet.clock.now());
    Ok(Json(json!({ "link": row, "state": state })))
}

/// Every build, for operators and superusers (a `user` has no say in what runs where).
pub(super) async fn builds(State(site): State<Site>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    if who.role == crate::principal::Role::User {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the agent builds are listed to operators and superusers",
        ));
    }
    let dir = releases::dir(&site.config.data_dir);
    let shown = dir.clone();
    let builds = tokio::task::spawn_blocking(move || releases::all(&dir)).await?;
    Ok(Json(json!({ "builds": builds, "dir": shown })))
}
