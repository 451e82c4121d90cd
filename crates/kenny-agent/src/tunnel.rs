//! The connection to the server: enroll if needed, connect, authenticate, then serve
//! requests concurrently with a heartbeat, reconnecting with backoff until shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use ed25519_dalek::SigningKey;
use futures_util::{SinkExt, StreamExt};
use kenny_proto::auth;
use kenny_proto::error::ErrorCode;
use kenny_proto::frame::{AgentMeta, Auth, Frame, Limits, Register, Request, Response, Telemetry, decode, encode};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::config::{AgentConfig, AuthMode};
use crate::guard::OperatorRules;
use crate::handover::{self, TrialOutcome};
use crate::identity;
use crate::signing::ResultSigner;
use crate::switch::KillSwitch;
use crate::tools;
use crate::tools::update::{Staged, UpdateContext};
use kenny_proto::proof;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A session that lasted this long was healthy: the next failure starts backing off
/// from the beginning again.
const HEALTHY_SESSION: Duration = Duration::from_secs(30);
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A write to the server that takes longer than this means the connection is stuck.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call may wait for a free slot. It is shorter than the grace the server
/// adds to every call's timeout, so a call that could not start in time is answered
/// `timeout` (not started) before the server gives up on it, and never runs later.
const QUEUE_WAIT: Duration = Duration::from_secs(4);
/// Calls that run at once; more wait their turn, so a burst from the server cannot
/// spawn unbounded processes on the PC.
const MAX_CONCURRENT_CALLS: usize = 32;

/// The server's close code for failed authentication.
const CLOSE_UNAUTHORIZED: u16 = 4401;

/// The server refused this agent's authentication.
#[derive(Debug, thiserror::Error)]
#[error("the server refused this agent's authentication: {0}")]
struct Refused(String);

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How a connection ended, when it ended without an error.
#[derive(Debug)]
enum Ended {
    /// Shutdown, or the server closed it.
    Closed,
    /// A trial child logged in: its work is done.
    TrialConfirmed,
    /// An update was staged and answered: hand over to it.
    Handover(Staged),
}

/// What the session loop writes: frames, in order, and after an update's answer the
/// signal to stop and hand over (so the answer is on the wire first).
enum Outgoing {
    Frame(Frame),
    Handover(Staged),
}

/// Runs the agent until `shutdown` fires.
pub async fn run(mut config: AgentConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let ws_url = config.ws_url().map_err(|e| anyhow!(e))?;
    // The web filter must never block the server this agent reports to.
    config.tools = std::mem::take(&mut config.tools).protecting_server(&config.server);
    let (key, pinned) = match &config.auth {
        AuthMode::Mutual { server_pubkey, .. } => {
            let pinned =
                auth::parse_public_key(server_pubkey).context("--server-pubkey is not a valid Ed25519 public key")?;
            (Some(identity::load_or_create_key(&config.state_dir)?), Some(pinned))
        }
        AuthMode::Token(_) => (None, None),
    };
    // The guard and the kernel layer protect this agent's own files from its tools;
    // registered once the state directory exists (the key is made there above).
    crate::guard::register(crate::guard::AgentPaths {
        binary: std::env::current_exe().ok(),
        settings: config.settings_file.clone(),
        state_dir: Some(config.state_dir.clone()),
        private_dirs: config.private_dirs.clone(),
    });
    crate::sandbox::prepare();
    config.tools.update = Some(UpdateContext {
        server_url: config.server.clone(),
        agent_id: config.agent_id.clone(),
        pinned,
        trial: config.update_trial,
    });
    let trial_child = handover::in_trial();
    if !trial_child
        && let Ok(exe) = std::env::current_exe()
        && handover::recover_interrupted(&config.state_dir, &exe)
    {
        handover::restart_into(&exe).await;
    }
    let mut backoff = Backoff::new(INITIAL_BACKOFF, config.max_backoff);
    loop {
        let mut authenticated_at = None;
        match session(
            &config,
            &ws_url,
            key.as_ref(),
            &shutdown,
            &mut authenticated_at,
            trial_child,
        )
        .await
        {
            Ok(_) if shutdown.is_cancelled() => return Ok(()),
            Ok(Ended::TrialConfirmed) => {
                tracing::info!("trial login succeeded; handing back to the supervising agent");
                return Ok(());
            }
            Ok(Ended::Handover(staged)) => {
                let argv: Vec<_> = std::env::args_os().skip(1).collect();
                match handover::trial(&staged, &config.state_dir, config.update_trial, argv).await {
                    TrialOutcome::Kept => handover::restart_into(&staged.exe).await,
                    TrialOutcome::RolledBack(reason) => {
                        tracing::warn!(%reason, "staying on this build; reconnecting to report it");
                        backoff.reset();
                        continue;
                    }
                }
            }
            Ok(Ended::Closed) => tracing::info!("connection to the server closed"),
            Err(e) => tracing::warn!(error = format!("{e:#}"), "connection to the server failed"),
        }
        // Only time spent authenticated counts as healthy: a slow failing connect is
        // not a reason to retry fast.
        if authenticated_at.is_some_and(|t: Instant| t.elapsed() >= HEALTHY_SESSION) {
            backoff.reset();
        }
        let delay = backoff.next_delay();
        tracing::info!(delay_ms = delay.as_millis() as u64, "reconnecting");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return Ok(()),
        }
    }
}

/// One connection, from enrollment to its end. Returns `Ok` when it ended cleanly
/// (shutdown or the server closing it).
async fn session(
    config: &AgentConfig,
    ws_url: &str,
    key: Option<&SigningKey>,
    shutdown: &CancellationToken,
    authenticated_at: &mut Option<Instant>,
    trial_child: bool,
) -> anyhow::Result<Ended> {
    let connect = async {
        if let (
            AuthMode::Mutual {
                server_pubkey,
                enroll_token,
            },
            Some(key),
        ) = (&config.auth, key)
            && !identity::is_enrolled(&config.state_dir, server_pubkey, key)
        {
            enroll(config, key, server_pubkey, enroll_token.as_ref()).await?;
        }
        let ws_config = WebSocketConfig::default()
            .max_message_size(Some(Limits::AUTHENTICATED.max_frame_bytes))
            .max_frame_size(Some(Limits::AUTHENTICATED.max_frame_bytes));
        let (mut socket, _) = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_tungstenite::connect_async_with_config(ws_url, Some(ws_config), true),
        )
        .await
        .map_err(|_| anyhow!("connecting to {ws_url} took over {}s", CONNECT_TIMEOUT.as_secs()))?
        .with_context(|| format!("connecting to {ws_url}"))?;
        let signer = tokio::time::timeout(HANDSHAKE_TIMEOUT, authenticate(config, key, &mut socket))
            .await
            .map_err(|_| anyhow!("the server did not complete the handshake within 10s"))??;
        anyhow::Ok((socket, signer))
    };
    let socket = tokio::select! {
        socket = connect => socket,
        _ = shutdown.cancelled() => return Ok(Ended::Closed),
    };
    let (mut socket, signer) = match socket {
        Ok(connected) => connected,
        Err(e) => {
            // The server no longer knows our key (an admin ran `agent rekey`): with an
            // enrollment token at hand, enroll again on the next attempt.
            if e.downcast_ref::<Refused>().is_some()
                && let AuthMode::Mutual {
                    enroll_token: Some(_), ..
                } = &config.auth
            {
                tracing::warn!("authentication refused; enrolling again with the enrollment token on the next attempt");
                identity::forget_enrollment(&config.state_dir);
            }
            return Err(e);
        }
    };
    *authenticated_at = Some(Instant::now());
    tracing::info!(server = %config.server, agent = %config.agent_id, "connected and authenticated");
    if trial_child {
        handover::confirm_trial(&config.state_dir).context("confirming the trial")?;
        let _ = tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Close(None))).await;
        return Ok(Ended::TrialConfirmed);
    }
    if let Some(report) = handover::pending_report(&config.state_dir, &config.agent_id, now_rfc3339()) {
        send(&mut socket, &Frame::Log(report)).await?;
        handover::clear(&config.state_dir);
    }
    serve(config, socket, signer.map(Arc::new), shutdown).await
}

async fn enroll(
    config: &AgentConfig,
    key: &SigningKey,
    server_pubkey: &str,
    token: Option<&kenny_proto::frame::Secret>,
) -> anyhow::Result<()> {
    let token = token.ok_or_else(|| {
        anyhow!(
            "this agent's key is not enrolled with this server yet: pass --enroll-token (from `kenny-server agent add`, or `agent rekey` for a new key)"
        )
    })?;
    let url = format!("{}/api/agents/{}/enroll", config.server, config.agent_id);
    let body = serde_json::json!({ "public_key": auth::encode_b64(key.verifying_key().as_bytes()) });
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&token.0)
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .with_context(|| format!("enrolling at {url}"))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        bail!("enrollment refused ({status}): {text}");
    }
    identity::mark_enrolled(&config.state_dir, server_pubkey, key).context("recording the enrollment")?;
    tracing::info!(agent = %config.agent_id, "enrolled this agent's key with the server");
    Ok(())
}

fn meta() -> AgentMeta {
    AgentMeta {
        hostname: sysinfo::System::host_name().unwrap_or_else(|_| "unknown".into()),
        os: std::env::consts::OS.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        arch: Some(std::env::consts::ARCH.into()),
        channel: Some("stable".into()),
        dialect: Some(kenny_proto::dialect::CURRENT.into()),
    }
}

/// Sends `register` and, on the mutual path, checks the server's proof before
/// proving ourselves. Nothing but the handshake is accepted until it completes. When
/// the server's challenge says it checks signed results, the signer for them.
async fn authenticate(
    config: &AgentConfig,
    key: Option<&SigningKey>,
    socket: &mut Socket,
) -> anyhow::Result<Option<ResultSigner>> {
    let mut register = Register {
        agent_id: config.agent_id.clone(),
        token: None,
        protocol: None,
        client_nonce: None,
        meta: Some(meta()),
    };
    match (&config.auth, key) {
        (AuthMode::Token(token), _) => {
            register.token = Some(token.clone());
            send(socket, &Frame::Register(register)).await?;
            Ok(None)
        }
        (AuthMode::Mutual { server_pubkey, .. }, Some(key)) => {
            let mut client_nonce = [0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut client_nonce);
            register.protocol = Some(kenny_proto::AGENT_PROTOCOL.into());
            register.client_nonce = Some(auth::encode_b64(&client_nonce));
            send(socket, &Frame::Register(register)).await?;
            let challenge = match recv_frame(socket, Limits::HANDSHAKE).await? {
                Frame::Challenge(c) => c,
                other => bail!("expected a challenge from the server, got {}", other.kind()),
            };
            let server_nonce: [u8; 32] = auth::decode_fixed("server_nonce", &challenge.server_nonce)?;
            let transcript = auth::transcript(&config.agent_id, &client_nonce, &server_nonce);
            let pinned = auth::parse_public_key(server_pubkey)?;
            auth::verify(&pinned, &transcript, &challenge.server_sig)
                .map_err(|_| anyhow!("the server could not prove it holds the pinned key; refusing to authenticate"))?;
            send(
                socket,
                &Frame::Auth(Auth {
                    agent_sig: auth::sign(key, &transcript),
                }),
            )
            .await?;
            // A server of 0.17 says nothing and would refuse a signed answer's field.
            let signs = challenge.protocol.as_deref().is_some_and(proof::signs_results);
            Ok(signs.then(|| ResultSigner::new(key.clone(), config.agent_id.clone())))
        }
        (AuthMode::Mutual { .. }, None) => bail!("mutual auth needs the agent key"),
    }
}

async fn send(socket: &mut Socket, frame: &Frame) -> anyhow::Result<()> {
    socket
        .send(Message::text(encode(frame)))
        .await
        .context("sending to the server")
}

async fn recv_frame(socket: &mut Socket, limits: Limits) -> anyhow::Result<Frame> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(t))) => return Ok(decode(t.as_str(), limits)?),
            Some(Ok(Message::Close(Some(frame)))) if u16::from(frame.code) == CLOSE_UNAUTHORIZED => {
                return Err(Refused(frame.reason.to_string()).into());
            }
            Some(Ok(Message::Close(frame))) => {
                bail!("the server closed the connection: {}", close_reason(frame))
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e).context("reading from the server"),
            None => bail!("the server closed the connection"),
        }
    }
}

fn close_reason(frame: Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>) -> String {
    frame.map_or_else(
        || "no reason given".into(),
        |f| format!("{} {}", u16::from(f.code), f.reason),
    )
}

/// The authenticated session: requests run concurrently; their answers, pings and
/// telemetry are written from this one loop.
async fn serve(
    config: &AgentConfig,
    socket: Socket,
    signer: Option<Arc<ResultSigner>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<Ended> {
    let switch = KillSwitch::new(config.switch_dir.as_deref().unwrap_or(&config.state_dir));
    // Operator rules live as long as the connection: a reconnect starts from the built-in
    // guard alone until the server pushes its policy again.
    let mut operator = Arc::new(OperatorRules::default());
    let tools = Arc::new(config.tools.clone());
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(64);
    // Dropping the set aborts calls still running: their connection is gone.
    let mut calls = JoinSet::new();
    let slots = Arc::new(Semaphore::new(MAX_CONCURRENT_CALLS));
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + config.heartbeat, config.heartbeat);
    let mut telemetry = tokio::time::interval(config.telemetry_interval);
    let mut last_heard = Instant::now();
    loop {
        let outgoing = tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = tokio::time::timeout(SEND_TIMEOUT, sink.send(Message::Close(None))).await;
                return Ok(Ended::Closed);
            }
            msg = stream.next() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(frame))) => bail!("the server closed the connection: {}", close_reason(frame)),
                    Some(Ok(_)) => { last_heard = Instant::now(); continue }
                    Some(Err(e)) => return Err(e).context("reading from the server"),
                    None => bail!("the connection dropped"),
                };
                last_heard = Instant::now();
                match decode(text.as_str(), Limits::AUTHENTICATED) {
                    Ok(Frame::Request(req)) => {
                        let call = Call { slots: slots.clone(), out: out_tx.clone(), switch: switch.clone(), operator: operator.clone(), tools: tools.clone(), signer: signer.clone() };
                        calls.spawn(run_call(req, call));
                        None
                    }
                    Ok(Frame::Ping {}) => Some(Frame::Pong),
                    Ok(Frame::Pong {}) => None,
                    Ok(Frame::Policy(p)) => {
                        let (rules, problems) = OperatorRules::from_policy(&p);
                        for problem in &problems {
                            tracing::warn!(%problem, "operator policy rule ignored");
                        }
                        tracing::info!(rules = rules.len(), "operator policy applied");
                        operator = Arc::new(rules);
                        None
                    }
                    Ok(other) => {
                        tracing::warn!(kind = other.kind(), "unexpected frame from the server dropped");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(reason = %e, "frame from the server dropped");
                        None
                    }
                }
            }
            Some(out) = out_rx.recv() => match out {
                Outgoing::Frame(frame) => Some(frame),
                Outgoing::Handover(staged) => {
                    // Everything queued before (the update's answer among it) is written.
                    let _ = tokio::time::timeout(SEND_TIMEOUT, sink.send(Message::Close(None))).await;
                    return Ok(Ended::Handover(staged));
                }
            },
            _ = heartbeat.tick() => {
                if last_heard.elapsed() > config.heartbeat * 3 {
                    bail!("nothing heard from the server for {}s", last_heard.elapsed().as_secs());
                }
                Some(Frame::Ping)
            }
            _ = telemetry.tick() => {
                let out = out_tx.clone();
                let agent_id = config.agent_id.clone();
                calls.spawn(async move {
                    let snapshot = tools::collect_telemetry(None).await;
                    let frame = Telemetry { agent_id, collected_at: now_rfc3339(), snapshot };
                    let _ = out.send(Outgoing::Frame(Frame::Telemetry(frame))).await;
                });
                None
            }
            Some(_) = calls.join_next(), if !calls.is_empty() => None,
        };
        if let Some(frame) = outgoing {
            tokio::time::timeout(SEND_TIMEOUT, sink.send(Message::text(encode(&frame))))
                .await
                .map_err(|_| {
                    anyhow!(
                        "the server stopped reading (a write took over {}s)",
                        SEND_TIMEOUT.as_secs()
                    )
                })?
                .context("sending to the server")?;
        }
    }
}

/// What one call runs with: the connection's slots, writer, switch, rules, tools and
/// signer.
struct Call {
    slots: Arc<Semaphore>,
    out: mpsc::Sender<Outgoing>,
    switch: KillSwitch,
    operator: Arc<OperatorRules>,
    tools: Arc<tools::ToolContext>,
    signer: Option<Arc<ResultSigner>>,
}

/// Runs one call once a slot is free; a call that cannot start within `QUEUE_WAIT`
/// is answered `timeout` and never runs. Either answer is signed when the server
/// checks signatures, over the arguments as they arrived.
async fn run_call(req: Request, call: Call) {
    let Call {
        slots,
        out,
        switch,
        operator,
        tools,
        signer,
    } = call;
    let signing = signer.map(|s| (s, req.tool.clone(), proof::args_digest(&req.args)));
    let mut response = match tokio::time::timeout(QUEUE_WAIT, slots.acquire_owned()).await {
        Ok(Ok(_slot)) => {
            let (id, tool) = (req.id.clone(), req.tool.clone());
            answer_even_if_it_panics(id, &tool, handle(req, &switch, &operator, &tools)).await
        }
        _ => Response::failure(
            req.id,
            ErrorCode::Timeout.as_str(),
            format!(
                "not started: this agent is already running {MAX_CONCURRENT_CALLS} calls and none finished within {}s; try again shortly",
                QUEUE_WAIT.as_secs()
            ),
        ),
    };
    if let Some((signer, tool, args_sha256)) = signing {
        signer.sign(&tool, args_sha256, &mut response);
    }
    let _ = out.send(Outgoing::Frame(Frame::Response(response))).await;
    if let Some(staged) = tools.take_staged() {
        let _ = out.send(Outgoing::Handover(staged)).await;
    }
}

/// Runs a handler; if it panics (a bug), the call is answered `internal` at once
/// instead of leaving the server waiting until its timeout.
async fn answer_even_if_it_panics(
    id: String,
    tool: &str,
    handler: impl std::future::Future<Output = Response>,
) -> Response {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(handler).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            tracing::error!(%tool, %id, panic = %what, "a tool handler panicked");
            Response::failure(
                id,
                ErrorCode::Internal.as_str(),
                format!(
                    "the agent hit a bug running {tool} (it panicked: {what}); the call did not finish, and what it had done on the PC is unknown. Please report it"
                ),
            )
        }
    }
}

async fn handle(req: Request, switch: &KillSwitch, operator: &OperatorRules, ctx: &tools::ToolContext) -> Response {
    let started = Instant::now();
    let changes_state = kenny_proto::catalog::find(&req.tool).is_some_and(|s| !s.read_only());
    let outcome = if changes_state && switch.is_off() {
        Err(tools::ToolError::new(
            ErrorCode::Disabled,
            "remote control is disabled at the endpoint: the person at this PC turned it off; read-only tools still work",
        ))
    } else {
        tools::execute_with(&req.tool, req.args, operator, ctx).await
    };
    // One line per call is for debugging (KENNY_LOG=debug): the server audits every call,
    // and at info a busy PC wrote tens of megabytes of these.
    tracing::debug!(tool = %req.tool, id = %req.id, ok = outcome.is_ok(), ms = started.elapsed().as_millis() as u64, "call handled");
    match outcome {
        Ok(value) => Response::success(req.id, value),
        Err(e) => Response::failure(req.id, e.code.as_str(), e.message),
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_handler_that_panics_is_answered_internal_at_once() {
        let response = answer_even_if_it_panics("call-1".to_owned(), "fs_read", async {
            panic!("index out of bounds");
        })
        .await;
        let text = serde_json::to_value(&response).unwrap();
        assert_eq!(text["id"], "call-1");
        assert_eq!(text["ok"], false, "{text}");
        assert_eq!(text["error"]["code"], "internal", "{text}");
        let message = text["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("fs_read") && message.contains("index out of bounds"),
            "{message}"
        );
        // A handler that returns is answered as it said.
        let fine = answer_even_if_it_panics("call-2".to_owned(), "fs_read", async {
            Response::success("call-2", serde_json::json!({"ok": true}))
        })
        .await;
        assert_eq!(serde_json::to_value(&fine).unwrap()["ok"], true);
    }
}
