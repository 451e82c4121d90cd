//! Dynamic client registration (RFC 7591) for public clients, and the redirect URI rule:
//! `https`, or `http` to this machine only (native apps listening on loopback).

use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::state::AppState;
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

/// Why a redirect URI is not acceptable, or `None` if it is.
pub fn redirect_uri_problem(uri: &str) -> Option<&'static str> {
    let Ok(url) = url::Url::parse(uri) else {
        return Some("is not an absolute URL");
    };
    if url.fragment().is_some() {
        return Some("must not have a fragment");
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Some("has no host"),
    };
    match url.scheme() {
        "https" => None,
        "http" if loopback => None,
        "http" => Some("must use https (plain http is allowed only to localhost, 127.0.0.1 or [::1])"),
        _ => Some("must use https"),
    }
}

/// Whether a redirect URI in an authorization request matches one the client
/// registered: exactly, or, for a loopback URI (`http` to `127.0.0.1`, `[::1]` or
/// `localhost`), with any port (RFC 8252 §7.3: a native app listens on whatever port is
/// free when it signs in). Everything but the port must still match: scheme, host,
/// path and query.
///
/// `localhost` is treated like the loopback addresses although RFC 8252 §8.3 advises
/// against it: the most common native MCP client registers `http://localhost/callback`
/// and signs in from an ephemeral port, browsers resolve `localhost` to loopback
/// themselves (RFC 6761 §6.3), and the port was never a boundary on the person's own
/// machine: PKCE binds the code to the app that started the flow, whatever process
/// listens on the port.
pub fn redirect_matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Ok(reg), Ok(req)) = (url::Url::parse(registered), url::Url::parse(requested)) else {
        return false;
    };
    let loopback = |u: &url::Url| match u.host() {
        Some(url::Host::Ipv4(ip)) => ip == std::net::Ipv4Addr::LOCALHOST,
        Some(url::Host::Ipv6(ip)) => ip == std::net::Ipv6Addr::LOCALHOST,
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    reg.scheme() == "http"
        && req.scheme() == "http"
        && loopback(&reg)
        && reg.host() == req.host()
        && reg.path() == req.path()
        && reg.query() == req.query()
        && req.fragment().is_none()
        && req.username().is_empty()
        && req.password().is_none()
}

fn invalid(error: &str, description: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

pub async fn register(
    State(state): State<Arc<AppState>>,
    ConnectInfo(addr): ConnectInfo<std::net::SocketAddr>,
    body: Result<Json<Registration>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let key = crate::ratelimit::client_key(addr.ip());
    if let Err(wait) = state
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
        .find_map(|u| redirect_uri_problem(u).map(|w| (u, w)))
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
    let now = state.clock.now();
    let stored = client.clone();
    if let Err(e) = state
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
            "client_id_issued_at": state.clock.now_utc().unix_timestamp(),
            "client_name": client.client_name,
            "redirect_uris": client.redirect_uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost/cb",
            "http://[::1]:9/cb",
        ] {
            assert_eq!(redirect_uri_problem(ok), None, "{ok}");
        }
        for bad in [
            "http://evil.example/cb",
            "https://x.example/cb#frag",
            "javascript:alert(1)",
            "/relative",
            "ftp://x/",
        ] {
            assert!(redirect_uri_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn loopback_redirect_uris_match_on_any_port_and_nothing_else_does() {
        for (registered, requested) in [
            ("http://127.0.0.1/callback", "http://127.0.0.1:53682/callback"),
            ("http://127.0.0.1:33418/", "http://127.0.0.1:60005/"),
            ("http://[::1]/cb", "http://[::1]:9/cb"),
            ("http://localhost/callback", "http://localhost:58135/callback"),
            ("http://LOCALHOST/callback", "http://localhost:1/callback"),
            ("http://127.0.0.1:1/cb?x=1", "http://127.0.0.1:2/cb?x=1"),
            (
                "https://claude.ai/api/mcp/auth_callback",
                "https://claude.ai/api/mcp/auth_callback",
            ),
        ] {
            assert!(redirect_matches(registered, requested), "{registered} ~ {requested}");
        }
        for (registered, requested) in [
            ("https://app.example/cb", "https://app.example:8443/cb"),
            ("http://127.0.0.1/callback", "http://127.0.0.1:9/other"),
            ("http://127.0.0.1/callback", "http://localhost:9/callback"),
            ("http://localhost/callback", "http://127.0.0.1:9/callback"),
            ("http://127.0.0.1/callback", "https://127.0.0.1:9/callback"),
            ("http://127.0.0.1/cb", "http://127.0.0.1:9/cb?extra=1"),
            ("http://127.0.0.1/cb", "http://127.0.0.1:9/cb#frag"),
            ("http://127.0.0.1/cb", "http://user@127.0.0.1:9/cb"),
            ("http://127.0.0.2/cb", "http://127.0.0.2:9/cb"),
            ("http://127.0.0.1/cb", "http://127.0.0.1.evil.example:9/cb"),
            ("http://localhost/cb", "http://localhost.evil.example:9/cb"),
            ("not a url", "not a url either"),
        ] {
            assert!(!redirect_matches(registered, requested), "{registered} !~ {requested}");
        }
    }
}
