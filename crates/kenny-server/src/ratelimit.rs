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

    /// `Some(wait)` if any of `keys` is over the limit at `now`: how long until the
    /// oldest counted failure leaves the window.
    pub fn blocked(&self, keys: &[&str], now: Instant) -> Option<Duration> {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        keys.iter()
            .filter_map(|k| {
                let q = failures.get_mut(*k)?;
                prune(q, now, self.window);
                (q.len() >= self.max_failures).then(|| self.window.saturating_sub(now - q[0]))
            })
            .max()
    }

    pub fn record_failure(&self, keys: &[&str], now: Instant) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() > 100_000 {
            // Bound memory under a spray of distinct keys: forget what has aged out.
            let window = self.window;
            failures.retain(|_, q| {
                prune(q, now, window);
                !q.is_empty()
            });
        }
        for k in keys {
            let q = failures.entry((*k).to_owned()).or_default();
            prune(q, now, self.window);
            q.push_back(now);
        }
    }

    /// A success clears the count for these keys ("in a row" means in a row).
    pub fn record_success(&self, keys: &[&str]) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        for k in keys {
            failures.remove(*k);
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
    fn the_sixth_failure_within_a_minute_is_blocked_until_the_window_passes() {
        let limiter = FailureLimiter::new(5, Duration::from_secs(60));
        let t0 = Instant::now();
        let keys = ["ip:1.2.3.4", "user:alice"];
        for i in 0..5 {
            assert_eq!(
                limiter.blocked(&keys, t0 + Duration::from_secs(i)),
                None,
                "attempt {}",
                i + 1
            );
            limiter.record_failure(&keys, t0 + Duration::from_secs(i));
        }
        let wait = limiter
            .blocked(&keys, t0 + Duration::from_secs(5))
            .expect("sixth attempt blocked");
        assert_eq!(wait, Duration::from_secs(55));
        // Another client trying the same user is blocked too; another user from a fresh client is not.
        assert!(
            limiter
                .blocked(&["ip:9.9.9.9", "user:alice"], t0 + Duration::from_secs(5))
                .is_some()
        );
        assert!(
            limiter
                .blocked(&["ip:9.9.9.9", "user:bob"], t0 + Duration::from_secs(5))
                .is_none()
        );
        assert_eq!(
            limiter.blocked(&keys, t0 + Duration::from_secs(60)),
            None,
            "the first failure aged out"
        );
        limiter.record_success(&keys);
        assert_eq!(limiter.blocked(&keys, t0 + Duration::from_secs(6)), None);
    }
}
