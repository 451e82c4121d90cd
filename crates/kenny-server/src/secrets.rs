//! Generating, hashing and checking secrets: tokens, generated passwords, the server key.
//! (Password hashing is [`crate::passwords`].)

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use rand::RngCore;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};

/// A secret the server holds in memory (the model API key, a TOTP secret). It has no
/// `Display`, and its `Debug` prints `Masked(***)`, so a struct that holds one can be
/// logged or shown in an error without leaking it; [`Masked::expose`] is the one way to
/// the text, at the place that uses it.
#[derive(Clone, PartialEq, Eq)]
pub struct Masked(String);

impl Masked {
    pub fn new(secret: impl Into<String>) -> Masked {
        Masked(secret.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Masked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Masked(***)")
    }
}

pub const PAT_PREFIX: &str = "kenny_pat_";
/// OAuth access tokens, refresh tokens and authorization codes kenny issues.
pub const ACCESS_TOKEN_PREFIX: &str = "kenny_oat_";
pub const REFRESH_TOKEN_PREFIX: &str = "kenny_ort_";
pub const CODE_PREFIX: &str = "kenny_oac_";
pub const AGENT_TOKEN_PREFIX: &str = "kenny_agt_";
/// Install links (`/install/<token>`): one use, then they enroll nothing more.
pub const INSTALL_LINK_PREFIX: &str = "kenny_inl_";
pub const SERVER_KEY_FILE: &str = "server_ed25519.key";

/// A fresh random token with a recognisable prefix (so a leaked one is easy to spot).
pub fn new_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// Tokens carry 256 random bits, so a plain SHA-256 is enough to store them: unlike
/// passwords there is nothing to brute-force.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub fn new_password() -> String {
    let mut bytes = [0u8; 18];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Compares secrets without leaking where they differ through timing.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

pub fn random_nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    OsRng.fill_bytes(&mut n);
    n
}

/// Loads the server's Ed25519 identity from the data directory, creating it on first
/// use (agents pin its public key, so it must never change silently).
pub fn load_or_create_server_key(data_dir: &Path) -> std::io::Result<SigningKey> {
    kenny_host::keyfile::load_or_create(
        &data_dir.join(SERVER_KEY_FILE),
        "a kenny server key; restore it from a backup (agents pin it)",
    )
}

pub use kenny_host::keyfile::write_new_owner_only as write_new_secret;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masked_secret_never_prints() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Settings {
            api_key: Option<Masked>,
        }
        let shown = format!(
            "{:?}",
            Settings {
                api_key: Some(Masked::new("sk-ant-very-secret"))
            }
        );
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("Masked(***)"), "{shown}");
        assert_eq!(Masked::new("x").expose(), "x");
    }

    #[test]
    fn tokens_are_prefixed_unique_and_hash_stably() {
        let a = new_token(PAT_PREFIX);
        let b = new_token(PAT_PREFIX);
        assert!(a.starts_with(PAT_PREFIX) && a.len() == PAT_PREFIX.len() + 43);
        assert_ne!(a, b);
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_ne!(token_hash(&a), token_hash(&b));
    }

    #[test]
    fn server_key_is_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let k1 = load_or_create_server_key(dir.path()).unwrap();
        let k2 = load_or_create_server_key(dir.path()).unwrap();
        assert_eq!(k1.to_bytes(), k2.to_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(SERVER_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.path().join(SERVER_KEY_FILE), "garbage").unwrap();
        let err = load_or_create_server_key(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not a kenny server key"));
    }
}
