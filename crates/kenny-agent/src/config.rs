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
    /// Where the PC owner's remote-control switch lives; the state directory unless an
    /// installed service puts it somewhere the PC's own users may write.
    pub switch_dir: Option<PathBuf>,
    pub heartbeat: Duration,
    pub max_backoff: Duration,
    pub telemetry_interval: Duration,
    /// Allow `http://` to a server that is not on this machine.
    pub allow_plaintext: bool,
    /// How long a freshly installed build has to log in before it is rolled back.
    pub update_trial: Duration,
    /// The settings file this agent was started with (`--config`): protected like the key.
    pub settings_file: Option<PathBuf>,
    /// Directories no tool may read or write at all: for `kenny up`, the server's data
    /// directory (database, server key).
    pub private_dirs: Vec<PathBuf>,
    /// Where the tools act: the system's places, or a test's stand-ins.
    pub tools: crate::tools::ToolContext,
}

impl AgentConfig {
    pub fn new(server: impl Into<String>, agent_id: impl Into<String>, auth: AuthMode, state_dir: PathBuf) -> Self {
        AgentConfig {
            server: server.into().trim_end_matches('/').to_owned(),
            agent_id: agent_id.into(),
            auth,
            state_dir,
            switch_dir: None,
            heartbeat: Duration::from_secs(20),
            max_backoff: Duration::from_secs(60),
            telemetry_interval: Duration::from_secs(900),
            allow_plaintext: false,
            update_trial: Duration::from_secs(90),
            settings_file: None,
            private_dirs: Vec::new(),
            tools: Default::default(),
        }
    }

    /// The tunnel URL derived from the server URL. Plain `http://` is refused unless
    /// the server is on this machine or `allow_plaintext` is set: without TLS anyone on
    /// the path could hijack the session after the handshake.
    pub fn ws_url(&self) -> Result<String, String> {
        let base = &self.server;
        let (tls, rest) = if let Some(r) = base.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = base.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(format!(
                "server URL {base:?} must start with https:// (or http:// for a server on this machine)"
            ));
        };
        if !tls && !self.allow_plaintext && !is_loopback_authority(rest) {
            return Err(format!(
                "refusing plain http:// to {base}: use https:// (put a TLS proxy in front of kenny-server), or pass --allow-plaintext on a network you trust"
            ));
        }
        Ok(format!("{}://{rest}/agent/ws", if tls { "wss" } else { "ws" }))
    }
}

fn is_loopback_authority(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ws_url_from_server_url() {
        let url = |s: &str, plain: bool| {
            let mut c = AgentConfig::new(s, "pc", AuthMode::Token(Secret("t".into())), "/tmp".into());
            c.allow_plaintext = plain;
            c.ws_url()
        };
        assert_eq!(
            url("http://127.0.0.1:7420", false).unwrap(),
            "ws://127.0.0.1:7420/agent/ws"
        );
        assert_eq!(
            url("http://localhost:7420/", false).unwrap(),
            "ws://localhost:7420/agent/ws"
        );
        assert_eq!(url("http://[::1]:7420", false).unwrap(), "ws://[::1]:7420/agent/ws");
        assert_eq!(
            url("https://kenny.example.com/", false).unwrap(),
            "wss://kenny.example.com/agent/ws"
        );
        assert!(
            url("http://kenny.example.com", false)
                .unwrap_err()
                .contains("--allow-plaintext")
        );
        assert!(url("http://127.0.0.1.evil.example", false).is_err());
        assert_eq!(
            url("http://192.0.2.7:7420", true).unwrap(),
            "ws://192.0.2.7:7420/agent/ws"
        );
        assert!(url("ws://127.0.0.1:7420", false).unwrap_err().contains("https://"));
        assert!(url("ftp://x", false).is_err());
    }
}
