//! `/api/agents`: the fleet listing and agent enrollment.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, BodyShape, JsonBody, SignedIn, Superuser};
use crate::state::{Fleet, Site};
use crate::tunnel::handshake::check_token;
use kenny_proto::agent_id::{AGENT_ID_RULE, is_valid as valid_agent_id};

pub(super) async fn list(State(fleet): State<Fleet>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    let agents = fleet.list(&who).await?;
    Ok(Json(json!({ "agents": agents })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewAgent {
    agent_id: String,
}

impl BodyShape for NewAgent {
    const SHAPE: &'static str = r#"{"agent_id": "..."}"#;
}

/// `POST /api/agents` (superusers): registers an agent as `kenny-server agent add` does
/// and answers with its enrollment values and the command that installs it on the PC.
/// The token is in this response and nowhere else.
pub(super) async fn create(
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    Superuser(who): Superuser,
    JsonBody(body): JsonBody<NewAgent>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let store = fleet.store.clone();
    let data_dir = site.config.data_dir.clone();
    let id = body.agent_id.trim().to_owned();
    let now = fleet.clock.now();
    let enrollment = tokio::task::spawn_blocking(move || crate::admin::add_agent_at(&store, &data_dir, &id, &now))
        .await?
        .map_err(|e| enrollment_error(e, ApiError::bad_request))?;
    tracing::info!(agent = %enrollment.agent_id, by = %who.username, "agent added");
    Ok((StatusCode::CREATED, enrollment_answer(&site, enrollment)))
}

/// A store refusal keeps its status; anything else is `other`.
fn enrollment_error(e: anyhow::Error, other: impl FnOnce(String) -> ApiError) -> ApiError {
    match e.downcast::<crate::store::StoreError>() {
        Ok(store_error) => ApiError::from(store_error),
        Err(e) => other(e.to_string()),
    }
}

/// What adding a PC and rotating its enrollment answer: the values the PC needs and
/// the command that installs it. The token is here and nowhere else.
fn enrollment_answer(site: &Site, enrollment: crate::admin::AgentEnrollment) -> Json<Value> {
    let command = crate::admin::install_command(&site.base_url, &enrollment);
    Json(json!({
        "agent_id": enrollment.agent_id,
        "token": enrollment.token,
        "server_pubkey": enrollment.server_pubkey,
        "server": &*site.base_url,
        "install_command": command,
    }))
}

/// `POST /api/agents/{id}/rekey`: forgets the PC's key and issues a new enrollment
/// token (the same answer as adding it); its live connection ends at once.
pub(super) async fn rekey(
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    Superuser(who): Superuser,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let enrollment = crate::retire::rekey(&fleet, &site.config.data_dir, &agent_id)
        .await
        .map_err(|e| {
            enrollment_error(e, |why| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", why)
            })
        })?;
    tracing::info!(agent = %agent_id, by = %who.username, "agent enrollment rotated");
    Ok(enrollment_answer(&site, enrollment))
}

/// `DELETE /api/agents/{id}`: removes the PC. Its history is purged after the
/// retention period (`--removed-pc-retention-days`); the audit log keeps its rows.
pub(super) async fn remove(
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    Superuser(who): Superuser,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    crate::retire::remove(&fleet, &agent_id, &who.username).await?;
    let kept = site.config.removed_retention.as_secs() / 86_400;
    Ok(Json(json!({
        "removed": agent_id,
        "history_kept_days": kept,
    })))
}

/// The newest health snapshot the agent pushed (agents push one on connecting and
/// then every `--telemetry-interval-secs`).
pub(super) async fn telemetry(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    // Out of scope and unknown look the same, so a `user` learns nothing about other hosts.
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no telemetry for agent {agent_id}: it is unknown to you or has not reported yet"),
        )
    };
    if !who.may_reach(&agent_id) {
        return Err(not_found());
    }
    let id = agent_id.clone();
    let latest = fleet.store.blocking(move |s| s.latest_telemetry(&id)).await?;
    let (collected_at, received_at, snapshot) = latest.ok_or_else(not_found)?;
    let snapshot: Value = serde_json::from_str(&snapshot).map_err(|e| {
        tracing::error!(agent = %agent_id, error = %e, "stored telemetry is not JSON");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "stored telemetry is unreadable; see the server log",
        )
    })?;
    Ok(Json(json!({
        "agent_id": agent_id,
        "collected_at": collected_at,
        "received_at": received_at,
        "snapshot": snapshot,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnrollBody {
    public_key: String,
}

impl BodyShape for EnrollBody {
    const SHAPE: &'static str = r#"{"public_key": "<base64>"}"#;
}

/// The agent proves it holds the enrollment token and registers its Ed25519 key.
pub(super) async fn enroll(
    State(fleet): State<Fleet>,
    Path(agent_id): Path<String>,
    headers: HeaderMap,
    body: Result<JsonBody<EnrollBody>, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unknown agent or bad enrollment token",
        )
    };
    if !valid_agent_id(&agent_id) {
        return Err(ApiError::bad_request(format!("agent id must be {AGENT_ID_RULE}")));
    }
    let token = crate::auth::bearer(&headers).ok_or_else(unauthorized)?.to_owned();
    let JsonBody(body) = body?;
    kenny_proto::auth::parse_public_key(&body.public_key)
        .map_err(|e| ApiError::bad_request(format!("public_key: {e}")))?;

    let id = agent_id.clone();
    let hash = fleet.store.blocking(move |s| s.agent_token_hash(&id)).await?;
    check_token(hash.as_deref(), &token).map_err(|_| unauthorized())?;

    let id = agent_id.clone();
    let now = fleet.clock.now();
    fleet
        .store
        .blocking(move |s| s.enroll_agent(&id, &body.public_key, &now))
        .await?;
    tracing::info!(agent = %agent_id, "agent enrolled its key");
    Ok(Json(json!({ "agent_id": agent_id, "enrolled": true })))
}
