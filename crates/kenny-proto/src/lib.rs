//! The kenny wire contract (version 0.18: 0.17 plus signed results) shared by the server and the agent, plus the
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
pub mod proof;
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
    version_at_least(protocol, &[0, 8])
}

/// Whether `protocol` is a dotted version (`major.minor`, optionally more numeric
/// parts) at least `floor`, compared part by part as numbers.
pub(crate) fn version_at_least(protocol: &str, floor: &[u64]) -> bool {
    let parts: Option<Vec<u64>> = protocol.split('.').map(|p| p.parse().ok()).collect();
    match parts {
        Some(parts) if parts.len() >= 2 => parts.as_slice() >= floor,
        _ => false,
    }
}

/// The wire contract version this crate implements: 0.17's frames, plus signed results
/// ([`proof`]), which only a peer that said it speaks 0.18 ever sees.
pub const WIRE_CONTRACT: &str = "0.18";

/// The `protocol` kenny's agent sends in `register`: mutual auth and signed results.
pub const AGENT_PROTOCOL: &str = proof::SIGNED_RESULTS_PROTOCOL;

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
