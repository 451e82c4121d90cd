//! `GET /api/audit`: the audit log, newest first, filterable by agent, tool, user and
//! outcome.

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, SignedIn};
use crate::principal::Role;
use crate::state::Fleet;
use crate::store::AuditFilter;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Params {
    agent_id: Option<String>,
    limit: Option<u32>,
    /// Page backwards: rows with an id below this one.
    before: Option<i64>,
    tool: Option<String>,
    /// A user name.
    user: Option<String>,
    /// `ok`, `error`, `refused`, `sent` or `interrupted`.
    outcome: Option<String>,
}

pub(super) async fn list(
    State(fleet): State<Fleet>,
    SignedIn(who): SignedIn,
    Query(p): Query<Params>,
) -> Result<Json<Value>, ApiError> {
    let limit = p.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 1000"));
    }
    let filter = AuditFilter {
        agent_id: p.agent_id,
        // A `user` sees the trail of its own calls; operators and superusers see all.
        user_id: (who.role == Role::User).then_some(who.user_id),
        before_id: p.before,
        limit,
        tool: p.tool.filter(|t| !t.is_empty()),
        username: p.user.filter(|u| !u.is_empty()),
        outcome: p.outcome.filter(|o| !o.is_empty()),
    };
    let entries = fleet.store.blocking(move |s| s.audit(&filter)).await?;
    Ok(Json(json!({ "entries": entries })))
}
