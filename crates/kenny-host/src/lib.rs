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

/// Logs to stderr, filtered by `KENNY_LOG` (tracing's env-filter syntax), else
/// `default_filter`; one JSON object per line when `KENNY_LOG_FORMAT=json` (for a log
/// collector), plain text otherwise. Under systemd or a container, stderr is the
/// journal or the container log, which rotate them.
pub fn init_logging(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("KENNY_LOG").unwrap_or_else(|_| default_filter.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match log_format(std::env::var("KENNY_LOG_FORMAT").ok().as_deref()) {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
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
    fn the_log_format_is_json_only_when_asked() {
        assert_eq!(log_format(Some("JSON")), LogFormat::Json);
        assert_eq!(log_format(Some("text")), LogFormat::Text);
        assert_eq!(log_format(Some("xml")), LogFormat::Text);
        assert_eq!(log_format(None), LogFormat::Text);
    }
}
