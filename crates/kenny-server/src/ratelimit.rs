//! Sign-in throttling: failures counted per client and per user name over a sliding
//! window; past the limit, attempts are refused before the password is even checked.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct FailureLimiter {
    max_failures: usize,
    window: Duration,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl FailureLimiter {
    pub fn new(max_failures: usize, window: Duration) -> Self {
        FailureLimiter {
            max_failures,
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Reserves an attempt for `keys`: refused with how long to wait if any key is
    /// at the limit; otherwise counted as a failure right away, so parallel attempts
    /// cannot all slip in before the first failure is recorded. Call [`Self::succeeded`]
    /// if it turns out right.
    pub fn attempt(&self, keys: &[&str], now: Instant) -> Result<(), Duration> {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() > 100_000 {
            // Bound memory under a spray of distinct keys: forget what has aged out.
            let window = self.window;
            failures.retain(|_, q| {
                prune(q, now, window);
                !q.is_empty()
            });
        }
        let mut wait = None;
        for k in keys {
            if let Some(q) = failures.get_mut(*k) {
                prune(q, now, self.window);
                if q.len() >= self.max_failures {
                    wait = wait.max(Some(self.window.saturating_sub(now - q[0])));
                }
            }
        }
        if let Some(wait) = wait {
            return Err(wait);
        }
        for k in keys {
            failures.entry((*k).to_owned()).or_default().push_back(now);
        }
        Ok(())
    }

    /// The reserved attempt was right: the user's count restarts ("in a row" means in
    /// a row), and the attempt is taken back from the other keys (e.g. the client's,
    /// so that one good sign-in does not wipe a client's record of failures).
    pub fn succeeded(&self, reset: &[&str], forgive: &[&str]) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        for k in reset {
            failures.remove(*k);
        }
        for k in forgive {
            if let Some(q) = failures.get_mut(*k) {
                q.pop_back();
            }
        }
    }
}

/// The throttling key of a client address: IPv6 clients by /64, since one host
/// usually holds a whole /64.
pub fn client_key(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => format!("ip:{v4}"),
        std::net::IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("ip:{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

fn prune(q: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    while q.front().is_some_and(|t| now.duration_since(*t) >= window) {
        q.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Another client trying the same user is refused too; another user from a fresh client is not.
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
    fn success_resets_the_user_but_only_forgives_one_attempt_of_the_client() {
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
}
