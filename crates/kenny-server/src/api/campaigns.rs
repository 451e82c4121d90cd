//! `/api/campaigns`: update campaigns (superusers start, pause, resume and cancel them;
//! operators and superusers read them; `user` principals neither, since a campaign
//! spans PCs outside any one user's list), and `/api/agents/{id}/channel`, the update
//! channel a PC is on (operators and superusers). The `audited` layer writes the audit
//! row of every change; each update a campaign starts has its own, from the forwarder.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, BodyShape, JsonBody, SignedIn, Superuser};
use crate::principal::{Principal, Role};
use crate::rollout::create::{self, CHANNELS};
use crate::state::{Fleet, Site};

impl BodyShape for create::Request {
    const SHAPE: &'static str = create::SHAPE;
}

/// Operators and superusers may look at campaigns; a `user` may not.
fn operator(who: &Principal, what: &str) -> Result<(), ApiError> {
    if who.role >= Role::Operator {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!(
            "{what} needs the operator role and {} is a {}; ask an operator or a superuser",
            who.username,
            who.role.as_str()
        ),
    ))
}

/// `POST /api/campaigns` (superusers).
pub(super) async fn start(
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    Superuser(who): Superuser,
    JsonBody(req): JsonBody<create::Request>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let releases_dir = crate::updates::releases::dir(&site.config.data_dir);
    let (now, by) = (fleet.clock.now(), who.username.clone());
    let new = fleet
        .store
        .blocking(move |s| {
            let agents = s.agents()?;
            Ok(create::check(&req, &releases_dir, &agents, &by, &now))
        })
        .await?
        .map_err(ApiError::bad_request)?;
    let count = new.agents.len();
    let id = fleet.store.blocking(move |s| s.create_campaign(&new)).await?;
    tracing::info!(campaign = id, pcs = count, by = %who.username, "update campaign created");
    let body = one(&fleet, &who, id).await?;
    Ok((StatusCode::CREATED, body))
}

/// `GET /api/campaigns`: every campaign, newest first, with its PCs counted by status.
pub(super) async fn list(State(fleet): State<Fleet>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    operator(&who, "reading update campaigns")?;
    let scope = who.clone();
    let campaigns = fleet
        .store
        .blocking(move |s| {
            let mut out = Vec::new();
            for c in s.campaigns()? {
                let mut pcs = s.campaign_pcs(c.id)?;
                pcs.retain(|p| scope.may_reach(&p.agent_id));
                let mut counts = serde_json::Map::new();
                for pc in &pcs {
                    let n = counts.get(&pc.status).and_then(Value::as_u64).unwrap_or(0);
                    counts.insert(pc.status.clone(), json!(n + 1));
                }
                let mut v = serde_json::to_value(&c).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("pcs".into(), json!(pcs.len()));
                    o.insert("by_status".into(), Value::Object(counts));
                }
                out.push(v);
            }
            Ok(out)
        })
        .await?;
    Ok(Json(json!({ "campaigns": campaigns })))
}

/// `GET /api/campaigns/{id}`: the campaign and each of its PCs.
pub(super) async fn show(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    operator(&who, "reading update campaigns")?;
    one(&fleet, &who, parse_id(&id)?).await
}

/// A campaign with the PCs `who` may reach (an operator limited to some PCs sees only
/// those).
async fn one(fleet: &Fleet, who: &Principal, id: i64) -> Result<Json<Value>, ApiError> {
    let found = fleet
        .store
        .blocking(move |s| Ok(s.campaign(id)?.map(|c| (c, s.campaign_pcs(id)))))
        .await?;
    let Some((campaign, pcs)) = found else {
        return Err(not_found(id));
    };
    let mut v = serde_json::to_value(&campaign).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        let mut pcs = pcs?;
        pcs.retain(|p| who.may_reach(&p.agent_id));
        o.insert("agents".into(), serde_json::to_value(pcs).unwrap_or_default());
    }
    Ok(Json(v))
}

fn not_found(id: i64) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no update campaign {id}; GET /api/campaigns lists them"),
    )
}

fn parse_id(id: &str) -> Result<i64, ApiError> {
    id.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "{:?} is not a campaign id; GET /api/campaigns lists them",
            crate::health::clean(id, 40)
        ))
    })
}

/// `POST /api/campaigns/{id}/{pause|resume|cancel}` (superusers).
pub(super) async fn act(
    State(fleet): State<Fleet>,
    Superuser(who): Superuser,
    Path((id, action)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    let (from, to): (&'static [&'static str], &'static str) = match action.as_str() {
        "pause" => (&["running"], "paused"),
        "resume" => (&["paused"], "running"),
        "cancel" => (&["running", "paused"], "cancelled"),
        _ => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "a campaign takes pause, resume or cancel",
            ));
        }
    };
    let now = fleet.clock.now();
    fleet
        .store
        .blocking(move |s| s.set_campaign_state(id, from, to, &now))
        .await?;
    tracing::info!(campaign = id, by = %who.username, state = to, "update campaign changed");
    one(&fleet, &who, id).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChannelBody {
    channel: String,
}

impl BodyShape for ChannelBody {
    const SHAPE: &'static str = r#"{"channel": "stable" | "beta"}"#;
}

/// `PUT /api/agents/{id}/channel` (operators and superusers).
pub(super) async fn set_channel(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(agent_id): Path<String>,
    JsonBody(body): JsonBody<ChannelBody>,
) -> Result<Json<Value>, ApiError> {
    operator(&who, "putting a PC on an update channel")?;
    if !who.may_reach(&agent_id) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no agent with id {agent_id:?} that you may reach; GET /api/agents lists them"),
        ));
    }
    if !CHANNELS.contains(&body.channel.as_str()) {
        return Err(ApiError::bad_request(format!(
            "channel must be stable or beta, got {:?}",
            crate::health::clean(&body.channel, 40)
        )));
    }
    let (id, channel) = (agent_id.clone(), body.channel.clone());
    fleet
        .store
        .blocking(move |s| s.set_agent_channel(&id, &channel))
        .await?;
    tracing::info!(agent = %agent_id, channel = %body.channel, by = %who.username, "update channel set");
    Ok(Json(json!({"agent_id": agent_id, "channel": body.channel})))
}
