//! `/api/me`: what every signed-in user manages for themselves: password, sessions,
//! personal access tokens, the apps they let in (OAuth grants), second factor.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, BodyShape, JsonBody, SignedIn};
use crate::principal::{CredentialKind, Principal};
use crate::ratelimit::Caller;
use crate::state::Accounts;

pub(super) async fn show(State(accounts): State<Accounts>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    let id = who.user_id;
    let user = accounts.store.blocking(move |s| s.user(id)).await?;
    Ok(Json(json!({ "user": user, "credential_kind": who.credential_kind })))
}

/// The session making this request, if it is a session.
fn current_session(who: &Principal) -> Option<i64> {
    (who.credential_kind == CredentialKind::Session)
        .then(|| who.credential_id.parse().ok())
        .flatten()
}

/// Checks a new password's length, then hashes it under the shared Argon2 cap.
pub(super) async fn hash_new_password(password: String) -> Result<String, ApiError> {
    let min = crate::admin::MIN_PASSWORD_CHARS;
    if password.chars().count() < min {
        return Err(ApiError::bad_request(format!(
            "the password is too short: use at least {min} characters"
        )));
    }
    crate::passwords::hash(password).await.map_err(|e| {
        tracing::error!(error = %e, "hashing a new password failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the password could not be hashed; see the server log",
        )
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PasswordChange {
    current_password: String,
    new_password: String,
    /// Also revoke every personal access token (the dashboard asks first).
    #[serde(default)]
    revoke_tokens: bool,
}

impl BodyShape for PasswordChange {
    const SHAPE: &'static str = r#"{"current_password": "...", "new_password": "...", "revoke_tokens"?: true}"#;
}

/// Changes one's own password, from a signed-in dashboard session only, with the
/// current password checked under the sign-in throttle. Every other session of the
/// user and every OAuth grant end; with `revoke_tokens`, every personal access token
/// too.
pub(super) async fn change_password(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<PasswordChange>,
) -> Result<StatusCode, ApiError> {
    check_own_password(&accounts, &who, body.current_password).await?;
    let new_hash = hash_new_password(body.new_password).await?;
    let (id, keep, revoke) = (who.user_id, current_session(&who), body.revoke_tokens);
    let now = accounts.clock.now();
    let revoked = accounts
        .store
        .blocking(move |s| s.set_password(id, &new_hash, keep, revoke, &now))
        .await?;
    if revoked > 0 {
        accounts.auth.forget_cached();
    }
    tracing::info!(user = %who.username, tokens_revoked = revoked, "password changed");
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn sessions(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
) -> Result<Json<Value>, ApiError> {
    let id = who.user_id;
    let now = accounts.clock.now();
    let list = accounts.store.blocking(move |s| s.user_sessions(id, &now)).await?;
    let current = current_session(&who);
    let list: Vec<Value> = list
        .into_iter()
        .map(|s| {
            let is_current = Some(s.id) == current;
            let mut v = json!(s);
            v["current"] = json!(is_current);
            v
        })
        .collect();
    Ok(Json(json!({ "sessions": list })))
}

pub(super) async fn revoke_session(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    Path(session_id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    let id = who.user_id;
    let now = accounts.clock.now();
    let done = accounts
        .store
        .blocking(move |s| s.revoke_user_session(id, session_id, &now))
        .await?;
    if done {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("you have no live session {session_id}"),
        ))
    }
}

pub(super) async fn tokens(State(accounts): State<Accounts>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    let id = who.user_id;
    let list = accounts.store.blocking(move |s| s.user_tokens(id)).await?;
    Ok(Json(json!({ "tokens": list })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewToken {
    label: Option<String>,
    /// The caller's current password.
    password: Option<String>,
}

impl BodyShape for NewToken {
    const SHAPE: &'static str = r#"{"label"?: "...", "password": "..."}"#;
}

/// Mints a personal access token; the token is in this response and nowhere else.
/// Only a signed-in person mints tokens: a token cannot mint more of itself, so a
/// leaked one can be revoked and stays revoked. The password is asked again, under the
/// sign-in throttle, because a token outlives the session: a session left open or
/// stolen must not be turned into a lasting credential.
pub(super) async fn create_token(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<NewToken>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    session_only(
        &who,
        "sign in to the dashboard to create a token; tokens cannot create tokens",
    )?;
    if body.label.as_ref().is_some_and(|l| l.chars().count() > 100) {
        return Err(ApiError::bad_request("label is at most 100 characters"));
    }
    let password = body.password.filter(|p| !p.is_empty()).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "password_required",
            "enter your current password to create a token (\"password\" in the request)",
        )
    })?;
    check_own_password(&accounts, &who, password).await?;
    let name = who.username.clone();
    let now = accounts.clock.now();
    let token = accounts
        .store
        .blocking(move |s| {
            crate::admin::create_token_at(s, &name, body.label.as_deref(), &now)
                .map_err(|e| crate::store::StoreError::Internal(e.to_string()))
        })
        .await?;
    Ok((StatusCode::CREATED, Json(json!({ "token": token }))))
}

pub(super) async fn revoke_token(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    Path(token_id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    let id = who.user_id;
    let now = accounts.clock.now();
    let done = accounts
        .store
        .blocking(move |s| s.revoke_token(id, token_id, &now))
        .await?;
    if !done {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("you have no live token {token_id}"),
        ));
    }
    accounts.auth.forget_cached();
    Ok(StatusCode::NO_CONTENT)
}

/// The apps (OAuth clients) the user has let act as them, with live grants.
pub(super) async fn grants(State(accounts): State<Accounts>, SignedIn(who): SignedIn) -> Result<Json<Value>, ApiError> {
    let id = who.user_id;
    let now = accounts.clock.now();
    let list = accounts.store.blocking(move |s| s.user_grants(id, &now)).await?;
    Ok(Json(json!({ "grants": list })))
}

/// Ends one of the user's own grants: its access and refresh tokens stop at once.
pub(super) async fn revoke_grant(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    Path(grant_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = who.user_id;
    let gid = grant_id.clone();
    let now = accounts.clock.now();
    let done = accounts
        .store
        .blocking(move |s| s.revoke_user_grant(id, &gid, &now))
        .await?;
    if done {
        tracing::info!(user = %who.username, grant = %grant_id, "OAuth grant revoked by its owner");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("you have no live grant {grant_id:?}"),
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TotpStart {
    password: String,
}

impl BodyShape for TotpStart {
    const SHAPE: &'static str = r#"{"password": "..."}"#;
}

/// Starts TOTP set-up: a new secret (not active until confirmed with a code). Needs the
/// password, and TOTP must be off: replacing a second factor goes through turning it
/// off, which needs the password too.
pub(super) async fn totp_start(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<TotpStart>,
) -> Result<Json<Value>, ApiError> {
    check_own_password(&accounts, &who, body.password).await?;
    let id = who.user_id;
    if accounts
        .store
        .blocking(move |s| s.user(id))
        .await?
        .is_some_and(|u| u.totp_enabled)
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            "TOTP is already on; turn it off first (needs your password)",
        ));
    }
    let secret = crate::totp::new_secret();
    let uri = crate::totp::otpauth_uri(&secret, &who.username).ok_or_else(|| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "could not build the otpauth URI",
        )
    })?;
    let (id, s) = (who.user_id, secret.clone());
    accounts.store.blocking(move |st| st.set_totp_pending(id, &s)).await?;
    Ok(Json(json!({ "secret": secret, "otpauth_uri": uri })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TotpConfirm {
    code: String,
}

impl BodyShape for TotpConfirm {
    const SHAPE: &'static str = r#"{"code": "123456"}"#;
}

/// Turns TOTP on once the app shows a valid code; returns recovery codes, once.
pub(super) async fn totp_confirm(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<TotpConfirm>,
) -> Result<Json<Value>, ApiError> {
    session_only(&who, "sign in to the dashboard to turn on TOTP")?;
    let id = who.user_id;
    let pending = accounts.store.blocking(move |s| s.totp_pending(id)).await?;
    let pending = pending.ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            "start TOTP set-up first (POST /api/me/totp)",
        )
    })?;
    let now = accounts.clock.unix_secs();
    let step = crate::totp::matching_step(&pending, &body.code, now).ok_or_else(|| {
        ApiError::bad_request("that code does not match; check the app's clock and try the current code")
    })?;
    let codes = crate::totp::new_recovery_codes();
    let hashes: Vec<String> = codes.iter().map(|c| crate::totp::recovery_hash(c)).collect();
    accounts
        .store
        .blocking(move |s| s.enable_totp(id, &pending, step, &hashes))
        .await?;
    Ok(Json(json!({ "enabled": true, "recovery_codes": codes })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TotpDisable {
    password: String,
}

impl BodyShape for TotpDisable {
    const SHAPE: &'static str = r#"{"password": "..."}"#;
}

/// Turns TOTP off; needs the account's password.
pub(super) async fn totp_disable(
    State(accounts): State<Accounts>,
    SignedIn(who): SignedIn,
    JsonBody(body): JsonBody<TotpDisable>,
) -> Result<StatusCode, ApiError> {
    check_own_password(&accounts, &who, body.password).await?;
    let id = who.user_id;
    accounts.store.blocking(move |s| s.disable_totp(id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Checks the caller's own password, under the same throttle as signing in (so a
/// stolen session or token cannot be used to guess it), and only for a signed-in
/// person: tokens do not mint tokens or change passwords or second factors.
async fn check_own_password(accounts: &Accounts, who: &Principal, password: String) -> Result<(), ApiError> {
    session_only(
        who,
        "sign in to the dashboard to change your password or second factor or to create a token; tokens cannot",
    )?;
    // The session is the caller: it proved the password when it signed in, so only
    // its own failures count here, and a stranger's flood cannot block it.
    let caller = current_session(who).map(Caller::Session).ok_or_else(|| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "session_required",
            "sign in to the dashboard first",
        )
    })?;
    if let Err(wait) = accounts
        .login_limiter
        .caller(&caller, &who.username, std::time::Instant::now())
    {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "throttled",
            format!(
                "too many wrong passwords; try again in {} seconds",
                wait.as_secs().max(1)
            ),
        ));
    }
    let name = who.username.clone();
    let login = accounts.store.blocking(move |s| s.user_login(&name)).await?;
    let hash = login.map(|l| l.password_hash).unwrap_or_default();
    if crate::passwords::verify(hash, password).await {
        accounts.login_limiter.succeeded(&caller, &who.username, false);
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "wrong_password",
            "the password is wrong; enter the password you sign in with",
        ))
    }
}

/// Refuses anything but a signed-in dashboard session.
fn session_only(who: &Principal, message: &str) -> Result<(), ApiError> {
    if who.credential_kind == CredentialKind::Session {
        Ok(())
    } else {
        Err(ApiError::new(StatusCode::FORBIDDEN, "session_required", message))
    }
}
