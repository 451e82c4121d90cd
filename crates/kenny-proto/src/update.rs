//! Agent updates: the release manifest the server signs and the agent checks before it
//! replaces its own binary, and the `agent_update` arguments that carry it.
//!
//! The caller of `agent_update` names at most a version; the server picks the build,
//! describes it in a [`Manifest`] bound to one agent, and signs the manifest's exact
//! bytes with its Ed25519 key, which the agent already pins for the handshake. The
//! signature covers `MANIFEST_LABEL 0x00 <manifest JSON text>`, so it can never be
//! mistaken for a handshake signature (whose label differs) and no re-serialisation
//! can change what was signed: the agent verifies the text it received, then parses it.

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::auth;

pub const MANIFEST_LABEL: &str = "kenny-agent-update-v1";
/// The only `purpose` a manifest may have; a signed text meant for anything else is not
/// an update.
pub const MANIFEST_PURPOSE: &str = "kenny-agent-update";
/// The `purpose` of the manifest an install script checks its download against: signed
/// the same way, but never an update order (the agent refuses any purpose but
/// [`MANIFEST_PURPOSE`]).
pub const INSTALL_PURPOSE: &str = "kenny-agent-install";
/// Longest manifest text accepted (a real one is about 400 bytes).
pub const MAX_MANIFEST_BYTES: usize = 4096;
/// Largest agent build the server offers and the agent downloads.
pub const MAX_BUILD_BYTES: u64 = 256 * 1024 * 1024;

/// One build, for one agent, as the server vouches for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub purpose: String,
    /// Unique per order; the agent echoes it when it reports how the update went.
    pub order_id: String,
    /// The agent this order is for; any other agent refuses it.
    pub agent_id: String,
    pub version: String,
    pub os: String,
    pub arch: String,
    /// The release file name, served at `/d/agent/<file>` by the agent's own server.
    pub file: String,
    pub size: u64,
    /// Lower-case hex SHA-256 of the file.
    pub sha256: String,
    /// Set only when a superuser asked for this exact older version.
    pub allow_downgrade: bool,
    pub issued_at: String,
}

/// The wire arguments of `agent_update` as the server sends them. `version`, `url`
/// and `sha256` are the 0.17 fields (kept so the frame stays recognisable); the agent
/// trusts only the signed `manifest` and downloads from its own server whatever `url`
/// says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateOrder {
    pub version: String,
    pub url: String,
    pub sha256: String,
    /// The manifest's JSON text, exactly as signed.
    pub manifest: String,
    /// Base64 Ed25519 signature over `MANIFEST_LABEL 0x00 manifest`.
    pub signature: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OrderError {
    #[error(
        "the update order is not signed by the server (missing or malformed manifest): {0}; update the kenny server, which builds and signs update orders"
    )]
    Malformed(String),
    #[error("the update manifest's signature does not verify against the pinned server key; nothing was downloaded")]
    BadSignature,
    #[error("the update manifest is not valid: {0}")]
    BadManifest(String),
}

/// What a manifest's signature covers: `MANIFEST_LABEL 0x00 <manifest text>`.
pub fn signed_bytes(manifest_text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(MANIFEST_LABEL.len() + 1 + manifest_text.len());
    bytes.extend_from_slice(MANIFEST_LABEL.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(manifest_text.as_bytes());
    bytes
}

impl Manifest {
    /// The manifest text and its signature, ready to travel as an [`UpdateOrder`].
    #[expect(
        clippy::expect_used,
        reason = "a struct of strings, numbers and a bool: serialising it cannot fail"
    )]
    pub fn sign(&self, key: &SigningKey) -> (String, String) {
        let text = serde_json::to_string(self).expect("manifest serialisation is infallible");
        let signature = auth::sign(key, &signed_bytes(&text));
        (text, signature)
    }

    /// A file name the agent may put in a URL path: the release naming scheme's
    /// characters only, so it can never climb out of `/d/agent/` or be re-decoded.
    pub fn file_name_is_plain(file: &str) -> bool {
        file.starts_with("kenny-agent-")
            && file.len() <= 128
            && file
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
            && !file.contains("..")
    }
}

impl UpdateOrder {
    /// Strictly decodes the call's arguments: unknown or missing fields are refused.
    pub fn from_args(args: &Map<String, Value>) -> Result<UpdateOrder, OrderError> {
        serde_json::from_value(Value::Object(args.clone())).map_err(|e| OrderError::Malformed(e.to_string()))
    }

    pub fn into_args(self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }

    /// Checks the signature over the manifest text against the pinned server key, then
    /// parses it and checks that the unsigned 0.17 fields agree with it.
    pub fn verify(&self, server_key: &VerifyingKey) -> Result<Manifest, OrderError> {
        let manifest = verify_manifest(server_key, &self.manifest, &self.signature)?;
        if manifest.version != self.version || !manifest.sha256.eq_ignore_ascii_case(&self.sha256) {
            return Err(OrderError::BadManifest(
                "the version or sha256 beside the manifest differ from the signed ones".into(),
            ));
        }
        Ok(manifest)
    }
}

/// Checks a manifest text and its signature: signed by `server_key` for this purpose,
/// well-formed, naming a plain release file of a sane size.
pub fn verify_manifest(server_key: &VerifyingKey, text: &str, signature: &str) -> Result<Manifest, OrderError> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(OrderError::BadManifest(format!(
            "{} bytes, over the {MAX_MANIFEST_BYTES}-byte limit",
            text.len()
        )));
    }
    auth::verify(server_key, &signed_bytes(text), signature).map_err(|_| OrderError::BadSignature)?;
    let manifest: Manifest = serde_json::from_str(text).map_err(|e| OrderError::BadManifest(e.to_string()))?;
    if manifest.purpose != MANIFEST_PURPOSE {
        return Err(OrderError::BadManifest(format!(
            "purpose is {:?}, not {MANIFEST_PURPOSE:?}",
            manifest.purpose
        )));
    }
    if !Manifest::file_name_is_plain(&manifest.file) {
        return Err(OrderError::BadManifest(format!(
            "file {:?} is not a plain release file name",
            manifest.file
        )));
    }
    if manifest.sha256.len() != 64 || !manifest.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(OrderError::BadManifest("sha256 must be 64 hex digits".into()));
    }
    if manifest.size == 0 || manifest.size > MAX_BUILD_BYTES {
        return Err(OrderError::BadManifest(format!(
            "size {} is outside 1..={MAX_BUILD_BYTES}",
            manifest.size
        )));
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            purpose: MANIFEST_PURPOSE.into(),
            order_id: "o-1".into(),
            agent_id: "pc-a".into(),
            version: "0.2.0".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            file: "kenny-agent-0.2.0-linux-x86_64".into(),
            size: 10,
            sha256: "ab".repeat(32),
            allow_downgrade: false,
            issued_at: "2026-11-30T00:00:00Z".into(),
        }
    }

    fn order(m: &Manifest, key: &SigningKey) -> UpdateOrder {
        let (text, signature) = m.sign(key);
        UpdateOrder {
            version: m.version.clone(),
            url: format!("https://k.example/d/agent/{}", m.file),
            sha256: m.sha256.clone(),
            manifest: text,
            signature,
        }
    }

    #[test]
    fn a_signed_manifest_verifies_and_round_trips_as_args() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let o = order(&manifest(), &key);
        let back = UpdateOrder::from_args(&o.clone().into_args()).unwrap();
        assert_eq!(back.verify(&key.verifying_key()).unwrap(), manifest());
    }

    #[test]
    fn forged_or_altered_orders_are_refused() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let other = SigningKey::from_bytes(&[8; 32]);
        let pinned = key.verifying_key();
        // Signed by someone else.
        assert_eq!(
            order(&manifest(), &other).verify(&pinned),
            Err(OrderError::BadSignature)
        );
        // The text changed after signing (a different hash slipped in).
        let mut o = order(&manifest(), &key);
        o.manifest = o.manifest.replace(&"ab".repeat(32), &"cd".repeat(32));
        assert_eq!(o.verify(&pinned), Err(OrderError::BadSignature));
        // A handshake signature is not an update signature.
        let mut o = order(&manifest(), &key);
        o.signature = auth::sign(&key, o.manifest.as_bytes());
        assert_eq!(o.verify(&pinned), Err(OrderError::BadSignature));
        // The unsigned fields must agree with the signed ones.
        let mut o = order(&manifest(), &key);
        o.sha256 = "00".repeat(32);
        assert!(matches!(o.verify(&pinned), Err(OrderError::BadManifest(_))));
        // Signed, but naming a path instead of a release file.
        for file in [
            "kenny-agent-0.2.0/../../kenny.db",
            "kenny-agent-%2e%2e",
            "healthz",
            "kenny-agent-a/b",
        ] {
            let m = Manifest {
                file: file.into(),
                ..manifest()
            };
            assert!(
                matches!(order(&m, &key).verify(&pinned), Err(OrderError::BadManifest(_))),
                "{file}"
            );
        }
        // Signed, but for another purpose.
        let m = Manifest {
            purpose: "something-else".into(),
            ..manifest()
        };
        assert!(matches!(
            order(&m, &key).verify(&pinned),
            Err(OrderError::BadManifest(_))
        ));
    }

    #[test]
    fn caller_shaped_arguments_are_not_an_order() {
        let args = serde_json::json!({"version": "0.2.0", "url": "http://x/healthz", "sha256": "ab".repeat(32)});
        let err = UpdateOrder::from_args(args.as_object().unwrap()).unwrap_err();
        assert!(matches!(err, OrderError::Malformed(_)), "{err}");
        assert!(err.to_string().contains("not signed by the server"));
    }
}
