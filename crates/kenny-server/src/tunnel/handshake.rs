//! Authenticating a freshly connected agent: mutual Ed25519 after enrollment, or the
//! legacy per-agent token while the server allows it and the agent has no key; and
//! whether an authenticated newcomer may replace the agent's live connection.

use ed25519_dalek::SigningKey;
use kenny_proto::auth;
use kenny_proto::frame::{AgentMeta, Challenge, Register};
use kenny_proto::{MUTUAL_AUTH_PROTOCOL, selects_mutual_auth};

use crate::secrets;
use crate::store::AgentRecord;

/// Close codes of the 0.17 contract.
pub(crate) const CLOSE_BAD_FRAME: u16 = 4400;
pub(crate) const CLOSE_UNAUTHORIZED: u16 = 4401;
/// WebSocket's own "try again later": the agent retries with its backoff.
pub(crate) const CLOSE_TRY_AGAIN: u16 = 1013;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reject {
    pub close_code: u16,
    pub reason: String,
}

impl Reject {
    pub(crate) fn bad_frame(reason: impl Into<String>) -> Self {
        Reject {
            close_code: CLOSE_BAD_FRAME,
            reason: reason.into(),
        }
    }

    pub(crate) fn unavailable(reason: impl Into<String>) -> Self {
        Reject {
            close_code: CLOSE_TRY_AGAIN,
            reason: reason.into(),
        }
    }

    pub(crate) fn unauthorized(reason: impl Into<String>) -> Self {
        Reject {
            close_code: CLOSE_UNAUTHORIZED,
            reason: reason.into(),
        }
    }
}

/// Which path a `register` frame asks for.
#[derive(Debug)]
pub(crate) enum Method {
    Mutual { client_nonce: [u8; 32] },
    Token(String),
}

pub(crate) fn method(reg: &Register, allow_token_auth: bool) -> Result<Method, Reject> {
    if !kenny_proto::agent_id::is_valid(&reg.agent_id) {
        return Err(Reject::bad_frame(format!(
            "agent_id must be {}",
            kenny_proto::agent_id::AGENT_ID_RULE
        )));
    }
    match (&reg.protocol, &reg.client_nonce, &reg.token) {
        (Some(p), Some(nonce), None) if selects_mutual_auth(p) => {
            let client_nonce = auth::decode_fixed::<32>("client_nonce", nonce)
                .map_err(|e| Reject::bad_frame(format!("register: {e}")))?;
            Ok(Method::Mutual { client_nonce })
        }
        (Some(p), _, _) if !selects_mutual_auth(p) => Err(Reject::bad_frame(format!(
            "unsupported auth protocol {:?}; mutual auth needs protocol {MUTUAL_AUTH_PROTOCOL} or later",
            p.chars().take(16).collect::<String>()
        ))),
        (None, None, Some(token)) if allow_token_auth => Ok(Method::Token(token.0.clone())),
        (None, None, Some(_)) => Err(Reject::unauthorized(
            "token auth is disabled on this server; enroll the agent and use mutual auth",
        )),
        _ => Err(Reject::bad_frame(
            "register must carry either protocol and client_nonce (mutual auth) or token (legacy), not both",
        )),
    }
}

/// How a connection proved which agent it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proof {
    /// Signed the handshake with the agent's enrolled key.
    Key,
    /// Presented the agent's legacy token.
    Token,
}

/// Once an agent has enrolled a key, its token no longer logs in: whoever copied the
/// token (from a settings file, a backup, a process list) could otherwise connect as
/// the agent. There is deliberately no setting that turns this off; `agent rekey`
/// forgets the key and issues a new token when a PC really lost its key.
pub(crate) fn token_may_log_in(enrolled: bool) -> Result<(), Reject> {
    if enrolled {
        return Err(Reject::unauthorized(
            "this agent has enrolled a key and must use mutual auth; the token no longer logs in",
        ));
    }
    Ok(())
}

/// Whether an authenticated connection may take the place of the agent's current
/// one. Only a connection that proved the agent's key may replace a live one, and not
/// from another host (two PCs sharing an id, or a copied key, would take turns
/// receiving its calls). A token, and a matching host name (which the connection
/// chose itself), are never enough: a token-authenticated agent that lost its
/// connection gets back in once the old one is found dead (three silent heartbeats).
pub(crate) fn admit(
    agent_id: &str,
    proof: Proof,
    current_alive: bool,
    current_host: Option<&str>,
    new_host: Option<&str>,
) -> Result<(), Reject> {
    if !current_alive {
        return Ok(());
    }
    if proof == Proof::Token {
        return Err(Reject::unauthorized(format!(
            "agent {agent_id} is connected; only its enrolled key may replace that connection"
        )));
    }
    if current_host != new_host {
        return Err(Reject::unauthorized(format!(
            "agent id {agent_id} is already connected from another host; give each PC its own id"
        )));
    }
    Ok(())
}

/// Legacy path: the token must hash to the agent's stored token hash.
pub(crate) fn check_token(record_hash: Option<&str>, token: &str) -> Result<(), Reject> {
    let expected = record_hash.ok_or_else(|| Reject::unauthorized("unknown agent or bad token"))?;
    let got = secrets::token_hash(token);
    if secrets::constant_time_eq(&got, expected) {
        Ok(())
    } else {
        Err(Reject::unauthorized("unknown agent or bad token"))
    }
}

/// Mutual path, server half: sign the transcript for the agent to verify. An agent that
/// signs results (`signs_results`) is told the server's protocol, so it signs them here
/// too; an older agent gets the 0.17 challenge it knows.
pub(crate) fn challenge(
    key: &SigningKey,
    agent_id: &str,
    client_nonce: &[u8; 32],
    server_nonce: &[u8; 32],
    signs_results: bool,
) -> Challenge {
    let transcript = auth::transcript(agent_id, client_nonce, server_nonce);
    Challenge {
        server_nonce: auth::encode_b64(server_nonce),
        server_sig: auth::sign(key, &transcript),
        protocol: signs_results.then(|| kenny_proto::WIRE_CONTRACT.to_owned()),
    }
}

/// Mutual path, agent half: its signature over the same transcript. The key it verified
/// against, which also checks the agent's signed results.
pub(crate) fn check_agent_sig(
    record: Option<&AgentRecord>,
    client_nonce: &[u8; 32],
    server_nonce: &[u8; 32],
    agent_sig: &str,
) -> Result<ed25519_dalek::VerifyingKey, Reject> {
    let record = record.ok_or_else(|| Reject::unauthorized("unknown agent"))?;
    let key_b64 = record.public_key.as_deref().ok_or_else(|| {
        Reject::unauthorized("agent is not enrolled; it must POST its key to /api/agents/{id}/enroll first")
    })?;
    let key = auth::parse_public_key(key_b64).map_err(|e| Reject::unauthorized(format!("stored key unusable: {e}")))?;
    let transcript = auth::transcript(&record.agent_id, client_nonce, server_nonce);
    auth::verify(&key, &transcript, agent_sig).map_err(|e| Reject::unauthorized(format!("agent signature: {e}")))?;
    Ok(key)
}

/// Meta as reported, bounded so a hostile agent cannot bloat the registry.
pub(crate) fn sanitize_meta(meta: Option<AgentMeta>) -> Option<AgentMeta> {
    fn cut(s: String) -> String {
        s.chars().take(128).collect()
    }
    meta.map(|m| AgentMeta {
        hostname: cut(m.hostname),
        os: cut(m.os),
        version: cut(m.version),
        arch: m.arch.map(cut),
        channel: m.channel.map(cut),
        dialect: m.dialect.map(cut),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::frame::Secret;

    fn register(protocol: Option<&str>, nonce: Option<&str>, token: Option<&str>) -> Register {
        Register {
            agent_id: "pc-1".into(),
            token: token.map(|t| Secret(t.into())),
            protocol: protocol.map(Into::into),
            client_nonce: nonce.map(Into::into),
            meta: None,
        }
    }

    #[test]
    fn method_selection() {
        let nonce = auth::encode_b64(&[9; 32]);
        assert!(matches!(
            method(&register(Some("0.8"), Some(&nonce), None), true),
            Ok(Method::Mutual { .. })
        ));
        assert!(matches!(
            method(&register(None, None, Some("t")), true),
            Ok(Method::Token(_))
        ));
        assert_eq!(
            method(&register(None, None, Some("t")), false).unwrap_err().close_code,
            CLOSE_UNAUTHORIZED
        );
        assert_eq!(
            method(&register(None, None, None), true).unwrap_err().close_code,
            CLOSE_BAD_FRAME
        );
        // The existing kenny's agents send their own version: any from 0.8 on.
        for newer in ["0.9", "0.17", "0.8.1"] {
            assert!(
                matches!(
                    method(&register(Some(newer), Some(&nonce), None), true),
                    Ok(Method::Mutual { .. })
                ),
                "{newer}"
            );
        }
        let old = method(&register(Some("0.7"), Some(&nonce), None), true).unwrap_err();
        assert_eq!(old.close_code, CLOSE_BAD_FRAME);
        assert!(old.reason.contains("\"0.7\""), "{}", old.reason);
        assert_eq!(
            method(&register(Some("0.8"), Some("short"), None), true)
                .unwrap_err()
                .close_code,
            CLOSE_BAD_FRAME
        );
        for bad in ["../etc", "..", ".", "-x", "", "a b"] {
            let mut bad_id = register(None, None, Some("t"));
            bad_id.agent_id = bad.into();
            assert_eq!(
                method(&bad_id, true).unwrap_err().close_code,
                CLOSE_BAD_FRAME,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn mutual_auth_round_trip_and_failures() {
        let server = SigningKey::from_bytes(&[1; 32]);
        let agent = SigningKey::from_bytes(&[2; 32]);
        let record = AgentRecord {
            agent_id: kenny_proto::AgentId::parse("pc-1").unwrap(),
            public_key: Some(auth::encode_b64(agent.verifying_key().as_bytes())),
            hostname: None,
            os: None,
            version: None,
            arch: None,
            last_seen: None,
            channel: "stable".into(),
        };
        let (cn, sn) = ([3; 32], [4; 32]);
        let ch = challenge(&server, "pc-1", &cn, &sn, false);
        assert_eq!(ch.protocol, None, "a 0.17 agent would refuse the field");
        let told = challenge(&server, "pc-1", &cn, &sn, true);
        assert_eq!(told.protocol.as_deref(), Some(kenny_proto::WIRE_CONTRACT));
        let t = auth::transcript("pc-1", &cn, &sn);
        auth::verify(&server.verifying_key(), &t, &ch.server_sig).unwrap();
        let sig = auth::sign(&agent, &t);
        assert_eq!(
            check_agent_sig(Some(&record), &cn, &sn, &sig),
            Ok(agent.verifying_key())
        );
        // Replayed against a different server nonce, the signature fails.
        assert_eq!(
            check_agent_sig(Some(&record), &cn, &[5; 32], &sig)
                .unwrap_err()
                .close_code,
            CLOSE_UNAUTHORIZED
        );
        let unenrolled = AgentRecord {
            public_key: None,
            ..record
        };
        assert!(
            check_agent_sig(Some(&unenrolled), &cn, &sn, &sig)
                .unwrap_err()
                .reason
                .contains("not enrolled")
        );
        assert!(check_agent_sig(None, &cn, &sn, &sig).is_err());
    }

    #[test]
    fn an_enrolled_agents_token_never_logs_in() {
        assert_eq!(token_may_log_in(false), Ok(()));
        let refused = token_may_log_in(true).unwrap_err();
        assert_eq!(refused.close_code, CLOSE_UNAUTHORIZED);
        assert!(refused.reason.contains("mutual auth"), "{}", refused.reason);
    }

    #[test]
    fn only_the_key_replaces_a_live_connection() {
        let host = Some("den-pc");
        // Nobody connected, or the connection went silent: anyone authenticated gets in.
        assert_eq!(admit("pc", Proof::Token, false, host, host), Ok(()));
        assert_eq!(admit("pc", Proof::Key, false, host, Some("other")), Ok(()));
        // Live: the key from the same host replaces it (a reconnect after a network change).
        assert_eq!(admit("pc", Proof::Key, true, host, host), Ok(()));
        // Regression: a token with a matching host name once replaced a live connection,
        // so anyone holding a legacy token could take the agent's calls.
        let by_token = admit("pc", Proof::Token, true, host, host).unwrap_err();
        assert_eq!(by_token.close_code, CLOSE_UNAUTHORIZED);
        assert!(by_token.reason.contains("enrolled key"), "{}", by_token.reason);
        assert!(admit("pc", Proof::Token, true, host, Some("elsewhere")).is_err());
        // The key from another host (a cloned PC) is refused while the first is alive.
        let clone = admit("pc", Proof::Key, true, host, Some("clone")).unwrap_err();
        assert!(clone.reason.contains("another host"), "{}", clone.reason);
        assert!(admit("pc", Proof::Key, true, host, None).is_err());
    }

    #[test]
    fn token_check() {
        let hash = secrets::token_hash("kenny_agt_abc");
        assert_eq!(check_token(Some(&hash), "kenny_agt_abc"), Ok(()));
        assert!(check_token(Some(&hash), "kenny_agt_abd").is_err());
        assert!(check_token(None, "kenny_agt_abc").is_err());
    }
}
