//! kenny-agent: dials out to a kenny server, authenticates, and runs the tool calls it
//! receives on this PC. It never listens on a port.
//!
//! [`run`] is the whole agent: [`identity`] holds its key and enrollment,
//! [`tunnel`] keeps one authenticated connection alive, [`tools`] executes calls.

pub mod backoff;
pub mod config;
pub mod guard;
pub mod handover;
pub mod identity;
pub mod install;
pub mod sandbox;
pub mod service;
pub(crate) mod signing;
pub mod switch;
pub mod tools;
pub mod tunnel;
#[cfg(windows)]
pub mod winservice;

pub use config::{AgentConfig, AuthMode};
pub use tunnel::run;
