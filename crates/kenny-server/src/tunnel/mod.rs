//! `/agent/ws`: the agent tunnel. Authenticates each connection, registers it, then
//! runs one task per connection that reads frames, writes queued requests and keeps
//! the heartbeat, until the connection ends, dies silently or is replaced.
//!
//! Until it has authenticated, a connection may read only a few small frames' worth of
//! bytes and has a deadline; nothing it does can make another connection wait.

pub(crate) mod handshake;
pub(crate) mod pushed;

use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use kenny_proto::AgentId;
use kenny_proto::frame::{AgentMeta, Auth, Frame, Limits, decode, encode};
use tokio::sync::mpsc;

use self::handshake::{Method, Proof, Reject};
use self::pushed::Pushed;
use crate::listener::ConnReads;
use crate::registry::{AgentLink, LinkError, Registry, Route, unix_now};
use crate::state::{Fleet, Site};

/// A write to an agent that takes longer than this means it stopped reading: the
/// connection is dropped rather than left to block its calls.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Close reasons are limited to 123 bytes by the WebSocket protocol.
const MAX_CLOSE_REASON: usize = 123;
/// Socket buffers are per connection: small, so ten thousand idle agents stay cheap.
const READ_BUFFER: usize = 4 * 1024;
/// Bytes a connection may send before it has authenticated: its `register` and `auth`
/// frames at their size limit, plus framing and a few control frames. The WebSocket
/// layer accepts authenticated-size frames, so this budget is what keeps a client
/// that proves nothing from making the server buffer megabytes.
pub(crate) const PRE_AUTH_BYTES: u64 = 2 * Limits::HANDSHAKE.max_frame_bytes as u64 + 8 * 1024;

pub(crate) async fn upgrade(
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    Extension(reads): Extension<ConnReads>,
    ws: WebSocketUpgrade,
) -> Response {
    let max = Limits::AUTHENTICATED.max_frame_bytes;
    // Set before the upgrade completes, so it covers every frame of the handshake.
    reads.limit(PRE_AUTH_BYTES);
    ws.read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| serve(fleet, site, socket, reads))
}

async fn serve(fleet: Fleet, site: Site, mut socket: WebSocket, reads: ConnReads) {
    // The deadline runs from the upgrade: there is no queue to wait in first, so a
    // slow client holds nothing but its own connection, and only until then.
    let deadline = site.config.agent_handshake_timeout;
    let Authenticated {
        agent_id,
        meta,
        proof,
        result_key,
    } = match tokio::time::timeout(deadline, handshake(&fleet, &site, &mut socket, &reads)).await {
        Ok(Ok(authed)) => authed,
        Ok(Err(reject)) => return refuse(socket, reject).await,
        Err(_) => {
            let reason = format!("handshake not completed within {}s", deadline.as_secs());
            return refuse(socket, Reject::bad_frame(reason)).await;
        }
    };
    reads.lift();
    if let Some(reject) = conflicting_peer(&fleet.registry, site.config.heartbeat, &agent_id, meta.as_ref(), proof) {
        return refuse(socket, reject).await;
    }
    if site.shutdown.is_cancelled() {
        return;
    }
    let conn_id = fleet.registry.next_conn_id();
    let (link, outbox) = AgentLink::new(agent_id.clone(), conn_id, meta.clone(), fleet.clock.now(), result_key);
    // Queued before the link is in the registry, where calls find it: the outbox is
    // FIFO, so the agent holds the operator's rules before its first request arrives.
    let queued = fleet.policy.current().policy.clone();
    if !queued.rules.is_empty() && !link.try_send(&Frame::Policy(queued.clone())) {
        tracing::warn!(agent = %agent_id, "operator policy could not be queued for a new connection");
    }
    // In a cluster the connection is announced first: its presence revision orders it
    // after every earlier connection of this agent, on any replica, and calls only
    // reach it once it has one. Without presence the connection could not be told
    // apart from a stale one, so it is refused and the agent retries.
    if let Some(cluster) = &fleet.cluster
        && let Err(e) = cluster.announce(&link).await
    {
        tracing::error!(agent = %agent_id, error = format!("{e:#}"), "an agent connection could not be announced to the cluster");
        link.close("the cluster could not record this connection");
        return refuse(
            socket,
            Reject::unavailable("the server could not record this connection; try again shortly"),
        )
        .await;
    }
    if let Some(old) = fleet.registry.insert(link.clone()) {
        old.close("replaced by a newer connection from the same agent");
    }
    // A change made in between was pushed to the registry without this link.
    let current = fleet.policy.current().policy.clone();
    if current != queued && !link.try_send(&Frame::Policy(current)) {
        tracing::warn!(agent = %agent_id, "a newer operator policy could not be queued for a new connection");
    }
    tracing::info!(agent = %agent_id, conn_id, "agent connected");
    record_seen(&fleet, &agent_id, meta).await;

    let reason = run_session(&fleet, &site, &link, socket, outbox).await;

    // Order matters: leave the registry first (only if still ours), then fail this
    // connection's in-flight calls, so no new call can slip onto a dead link.
    fleet.registry.remove_if_current(&agent_id, conn_id);
    link.close(&reason);
    if let Some(cluster) = &fleet.cluster {
        cluster.withdraw(&link).await;
    }
    tracing::info!(agent = %agent_id, conn_id, %reason, "agent disconnected");
    record_seen(&fleet, &agent_id, None).await;
}

/// Whether the newly authenticated connection may take the agent id's place: see
/// [`handshake::admit`]. A current connection here counts as alive while it has sent a
/// frame within two heartbeats; one on another replica while that replica is alive
/// (its holder withdraws it once it finds it dead), so the rule holds cluster-wide.
fn conflicting_peer(
    registry: &Registry,
    heartbeat: Duration,
    agent_id: &str,
    meta: Option<&AgentMeta>,
    proof: Proof,
) -> Option<Reject> {
    let current = registry.route(agent_id)?;
    let alive = match &current {
        Route::Local(link) => unix_now() - link.last_frame_unix() <= (heartbeat * 2).as_secs() as i64,
        Route::Remote(_) => true,
    };
    let host = |m: Option<&AgentMeta>| m.map(|m| m.hostname.clone());
    let (old_host, new_host) = (host(current.meta()), host(meta));
    let reject = handshake::admit(agent_id, proof, alive, old_host.as_deref(), new_host.as_deref()).err()?;
    tracing::warn!(agent = %agent_id, ?proof, ?old_host, ?new_host, reason = %reject.reason, "a connection for a connected agent id was refused");
    Some(reject)
}

async fn refuse(mut socket: WebSocket, reject: Reject) {
    tracing::warn!(code = reject.close_code, reason = %reject.reason, "agent handshake refused");
    let frame = CloseFrame {
        code: reject.close_code,
        reason: truncate_utf8(&reject.reason, MAX_CLOSE_REASON).into(),
    };
    let _ = tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Close(Some(frame)))).await;
}

fn truncate_utf8(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

async fn recv_text(socket: &mut WebSocket, reads: &ConnReads) -> Result<String, Reject> {
    loop {
        match socket.recv().await {
            Some(Ok(Message::Text(t))) => return Ok(t.to_string()),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Binary(_))) => {
                return Err(Reject::bad_frame("frames are JSON text messages, not binary"));
            }
            Some(Ok(Message::Close(_))) | None => {
                return Err(Reject::bad_frame("connection closed during handshake"));
            }
            Some(Err(_)) if reads.exhausted() => {
                return Err(Reject::bad_frame(format!(
                    "sent over {} KiB before authenticating; handshake frames are at most {} KiB",
                    PRE_AUTH_BYTES / 1024,
                    Limits::HANDSHAKE.max_frame_bytes / 1024
                )));
            }
            Some(Err(e)) => {
                return Err(Reject::bad_frame(format!("socket error during handshake: {e}")));
            }
        }
    }
}

/// Who a completed handshake proved the peer to be.
struct Authenticated {
    agent_id: AgentId,
    meta: Option<AgentMeta>,
    proof: Proof,
    /// Set when the agent speaks 0.18 or later: its answers must be signed by this key.
    result_key: Option<ed25519_dalek::VerifyingKey>,
}

async fn handshake(
    fleet: &Fleet,
    site: &Site,
    socket: &mut WebSocket,
    reads: &ConnReads,
) -> Result<Authenticated, Reject> {
    let first = recv_text(socket, reads).await?;
    let frame = decode(&first, Limits::HANDSHAKE).map_err(|e| Reject::bad_frame(format!("first frame: {e}")))?;
    let Frame::Register(reg) = frame else {
        return Err(Reject::bad_frame(format!(
            "first frame must be register, got {}",
            frame.kind()
        )));
    };
    let agent_id = reg.agent_id.clone();
    let signs_results = reg.protocol.as_deref().is_some_and(kenny_proto::proof::signs_results);
    let (proof, result_key) = match handshake::method(&reg, site.config.allow_token_auth)? {
        Method::Token(token) => {
            let id = agent_id.clone();
            let found = fleet
                .store
                .blocking(move |s| s.agent_credentials(&id))
                .await
                .map_err(lookup_failed)?;
            handshake::check_token(found.as_ref().map(|c| c.token_hash.as_str()), &token)?;
            handshake::token_may_log_in(found.is_some_and(|c| c.enrolled))?;
            (Proof::Token, None)
        }
        Method::Mutual { client_nonce } => {
            let id = agent_id.clone();
            let record = fleet
                .store
                .blocking(move |s| s.agent(&id))
                .await
                .map_err(lookup_failed)?;
            if record.as_ref().is_none_or(|r| r.public_key.is_none()) {
                return Err(Reject::unauthorized("unknown or unenrolled agent"));
            }
            let server_nonce = crate::secrets::random_nonce();
            let challenge =
                handshake::challenge(&site.server_key, &agent_id, &client_nonce, &server_nonce, signs_results);
            socket
                .send(Message::Text(encode(&Frame::Challenge(challenge)).into()))
                .await
                .map_err(|e| Reject::bad_frame(format!("sending challenge: {e}")))?;
            let reply = recv_text(socket, reads).await?;
            let Frame::Auth(Auth { agent_sig }) =
                decode(&reply, Limits::HANDSHAKE).map_err(|e| Reject::bad_frame(format!("auth frame: {e}")))?
            else {
                return Err(Reject::bad_frame("expected an auth frame after the challenge"));
            };
            let key = handshake::check_agent_sig(record.as_ref(), &client_nonce, &server_nonce, &agent_sig)?;
            (Proof::Key, signs_results.then_some(key))
        }
    };
    // `method` has checked the id; parsing it again only gives it its type.
    let agent_id = AgentId::parse(&agent_id).map_err(|e| Reject::bad_frame(e.to_string()))?;
    Ok(Authenticated {
        agent_id,
        meta: handshake::sanitize_meta(reg.meta),
        proof,
        result_key,
    })
}

async fn run_session(
    fleet: &Fleet,
    site: &Site,
    link: &AgentLink,
    mut socket: WebSocket,
    mut outbox: mpsc::Receiver<String>,
) -> String {
    let beat = site.config.heartbeat;
    let window = (beat * 3).as_secs().max(1) as i64;
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pushed = fleet.pushed.take(&link.agent_id, std::time::Instant::now());
    let reason = loop {
        // Biased: once the link is closed (replaced, shutting down) nothing more may be
        // written to this socket, even if requests are still queued. Queued requests
        // come before reading, so an agent that never stops sending cannot starve its
        // own calls.
        let outgoing = tokio::select! {
            biased;
            _ = link.closed() => {
                let _ = tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Close(None))).await;
                break "replaced by a newer connection".to_owned();
            }
            _ = site.shutdown.cancelled() => {
                let _ = tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Close(None))).await;
                break "the server is shutting down".to_owned();
            }
            Some(text) = outbox.recv() => Some(text),
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(text))) => {
                    link.saw_frame();
                    on_text(fleet, link, &mut pushed, &text)
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {
                    link.saw_frame();
                    None
                }
                Some(Ok(Message::Binary(_))) => {
                    link.saw_frame();
                    if let Some(held_back) = pushed.frame_warnings.pass(std::time::Instant::now()) {
                        tracing::warn!(agent = %link.agent_id, held_back, "binary frame dropped: frames are JSON text");
                    }
                    None
                }
                Some(Ok(Message::Close(_))) => break "the agent closed the connection".to_owned(),
                Some(Err(e)) => break format!("socket error: {e}"),
                None => break "the connection dropped".to_owned(),
            },
            _ = heartbeat.tick() => {
                if unix_now() - link.last_frame_unix() > window {
                    break format!("no frame from the agent for over {window}s");
                }
                Some(encode(&Frame::Ping))
            }
        };
        if let Some(text) = outgoing {
            match tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Text(text.into()))).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => break format!("send failed: {e}"),
                Err(_) => {
                    break format!(
                        "the agent stopped reading (a write took over {}s)",
                        SEND_TIMEOUT.as_secs()
                    );
                }
            }
        }
    };
    let unreported = pushed.unreported();
    if unreported > 0 {
        tracing::warn!(agent = %link.agent_id, dropped = unreported, "more frames from this connection were dropped than were logged");
    }
    fleet.pushed.put_back(&link.agent_id, pushed);
    reason
}

/// Handles one frame from an authenticated agent; returns a frame to send back.
/// Synchronous on purpose: nothing here may wait, or the connection's responses would
/// wait behind it.
fn on_text(fleet: &Fleet, link: &AgentLink, pushed: &mut Pushed, text: &str) -> Option<String> {
    let now = std::time::Instant::now();
    let frame = match decode(text, Limits::AUTHENTICATED) {
        Ok(frame) => frame,
        Err(e) => {
            if let Some(held_back) = pushed.frame_warnings.pass(now) {
                tracing::warn!(agent = %link.agent_id, reason = %e, held_back, "frame dropped");
            }
            fail_malformed_response(link, text, &e.to_string());
            return None;
        }
    };
    if let Some(claimed) = frame.claimed_agent_id()
        && claimed != link.agent_id
    {
        if let Some(held_back) = pushed.frame_warnings.pass(now) {
            let claimed = pushed::clean(claimed, 64);
            tracing::warn!(agent = %link.agent_id, claimed, kind = frame.kind(), held_back, "frame dropped: agent_id is not the authenticated agent");
        }
        return None;
    }
    match frame {
        Frame::Response(r) => {
            let id = r.id.clone();
            if !link.complete(r) {
                tracing::debug!(agent = %link.agent_id, id, "response for no waiting call dropped");
            }
            None
        }
        Frame::Ping {} => Some(encode(&Frame::Pong)),
        Frame::Pong {} => None,
        Frame::Telemetry(t) => {
            let snapshot = serde_json::to_string(&t.snapshot).unwrap_or_default();
            match pushed.telemetry(snapshot.len(), now) {
                Ok(()) => {
                    let os = link.meta.as_ref().map(|m| m.os.as_str());
                    fleet.ingest_telemetry(&link.agent_id, os, t.collected_at, &t.snapshot, snapshot);
                }
                Err(why) => {
                    if let Some(held_back) = pushed.telemetry_warnings.pass(now) {
                        tracing::warn!(agent = %link.agent_id, held_back, "telemetry dropped: {why}");
                    }
                }
            }
            None
        }
        Frame::Log(l) => {
            if pushed.log_line(now) {
                tracing::info!(
                    agent = %link.agent_id,
                    level = %pushed::clean(&l.level, 16),
                    target = %pushed::clean(&l.target, 128),
                    at = %pushed::clean(&l.at, 40),
                    "agent log: {}",
                    pushed::clean(&l.message, pushed::LOG_MESSAGE_CHARS)
                );
                fleet.forwarder.updates().observe(&link.agent_id, &l);
            } else if let Some(held_back) = pushed.log_warnings.pass(now) {
                tracing::warn!(
                    agent = %link.agent_id,
                    held_back,
                    "agent log lines dropped: over {} per second; one warning per {}s",
                    pushed::LOG_LINES_PER_SEC,
                    pushed::WARN_INTERVAL.as_secs()
                );
            }
            None
        }
        other => {
            if let Some(held_back) = pushed.frame_warnings.pass(now) {
                tracing::warn!(agent = %link.agent_id, kind = other.kind(), held_back, "frame dropped: not expected from an agent");
            }
            None
        }
    }
}

/// A response we cannot decode still names the call it answers; fail that call now
/// rather than leaving it to time out.
fn fail_malformed_response(link: &AgentLink, text: &str, reason: &str) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    if value.get("type").and_then(|t| t.as_str()) == Some("response")
        && let Some(id) = value.get("id").and_then(|i| i.as_str())
    {
        link.fail(
            id,
            LinkError::Agent {
                code: "internal".into(),
                message: format!("the agent's response could not be read: {reason}"),
            },
        );
    }
}

async fn record_seen(fleet: &Fleet, agent_id: &str, meta: Option<AgentMeta>) {
    let id = agent_id.to_owned();
    let now = fleet.clock.now();
    let res = fleet
        .store
        .blocking(move |s| s.record_agent_seen(&id, meta.as_ref(), &now))
        .await;
    if let Err(e) = res {
        tracing::warn!(agent = %agent_id, error = %e, "could not record agent metadata");
    }
}

fn lookup_failed(e: crate::store::StoreError) -> Reject {
    tracing::error!(error = %e, "agent lookup failed during a handshake");
    Reject::unauthorized("the server could not check this agent's credentials; try again")
}
