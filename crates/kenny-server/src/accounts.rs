//! Signing in and out: password checks, sessions, and the first-run superuser.
//! Pure logic over the store; the web layer turns it into pages and cookies.

use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use time::OffsetDateTime;

use crate::principal::{Principal, Role};
use crate::secrets;
use crate::store::{NewSession, Store, StoreError};

pub const SESSION_PREFIX: &str = "kenny_ses_";
/// How long a sign-in lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("wrong user name or password")]
    BadCredentials,
    /// Password right, but the account has a second factor and the code is missing or
    /// wrong (or already used).
    #[error("enter the current code from your authenticator app, or a recovery code")]
    SecondFactor,
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// A session just opened: the cookie value and its CSRF token.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub csrf_token: String,
    pub expires_at: OffsetDateTime,
}

/// Where the request came from, recorded with the session.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub addr: Option<String>,
    pub user_agent: Option<String>,
}

/// Password checks running at once: each takes ~19 MiB and real CPU time, so a flood of
/// sign-in attempts waits here instead of exhausting the machine.
static PASSWORD_CHECKS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// Checks a password against its Argon2id hash on the blocking pool, a few at a time.
pub async fn check_password(hash: String, password: String) -> bool {
    let Ok(_permit) = PASSWORD_CHECKS.acquire().await else {
        return false;
    };
    tokio::task::spawn_blocking(move || verify_password(&hash, &password))
        .await
        .unwrap_or(false)
}

pub fn verify_password(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// Checks a user name, password and (when enabled) TOTP or recovery code, then opens a
/// session. Unknown users cost the same time as wrong passwords, so timing does not
/// reveal which names exist.
pub async fn login(
    store: &Arc<Store>,
    username: &str,
    password: &str,
    code: Option<&str>,
    client: ClientInfo,
) -> Result<Issued, LoginError> {
    let name = username.to_owned();
    let user = store.blocking(move |s| s.user_login(&name)).await?;
    let hash = user
        .as_ref()
        .map_or_else(|| DUMMY_HASH.clone(), |u| u.password_hash.clone());
    let ok = check_password(hash, password.to_owned()).await;
    let user = match user {
        Some(u) if ok && !u.disabled => u,
        _ => return Err(LoginError::BadCredentials),
    };
    if let Some(secret) = &user.totp_secret {
        let code = code
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .ok_or(LoginError::SecondFactor)?;
        if !second_factor_ok(store, user.id, secret, code).await? {
            return Err(LoginError::SecondFactor);
        }
    }
    open_session(store, user.id, client).await
}

/// A TOTP code for a step not used before, or an unused recovery code.
async fn second_factor_ok(store: &Arc<Store>, user_id: i64, secret: &str, code: &str) -> Result<bool, StoreError> {
    let now = crate::clock::unix_secs();
    if let Some(step) = crate::totp::matching_step(secret, code, now) {
        return store.blocking(move |s| s.advance_totp_step(user_id, step)).await;
    }
    let hash = crate::totp::recovery_hash(code);
    store
        .blocking(move |s| s.use_recovery_code(user_id, &hash, &crate::clock::now()))
        .await
}

static DUMMY_HASH: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| secrets::hash_password("kenny-timing-equaliser").unwrap_or_default());

pub async fn open_session(store: &Arc<Store>, user_id: i64, client: ClientInfo) -> Result<Issued, LoginError> {
    let token = secrets::new_token(SESSION_PREFIX);
    let csrf_token = secrets::new_password();
    let now = OffsetDateTime::now_utc();
    let expires_at = now + SESSION_LIFETIME;
    let (hash, csrf, created, expires) = (
        secrets::token_hash(&token),
        csrf_token.clone(),
        crate::clock::format(now),
        crate::clock::format(expires_at),
    );
    store
        .blocking(move |s| {
            s.create_session(&NewSession {
                user_id,
                token_hash: &hash,
                csrf_token: &csrf,
                created_at: &created,
                expires_at: &expires,
                client: client.addr.as_deref(),
                user_agent: client.user_agent.as_deref(),
            })
        })
        .await?;
    Ok(Issued {
        token,
        csrf_token,
        expires_at,
    })
}

/// The principal and CSRF token behind a session cookie, if it is live.
pub async fn session(store: &Arc<Store>, token: &str) -> Option<(Principal, String)> {
    if !token.starts_with(SESSION_PREFIX) {
        return None;
    }
    let hash = secrets::token_hash(token);
    let now = crate::clock::now();
    store
        .blocking(move |s| s.session_principal(&hash, &now))
        .await
        .map_err(|e| tracing::error!(error = %e, "session lookup failed"))
        .ok()
        .flatten()
}

/// First-run set-up: creates the first superuser, only while no account exists (checked
/// in the same transaction as the insert, so two racing set-ups cannot both succeed).
pub async fn create_first_superuser(store: &Arc<Store>, username: &str, password: &str) -> anyhow::Result<i64> {
    let (name, pw) = (username.to_owned(), password.to_owned());
    let hash =
        tokio::task::spawn_blocking(move || crate::admin::checked_password_hash(&name, Role::Superuser, &[], &pw))
            .await??;
    let name = username.to_owned();
    Ok(store
        .blocking(move |s| s.create_first_user(&name, &hash, Role::Superuser, &crate::clock::now()))
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn login_opens_a_session_and_refuses_bad_or_disabled_accounts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        create_first_superuser(&store, "root", "correct horse").await.unwrap();
        assert!(
            create_first_superuser(&store, "again", "correct horse").await.is_err(),
            "set-up runs once"
        );

        let issued = login(&store, "root", "correct horse", None, ClientInfo::default())
            .await
            .unwrap();
        let (who, csrf) = session(&store, &issued.token).await.expect("live session");
        assert_eq!((who.username.as_str(), who.role), ("root", Role::Superuser));
        assert_eq!(csrf, issued.csrf_token);
        assert!(matches!(
            login(&store, "root", "wrong", None, ClientInfo::default()).await,
            Err(LoginError::BadCredentials)
        ));
        assert!(matches!(
            login(&store, "nobody", "x", None, ClientInfo::default()).await,
            Err(LoginError::BadCredentials)
        ));
        assert!(session(&store, "kenny_ses_forged").await.is_none());
        assert!(session(&store, "kenny_pat_wrongkind").await.is_none());

        let id: i64 = who.credential_id.parse().unwrap();
        assert!(store.revoke_session(id, &crate::clock::now()).unwrap());
        assert!(
            session(&store, &issued.token).await.is_none(),
            "revoked sessions are dead"
        );
    }
}
