//! Error codes that travel in `response.error.code` and in MCP tool errors.

use serde::{Deserialize, Serialize};

/// Every error code a caller may see. The first nine travel on the wire from agents;
/// the rest are produced by the server while resolving and forwarding a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Timeout,
    NotFound,
    ExecFailed,
    Unsupported,
    BadArgs,
    Internal,
    Disabled,
    Blocked,
    Paused,
    // Server-side codes.
    NoAgent,
    UnknownAgent,
    Offline,
    Forbidden,
    Denied,
    /// An agent's answer whose signature did not verify against its enrolled key
    /// (protocol 0.18); the answer was discarded.
    BadSignature,
    /// A state-changing call held until a person approves it (an operator's rule on
    /// the caller); nothing has run yet.
    AwaitingApproval,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 16] = [
        Self::Timeout,
        Self::NotFound,
        Self::ExecFailed,
        Self::Unsupported,
        Self::BadArgs,
        Self::Internal,
        Self::Disabled,
        Self::Blocked,
        Self::Paused,
        Self::NoAgent,
        Self::UnknownAgent,
        Self::Offline,
        Self::Forbidden,
        Self::Denied,
        Self::BadSignature,
        Self::AwaitingApproval,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::NotFound => "not_found",
            Self::ExecFailed => "exec_failed",
            Self::Unsupported => "unsupported",
            Self::BadArgs => "bad_args",
            Self::Internal => "internal",
            Self::Disabled => "disabled",
            Self::Blocked => "blocked",
            Self::Paused => "paused",
            Self::NoAgent => "no_agent",
            Self::UnknownAgent => "unknown_agent",
            Self::Offline => "offline",
            Self::Forbidden => "forbidden",
            Self::Denied => "denied",
            Self::BadSignature => "bad_signature",
            Self::AwaitingApproval => "awaiting_approval",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_their_names() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
        assert_eq!(ErrorCode::parse("nope"), None);
    }
}
