//! Frames: one JSON object per WebSocket text message, discriminated by `type`.
//!
//! Decoding is strict: an unknown `type`, an unknown field, a missing field or a frame
//! over the size limit is an error with a reason the caller can log.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::proof::{ResultProof, WireProof};

/// Bytes a frame may take. Before auth completes only the handshake frames are
/// expected, so the bound is small; afterwards responses may carry file contents and
/// screenshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_frame_bytes: usize,
}

impl Limits {
    pub const HANDSHAKE: Limits = Limits {
        max_frame_bytes: 16 * 1024,
    };
    pub const AUTHENTICATED: Limits = Limits {
        max_frame_bytes: 8 * 1024 * 1024,
    };
}

/// A string that must never reach a log: `Debug` prints a mask.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Frame {
    Register(Register),
    Challenge(Challenge),
    Auth(Auth),
    Request(Request),
    Response(Response),
    Telemetry(Telemetry),
    Log(Log),
    Policy(Policy),
    Ping {},
    Pong {},
}

#[allow(non_upper_case_globals)]
impl Frame {
    /// `{"type":"ping"}`.
    pub const Ping: Frame = Frame::Ping {};
    /// `{"type":"pong"}`.
    pub const Pong: Frame = Frame::Pong {};
}

/// First frame from an agent. Mutual auth sets `protocol` and `client_nonce`; the
/// legacy path sets `token` and neither of the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Base64 (standard, padded) of 32 random bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_nonce: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<AgentMeta>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentMeta {
    pub hostname: String,
    pub os: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The tool dialect the agent speaks ([`crate::dialect`]); kenny's agent sends
    /// [`crate::dialect::CURRENT`], the existing kenny's sends nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
}

impl AgentMeta {
    pub fn dialect(&self) -> crate::dialect::Dialect {
        crate::dialect::Dialect::from_meta(self.dialect.as_deref())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Challenge {
    pub server_nonce: String,
    pub server_sig: String,
    /// The server's protocol, sent only to an agent whose `register` said it speaks
    /// [`crate::proof::SIGNED_RESULTS_PROTOCOL`] or later (an older agent would refuse
    /// the field): from it the agent knows to sign its results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    pub agent_sig: String,
}

/// A call for the agent at the other end of this connection. It deliberately carries
/// no agent identifier: the connection it travels on is the routing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub id: String,
    pub tool: String,
    pub args: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    pub id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
    /// The agent's signature over the call and this answer ([`crate::proof`]), sent
    /// only to a server whose challenge said it speaks 0.18 or later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<WireProof>,
}

impl Response {
    pub fn success(id: impl Into<String>, result: Value) -> Self {
        Response {
            id: id.into(),
            ok: true,
            result: Some(result),
            error: None,
            proof: None,
        }
    }

    /// The answer as the proof's outcome digest sees it: the result, or the error's
    /// code and message (an `ok: false` without an error reads as an empty one).
    pub fn outcome_digest(&self) -> String {
        match (&self.result, &self.error) {
            (result, _) if self.ok => crate::proof::outcome_digest(Ok(result.as_ref().unwrap_or(&Value::Null))),
            (_, Some(e)) => crate::proof::outcome_digest(Err((&e.code, &e.message))),
            (_, None) => crate::proof::outcome_digest(Err(("", ""))),
        }
    }

    /// The full proof of this answer, given by `agent_id` to `tool` called with
    /// arguments of digest `args_sha256`, with `wire`'s time and signature.
    pub fn full_proof(&self, agent_id: &str, tool: &str, args_sha256: String, wire: WireProof) -> ResultProof {
        ResultProof {
            request_id: self.id.clone(),
            agent_id: agent_id.to_owned(),
            tool: tool.to_owned(),
            args_sha256,
            outcome_sha256: self.outcome_digest(),
            at_ms: wire.at_ms,
            sig: wire.sig,
        }
    }

    /// Signs this answer as `agent_id`, at `at_ms`, with `key`: its `proof` field.
    pub fn sign(
        &mut self,
        key: &ed25519_dalek::SigningKey,
        agent_id: &str,
        tool: &str,
        args_sha256: String,
        at_ms: u64,
    ) {
        let unsigned = WireProof {
            at_ms,
            sig: String::new(),
        };
        self.proof = Some(
            self.full_proof(agent_id, tool, args_sha256, unsigned)
                .signed(key)
                .wire(),
        );
    }

    pub fn failure(id: impl Into<String>, code: &str, message: impl Into<String>) -> Self {
        Response {
            id: id.into(),
            ok: false,
            result: None,
            error: Some(WireError {
                code: code.to_owned(),
                message: message.into(),
            }),
            proof: None,
        }
    }
}

/// Kept as strings: a newer agent may send a code this build does not know, and the
/// server passes agent codes through to the caller unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireError {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    pub agent_id: String,
    pub collected_at: String,
    pub snapshot: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Log {
    pub agent_id: String,
    pub at: String,
    pub level: String,
    pub target: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub rules: Vec<PolicyRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    pub id: String,
    pub applies_to: String,
    pub pattern: String,
    pub reason: String,
}

impl Frame {
    /// The `type` value, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Register(_) => "register",
            Frame::Challenge(_) => "challenge",
            Frame::Auth(_) => "auth",
            Frame::Request(_) => "request",
            Frame::Response(_) => "response",
            Frame::Telemetry(_) => "telemetry",
            Frame::Log(_) => "log",
            Frame::Policy(_) => "policy",
            Frame::Ping {} => "ping",
            Frame::Pong {} => "pong",
        }
    }

    /// For frames an agent pushes on its own, the agent they claim to come from.
    pub fn claimed_agent_id(&self) -> Option<&str> {
        match self {
            Frame::Telemetry(t) => Some(&t.agent_id),
            Frame::Log(l) => Some(&l.agent_id),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("frame of {len} bytes exceeds the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    #[error("malformed frame: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("inconsistent response {id}: {reason}")]
    InconsistentResponse { id: String, reason: &'static str },
}

/// Parses one text message into a frame, enforcing `limits` before parsing.
pub fn decode(text: &str, limits: Limits) -> Result<Frame, DecodeError> {
    if text.len() > limits.max_frame_bytes {
        return Err(DecodeError::TooLarge {
            len: text.len(),
            max: limits.max_frame_bytes,
        });
    }
    let frame: Frame = serde_json::from_str(text)?;
    if let Frame::Response(r) = &frame {
        let reason = match (r.ok, &r.result, &r.error) {
            (true, _, Some(_)) => Some("ok is true but an error is present"),
            (false, _, None) => Some("ok is false but no error is present"),
            (false, Some(_), _) => Some("ok is false but a result is present"),
            _ => None,
        };
        if let Some(reason) = reason {
            return Err(DecodeError::InconsistentResponse {
                id: r.id.clone(),
                reason,
            });
        }
    }
    Ok(frame)
}

/// Serialises a frame to the text of one WebSocket message.
#[expect(
    clippy::expect_used,
    reason = "frames hold only strings, maps and JSON values: serialising one cannot fail"
)]
pub fn encode(frame: &Frame) -> String {
    serde_json::to_string(frame).expect("frame serialisation is infallible")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_rejects(text: &str, needle: &str) {
        let err = decode(text, Limits::AUTHENTICATED).unwrap_err().to_string();
        assert!(err.contains(needle), "{text}: got {err:?}, wanted {needle:?}");
    }

    #[test]
    fn ping_and_pong_are_bare() {
        assert_eq!(encode(&Frame::Ping), r#"{"type":"ping"}"#);
        assert_eq!(decode(r#"{"type":"pong"}"#, Limits::HANDSHAKE).unwrap(), Frame::Pong);
    }

    #[test]
    fn unknown_fields_and_types_are_rejected() {
        check_rejects(r#"{"type":"ping","extra":1}"#, "unknown field");
        check_rejects(
            r#"{"type":"request","id":"1","tool":"t","args":{},"agent_id":"x"}"#,
            "unknown field `agent_id`",
        );
        check_rejects(r#"{"type":"teleport"}"#, "unknown variant");
        check_rejects(r#"{"id":"1"}"#, "missing field `type`");
        check_rejects(r#"{"type":"request","id":"1","tool":"t","args":[]}"#, "invalid type");
        check_rejects("not json", "malformed");
    }

    #[test]
    fn oversized_frames_are_rejected_before_parsing() {
        let big = format!(r#"{{"type":"log","pad":"{}"}}"#, "x".repeat(20_000));
        let err = decode(&big, Limits::HANDSHAKE).unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { max: 16384, .. }), "{err}");
    }

    #[test]
    fn responses_must_be_consistent() {
        check_rejects(r#"{"type":"response","id":"1","ok":false}"#, "no error");
        check_rejects(
            r#"{"type":"response","id":"1","ok":true,"error":{"code":"x","message":"y"}}"#,
            "error is present",
        );
    }

    #[test]
    fn secrets_are_masked_in_debug() {
        let reg = Register {
            agent_id: "pc".into(),
            token: Some(Secret("kenny_agt_supersecret".into())),
            protocol: None,
            client_nonce: None,
            meta: None,
        };
        assert!(!format!("{reg:?}").contains("supersecret"));
    }
}
