//! `/api`: the JSON HTTP API. Handlers parse, delegate and map errors; nothing else.

mod agents;
mod audit;
mod error;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

pub use error::ApiError;

/// Routes that need a principal (mounted behind the bearer guard).
pub fn authenticated() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/audit", get(audit::list))
        .route("/api/agents", get(agents::list))
}

/// Routes with their own credential check (the agent's enrollment token).
pub fn public() -> Router<Arc<AppState>> {
    Router::new().route("/api/agents/{id}/enroll", post(agents::enroll))
}
