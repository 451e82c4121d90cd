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
use crate::state::{Accounts, AppState, Conversations, Fleet, OAuth, Site};
use crate::store::Store;

const TOKEN_TOUCH_INTERVAL: Duration = Duration::from_secs(30);
/// The longest `timeout_s` a caller may give a tool.
const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(3600);
/// Beyond a call's own limit: the forwarder's grace, an update's trial and report.
const ABANDONED_MARGIN: Duration = Duration::from_secs(15 * 60);
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
    /// `http://<addr>`, or `https://<addr>` with built-in TLS.
    pub fn local_url(&self) -> String {
        let scheme = if self.state.site.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

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
    let database_url = config.database_url.clone();
    if config.backups.is_some() {
        refuse_backups_on_postgres("--backup-dir", database_url.as_deref())?;
    }
    if config.nats_url.is_some() && database_url.is_none() {
        anyhow::bail!(
            "--nats-url joins a cluster of replicas, and replicas share their state in PostgreSQL: give --database-url too"
        );
    }
    let clustered = config.nats_url.is_some();
    let (data_lock, store) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
        // One server per data directory; a restore waits for it to stop.
        let lock = crate::backup::lock_data_dir(&data_dir)?;
        if database_url.is_none() {
            crate::backup::apply_staged(&data_dir)?;
        }
        let store = open_store(&data_dir, database_url.as_deref());
        Ok((lock, store))
    })
    .await??;
    let store = store?;
    let store = Arc::new(store);
    if clustered {
        // Other replicas' calls are running: what a stopped replica left unfinished is
        // settled by the leader once no call could still be running
        // (`audit::settle_abandoned_loop`).
    } else {
        close_unfinished_calls(&store, &clock)?;
    }
    let policy = crate::policy::PolicyBook::load(store.operator_policy()?).context("loading the operator policy")?;
    let (alerts, alert_events) = crate::alerts::Alerts::new();
    let health = Arc::new(crate::health::HealthBook::load(&store, alerts.clone()).context("loading fleet health")?);
    let server_key = crate::server_key::server_key(&store, &config.data_dir)?;
    // Bad certificate files stop the start, before the port is taken.
    let tls = match &config.tls {
        Some(files) => Some(Arc::new(crate::tls::Tls::open(files.clone())?)),
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = crate::listener::bind(config.listen).with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let base_url = match &config.public_url {
        Some(u) => u.trim_end_matches('/').to_owned(),
        // 0.0.0.0 is not an address anyone can use; name loopback and say so.
        None if addr.ip().is_unspecified() => {
            tracing::warn!(
                "listening on {addr} without --public-url: OAuth metadata will name {scheme}://127.0.0.1:{}; set --public-url to the URL clients use",
                addr.port()
            );
            format!("{scheme}://127.0.0.1:{}", addr.port())
        }
        None => format!("{scheme}://{addr}"),
    };
    let (audit, audit_thread) =
        AuditLog::start(store.clone(), clock.clone(), alerts.clone()).context("starting the audit writer")?;
    let registry = Arc::new(Registry::default());
    // Work done once for the whole fleet runs on the replica that leads.
    let leader = match store.path() {
        Some(_) => crate::leader::Leader::always(),
        None => crate::leader::Leader::elect(store.clone(), shutdown.clone()).await,
    };
    let cluster = match &config.nats_url {
        Some(url) => Some(crate::cluster::Cluster::join(url, registry.clone(), shutdown.clone()).await?),
        None => None,
    };
    crate::alerts::start(
        alert_events,
        &alerts,
        store.clone(),
        clock.clone(),
        registry.clone(),
        leader.clone(),
        shutdown.clone(),
    )
    .context("starting alerts")?;
    let digest = ArgsDigest::new(derive_digest_key(&server_key));
    let updates = Arc::new(crate::updates::Updates::new(
        crate::updates::releases::dir(&config.data_dir),
        base_url.clone(),
        server_key.clone(),
        store.clone(),
        clock.clone(),
    ));
    let device_key = crate::device::DeviceKey::derive(&server_key);
    let auth = Arc::new(Authenticator::new(
        store.clone(),
        crate::oauth::resource_url(&base_url),
        clock.clone(),
    ));
    let own_tools = crate::server_tools::TOOLS
        .iter()
        .map(|t| t.name)
        .chain([crate::mcp::SELECT_AGENT])
        .collect();
    let metrics = Arc::new(crate::metrics::Metrics::new(own_tools));
    let forwarder = Arc::new(
        Forwarder::new(
            registry.clone(),
            store.clone(),
            audit.clone(),
            digest,
            config.call_timeout,
            updates,
            clock.clone(),
        )
        .counting(metrics.clone())
        .clustered(cluster.clone()),
    );
    let webfilter = crate::webfilter::WebFilter::load(
        store.clone(),
        clock.clone(),
        registry.clone(),
        forwarder.clone(),
        alerts.clone(),
        crate::webfilter::Site {
            public_url: &base_url,
            data_dir: &config.data_dir,
            cap: config.webfilter_max_domains,
        },
    )
    .context("loading the web filters")?;
    webfilter.start(leader.clone(), shutdown.clone());
    crate::rollout::start(
        store.clone(),
        registry.clone(),
        forwarder.clone(),
        clock.clone(),
        leader.clone(),
        shutdown.clone(),
    );
    let base_url: Arc<str> = base_url.into();
    let state = Arc::new(AppState {
        accounts: Accounts {
            store: store.clone(),
            clock: clock.clone(),
            auth: auth.clone(),
            login_limiter: Default::default(),
            device_key,
        },
        fleet: Fleet {
            forwarder: forwarder.clone(),
            webfilter: webfilter.clone(),
            metrics,
            store: store.clone(),
            clock: clock.clone(),
            registry,
            cluster,
            leader,
            policy: Arc::new(policy),
            audit: audit.clone(),
            pushed: Default::default(),
            health,
            alerts,
            directory: Default::default(),
            fleet_run_max: config.fleet_run_max,
            ledger: Default::default(),
        },
        oauth: OAuth {
            settings: config.oauth,
            base_url: base_url.clone(),
            client_documents: Default::default(),
            registration_limiter: Arc::new(crate::ratelimit::FailureLimiter::new(
                REGISTRATIONS_ALLOWED,
                REGISTRATION_WINDOW,
            )),
            store: store.clone(),
            clock: clock.clone(),
        },
        conversations: Conversations {
            chat: Arc::new(crate::chat::Chat::new(config.chat.clone())),
            store: store.clone(),
            clock: clock.clone(),
        },
        site: Site {
            config: Arc::new(config),
            base_url,
            server_key: Arc::new(server_key),
            shutdown: shutdown.clone(),
        },
    });

    let app = router(state.clone());
    if let Some(cluster) = &state.fleet.cluster {
        crate::cluster::changes::share(cluster, &state);
        tokio::spawn(crate::cluster::changes::follow(
            cluster.clone(),
            state.clone(),
            shutdown.clone(),
        ));
    }

    tokio::spawn(touch_tokens(auth, audit, shutdown.clone()));
    tokio::spawn(crate::history::downsample_loop(
        state.fleet.store.clone(),
        state.fleet.clock.clone(),
        state.site.config.history,
        state.fleet.leader.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(crate::retire::purge_loop(
        state.fleet.store.clone(),
        state.fleet.clock.clone(),
        state.site.config.removed_retention,
        state.fleet.leader.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(crate::ledger::checkpoint_loop(
        state.fleet.store.clone(),
        state.site.server_key.clone(),
        state.fleet.clock.clone(),
        state.fleet.leader.clone(),
        state.fleet.ledger.clone(),
        shutdown.clone(),
    ));
    match state.site.config.audit_retention {
        Some(retention) => {
            tracing::info!(
                days = retention.as_secs() / 86400,
                "audit rows older than the retention period are pruned hourly"
            );
            tokio::spawn(crate::audit::prune_loop(
                store,
                clock,
                state.site.server_key.clone(),
                retention,
                state.fleet.leader.clone(),
                shutdown.clone(),
            ));
        }
        None => tracing::info!("audit retention is off: audit rows are kept for ever"),
    }
    if clustered {
        // Longer than any call may run: a caller's `timeout_s` (an hour at most) or the
        // configured wait, plus an update's trial and report.
        let longest = state.site.config.call_timeout.unwrap_or_default().max(MAX_CALL_TIMEOUT) + ABANDONED_MARGIN;
        tokio::spawn(crate::audit::settle_abandoned_loop(
            state.fleet.store.clone(),
            state.fleet.clock.clone(),
            longest,
            state.fleet.leader.clone(),
            shutdown.clone(),
        ));
    }
    if let Some(schedule) = state.site.config.backups.clone() {
        tokio::spawn(crate::backup::schedule::run(
            state.site.config.data_dir.clone(),
            schedule,
            state.fleet.clock.clone(),
            state.fleet.metrics.clone(),
            shutdown.clone(),
        ));
    }
    let limits = state.site.config.http;
    let (store, key, clock) = (
        state.fleet.store.clone(),
        state.site.server_key.clone(),
        state.fleet.clock.clone(),
    );
    let task = tokio::spawn(async move {
        // Held while this server runs, released when it has stopped.
        let _data_lock = data_lock;
        if let Some(tls) = &tls {
            tokio::spawn(crate::tls::watch(tls.clone(), shutdown.clone()));
        }
        crate::listener::serve(listener, app, limits, tls, shutdown).await;
        // The audit writer drains its queue and exits once the state is gone.
        tokio::task::spawn_blocking(move || audit_thread.join()).await.ok();
        // The last rows are signed too, so cutting them off while it is down shows. Any
        // replica may: replicas signing the same head write one checkpoint.
        crate::ledger::sign_head(&store, key, clock.now(), "at shutdown").await;
        Ok(())
    });
    Ok(RunningServer { addr, state, task })
}

/// Marks what the last run left unfinished: audit rows still `sent` become
/// `interrupted`, chat calls still running end with an unknown outcome.
fn close_unfinished_calls(store: &Store, clock: &Clock) -> anyhow::Result<()> {
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
    let approved = store
        .end_running_held_calls(None)
        .context("closing approved calls that were running when the server stopped")?;
    if approved > 0 {
        tracing::warn!(
            calls = approved,
            "approved calls were running when the server last stopped; marked as unknown outcome"
        );
    }
    Ok(())
}

/// The store a server or an admin command works on: PostgreSQL at `database_url`
/// when one is given, else the SQLite file in `data_dir`.
pub fn open_store(data_dir: &std::path::Path, database_url: Option<&str>) -> anyhow::Result<Store> {
    match database_url {
        Some(url) => Store::open_postgres(url).context("opening the PostgreSQL database (--database-url)"),
        None => Store::open(data_dir).with_context(|| format!("opening the database in {}", data_dir.display())),
    }
}

/// Backups copy the SQLite file; `what` (a command or an option) refuses a store that is
/// in PostgreSQL, and says what to use there.
pub fn refuse_backups_on_postgres(what: &str, database_url: Option<&str>) -> anyhow::Result<()> {
    if database_url.is_some() {
        anyhow::bail!(
            "{what} works on the SQLite file, and --database-url puts the data in PostgreSQL; back that up with pg_dump and pg_restore (or your provider's backups)"
        );
    }
    Ok(())
}

/// Every route, each handler taking the parts of the state it names; building them
/// is the one place that needs all of it.
pub fn router(state: Arc<AppState>) -> Router {
    let mcp_service = crate::mcp::service(state.fleet.clone(), state.site.config.public_url.as_deref());
    let mcp = Router::new()
        .nest_service("/mcp", mcp_service)
        .layer(from_fn_with_state(state.clone(), require_known_host));
    let mcp = mcp.layer(from_fn_with_state(state.clone(), require_bearer));
    // Layers run outside-in: the principal is resolved before the action is audited.
    let api = crate::api::authenticated()
        .route_layer(from_fn_with_state(
            state.clone(),
            crate::api::held_tokens::refuse_held_changes,
        ))
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
        .route("/readyz", get(ready))
        .route("/metrics", get(scrape_metrics))
        .route("/d/agent/{file}", get(crate::updates::download::download))
        .route(
            "/install/{token}",
            get(crate::onboarding::page::show).post(crate::onboarding::page::redeem),
        )
        .layer(axum::middleware::from_fn(crate::guard::security_headers))
        .with_state(state)
}

/// `GET /metrics`: for loopback callers, or with the metrics token.
async fn scrape_metrics(
    axum::extract::State(fleet): axum::extract::State<Fleet>,
    axum::extract::State(site): axum::extract::State<crate::state::Site>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::IntoResponse;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !crate::metrics::may_scrape(peer.ip(), site.config.metrics_token.as_deref(), given) {
        return (
            StatusCode::FORBIDDEN,
            "metrics are served to loopback callers, or with the token set by KENNY_METRICS_TOKEN (Authorization: Bearer)\n",
        )
            .into_response();
    }
    let directory = fleet.directory.clone();
    let known = fleet
        .store
        .blocking(move |s| directory.agents(s))
        .await
        .ok()
        .map(|a| a.len());
    let today = fleet.clock.today();
    let stored = fleet.store.blocking(move |s| s.scrape_counts(&today)).await.ok();
    let readings = crate::metrics::Readings {
        agents_connected: fleet.registry.online_count(),
        agents_known: known,
        audit_queue: fleet.audit.queue_depth(),
        web_filters: fleet.webfilter.configured(),
        leading: fleet.leader.is_leading(),
        stored,
    };
    match fleet.metrics.render(&readings) {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            )],
            text,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "metrics could not be rendered\n").into_response(),
    }
}

/// Ready when the database answers (a load balancer sends no traffic before).
async fn ready(axum::extract::State(fleet): axum::extract::State<Fleet>) -> (axum::http::StatusCode, &'static str) {
    match fleet.store.blocking(|s| s.agents_version()).await {
        Ok(_) => (axum::http::StatusCode::OK, "ready\n"),
        Err(e) => {
            tracing::warn!("not ready: the database does not answer: {e}");
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "not ready: the database does not answer\n",
            )
        }
    }
}

async fn touch_tokens(auth: Arc<Authenticator>, audit: AuditLog, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(TOKEN_TOUCH_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => auth.flush_touched(&audit).await,
            _ = shutdown.cancelled() => {
                auth.flush_touched(&audit).await;
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
