//! The name of one PC: the target of every forwarded call. A value of this type has
//! been checked against the rule once, where it entered kenny; everything after that
//! takes the type, not a string.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How agent ids are formed, for error messages.
pub const AGENT_ID_RULE: &str = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit";

/// An agent id: 1-64 letters, digits, `.`, `_`, `-`, starting with a letter or digit (so
/// `.` and `..` can never be ids: they appear in URLs and paths).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentId(String);

/// Text that is not an agent id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{shown:?} is not an agent id (ids are {AGENT_ID_RULE})")]
pub struct InvalidAgentId {
    /// The text, cut to a length that is safe to show.
    pub shown: String,
}

impl AgentId {
    pub fn parse(text: &str) -> Result<AgentId, InvalidAgentId> {
        if is_valid(text) {
            Ok(AgentId(text.to_owned()))
        } else {
            Err(InvalidAgentId {
                shown: text.chars().take(64).collect(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// Whether `text` follows the rule (for callers that only need a yes or no).
pub fn is_valid(text: &str) -> bool {
    text.len() <= 64
        && text.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl TryFrom<String> for AgentId {
    type Error = InvalidAgentId;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        if is_valid(&text) {
            Ok(AgentId(text))
        } else {
            AgentId::parse(&text)
        }
    }
}

impl From<AgentId> for String {
    fn from(id: AgentId) -> String {
        id.0
    }
}

impl AsRef<str> for AgentId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Read-only text: an id can be used wherever a `&str` is read, and never changed.
impl std::ops::Deref for AgentId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<AgentId> for &str {
    fn eq(&self, other: &AgentId) -> bool {
        *self == other.0
    }
}

impl std::borrow::Borrow<str> for AgentId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for AgentId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for AgentId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_rule() {
        for good in ["den-pc.home_1", "a", "7", &"a".repeat(64)] {
            assert_eq!(AgentId::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", ".", "..", "-x", "_x", "a b", "a/b", "pc\u{e9}", &"a".repeat(65)] {
            let err = AgentId::parse(bad).unwrap_err();
            assert!(err.to_string().contains("is not an agent id"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn json_holds_only_valid_ids() {
        let id: AgentId = serde_json::from_str("\"pc-a\"").unwrap();
        assert_eq!(id, "pc-a");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"pc-a\"");
        assert!(serde_json::from_str::<AgentId>("\"../etc\"").is_err());
    }
}
