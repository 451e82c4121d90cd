//! `/api/health/thresholds`: the numbers the health rules judge by. Everyone signed in
//! may read them (they explain every verdict); only superusers change them. A change
//! is stored, takes effect for the next snapshot at once, and every PC's latest
//! snapshot is judged again in the background.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::{ApiError, BodyShape, JsonBody, Superuser, patched};
use crate::health::Thresholds;
use crate::state::Fleet;
use crate::store::StoredThresholds;

/// Any subset of the thresholds' fields; the rest keep their current values.
#[derive(Debug, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct ThresholdsPatch(Map<String, Value>);

impl BodyShape for ThresholdsPatch {
    const SHAPE: &'static str = r#"{"<threshold>": <number>, "risky_ports": [<port>, ...], ...} with the fields GET /api/health/thresholds lists"#;
}

pub(super) async fn show(State(fleet): State<Fleet>) -> Json<Value> {
    Json(render(&fleet))
}

pub(super) async fn change(
    State(fleet): State<Fleet>,
    Superuser(who): Superuser,
    JsonBody(ThresholdsPatch(patch)): JsonBody<ThresholdsPatch>,
) -> Result<Json<Value>, ApiError> {
    let _one_at_a_time = fleet.health.changing.lock().await;
    let (current, _, _) = fleet.health.thresholds();
    let thresholds =
        merged(&current, patch).map_err(|e| ApiError::bad_request(format!("thresholds not changed: {e}")))?;
    let stored = StoredThresholds {
        thresholds_json: serde_json::to_string(&thresholds).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("cannot encode thresholds: {e}"),
            )
        })?,
        updated_by: who.username.clone(),
        updated_at: fleet.clock.now(),
    };
    let saved = stored.clone();
    fleet.store.blocking(move |s| s.save_health_thresholds(&saved)).await?;
    let mut version = 0;
    fleet.health.set_thresholds(stored, thresholds, |v| version = v);
    fleet.audit.rejudge(fleet.health.clone(), version).await;
    tracing::info!(by = %who.username, "health thresholds changed; judging every PC again");
    Ok(Json(render(&fleet)))
}

/// `patch` laid over `current`, checked field by field and as a whole.
fn merged(current: &Thresholds, patch: Map<String, Value>) -> Result<Thresholds, String> {
    let thresholds = patched(current, patch, "threshold")?;
    thresholds.validate()?;
    Ok(thresholds)
}

fn render(fleet: &Fleet) -> Value {
    let (thresholds, updated_by, updated_at) = fleet.health.thresholds();
    json!({
        "thresholds": thresholds.as_ref(),
        "defaults": Thresholds::default(),
        "updated_by": updated_by,
        "updated_at": updated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_keeps_what_it_does_not_name_and_is_checked_whole() {
        let base = Thresholds::default();
        let patch = |v: Value| merged(&base, v.as_object().unwrap().clone());
        let t = patch(json!({"disk_warn_percent": 50})).unwrap();
        assert_eq!(
            (t.disk_warn_percent, t.memory_warn_percent),
            (50, base.memory_warn_percent)
        );
        let e = patch(json!({"disk_warn_percen": 50})).unwrap_err();
        assert!(
            e.contains("unknown threshold `disk_warn_percen`") && e.contains("disk_warn_percent"),
            "{e}"
        );
        let e = patch(json!({"disk_warn_percent": "high"})).unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        let e = patch(json!({"disk_crit_percent": 20})).unwrap_err();
        assert!(
            e.contains("disk_warn_percent (90) is above disk_crit_percent (20)"),
            "{e}"
        );
    }
}
