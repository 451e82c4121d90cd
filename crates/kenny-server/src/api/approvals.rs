//! `/api/approvals`: the calls held for approval on the MCP path, and the rules that
//! hold them. Reading: a call's caller sees their own calls, operators the calls on PCs
//! they reach. Deciding and changing the rules: operators and superusers signed in to
//! the dashboard only, never with a bearer token, so the model holding a caller's token
//! cannot approve its own calls or lift the rule (`approvals::may_decide`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{ApiError, BodyShape, JsonBody, SignedIn};
use crate::approvals;
use crate::principal::{CredentialKind, Principal, Role};
use crate::state::Fleet;
use crate::store::{HeldCall, RuleChange, RuleSubject};

/// How many decided calls the list shows besides the waiting ones.
const RECENT: u32 = 50;

pub(super) async fn list(State(fleet): State<Fleet>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    let now = fleet.clock.now();
    let at = now.clone();
    let (waiting, recent) = fleet
        .store
        .blocking(move |s| Ok((s.waiting_held_calls(&at, 500)?, s.recent_held_calls(RECENT)?)))
        .await?;
    let seen = |calls: Vec<HeldCall>| -> Vec<Value> {
        calls
            .iter()
            .filter(|c| approvals::may_read(&who, c))
            .map(|c| approvals::shown(c, &now))
            .collect()
    };
    Ok(Json(json!({ "waiting": seen(waiting), "recent": seen(recent) })))
}

pub(super) async fn show(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let held = readable(&fleet, &who, &id).await?;
    Ok(Json(approvals::shown(&held, &fleet.clock.now())))
}

/// Approves a held call: it is claimed (once, whoever else decides at the same time)
/// and runs in the background as its caller, on its frozen PC; its result is on the
/// call (`GET /api/approvals/{id}`) when it ends.
pub(super) async fn approve(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let held = decidable(&fleet, &who, &id).await?;
    if !approvals::claim(&fleet, &held.id, &who.username)
        .await
        .map_err(failed)?
    {
        return Err(not_held(&fleet, &held.id).await);
    }
    let claimed = approvals::load(&fleet, &held.id).await.map_err(failed)?.unwrap_or(held);
    let shown = approvals::shown(&claimed, &fleet.clock.now());
    tokio::spawn(crate::mcp::run_approved(fleet, claimed));
    Ok((StatusCode::ACCEPTED, Json(shown)))
}

pub(super) async fn deny(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let held = decidable(&fleet, &who, &id).await?;
    let failure = approvals::denied(&held, &who.username);
    let result = crate::mcp::failure_result(&failure);
    if !approvals::deny(&fleet, &held.id, &who.username, result)
        .await
        .map_err(failed)?
    {
        return Err(not_held(&fleet, &held.id).await);
    }
    let denied = readable(&fleet, &who, &held.id).await?;
    Ok(Json(approvals::shown(&denied, &fleet.clock.now())))
}

pub(super) async fn rules(State(fleet): State<Fleet>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    if who.role < Role::Operator {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only operators and superusers see the approval rules",
        ));
    }
    let rules = fleet.store.blocking(|s| s.approval_rules()).await?;
    Ok(Json(json!({ "rules": rules })))
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleBody {
    subject: String,
    id: i64,
    /// Whether the caller's own MCP client may be asked (elicitation); default true.
    elicitation: Option<bool>,
}

impl BodyShape for RuleBody {
    const SHAPE: &'static str = r#"{"subject": "user", "id": 3, "elicitation": true} (subject "user" or "token": a personal access token's id; elicitation false: only an operator in the dashboard approves)"#;
}

/// Requires approval for a user's (or one token's) state-changing MCP calls, or
/// changes whether the caller's own client may be asked.
pub(super) async fn add_rule(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<RuleBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let subject = rule_changer(&who, &body.subject)?;
    let elicitation = body.elicitation.unwrap_or(true);
    let (id, by, now) = (body.id, who.username.clone(), fleet.clock.now());
    let me = who.user_id;
    let added = fleet
        .store
        .blocking(move |s| {
            let Some(user) = s.approval_subject_user(subject, id)? else {
                return Ok(None);
            };
            // Loosening a rule that holds oneself is someone else's decision.
            let current = s.approval_required(user, (subject == RuleSubject::Token).then_some(id))?;
            if user == me && elicitation && current == Some(false) {
                return Ok(Some(Err(())));
            }
            s.set_approval_rule(subject, id, elicitation, &by, &now)
                .map(|added| Some(Ok(added)))
        })
        .await?;
    match added {
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "no {} with id {id}{}",
                subject.as_str(),
                if subject == RuleSubject::Token {
                    " that is a live personal access token"
                } else {
                    ""
                }
            ),
        )),
        Some(Err(())) => Err(self_loosening()),
        Some(Ok(change)) => Ok((
            if change == RuleChange::Added {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            },
            Json(json!({
                "subject": subject,
                "id": id,
                "elicitation": elicitation,
                "changed": change != RuleChange::Unchanged,
            })),
        )),
    }
}

pub(super) async fn remove_rule(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Path((subject, id)): Path<(String, i64)>,
) -> Result<StatusCode, ApiError> {
    let subject = rule_changer(&who, &subject)?;
    let me = who.user_id;
    let removed = fleet
        .store
        .blocking(move |s| {
            if s.approval_subject_user(subject, id)? == Some(me) {
                return Ok(Err(()));
            }
            s.clear_approval_rule(subject, id).map(Ok)
        })
        .await?;
    match removed {
        Err(()) => Err(self_loosening()),
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("there is no approval rule on {} {id}", subject.as_str()),
        )),
    }
}

fn self_loosening() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        "a rule that holds your own calls is lifted or loosened by another operator or a superuser, not by you",
    )
}

/// Rules change only by an operator signed in to the dashboard: a token under a rule
/// must not be able to lift it.
fn rule_changer(who: &Principal, subject: &str) -> Result<RuleSubject, ApiError> {
    if who.credential_kind != CredentialKind::Session || who.role < Role::Operator {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "approval rules are changed by an operator or superuser signed in to the dashboard, not with a token",
        ));
    }
    RuleSubject::parse(subject)
        .ok_or_else(|| ApiError::bad_request(format!("subject must be \"user\" or \"token\", not {subject:?}")))
}

async fn readable(fleet: &Fleet, who: &Principal, id: &str) -> Result<HeldCall, ApiError> {
    match approvals::load(fleet, id).await.map_err(failed)? {
        Some(held) if approvals::may_read(who, &held) => Ok(held),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no held call {id:?} that {} may see", who.username),
        )),
    }
}

async fn decidable(fleet: &Fleet, who: &Principal, id: &str) -> Result<HeldCall, ApiError> {
    let refused = |why| ApiError::new(StatusCode::FORBIDDEN, "forbidden", why);
    // Checked before the call is looked up, so a token learns nothing about it.
    approvals::signed_in(who).map_err(refused)?;
    let held = readable(fleet, who, id).await?;
    approvals::may_decide(who, &held).map_err(refused)?;
    Ok(held)
}

/// Why a decision found nothing to decide: someone decided first, or it expired.
async fn not_held(fleet: &Fleet, id: &str) -> ApiError {
    let now = fleet.clock.now();
    let status = match approvals::load(fleet, id).await {
        Ok(Some(h)) => {
            let by = h.decided_by.clone().unwrap_or_default();
            match h.status_at(&now) {
                "expired" => format!("it expired at {} undecided", h.expires_at),
                other => format!("it is already {other} (decided by {by})"),
            }
        }
        _ => "it is gone".to_owned(),
    };
    ApiError::new(
        StatusCode::CONFLICT,
        "conflict",
        format!("approval {id} is no longer waiting: {status}"),
    )
}

fn failed(f: crate::forward::CallFailure) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", f.message)
}
