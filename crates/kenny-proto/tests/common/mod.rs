//! Helpers shared by the integration tests of kenny-proto.

use ed25519_dalek::SigningKey;
use kenny_proto::auth;
use serde_json::Value;

/// Checks a mutual-auth vector file (the reference one or our documented one): keys
/// from seeds, the transcript bytes, both signatures, and that each verifies.
pub(crate) fn check_mutual_auth_vector(v: &Value) {
    let s = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("vector field {k}"));
    let server = SigningKey::from_bytes(&auth::decode_fixed("server seed", s("server_seed_b64")).unwrap());
    let agent = SigningKey::from_bytes(&auth::decode_fixed("agent seed", s("agent_seed_b64")).unwrap());
    assert_eq!(
        auth::encode_b64(server.verifying_key().as_bytes()),
        s("server_public_key_b64")
    );
    assert_eq!(
        auth::encode_b64(agent.verifying_key().as_bytes()),
        s("agent_public_key_b64")
    );

    let client_nonce: [u8; 32] = auth::decode_fixed("client nonce", s("client_nonce_b64")).unwrap();
    let server_nonce: [u8; 32] = auth::decode_fixed("server nonce", s("server_nonce_b64")).unwrap();
    let transcript = auth::transcript(s("agent_id"), &client_nonce, &server_nonce);
    assert_eq!(hex::encode(&transcript), s("transcript_hex"));

    assert_eq!(auth::sign(&server, &transcript), s("server_sig_b64"));
    assert_eq!(auth::sign(&agent, &transcript), s("agent_sig_b64"));
    let server_pub = auth::parse_public_key(s("server_public_key_b64")).unwrap();
    let agent_pub = auth::parse_public_key(s("agent_public_key_b64")).unwrap();
    auth::verify(&server_pub, &transcript, s("server_sig_b64")).unwrap();
    auth::verify(&agent_pub, &transcript, s("agent_sig_b64")).unwrap();
    // Each signature is bound to its signer.
    assert!(auth::verify(&agent_pub, &transcript, s("server_sig_b64")).is_err());
}
