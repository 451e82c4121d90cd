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
/// `default_filter`.
pub fn init_logging(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KENNY_LOG").unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .init();
}
