//! kenny-server: one process, one port. Agents dial in over `/agent/ws`; MCP clients
//! call them by name over `/mcp`; the HTTP API lives under `/api`.
//!
//! Start at [`server::start`]; the path of a forwarded call is
//! [`mcp`] → [`forward::Forwarder::forward`] → [`registry::AgentLink::call`] → [`tunnel`].

pub(crate) mod accounts;
pub mod admin;
pub(crate) mod alerts;
pub(crate) mod api;
pub(crate) mod approvals;
pub(crate) mod audit;
pub(crate) mod auth;
pub mod backup;
pub(crate) mod call_failure;
pub(crate) mod changes;
pub mod chat;
pub mod clock;
pub mod cluster;
pub mod config;
pub(crate) mod device;
pub(crate) mod fleet;
pub(crate) mod forward;
pub(crate) mod guard;
pub(crate) mod health;
pub mod history;
pub mod install;
pub mod leader;
pub mod ledger;
pub mod listener;
pub(crate) mod mcp;
pub mod metrics;
pub mod oauth;
pub mod onboarding;
pub(crate) mod passwords;
pub(crate) mod policy;
pub mod principal;
pub mod proofs;
pub(crate) mod ratelimit;
pub mod registry;
pub(crate) mod retire;
pub(crate) mod rollout;
pub mod secrets;
pub mod server;
pub mod server_key;
pub(crate) mod server_tools;
pub(crate) mod session;
pub mod settings_file;
pub mod state;
pub mod store;
pub mod tls;
pub(crate) mod totp;
pub(crate) mod tunnel;
pub(crate) mod updates;
pub(crate) mod web;
pub(crate) mod webfilter;

pub use config::ServeConfig;
pub use server::{RunningServer, start};

/// This server's version (the crate's) and build (the commit it was built from, or what
/// the packager set in `KENNY_BUILD`), as the dashboard footer and `/metrics` show them.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const BUILD: &str = env!("KENNY_BUILD");
