//! kenny-server: one process, one port. Agents dial in over `/agent/ws`; MCP clients
//! call them by name over `/mcp`; the HTTP API lives under `/api`.
//!
//! Start at [`server::start`]; the path of a forwarded call is
//! [`mcp`] → [`forward::Forwarder::forward`] → [`registry::AgentLink::call`] → [`tunnel`].

pub mod accounts;
pub mod admin;
pub mod api;
pub mod audit;
pub mod auth;
pub mod chat;
pub mod clock;
pub mod config;
pub mod device;
pub mod fleet;
pub mod forward;
pub mod guard;
pub mod health;
pub mod listener;
pub mod mcp;
pub mod oauth;
pub mod passwords;
pub mod policy;
pub mod principal;
pub mod ratelimit;
pub mod registry;
pub mod secrets;
pub mod server;
pub mod state;
pub mod store;
pub mod totp;
pub mod tunnel;
pub mod updates;
pub mod web;

pub use config::ServeConfig;
pub use server::{RunningServer, start};
