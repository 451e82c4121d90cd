//! The kenny wire contract (version 0.17) shared by the server and the agent, plus the
//! one tool catalog both sides and the MCP layer derive from.
//!
//! This crate does no I/O: it defines frames, how they are decoded and bounded, the
//! mutual-auth transcript, and the catalog of tools. Transport lives in the binaries.
//!
//! ```
//! use kenny_proto::frame::{decode, Frame, Limits};
//! let frame = decode(r#"{"type":"ping"}"#, Limits::AUTHENTICATED).unwrap();
//! assert_eq!(frame, Frame::Ping);
//! ```

pub use agent_id::AgentId;

pub mod agent_id;
pub mod args;
pub mod auth;
pub mod catalog;
pub mod dialect;
pub mod domains;
pub mod error;
pub mod frame;
pub mod outputs;
pub mod results;
pub mod server_args;
pub mod update;

/// The `protocol` value kenny's agent sends in `register` to ask for mutual Ed25519
/// auth: the first version that has it. The existing kenny's agent sends its own
/// version (up to "0.17" today); see [`selects_mutual_auth`].
pub const MUTUAL_AUTH_PROTOCOL: &str = "0.8";

/// Whether a `register.protocol` value selects mutual auth: a dotted version
/// (`major.minor`, optionally more parts) of at least 0.8, compared as numbers, so
/// "0.17" and "0.8.1" do and "0.7" or "0.8-beta" do not.
pub fn selects_mutual_auth(protocol: &str) -> bool {
    let parts: Option<Vec<u64>> = protocol.split('.').map(|p| p.parse().ok()).collect();
    match parts {
        Some(parts) if parts.len() >= 2 => parts.as_slice() >= [0, 8].as_slice(),
        _ => false,
    }
}

/// The wire contract version this crate implements.
pub const WIRE_CONTRACT: &str = "0.17";

#[cfg(test)]
mod tests {
    #[test]
    fn protocols_compare_as_versions() {
        for yes in ["0.8", "0.9", "0.10", "0.17", "0.18", "0.8.1", "1.0"] {
            assert!(super::selects_mutual_auth(yes), "{yes}");
        }
        for no in ["0.7", "0.7.9", "0", "8", "", "0.8-beta", "v0.8", "0..8", "0.x"] {
            assert!(!super::selects_mutual_auth(no), "{no}");
        }
    }
}
