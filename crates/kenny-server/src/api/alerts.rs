//! `/api/alerts`: alerts, their settings, channels, deliveries and silences.
//! Everyone signed in sees the alerts and silences of the PCs they may reach;
//! operators silence; only superusers set up channels and settings (channels hold
//! secrets, which are never sent back).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ApiError, BodyShape, JsonBody, SignedIn, Superuser, patched};
use crate::alerts::channels::ChannelConfig;
use crate::alerts::settings::{self, AlertSettings};
use crate::alerts::silences::{self, SilenceRequest};
use crate::alerts::{digest, message, send_now};
use crate::forward::CallFailure;
use crate::health::clean;
use crate::state::Fleet;
use crate::store::{AlertRow, ChannelRow};
use kenny_proto::error::ErrorCode;

/// Alerts shown as recent: opened or closed within this.
const RECENT_HOURS: i64 = 24;

/// `GET /api/alerts`: the open alerts and those of the last day, of reachable PCs.
pub(super) async fn list(State(fleet): State<Fleet>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    let since = crate::clock::format(fleet.clock.now_utc() - time::Duration::hours(RECENT_HOURS));
    let hosts = who.hosts_json();
    let (open, recent) = fleet
        .store
        .blocking(move |s| Ok((s.open_alerts()?, s.alerts_since(&since, 500, hosts.as_deref())?)))
        .await?;
    let mine = |rows: Vec<AlertRow>| -> Vec<Value> {
        rows.iter()
            .filter(|a| who.may_reach(&a.agent_id))
            .map(shown_alert)
            .collect()
    };
    Ok(Json(json!({ "open": mine(open), "recent": mine(recent) })))
}

pub(crate) fn shown_alert(a: &AlertRow) -> Value {
    json!({
        "id": a.id,
        "agent_id": a.agent_id,
        "key": a.key,
        "status": a.status,
        "reason": a.reason,
        "attention": a.attention,
        "opened_at": a.opened_at,
        "updated_at": a.updated_at,
        "closed_at": a.closed_at,
        "silenced": a.silenced,
        "notified": a.notified,
    })
}

// ---- settings -----------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(super) struct SettingsPatch(Map<String, Value>);

impl BodyShape for SettingsPatch {
    const SHAPE: &'static str =
        r#"{"offline_after_secs": <number>, "cooldown_secs": <number>, "digest_day": "monday"...}"#;
}

pub(super) async fn show_settings(State(fleet): State<Fleet>) -> Result<Json<Value>, ApiError> {
    let current = fleet.store.blocking(AlertSettings::load).await?;
    Ok(Json(
        json!({ "settings": current, "defaults": AlertSettings::default() }),
    ))
}

pub(super) async fn change_settings(
    State(fleet): State<Fleet>,
    Superuser(who): Superuser,
    JsonBody(SettingsPatch(patch)): JsonBody<SettingsPatch>,
) -> Result<Json<Value>, ApiError> {
    let current = fleet.store.blocking(AlertSettings::load).await?;
    let new: AlertSettings =
        patched(&current, patch, "setting").map_err(|e| ApiError::bad_request(format!("settings not changed: {e}")))?;
    new.validate()
        .map_err(|e| ApiError::bad_request(format!("settings not changed: {e}")))?;
    let json = serde_json::to_string(&new).map_err(|e| internal(&e.to_string()))?;
    let (by, at) = (who.username.clone(), fleet.clock.now());
    fleet
        .store
        .blocking(move |s| s.save_setting(settings::KEY, &json, &by, &at))
        .await?;
    fleet.alerts.settings_changed();
    Ok(Json(json!({ "settings": new, "defaults": AlertSettings::default() })))
}

// ---- channels -----------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChannelBody {
    name: String,
    #[serde(default)]
    digest: bool,
    #[serde(default = "yes")]
    enabled: bool,
    config: ChannelConfig,
}

fn yes() -> bool {
    true
}

impl BodyShape for ChannelBody {
    const SHAPE: &'static str = r#"{"name", "digest": bool, "enabled": bool, "config": {"kind": "ntfy", "url", "token"?} | {"kind": "webhook", "url", "secret"} | {"kind": "email", "host", "port", "username"?, "password"?, "from", "to": [...], "tls": "starttls"|"tls"|"none", "ca_pem"?}}"#;
}

pub(super) async fn channels(State(fleet): State<Fleet>, Superuser(_): Superuser) -> Result<Json<Value>, ApiError> {
    let rows = fleet.store.blocking(|s| s.channels()).await?;
    Ok(Json(
        json!({ "channels": rows.iter().map(shown_channel).collect::<Vec<_>>() }),
    ))
}

pub(crate) fn shown_channel(c: &ChannelRow) -> Value {
    let config = serde_json::from_str::<ChannelConfig>(&c.config)
        .map(|c| c.shown())
        .unwrap_or(Value::Null);
    json!({
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "digest": c.digest,
        "enabled": c.enabled,
        "config": config,
        "created_at": c.created_at,
        "digest_sent_at": c.digest_sent_at,
    })
}

pub(super) async fn create_channel(
    State(fleet): State<Fleet>,
    Superuser(_): Superuser,
    JsonBody(body): JsonBody<ChannelBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let row = channel_row(0, body, None, fleet.clock.now())?;
    let mut stored = row.clone();
    stored.id = fleet.store.blocking(move |s| s.insert_channel(&row)).await?;
    Ok((StatusCode::CREATED, Json(json!({ "channel": shown_channel(&stored) }))))
}

pub(super) async fn update_channel(
    State(fleet): State<Fleet>,
    Superuser(_): Superuser,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<ChannelBody>,
) -> Result<Json<Value>, ApiError> {
    let previous = existing(&fleet, id).await?;
    let old = serde_json::from_str::<ChannelConfig>(&previous.config).ok();
    let mut row = channel_row(id, body, old.as_ref(), previous.created_at)?;
    row.digest_sent_at = previous.digest_sent_at;
    let stored = row.clone();
    fleet.store.blocking(move |s| s.update_channel(&row)).await?;
    Ok(Json(json!({ "channel": shown_channel(&stored) })))
}

pub(super) async fn delete_channel(
    State(fleet): State<Fleet>,
    Superuser(_): Superuser,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    fleet.store.blocking(move |s| s.delete_channel(id)).await?;
    Ok(Json(json!({ "deleted": id })))
}

/// `POST /api/alerts/channels/{id}/test`: sends a test message now and says how it
/// went (the delivery is recorded like any other).
pub(super) async fn test_channel(
    State(fleet): State<Fleet>,
    Superuser(_): Superuser,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let channel = existing(&fleet, id).await?;
    let msg = message::test(&channel.name, &fleet.clock.now());
    Ok(Json(send_and_record(&fleet, &channel, &msg).await?))
}

/// `POST /api/alerts/channels/{id}/digest`: sends the weekly digest to this channel now.
pub(super) async fn send_digest(
    State(fleet): State<Fleet>,
    Superuser(_): Superuser,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let channel = existing(&fleet, id).await?;
    let (clock, registry) = (fleet.clock.clone(), fleet.registry.clone());
    let msg = fleet
        .store
        .blocking(move |s| digest::build(s, &clock, &|id: &str| registry.is_online(id)))
        .await?;
    Ok(Json(send_and_record(&fleet, &channel, &msg).await?))
}

async fn send_and_record(fleet: &Fleet, channel: &ChannelRow, msg: &message::Message) -> Result<Value, ApiError> {
    let config = serde_json::from_str::<ChannelConfig>(&channel.config)
        .map_err(|e| internal(&format!("the channel's settings do not read: {e}")))?;
    let outcome = send_now(&config, msg, &fleet.clock).await;
    let json = serde_json::to_string(msg).unwrap_or_default();
    let (channel_id, event, now) = (channel.id, msg.event.clone(), fleet.clock.now());
    let error = outcome.as_ref().err().cloned();
    fleet
        .store
        .blocking(move |s| {
            let id = s.queue_delivery(channel_id, &event, &json, &now)?;
            let status = if error.is_some() { "failed" } else { "sent" };
            s.record_attempt(id, status, error.as_deref(), &now, &now)
        })
        .await?;
    Ok(match outcome {
        Ok(()) => json!({ "sent": true }),
        Err(e) => json!({ "sent": false, "error": e }),
    })
}

fn channel_row(
    id: i64,
    body: ChannelBody,
    previous: Option<&ChannelConfig>,
    created_at: String,
) -> Result<ChannelRow, ApiError> {
    let name = clean(&body.name, 80);
    if name.is_empty() {
        return Err(ApiError::bad_request("channel not saved: name is required"));
    }
    let config = match previous {
        Some(old) => body.config.keeping_secrets_of(old),
        None => body.config,
    };
    config
        .validate()
        .map_err(|e| ApiError::bad_request(format!("channel not saved: {e}")))?;
    Ok(ChannelRow {
        id,
        name,
        kind: config.kind().to_owned(),
        config: serde_json::to_string(&config).map_err(|e| internal(&e.to_string()))?,
        digest: body.digest,
        enabled: body.enabled,
        created_at,
        digest_sent_at: None,
    })
}

async fn existing(fleet: &Fleet, id: i64) -> Result<ChannelRow, ApiError> {
    fleet
        .store
        .blocking(move |s| s.channel(id))
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no alert channel {id}")))
}

/// `GET /api/alerts/deliveries`: the newest deliveries, failures with their error.
pub(super) async fn deliveries(State(fleet): State<Fleet>, Superuser(_): Superuser) -> Result<Json<Value>, ApiError> {
    let rows = fleet.store.blocking(|s| s.recent_deliveries(100)).await?;
    let shown: Vec<Value> = rows
        .iter()
        .map(|(d, channel)| {
            let title = serde_json::from_str::<message::Message>(&d.message)
                .map(|m| m.title)
                .unwrap_or_default();
            json!({
                "id": d.id,
                "channel_id": d.channel_id,
                "channel": channel,
                "alert_id": d.alert_id,
                "event": d.event,
                "title": title,
                "status": d.status,
                "attempts": d.attempts,
                "next_at": d.next_at,
                "last_error": d.last_error,
                "created_at": d.created_at,
                "sent_at": d.sent_at,
            })
        })
        .collect();
    Ok(Json(json!({ "deliveries": shown })))
}

// ---- silences -----------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SilenceBody {
    agent_id: String,
    section: Option<String>,
    duration: String,
    reason: String,
}

impl BodyShape for SilenceBody {
    const SHAPE: &'static str = r#"{"agent_id", "section"?, "duration": "2h", "reason"}"#;
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClearBody {
    agent_id: String,
    section: Option<String>,
}

impl BodyShape for ClearBody {
    const SHAPE: &'static str = r#"{"agent_id", "section"?}"#;
}

pub(super) async fn silences(State(fleet): State<Fleet>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    let rows = silences::list(&fleet, &who, None).await.map_err(refused)?;
    Ok(Json(
        json!({ "silences": rows.iter().map(silences::shown).collect::<Vec<_>>() }),
    ))
}

pub(super) async fn silence(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<SilenceBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let row = silences::set(
        &fleet,
        &who,
        SilenceRequest {
            agent_id: &body.agent_id,
            section: body.section.as_deref().filter(|s| !s.is_empty()),
            duration: &body.duration,
            reason: &body.reason,
        },
    )
    .await
    .map_err(refused)?;
    Ok((StatusCode::CREATED, Json(json!({ "silence": silences::shown(&row) }))))
}

pub(super) async fn unsilence(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<ClearBody>,
) -> Result<Json<Value>, ApiError> {
    let ended = silences::clear(&fleet, &who, &body.agent_id, body.section.as_deref())
        .await
        .map_err(refused)?;
    Ok(Json(
        json!({ "ended": ended.iter().map(silences::shown).collect::<Vec<_>>() }),
    ))
}

fn refused(f: CallFailure) -> ApiError {
    let status = match ErrorCode::parse(&f.code) {
        Some(ErrorCode::Forbidden) => StatusCode::FORBIDDEN,
        Some(ErrorCode::UnknownAgent | ErrorCode::NotFound) => StatusCode::NOT_FOUND,
        Some(ErrorCode::BadArgs) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let code = ErrorCode::parse(&f.code).map_or("internal", ErrorCode::as_str);
    ApiError::new(status, code, f.message)
}

fn internal(message: &str) -> ApiError {
    tracing::error!(error = %message, "alerts API failure");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal failure; see the server log",
    )
}
