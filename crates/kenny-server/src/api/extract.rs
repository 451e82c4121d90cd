//! What an `/api` handler takes from a request besides its path: who is calling
//! ([`SignedIn`], or [`Superuser`] for calls only a superuser may make) and a JSON body
//! ([`JsonBody`], and [`patched`] for a body that changes some of a settings object's
//! fields). Each refuses with an [`ApiError`], so every refusal an API client
//! sees, a malformed body included, is the same JSON shape.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::principal::{Principal, Role};

/// The caller, as `guard::require_principal` or `guard::require_bearer` resolved it.
pub(crate) struct SignedIn(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for SignedIn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .map(SignedIn)
            .ok_or_else(|| {
                // Only reachable for a route mounted outside the guard: a bug, said plainly.
                tracing::error!(path = %parts.uri.path(), "an API handler ran without a principal");
                ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "authentication required: sign in, or send Authorization: Bearer <token>",
                )
            })
    }
}

/// A caller with the superuser role; anyone else is refused with 403.
pub(crate) struct Superuser(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for Superuser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let SignedIn(who) = SignedIn::from_request_parts(parts, state).await?;
        if who.role == Role::Superuser {
            return Ok(Superuser(who));
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "only a superuser may {} {}; {} is a {}",
                parts.method,
                parts.uri.path(),
                who.username,
                who.role.as_str()
            ),
        ))
    }
}

/// A request body a handler takes, with the shape it expects written out for the
/// error a client gets when its body does not parse.
pub(crate) trait BodyShape {
    /// The body as a client would write it, e.g. `{"agent_id": "..."}`.
    const SHAPE: &'static str;
}

/// A JSON body of type `T`; anything else (no JSON content type, malformed JSON, a
/// missing or unknown field) is a 400 that shows the shape the call takes.
pub(crate) struct JsonBody<T>(pub T);

impl<T, S> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned + BodyShape,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(body)) => Ok(JsonBody(body)),
            Err(rejection) => Err(ApiError::bad_request(format!(
                "body must be {}: {}",
                T::SHAPE,
                rejection.body_text()
            ))),
        }
    }
}

/// `patch` (some of a settings object's fields) laid over `current`: a field it does
/// not name keeps its value, a field `current` does not have is refused by name (a
/// `noun`, listing the known ones), and the result must still read as a `T`. The
/// caller checks the values.
pub(crate) fn patched<T: serde::Serialize + DeserializeOwned>(
    current: &T,
    patch: serde_json::Map<String, serde_json::Value>,
    noun: &str,
) -> Result<T, String> {
    let mut all = match serde_json::to_value(current) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => return Err(format!("the current {noun}s cannot be read")),
    };
    for (key, value) in patch {
        if !all.contains_key(&key) {
            let known: Vec<&str> = all.keys().map(String::as_str).collect();
            return Err(format!(
                "unknown {noun} `{}`; known: {}",
                crate::health::clean(&key, 40),
                known.join(", ")
            ));
        }
        all.insert(key, value);
    }
    serde_json::from_value(serde_json::Value::Object(all)).map_err(|e| e.to_string())
}
