//! `/api/policy`: the operator's guard rules. Everyone signed in may read them (they
//! explain refusals); only superusers change them. A change is stored, then pushed to
//! every connected agent at once; agents that connect later get it on connect.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kenny_proto::frame::PolicyRule;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, BodyShape, JsonBody, Superuser};
use crate::policy::{Current, push_to_all, validate};
use crate::state::Fleet;
use crate::store::StoredPolicy;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyBody {
    rules: Vec<PolicyRule>,
}

impl BodyShape for PolicyBody {
    const SHAPE: &'static str =
        r#"{"rules": [{"id", "applies_to" (shell|powershell|command|path|any), "pattern", "reason"}]}"#;
}

pub(super) async fn show(State(fleet): State<Fleet>) -> Json<Value> {
    Json(render(&fleet.policy.current(), None))
}

pub(super) async fn replace(
    State(fleet): State<Fleet>,
    Superuser(who): Superuser,
    JsonBody(body): JsonBody<PolicyBody>,
) -> Result<Json<Value>, ApiError> {
    let policy = validate(body.rules).map_err(|e| ApiError::bad_request(format!("policy not changed: {e}")))?;
    let stored = StoredPolicy {
        rules_json: serde_json::to_string(&policy.rules).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("cannot encode rules: {e}"),
            )
        })?,
        updated_by: who.username.clone(),
        updated_at: fleet.clock.now(),
    };
    let saved = stored.clone();
    fleet.store.blocking(move |s| s.save_operator_policy(&saved)).await?;
    let current = Current {
        policy,
        updated_by: Some(stored.updated_by),
        updated_at: Some(stored.updated_at),
    };
    fleet.policy.set(current.clone());
    if let Some(cluster) = &fleet.cluster {
        cluster.publish_change(crate::cluster::changes::Change::Policy).await;
    }
    let (pushed, missed) = push_to_all(&fleet.registry, &current.policy);
    tracing::info!(by = %who.username, rules = current.policy.rules.len(), agents = pushed, "operator policy changed");
    if !missed.is_empty() {
        tracing::warn!(agents = ?missed, "operator policy not queued (outbox full); they get it when they reconnect");
    }
    let mut body = render(&current, Some(pushed));
    body["not_reached"] = json!(missed);
    Ok(Json(body))
}

fn render(current: &Current, pushed_to: Option<usize>) -> Value {
    let mut v = json!({
        "rules": current.policy.rules,
        "updated_by": current.updated_by,
        "updated_at": current.updated_at,
    });
    if let Some(n) = pushed_to {
        v["pushed_to"] = json!(n);
    }
    v
}
