//! `/api/users`: account management for superusers.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, BodyShape, JsonBody, Superuser};
use crate::principal::Role;
use crate::state::Accounts;
use crate::store::UserPatch;

fn parse_role(role: &str) -> Result<Role, ApiError> {
    Role::parse(role)
        .ok_or_else(|| ApiError::bad_request(format!("unknown role {role:?}: use superuser, operator or user")))
}

pub(super) async fn list(State(accounts): State<Accounts>, _: Superuser) -> Result<Json<Value>, ApiError> {
    let users = accounts.store.blocking(|s| s.users()).await?;
    Ok(Json(json!({ "users": users })))
}

pub(super) async fn get_one(
    State(accounts): State<Accounts>,
    _: Superuser,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let user = accounts.store.blocking(move |s| s.user(id)).await?;
    let user =
        user.ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no user with id {id}")))?;
    Ok(Json(json!({ "user": user })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewUser {
    username: String,
    role: String,
    /// Omit to have one generated (returned once).
    password: Option<String>,
    #[serde(default)]
    hosts: Vec<String>,
}

impl BodyShape for NewUser {
    const SHAPE: &'static str =
        r#"{"username": "...", "role": "superuser|operator|user", "password"?: "...", "hosts"?: ["<agent id>"]}"#;
}

pub(super) async fn create(
    State(accounts): State<Accounts>,
    _: Superuser,
    JsonBody(body): JsonBody<NewUser>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let role = parse_role(&body.role)?;
    let generated = body.password.is_none().then(crate::secrets::new_password);
    let password = body.password.or(generated.clone()).unwrap_or_default();
    crate::admin::check_new_user(&body.username, role, &body.hosts, &password)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let hash = super::me::hash_new_password(password).await?;
    let (name, hosts) = (body.username, body.hosts);
    let now = accounts.clock.now();
    let id = accounts
        .store
        .blocking(move |s| s.create_user(&name, &hash, role, &hosts, &now))
        .await?;
    let user = accounts.store.blocking(move |s| s.user(id)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "user": user, "password": generated })),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Patch {
    role: Option<String>,
    disabled: Option<bool>,
    hosts: Option<Vec<String>>,
    /// Revoke every personal access token of the user for good (the dashboard asks
    /// first). Without it, a disabled user's tokens are refused while it stays
    /// disabled and work again if it is enabled.
    #[serde(default)]
    revoke_tokens: bool,
}

impl BodyShape for Patch {
    const SHAPE: &'static str =
        r#"{"role"?: "...", "disabled"?: true, "hosts"?: ["<agent id>"], "revoke_tokens"?: true}"#;
}

/// Changes a user. Disabling ends its sessions and OAuth grants at once; its tokens stop
/// working while it is disabled, and with `revoke_tokens` are revoked for good.
pub(super) async fn update(
    State(accounts): State<Accounts>,
    _: Superuser,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<Patch>,
) -> Result<Json<Value>, ApiError> {
    if let Some(bad) = body
        .hosts
        .iter()
        .flatten()
        .find(|h| !kenny_proto::agent_id::is_valid(h))
    {
        return Err(ApiError::bad_request(format!("host {bad:?} is not a valid agent id")));
    }
    let patch = UserPatch {
        role: body.role.as_deref().map(parse_role).transpose()?,
        disabled: body.disabled,
        hosts: body.hosts,
    };
    let revoke = body.revoke_tokens;
    let now = accounts.clock.now();
    let (user, revoked) = accounts
        .store
        .blocking(move |s| {
            let user = s.update_user(id, &patch)?;
            let revoked = if user.disabled {
                s.end_sessions(id, revoke, &now)?
            } else if revoke {
                s.revoke_user_tokens(id, &now)?
            } else {
                0
            };
            // Read again: the live token count changed.
            let user = s.user(id)?.unwrap_or(user);
            Ok((user, revoked))
        })
        .await?;
    // Role, hosts, tokens or a disabled flag change what this user's tokens may do: now.
    accounts.auth.forget_cached();
    Ok(Json(json!({ "user": user, "tokens_revoked": revoked })))
}

pub(super) async fn delete(
    State(accounts): State<Accounts>,
    _: Superuser,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    accounts.store.blocking(move |s| s.delete_user(id)).await?;
    accounts.auth.forget_cached();
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PasswordReset {
    /// Omit to have one generated (returned once).
    password: Option<String>,
    /// Also revoke every personal access token of the user (the dashboard asks first).
    #[serde(default)]
    revoke_tokens: bool,
}

impl BodyShape for PasswordReset {
    const SHAPE: &'static str = r#"{"password"?: "...", "revoke_tokens"?: true}"#;
}

/// Sets a new password for a user: every session and OAuth grant of theirs ends, and
/// with `revoke_tokens` every personal access token too.
pub(super) async fn reset_password(
    State(accounts): State<Accounts>,
    _: Superuser,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<PasswordReset>,
) -> Result<Json<Value>, ApiError> {
    let generated = body.password.is_none().then(crate::secrets::new_password);
    let password = body.password.or(generated.clone()).unwrap_or_default();
    let hash = super::me::hash_new_password(password).await?;
    let revoke = body.revoke_tokens;
    let now = accounts.clock.now();
    let revoked = accounts
        .store
        .blocking(move |s| s.set_password(id, &hash, None, revoke, &now))
        .await?;
    if revoked > 0 {
        accounts.auth.forget_cached();
    }
    Ok(Json(json!({ "password": generated, "tokens_revoked": revoked })))
}
