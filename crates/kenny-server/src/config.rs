//! Server settings, from flags or `KENNY_*` environment variables.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Audit rows are kept a year unless configured otherwise.
pub const DEFAULT_AUDIT_RETENTION: Duration = Duration::from_secs(365 * 24 * 3600);

/// PCs one `fleet_run` may name unless `--fleet-run-max` says otherwise.
pub const DEFAULT_FLEET_RUN_MAX: usize = 100;

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Keep the data in this PostgreSQL database instead of the data directory's SQLite
    /// file (the server key and release builds stay in the data directory).
    pub database_url: Option<String>,
    /// Join the cluster of replicas that meets on this NATS server (needs
    /// `database_url`).
    pub nats_url: Option<String>,
    /// The URL clients use to reach this server; defaults to `http://<listen>`.
    pub public_url: Option<String>,
    /// How often the server pings each agent; three silent beats mark it dead.
    pub heartbeat: Duration,
    /// How long to wait for a forwarded call that sets no `timeout_s`; `None` waits
    /// as long as the catalog says the tool may take.
    pub call_timeout: Option<Duration>,
    /// Accept the legacy per-agent token handshake as well as mutual Ed25519 (for
    /// agents that have not enrolled a key; an enrolled agent's token never logs in).
    pub allow_token_auth: bool,
    /// How long audit rows are kept; `None` keeps them for ever.
    pub audit_retention: Option<Duration>,
    /// Most PCs one `fleet_run` may name.
    pub fleet_run_max: usize,
    /// How long each resolution of the PCs' history is kept.
    pub history: crate::history::Retention,
    /// The connection cap and the header/idle deadline of the HTTP server.
    pub http: crate::listener::HttpLimits,
    /// Time an agent connection has, from its upgrade, to authenticate.
    pub agent_handshake_timeout: Duration,
    pub oauth: OAuthSettings,
    /// The dashboard chat's model API.
    pub chat: ChatSettings,
    /// Most names a PC's web filter may block; a longer list is refused, never cut.
    pub webfilter_max_domains: usize,
    /// Lets callers other than loopback read `/metrics` with `Authorization: Bearer`.
    pub metrics_token: Option<String>,
    /// How long a removed PC's history is kept before it is purged.
    pub removed_retention: Duration,
    /// Serve HTTPS from these files instead of plain HTTP.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Backups taken on an interval while the server runs; `None`: only by hand.
    pub backups: Option<crate::backup::schedule::Schedule>,
}

impl ServeConfig {
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> Self {
        ServeConfig {
            listen,
            data_dir,
            database_url: None,
            nats_url: None,
            public_url: None,
            tls: None,
            heartbeat: Duration::from_secs(15),
            call_timeout: None,
            allow_token_auth: true,
            audit_retention: Some(DEFAULT_AUDIT_RETENTION),
            fleet_run_max: DEFAULT_FLEET_RUN_MAX,
            history: Default::default(),
            removed_retention: Duration::from_secs(30 * 86_400),
            http: Default::default(),
            agent_handshake_timeout: Duration::from_secs(10),
            oauth: Default::default(),
            chat: Default::default(),
            webfilter_max_domains: crate::webfilter::MAX_DOMAINS_ON_THE_WIRE,
            metrics_token: None,
            backups: None,
        }
    }
}

/// Hosts the MCP endpoint answers for (its DNS-rebinding guard): loopback names,
/// plus the public URL's host when one is configured.
pub fn allowed_hosts(public_url: Option<&str>) -> Vec<String> {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into(), "[::1]".into()];
    if let Some(host) = public_url.and_then(url_host) {
        hosts.push(host);
    }
    hosts
}

/// Whether a `Host` header value (with or without port) names one of `allowed`.
pub fn host_allowed(host_header: &str, allowed: &[String]) -> bool {
    let host = host_header.trim();
    let name = if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(host)
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    let name = name.to_ascii_lowercase();
    allowed.contains(&name)
}

fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if authority.starts_with('[') {
        authority.split_inclusive(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Lifetimes, configurable per server.
#[derive(Debug, Clone, Copy)]
pub struct OAuthSettings {
    pub code_ttl: Duration,
    pub access_ttl: Duration,
    pub refresh_ttl: Duration,
}

impl Default for OAuthSettings {
    fn default() -> Self {
        OAuthSettings {
            code_ttl: Duration::from_secs(60),
            access_ttl: Duration::from_secs(3600),
            refresh_ttl: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// Where the model is and which one to use.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    pub api_key: Option<crate::secrets::Masked>,
    pub base_url: String,
    pub model: String,
    pub max_tokens: u32,
    /// Model tokens (input and output) one user may use per UTC day; 0 for no limit.
    pub daily_tokens_per_user: u64,
}

impl Default for ChatSettings {
    fn default() -> Self {
        ChatSettings {
            api_key: None,
            base_url: "https://api.anthropic.com".into(),
            model: DEFAULT_MODEL.into(),
            max_tokens: 4096,
            daily_tokens_per_user: DEFAULT_DAILY_TOKENS,
        }
    }
}

pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// A day of steady use of the chat by one person, not a runaway loop's worth.
pub const DEFAULT_DAILY_TOKENS: u64 = 2_000_000;

impl ChatSettings {
    /// From `KENNY_ANTHROPIC_API_KEY`, `KENNY_ANTHROPIC_BASE_URL`, `KENNY_CHAT_MODEL` and
    /// `KENNY_CHAT_DAILY_TOKENS` (for launchers without flags of their own); unset or
    /// unreadable ones keep their defaults.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let defaults = ChatSettings::default();
        ChatSettings {
            api_key: var("KENNY_ANTHROPIC_API_KEY").map(crate::secrets::Masked::new),
            base_url: var("KENNY_ANTHROPIC_BASE_URL").unwrap_or(defaults.base_url),
            model: var("KENNY_CHAT_MODEL").unwrap_or(defaults.model),
            max_tokens: defaults.max_tokens,
            daily_tokens_per_user: var("KENNY_CHAT_DAILY_TOKENS")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(defaults.daily_tokens_per_user),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_host_is_allowed() {
        let hosts = allowed_hosts(Some("https://Kenny.Example.com:8443/base"));
        assert!(hosts.contains(&"kenny.example.com".to_owned()));
        assert!(hosts.contains(&"127.0.0.1".to_owned()));
        assert_eq!(url_host("http://[::1]:80/"), Some("[::1]".into()));
        assert_eq!(url_host("https://user@host.lan"), Some("host.lan".into()));
        assert_eq!(allowed_hosts(None).len(), 4);
        assert!(host_allowed("Kenny.Example.com:8443", &hosts));
        assert!(
            host_allowed("127.0.0.1:7420", &hosts)
                && host_allowed("[::1]:7420", &hosts)
                && host_allowed("localhost", &hosts)
        );
        assert!(!host_allowed("evil.example:80", &hosts) && !host_allowed("", &hosts));
    }
}
