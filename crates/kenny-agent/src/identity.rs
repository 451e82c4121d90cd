//! The agent's own Ed25519 key and its one-time enrollment with the server.
//!
//! The key is generated once and kept owner-only in the state directory; a marker
//! file records that it was enrolled with a given server key, so the enrollment token
//! is used at most once.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;

pub const KEY_FILE: &str = "agent_ed25519.key";
pub const ENROLLED_FILE: &str = "enrolled";

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("state directory {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{path} is not an agent key; delete it, run `kenny-server agent rekey <id>` on the server and start the agent with the new --enroll-token"
    )]
    Corrupt { path: PathBuf },
}

/// Loads the agent key, creating it (owner-only) on first use.
pub fn load_or_create_key(state_dir: &Path) -> Result<SigningKey, IdentityError> {
    let io = |source| IdentityError::Io {
        path: state_dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(state_dir).map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    }
    let path = state_dir.join(KEY_FILE);
    kenny_host::keyfile::load_or_create(&path, "an agent key").map_err(|source| match source.kind() {
        std::io::ErrorKind::InvalidData => IdentityError::Corrupt { path: path.clone() },
        _ => IdentityError::Io {
            path: path.clone(),
            source,
        },
    })
}

/// What the marker file records: which agent key was enrolled with which server.
fn marker(server_pubkey: &str, key: &SigningKey) -> String {
    format!(
        "server {}\nagent {}\n",
        server_pubkey.trim(),
        kenny_proto::auth::encode_b64(key.verifying_key().as_bytes())
    )
}

/// Whether this agent key was enrolled with the server whose key is `server_pubkey`.
pub fn is_enrolled(state_dir: &Path, server_pubkey: &str, key: &SigningKey) -> bool {
    std::fs::read_to_string(state_dir.join(ENROLLED_FILE)).is_ok_and(|s| s == marker(server_pubkey, key))
}

pub fn forget_enrollment(state_dir: &Path) {
    let _ = std::fs::remove_file(state_dir.join(ENROLLED_FILE));
}

pub fn mark_enrolled(state_dir: &Path, server_pubkey: &str, key: &SigningKey) -> std::io::Result<()> {
    std::fs::write(state_dir.join(ENROLLED_FILE), marker(server_pubkey, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_made_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let a = load_or_create_key(&state).unwrap();
        let b = load_or_create_key(&state).unwrap();
        assert_eq!(a.to_bytes(), b.to_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(state.join(KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "key must be owner-only, got {mode:o}");
        }
        assert!(!is_enrolled(&state, "srv", &a));
        mark_enrolled(&state, "srv", &a).unwrap();
        assert!(is_enrolled(&state, "srv", &a));
        assert!(!is_enrolled(&state, "other-server", &a));
        let other_key = SigningKey::from_bytes(&[3; 32]);
        assert!(!is_enrolled(&state, "srv", &other_key), "a new key must enroll again");
        std::fs::write(state.join(KEY_FILE), "junk").unwrap();
        assert!(matches!(load_or_create_key(&state), Err(IdentityError::Corrupt { .. })));
    }
}
