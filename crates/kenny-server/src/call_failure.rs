//! A call that did not succeed, as every caller sees it (MCP result, dashboard route,
//! chat): `code: message`, and whether the server refused it before any agent saw it.
//! Below the forwarder and the update orders, which both produce one.

use kenny_proto::error::ErrorCode;

/// A call that did not succeed, as callers see it: `code: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    /// A server code, or an agent's code passed through unchanged.
    pub code: String,
    pub message: String,
    /// The server turned the call away before any agent saw it.
    pub refused: bool,
}

impl CallFailure {
    /// A failure while or after the call was forwarded.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CallFailure {
            code: code.as_str().to_owned(),
            message: message.into(),
            refused: false,
        }
    }

    /// The server refuses the call; no agent sees it.
    pub fn refusal(code: ErrorCode, message: impl Into<String>) -> Self {
        CallFailure {
            refused: true,
            ..Self::new(code, message)
        }
    }
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}
