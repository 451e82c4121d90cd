//! Password hashing and checking (Argon2id), every run under one small concurrency cap.
//!
//! An Argon2id run takes about 19 MiB and real CPU time. Every hash or check the server
//! does for a request (sign-in, password change, second-factor changes, set-up, user
//! creation, password reset) waits for one of [`MAX_RUNNING`] permits, so no burst of
//! requests can exhaust memory or the blocking pool. The permit travels with the work
//! onto the blocking thread: a request whose client goes away stops waiting, but the run
//! it started keeps its permit until it ends, so cancelled requests cannot stack runs.
//!
//! This is the only module that knows Argon2 (a test below checks it).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use rand::rngs::OsRng;
use tokio::sync::Semaphore;

/// Argon2id runs allowed at once in this process.
pub(crate) const MAX_RUNNING: usize = 4;

static CAP: Cap = Cap::new(MAX_RUNNING);

#[derive(Debug, thiserror::Error)]
pub(crate) enum PasswordError {
    #[error("hashing the password failed: {0}")]
    Hash(String),
    #[error("the server is shutting down")]
    Closed,
}

/// A concurrency cap for blocking work.
struct Cap {
    permits: Semaphore,
}

impl Cap {
    const fn new(permits: usize) -> Self {
        Cap {
            permits: Semaphore::const_new(permits),
        }
    }

    /// Runs `work` on the blocking pool once a permit is free; the permit is released
    /// when `work` returns, not when the caller stops waiting.
    async fn run<T, F>(&'static self, work: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let permit = self.permits.acquire().await.ok()?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .ok()
    }
}

/// Checks a password against its stored hash. A malformed hash never matches.
pub(crate) async fn verify(hash: String, password: String) -> bool {
    CAP.run(move || verify_blocking(&hash, &password))
        .await
        .unwrap_or(false)
}

/// Hashes a new password (Argon2id, random salt).
pub(crate) async fn hash(password: String) -> Result<String, PasswordError> {
    CAP.run(move || hash_blocking(&password))
        .await
        .ok_or(PasswordError::Closed)?
}

/// The uncapped check, for one-off command-line use outside the server.
pub(crate) fn verify_blocking(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// The uncapped hash, for one-off command-line use outside the server (`user add`, the
/// launcher's first superuser).
pub(crate) fn hash_blocking(password: &str) -> Result<String, PasswordError> {
    let salt = SaltString::generate(&mut OsRng);
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn hashes_verify_and_garbage_never_matches() {
        let h = hash("correct horse".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify(h.clone(), "correct horse".into()).await);
        assert!(!verify(h, "wrong".into()).await);
        assert!(!verify("not a hash".into(), "x".into()).await);
        assert!(!verify(String::new(), String::new()).await);
    }

    /// Work that reports how many of its kind run at once and blocks until released.
    struct Probe {
        running: AtomicUsize,
        peak: AtomicUsize,
        released: Mutex<bool>,
        wake: Condvar,
    }

    impl Probe {
        fn work(self: &Arc<Self>) -> impl FnOnce() -> usize + Send + 'static {
            let p = self.clone();
            move || {
                let now = p.running.fetch_add(1, Ordering::SeqCst) + 1;
                p.peak.fetch_max(now, Ordering::SeqCst);
                let mut released = p.released.lock().unwrap_or_else(|e| e.into_inner());
                while !*released {
                    released = p.wake.wait(released).unwrap_or_else(|e| e.into_inner());
                }
                p.running.fetch_sub(1, Ordering::SeqCst);
                now
            }
        }

        fn release(&self) {
            *self.released.lock().unwrap_or_else(|p| p.into_inner()) = true;
            self.wake.notify_all();
        }

        fn wait_running(&self, n: usize) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.running.load(Ordering::SeqCst) < n {
                assert!(Instant::now() < deadline, "{n} runs never started");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Releases every blocked run when the test ends, passed or failed, so a failure
    /// cannot leave the runtime waiting on them.
    struct ReleaseOnDrop(Arc<Probe>);

    impl Drop for ReleaseOnDrop {
        fn drop(&mut self) {
            self.0.release();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_cap_holds_even_when_waiting_requests_are_cancelled() {
        let cap: &'static Cap = Box::leak(Box::new(Cap::new(2)));
        let probe = Arc::new(Probe {
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            released: Mutex::new(false),
            wake: Condvar::new(),
        });
        let _release = ReleaseOnDrop(probe.clone());
        // Two runs take both permits; then their requests go away (client disconnects).
        let first: Vec<_> = (0..2).map(|_| tokio::spawn(cap.run(probe.work()))).collect();
        probe.wait_running(2);
        for t in &first {
            t.abort();
        }
        // A burst arrives while the cancelled runs still hold their permits.
        let burst: Vec<_> = (0..6).map(|_| tokio::spawn(cap.run(probe.work()))).collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            probe.running.load(Ordering::SeqCst),
            2,
            "no run starts while two hold the permits"
        );
        probe.release();
        for t in burst {
            let seen = t.await.unwrap().expect("the run finished");
            assert!(seen <= 2, "a run saw {seen} at once");
        }
        assert_eq!(probe.peak.load(Ordering::SeqCst), 2);
    }

    /// Architecture invariant: every Argon2 run goes through this module's cap, so no
    /// other module may call Argon2 directly.
    #[test]
    fn only_this_module_knows_argon2() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        let mut dirs = vec![src];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && !path.ends_with("passwords.rs")
                    && std::fs::read_to_string(&path).unwrap().contains("argon2::")
                {
                    offenders.push(path.display().to_string());
                }
            }
        }
        assert!(offenders.is_empty(), "Argon2 used outside passwords.rs: {offenders:?}");
    }
}
