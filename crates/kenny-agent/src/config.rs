//! Agent settings, from flags or `KENNY_*` environment variables.

use std::path::PathBuf;
use std::time::Duration;

use kenny_proto::frame::Secret;

#[derive(Debug, Clone)]
pub enum AuthMode {
    /// Legacy: the per-agent token in `register`.
    Token(Secret),
    /// Mutual Ed25519: the server key pinned here; the enrollment token is needed only
    /// until the agent's own key is enrolled.
    Mutual {
        server_pubkey: String,
        enroll_token: Option<Secret>,
    },
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:7420`.
    pub server: String,
    pub agent_id: String,
    pub auth: AuthMode,
    pub state_dir: PathBuf,
    pub heartbeat: Duration,
    pub max_backoff: Duration,
    pub telemetry_interval: Duration,
}

impl AgentConfig {
    pub fn new(server: impl Into<String>, agent_id: impl Into<String>, auth: AuthMode, state_dir: PathBuf) -> Self {
        AgentConfig {
            server: server.into().trim_end_matches('/').to_owned(),
            agent_id: agent_id.into(),
            auth,
            state_dir,
            heartbeat: Duration::from_secs(20),
            max_backoff: Duration::from_secs(60),
            telemetry_interval: Duration::from_secs(900),
        }
    }

    /// The tunnel URL derived from the server URL.
    pub fn ws_url(&self) -> Result<String, String> {
        let base = &self.server;
        let rest = if let Some(r) = base.strip_prefix("http://") {
            format!("ws://{r}")
        } else if let Some(r) = base.strip_prefix("https://") {
            format!("wss://{r}")
        } else if base.starts_with("ws://") || base.starts_with("wss://") {
            base.clone()
        } else {
            return Err(format!("server URL {base:?} must start with http:// or https://"));
        };
        Ok(format!("{rest}/agent/ws"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ws_url_from_server_url() {
        let c = |s: &str| AgentConfig::new(s, "pc", AuthMode::Token(Secret("t".into())), "/tmp".into()).ws_url();
        assert_eq!(c("http://127.0.0.1:7420").unwrap(), "ws://127.0.0.1:7420/agent/ws");
        assert_eq!(
            c("https://kenny.example.com/").unwrap(),
            "wss://kenny.example.com/agent/ws"
        );
        assert!(c("ftp://x").unwrap_err().contains("http://"));
    }
}
