//! The dashboard's chat: the server runs the model's tool-use loop (Anthropic Messages
//! API) against the same tools as `/mcp`, for a signed-in user.
//!
//! Targeting follows the design brief: each conversation keeps its own selected PC, a
//! call may name another with `agent_id`, and the target is resolved and frozen when the
//! call is proposed. Read-only calls run at once; every state-changing call is held until
//! the operator approves (it then runs once, on the frozen target) or denies it (nothing
//! runs). Held calls live in the database, so they survive a restart.

pub mod anthropic;
pub mod engine;
pub mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Where the model is and which one to use.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    pub api_key: Option<String>,
    pub base_url: String,
    pub model: String,
    pub max_tokens: u32,
}

impl Default for ChatSettings {
    fn default() -> Self {
        ChatSettings {
            api_key: None,
            base_url: "https://api.anthropic.com".into(),
            model: DEFAULT_MODEL.into(),
            max_tokens: 4096,
        }
    }
}

pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

impl ChatSettings {
    /// From `KENNY_ANTHROPIC_API_KEY`, `KENNY_ANTHROPIC_BASE_URL` and `KENNY_CHAT_MODEL`
    /// (for launchers without flags of their own); unset ones keep their defaults.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let defaults = ChatSettings::default();
        ChatSettings {
            api_key: var("KENNY_ANTHROPIC_API_KEY"),
            base_url: var("KENNY_ANTHROPIC_BASE_URL").unwrap_or(defaults.base_url),
            model: var("KENNY_CHAT_MODEL").unwrap_or(defaults.model),
            max_tokens: defaults.max_tokens,
        }
    }
}

/// What the browser is told when no key is set.
pub const NO_KEY_MESSAGE: &str = "the chat needs an Anthropic API key: start kenny-server with KENNY_ANTHROPIC_API_KEY set (and KENNY_CHAT_MODEL to pick a model); the rest of the dashboard works without it";

/// Shared by every conversation: settings, one HTTP client, and a lock per conversation
/// so one conversation writes one reply at a time (nothing else is shared between them).
pub struct Chat {
    pub settings: ChatSettings,
    pub http: reqwest::Client,
    busy: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Chat {
    pub fn new(settings: ChatSettings) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Chat {
            settings,
            http,
            busy: Mutex::new(HashMap::new()),
        }
    }

    /// The conversation's turn lock, if no reply is being written in it right now.
    pub fn try_lock(&self, session_id: &str) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        let lock = {
            let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            // A held lock has a second owner (its guard); idle entries are dropped.
            busy.retain(|_, l| Arc::strong_count(l) > 1);
            busy.entry(session_id.to_owned()).or_default().clone()
        };
        lock.try_lock_owned().ok()
    }
}

/// What the browser is sent while a reply is written (as server-sent events).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ChatEvent {
    /// Model text, as it streams.
    Text {
        text: String,
    },
    /// A read-only call started on its target.
    ToolCall {
        id: String,
        tool: String,
        agent_id: Option<String>,
        args: serde_json::Value,
    },
    /// A call finished (or was refused or denied).
    ToolResult {
        id: String,
        tool: String,
        agent_id: Option<String>,
        ok: bool,
        summary: String,
    },
    /// A state-changing call waits for approve or deny, frozen on `agent_id`.
    Held {
        id: String,
        tool: String,
        agent_id: Option<String>,
        args: serde_json::Value,
        class: String,
    },
    Error {
        code: String,
        message: String,
    },
    /// The reply is over: `end_turn`, or `held` when calls wait for a decision.
    Done {
        stop_reason: String,
    },
}
