//! `/oauth/token` and `/oauth/revoke`. Codes are single-use and short-lived; refresh
//! tokens rotate, and presenting a used one revokes the whole grant (RFC 9700 §4.14).
//! Redeeming and issuing are one transaction, so a replay racing the first use
//! revokes what the first use issues.

use axum::Json;
use axum::extract::{Form, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{ACCESS_TOKEN_PREFIX, REFRESH_TOKEN_PREFIX, SCOPE, pkce};
use crate::state::OAuth;
use crate::store::{Exchange, NewTokenPair, RefreshGrant};

#[derive(Deserialize)]
pub(super) struct TokenRequest {
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    client_id: Option<String>,
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    resource: Option<String>,
}

pub(super) async fn token(
    State(oauth): State<OAuth>,
    form: Result<Form<TokenRequest>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(req)) = form else {
        return oauth_error(
            "invalid_request",
            "send an application/x-www-form-urlencoded token request",
        );
    };
    let minted = Minted::new(&oauth);
    let result = match req.grant_type.as_deref() {
        Some("authorization_code") => from_code(&oauth, &req, &minted).await,
        Some("refresh_token") => from_refresh(&oauth, &req, &minted).await,
        _ => Err((
            "unsupported_grant_type",
            "grant_type must be authorization_code or refresh_token".to_owned(),
        )),
    };
    match result {
        Ok(grant) => minted.response(&oauth, &grant),
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

/// An access and a refresh token minted before the exchange, so that redeeming and
/// storing them is one transaction (see [`crate::store::Store::exchange_code`]).
struct Minted {
    access: String,
    refresh: String,
    stored: StoredPair,
}

/// What the store keeps of a minted pair (owned, to move onto the blocking pool).
#[derive(Clone)]
struct StoredPair {
    access_hash: String,
    refresh_hash: String,
    created_at: String,
    access_expires_at: String,
    refresh_expires_at: String,
}

impl StoredPair {
    fn pair(&self) -> NewTokenPair<'_> {
        NewTokenPair {
            access_hash: &self.access_hash,
            refresh_hash: &self.refresh_hash,
            created_at: &self.created_at,
            access_expires_at: &self.access_expires_at,
            refresh_expires_at: &self.refresh_expires_at,
        }
    }
}

impl Minted {
    fn new(oauth: &OAuth) -> Self {
        let access = crate::secrets::new_token(ACCESS_TOKEN_PREFIX);
        let refresh = crate::secrets::new_token(REFRESH_TOKEN_PREFIX);
        let now = oauth.clock.now_utc();
        let stored = StoredPair {
            access_hash: crate::secrets::token_hash(&access),
            refresh_hash: crate::secrets::token_hash(&refresh),
            created_at: crate::clock::format(now),
            access_expires_at: crate::clock::format(now + oauth.settings.access_ttl),
            refresh_expires_at: crate::clock::format(now + oauth.settings.refresh_ttl),
        };
        Minted {
            access,
            refresh,
            stored,
        }
    }

    /// The token response for tokens the exchange stored.
    fn response(&self, oauth: &OAuth, g: &RefreshGrant) -> Response {
        no_store(
            Json(json!({
                "access_token": self.access,
                "token_type": "Bearer",
                "expires_in": oauth.settings.access_ttl.as_secs(),
                "refresh_token": self.refresh,
                "scope": g.scope.clone().unwrap_or_else(|| SCOPE.to_owned()),
            }))
            .into_response(),
        )
    }
}

async fn from_code(oauth: &OAuth, req: &TokenRequest, minted: &Minted) -> Result<RefreshGrant, Refusal> {
    let code = required(&req.code, "code")?;
    let client_id = required(&req.client_id, "client_id")?.to_owned();
    let redirect_uri = required(&req.redirect_uri, "redirect_uri")?.to_owned();
    let verifier = required(&req.code_verifier, "code_verifier (PKCE)")?.to_owned();
    let resource = req.resource.clone();
    let hash = crate::secrets::token_hash(code);
    let now = oauth.clock.now();
    let check = move |grant: &crate::store::CodeGrant| -> Result<(), Refusal> {
        if grant.client_id != client_id {
            return Err(("invalid_grant", "the code was issued to another client".into()));
        }
        if grant.redirect_uri != redirect_uri {
            return Err((
                "invalid_grant",
                "redirect_uri does not match the authorization request".into(),
            ));
        }
        if !pkce::verify(&verifier, &grant.code_challenge) {
            return Err((
                "invalid_grant",
                "code_verifier does not match the code_challenge".into(),
            ));
        }
        check_resource(resource.as_deref(), &grant.resource)
    };
    let tokens = minted.stored.clone();
    let exchanged = oauth
        .store
        .blocking(move |s| s.exchange_code(&hash, &now, &tokens.pair(), check))
        .await
        .map_err(server_error)?;
    match exchanged {
        Exchange::Issued(g) => Ok(g),
        Exchange::Refused(why) => Err(why),
        Exchange::Unknown => Err(("invalid_grant", "unknown authorization code".into())),
        Exchange::Expired => Err(("invalid_grant", "the authorization code has expired".into())),
        Exchange::Reused => Err((
            "invalid_grant",
            "the authorization code was already used; tokens issued from it are revoked".into(),
        )),
    }
}

async fn from_refresh(oauth: &OAuth, req: &TokenRequest, minted: &Minted) -> Result<RefreshGrant, Refusal> {
    let token = required(&req.refresh_token, "refresh_token")?;
    let client_id = required(&req.client_id, "client_id")?.to_owned();
    let hash = crate::secrets::token_hash(token);
    let now = oauth.clock.now();
    let resource = req.resource.clone();
    let check = move |g: &RefreshGrant| -> Result<(), Refusal> {
        let fits = g.client_id == client_id
            && resource
                .as_deref()
                .is_none_or(|r| r.trim_end_matches('/') == g.resource);
        if fits {
            Ok(())
        } else {
            Err((
                "invalid_grant",
                "the refresh token was issued to another client or resource".into(),
            ))
        }
    };
    let tokens = minted.stored.clone();
    let exchanged = oauth
        .store
        .blocking(move |s| s.exchange_refresh(&hash, &now, &tokens.pair(), check))
        .await
        .map_err(server_error)?;
    match exchanged {
        Exchange::Issued(g) => Ok(g),
        Exchange::Refused(why) => Err(why),
        Exchange::Unknown => Err(("invalid_grant", "unknown or revoked refresh token".into())),
        Exchange::Expired => Err(("invalid_grant", "the refresh token has expired; sign in again".into())),
        Exchange::Reused => Err((
            "invalid_grant",
            "the refresh token was already used; this grant is revoked, sign in again".into(),
        )),
    }
}

fn check_resource(requested: Option<&str>, granted: &str) -> Result<(), Refusal> {
    match requested {
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

#[derive(Deserialize)]
pub(super) struct RevokeRequest {
    token: Option<String>,
}

/// RFC 7009: always 200, whether or not the token existed; revoking any token of a
/// grant ends the whole grant.
pub(super) async fn revoke(
    State(oauth): State<OAuth>,
    form: Result<Form<RevokeRequest>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(RevokeRequest { token: Some(token) })) = form else {
        return oauth_error("invalid_request", "token is required");
    };
    let hash = crate::secrets::token_hash(&token);
    let now = oauth.clock.now();
    if let Err(e) = oauth.store.blocking(move |s| s.revoke_oauth_token(&hash, &now)).await {
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
