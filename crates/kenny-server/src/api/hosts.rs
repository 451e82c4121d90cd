//! `/api/agent/{id}/...`: the dashboard's host actions. Each names its host in the path
//! and goes through the forwarder like an MCP call (scope, validation, an audit row with
//! who and from where), then does its server-side part: keeping the telemetry snapshot
//! or the screenshot.
//!
//! Failures map to HTTP statuses in [`call_error`]; a host out of the caller's scope
//! answers exactly like an unknown one (404), so a `user` learns nothing about it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use kenny_proto::AgentId;
use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value, json};

use super::{ApiError, SignedIn};
use crate::forward::CallFailure;
use crate::principal::Principal;
use crate::state::Fleet;
use crate::store::ScreenshotMeta;
use kenny_proto::results::Screenshot;

/// The audit trail's name for reading one host's facts (no agent is called).
pub(super) const FACTS_TOOL: &str = "agent_health";
/// The audit trail's name for an agent update request.
pub(super) const UPDATE_TOOL: &str = "agent_update";
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

fn not_found(agent_id: &str) -> ApiError {
    let shown: String = agent_id.chars().take(64).collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no agent {shown:?} that you can reach; the fleet page lists yours"),
    )
}

/// The HTTP answer for a call that did not succeed.
///
/// | codes | status |
/// |---|---|
/// | `forbidden`, `unknown_agent`, `no_agent` | 404 (out of scope looks unknown) |
/// | `bad_args` | 400 |
/// | `disabled`, `blocked`, `paused`, `denied` | 403: the PC's owner or a rule said no |
/// | `offline` | 409: the host is known but not connected |
/// | `unsupported` | 422: this host cannot do that (e.g. remote help on Linux) |
/// | `timeout` | 504 |
/// | `not_found` refused by the server (no agent build to offer) | 404 |
/// | `exec_failed`, `not_found`, `internal`, `bad_signature`, anything else | 502: the agent tried and failed, or its answer was refused |
pub(super) fn call_error(agent_id: &str, f: &CallFailure) -> ApiError {
    let Some(code) = ErrorCode::parse(&f.code) else {
        return ApiError::new(
            StatusCode::BAD_GATEWAY,
            "agent_error",
            format!("{}: {}", f.code, f.message),
        );
    };
    let status = match code {
        ErrorCode::Forbidden | ErrorCode::UnknownAgent | ErrorCode::NoAgent => return not_found(agent_id),
        ErrorCode::BadArgs => StatusCode::BAD_REQUEST,
        ErrorCode::Disabled | ErrorCode::Blocked | ErrorCode::Paused | ErrorCode::Denied => StatusCode::FORBIDDEN,
        ErrorCode::Offline => StatusCode::CONFLICT,
        ErrorCode::AwaitingApproval => StatusCode::ACCEPTED,
        ErrorCode::Unsupported => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        // The server itself has nothing to offer (no agent build for this host).
        ErrorCode::NotFound if f.refused => StatusCode::NOT_FOUND,
        ErrorCode::ExecFailed | ErrorCode::NotFound | ErrorCode::Internal | ErrorCode::BadSignature => {
            StatusCode::BAD_GATEWAY
        }
    };
    ApiError::new(status, code.as_str(), f.message.clone())
}

/// The HTTP answer for a refused or failed call by `who`: a role floor on a PC the
/// caller can see is a plain 403 naming the role, not "unknown PC".
pub(super) fn refusal_for(who: &Principal, agent_id: &str, f: &CallFailure) -> ApiError {
    if f.code == ErrorCode::Forbidden.as_str() && who.may_reach(agent_id) {
        return ApiError::new(StatusCode::FORBIDDEN, "forbidden", f.message.clone());
    }
    call_error(agent_id, f)
}

/// The account tools the host page's accounts card sends.
const ACCOUNT_TOOLS: &[&str] = &[
    "account_create",
    "account_delete",
    "account_set_enabled",
    "account_set_admin",
    "account_set_logon_rights",
    "account_session_action",
    "password_policy_set",
];

/// One account tool's arguments, as the card sends them.
#[derive(Debug, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct AccountArgs(Map<String, Value>);

impl super::BodyShape for AccountArgs {
    const SHAPE: &'static str = r#"{"principal": "kid", "enabled": false} with the tool's arguments (docs/agent.md)"#;
}

/// `POST /api/agent/{id}/accounts/{tool}`: one local account change, forwarded like an
/// MCP call (scope, the operator floor, argument checks, audit).
pub(super) async fn account_action(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path((agent_id, tool)): Path<(String, String)>,
    super::JsonBody(AccountArgs(args)): super::JsonBody<AccountArgs>,
) -> Result<Json<Value>, ApiError> {
    if !ACCOUNT_TOOLS.contains(&tool.as_str()) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "there is no account action {:?}; the actions are {}",
                tool.chars().take(40).collect::<String>(),
                ACCOUNT_TOOLS.join(", ")
            ),
        ));
    }
    let target = AgentId::parse(&agent_id).map_err(|_| not_found(&agent_id))?;
    let result = fleet
        .forwarder
        .forward(&who, &target, &tool, args)
        .await
        .map_err(|f| refusal_for(&who, &agent_id, &f))?;
    Ok(Json(json!({"agent_id": agent_id, "tool": tool, "result": result})))
}

/// Runs `tool` (no arguments) on `agent_id` for `who`, through the forwarder.
async fn run(fleet: &Fleet, who: &Principal, agent_id: &str, tool: &str) -> Result<Value, ApiError> {
    let target = AgentId::parse(agent_id).map_err(|_| not_found(agent_id))?;
    fleet
        .forwarder
        .forward(who, &target, tool, Map::new())
        .await
        .map_err(|f| call_error(agent_id, &f))
}

fn bad_answer(tool: &str, what: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "exec_failed",
        format!("the agent answered {tool} without {what}; is it an older kenny-agent?"),
    )
}

/// Refuses (and audits) a request for a host out of reach or unknown.
async fn known_host(
    fleet: &Fleet,
    who: &Principal,
    agent_id: &str,
    tool: &str,
) -> Result<crate::fleet::AgentSummary, ApiError> {
    // Only a well-formed id goes into the trail; anything else is just "unknown".
    let shown = kenny_proto::agent_id::is_valid(agent_id).then(|| agent_id.to_owned());
    if let Err(refusal) = fleet.forwarder.check_reach(who, agent_id) {
        fleet
            .forwarder
            .audit_refusal(who, shown, tool, &Map::new(), &refusal)
            .await;
        return Err(not_found(agent_id));
    }
    match fleet.one(who, agent_id).await? {
        Some(agent) => Ok(agent),
        None => {
            let refusal = CallFailure::refusal(ErrorCode::UnknownAgent, "no agent with that id");
            fleet
                .forwarder
                .audit_refusal(who, shown, tool, &Map::new(), &refusal)
                .await;
            Err(not_found(agent_id))
        }
    }
}

/// `GET /api/agent/{id}`: what the server knows about one host.
pub(super) async fn facts(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let agent = known_host(&fleet, &who, &agent_id, FACTS_TOOL).await?;
    let id = agent_id.clone();
    let (latest, screenshot) = fleet
        .store
        .blocking(move |s| Ok((s.latest_telemetry(&id)?, s.screenshot_meta(&id)?)))
        .await?;
    let health = fleet.health.get(&agent_id);
    let telemetry = latest.map(|(collected_at, received_at, _)| {
        json!({
            "collected_at": collected_at,
            "received_at": received_at,
            "health": health,
        })
    });
    fleet.forwarder.audit_served(&who, &agent_id, FACTS_TOOL).await;
    Ok(Json(
        json!({ "agent": agent, "telemetry": telemetry, "screenshot": screenshot }),
    ))
}

/// `POST /api/agent/{id}/refresh`: collects telemetry now, keeps it as the latest
/// snapshot and returns it.
pub(super) async fn refresh(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tool = "telemetry_collect";
    let result = run(&fleet, &who, &agent_id, tool).await?;
    let collected_at = result
        .get("collected_at")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_answer(tool, "collected_at"))?
        .to_owned();
    let snapshot = result
        .get("snapshot")
        .filter(|s| s.is_object())
        .ok_or_else(|| bad_answer(tool, "a snapshot"))?
        .clone();
    let os = fleet
        .registry
        .get(&agent_id)
        .and_then(|l| l.meta.as_ref().map(|m| m.os.clone()));
    let health = snapshot.as_object().map(|map| {
        fleet.ingest_telemetry(
            &agent_id,
            os.as_deref(),
            collected_at.clone(),
            map,
            snapshot.to_string(),
        )
    });
    Ok(Json(json!({
        "agent_id": agent_id,
        "collected_at": collected_at,
        "health": health,
        "snapshot": snapshot,
    })))
}

/// The picture in a `screen_capture` result, checked to be a PNG, with its size.
fn png_of(result: &Value) -> Result<(Vec<u8>, Screenshot), ApiError> {
    let tool = "screen_capture";
    let shot = Screenshot::from_result(result).map_err(|_| bad_answer(tool, "a screenshot (type, size and data)"))?;
    if shot.mime_type != "image/png" {
        return Err(bad_answer(tool, "a PNG"));
    }
    let png = base64::engine::general_purpose::STANDARD
        .decode(&shot.data_base64)
        .map_err(|_| bad_answer(tool, "valid base64 image data"))?;
    if !png.starts_with(PNG_SIGNATURE) {
        return Err(bad_answer(tool, "a PNG"));
    }
    Ok((png, shot))
}

/// `POST /api/agent/{id}/screenshot`: captures the screen and keeps it as the host's
/// latest screenshot; answers with its metadata.
pub(super) async fn capture(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let result = run(&fleet, &who, &agent_id, "screen_capture").await?;
    let (png, shot) = png_of(&result)?;
    let meta = ScreenshotMeta {
        agent_id: agent_id.clone(),
        width: i64::from(shot.width),
        height: i64::from(shot.height),
        bytes: png.len() as i64,
        taken_at: fleet.clock.now(),
        taken_by: who.username.clone(),
    };
    let stored = meta.clone();
    fleet.store.blocking(move |s| s.put_screenshot(&stored, &png)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "screenshot": meta, "url": format!("/api/agent/{agent_id}/screenshot") })),
    ))
}

/// `GET /api/agent/{id}/screenshot`: the latest screenshot as `image/png`, with who took
/// it and when in `X-Kenny-Taken-By` / `X-Kenny-Taken-At`.
pub(super) async fn screenshot(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<Response, ApiError> {
    let none = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no screenshot of agent {agent_id:?} that you can see; capture one first"),
        )
    };
    if !who.may_reach(&agent_id) {
        return Err(none());
    }
    let id = agent_id.clone();
    let (meta, png) = fleet
        .store
        .blocking(move |s| s.screenshot(&id))
        .await?
        .ok_or_else(none)?;
    let mut response = ([(header::CONTENT_TYPE, HeaderValue::from_static("image/png"))], png).into_response();
    let h = response.headers_mut();
    for (name, value) in [("x-kenny-taken-at", meta.taken_at), ("x-kenny-taken-by", meta.taken_by)] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    Ok(response)
}

/// `POST /api/agent/{id}/remotehelp`: starts remote help (Quick Assist) on the host.
pub(super) async fn remote_help(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let result = run(&fleet, &who, &agent_id, "remotehelp_start").await?;
    Ok(Json(json!({ "agent_id": agent_id, "result": result })))
}

/// `POST /api/agents/{id}/update`: updates the agent (`agent_update` through the
/// forwarder: the server picks the build and signs the order). The body may name a
/// `version` and `allow_downgrade`; empty means the newest build the server has.
pub(super) async fn update(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let agent = known_host(&fleet, &who, &agent_id, UPDATE_TOOL).await?;
    let args = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        serde_json::from_slice::<Map<String, Value>>(&body).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_args",
                format!("the body must be a JSON object like {{\"version\": \"0.2.0\"}} or empty: {e}"),
            )
        })?
    };
    let target = AgentId::parse(&agent_id).map_err(|_| not_found(&agent_id))?;
    let result = fleet
        .forwarder
        .forward(&who, &target, UPDATE_TOOL, args)
        .await
        .map_err(|f| call_error(&agent_id, &f))?;
    Ok(Json(
        json!({"agent_id": agent_id, "from": agent.version, "result": result}),
    ))
}

/// `GET /api/agents/{id}/updates`: how the agent's updates ended, newest first.
pub(super) async fn updates(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    known_host(&fleet, &who, &agent_id, UPDATE_TOOL).await?;
    let id = agent_id.clone();
    let updates = fleet.store.blocking(move |s| s.agent_updates(&id, 50)).await?;
    Ok(Json(json!({"agent_id": agent_id, "updates": updates})))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: &str) -> (u16, &'static str) {
        let e = call_error(
            "pc-a",
            &CallFailure {
                code: code.into(),
                message: "m".into(),
                refused: false,
            },
        );
        (e.status.as_u16(), e.code)
    }

    #[test]
    fn failures_map_to_statuses_and_out_of_scope_looks_unknown() {
        assert_eq!(status("forbidden"), (404, "not_found"));
        assert_eq!(status("unknown_agent"), (404, "not_found"));
        let forbidden = call_error(
            "pc-a",
            &CallFailure::refusal(ErrorCode::Forbidden, "kim may not reach pc-a"),
        );
        let unknown = call_error("pc-a", &CallFailure::refusal(ErrorCode::UnknownAgent, "no agent pc-a"));
        assert_eq!(
            forbidden.message, unknown.message,
            "same answer whether the host exists or not"
        );
        assert_eq!(status("offline"), (409, "offline"));
        assert_eq!(status("timeout"), (504, "timeout"));
        assert_eq!(status("unsupported"), (422, "unsupported"));
        assert_eq!(status("disabled"), (403, "disabled"));
        assert_eq!(status("blocked"), (403, "blocked"));
        assert_eq!(status("exec_failed"), (502, "exec_failed"));
        assert_eq!(status("bad_args"), (400, "bad_args"));
        assert_eq!(status("something_new"), (502, "agent_error"));
    }

    #[test]
    fn only_real_pngs_are_kept() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let png = [PNG_SIGNATURE, b"rest"].concat();
        let shot = |mime: &str, data: String| json!({"mime_type": mime, "width": 4, "height": 3, "data_base64": data});
        let (kept, meta) = png_of(&shot("image/png", b64(&png))).unwrap();
        assert_eq!((kept, meta.width, meta.height), (png.clone(), 4, 3));
        for bad in [
            shot("image/jpeg", b64(&png)),
            shot("image/png", "%%%".into()),
            shot("image/png", b64(b"<svg>")),
            json!({"mime_type": "image/png"}),
            json!({"mime_type": "image/png", "data_base64": b64(&png)}),
        ] {
            assert_eq!(png_of(&bad).unwrap_err().status, StatusCode::BAD_GATEWAY, "{bad}");
        }
    }
}
