//! The dashboard: sign-in pages (first-run set-up, sign in, sign out) here, the
//! signed-in pages in [`dashboard`]. Server-rendered HTML (maud, escaped by default);
//! forms carry CSRF tokens.

pub(crate) mod cookies;
mod dashboard;
pub(crate) mod html;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;

use self::html::page;
use crate::accounts::{Attempt, ClientInfo, LoginError, SESSION_LIFETIME};
use crate::state::{Accounts, AppState, Site};

const FORM_TOKEN_LIFETIME_SECS: u64 = 3600;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .merge(dashboard::routes())
        .route("/setup", get(setup_form).post(setup_submit))
        .route("/login", get(login_form).post(login_submit))
        .route("/logout", post(logout))
}

pub(crate) use crate::session::signed_in;

fn secure(site: &Site) -> bool {
    site.config
        .public_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"))
}

/// Only same-site paths: `/x`, never `//host`, `/\host` or an absolute URL, so `next`
/// cannot be used to send someone elsewhere after signing in.
pub(crate) fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/?&=%._~-+:,".contains(&b)) =>
        {
            n.to_owned()
        }
        _ => "/".to_owned(),
    }
}

async fn needs_setup(accounts: &Accounts) -> bool {
    accounts
        .store
        .blocking(|s| s.count_users())
        .await
        .map(|n| n == 0)
        .unwrap_or(false)
}

// ---- first-run set-up --------------------------------------------------------------

#[derive(Deserialize)]
struct SetupForm {
    username: String,
    password: String,
    confirm: String,
    form_token: String,
}

async fn setup_form(State(accounts): State<Accounts>, State(site): State<Site>) -> Response {
    if !needs_setup(&accounts).await {
        return Redirect::to("/login").into_response();
    }
    with_form_token(&site, |token| setup_page(token, None, StatusCode::OK))
}

fn setup_page(form_token: &str, error: Option<&str>, status: StatusCode) -> Response {
    let body = html! {
        div class="card" {
            h1 { "Welcome to kenny" }
            p class="muted" { "Create the first superuser. This page is available only until an account exists." }
            (error_line(error))
            form method="post" action="/setup" {
                input type="hidden" name="form_token" value=(form_token);
                label for="username" { "User name" }
                input id="username" name="username" autocomplete="username" required;
                label for="password" { "Password (at least 8 characters)" }
                input id="password" name="password" type="password" autocomplete="new-password" required minlength="8";
                label for="confirm" { "Repeat the password" }
                input id="confirm" name="confirm" type="password" autocomplete="new-password" required;
                button { "Create superuser" }
            }
        }
    };
    (status, page("Set up", body)).into_response()
}

/// What went wrong with the form just sent, announced to screen readers; nothing if
/// nothing did.
fn error_line(error: Option<&str>) -> Markup {
    html! {
        @if let Some(e) = error {
            p class="error" role="alert" { (e) }
        }
    }
}

async fn setup_submit(
    State(accounts): State<Accounts>,
    State(site): State<Site>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<SetupForm>,
) -> Response {
    if !crate::guard::same_origin(&site.base_url, &headers) {
        return forbidden_form();
    }
    if !form_token_ok(&headers, &form.form_token) {
        return forbidden_form();
    }
    if form.password != form.confirm {
        return setup_page(
            &form.form_token,
            Some("The two passwords differ."),
            StatusCode::BAD_REQUEST,
        );
    }
    let user_id = match crate::accounts::create_first_superuser(
        &accounts.store,
        &accounts.clock,
        form.username.trim(),
        &form.password,
    )
    .await
    {
        Ok(id) => id,
        Err(e) => return setup_page(&form.form_token, Some(&e.to_string()), StatusCode::BAD_REQUEST),
    };
    match crate::accounts::open_session(&accounts.store, &accounts.clock, user_id, client_info(addr, &headers)).await {
        Ok(issued) => {
            let mut resp = signed_in_redirect(&site, &issued.token, "/");
            remember_device(&accounts, &site, &mut resp, user_id);
            resp
        }
        Err(e) => server_error(&e.to_string()),
    }
}

// ---- sign in / out -----------------------------------------------------------------

#[derive(Deserialize)]
struct NextParam {
    next: Option<String>,
}

#[derive(Deserialize)]
struct LoginForm {
    username: String,
    password: String,
    #[serde(default)]
    code: Option<String>,
    form_token: String,
    next: Option<String>,
}

async fn login_form(
    State(accounts): State<Accounts>,
    State(site): State<Site>,
    Query(q): Query<NextParam>,
) -> Response {
    if needs_setup(&accounts).await {
        return Redirect::to("/setup").into_response();
    }
    let next = safe_next(q.next.as_deref());
    with_form_token(&site, |token| login_page(token, &next, "", None, StatusCode::OK))
}

fn login_page(form_token: &str, next: &str, username: &str, error: Option<&str>, status: StatusCode) -> Response {
    let body = html! {
        div class="card" {
            h1 { "Sign in to kenny" }
            (error_line(error))
            form method="post" action="/login" {
                input type="hidden" name="form_token" value=(form_token);
                input type="hidden" name="next" value=(next);
                label for="username" { "User name" }
                input id="username" name="username" value=(username) autocomplete="username" required;
                label for="password" { "Password" }
                input id="password" name="password" type="password" autocomplete="current-password" required;
                label for="code" { "Authenticator code (if you turned it on)" }
                input id="code" name="code" inputmode="numeric" autocomplete="one-time-code";
                button { "Sign in" }
            }
        }
    };
    (status, page("Sign in", body)).into_response()
}

async fn login_submit(
    State(accounts): State<Accounts>,
    State(site): State<Site>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !crate::guard::same_origin(&site.base_url, &headers) {
        return forbidden_form();
    }
    if !form_token_ok(&headers, &form.form_token) {
        return forbidden_form();
    }
    let next = safe_next(form.next.as_deref());
    let username = form.username.trim().to_owned();
    let unix_now = accounts.clock.unix_secs();
    let device = |user_id: i64| {
        cookies::get(&headers, &crate::device::cookie_name(user_id))
            .and_then(|v| accounts.device_key.verify(user_id, &v, unix_now))
    };
    let attempt = Attempt {
        username: &username,
        password: &form.password,
        code: form.code.as_deref(),
        client: client_info(addr, &headers),
        client_key: crate::ratelimit::client_key(addr.ip()),
        device: &device,
    };
    // The sign-in page again, answered 429 with when to retry.
    let throttled = |message: &str, secs: u64| {
        too_many(
            login_page(
                &form.form_token,
                &next,
                &username,
                Some(message),
                StatusCode::TOO_MANY_REQUESTS,
            ),
            secs,
        )
    };
    match crate::accounts::login(&accounts.store, &accounts.clock, &accounts.login_limiter, attempt).await {
        Ok(done) => {
            tracing::info!(user = ?username, client = %addr.ip(), "signed in");
            let mut resp = signed_in_redirect(&site, &done.issued.token, &next);
            remember_device(&accounts, &site, &mut resp, done.user_id);
            resp
        }
        Err(LoginError::SecondFactorThrottled { wait }) => {
            let secs = wait.as_secs().max(1);
            tracing::warn!(user = ?username, client = %addr.ip(), "second factor throttled: too many wrong codes");
            let message = format!(
                "Too many wrong authenticator or recovery codes for this account. Try again in {secs} seconds; \
                 if you did not enter them, someone has your password: change it once you are in."
            );
            throttled(&message, secs)
        }
        Err(LoginError::Throttled { wait, account }) => {
            let secs = wait.as_secs().max(1);
            tracing::warn!(user = ?username, client = %addr.ip(), account, "sign-in throttled");
            let message = if account {
                format!(
                    "Too many failed sign-ins to this account. Sign in from a browser you have used before, \
                     enter your authenticator code, or try again in {secs} seconds."
                )
            } else {
                format!("Too many failed attempts. Try again in {secs} seconds.")
            };
            throttled(&message, secs)
        }
        Err(e @ (LoginError::BadCredentials | LoginError::SecondFactor)) => {
            tracing::warn!(user = ?username, client = %addr.ip(), reason = %e, "sign-in failed");
            let message = match e {
                LoginError::SecondFactor => "Enter the current code from your authenticator app, or a recovery code.",
                _ => "Wrong user name or password.",
            };
            login_page(
                &form.form_token,
                &next,
                &username,
                Some(message),
                StatusCode::UNAUTHORIZED,
            )
        }
        Err(e) => server_error(&e.to_string()),
    }
}

#[derive(Deserialize)]
struct LogoutForm {
    csrf: String,
}

async fn logout(
    State(accounts): State<Accounts>,
    State(site): State<Site>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    if !crate::guard::same_origin(&site.base_url, &headers) {
        return forbidden_form();
    }
    let Some((who, csrf)) = signed_in(&accounts, &headers).await else {
        return Redirect::to("/login").into_response();
    };
    if !crate::secrets::constant_time_eq(&csrf, &form.csrf) {
        return forbidden_form();
    }
    if let Ok(id) = who.credential_id.parse::<i64>() {
        let now = accounts.clock.now();
        let _ = accounts.store.blocking(move |s| s.revoke_session(id, &now)).await;
    }
    let mut resp = Redirect::to("/login").into_response();
    resp.headers_mut()
        .append(header::SET_COOKIE, cookies::set(cookies::SESSION, "", 0, secure(&site)));
    resp
}

// ---- helpers -----------------------------------------------------------------------

fn too_many(mut resp: Response, retry_after_secs: u64) -> Response {
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    resp
}

fn client_info(addr: SocketAddr, headers: &HeaderMap) -> ClientInfo {
    ClientInfo {
        addr: Some(addr.ip().to_string()),
        user_agent: headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.chars().take(200).collect()),
    }
}

/// Renders a form page with a fresh form token, also set as a cookie (double submit).
fn with_form_token(site: &Site, render: impl FnOnce(&str) -> Response) -> Response {
    let token = crate::secrets::new_password();
    let mut resp = render(&token);
    resp.headers_mut().append(
        header::SET_COOKIE,
        cookies::set(cookies::FORM, &token, FORM_TOKEN_LIFETIME_SECS, secure(site)),
    );
    resp
}

fn form_token_ok(headers: &HeaderMap, submitted: &str) -> bool {
    cookies::get(headers, cookies::FORM)
        .is_some_and(|c| !c.is_empty() && crate::secrets::constant_time_eq(&c, submitted))
}

fn signed_in_redirect(site: &Site, token: &str, next: &str) -> Response {
    let mut resp = Redirect::to(next).into_response();
    let headers = resp.headers_mut();
    headers.append(
        header::SET_COOKIE,
        cookies::set(cookies::SESSION, token, SESSION_LIFETIME.as_secs(), secure(site)),
    );
    headers.append(header::SET_COOKIE, cookies::set(cookies::FORM, "", 0, secure(site)));
    resp
}

/// Sets the device cookie of a browser that just signed in to `user_id`: a flood of
/// wrong passwords from elsewhere will not keep it out of that account.
fn remember_device(accounts: &Accounts, site: &Site, resp: &mut Response, user_id: i64) {
    resp.headers_mut().append(
        header::SET_COOKIE,
        cookies::set_device(
            &crate::device::cookie_name(user_id),
            &accounts.device_key.issue(user_id, accounts.clock.unix_secs()),
            crate::device::LIFETIME_SECS,
            secure(site),
        ),
    );
}

fn forbidden_form() -> Response {
    let body = html! {
        div class="card" {
            h1 { "This form has expired" }
            p { "It was not sent from this site's page, or too long ago. " a href="/login" { "Open it again" } "." }
        }
    };
    (StatusCode::FORBIDDEN, page("Form expired", body)).into_response()
}

fn server_error(message: &str) -> Response {
    tracing::error!(%message, "sign-in failed on the server");
    let body = html! {
        div class="card" {
            h1 { "Something went wrong" }
            p { "The server could not complete this; see its log." }
        }
    };
    (StatusCode::INTERNAL_SERVER_ERROR, page("Error", body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/oauth/authorize?x=1")), "/oauth/authorize?x=1");
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "evil",
            "",
            "/a\r\nSet-Cookie: x",
            "/\t/evil.example",
            "/\t\\evil.example",
            "/ /x",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/");
    }
}
