//! Bearer authentication for `/mcp` and `/api`: resolves a personal access token to a
//! principal.
//!
//! Lookups are cached in memory for a short time so the hot path never touches SQLite,
//! and `last_used_at` is coalesced and written in the background: a busy client must
//! not turn every request into a database write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};

use crate::audit::AuditLog;
use crate::clock::Clock;
use crate::principal::{CredentialKind, Principal};
use crate::secrets;
use crate::store::Store;

/// How long a resolved token is trusted without asking the database again.
const CACHE_TTL: Duration = Duration::from_secs(10);
const CACHE_MAX: usize = 10_000;

pub struct Authenticator {
    store: Arc<Store>,
    /// The MCP resource URL: OAuth access tokens must have been issued for it.
    resource: String,
    cache: RwLock<HashMap<String, (Principal, Instant)>>,
    touched: Mutex<HashMap<i64, String>>,
    clock: Clock,
    /// In a cluster: told whenever cached lookups are dropped here, so that the other
    /// replicas drop theirs.
    forgotten: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Authenticator {
    pub fn new(store: Arc<Store>, resource: String, clock: Clock) -> Self {
        Authenticator {
            store,
            resource,
            cache: RwLock::new(HashMap::new()),
            touched: Mutex::new(HashMap::new()),
            clock,
            forgotten: std::sync::OnceLock::new(),
        }
    }

    /// Calls `told` whenever [`Self::forget_cached`] drops the cached lookups.
    pub fn on_forget(&self, told: impl Fn() + Send + Sync + 'static) {
        let _ = self.forgotten.set(Box::new(told));
    }

    /// The principal a bearer token stands for, or `None` if it is not a live token.
    pub async fn principal(&self, token: &str) -> Option<Principal> {
        if token.starts_with(secrets::ACCESS_TOKEN_PREFIX) {
            return self.oauth_principal(token).await;
        }
        if !token.starts_with(secrets::PAT_PREFIX) {
            return None;
        }
        let hash = secrets::token_hash(token);
        let cached = self.cache.read().unwrap_or_else(|p| p.into_inner()).get(&hash).cloned();
        let principal = match cached {
            Some((p, at)) if at.elapsed() < CACHE_TTL => p,
            _ => {
                let h = hash.clone();
                let found = self
                    .store
                    .blocking(move |s| s.principal_for_token(CredentialKind::Pat, &h))
                    .await
                    .map_err(|e| tracing::error!(error = %e, "token lookup failed"))
                    .ok()??;
                let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= CACHE_MAX {
                    cache.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
                }
                cache.insert(hash, (found.clone(), Instant::now()));
                found
            }
        };
        if let Ok(id) = principal.credential_id.parse() {
            self.touched
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, self.clock.now());
        }
        Some(principal)
    }

    /// OAuth access tokens are looked up every time (no cache): they expire and are
    /// revoked by grant, and either must take effect at once.
    async fn oauth_principal(&self, token: &str) -> Option<Principal> {
        let (hash, resource, now) = (secrets::token_hash(token), self.resource.clone(), self.clock.now());
        self.store
            .blocking(move |s| s.oauth_principal(&hash, &resource, &now))
            .await
            .map_err(|e| tracing::error!(error = %e, "OAuth token lookup failed"))
            .ok()?
    }

    /// Drops every cached lookup, so a revocation or a change of role, hosts or
    /// disabled flag applies to the very next request.
    pub fn forget_cached(&self) {
        self.forget_cached_here();
        if let Some(told) = self.forgotten.get() {
            told();
        }
    }

    /// [`Self::forget_cached`] on this replica only (another replica asked).
    pub fn forget_cached_here(&self) {
        self.cache.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Hands coalesced token-use times to the audit writer; run periodically.
    pub async fn flush_touched(&self, audit: &AuditLog) {
        let touched: Vec<_> = std::mem::take(&mut *self.touched.lock().unwrap_or_else(|p| p.into_inner()))
            .into_iter()
            .collect();
        if !touched.is_empty() {
            audit.touch_tokens(touched).await;
        }
    }
}

/// The token in `Authorization: Bearer <token>`, if any.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_parsing() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer kenny_pat_x"));
        assert_eq!(bearer(&h), Some("kenny_pat_x"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("bearer   kenny_pat_y "));
        assert_eq!(bearer(&h), Some("kenny_pat_y"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&h), None);
    }
}
