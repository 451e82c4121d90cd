//! Every example frame in `docs/wire/` decodes, re-encodes to the same JSON, and the
//! documented mutual-auth vector reproduces: the docs cannot drift from the code.

use std::path::PathBuf;

use ed25519_dalek::SigningKey;
use kenny_proto::auth;
use kenny_proto::frame::{Limits, decode, encode};
use serde_json::Value;

fn docs_wire() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/wire")
}

#[test]
fn documented_frames_round_trip() {
    let mut seen = 0;
    for entry in std::fs::read_dir(docs_wire()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let frame = decode(&text, Limits::AUTHENTICATED).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let original: Value = serde_json::from_str(&text).unwrap();
        let again: Value = serde_json::from_str(&encode(&frame)).unwrap();
        assert_eq!(original, again, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 12, "expected the documented frames, found {seen}");
}

#[test]
fn documented_mutual_auth_vector_reproduces() {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(docs_wire().join("vectors/mutual_auth.json")).unwrap()).unwrap();
    let s = |k: &str| v[k].as_str().unwrap();
    let server = SigningKey::from_bytes(&auth::decode_fixed("seed", s("server_seed_b64")).unwrap());
    let agent = SigningKey::from_bytes(&auth::decode_fixed("seed", s("agent_seed_b64")).unwrap());
    assert_eq!(
        auth::encode_b64(server.verifying_key().as_bytes()),
        s("server_public_key_b64")
    );
    assert_eq!(
        auth::encode_b64(agent.verifying_key().as_bytes()),
        s("agent_public_key_b64")
    );
    let cn: [u8; 32] = auth::decode_fixed("nonce", s("client_nonce_b64")).unwrap();
    let sn: [u8; 32] = auth::decode_fixed("nonce", s("server_nonce_b64")).unwrap();
    let t = auth::transcript(s("agent_id"), &cn, &sn);
    assert_eq!(hex::encode(&t), s("transcript_hex"));
    assert_eq!(auth::sign(&server, &t), s("server_sig_b64"));
    assert_eq!(auth::sign(&agent, &t), s("agent_sig_b64"));
}
