//! Failure throttling: failures counted per key over a sliding window; past a key's
//! limit, attempts are refused before anything is checked.
//!
//! [`SignInThrottle`] is what password checks go through (sign-in and the password
//! re-checks of a signed-in person). It counts failures per caller and per account,
//! arranged so that nobody can lock an account's owner out from outside:
//! - a caller is a client address (with the pair client-and-account), or, better, a
//!   browser that proves it signed in to this account before (a device cookie), or a
//!   signed-in session; each caller's failures only ever block that caller;
//! - the account-wide count (against guessing spread over many addresses) never blocks
//!   a browser with a device cookie, nor an attempt that carries a valid second factor;
//! - wrong second-factor codes are counted per account whatever the caller (address,
//!   device or session), but only from callers who got the password right, so only a
//!   holder of the password can use up the account's code guesses.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How many failures a key may have within a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub max: usize,
    pub window: Duration,
}

/// Keys kept at most; past this, aged-out keys are forgotten (a spray of distinct keys
/// must not grow memory without bound).
const MAX_KEYS: usize = 100_000;

pub struct FailureLimiter {
    limit: Limit,
    failures: Mutex<HashMap<String, Failures>>,
    /// In a cluster: where this limiter's counting goes, so every replica counts the
    /// same failures (a guesser behind a round-robin balancer gets one allowance, not
    /// one per replica).
    mirror: OnceLock<Box<dyn Fn(Counted) + Send + Sync>>,
}

/// What one limiter counted, as another replica applies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Counted {
    /// A failure for each key, under its limit.
    Failed { keys: Vec<CountedKey> },
    /// [`FailureLimiter::succeeded`].
    Succeeded { reset: Vec<String>, forgive: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountedKey {
    pub key: String,
    pub max: usize,
    pub window_ms: u64,
}

struct Failures {
    window: Duration,
    at: VecDeque<Instant>,
}

impl FailureLimiter {
    pub fn new(max_failures: usize, window: Duration) -> Self {
        FailureLimiter {
            limit: Limit {
                max: max_failures,
                window,
            },
            failures: Mutex::new(HashMap::new()),
            mirror: OnceLock::new(),
        }
    }

    /// Hands everything this limiter counts from now on to `mirror` as well.
    pub fn mirror_to(&self, mirror: impl Fn(Counted) + Send + Sync + 'static) {
        let _ = self.mirror.set(Box::new(mirror));
    }

    /// Applies what another replica's limiter counted, at `now` here.
    pub fn apply(&self, counted: Counted, now: Instant) {
        match counted {
            Counted::Failed { keys } => {
                let keyed: Vec<(&str, Limit)> = keys
                    .iter()
                    .map(|k| {
                        let limit = Limit {
                            max: k.max,
                            window: Duration::from_millis(k.window_ms),
                        };
                        (k.key.as_str(), limit)
                    })
                    .collect();
                count(
                    &mut self.failures.lock().unwrap_or_else(|p| p.into_inner()),
                    &keyed,
                    now,
                );
            }
            Counted::Succeeded { reset, forgive } => {
                let reset: Vec<&str> = reset.iter().map(String::as_str).collect();
                let forgive: Vec<&str> = forgive.iter().map(String::as_str).collect();
                forget(
                    &mut self.failures.lock().unwrap_or_else(|p| p.into_inner()),
                    &reset,
                    &forgive,
                );
            }
        }
    }

    fn mirror_failed(&self, keys: &[(&str, Limit)]) {
        if let Some(mirror) = self.mirror.get() {
            mirror(Counted::Failed {
                keys: keys
                    .iter()
                    .map(|(k, l)| CountedKey {
                        key: (*k).to_owned(),
                        max: l.max,
                        window_ms: u64::try_from(l.window.as_millis()).unwrap_or(u64::MAX),
                    })
                    .collect(),
            });
        }
    }

    /// Reserves an attempt for `keys`, each under this limiter's limit.
    pub fn attempt(&self, keys: &[&str], now: Instant) -> Result<(), Duration> {
        let keyed: Vec<(&str, Limit)> = keys.iter().map(|k| (*k, self.limit)).collect();
        self.attempt_limited(&keyed, now)
    }

    /// Reserves an attempt: refused with how long to wait if any key is at its limit;
    /// otherwise counted as a failure for every key right away, so parallel attempts
    /// cannot all slip in before the first failure is recorded. Call
    /// [`Self::succeeded`] if it turns out right.
    pub fn attempt_limited(&self, keys: &[(&str, Limit)], now: Instant) -> Result<(), Duration> {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() > MAX_KEYS {
            failures.retain(|_, f| {
                prune(f, now);
                !f.at.is_empty()
            });
        }
        let mut wait = None;
        for (k, limit) in keys {
            if let Some(f) = failures.get_mut(*k) {
                f.window = limit.window;
                prune(f, now);
                if f.at.len() >= limit.max {
                    wait = wait.max(Some(limit.window.saturating_sub(now - f.at[0])));
                }
            }
        }
        if let Some(wait) = wait {
            return Err(wait);
        }
        count(&mut failures, keys, now);
        drop(failures);
        self.mirror_failed(keys);
        Ok(())
    }

    /// Counts a failure for `keys` without asking whether they are at their limit (an
    /// attempt let through by something stronger than the count).
    pub fn record(&self, keys: &[(&str, Limit)], now: Instant) {
        count(&mut self.failures.lock().unwrap_or_else(|p| p.into_inner()), keys, now);
        self.mirror_failed(keys);
    }

    /// The reserved attempt was right: the `reset` keys' counts restart ("in a row"
    /// means in a row), and the attempt is taken back from the `forgive` keys (e.g. the
    /// client's, so that one good sign-in does not wipe a client's record of failures).
    pub fn succeeded(&self, reset: &[&str], forgive: &[&str]) {
        forget(
            &mut self.failures.lock().unwrap_or_else(|p| p.into_inner()),
            reset,
            forgive,
        );
        if let Some(mirror) = self.mirror.get() {
            mirror(Counted::Succeeded {
                reset: reset.iter().map(|k| (*k).to_owned()).collect(),
                forgive: forgive.iter().map(|k| (*k).to_owned()).collect(),
            });
        }
    }
}

fn forget(failures: &mut HashMap<String, Failures>, reset: &[&str], forgive: &[&str]) {
    for k in reset {
        failures.remove(*k);
    }
    for k in forgive {
        if let Some(f) = failures.get_mut(*k) {
            f.at.pop_back();
        }
    }
}

fn count(failures: &mut HashMap<String, Failures>, keys: &[(&str, Limit)], now: Instant) {
    for (k, limit) in keys {
        failures
            .entry((*k).to_owned())
            .or_insert_with(|| Failures {
                window: limit.window,
                at: VecDeque::new(),
            })
            .at
            .push_back(now);
    }
}

fn prune(f: &mut Failures, now: Instant) {
    while f.at.front().is_some_and(|t| now.duration_since(*t) >= f.window) {
        f.at.pop_front();
    }
}

/// The throttling key of a client address: IPv6 clients by /64, since one host
/// usually holds a whole /64.
pub(crate) fn client_key(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => format!("ip:{v4}"),
        std::net::IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("ip:{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

/// Who is trying a password, as the throttle tells callers apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A browser or client known only by its address ([`client_key`]).
    Address(String),
    /// A browser holding a valid device cookie for the account (the cookie's id).
    Device(String),
    /// A signed-in session re-checking its own password (the session id).
    Session(i64),
}

/// Failures one address may have over every account (a client trying many names).
pub(crate) const ADDRESS_LIMIT: Limit = Limit {
    max: 20,
    window: Duration::from_secs(60),
};
/// Failures one caller may have for one account: the familiar "five wrong passwords
/// in a minute".
pub(crate) const CALLER_LIMIT: Limit = Limit {
    max: 5,
    window: Duration::from_secs(60),
};
/// Failures an account may have from browsers it has never signed in from, whatever
/// their addresses: bounds guessing spread over many addresses.
pub(crate) const ACCOUNT_LIMIT: Limit = Limit {
    max: 20,
    window: Duration::from_secs(600),
};

/// Wrong authenticator or recovery codes an account may have, from anyone who had its
/// password, whatever their addresses: with one step of clock skew each guess of a
/// 6-digit code hits 3 in a million, so this keeps a password holder's odds of
/// guessing the code under 0.3% a day.
pub(crate) const SECOND_FACTOR_LIMIT: Limit = Limit {
    max: 5,
    window: Duration::from_secs(900),
};

/// The throttle of every password check; see the module documentation.
pub struct SignInThrottle {
    failures: FailureLimiter,
}

impl Default for SignInThrottle {
    fn default() -> Self {
        SignInThrottle {
            failures: FailureLimiter::new(CALLER_LIMIT.max, CALLER_LIMIT.window),
        }
    }
}

impl SignInThrottle {
    /// See [`FailureLimiter::mirror_to`].
    pub fn mirror_to(&self, mirror: impl Fn(Counted) + Send + Sync + 'static) {
        self.failures.mirror_to(mirror);
    }

    /// See [`FailureLimiter::apply`].
    pub fn apply(&self, counted: Counted, now: Instant) {
        self.failures.apply(counted, now);
    }

    /// Reserves an attempt against the caller's own counts.
    pub fn caller(&self, caller: &Caller, account: &str, now: Instant) -> Result<(), Duration> {
        let keys = caller_keys(caller, account);
        let keyed: Vec<(&str, Limit)> = keys.iter().map(|(k, l)| (k.as_str(), *l)).collect();
        self.failures.attempt_limited(&keyed, now)
    }

    /// Reserves an attempt against the account-wide count; refused with how long to
    /// wait when the account is at its limit.
    pub fn account(&self, account: &str, now: Instant) -> Result<(), Duration> {
        self.failures
            .attempt_limited(&[(&account_key(account), ACCOUNT_LIMIT)], now)
    }

    /// Counts an attempt that a valid second factor let past the account-wide limit.
    pub fn count_account(&self, account: &str, now: Instant) {
        self.failures.record(&[(&account_key(account), ACCOUNT_LIMIT)], now);
    }

    /// Reserves a second-factor check against the account's count of wrong codes;
    /// refused with how long to wait when the account is at its limit. Give it back
    /// with [`Self::second_factor_forgiven`] when the code was right or the caller did
    /// not have the password; [`Self::second_factor_succeeded`] restarts the count.
    pub fn second_factor(&self, account: &str, now: Instant) -> Result<(), Duration> {
        self.failures
            .attempt_limited(&[(&second_factor_key(account), SECOND_FACTOR_LIMIT)], now)
    }

    /// Takes back a reservation of [`Self::second_factor`].
    pub fn second_factor_forgiven(&self, account: &str) {
        self.failures.succeeded(&[], &[&second_factor_key(account)]);
    }

    /// A sign-in with the password and a second factor succeeded: the account's count
    /// of wrong codes restarts.
    pub fn second_factor_succeeded(&self, account: &str) {
        self.failures.succeeded(&[&second_factor_key(account)], &[]);
    }

    /// The attempt was right: the caller's count for this account restarts, and the
    /// attempt is taken back from the address and account counts it was added to.
    pub fn succeeded(&self, caller: &Caller, account: &str, counted_account: bool) {
        let keys = caller_keys(caller, account);
        let (reset, mut forgive): (Vec<&str>, Vec<&str>) = match caller {
            Caller::Address(_) => (vec![keys[1].0.as_str()], vec![keys[0].0.as_str()]),
            Caller::Device(_) | Caller::Session(_) => (vec![keys[0].0.as_str()], vec![]),
        };
        let account_key = account_key(account);
        if counted_account {
            forgive.push(&account_key);
        }
        self.failures.succeeded(&reset, &forgive);
    }
}

fn account_key(account: &str) -> String {
    format!("user:{}", account.to_lowercase())
}

fn second_factor_key(account: &str) -> String {
    format!("2fa:{}", account.to_lowercase())
}

fn caller_keys(caller: &Caller, account: &str) -> Vec<(String, Limit)> {
    let account = account.to_lowercase();
    match caller {
        Caller::Address(addr) => vec![
            (addr.clone(), ADDRESS_LIMIT),
            (format!("{addr}|user:{account}"), CALLER_LIMIT),
        ],
        Caller::Device(id) => vec![(format!("device:{id}"), CALLER_LIMIT)],
        Caller::Session(id) => vec![(format!("session:{id}"), CALLER_LIMIT)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two replicas' limiters, each mirrored into the other as the cluster carries
    /// them (through JSON): failures and successes on either count on both.
    #[test]
    fn a_mirrored_limiter_counts_what_the_other_counted() {
        let here = FailureLimiter::new(3, Duration::from_secs(60));
        let there = std::sync::Arc::new(FailureLimiter::new(3, Duration::from_secs(60)));
        let sent = std::sync::Arc::new(Mutex::new(Vec::new()));
        let outbox = sent.clone();
        here.mirror_to(move |c| {
            let wire = serde_json::to_string(&c).unwrap();
            outbox
                .lock()
                .unwrap()
                .push(serde_json::from_str::<Counted>(&wire).unwrap());
        });
        let now = Instant::now();
        for _ in 0..3 {
            here.attempt(&["ip:1|user:a"], now).unwrap();
        }
        for counted in sent.lock().unwrap().drain(..) {
            there.apply(counted, now);
        }
        assert!(
            there.attempt(&["ip:1|user:a"], now).is_err(),
            "the other replica refuses the fourth"
        );
        here.succeeded(&["ip:1|user:a"], &[]);
        for counted in sent.lock().unwrap().drain(..) {
            there.apply(counted, now);
        }
        assert!(
            there.attempt(&["ip:1|user:a"], now).is_ok(),
            "and forgets with a success"
        );
    }

    #[test]
    fn the_sixth_attempt_after_five_failures_within_a_minute_is_refused() {
        let limiter = FailureLimiter::new(5, Duration::from_secs(60));
        let t0 = Instant::now();
        let keys = ["ip:1.2.3.4", "user:alice"];
        for i in 0..5 {
            assert_eq!(
                limiter.attempt(&keys, t0 + Duration::from_secs(i)),
                Ok(()),
                "attempt {}",
                i + 1
            );
        }
        assert_eq!(
            limiter.attempt(&keys, t0 + Duration::from_secs(5)),
            Err(Duration::from_secs(55))
        );
        // Another client trying the same key is refused too; another key from a fresh client is not.
        assert!(
            limiter
                .attempt(&["ip:9.9.9.9", "user:alice"], t0 + Duration::from_secs(5))
                .is_err()
        );
        assert!(
            limiter
                .attempt(&["ip:9.9.9.9", "user:bob"], t0 + Duration::from_secs(5))
                .is_ok()
        );
        assert!(
            limiter.attempt(&keys, t0 + Duration::from_secs(60)).is_ok(),
            "the first failure aged out"
        );
    }

    #[test]
    fn success_resets_one_key_but_only_forgives_one_attempt_of_another() {
        let limiter = FailureLimiter::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        let keys = ["ip:1.2.3.4", "user:alice"];
        limiter.attempt(&keys, t0).unwrap(); // wrong
        limiter.attempt(&keys, t0).unwrap(); // right
        limiter.succeeded(&["user:alice"], &["ip:1.2.3.4"]);
        assert!(
            limiter.attempt(&["ip:1.2.3.4", "user:bob"], t0).is_ok(),
            "one failure on the client's record"
        );
        assert!(
            limiter.attempt(&["ip:1.2.3.4", "user:carol"], t0).is_err(),
            "and now two"
        );
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_64() {
        let a = client_key("2001:db8:1:2:aaaa::1".parse().unwrap());
        assert_eq!(a, client_key("2001:db8:1:2:bbbb::9".parse().unwrap()));
        assert_ne!(a, client_key("2001:db8:1:3::1".parse().unwrap()));
        assert_eq!(client_key("10.0.0.1".parse().unwrap()), "ip:10.0.0.1");
    }

    /// What the sign-in code does with the throttle, without the password check: the
    /// caller's reservation, then the account's unless the caller is a known device.
    fn try_sign_in(t: &SignInThrottle, caller: &Caller, account: &str, now: Instant) -> Result<(), Duration> {
        t.caller(caller, account, now)?;
        match caller {
            Caller::Address(_) => t.account(account, now),
            _ => Ok(()),
        }
    }

    #[test]
    fn an_attacker_blocks_only_itself_and_never_a_known_browser() {
        let t = SignInThrottle::default();
        let now = Instant::now();
        let attacker = Caller::Address("ip:203.0.113.9".into());
        for _ in 0..CALLER_LIMIT.max {
            assert!(try_sign_in(&t, &attacker, "root", now).is_ok());
        }
        assert!(
            try_sign_in(&t, &attacker, "root", now).is_err(),
            "the attacker is throttled"
        );
        let owner = Caller::Address("ip:198.51.100.7".into());
        assert!(try_sign_in(&t, &owner, "root", now).is_ok(), "another address is not");

        // Guessing spread over many addresses trips the account-wide count ...
        for i in 0..ACCOUNT_LIMIT.max {
            let _ = try_sign_in(&t, &Caller::Address(format!("ip:192.0.2.{i}")), "root", now);
        }
        assert!(
            try_sign_in(&t, &Caller::Address("ip:198.51.100.8".into()), "root", now).is_err(),
            "an unknown browser now waits"
        );
        // ... which never blocks a browser that signed in before, nor a session.
        let device = Caller::Device("dev-1".into());
        assert!(try_sign_in(&t, &device, "root", now).is_ok());
        assert!(try_sign_in(&t, &Caller::Session(7), "root", now).is_ok());
        // A stolen device cookie is still throttled on its own.
        for _ in 1..CALLER_LIMIT.max {
            try_sign_in(&t, &device, "root", now).unwrap();
        }
        assert!(try_sign_in(&t, &device, "root", now).is_err());
        assert!(try_sign_in(&t, &Caller::Device("dev-2".into()), "root", now).is_ok());
    }

    #[test]
    fn a_right_password_restarts_the_callers_count_for_that_account() {
        let t = SignInThrottle::default();
        let now = Instant::now();
        let me = Caller::Address("ip:198.51.100.7".into());
        for _ in 0..CALLER_LIMIT.max - 1 {
            try_sign_in(&t, &me, "kim", now).unwrap();
        }
        try_sign_in(&t, &me, "kim", now).unwrap();
        t.succeeded(&me, "kim", true);
        for _ in 0..CALLER_LIMIT.max {
            assert!(try_sign_in(&t, &me, "kim", now).is_ok());
        }
    }

    #[test]
    fn distinct_keys_do_not_grow_memory_without_bound() {
        let limiter = FailureLimiter::new(1, Duration::from_secs(1));
        let t0 = Instant::now();
        for i in 0..MAX_KEYS + 10 {
            limiter.attempt(&[&format!("k{i}")], t0).unwrap();
        }
        limiter.attempt(&["late"], t0 + Duration::from_secs(2)).unwrap();
        assert!(limiter.failures.lock().unwrap().len() <= 1);
    }
}
