//! Every state-changing `/api` request is audited: who (user and credential), from
//! where, which action (method and route) on which path, and how it ended. Forwarded
//! tool calls get their own rows on top, from the forwarder.

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use crate::principal::Principal;
use crate::state::Fleet;

pub(crate) async fn audit_actions(State(fleet): State<Fleet>, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    let who = request.extensions().get::<Principal>().cloned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_else(|| "(unknown route)".into());
    let action = format!("{} {route}", request.method());
    let path = request.uri().path().to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let Some(who) = who else {
        return response;
    };
    let status = response.status();
    let mut row = crate::store::AuditRow {
        agent_id: agent_in_path(&path),
        duration_ms: crate::forward::millis(started.elapsed()),
        ..crate::forward::audit_row(&fleet.clock, &who, &action, None)
    };
    row.target = Some(path);
    if !status.is_success() {
        row.outcome = if status.is_client_error() { "refused" } else { "error" };
        row.error_code = Some(status.as_u16().to_string());
    }
    fleet.audit.record(row).await;
    response
}

/// `/api/agent/{id}/...` and `/api/agents/{id}/...` act on that PC.
fn agent_in_path(path: &str) -> Option<String> {
    let mut parts = path.trim_start_matches('/').split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("api"), Some("agent" | "agents"), Some(id)) if !id.is_empty() => Some(id.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_on_a_pc_name_it() {
        assert_eq!(agent_in_path("/api/agent/pc-a/refresh").as_deref(), Some("pc-a"));
        assert_eq!(agent_in_path("/api/agents/den-pc/update").as_deref(), Some("den-pc"));
        assert_eq!(agent_in_path("/api/users/3"), None);
        assert_eq!(agent_in_path("/api/agents"), None);
    }
}
