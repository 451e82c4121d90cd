//! Bearer authentication in front of `/mcp` and `/api`: no principal, no access.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::ApiError;
use crate::state::{Accounts, Site};

pub(crate) async fn require_bearer(
    State(accounts): State<Accounts>,
    State(site): State<Site>,
    mut request: Request,
    next: Next,
) -> Response {
    let principal = match crate::auth::bearer(request.headers()) {
        Some(token) => accounts.auth.principal(token).await,
        None => None,
    };
    match principal {
        Some(mut p) => {
            p.client_addr = peer(&request);
            request.extensions_mut().insert(p);
            next.run(request).await
        }
        None => unauthorized(&site.base_url, request.headers().contains_key(header::AUTHORIZATION)),
    }
}

/// 401 with a challenge that tells the client what to send and where to discover how
/// to get a token (RFC 9728 `resource_metadata`).
pub(crate) fn unauthorized(base_url: &str, had_credentials: bool) -> Response {
    let metadata = crate::oauth::resource_metadata_url(base_url);
    let (challenge, message) = if had_credentials {
        (
            format!(
                r#"Bearer realm="kenny", resource_metadata="{metadata}", error="invalid_token", error_description="the token is unknown, revoked or expired""#
            ),
            "the bearer token is unknown, revoked or expired; sign in again or create a token with `kenny-server token create <user>`",
        )
    } else {
        (
            format!(r#"Bearer realm="kenny", resource_metadata="{metadata}""#),
            "authentication required: send Authorization: Bearer <token> (OAuth, or a personal access token)",
        )
    };
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    closing(response)
}

/// Marks a response sent before the request body was read: the server will not reuse
/// that connection, so it says so rather than let a keep-alive client send its next
/// request into a socket about to close (seen as "server disconnected").
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The MCP endpoint answers only for the hosts it was configured for (a guard against
/// DNS rebinding). The SDK enforces the same list; this check runs first so the
/// refusal says how to fix it.
pub(crate) async fn require_known_host(State(site): State<Site>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let allowed = crate::config::allowed_hosts(site.config.public_url.as_deref());
    if crate::config::host_allowed(host, &allowed) {
        return next.run(request).await;
    }
    let message = format!(
        "this server does not answer for host {host:?}; start kenny-server with --public-url set to the URL clients use (allowed now: {})",
        allowed.join(", ")
    );
    closing(ApiError::new(StatusCode::FORBIDDEN, "forbidden_host", message).into_response())
}

/// `/api`: a bearer token, or a dashboard session cookie. Cookie-authenticated requests
/// that change state must carry the session's CSRF token in `X-CSRF-Token`: a cookie
/// rides along on cross-site requests, a header set by our own page does not.
pub(crate) async fn require_principal(
    State(accounts): State<Accounts>,
    State(site): State<Site>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(token) = crate::auth::bearer(request.headers()) {
        // OAuth access tokens are issued for the MCP endpoint and nothing else.
        if token.starts_with(crate::oauth::ACCESS_TOKEN_PREFIX) {
            return unauthorized(&site.base_url, true);
        }
        return require_bearer(State(accounts), State(site), request, next).await;
    }
    let Some((principal, csrf)) = crate::session::signed_in(&accounts, request.headers()).await else {
        return unauthorized(&site.base_url, false);
    };
    let changes_state = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let header_token = request
        .headers()
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if changes_state && !crate::secrets::constant_time_eq(&csrf, header_token) {
        return closing(
            ApiError::new(
                StatusCode::FORBIDDEN,
                "csrf",
                "missing or wrong X-CSRF-Token header for a signed-in request; reload the page",
            )
            .into_response(),
        );
    }
    let mut principal = principal;
    principal.client_addr = peer(&request);
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// The peer address of the connection (behind a reverse proxy: the proxy's).
fn peer(request: &Request) -> Option<String> {
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip().to_string())
}

pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// Headers every response carries: pages cannot be framed (consent clickjacking), and
/// nothing kenny answers is cached or leaks its URL onward (pages embed CSRF tokens,
/// API answers can hold new secrets).
pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Dashboard pages set a stricter policy of their own (which also forbids framing).
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static("frame-ancestors 'none'"));
    // `same-origin`, not `no-referrer`: with the latter browsers send `Origin: null` on
    // form posts, which the same-origin check must refuse.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// Cross-site form posts are refused: a browser names the page a POST came from, and
/// sign-in, set-up and consent forms must come from this server's own pages.
pub(crate) fn same_origin(base_url: &str, headers: &axum::http::HeaderMap) -> bool {
    match headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        None => true,
        Some(origin) => {
            let ours = url::Url::parse(base_url).ok().map(|u| u.origin().ascii_serialization());
            ours.as_deref() == Some(origin)
                || url::Url::parse(origin).is_ok_and(|o| is_loopback_origin_of(&o, base_url))
        }
    }
}

/// On a loopback server, `localhost` and `127.0.0.1` are the same site for a person.
fn is_loopback_origin_of(origin: &url::Url, base_url: &str) -> bool {
    let Ok(base) = url::Url::parse(base_url) else {
        return false;
    };
    let loopback = |u: &url::Url| matches!(u.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    loopback(origin) && loopback(&base) && origin.port_or_known_default() == base.port_or_known_default()
}
