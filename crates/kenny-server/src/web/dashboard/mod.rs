//! The signed-in dashboard: today, fleet, host, alerts, audit, approvals, updates, account and admin pages. Server-rendered HTML in
//! one shared layout, with one stylesheet and one script served from this binary (no
//! build step). Pages are maud `html!` templates, which escape every value spliced in
//! (nothing here is pre-escaped but maud's own `DOCTYPE`); the script only ever sets
//! `textContent`, and sends the session's CSRF token (from `<meta name="csrf-token">`)
//! on every request that changes something.

mod account;
mod admin;
mod alerts;
mod approvals;
mod audit;
mod changes;
mod charts;
mod fleet;
mod host;
mod household;
mod install_links;
mod today;
mod updates;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, html};

use crate::principal::{Principal, Role};
use crate::state::{Accounts, AppState};

const STYLESHEET: &str = include_str!("../assets/dashboard.css");
const SCRIPT: &str = include_str!("../assets/dashboard.js");
const CHAT_SCRIPT: &str = include_str!("../assets/chat.js");

/// Dashboard pages load nothing from elsewhere and run only our own script file: no
/// inline script, no inline style, no framing.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(fleet::page))
        .route("/today", get(today::page))
        .route("/alerts", get(alerts::page))
        .route("/hosts/{id}", get(host::page))
        .route("/audit", get(audit::page))
        .route("/approvals", get(approvals::page))
        .route("/updates", get(updates::page))
        .route("/admin", get(admin::page))
        .route("/account", get(account::page))
        .route("/assets/dashboard.css", get(stylesheet))
        .route("/assets/dashboard.js", get(script))
        .route("/assets/chat.js", get(chat_script))
}

async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", STYLESHEET)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn chat_script() -> Response {
    asset("text/javascript; charset=utf-8", CHAT_SCRIPT)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            // Assets change only with the binary; a short cache keeps upgrades visible.
            (header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=300")),
        ],
        body,
    )
        .into_response()
}

/// The person looking at a page, or where to send them instead (set-up, sign-in).
pub(super) async fn viewer(
    accounts: &Accounts,
    headers: &HeaderMap,
    path: &str,
) -> Result<(Principal, String), Response> {
    if super::needs_setup(accounts).await {
        return Err(Redirect::to("/setup").into_response());
    }
    match super::signed_in(accounts, headers).await {
        Some(v) => Ok(v),
        None if path == "/" => Err(Redirect::to("/login").into_response()),
        None => {
            let next = super::safe_next(Some(path));
            Err(Redirect::to(&format!("/login?next={}", url_escape(&next))).into_response())
        }
    }
}

fn url_escape(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    Today,
    Fleet,
    Alerts,
    Audit,
    Approvals,
    Updates,
    Account,
    Admin,
    None,
}

/// The shared layout: nav bar, theme toggle, sign-out, then `body`.
pub(super) fn layout(who: &Principal, csrf: &str, title: &str, active: Nav, body: Markup) -> Response {
    let link = |href: &str, label: &str, nav: Nav| {
        html! { a href=(href) aria-current=[(nav == active).then_some("page")] { (label) } }
    };
    let html = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="csrf-token" content=(csrf);
                title { (title) " · kenny" }
                link rel="stylesheet" href="/assets/dashboard.css";
                script src="/assets/dashboard.js" {}
                script src="/assets/chat.js" defer {}
            }
            body {
                header class="topbar" {
                    a class="brand" href="/" { "kenny" }
                    nav class="mainnav" aria-label="Main" {
                        (link("/today", "Today", Nav::Today))
                        (link("/", "Fleet", Nav::Fleet))
                        (link("/alerts", "Alerts", Nav::Alerts))
                        (link("/audit", "Audit", Nav::Audit))
                        @if who.role >= Role::Operator {
                            (link("/approvals", "Approvals", Nav::Approvals))
                            (link("/updates", "Updates", Nav::Updates))
                        }
                        (link("/account", "Account", Nav::Account))
                        @if who.role == Role::Superuser {
                            (link("/admin", "Admin", Nav::Admin))
                        }
                    }
                    div class="account" {
                        span class="who" { "Signed in as " strong { (who.username) } " (" (who.role.as_str()) ")" }
                        button type="button" id="theme-toggle" class="ghost"
                            aria-label="Switch between light and dark theme" { "Theme" }
                        form method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(csrf);
                            button class="ghost" { "Sign out" }
                        }
                    }
                }
                main class="dash" { (body) }
                footer class="site-footer" {
                    "kenny-server " (crate::VERSION) " · build " (crate::BUILD)
                }
            }
        }
    };
    let mut response = html_response(StatusCode::OK, html.into_string());
    response
        .headers_mut()
        .insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    response
}

fn html_response(status: StatusCode, html: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        html,
    )
        .into_response()
}

/// A page that says what is wrong, in the layout, with a status.
pub(super) fn message_page(who: &Principal, csrf: &str, status: StatusCode, title: &str, message: &str) -> Response {
    let body = html! {
        section class="card narrow" {
            h1 { (title) }
            p { (message) }
            p { a href="/" { "Back to the fleet" } }
        }
    };
    let mut r = layout(who, csrf, title, Nav::None, body);
    *r.status_mut() = status;
    r
}

/// An RFC 3339 time as a `<time>` element: UTC text that the script turns into local,
/// relative time.
pub(super) fn time_el(t: Option<&str>) -> Markup {
    html! {
        @match t {
            Some(t) => time datetime=(t) { (short_time(t)) },
            None => span class="muted" { "never" },
        }
    }
}

/// `2026-01-02T03:04:05.678Z` → `2026-01-02 03:04 UTC`; anything else as it is.
pub(super) fn short_time(t: &str) -> String {
    match (t.get(..10), t.get(11..16)) {
        (Some(d), Some(hm)) if t.as_bytes().get(10) == Some(&b'T') => format!("{d} {hm} UTC"),
        _ => t.to_owned(),
    }
}

/// A status badge (`ok`, `warn`, `crit`, `unknown`, or an audit outcome).
pub(super) fn badge(status: &str) -> Markup {
    // The class is cut to a safe token even though maud escapes it: an outcome is free
    // text and must not add classes the stylesheet gives meaning to.
    let class: String = status
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    html! { span class={ "badge st-" (class) } { (status) } }
}

/// Online or offline, as the fleet and host pages show it.
pub(super) fn state_badge(online: bool) -> Markup {
    html! {
        @if online {
            span class="state on" { "Online" }
        } @else {
            span class="state off" { "Offline" }
        }
    }
}

/// The chat panel's place. The chat script fills it; until then it says so.
pub(super) fn chat_panel(agent_id: Option<&str>) -> Markup {
    html! {
        aside id="chat" class="card chat" data-agent=(agent_id.unwrap_or("")) aria-label="Chat" {
            p class="muted" { "Chat loads here" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::CredentialKind;

    fn who(name: &str, role: Role) -> Principal {
        Principal {
            user_id: 1,
            username: name.into(),
            role,
            hosts: None,
            credential_kind: CredentialKind::Session,
            credential_id: "1".into(),
            client_addr: None,
        }
    }

    async fn body_of(r: Response) -> String {
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn layout_escapes_and_shows_admin_only_to_superusers() {
        let r = layout(
            &who("<b>x", Role::Operator),
            "t\"ok",
            "A<b>",
            Nav::Fleet,
            html! { p { "body" } },
        );
        assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
        let html = body_of(r).await;
        assert!(html.contains("Signed in as <strong>&lt;b&gt;x</strong> (operator)"));
        assert!(html.contains("<meta name=\"csrf-token\" content=\"t&quot;ok\">"));
        assert!(html.contains("<title>A&lt;b&gt; · kenny</title>"));
        assert!(html.contains("<a href=\"/\" aria-current=\"page\">Fleet</a>"));
        assert!(!html.contains("/admin"));
        assert!(!html.contains("<script>"), "no inline script");
        let html = body_of(layout(&who("root", Role::Superuser), "t", "A", Nav::Admin, html! {})).await;
        assert!(html.contains("<a href=\"/admin\" aria-current=\"page\">Admin</a>"));
    }

    #[test]
    fn small_helpers() {
        assert_eq!(short_time("2026-01-02T03:04:05.678Z"), "2026-01-02 03:04 UTC");
        assert_eq!(short_time("yesterday"), "yesterday");
        assert_eq!(badge("crit").into_string(), "<span class=\"badge st-crit\">crit</span>");
        assert_eq!(
            badge("a\"b<").into_string(),
            "<span class=\"badge st-ab\">a&quot;b&lt;</span>"
        );
        assert!(
            chat_panel(Some("pc-\"a"))
                .into_string()
                .contains("data-agent=\"pc-&quot;a\"")
        );
        assert!(time_el(None).into_string().contains("never"));
    }
}
