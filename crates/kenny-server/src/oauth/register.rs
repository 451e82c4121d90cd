//! Dynamic client registration (RFC 7591) for public clients, and the redirect URI rule:
//! `https`, or `http` to this machine only (native apps listening on loopback).

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::state::OAuth;
use crate::store::OAuthClient;

const MAX_REDIRECT_URIS: usize = 10;
const MAX_REDIRECT_URI_LEN: usize = 2000;

#[derive(Deserialize)]
pub struct Registration {
    #[serde(default)]
    redirect_uris: Vec<String>,
    client_name: Option<String>,
    token_endpoint_auth_method: Option<String>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
}

fn invalid(error: &str, description: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

pub async fn register(
    State(oauth): State<OAuth>,
    ConnectInfo(addr): ConnectInfo<std::net::SocketAddr>,
    body: Result<Json<Registration>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let key = crate::ratelimit::client_key(addr.ip());
    if let Err(wait) = oauth
        .registration_limiter
        .attempt(&[key.as_str()], std::time::Instant::now())
    {
        let mut resp = (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({"error": "too_many_requests", "error_description": "too many client registrations from this address"})),
        )
            .into_response();
        resp.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(wait.as_secs().max(1)),
        );
        return resp;
    }
    let Json(reg) = match body {
        Ok(b) => b,
        Err(e) => {
            return invalid(
                "invalid_client_metadata",
                format!("the body must be client metadata JSON: {e}"),
            );
        }
    };
    if reg.redirect_uris.is_empty() || reg.redirect_uris.len() > MAX_REDIRECT_URIS {
        return invalid(
            "invalid_redirect_uri",
            format!("give 1 to {MAX_REDIRECT_URIS} redirect_uris"),
        );
    }
    if reg.redirect_uris.iter().any(|u| u.len() > MAX_REDIRECT_URI_LEN) {
        return invalid(
            "invalid_redirect_uri",
            format!("redirect URIs are at most {MAX_REDIRECT_URI_LEN} characters"),
        );
    }
    if let Some((uri, why)) = reg
        .redirect_uris
        .iter()
        .find_map(|u| super::redirect_uris::problem(u).map(|w| (u, w)))
    {
        return invalid("invalid_redirect_uri", format!("redirect URI {uri:?} {why}"));
    }
    if reg.token_endpoint_auth_method.as_deref().is_some_and(|m| m != "none") {
        return invalid(
            "invalid_client_metadata",
            "only public clients are supported: token_endpoint_auth_method must be \"none\"".into(),
        );
    }
    if reg
        .grant_types
        .iter()
        .flatten()
        .any(|g| g != "authorization_code" && g != "refresh_token")
    {
        return invalid(
            "invalid_client_metadata",
            "grant_types may be authorization_code and refresh_token".into(),
        );
    }
    if reg.response_types.iter().flatten().any(|r| r != "code") {
        return invalid("invalid_client_metadata", "response_types may only be code".into());
    }
    let client = OAuthClient {
        client_id: crate::secrets::new_token("kenny_client_"),
        client_name: reg.client_name.map(|n| n.chars().take(100).collect()),
        redirect_uris: reg.redirect_uris,
    };
    let now = oauth.clock.now();
    let stored = client.clone();
    if let Err(e) = oauth
        .store
        .blocking(move |s| s.create_oauth_client(&stored, &now))
        .await
    {
        tracing::error!(error = %e, "client registration failed");
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "server_error"})),
        )
            .into_response();
    }
    tracing::info!(client = %client.client_id, name = ?client.client_name, "OAuth client registered");
    (
        StatusCode::CREATED,
        Json(json!({
            "client_id": client.client_id,
            "client_id_issued_at": oauth.clock.now_utc().unix_timestamp(),
            "client_name": client.client_name,
            "redirect_uris": client.redirect_uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        })),
    )
        .into_response()
}
