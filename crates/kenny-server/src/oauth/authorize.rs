//! `/oauth/authorize`: a signed-in person first (nothing about the client is looked up
//! or fetched for anyone else), then who is asking (client and redirect URI, checked
//! before anything is redirected), what they ask for (PKCE S256, the MCP resource), a
//! consent page that names the client by its id and where it sends the person back,
//! and on approval a short-lived single-use code.

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::{CODE_PREFIX, SCOPE, pkce, resource_url};
use crate::principal::Principal;
use crate::state::{Accounts, OAuth};
use crate::store::{CodeGrant, OAuthClient};
use crate::web::html::page;

#[derive(Debug, Clone, Deserialize, Default)]
pub(super) struct Params {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    state: Option<String>,
    resource: Option<String>,
    scope: Option<String>,
    /// Consent form only.
    csrf: Option<String>,
    decision: Option<String>,
}

/// A request whose client and redirect URI are known good: errors may now go back to
/// the client by redirect.
struct Checked {
    client: OAuthClient,
    redirect_uri: String,
    code_challenge: String,
    resource: String,
    scope: Option<String>,
    state: Option<String>,
}

pub(super) async fn show(
    State(oauth): State<OAuth>,
    State(accounts): State<Accounts>,
    headers: HeaderMap,
    Query(p): Query<Params>,
) -> Response {
    // Signed in first: nothing about the client is looked up, let alone fetched from
    // the network (a client metadata document), for someone who has not signed in.
    let Some((who, csrf)) = crate::web::signed_in(&accounts, &headers).await else {
        let back = format!("/oauth/authorize?{}", query_string(&p));
        let next: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
        return Redirect::to(&format!("/login?next={next}")).into_response();
    };
    let checked = match check(&oauth, &p).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    consent_page(&checked, &who, &csrf)
}

pub(super) async fn decide(
    State(oauth): State<OAuth>,
    State(accounts): State<Accounts>,
    headers: HeaderMap,
    Form(p): Form<Params>,
) -> Response {
    if !crate::guard::same_origin(&oauth.base_url, &headers) {
        return error_page(
            StatusCode::FORBIDDEN,
            "This consent form was not submitted from kenny's own page; nothing was granted.",
        );
    }
    let Some((who, csrf)) = crate::web::signed_in(&accounts, &headers).await else {
        return error_page(
            StatusCode::UNAUTHORIZED,
            "Your sign-in has ended. Start the connection again from your app.",
        );
    };
    if !p
        .csrf
        .as_deref()
        .is_some_and(|c| crate::secrets::constant_time_eq(c, &csrf))
    {
        return error_page(
            StatusCode::FORBIDDEN,
            "This consent form was not submitted from kenny's own page; nothing was granted.",
        );
    }
    let checked = match check(&oauth, &p).await {
        Ok(c) => c,
        Err(resp) => return resp,
    };
    if p.decision.as_deref() != Some("approve") {
        return redirect_error(&oauth, &checked, "access_denied", "the user declined");
    }
    let code = crate::secrets::new_token(CODE_PREFIX);
    let expires_at = crate::clock::format(oauth.clock.now_utc() + oauth.settings.code_ttl);
    let grant = CodeGrant {
        client_id: checked.client.client_id.clone(),
        user_id: who.user_id,
        redirect_uri: checked.redirect_uri.clone(),
        code_challenge: checked.code_challenge.clone(),
        resource: checked.resource.clone(),
        scope: checked.scope.clone(),
        family: uuid::Uuid::new_v4().to_string(),
        expires_at,
    };
    let hash = crate::secrets::token_hash(&code);
    if let Err(e) = oauth.store.blocking(move |s| s.create_code(&hash, &grant)).await {
        tracing::error!(error = %e, "storing an authorization code failed");
        return redirect_error(&oauth, &checked, "server_error", "the server could not store the grant");
    }
    tracing::info!(user = %who.username, client = %checked.client.client_id, "OAuth grant approved");
    redirect_with(&oauth, &checked, &[("code", &code)])
}

async fn check(oauth: &OAuth, p: &Params) -> Result<Checked, Response> {
    let Some(client_id) = p.client_id.as_deref().filter(|c| !c.is_empty()) else {
        return Err(error_page(
            StatusCode::BAD_REQUEST,
            "The request names no client (client_id is missing).",
        ));
    };
    let client = if super::cimd::is_document_url(client_id) {
        match oauth.client_documents.client(client_id).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(client = %client_id, error = %e, "client metadata document refused");
                return Err(error_page(
                    StatusCode::BAD_REQUEST,
                    "This app's client metadata document could not be used: it must be served over https \
                     from a public address as valid client metadata.",
                ));
            }
        }
    } else {
        let id = client_id.to_owned();
        match oauth.store.blocking(move |s| s.oauth_client(&id)).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(error_page(
                    StatusCode::BAD_REQUEST,
                    "This app is not registered with kenny (unknown client_id).",
                ));
            }
            Err(e) => {
                tracing::error!(error = %e, "client lookup failed");
                return Err(error_page(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "The server could not look up this app.",
                ));
            }
        }
    };
    // Never redirect to a URI the client did not register: an exact match, or a
    // loopback URI that differs only in its port (RFC 8252 §7.3).
    let Some(redirect_uri) = p.redirect_uri.clone().filter(|r| {
        client
            .redirect_uris
            .iter()
            .any(|registered| super::redirect_uris::matches(registered, r))
    }) else {
        return Err(error_page(
            StatusCode::BAD_REQUEST,
            "The redirect URI does not match one this app registered, so kenny will not send you there.",
        ));
    };
    let partial = Checked {
        client,
        redirect_uri,
        code_challenge: String::new(),
        resource: resource_url(&oauth.base_url),
        scope: p.scope.clone(),
        state: p.state.clone(),
    };
    if p.response_type.as_deref() != Some("code") {
        return Err(refuse_request(
            "unsupported_response_type",
            "response_type must be code",
        ));
    }
    let Some(challenge) = p.code_challenge.as_deref() else {
        return Err(refuse_request(
            "invalid_request",
            "PKCE is required: send code_challenge (S256)",
        ));
    };
    if p.code_challenge_method.as_deref() != Some("S256") {
        return Err(refuse_request("invalid_request", "code_challenge_method must be S256"));
    }
    if !pkce::valid_challenge(challenge) {
        return Err(refuse_request(
            "invalid_request",
            "code_challenge is not an S256 challenge",
        ));
    }
    if let Some(resource) = p.resource.as_deref()
        && resource.trim_end_matches('/') != partial.resource
    {
        return Err(refuse_request(
            "invalid_target",
            "this server issues tokens only for its MCP endpoint",
        ));
    }
    if let Some(scope) = p.scope.as_deref()
        && scope.split(' ').any(|s| !s.is_empty() && s != SCOPE)
    {
        return Err(refuse_request("invalid_scope", "the only scope is mcp"));
    }
    Ok(Checked {
        code_challenge: challenge.to_owned(),
        ..partial
    })
}

fn consent_page(c: &Checked, who: &Principal, csrf: &str) -> Response {
    let reach = match &who.hosts {
        None => "every PC in the fleet".to_owned(),
        Some(h) if h.is_empty() => "no PC yet (none is assigned to you)".to_owned(),
        Some(h) => format!("the PCs assigned to you ({})", h.join(", ")),
    };
    let body = html! {
        div class="card" {
            h1 { "Allow " (app_title(&c.client)) " to use kenny?" }
            p {
                "It asks to act as " strong { (who.username) } " through kenny's MCP endpoint: list PCs and run tools \
                 (shell commands, files, diagnostics) on " (reach) "."
            }
            dl class="consent-facts" {
                dt { "App" }
                dd id="consent-client" {
                    code { (c.client.client_id) }
                    @if super::cimd::is_document_url(&c.client.client_id) {
                        " (its published metadata)"
                    } @else {
                        " (registered with this server)"
                    }
                }
                dt { "Sends you back to" }
                dd id="consent-redirect" {
                    code { (redirect_target(&c.redirect_uri)) }
                    @if is_loopback_redirect(&c.redirect_uri) { " (an app on your own computer)" }
                }
            }
            p class="muted" {
                "The app chose its name itself; the address above and the place it sends you back to \
                 are what identify it. Approve only if you started this from that app. \
                 You can revoke access at any time."
            }
            form method="post" action="/oauth/authorize" {
                input type="hidden" name="response_type" value="code";
                input type="hidden" name="client_id" value=(c.client.client_id);
                input type="hidden" name="redirect_uri" value=(c.redirect_uri);
                input type="hidden" name="code_challenge" value=(c.code_challenge);
                input type="hidden" name="code_challenge_method" value="S256";
                input type="hidden" name="resource" value=(c.resource);
                @if let Some(state) = &c.state { input type="hidden" name="state" value=(state); }
                @if let Some(scope) = &c.scope { input type="hidden" name="scope" value=(scope); }
                input type="hidden" name="csrf" value=(csrf);
                button name="decision" value="approve" { "Allow" }
                button name="decision" value="deny"
                    style="background:transparent;color:inherit;border:1px solid var(--line)" { "Deny" }
            }
        }
    };
    page("Allow access", body).into_response()
}

/// How the consent page names an app: its self-chosen name, said to be that, or that
/// it gave none.
fn app_title(client: &OAuthClient) -> String {
    match client.client_name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => format!("an app calling itself \u{201c}{name}\u{201d}"),
        None => "an unnamed app".to_owned(),
    }
}

/// The scheme, host and port a redirect URI sends the browser to.
fn redirect_target(uri: &str) -> String {
    url::Url::parse(uri)
        .ok()
        .map(|u| {
            let host = u.host_str().unwrap_or_default();
            match u.port() {
                Some(port) => format!("{}://{host}:{port}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        })
        .unwrap_or_else(|| uri.to_owned())
}

fn is_loopback_redirect(uri: &str) -> bool {
    url::Url::parse(uri).is_ok_and(|u| {
        u.scheme() == "http"
            && match u.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                Some(url::Host::Domain(d)) => d == "localhost",
                None => false,
            }
    })
}

fn redirect_with(oauth: &OAuth, c: &Checked, params: &[(&str, &str)]) -> Response {
    let Ok(mut url) = url::Url::parse(&c.redirect_uri) else {
        return error_page(StatusCode::BAD_REQUEST, "The registered redirect URI is not a URL.");
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
        if let Some(s) = &c.state {
            q.append_pair("state", s);
        }
        q.append_pair("iss", &oauth.base_url);
    }
    Redirect::to(url.as_str()).into_response()
}

/// A malformed request is answered on kenny's own page rather than by redirect: sending
/// people on to a URI that any self-registered client chose, before they have even
/// signed in, would make kenny an open redirector (RFC 9700 §4.11).
fn refuse_request(error: &str, description: &str) -> Response {
    error_page(
        StatusCode::BAD_REQUEST,
        &format!("The app sent an invalid request: {description} ({error})."),
    )
}

fn redirect_error(oauth: &OAuth, c: &Checked, error: &str, description: &str) -> Response {
    redirect_with(oauth, c, &[("error", error), ("error_description", description)])
}

fn error_page(status: StatusCode, message: &str) -> Response {
    let body = html! {
        div class="card" {
            h1 { "This connection request cannot continue" }
            p { (message) }
        }
    };
    (status, page("Cannot connect", body)).into_response()
}

fn query_string(p: &Params) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    let pairs = [
        ("response_type", &p.response_type),
        ("client_id", &p.client_id),
        ("redirect_uri", &p.redirect_uri),
        ("code_challenge", &p.code_challenge),
        ("code_challenge_method", &p.code_challenge_method),
        ("state", &p.state),
        ("resource", &p.resource),
        ("scope", &p.scope),
    ];
    for (k, v) in pairs {
        if let Some(v) = v {
            s.append_pair(k, v);
        }
    }
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::{CredentialKind, Role};

    #[tokio::test]
    async fn the_consent_page_shows_what_a_client_chose_as_text() {
        let evil = "<script>alert(1)</script>\"";
        let shown = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;";
        let c = Checked {
            client: OAuthClient {
                client_id: format!("kenny_client_{evil}"),
                client_name: Some(evil.into()),
                redirect_uris: Vec::new(),
            },
            redirect_uri: format!("http://127.0.0.1:9/cb?x={evil}"),
            code_challenge: "c".into(),
            resource: "http://127.0.0.1:7420/mcp".into(),
            scope: Some(evil.into()),
            state: Some(evil.into()),
        };
        let who = Principal {
            user_id: 1,
            username: evil.into(),
            role: Role::User,
            hosts: Some(Vec::new()),
            credential_kind: CredentialKind::Session,
            credential_id: "1".into(),
            client_addr: None,
        };
        let page = consent_page(&c, &who, evil);
        let bytes = axum::body::to_bytes(page.into_body(), 1 << 20).await.unwrap();
        let html = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains(&format!("calling itself \u{201c}{shown}\u{201d} to use kenny?")));
        assert!(html.contains(&format!("act as <strong>{shown}</strong>")));
        assert!(html.contains(&format!(
            "<code>kenny_client_{shown}</code> (registered with this server)"
        )));
        assert!(html.contains("<code>http://127.0.0.1:9</code> (an app on your own computer)"));
        for (name, value) in [
            ("client_id", format!("kenny_client_{shown}")),
            ("redirect_uri", format!("http://127.0.0.1:9/cb?x={shown}")),
            ("state", shown.to_owned()),
            ("scope", shown.to_owned()),
            ("csrf", shown.to_owned()),
        ] {
            let field = format!("<input type=\"hidden\" name=\"{name}\" value=\"{value}\">");
            assert!(html.contains(&field), "{field} in {html}");
        }
    }

    #[tokio::test]
    async fn an_error_page_shows_the_reason_as_text() {
        let page = refuse_request("invalid_request", "<b>\"bad\"</b>");
        assert_eq!(page.status(), StatusCode::BAD_REQUEST);
        let bytes = axum::body::to_bytes(page.into_body(), 1 << 20).await.unwrap();
        let html = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(
            html.contains(
                "<p>The app sent an invalid request: &lt;b&gt;&quot;bad&quot;&lt;/b&gt; (invalid_request).</p>"
            )
        );
    }
}
