//! kenny's own OAuth 2.1 authorization server for the MCP endpoint: metadata (RFC 9728,
//! RFC 8414), dynamic client registration (RFC 7591), authorization with PKCE and
//! resource indicators (RFC 8707, RFC 9207), tokens that rotate, revocation (RFC 7009).

mod authorize;
pub mod cimd;
mod metadata;
pub mod pkce;
pub mod redirect_uris;
pub mod register;
mod token;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

pub use crate::config::OAuthSettings;
pub use crate::secrets::{ACCESS_TOKEN_PREFIX, CODE_PREFIX, REFRESH_TOKEN_PREFIX};
pub const SCOPE: &str = "mcp";
/// Client metadata is small; a registration body larger than this is refused.
const MAX_REGISTRATION_BYTES: usize = 16 * 1024;

pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::authorization_server),
        )
        .route(
            "/oauth/register",
            post(register::register).layer(axum::extract::DefaultBodyLimit::max(MAX_REGISTRATION_BYTES)),
        )
        .route("/oauth/authorize", get(authorize::show).post(authorize::decide))
        .route("/oauth/token", post(token::token))
        .route("/oauth/revoke", post(token::revoke))
}

/// The MCP resource this server protects: what OAuth tokens must be issued for.
pub fn resource_url(base: &str) -> String {
    format!("{base}/mcp")
}

pub fn resource_metadata_url(base: &str) -> String {
    format!("{base}/.well-known/oauth-protected-resource/mcp")
}
