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
pub mod auth;
pub mod catalog;
pub mod error;
pub mod frame;
pub mod results;
pub mod update;

/// The `protocol` value an agent sends in `register` to ask for mutual Ed25519 auth.
pub const MUTUAL_AUTH_PROTOCOL: &str = "0.8";

/// The wire contract version this crate implements.
pub const WIRE_CONTRACT: &str = "0.17";
