//! A credential under an approval rule changes nothing through `/api` with a bearer
//! token: otherwise the model holding the token could skip the approval its MCP calls
//! wait for by calling the matching route instead. Reads stay open; a person signed in
//! to the dashboard is not held (they are the one who approves).

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::principal::{CredentialKind, Principal};
use crate::state::Fleet;

pub(crate) async fn refuse_held_changes(State(fleet): State<Fleet>, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    let Some(who) = request.extensions().get::<Principal>().cloned() else {
        return next.run(request).await;
    };
    if !matches!(who.credential_kind, CredentialKind::Pat | CredentialKind::OAuth) {
        return next.run(request).await;
    }
    match crate::approvals::required(&fleet, &who).await {
        Ok(None) => next.run(request).await,
        Ok(Some(_)) => ApiError::new(
            StatusCode::FORBIDDEN,
            "approval_required",
            format!(
                "an operator requires approval for {}'s changes, so this token changes nothing through /api; \
                 make the change over MCP, where it waits for approval, or in the dashboard",
                who.username
            ),
        )
        .into_response(),
        Err(failure) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", failure.message).into_response(),
    }
}
