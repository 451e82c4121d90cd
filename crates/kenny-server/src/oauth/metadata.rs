//! Discovery documents: protected resource metadata (RFC 9728) and authorization server
//! metadata (RFC 8414).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::{SCOPE, resource_url};
use crate::state::OAuth;

pub(super) async fn protected_resource(State(oauth): State<OAuth>) -> Json<Value> {
    let base: &str = &oauth.base_url;
    Json(json!({
        "resource": resource_url(base),
        "authorization_servers": [base],
        "bearer_methods_supported": ["header"],
        "scopes_supported": [SCOPE],
        "resource_name": "kenny",
    }))
}

pub(super) async fn authorization_server(State(oauth): State<OAuth>) -> Json<Value> {
    let base: &str = &oauth.base_url;
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "registration_endpoint": format!("{base}/oauth/register"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": [SCOPE],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
    }))
}
