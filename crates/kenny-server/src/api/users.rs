//! `/api/users`: account management for superusers.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use crate::principal::{Principal, Role};
use crate::state::AppState;
use crate::store::UserPatch;

fn superuser_only(who: &Principal) -> Result<(), ApiError> {
    if who.role == Role::Superuser {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only superusers manage accounts",
        ))
    }
}

fn parse_role(role: &str) -> Result<Role, ApiError> {
    Role::parse(role)
        .ok_or_else(|| ApiError::bad_request(format!("unknown role {role:?}: use superuser, operator or user")))
}

pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    superuser_only(&who)?;
    let users = state.store.blocking(|s| s.users()).await?;
    Ok(Json(json!({ "users": users })))
}

pub async fn get_one(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    superuser_only(&who)?;
    let user = state.store.blocking(move |s| s.user(id)).await?;
    let user =
        user.ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no user with id {id}")))?;
    Ok(Json(json!({ "user": user })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    username: String,
    role: String,
    /// Omit to have one generated (returned once).
    password: Option<String>,
    #[serde(default)]
    hosts: Vec<String>,
}

pub async fn create(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Json(body): Json<NewUser>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    superuser_only(&who)?;
    let role = parse_role(&body.role)?;
    let generated = body.password.is_none().then(crate::secrets::new_password);
    let password = body.password.or(generated.clone()).unwrap_or_default();
    let store = state.store.clone();
    let (name, hosts) = (body.username.clone(), body.hosts.clone());
    let id = tokio::task::spawn_blocking(move || crate::admin::add_user(&store, &name, role, &hosts, &password))
        .await?
        .map_err(|e| match e.downcast::<crate::store::StoreError>() {
            Ok(store_error) => ApiError::from(store_error),
            Err(other) => ApiError::bad_request(other.to_string()),
        })?;
    let user = state.store.blocking(move |s| s.user(id)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "user": user, "password": generated })),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    role: Option<String>,
    disabled: Option<bool>,
    hosts: Option<Vec<String>>,
}

pub async fn update(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<i64>,
    Json(body): Json<Patch>,
) -> Result<Json<Value>, ApiError> {
    superuser_only(&who)?;
    if let Some(bad) = body
        .hosts
        .iter()
        .flatten()
        .find(|h| !crate::tunnel::handshake::valid_agent_id(h))
    {
        return Err(ApiError::bad_request(format!("host {bad:?} is not a valid agent id")));
    }
    let patch = UserPatch {
        role: body.role.as_deref().map(parse_role).transpose()?,
        disabled: body.disabled,
        hosts: body.hosts,
    };
    let user = state.store.blocking(move |s| s.update_user(id, &patch)).await?;
    if user.disabled {
        state
            .store
            .blocking(move |s| s.end_sessions(id, &crate::clock::now()))
            .await?;
    }
    // Role, hosts or a disabled flag change what this user's tokens may do: now.
    state.auth.forget_cached();
    Ok(Json(json!({ "user": user })))
}

pub async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    superuser_only(&who)?;
    state.store.blocking(move |s| s.delete_user(id)).await?;
    state.auth.forget_cached();
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordReset {
    /// Omit to have one generated (returned once).
    password: Option<String>,
}

/// Sets a new password for a user and signs them out everywhere.
pub async fn reset_password(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<i64>,
    Json(body): Json<PasswordReset>,
) -> Result<Json<Value>, ApiError> {
    superuser_only(&who)?;
    let generated = body.password.is_none().then(crate::secrets::new_password);
    let password = body.password.or(generated.clone()).unwrap_or_default();
    let hash = super::me::hash_new_password(password).await?;
    state
        .store
        .blocking(move |s| s.set_password(id, &hash, None, &crate::clock::now()))
        .await?;
    Ok(Json(json!({ "password": generated })))
}
