//! Ed25519 identities kept in owner-only files, created exactly once.
//!
//! Creation is exclusive (`O_EXCL`), so two processes racing on a fresh directory (a
//! server and an admin command, say) end up with the same key.

use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use rand::RngCore;
use rand::rngs::OsRng;

/// Loads the key in `path`, creating it on first use. `what` names the key in errors,
/// with what to do about a damaged file.
pub fn load_or_create(path: &Path, what: &str) -> std::io::Result<SigningKey> {
    let mut seed = [0u8; 32];
    OsRng.fill_bytes(&mut seed);
    match write_new_owner_only(path, URL_SAFE_NO_PAD.encode(seed).as_bytes()) {
        Ok(()) => return Ok(SigningKey::from_bytes(&seed)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let text = std::fs::read_to_string(path)?;
    URL_SAFE_NO_PAD
        .decode(text.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .map(|b| SigningKey::from_bytes(&b))
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is not {what}", path.display()),
            )
        })
}

/// Writes a new file readable only by its owner; fails with `AlreadyExists` if the
/// file is there.
pub fn write_new_owner_only(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(path)?;
    f.write_all(contents)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_owner_only_and_damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let a = load_or_create(&path, "a test key").unwrap();
        let b = load_or_create(&path, "a test key").unwrap();
        assert_eq!(a.to_bytes(), b.to_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        std::fs::write(&path, "junk").unwrap();
        let err = load_or_create(&path, "a test key; restore it").unwrap_err();
        assert!(err.to_string().ends_with("is not a test key; restore it"), "{err}");
        assert_eq!(
            write_new_owner_only(&path, b"x").unwrap_err().kind(),
            std::io::ErrorKind::AlreadyExists
        );
    }
}
