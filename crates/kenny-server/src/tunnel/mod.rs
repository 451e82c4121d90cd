//! `/agent/ws`: the agent tunnel. Authenticates each connection, registers it, then
//! runs one task per connection that reads frames, writes queued requests and keeps
//! the heartbeat, until the connection ends, dies silently or is replaced.

pub mod handshake;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use kenny_proto::frame::{AgentMeta, Auth, Frame, Limits, decode, encode};
use tokio::sync::mpsc;

use self::handshake::{Method, Reject};
use crate::registry::{AgentLink, LinkError, unix_now};
use crate::state::AppState;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Socket buffers are per connection: small, so ten thousand idle agents stay cheap.
const READ_BUFFER: usize = 4 * 1024;

pub async fn upgrade(State(state): State<Arc<AppState>>, ws: WebSocketUpgrade) -> Response {
    let max = Limits::AUTHENTICATED.max_frame_bytes;
    ws.read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| serve(state, socket))
}

async fn serve(state: Arc<AppState>, mut socket: WebSocket) {
    let authed = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&state, &mut socket)).await {
        Ok(Ok(authed)) => authed,
        Ok(Err(reject)) => return refuse(socket, reject).await,
        Err(_) => {
            return refuse(socket, Reject::bad_frame("handshake not completed within 10s")).await;
        }
    };
    let (agent_id, meta) = authed;
    let conn_id = state.registry.next_conn_id();
    let (link, outbox) = AgentLink::new(agent_id.clone(), conn_id, meta.clone(), crate::clock::now());
    if let Some(old) = state.registry.insert(link.clone()) {
        old.close("replaced by a newer connection from the same agent");
    }
    tracing::info!(agent = %agent_id, conn_id, "agent connected");
    record_seen(&state, &agent_id, meta).await;

    let reason = run_session(&state, &link, socket, outbox).await;

    // Order matters: leave the registry first (only if still ours), then fail this
    // connection's in-flight calls, so no new call can slip onto a dead link.
    state.registry.remove_if_current(&agent_id, conn_id);
    link.close(&reason);
    tracing::info!(agent = %agent_id, conn_id, %reason, "agent disconnected");
    record_seen(&state, &agent_id, None).await;
}

async fn refuse(mut socket: WebSocket, reject: Reject) {
    tracing::warn!(code = reject.close_code, reason = %reject.reason, "agent handshake refused");
    let frame = CloseFrame {
        code: reject.close_code,
        reason: reject.reason.chars().take(120).collect::<String>().into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

async fn recv_text(socket: &mut WebSocket) -> Result<String, Reject> {
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
            Some(Err(e)) => {
                return Err(Reject::bad_frame(format!("socket error during handshake: {e}")));
            }
        }
    }
}

async fn handshake(state: &AppState, socket: &mut WebSocket) -> Result<(String, Option<AgentMeta>), Reject> {
    let first = recv_text(socket).await?;
    let frame = decode(&first, Limits::HANDSHAKE).map_err(|e| Reject::bad_frame(format!("first frame: {e}")))?;
    let Frame::Register(reg) = frame else {
        return Err(Reject::bad_frame(format!(
            "first frame must be register, got {}",
            frame.kind()
        )));
    };
    let agent_id = reg.agent_id.clone();
    match handshake::method(&reg, state.config.allow_token_auth)? {
        Method::Token(token) => {
            let store = state.store.clone();
            let id = agent_id.clone();
            let hash = tokio::task::spawn_blocking(move || store.agent_token_hash(&id))
                .await
                .map_err(|e| Reject::unauthorized(format!("lookup failed: {e}")))?
                .map_err(|e| Reject::unauthorized(format!("lookup failed: {e}")))?;
            handshake::check_token(hash.as_deref(), &token)?;
        }
        Method::Mutual { client_nonce } => {
            let store = state.store.clone();
            let id = agent_id.clone();
            let record = tokio::task::spawn_blocking(move || store.agent(&id))
                .await
                .map_err(|e| Reject::unauthorized(format!("lookup failed: {e}")))?
                .map_err(|e| Reject::unauthorized(format!("lookup failed: {e}")))?;
            if record.as_ref().is_none_or(|r| r.public_key.is_none()) {
                return Err(Reject::unauthorized("unknown or unenrolled agent"));
            }
            let server_nonce = crate::secrets::random_nonce();
            let challenge = handshake::challenge(&state.server_key, &agent_id, &client_nonce, &server_nonce);
            socket
                .send(Message::Text(encode(&Frame::Challenge(challenge)).into()))
                .await
                .map_err(|e| Reject::bad_frame(format!("sending challenge: {e}")))?;
            let reply = recv_text(socket).await?;
            let Frame::Auth(Auth { agent_sig }) =
                decode(&reply, Limits::HANDSHAKE).map_err(|e| Reject::bad_frame(format!("auth frame: {e}")))?
            else {
                return Err(Reject::bad_frame("expected an auth frame after the challenge"));
            };
            handshake::check_agent_sig(record.as_ref(), &client_nonce, &server_nonce, &agent_sig)?;
        }
    }
    Ok((agent_id, handshake::sanitize_meta(reg.meta)))
}

async fn run_session(
    state: &AppState,
    link: &AgentLink,
    mut socket: WebSocket,
    mut outbox: mpsc::Receiver<String>,
) -> String {
    let beat = state.config.heartbeat;
    let window = (beat * 3).as_secs().max(1) as i64;
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = link.closed() => {
                let _ = socket.send(Message::Close(None)).await;
                return "replaced by a newer connection".into();
            }
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(text))) => {
                    link.saw_frame();
                    if let Some(reply) = on_text(state, link, &text).await
                        && socket.send(Message::Text(reply.into())).await.is_err()
                    {
                        return "send failed".into();
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => link.saw_frame(),
                Some(Ok(Message::Binary(_))) => {
                    link.saw_frame();
                    tracing::warn!(agent = %link.agent_id, "binary frame dropped: frames are JSON text");
                }
                Some(Ok(Message::Close(_))) => return "the agent closed the connection".into(),
                Some(Err(e)) => return format!("socket error: {e}"),
                None => return "the connection dropped".into(),
            },
            Some(text) = outbox.recv() => {
                if let Err(e) = socket.send(Message::Text(text.into())).await {
                    return format!("send failed: {e}");
                }
            }
            _ = heartbeat.tick() => {
                if unix_now() - link.last_frame_unix() > window {
                    return format!("no frame from the agent for over {window}s");
                }
                if socket.send(Message::Text(encode(&Frame::Ping).into())).await.is_err() {
                    return "send failed".into();
                }
            }
        }
    }
}

/// Handles one frame from an authenticated agent; returns a frame to send back.
async fn on_text(state: &AppState, link: &AgentLink, text: &str) -> Option<String> {
    let frame = match decode(text, Limits::AUTHENTICATED) {
        Ok(frame) => frame,
        Err(e) => {
            tracing::warn!(agent = %link.agent_id, reason = %e, "frame dropped");
            fail_malformed_response(link, text, &e.to_string());
            return None;
        }
    };
    if let Some(claimed) = frame.claimed_agent_id()
        && claimed != link.agent_id
    {
        tracing::warn!(agent = %link.agent_id, claimed, kind = frame.kind(), "frame dropped: agent_id is not the authenticated agent");
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
            let store = state.store.clone();
            let snapshot = serde_json::Value::Object(t.snapshot).to_string();
            let res = tokio::task::spawn_blocking(move || {
                store.insert_telemetry(&t.agent_id, &t.collected_at, &snapshot, &crate::clock::now())
            })
            .await;
            if let Ok(Err(e)) = res {
                tracing::warn!(agent = %link.agent_id, error = %e, "telemetry not stored");
            }
            None
        }
        Frame::Log(l) => {
            tracing::info!(agent = %l.agent_id, level = %l.level, target = %l.target, at = %l.at, "agent log: {}", l.message);
            None
        }
        other => {
            tracing::warn!(agent = %link.agent_id, kind = other.kind(), "frame dropped: not expected from an agent");
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

async fn record_seen(state: &AppState, agent_id: &str, meta: Option<AgentMeta>) {
    let store = state.store.clone();
    let id = agent_id.to_owned();
    let res =
        tokio::task::spawn_blocking(move || store.record_agent_seen(&id, meta.as_ref(), &crate::clock::now())).await;
    if let Ok(Err(e)) = res {
        tracing::warn!(agent = %agent_id, error = %e, "could not record agent metadata");
    }
}
