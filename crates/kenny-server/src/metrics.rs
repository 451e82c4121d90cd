//! What `/metrics` shows, in the Prometheus text format: calls by tool and outcome with
//! their latency, counted where they end (the forwarder, the MCP edge, the server's own
//! tools), and gauges the route reads when scraped (agents connected and known, the
//! audit writer's queue, web filters), and the scheduled backups' last success and
//! failures, set by `backup::schedule` as they happen. Loopback callers may read it; anyone else needs
//! `--metrics-token` ([`may_scrape`]). The route itself is in `server`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabels {
    kind: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    build: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenKind {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackupStage {
    /// `backup` (the backup itself) or `copy` (its copy to `--backup-copy-dir`).
    stage: String,
}

/// The server's counters, shared by everything that counts.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    seconds: Family<ToolLabel, Histogram>,
    agents_connected: Gauge,
    agents_known: Gauge,
    audit_queue: Gauge,
    web_filters: Gauge,
    leading: Gauge,
    deliveries: Family<DeliveryLabels, Gauge>,
    chat_tokens: Family<TokenKind, Gauge>,
    chat_turns: Gauge,
    backup_last_success: Gauge,
    backup_failures: Family<BackupStage, Counter>,
    /// Tool names besides the catalog's that count under their own name (the server's).
    own_tools: Vec<&'static str>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(Vec::new())
    }
}

impl Metrics {
    /// Counters for the catalog's tools and `own_tools`.
    pub fn new(own_tools: Vec<&'static str>) -> Self {
        let calls = Family::<CallLabels, Counter>::default();
        let seconds = Family::<ToolLabel, Histogram>::new_with_constructor(|| {
            // 5 ms to about 20 minutes: a DNS flush to a full package upgrade.
            Histogram::new(exponential_buckets(0.005, 2.5, 14))
        });
        let (agents_connected, agents_known, audit_queue, web_filters) =
            (Gauge::default(), Gauge::default(), Gauge::default(), Gauge::default());
        let mut registry = Registry::with_prefix("kenny");
        registry.register(
            "calls",
            "Tool calls ended, by tool and outcome (ok, error, refused)",
            calls.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "How long tool calls took, by tool",
            seconds.clone(),
        );
        registry.register("agents_connected", "Agents connected now", agents_connected.clone());
        registry.register("agents_known", "Agents registered on this server", agents_known.clone());
        registry.register(
            "audit_queue_depth",
            "Audit records waiting for the storage writer",
            audit_queue.clone(),
        );
        registry.register("web_filters", "PCs with a web filter set up", web_filters.clone());
        let leading = Gauge::default();
        registry.register(
            "leading",
            "1 when this server runs the fleet-wide background work (a single server always; one replica of a cluster)",
            leading.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: crate::VERSION.into(),
                build: crate::BUILD.into(),
            })
            .set(1);
        registry.register("build_info", "This server's version and build", build);
        let deliveries = Family::<DeliveryLabels, Gauge>::default();
        registry.register(
            "alert_deliveries",
            "Alert deliveries kept, by channel kind and state (queued, sent, failed)",
            deliveries.clone(),
        );
        let chat_tokens = Family::<TokenKind, Gauge>::default();
        registry.register(
            "chat_tokens_today",
            "Model tokens the dashboard chat used today (UTC), by kind (input, output)",
            chat_tokens.clone(),
        );
        let chat_turns = Gauge::default();
        registry.register(
            "chat_turns_today",
            "Dashboard chat turns today (UTC)",
            chat_turns.clone(),
        );
        let backup_last_success = Gauge::default();
        registry.register(
            "backup_last_success_timestamp_seconds",
            "When the newest scheduled backup was taken (Unix time; 0: none yet, or scheduled backups are off)",
            backup_last_success.clone(),
        );
        let backup_failures = Family::<BackupStage, Counter>::default();
        registry.register(
            "backup_failures",
            "Scheduled backups that failed since the server started, by stage (backup, copy)",
            backup_failures.clone(),
        );
        Metrics {
            registry,
            backup_last_success,
            backup_failures,
            calls,
            seconds,
            agents_connected,
            agents_known,
            audit_queue,
            web_filters,
            leading,
            deliveries,
            chat_tokens,
            chat_turns,
            own_tools,
        }
    }

    /// One call ended. Tool names are the catalog's or the server's own (anything
    /// else counts as `other`), so a caller cannot grow the label set.
    pub(crate) fn call(&self, tool: &str, outcome: &str, took: Duration) {
        let known = kenny_proto::catalog::find(tool).is_some() || self.own_tools.contains(&tool);
        let tool = if known { tool } else { "other" }.to_owned();
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.clone(),
                outcome: outcome.to_owned(),
            })
            .inc();
        self.seconds
            .get_or_create(&ToolLabel { tool })
            .observe(took.as_secs_f64());
    }

    /// Scheduled backups are on: their failure counters show from the start (at 0), the
    /// copy's only when there is a copy directory.
    pub(crate) fn backup_scheduled(&self, with_copy: bool) {
        let stages: &[&str] = if with_copy { &["backup", "copy"] } else { &["backup"] };
        for stage in stages {
            let _ = self.backup_failures.get_or_create(&BackupStage {
                stage: (*stage).to_owned(),
            });
        }
    }

    /// A scheduled backup taken at `unix_secs` is written and verified.
    pub(crate) fn backup_made(&self, unix_secs: i64) {
        self.backup_last_success.set(unix_secs);
    }

    /// A scheduled backup failed, or (`copy`) only its copy did.
    pub(crate) fn backup_failed(&self, copy: bool) {
        let stage = if copy { "copy" } else { "backup" };
        self.backup_failures
            .get_or_create(&BackupStage { stage: stage.into() })
            .inc();
    }

    /// The text a scrape gets, with the gauges read by the caller just now.
    pub(crate) fn render(&self, now: &Readings) -> Result<String, std::fmt::Error> {
        self.agents_connected.set(gauge(now.agents_connected));
        if let Some(known) = now.agents_known {
            self.agents_known.set(gauge(known));
        }
        self.audit_queue.set(gauge(now.audit_queue));
        self.web_filters.set(gauge(now.web_filters));
        self.leading.set(i64::from(now.leading));
        if let Some(counts) = &now.stored {
            // A state no longer kept (its last delivery pruned) reads 0, not its old count.
            self.deliveries.clear();
            for (kind, status, n) in &counts.deliveries {
                self.deliveries
                    .get_or_create(&DeliveryLabels {
                        kind: kind.clone(),
                        status: status.clone(),
                    })
                    .set(*n);
            }
            for (kind, n) in [
                ("input", counts.chat_input_tokens),
                ("output", counts.chat_output_tokens),
            ] {
                self.chat_tokens.get_or_create(&TokenKind { kind: kind.into() }).set(n);
            }
            self.chat_turns.set(counts.chat_turns);
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// What the gauges show, read when a scrape comes.
pub(crate) struct Readings {
    pub agents_connected: usize,
    /// `None` when the agent list could not be read (the gauge keeps its last value).
    pub agents_known: Option<usize>,
    pub audit_queue: usize,
    pub web_filters: usize,
    pub leading: bool,
    /// What the database counts; `None` when it could not be read (gauges keep theirs).
    pub stored: Option<crate::store::ScrapeCounts>,
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Loopback callers, and callers presenting the configured token (compared in constant
/// time); nobody else.
pub(crate) fn may_scrape(peer: std::net::IpAddr, token: Option<&str>, given: Option<&str>) -> bool {
    let mapped_loopback = match peer {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        std::net::IpAddr::V4(_) => false,
    };
    if peer.is_loopback() || mapped_loopback {
        return true;
    }
    match (token, given) {
        (Some(want), Some(given)) => subtle::ConstantTimeEq::ct_eq(given.as_bytes(), want.as_bytes()).into(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_or_the_token_may_scrape() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(may_scrape(ip("127.0.0.1"), None, None));
        assert!(may_scrape(ip("::1"), None, None));
        assert!(may_scrape(ip("::ffff:127.0.0.1"), None, None));
        assert!(!may_scrape(ip("192.0.2.7"), None, None));
        assert!(!may_scrape(ip("192.0.2.7"), None, Some("anything")));
        assert!(!may_scrape(ip("192.0.2.7"), Some("secret-token"), None));
        assert!(!may_scrape(ip("192.0.2.7"), Some("secret-token"), Some("secret-toke")));
        assert!(may_scrape(ip("192.0.2.7"), Some("secret-token"), Some("secret-token")));
        assert!(!may_scrape(ip("::ffff:192.0.2.7"), Some("secret-token"), Some("wrong")));
    }

    #[test]
    fn calls_are_counted_by_tool_and_outcome_and_unknown_names_are_other() {
        let m = Metrics::new(vec!["list_agents"]);
        m.call("shell_exec", "ok", Duration::from_millis(20));
        m.call("shell_exec", "ok", Duration::from_millis(30));
        m.call("list_agents", "refused", Duration::from_millis(1));
        m.call("rm -rf /", "refused", Duration::from_millis(1));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
        assert!(
            out.contains(r#"kenny_calls_total{tool="shell_exec",outcome="ok"} 2"#),
            "{out}"
        );
        assert!(
            out.contains(r#"kenny_calls_total{tool="list_agents",outcome="refused"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(r#"kenny_calls_total{tool="other",outcome="refused"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(r#"kenny_call_duration_seconds_count{tool="shell_exec"} 2"#),
            "{out}"
        );
        assert!(!out.contains("rm -rf"));
    }

    #[test]
    fn backups_show_their_last_success_and_failures_by_stage() {
        let m = Metrics::default();
        m.backup_scheduled(true);
        m.backup_made(1_764_621_852);
        m.backup_failed(true);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
        assert!(
            out.contains("kenny_backup_last_success_timestamp_seconds 1764621852"),
            "{out}"
        );
        assert!(out.contains(r#"kenny_backup_failures_total{stage="copy"} 1"#), "{out}");
        assert!(
            out.contains(r#"kenny_backup_failures_total{stage="backup"} 0"#),
            "{out}"
        );
    }
}
