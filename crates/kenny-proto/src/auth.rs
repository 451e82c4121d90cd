//! The mutual Ed25519 handshake: transcript construction, signing and verification.
//!
//! Both sides sign `label 0x00 agent_id 0x00 client_nonce 0x00 server_nonce`, where the
//! nonces are raw bytes (they travel base64-encoded). The server signs first; the agent
//! checks that signature against the key it pinned before it answers with its own.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

pub const TRANSCRIPT_LABEL: &str = "kenny-mutual-auth-v1";
pub const NONCE_LEN: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("{what} is not valid base64")]
    BadBase64 { what: &'static str },
    #[error("{what} must be {expected} bytes, got {got}")]
    BadLength {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("public key is not a valid Ed25519 point")]
    BadKey,
    #[error("signature does not verify")]
    BadSignature,
}

/// Decodes base64 and checks the length, naming `what` in errors.
pub fn decode_fixed<const N: usize>(what: &'static str, b64: &str) -> Result<[u8; N], AuthError> {
    let bytes = B64.decode(b64.trim()).map_err(|_| AuthError::BadBase64 { what })?;
    let got = bytes.len();
    bytes
        .try_into()
        .map_err(|_| AuthError::BadLength { what, expected: N, got })
}

pub fn encode_b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

pub fn transcript(agent_id: &str, client_nonce: &[u8], server_nonce: &[u8]) -> Vec<u8> {
    let mut t =
        Vec::with_capacity(TRANSCRIPT_LABEL.len() + agent_id.len() + 3 + client_nonce.len() + server_nonce.len());
    t.extend_from_slice(TRANSCRIPT_LABEL.as_bytes());
    t.push(0);
    t.extend_from_slice(agent_id.as_bytes());
    t.push(0);
    t.extend_from_slice(client_nonce);
    t.push(0);
    t.extend_from_slice(server_nonce);
    t
}

pub fn parse_public_key(b64: &str) -> Result<VerifyingKey, AuthError> {
    let bytes: [u8; 32] = decode_fixed("public key", b64)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| AuthError::BadKey)
}

/// Signs the transcript; returns the base64 signature as it travels on the wire.
pub fn sign(key: &SigningKey, transcript: &[u8]) -> String {
    encode_b64(&key.sign(transcript).to_bytes())
}

pub fn verify(key: &VerifyingKey, transcript: &[u8], sig_b64: &str) -> Result<(), AuthError> {
    let bytes: [u8; 64] = decode_fixed("signature", sig_b64)?;
    key.verify(transcript, &Signature::from_bytes(&bytes))
        .map_err(|_| AuthError::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tampered_transcript_fails() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let t = transcript("pc", &[1; 32], &[2; 32]);
        let sig = sign(&key, &t);
        assert_eq!(verify(&key.verifying_key(), &t, &sig), Ok(()));
        let other = transcript("pc2", &[1; 32], &[2; 32]);
        assert_eq!(verify(&key.verifying_key(), &other, &sig), Err(AuthError::BadSignature));
        assert!(matches!(
            decode_fixed::<32>("nonce", "AAAA"),
            Err(AuthError::BadLength { got: 3, .. })
        ));
        assert!(matches!(
            decode_fixed::<32>("nonce", "!!"),
            Err(AuthError::BadBase64 { .. })
        ));
    }
}
