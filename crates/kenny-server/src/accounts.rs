//! Signing in and out: password checks, sessions, and the first-run superuser.
//! Pure logic over the store; the web layer turns it into pages and cookies.
//! [`Accounts`] is what the handlers for people's accounts and credentials share.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::auth::Authenticator;
use crate::clock::Clock;
use crate::device::DeviceKey;
use crate::principal::{Principal, Role};
use crate::ratelimit::{Caller, SignInThrottle};
use crate::secrets;
use crate::store::{NewSession, Store, StoreError};

/// People and their credentials: accounts in the store, sessions, bearer tokens, and
/// the throttle and device cookies that stand between a password guesser and an
/// account. The sign-in pages, `/api/me`, `/api/users` and the guards in front of
/// `/api` and `/mcp` work with this.
#[derive(Clone)]
pub struct Accounts {
    pub store: Arc<Store>,
    /// What time it is for session and token expiry; see [`crate::clock::Clock`].
    pub clock: Clock,
    /// Resolves bearer tokens (personal access tokens, OAuth access tokens).
    pub auth: Arc<Authenticator>,
    /// Failed password checks (sign-in and re-checks) per caller and per account.
    pub login_limiter: Arc<SignInThrottle>,
    /// Signs the device cookies of browsers that signed in before.
    pub device_key: DeviceKey,
}

pub(crate) const SESSION_PREFIX: &str = "kenny_ses_";
/// How long a sign-in lasts.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    #[error("wrong user name or password")]
    BadCredentials,
    /// Password right, but the account has a second factor and the code is missing or
    /// wrong (or already used).
    #[error("enter the current code from your authenticator app, or a recovery code")]
    SecondFactor,
    /// Too many failures: from this caller, or (`account`) for this account from
    /// browsers it has never signed in from.
    #[error("too many failed attempts; try again in {} seconds", wait.as_secs().max(1))]
    Throttled { wait: Duration, account: bool },
    /// Too many wrong second-factor codes for this account, from callers who had its
    /// password, whatever their addresses ([`crate::ratelimit::SECOND_FACTOR_LIMIT`]).
    #[error(
        "too many wrong authenticator or recovery codes for this account; try again in {} seconds",
        wait.as_secs().max(1)
    )]
    SecondFactorThrottled { wait: Duration },
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// A session just opened: the cookie value (its CSRF token is read with the session).
#[derive(Debug, Clone)]
pub(crate) struct Issued {
    pub token: String,
}

/// Where the request came from, recorded with the session.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientInfo {
    pub addr: Option<String>,
    pub user_agent: Option<String>,
}

/// One sign-in attempt, as the web layer hands it over.
pub(crate) struct Attempt<'a> {
    pub username: &'a str,
    pub password: &'a str,
    pub code: Option<&'a str>,
    pub client: ClientInfo,
    /// The throttle key of the client's address ([`crate::ratelimit::client_key`]).
    pub client_key: String,
    /// For an account id: the device id of a valid device cookie the browser holds
    /// for it, if any.
    pub device: &'a (dyn Fn(i64) -> Option<String> + Sync),
}

/// A successful sign-in: the session, and whose it is (for the device cookie).
#[derive(Debug, Clone)]
pub(crate) struct SignedIn {
    pub issued: Issued,
    pub user_id: i64,
}

/// Checks a user name, password and (when enabled) TOTP or recovery code under the
/// sign-in throttle, then opens a session. Unknown users cost the same time as wrong
/// passwords, so timing does not reveal which names exist.
///
/// The throttle first judges the caller: a browser with a device cookie for the
/// account by that cookie alone, anyone else by address and by address-and-account.
/// Callers without a device cookie are then judged by the account-wide count too;
/// when that is at its limit, only an attempt carrying a valid second factor (checked,
/// and used up, before the password) goes on. Nothing a stranger does therefore stops
/// the owner signing in from a browser they used before, or with their authenticator.
///
/// Wrong second-factor codes from callers who had the password are counted per
/// account, whatever the caller; past [`crate::ratelimit::SECOND_FACTOR_LIMIT`] the
/// second-factor step is refused for everyone until the window passes, so the password
/// alone cannot be used to guess the code from many addresses.
pub(crate) async fn login(
    store: &Arc<Store>,
    clock: &Clock,
    throttle: &SignInThrottle,
    attempt: Attempt<'_>,
) -> Result<SignedIn, LoginError> {
    let name = attempt.username.to_owned();
    let user = store.blocking(move |s| s.user_login(&name)).await?;
    let caller = match user.as_ref().and_then(|u| (attempt.device)(u.id)) {
        Some(device) => Caller::Device(device),
        None => Caller::Address(attempt.client_key.clone()),
    };
    let account = attempt.username;
    let now = Instant::now();
    throttle
        .caller(&caller, account, now)
        .map_err(|wait| LoginError::Throttled { wait, account: false })?;
    let code = attempt.code.map(str::trim).filter(|c| !c.is_empty());
    let mut second_factor_done = false;
    let counted_account = matches!(caller, Caller::Address(_));
    if counted_account && let Err(wait) = throttle.account(account, now) {
        let throttled = LoginError::Throttled { wait, account: true };
        let totp = user.as_ref().and_then(|u| Some((u.id, u.totp_secret.clone()?)));
        let (Some((id, secret)), Some(code)) = (totp, code) else {
            return Err(throttled);
        };
        throttle
            .second_factor(account, now)
            .map_err(|wait| LoginError::SecondFactorThrottled { wait })?;
        if !second_factor_ok(store, clock, id, secret.expose(), code).await? {
            // Only a wrong code from someone who had the password counts against the
            // account's code guesses: a stranger's guesses must not lock the owner's
            // authenticator out. The password is checked either way and the answer is
            // the same, so this says nothing about the password.
            let hash = user.as_ref().map(|u| u.password_hash.clone()).unwrap_or_default();
            if !crate::passwords::verify(hash, attempt.password.to_owned()).await {
                throttle.second_factor_forgiven(account);
            }
            return Err(throttled);
        }
        throttle.second_factor_forgiven(account);
        throttle.count_account(account, now);
        second_factor_done = true;
    }
    let hash = match &user {
        Some(u) => u.password_hash.clone(),
        None => dummy_hash().await,
    };
    let ok = crate::passwords::verify(hash, attempt.password.to_owned()).await;
    let user = match user {
        Some(u) if ok && !u.disabled => u,
        _ => return Err(LoginError::BadCredentials),
    };
    if let Some(secret) = &user.totp_secret
        && !second_factor_done
    {
        // A missing code is the form asking for it, not a guess.
        let code = code.ok_or(LoginError::SecondFactor)?;
        throttle
            .second_factor(account, now)
            .map_err(|wait| LoginError::SecondFactorThrottled { wait })?;
        if !second_factor_ok(store, clock, user.id, secret.expose(), code).await? {
            return Err(LoginError::SecondFactor);
        }
    }
    if user.totp_secret.is_some() {
        throttle.second_factor_succeeded(account);
    }
    throttle.succeeded(&caller, account, counted_account);
    let issued = open_session(store, clock, user.id, attempt.client).await?;
    Ok(SignedIn {
        issued,
        user_id: user.id,
    })
}

/// A TOTP code for a step not used before, or an unused recovery code.
async fn second_factor_ok(
    store: &Arc<Store>,
    clock: &Clock,
    user_id: i64,
    secret: &str,
    code: &str,
) -> Result<bool, StoreError> {
    let now = clock.unix_secs();
    if let Some(step) = crate::totp::matching_step(secret, code, now) {
        return store.blocking(move |s| s.advance_totp_step(user_id, step)).await;
    }
    let hash = crate::totp::recovery_hash(code);
    let now = clock.now();
    store.blocking(move |s| s.use_recovery_code(user_id, &hash, &now)).await
}

/// A real hash to check unknown user names against, so they cost what a wrong password
/// costs.
async fn dummy_hash() -> String {
    static DUMMY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    DUMMY
        .get_or_init(|| async {
            crate::passwords::hash("kenny-timing-equaliser".into())
                .await
                .unwrap_or_default()
        })
        .await
        .clone()
}

pub(crate) async fn open_session(
    store: &Arc<Store>,
    clock: &Clock,
    user_id: i64,
    client: ClientInfo,
) -> Result<Issued, LoginError> {
    let token = secrets::new_token(SESSION_PREFIX);
    let csrf_token = secrets::new_password();
    let now = clock.now_utc();
    let expires_at = now + SESSION_LIFETIME;
    let (hash, csrf, created, expires) = (
        secrets::token_hash(&token),
        csrf_token,
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
    Ok(Issued { token })
}

/// The principal and CSRF token behind a session cookie, if it is live.
pub(crate) async fn session(store: &Arc<Store>, clock: &Clock, token: &str) -> Option<(Principal, String)> {
    if !token.starts_with(SESSION_PREFIX) {
        return None;
    }
    let hash = secrets::token_hash(token);
    let now = clock.now();
    store
        .blocking(move |s| s.session_principal(&hash, &now))
        .await
        .map_err(|e| tracing::error!(error = %e, "session lookup failed"))
        .ok()
        .flatten()
}

/// First-run set-up: creates the first superuser, only while no account exists (checked
/// in the same transaction as the insert, so two racing set-ups cannot both succeed).
pub(crate) async fn create_first_superuser(
    store: &Arc<Store>,
    clock: &Clock,
    username: &str,
    password: &str,
) -> anyhow::Result<i64> {
    crate::admin::check_new_user(username, Role::Superuser, &[], password)?;
    // Refuse before the slow hash: a flood of late set-up posts costs nothing.
    if store.blocking(|s| s.count_users()).await? > 0 {
        anyhow::bail!("set-up is already done: an account exists; sign in instead");
    }
    let hash = crate::passwords::hash(password.to_owned()).await?;
    let name = username.to_owned();
    Ok(store
        .blocking({
            let now = clock.now();
            move |s| s.create_first_user(&name, &hash, Role::Superuser, &now)
        })
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn login_opens_a_session_and_refuses_bad_or_disabled_accounts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        create_first_superuser(&store, &Clock::system(), "root", "correct horse")
            .await
            .unwrap();
        assert!(
            create_first_superuser(&store, &Clock::system(), "again", "correct horse")
                .await
                .is_err(),
            "set-up runs once"
        );

        let throttle = SignInThrottle::default();
        let no_device = |_: i64| None;
        let attempt = |password: &'static str, name: &'static str| Attempt {
            username: name,
            password,
            code: None,
            client: ClientInfo::default(),
            client_key: "ip:127.0.0.1".into(),
            device: &no_device,
        };
        let issued = login(&store, &Clock::system(), &throttle, attempt("correct horse", "root"))
            .await
            .unwrap()
            .issued;
        let (who, csrf) = session(&store, &Clock::system(), &issued.token)
            .await
            .expect("live session");
        assert_eq!((who.username.as_str(), who.role), ("root", Role::Superuser));
        assert!(csrf.len() >= 16, "a session carries its own CSRF token");
        assert!(matches!(
            login(&store, &Clock::system(), &throttle, attempt("wrong", "root")).await,
            Err(LoginError::BadCredentials)
        ));
        assert!(matches!(
            login(&store, &Clock::system(), &throttle, attempt("x", "nobody")).await,
            Err(LoginError::BadCredentials)
        ));
        assert!(session(&store, &Clock::system(), "kenny_ses_forged").await.is_none());
        assert!(session(&store, &Clock::system(), "kenny_pat_wrongkind").await.is_none());

        let id: i64 = who.credential_id.parse().unwrap();
        assert!(store.revoke_session(id, &crate::clock::now()).unwrap());
        assert!(
            session(&store, &Clock::system(), &issued.token).await.is_none(),
            "revoked sessions are dead"
        );
    }

    /// A user with TOTP on whose every authenticator code counts as a replay (so any
    /// code is wrong, whatever the clock says), and one recovery code that is right.
    async fn user_with_second_factor(store: &Arc<Store>, name: &str) -> &'static str {
        const RECOVERY: &str = "abcd-2345";
        let hash = crate::passwords::hash("correct horse".into()).await.unwrap();
        let now = crate::clock::now();
        let id = store.create_user(name, &hash, Role::Operator, &[], &now).unwrap();
        let secret = crate::totp::new_secret();
        store.set_totp_pending(id, &secret).unwrap();
        store
            .enable_totp(id, &secret, i64::MAX, &[crate::totp::recovery_hash(RECOVERY)])
            .unwrap();
        RECOVERY
    }

    async fn try_login(
        store: &Arc<Store>,
        throttle: &SignInThrottle,
        name: &str,
        password: &str,
        code: &str,
        client_key: String,
    ) -> Result<SignedIn, LoginError> {
        let no_device = |_: i64| None;
        let attempt = Attempt {
            username: name,
            password,
            code: Some(code),
            client: ClientInfo::default(),
            client_key,
            device: &no_device,
        };
        login(store, &Clock::system(), throttle, attempt).await
    }

    #[tokio::test]
    async fn the_password_alone_cannot_guess_the_second_factor_from_many_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let recovery = user_with_second_factor(&store, "kim").await;
        let throttle = SignInThrottle::default();
        let max = crate::ratelimit::SECOND_FACTOR_LIMIT.max;
        // Every guess from an address of its own, past the account-wide sign-in limit
        // too, where the code is checked before the password.
        let guesses = crate::ratelimit::ACCOUNT_LIMIT.max + 5;
        for i in 0..guesses {
            let r = try_login(
                &store,
                &throttle,
                "kim",
                "correct horse",
                "000000",
                format!("ip:10.0.0.{i}"),
            )
            .await;
            if i < max {
                assert!(matches!(r, Err(LoginError::SecondFactor)), "guess {i}: {r:?}");
            } else {
                assert!(
                    matches!(r, Err(LoginError::SecondFactorThrottled { .. })),
                    "guess {i} is not even checked: {r:?}"
                );
            }
        }
        // The right code is refused too now, saying when to retry, and is not used up.
        let r = try_login(
            &store,
            &throttle,
            "kim",
            "correct horse",
            recovery,
            "ip:10.0.1.1".into(),
        )
        .await;
        let Err(e @ LoginError::SecondFactorThrottled { wait }) = r else {
            panic!("the account's second factor waits: {r:?}");
        };
        assert!(wait > Duration::ZERO && wait <= crate::ratelimit::SECOND_FACTOR_LIMIT.window);
        assert!(e.to_string().contains("try again in"), "{e}");
        let id = store.user_login("kim").unwrap().unwrap().id;
        let hash = crate::totp::recovery_hash(recovery);
        assert!(store.use_recovery_code(id, &hash, &crate::clock::now()).unwrap());
    }

    #[tokio::test]
    async fn a_strangers_wrong_codes_do_not_lock_out_the_owners_second_factor() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let recovery = user_with_second_factor(&store, "kim").await;
        let throttle = SignInThrottle::default();
        // Wrong passwords from many addresses trip the account-wide limit; then wrong
        // codes with wrong passwords, as many as the code limit and more.
        let (account, codes) = (
            crate::ratelimit::ACCOUNT_LIMIT.max,
            crate::ratelimit::SECOND_FACTOR_LIMIT.max * 2,
        );
        for i in 0..account + codes {
            let r = try_login(
                &store,
                &throttle,
                "kim",
                "guess",
                "000000",
                format!("ip:10.0.{}.{}", i / 4, i % 4),
            )
            .await;
            assert!(
                matches!(
                    r,
                    Err(LoginError::SecondFactor | LoginError::BadCredentials | LoginError::Throttled { .. })
                ),
                "attempt {i}: {r:?}"
            );
        }
        let r = try_login(
            &store,
            &throttle,
            "kim",
            "correct horse",
            recovery,
            "ip:192.0.2.1".into(),
        )
        .await;
        assert!(r.is_ok(), "the owner's recovery code still works: {r:?}");
    }

    #[tokio::test]
    async fn a_sign_in_with_the_second_factor_restarts_the_count_of_wrong_codes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let recovery = user_with_second_factor(&store, "kim").await;
        let throttle = SignInThrottle::default();
        let max = crate::ratelimit::SECOND_FACTOR_LIMIT.max;
        for i in 0..max - 1 {
            let r = try_login(
                &store,
                &throttle,
                "kim",
                "correct horse",
                "000000",
                format!("ip:10.0.0.{i}"),
            )
            .await;
            assert!(matches!(r, Err(LoginError::SecondFactor)), "{r:?}");
        }
        let r = try_login(
            &store,
            &throttle,
            "kim",
            "correct horse",
            recovery,
            "ip:10.0.1.1".into(),
        )
        .await;
        assert!(r.is_ok(), "{r:?}");
        for i in 0..max {
            let r = try_login(
                &store,
                &throttle,
                "kim",
                "correct horse",
                "000000",
                format!("ip:10.0.2.{i}"),
            )
            .await;
            assert!(
                matches!(r, Err(LoginError::SecondFactor)),
                "guess {i} after the sign-in: {r:?}"
            );
        }
    }
}
