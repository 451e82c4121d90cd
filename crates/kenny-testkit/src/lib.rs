//! kenny's Rust test kit: the real server, in-process, on a loopback port chosen by
//! the OS, with its data in a temporary directory; agents that dial it over real
//! WebSockets and prove their keys; and typed clients for `/api` and `/mcp`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::time::Duration;
//! use kenny_testkit::TestServer;
//! use serde_json::json;
//!
//! let server = TestServer::start().await?;
//! let mut agent = server.agent("pc-a").await?;
//! let mcp = server.mcp(server.admin_token());
//! let call = tokio::spawn(async move {
//!     mcp.call("shell_exec", json!({"agent_id": "pc-a", "command": "echo hi"})).await
//! });
//! let request = agent.next_request(Duration::from_secs(5)).await?;
//! assert_eq!(request.tool, "shell_exec");
//! agent.respond(&request.id, json!({"stdout": "hi\n", "stderr": "", "exit_code": 0, "truncated": false}))?;
//! assert_eq!(call.await??["stdout"], "hi\n");
//! # Ok(()) }
//! ```
//!
//! Time is an input: [`TestServer::clock`] moves the server's clock forward, so tests
//! of expiry (tokens, sessions, codes, audit retention) take milliseconds, not sleeps.
//!
//! The dashboard chat's model is [`anthropic::ScriptedModel`], a Messages API server
//! whose replies the test scripts.

mod agent;
pub mod anthropic;
mod api;
mod browser;
mod mcp;
pub mod nats;
pub mod postgres;
mod server;

pub use agent::{AgentOptions, TestAgent};
pub use api::{Api, Reply};
pub use browser::{Browser, Page};
pub use mcp::{CallOutcome, Mcp, PROTOCOL};
pub use server::{TestServer, TestServerBuilder};
