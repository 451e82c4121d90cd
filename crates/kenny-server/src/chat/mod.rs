//! The dashboard's chat: the server runs the model's tool-use loop (Anthropic Messages
//! API) against the same tools as `/mcp`, for a signed-in user.
//!
//! Targeting follows the design brief: each conversation keeps its own selected PC, a
//! call may name another with `agent_id`, and the target is resolved and frozen when the
//! call is proposed. Only plain reads on the selected PC run at once (see [`gate`]);
//! every other call is held until the operator approves (it then runs once, on the
//! frozen target) or denies it (nothing runs). Held calls live in the database, so they
//! survive a restart. Each user's model use is counted per day against a limit.

pub mod anthropic;
pub mod engine;
pub mod gate;
pub mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::clock::Clock;
pub use crate::config::{ChatSettings, DEFAULT_DAILY_TOKENS, DEFAULT_MODEL};
use crate::store::Store;

/// What the browser is told when no key is set.
pub const NO_KEY_MESSAGE: &str = "the chat needs an Anthropic API key: start kenny-server with KENNY_ANTHROPIC_API_KEY set (and KENNY_CHAT_MODEL to pick a model); the rest of the dashboard works without it";

/// Shared by every conversation: settings, one HTTP client, and a lock per conversation
/// so one conversation writes one reply at a time (nothing else is shared between them).
pub struct Chat {
    pub settings: ChatSettings,
    pub http: reqwest::Client,
    busy: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Taken to check the daily limit and reserve a turn's tokens as one step.
    admission: tokio::sync::Mutex<()>,
    /// Tokens reserved per user for turns in flight, not yet in the database.
    reserved: Arc<Mutex<HashMap<i64, u64>>>,
}

/// What the chat's routes work with: the [`Chat`] every conversation shares, and the
/// store that keeps the conversations, their calls and each user's daily use. The
/// calls themselves go to the PCs through [`crate::fleet::Fleet`].
#[derive(Clone)]
pub struct Conversations {
    pub chat: Arc<Chat>,
    pub store: Arc<Store>,
    /// What time it is for messages, decisions and the chat's day.
    pub clock: Clock,
}

/// Tokens reserved for one turn in flight; given back when dropped (after the turn's
/// real use is recorded, or if the turn never finishes).
pub struct Reservation {
    reserved: Arc<Mutex<HashMap<i64, u64>>>,
    user: i64,
    tokens: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut reserved = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(left) = reserved.get_mut(&self.user) {
            *left = left.saturating_sub(self.tokens);
            if *left == 0 {
                reserved.remove(&self.user);
            }
        }
    }
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
            admission: tokio::sync::Mutex::new(()),
            reserved: Arc::default(),
        }
    }

    /// Serialises limit checks: hold it from reading a user's use to [`Self::reserve`].
    pub async fn admission(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.admission.lock().await
    }

    /// Tokens reserved for `user`'s turns in flight.
    pub fn reserved(&self, user: i64) -> u64 {
        let reserved = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        reserved.get(&user).copied().unwrap_or(0)
    }

    pub fn reserve(&self, user: i64, tokens: u64) -> Reservation {
        let mut reserved = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        let total = reserved.entry(user).or_default();
        *total = total.saturating_add(tokens);
        Reservation {
            reserved: self.reserved.clone(),
            user,
            tokens,
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
        agent_id: Option<kenny_proto::AgentId>,
        args: serde_json::Value,
    },
    /// A call finished (or was refused or denied).
    ToolResult {
        id: String,
        tool: String,
        agent_id: Option<kenny_proto::AgentId>,
        ok: bool,
        summary: String,
    },
    /// A call waits for approve or deny, frozen on `agent_id`; `reason` says why it
    /// needs the operator.
    Held {
        id: String,
        tool: String,
        agent_id: Option<kenny_proto::AgentId>,
        args: serde_json::Value,
        class: String,
        reason: String,
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
