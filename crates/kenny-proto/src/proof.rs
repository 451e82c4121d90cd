//! Signed results (protocol 0.18): an agent's Ed25519 signature over what it was asked
//! and what it answered, so anyone holding the agent's public key can check afterwards
//! that a result came from that PC, for that call.
//!
//! The signed message is
//! `"kenny-result-v1" 0x00 request_id 0x00 agent_id 0x00 tool 0x00 args_sha256 0x00
//! outcome_sha256 0x00 at_ms`, with the digests as lowercase hex and `at_ms` (the
//! agent's clock, Unix milliseconds) in decimal. None of the fields can hold a 0x00:
//! agent ids and tool names are checked names, and request ids are the server's.
//!
//! Digests are SHA-256 of [canonical JSON](canonical_json): the arguments the agent
//! received (an object), and the outcome `{"ok":true,"result":R}` or
//! `{"error":{"code":C,"message":M},"ok":false}`.
//!
//! Only the signature and its time travel on the wire ([`WireProof`], the response's
//! `proof` field); the server rebuilds the digests from the call it sent and the answer
//! it got, so a proof never vouches for anything but that exchange.

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::{self, AuthError};

/// The first protocol version whose agents sign their results, and whose servers say
/// so in their challenge.
pub const SIGNED_RESULTS_PROTOCOL: &str = "0.18";
/// The label that starts every signed result message.
pub const RESULT_LABEL: &str = "kenny-result-v1";

/// Whether a `protocol` value (from `register` or `challenge`) is one that signs
/// results: a dotted version of at least 0.18, compared as numbers.
pub fn signs_results(protocol: &str) -> bool {
    crate::version_at_least(protocol, &[0, 18])
}

/// What an agent adds to its response: the signature and when it made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireProof {
    /// The agent's clock when it signed, Unix milliseconds.
    pub at_ms: u64,
    /// Base64 (standard, padded) Ed25519 signature over [`ResultProof::message`].
    pub sig: String,
}

/// A complete proof: every field of the signed message, and the signature. This is what
/// the server checks, stores with the audit row and returns to MCP clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultProof {
    pub request_id: String,
    pub agent_id: String,
    pub tool: String,
    pub args_sha256: String,
    pub outcome_sha256: String,
    pub at_ms: u64,
    pub sig: String,
}

impl ResultProof {
    /// The bytes the agent signs.
    pub fn message(&self) -> Vec<u8> {
        let at = self.at_ms.to_string();
        let fields = [
            self.request_id.as_str(),
            self.agent_id.as_str(),
            self.tool.as_str(),
            self.args_sha256.as_str(),
            self.outcome_sha256.as_str(),
            at.as_str(),
        ];
        let mut m = Vec::with_capacity(RESULT_LABEL.len() + fields.iter().map(|f| f.len() + 1).sum::<usize>());
        m.extend_from_slice(RESULT_LABEL.as_bytes());
        for field in fields {
            m.push(0);
            m.extend_from_slice(field.as_bytes());
        }
        m
    }

    /// Signs the message with `key` and fills in `sig`.
    pub fn signed(mut self, key: &SigningKey) -> Self {
        self.sig = auth::sign(key, &self.message());
        self
    }

    /// Whether `sig` is `key`'s signature over the message.
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), AuthError> {
        auth::verify(key, &self.message(), &self.sig)
    }

    pub fn wire(&self) -> WireProof {
        WireProof {
            at_ms: self.at_ms,
            sig: self.sig.clone(),
        }
    }
}

/// JSON with object keys sorted by their UTF-8 bytes, no whitespace, strings escaped as
/// `serde_json` (and Python's `json.dumps(..., ensure_ascii=False)`) escape them.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(map, out),
        // Scalars serialize the same whatever the map order; writing to a Vec cannot fail.
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        write_canonical(value, out);
    }
    out.push(b'}');
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// The digest of the arguments of a call, as sent on the wire.
pub fn args_digest(args: &Map<String, Value>) -> String {
    let mut out = Vec::new();
    write_object(args, &mut out);
    sha256_hex(&out)
}

/// The digest of an agent's answer: its result, or its error's code and message.
pub fn outcome_digest(outcome: Result<&Value, (&str, &str)>) -> String {
    let mut out = Vec::new();
    match outcome {
        Ok(result) => {
            // The object {"ok":true,"result":R}, keys already in order.
            out.extend_from_slice(br#"{"ok":true,"result":"#);
            write_canonical(result, &mut out);
            out.push(b'}');
        }
        Err((code, message)) => {
            let error = serde_json::json!({"error": {"code": code, "message": message}, "ok": false});
            write_canonical(&error, &mut out);
        }
    }
    sha256_hex(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn proof() -> ResultProof {
        ResultProof {
            request_id: "r-1".into(),
            agent_id: "pc-1".into(),
            tool: "shell_exec".into(),
            args_sha256: args_digest(json!({"command": "hostname"}).as_object().unwrap()),
            outcome_sha256: outcome_digest(Ok(&json!({"stdout": "pc-1\n", "exit_code": 0}))),
            at_ms: 1_764_000_000_000,
            sig: String::new(),
        }
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth_and_has_no_whitespace() {
        let v = json!({"b": [{"z": 1, "a": null}], "a": "x\n\u{1f}é", "é": 1.5, "A": true});
        assert_eq!(
            String::from_utf8(canonical_json(&v)).unwrap(),
            r#"{"A":true,"a":"x\n\u001fé","b":[{"a":null,"z":1}],"é":1.5}"#
        );
    }

    #[test]
    fn the_outcome_digest_is_the_digest_of_the_canonical_outcome_object() {
        let result = json!({"stdout": "hi", "exit_code": 0});
        let whole = json!({"ok": true, "result": result});
        assert_eq!(outcome_digest(Ok(&result)), sha256_hex(&canonical_json(&whole)));
        let failed = json!({"ok": false, "error": {"code": "timeout", "message": "slow"}});
        assert_eq!(
            outcome_digest(Err(("timeout", "slow"))),
            sha256_hex(&canonical_json(&failed))
        );
        assert_ne!(
            outcome_digest(Ok(&result)),
            outcome_digest(Ok(&json!({"stdout": "hi!", "exit_code": 0})))
        );
    }

    #[test]
    fn a_signed_proof_verifies_with_its_key_only_and_any_changed_field_breaks_it() {
        let signed = proof().signed(&key(1));
        signed.verify(&key(1).verifying_key()).unwrap();
        assert_eq!(signed.verify(&key(2).verifying_key()), Err(AuthError::BadSignature));
        let changes: [fn(&mut ResultProof); 6] = [
            |p| p.request_id.push('x'),
            |p| p.agent_id = "pc-2".into(),
            |p| p.tool = "fs_read".into(),
            |p| p.args_sha256 = args_digest(&Map::new()),
            |p| p.outcome_sha256 = outcome_digest(Err(("internal", "x"))),
            |p| p.at_ms += 1,
        ];
        for change in changes {
            let mut changed = signed.clone();
            change(&mut changed);
            assert_eq!(changed.verify(&key(1).verifying_key()), Err(AuthError::BadSignature));
        }
    }

    #[test]
    fn the_message_is_the_label_and_the_fields_separated_by_nul() {
        let p = proof();
        let text = String::from_utf8(p.message()).unwrap();
        let parts: Vec<&str> = text.split('\0').collect();
        assert_eq!(
            parts,
            [
                RESULT_LABEL,
                "r-1",
                "pc-1",
                "shell_exec",
                &p.args_sha256,
                &p.outcome_sha256,
                "1764000000000"
            ]
        );
    }

    #[test]
    fn protocols_from_0_18_sign_results() {
        for yes in ["0.18", "0.19", "0.18.1", "1.0"] {
            assert!(signs_results(yes), "{yes}");
        }
        for no in ["0.17", "0.8", "0.9", "", "0.18-beta", "x"] {
            assert!(!signs_results(no), "{no}");
        }
    }
}
