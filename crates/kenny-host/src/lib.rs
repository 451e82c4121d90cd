//! Host plumbing shared by the kenny binaries (server, agent, launcher): files that
//! hold secrets, the Ed25519 identities kept in them, shutdown signals and logging.
//! Nothing kenny-specific happens here; the protocol and the logic live elsewhere.

pub mod keyfile;

/// Resolves on Ctrl-C, or on SIGTERM where there is one (service managers send it).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Logs to stderr, filtered by `KENNY_LOG` (`level` and `target=level` directives), else
/// `default_filter`; one JSON object per line when `KENNY_LOG_FORMAT=json` (for a log
/// collector), plain text otherwise. Under systemd or a container, stderr is the
/// journal or the container log, which rotate them.
pub fn init_logging(default_filter: &str) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = log_filter(std::env::var("KENNY_LOG").ok().as_deref(), default_filter);
    let registry = tracing_subscriber::registry().with(filter);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match log_format(std::env::var("KENNY_LOG_FORMAT").ok().as_deref()) {
        LogFormat::Json => registry.with(fmt.json().flatten_event(true)).init(),
        LogFormat::Text => registry.with(fmt).init(),
    }
}

/// `KENNY_LOG` as `level` and `target=level` directives (`info,kenny_server::tunnel=debug`):
/// a plain target filter rather than tracing's `EnvFilter`, whose span-field matching
/// nobody here uses and whose regex engine was a good part of the agent binary. A value
/// that does not parse is said once and the default is used.
fn log_filter(value: Option<&str>, default_filter: &str) -> tracing_subscriber::filter::Targets {
    use std::str::FromStr as _;
    let fallback = || tracing_subscriber::filter::Targets::from_str(default_filter).unwrap_or_default();
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => fallback(),
        Some(v) => tracing_subscriber::filter::Targets::from_str(v).unwrap_or_else(|e| {
            eprintln!(
                "KENNY_LOG={v:?} is not a list of level or target=level directives ({e}); using {default_filter:?}"
            );
            fallback()
        }),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

/// `json` (any case) asks for JSON lines; anything else is text, and an unknown value
/// says so once logging runs rather than failing the start.
fn log_format(value: Option<&str>) -> LogFormat {
    match value.map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("json") => LogFormat::Json,
        Some(v) if !v.is_empty() && !v.eq_ignore_ascii_case("text") => {
            eprintln!("KENNY_LOG_FORMAT={v:?} is not known: use json or text; logging as text");
            LogFormat::Text
        }
        _ => LogFormat::Text,
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;

    #[test]
    fn the_log_filter_takes_levels_and_targets_and_falls_back_on_nonsense() {
        use tracing::Level;
        let f = log_filter(Some("warn,kenny_server::tunnel=debug"), "info");
        assert!(f.would_enable("kenny_server::tunnel", &Level::DEBUG));
        assert!(!f.would_enable("kenny_server::mcp", &Level::INFO));
        let f = log_filter(Some("=nonsense=="), "info,rmcp=warn");
        assert!(f.would_enable("kenny_server", &Level::INFO));
        assert!(!f.would_enable("rmcp::service", &Level::INFO));
        assert!(log_filter(None, "info").would_enable("x", &Level::INFO));
    }

    #[test]
    fn the_log_format_is_json_only_when_asked() {
        assert_eq!(log_format(Some("JSON")), LogFormat::Json);
        assert_eq!(log_format(Some("text")), LogFormat::Text);
        assert_eq!(log_format(Some("xml")), LogFormat::Text);
        assert_eq!(log_format(None), LogFormat::Text);
    }
}
