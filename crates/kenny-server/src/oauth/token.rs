//! `/oauth/token` and `/oauth/revoke`. Codes are single-use and short-lived; refresh
//! tokens rotate, and presenting a used one revokes the whole grant (RFC 9700 §4.14).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Form, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{ACCESS_TOKEN_PREFIX, REFRESH_TOKEN_PREFIX, SCOPE, pkce};
use crate::state::AppState;
use crate::store::{NewOAuthToken, Redeem, RefreshGrant};

#[derive(Deserialize)]
pub struct TokenRequest {
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    client_id: Option<String>,
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    resource: Option<String>,
}

pub async fn token(
    State(state): State<Arc<AppState>>,
    form: Result<Form<TokenRequest>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(req)) = form else {
        return oauth_error(
            "invalid_request",
            "send an application/x-www-form-urlencoded token request",
        );
    };
    let result = match req.grant_type.as_deref() {
        Some("authorization_code") => from_code(&state, &req).await,
        Some("refresh_token") => from_refresh(&state, &req).await,
        _ => Err((
            "unsupported_grant_type",
            "grant_type must be authorization_code or refresh_token".to_owned(),
        )),
    };
    match result {
        Ok(grant) => issue(&state, grant).await,
        Err((error, description)) => {
            tracing::warn!(error, %description, "token request refused");
            oauth_error(error, &description)
        }
    }
}

type Refusal = (&'static str, String);

fn required<'a>(v: &'a Option<String>, name: &str) -> Result<&'a str, Refusal> {
    v.as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ("invalid_request", format!("{name} is required")))
}

async fn from_code(state: &AppState, req: &TokenRequest) -> Result<RefreshGrant, Refusal> {
    let code = required(&req.code, "code")?;
    let client_id = required(&req.client_id, "client_id")?;
    let redirect_uri = required(&req.redirect_uri, "redirect_uri")?;
    let verifier = required(&req.code_verifier, "code_verifier (PKCE)")?;
    let hash = crate::secrets::token_hash(code);
    let now = crate::clock::now();
    let redeemed = state
        .store
        .blocking(move |s| s.redeem_code(&hash, &now))
        .await
        .map_err(server_error)?;
    let grant = match redeemed {
        Redeem::Ok(g) => g,
        // Codes are single-use whatever the request: a mismatch is found after redemption.
        Redeem::Unknown | Redeem::Mismatch => return Err(("invalid_grant", "unknown authorization code".into())),
        Redeem::Expired => return Err(("invalid_grant", "the authorization code has expired".into())),
        Redeem::Reused => {
            return Err((
                "invalid_grant",
                "the authorization code was already used; tokens issued from it are revoked".into(),
            ));
        }
    };
    if grant.client_id != client_id {
        return Err(("invalid_grant", "the code was issued to another client".into()));
    }
    if grant.redirect_uri != redirect_uri {
        return Err((
            "invalid_grant",
            "redirect_uri does not match the authorization request".into(),
        ));
    }
    if !pkce::verify(verifier, &grant.code_challenge) {
        return Err((
            "invalid_grant",
            "code_verifier does not match the code_challenge".into(),
        ));
    }
    check_resource(req, &grant.resource)?;
    Ok(RefreshGrant {
        client_id: grant.client_id,
        user_id: grant.user_id,
        resource: grant.resource,
        scope: grant.scope,
        family: grant.family,
    })
}

async fn from_refresh(state: &AppState, req: &TokenRequest) -> Result<RefreshGrant, Refusal> {
    let token = required(&req.refresh_token, "refresh_token")?;
    let client_id = required(&req.client_id, "client_id")?;
    let hash = crate::secrets::token_hash(token);
    let now = crate::clock::now();
    let (expected_client, resource) = (client_id.to_owned(), req.resource.clone());
    let fits = move |g: &RefreshGrant| {
        g.client_id == expected_client
            && resource
                .as_deref()
                .is_none_or(|r| r.trim_end_matches('/') == g.resource)
    };
    let redeemed = state
        .store
        .blocking(move |s| s.redeem_refresh(&hash, &now, fits))
        .await
        .map_err(server_error)?;
    let grant = match redeemed {
        Redeem::Ok(g) => g,
        Redeem::Unknown => return Err(("invalid_grant", "unknown or revoked refresh token".into())),
        Redeem::Mismatch => {
            return Err((
                "invalid_grant",
                "the refresh token was issued to another client or resource".into(),
            ));
        }
        Redeem::Expired => return Err(("invalid_grant", "the refresh token has expired; sign in again".into())),
        Redeem::Reused => {
            return Err((
                "invalid_grant",
                "the refresh token was already used; this grant is revoked, sign in again".into(),
            ));
        }
    };
    Ok(grant)
}

fn check_resource(req: &TokenRequest, granted: &str) -> Result<(), Refusal> {
    match req.resource.as_deref() {
        Some(r) if r.trim_end_matches('/') != granted => Err((
            "invalid_target",
            "the grant is for this server's MCP endpoint only".into(),
        )),
        _ => Ok(()),
    }
}

fn server_error(e: crate::store::StoreError) -> Refusal {
    tracing::error!(error = %e, "token endpoint storage failure");
    ("server_error", "the server could not complete the request".into())
}

/// Mints an access and a refresh token for a grant (a fresh one, or the family of the
/// refresh token just used).
async fn issue(state: &AppState, g: RefreshGrant) -> Response {
    let access = crate::secrets::new_token(ACCESS_TOKEN_PREFIX);
    let refresh = crate::secrets::new_token(REFRESH_TOKEN_PREFIX);
    let now = time::OffsetDateTime::now_utc();
    let settings = state.oauth;
    let (a_hash, r_hash) = (
        crate::secrets::token_hash(&access),
        crate::secrets::token_hash(&refresh),
    );
    let scope = g.scope.clone().unwrap_or_else(|| SCOPE.to_owned());
    let stored = state
        .store
        .blocking(move |s| {
            let created = crate::clock::format(now);
            for (hash, kind, ttl) in [
                (&a_hash, "access", settings.access_ttl),
                (&r_hash, "refresh", settings.refresh_ttl),
            ] {
                s.create_oauth_token(&NewOAuthToken {
                    token_hash: hash,
                    kind,
                    family: &g.family,
                    client_id: &g.client_id,
                    user_id: g.user_id,
                    resource: &g.resource,
                    scope: g.scope.as_deref(),
                    created_at: &created,
                    expires_at: &crate::clock::format(now + ttl),
                })?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = stored {
        let (error, description) = server_error(e);
        return oauth_error(error, &description);
    }
    no_store(
        Json(json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": settings.access_ttl.as_secs(),
            "refresh_token": refresh,
            "scope": scope,
        }))
        .into_response(),
    )
}

#[derive(Deserialize)]
pub struct RevokeRequest {
    token: Option<String>,
}

/// RFC 7009: always 200, whether or not the token existed; revoking any token of a
/// grant ends the whole grant.
pub async fn revoke(
    State(state): State<Arc<AppState>>,
    form: Result<Form<RevokeRequest>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(RevokeRequest { token: Some(token) })) = form else {
        return oauth_error("invalid_request", "token is required");
    };
    let hash = crate::secrets::token_hash(&token);
    let now = crate::clock::now();
    if let Err(e) = state.store.blocking(move |s| s.revoke_oauth_token(&hash, &now)).await {
        let (error, description) = server_error(e);
        return oauth_error(error, &description);
    }
    no_store(StatusCode::OK.into_response())
}

fn oauth_error(error: &str, description: &str) -> Response {
    let status = if error == "server_error" {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::BAD_REQUEST
    };
    no_store((status, Json(json!({"error": error, "error_description": description}))).into_response())
}

fn no_store(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
