//! Assembling and running the server: storage, background workers, routes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::audit::{ArgsDigest, AuditLog};
use crate::auth::Authenticator;
use crate::clock::Clock;
use crate::config::ServeConfig;
use crate::forward::Forwarder;
use crate::guard::{require_bearer, require_known_host, require_principal};
use crate::registry::Registry;
use crate::state::AppState;
use crate::store::Store;

const TOKEN_TOUCH_INTERVAL: Duration = Duration::from_secs(30);
/// OAuth client registrations allowed per client address within the window.
const REGISTRATIONS_ALLOWED: usize = 20;
const REGISTRATION_WINDOW: Duration = Duration::from_secs(600);

/// A server that is listening. Dropping it does not stop it; cancel the token given
/// to [`start`] and await [`RunningServer::finished`].
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl RunningServer {
    pub async fn finished(self) -> anyhow::Result<()> {
        // Our handle on the state keeps the audit writer alive; release it first or
        // the server would wait for itself.
        let RunningServer { task, state, .. } = self;
        drop(state);
        task.await.context("server task panicked")?
    }
}

/// Opens storage, binds the listener and starts serving until `shutdown` fires.
pub async fn start(config: ServeConfig, shutdown: CancellationToken) -> anyhow::Result<RunningServer> {
    start_with_clock(config, shutdown, Clock::system()).await
}

/// [`start`] on a given clock: a test moves it forward to see tokens, sessions and
/// codes expire without waiting.
pub async fn start_with_clock(
    config: ServeConfig,
    shutdown: CancellationToken,
    clock: Clock,
) -> anyhow::Result<RunningServer> {
    let data_dir = config.data_dir.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(&data_dir))
        .await?
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let store = Arc::new(store);
    let interrupted = store
        .interrupt_unfinished_calls()
        .context("closing the audit rows of interrupted calls")?;
    if interrupted > 0 {
        tracing::warn!(
            calls = interrupted,
            "calls were still running when the server last stopped; audited as interrupted"
        );
    }
    let unfinished = store
        .end_unfinished_chat_calls(&clock.now())
        .context("closing chat calls that were running when the server stopped")?;
    if unfinished > 0 {
        tracing::warn!(
            calls = unfinished,
            "chat calls were running when the server last stopped; marked as unknown outcome"
        );
    }
    let policy = crate::policy::PolicyBook::load(store.operator_policy()?).context("loading the operator policy")?;
    let server_key = crate::secrets::load_or_create_server_key(&config.data_dir).context("loading the server key")?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let base_url = match &config.public_url {
        Some(u) => u.trim_end_matches('/').to_owned(),
        // 0.0.0.0 is not an address anyone can use; name loopback and say so.
        None if addr.ip().is_unspecified() => {
            tracing::warn!(
                "listening on {addr} without --public-url: OAuth metadata will name http://127.0.0.1:{}; set --public-url to the URL clients use",
                addr.port()
            );
            format!("http://127.0.0.1:{}", addr.port())
        }
        None => format!("http://{addr}"),
    };
    let (audit, audit_thread) = AuditLog::start(store.clone()).context("starting the audit writer")?;
    let registry = Arc::new(Registry::default());
    let digest = ArgsDigest::new(derive_digest_key(&server_key));
    let updates = Arc::new(crate::updates::Updates::new(
        crate::updates::releases::dir(&config.data_dir),
        base_url.clone(),
        server_key.clone(),
        store.clone(),
    ));
    let device_key = crate::device::DeviceKey::derive(&server_key);
    let state = Arc::new(AppState {
        forwarder: Forwarder::new(
            registry.clone(),
            store.clone(),
            audit.clone(),
            digest,
            config.call_timeout,
            updates,
        ),
        auth: Authenticator::new(store.clone(), crate::oauth::resource_url(&base_url), clock.clone()),
        clock,
        oauth: config.oauth,
        client_documents: Default::default(),
        base_url,
        chat: crate::chat::Chat::new(config.chat.clone()),
        registry,
        policy,
        store,
        audit,
        server_key,
        config,
        shutdown: shutdown.clone(),
        login_limiter: Default::default(),
        device_key,
        registration_limiter: crate::ratelimit::FailureLimiter::new(REGISTRATIONS_ALLOWED, REGISTRATION_WINDOW),
        pushed: Default::default(),
    });

    let app = router(state.clone());

    tokio::spawn(touch_tokens(state.clone(), shutdown.clone()));
    match state.config.audit_retention {
        Some(retention) => {
            tracing::info!(
                days = retention.as_secs() / 86400,
                "audit rows older than the retention period are pruned hourly"
            );
            tokio::spawn(crate::audit::prune_loop(
                state.store.clone(),
                state.clock.clone(),
                retention,
                shutdown.clone(),
            ));
        }
        None => tracing::info!("audit retention is off: audit rows are kept for ever"),
    }
    let limits = state.config.http;
    let task = tokio::spawn(async move {
        crate::listener::serve(listener, app, limits, shutdown).await;
        // The audit writer drains its queue and exits once the state is gone.
        tokio::task::spawn_blocking(move || audit_thread.join()).await.ok();
        Ok(())
    });
    Ok(RunningServer { addr, state, task })
}

pub fn router(state: Arc<AppState>) -> Router {
    let mcp = Router::new()
        .nest_service("/mcp", crate::mcp::service(state.clone()))
        .layer(from_fn_with_state(state.clone(), require_known_host));
    let mcp = mcp.layer(from_fn_with_state(state.clone(), require_bearer));
    // Layers run outside-in: the principal is resolved before the action is audited.
    let api = crate::api::authenticated()
        .route_layer(from_fn_with_state(state.clone(), crate::api::audited::audit_actions))
        .layer(from_fn_with_state(state.clone(), require_principal));
    Router::new()
        .merge(mcp)
        .merge(api)
        .merge(crate::api::public())
        .merge(crate::web::routes())
        .merge(crate::oauth::routes())
        .route("/agent/ws", get(crate::tunnel::upgrade))
        .route("/healthz", get(|| async { "ok" }))
        .route("/d/agent/{file}", get(crate::updates::releases::download))
        .layer(axum::middleware::from_fn(crate::guard::security_headers))
        .with_state(state)
}

async fn touch_tokens(state: Arc<AppState>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(TOKEN_TOUCH_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => state.auth.flush_touched(&state.audit).await,
            _ = shutdown.cancelled() => {
                state.auth.flush_touched(&state.audit).await;
                return;
            }
        }
    }
}

/// The key of the audit trail's argument digests, derived from the server identity so
/// it needs no file of its own and differs between servers.
fn derive_digest_key(server_key: &ed25519_dalek::SigningKey) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"kenny-audit-args-digest-v1\0");
    h.update(server_key.to_bytes());
    h.finalize().into()
}
