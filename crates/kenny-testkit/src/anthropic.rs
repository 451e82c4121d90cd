//! A scripted stand-in for the Anthropic Messages API, so the dashboard chat can be
//! tested end to end without the real model: a real HTTP server on 127.0.0.1 that
//! answers `POST /v1/messages` with the streamed wire format (server-sent events
//! `message_start`, `content_block_start`/`_delta`/`_stop` with `text_delta` and
//! `input_json_delta`, `message_delta` with the stop reason and usage, `message_stop`).
//!
//! The test writes the model's part: [`ScriptedModel::queue`] lines up replies, one per
//! request, in order; [`ScriptedModel::otherwise`] answers whatever comes once the queue
//! is empty (a model that reacts to what it reads, or conversations running side by
//! side). A request nothing answers fails with an API error, so a test that forgot a
//! reply sees it instead of hanging. Every request body is kept for the test to check
//! what the model was shown.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use kenny_testkit::TestServer;
//! use kenny_testkit::anthropic::{Reply, ScriptedModel};
//! use serde_json::json;
//!
//! let model = ScriptedModel::start().await?;
//! let settings = model.settings();
//! let server = TestServer::builder().configure(move |c| c.chat = settings).start().await?;
//! model.queue(Reply::text("Looking.").then_tool("telemetry_collect", json!({"sections": ["memory"]})));
//! model.queue(Reply::text("Memory is fine."));
//! // ... talk to /api/chat, answer the call on a TestAgent, then:
//! let shown = model.last_request().expect("the model was asked");
//! # let _ = (server, shown); Ok(()) }
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kenny_server::chat::ChatSettings;
use kenny_server::secrets::Masked;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

/// The only key the stand-in accepts (in `x-api-key`).
pub const API_KEY: &str = "sk-ant-testkit-0123";
/// The model name [`ScriptedModel::settings`] asks for.
pub const MODEL: &str = "claude-test";

/// Small pieces, so the server has to put text and tool input back together the way
/// it must for the real API, which never sends a block whole.
const TEXT_PIECE: usize = 7;
const JSON_PIECE: usize = 5;

/// One assistant turn, as the test scripts it.
pub struct Reply {
    blocks: Vec<Block>,
    failure: Option<(String, String)>,
    usage: Option<(u64, u64)>,
    release: Option<oneshot::Receiver<()>>,
}

enum Block {
    Text(String),
    ToolUse { name: String, input: Value },
}

impl Reply {
    /// A turn that only says `text` (stop reason `end_turn`).
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::empty().then_text(text)
    }

    /// A turn that calls one tool and says nothing (stop reason `tool_use`).
    pub fn tool(name: impl Into<String>, input: Value) -> Reply {
        Reply::empty().then_tool(name, input)
    }

    /// A turn that reports its usage, then breaks off mid-stream with an `error` event
    /// (`overloaded_error`, say): a failed turn the API bills all the same.
    pub fn fail(kind: impl Into<String>, message: impl Into<String>) -> Reply {
        Reply {
            failure: Some((kind.into(), message.into())),
            ..Reply::empty()
        }
    }

    fn empty() -> Reply {
        Reply {
            blocks: Vec::new(),
            failure: None,
            usage: None,
            release: None,
        }
    }

    /// Another text block after the ones so far.
    pub fn then_text(mut self, text: impl Into<String>) -> Reply {
        self.blocks.push(Block::Text(text.into()));
        self
    }

    /// Another `tool_use` block after the ones so far; its id is made up when sent.
    pub fn then_tool(mut self, name: impl Into<String>, input: Value) -> Reply {
        self.blocks.push(Block::ToolUse {
            name: name.into(),
            input,
        });
        self
    }

    /// Reports these token counts instead of the default (input: a quarter of the
    /// request's bytes, output: 10).
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Reply {
        self.usage = Some((input_tokens, output_tokens));
        self
    }

    /// The same reply, answered only once the test lets it go: the request is taken and
    /// recorded, then waits before any byte of the answer. The turn stays in flight for
    /// exactly as long as the test needs, with no guessed sleep. Dropping the
    /// [`Release`] lets it go too, so a failing test cannot leave it hanging.
    pub fn held(mut self) -> (Reply, Release) {
        let (tx, rx) = oneshot::channel();
        self.release = Some(rx);
        (self, Release(tx))
    }
}

/// Lets a [`Reply::held`] reply be sent.
pub struct Release(oneshot::Sender<()>);

impl Release {
    pub fn release(self) {
        let _ = self.0.send(());
    }
}

type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    otherwise: Mutex<Option<Responder>>,
    requests: Mutex<Vec<Value>>,
    received: watch::Sender<usize>,
    next_tool_use: AtomicU64,
}

/// A poisoned lock only means another request's handler panicked; what it guards is
/// still whole, and the test should see its own failure rather than a second one.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Records the request, then picks its reply.
    fn take(&self, request: &Value) -> Option<Reply> {
        lock(&self.requests).push(request.clone());
        self.received.send_modify(|n| *n += 1);
        if let Some(reply) = lock(&self.script).pop_front() {
            return Some(reply);
        }
        // Called outside the lock: a responder may well ask the model for its requests.
        let responder = lock(&self.otherwise).clone()?;
        Some(responder(request))
    }
}

/// The running stand-in; it stops when dropped.
pub struct ScriptedModel {
    base_url: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl ScriptedModel {
    pub async fn start() -> anyhow::Result<ScriptedModel> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the scripted model's port")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script: Mutex::default(),
            otherwise: Mutex::default(),
            requests: Mutex::default(),
            received: watch::Sender::new(0),
            next_tool_use: AtomicU64::new(1),
        });
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("the scripted model stopped serving: {e}");
            }
        });
        Ok(ScriptedModel {
            base_url: format!("http://{addr}"),
            shared,
            server,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Chat settings pointing at this stand-in with its key and [`MODEL`]; the rest as
    /// the server's defaults (`..model.settings()` to change a limit).
    pub fn settings(&self) -> ChatSettings {
        ChatSettings {
            api_key: Some(Masked::new(API_KEY)),
            base_url: self.base_url.clone(),
            model: MODEL.into(),
            ..ChatSettings::default()
        }
    }

    /// The reply to the first request not yet answered by an earlier one.
    pub fn queue(&self, reply: Reply) {
        lock(&self.shared.script).push_back(reply);
    }

    /// How to answer a request once the queue is empty, from its body.
    pub fn otherwise(&self, responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        *lock(&self.shared.otherwise) = Some(Arc::new(responder));
    }

    /// Every request body received so far, oldest first (those it refused for a bad
    /// key or shape excepted).
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared.requests).clone()
    }

    pub fn last_request(&self) -> Option<Value> {
        lock(&self.shared.requests).last().cloned()
    }

    /// Waits until `count` requests have arrived in all (a turn is at the model).
    pub async fn wait_for_requests(&self, count: usize, within: Duration) -> anyhow::Result<()> {
        let mut received = self.shared.received.subscribe();
        tokio::time::timeout(within, received.wait_for(|n| *n >= count))
            .await
            .with_context(|| {
                format!(
                    "the model got {} request(s) within {within:?}, not {count}",
                    *self.shared.received.borrow()
                )
            })?
            .context("the scripted model stopped")?;
        Ok(())
    }
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if key != Some(API_KEY) || !headers.contains_key("anthropic-version") {
        return api_error(StatusCode::UNAUTHORIZED, "authentication_error", "invalid x-api-key");
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("the body is not JSON: {e}"),
            );
        }
    };
    if request["stream"] != true {
        return api_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "this stand-in only answers streamed requests",
        );
    }
    let Some(mut reply) = shared.take(&request) else {
        return api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "the test scripted no reply for this request",
        );
    };
    if let Some(release) = reply.release.take() {
        // Released or dropped: either way the reply goes out.
        let _ = release.await;
    }
    let usage = reply.usage.unwrap_or((body.len() as u64 / 4, 10));
    let events = stream_events(&reply, &request, usage, &shared.next_tool_use);
    let chunks = events.into_iter().map(Ok::<Bytes, Infallible>);
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(futures_util::stream::iter(chunks)),
    )
        .into_response()
}

/// The API's error shape, as a non-streamed answer.
fn api_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// The whole answer as SSE events, one chunk each.
fn stream_events(reply: &Reply, request: &Value, (input, output): (u64, u64), ids: &AtomicU64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut send = |event: &str, data: Value| out.push(Bytes::from(format!("event: {event}\ndata: {data}\n\n")));
    send(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_testkit", "type": "message", "role": "assistant", "content": [],
            "model": request["model"], "stop_reason": null,
            "usage": {"input_tokens": input, "output_tokens": 1},
        }}),
    );
    send("ping", json!({"type": "ping"}));
    if let Some((kind, message)) = &reply.failure {
        send(
            "error",
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        );
        return out;
    }
    for (index, block) in reply.blocks.iter().enumerate() {
        match block {
            Block::Text(text) => {
                send(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
                );
                for piece in pieces(text, TEXT_PIECE) {
                    send(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
            }
            Block::ToolUse { name, input } => {
                let id = format!("toolu_testkit_{:04}", ids.fetch_add(1, Ordering::Relaxed));
                send(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                );
                for piece in pieces(&input.to_string(), JSON_PIECE) {
                    send(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
            }
        }
        send(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    let calls_tools = reply.blocks.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    let stop_reason = if calls_tools { "tool_use" } else { "end_turn" };
    send(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output}}),
    );
    send("message_stop", json!({"type": "message_stop"}));
    out
}

/// `text` cut every `size` characters, never inside one.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}
