//! The server's integration tests, one binary: each module is a subject (accounts, the audit chain,
//! update campaigns, the chat, the dashboard's API, bearer auth, MCP errors, OAuth, policy, signed results, sign-in, the store on SQLite and PostgreSQL), all
//! through `kenny-testkit` against a real server on loopback. One binary, not one per
//! file, so the suite links the server once.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a step that fails should stop the test"
)]

mod common;

mod accounts_api;
mod audit_chain;
mod campaigns;
mod chat;
mod dashboard_api;
mod fleet_run;
mod http_auth;
mod mcp_errors;
mod oauth;
mod policy_api;
mod result_proofs;
mod signin;
mod store_accounts;
mod store_backends;
mod store_history;
