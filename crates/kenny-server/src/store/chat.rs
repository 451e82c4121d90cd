//! Dashboard chat in storage: conversations, their messages as Messages API content
//! blocks, and each tool call with its frozen target and the operator's decision.

use serde::Serialize;
use serde_json::Value;

use super::db::{Row, args};
use super::{Result, Store};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatSession {
    pub id: String,
    #[serde(skip)]
    pub user_id: i64,
    pub title: String,
    /// The PC this conversation works on unless a call names another.
    pub selected_agent: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    pub id: i64,
    pub role: String,
    pub content: Value,
    pub created_at: String,
}

/// Where a tool call stands.
pub mod call_status {
    /// Waiting for the operator (state-changing).
    pub const HELD: &str = "held";
    /// Approved or read-only, being run on the agent.
    pub const RUNNING: &str = "running";
    /// Ran; `result` holds what goes back to the model.
    pub const DONE: &str = "done";
    pub const DENIED: &str = "denied";
    /// Never sent to an agent (no target, out of scope, unknown tool).
    pub const REFUSED: &str = "refused";
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatCall {
    /// The model's `tool_use` id.
    pub id: String,
    pub session_id: String,
    /// The assistant message that asked for it, and its place among that message's calls.
    pub message_id: i64,
    pub seq: i64,
    pub tool: String,
    /// The arguments as the model gave them (without `agent_id`).
    pub args: Value,
    /// The target, resolved and frozen when the call was proposed.
    pub agent_id: Option<kenny_proto::AgentId>,
    pub class: String,
    pub status: String,
    /// The `tool_result` content for the model, once there is one.
    pub result: Option<Value>,
    pub is_error: bool,
    pub created_at: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    /// Why a held call needs the operator (another PC, a change, a way off the PC...).
    pub hold_reason: Option<String>,
}

const CALL_COLUMNS: &str = "SELECT id, session_id, message_id, seq, tool, args, agent_id, class, status, result, is_error, created_at, decided_by, decided_at, hold_reason FROM chat_calls";

fn call_row(r: &Row) -> Result<ChatCall> {
    let json = |text: String| serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(ChatCall {
        id: r.get(0)?,
        session_id: r.get(1)?,
        message_id: r.get(2)?,
        seq: r.get(3)?,
        tool: r.get(4)?,
        args: json(r.get(5)?),
        agent_id: r
            .get::<Option<String>>(6)?
            .map(|id| super::parse_agent_id(&id))
            .transpose()?,
        class: r.get(7)?,
        status: r.get(8)?,
        result: r.get::<Option<String>>(9)?.map(json),
        is_error: r.get(10)?,
        created_at: r.get(11)?,
        decided_by: r.get(12)?,
        decided_at: r.get(13)?,
        hold_reason: r.get(14)?,
    })
}

const SESSION_COLUMNS: &str = "SELECT id, user_id, title, selected_agent, created_at, updated_at FROM chat_sessions";

fn session_row(r: &Row) -> Result<ChatSession> {
    Ok(ChatSession {
        id: r.get(0)?,
        user_id: r.get(1)?,
        title: r.get(2)?,
        selected_agent: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

impl Store {
    pub fn create_chat_session(&self, session: &ChatSession) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO chat_sessions (id, user_id, title, selected_agent, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                args![
                    &session.id,
                    session.user_id,
                    &session.title,
                    session.selected_agent.as_deref(),
                    &session.created_at,
                    &session.updated_at
                ],
            )?;
            Ok(())
        })
    }

    /// A user's own conversations, most recently active first.
    pub fn chat_sessions(&self, user_id: i64) -> Result<Vec<ChatSession>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{SESSION_COLUMNS} WHERE user_id = ?1 ORDER BY updated_at DESC, id"),
                args![user_id],
                session_row,
            )
        })
    }

    pub fn chat_session(&self, id: &str) -> Result<Option<ChatSession>> {
        self.read_db(|c| c.query_opt(&format!("{SESSION_COLUMNS} WHERE id = ?1"), args![id], session_row))
    }

    /// Deletes a conversation with its messages and calls; false if it was not this user's.
    pub fn delete_chat_session(&self, id: &str, user_id: i64) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "DELETE FROM chat_sessions WHERE id = ?1 AND user_id = ?2",
                args![id, user_id],
            )? > 0)
        })
    }

    pub fn update_chat_session(&self, id: &str, title: &str, selected_agent: Option<&str>, now: &str) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "UPDATE chat_sessions SET title = ?2, selected_agent = ?3, updated_at = ?4 WHERE id = ?1",
                args![id, title, selected_agent, now],
            )?;
            Ok(())
        })
    }

    pub fn append_chat_message(&self, session_id: &str, role: &str, content: &Value, now: &str) -> Result<i64> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let id: i64 = tx.query_one(
                    "INSERT INTO chat_messages (session_id, role, content, created_at) VALUES (?1, ?2, ?3, ?4) RETURNING id",
                    args![session_id, role, content.to_string(), now],
                    |r| r.get(0),
                )?;
                tx.execute(
                    "UPDATE chat_sessions SET updated_at = ?2 WHERE id = ?1",
                    args![session_id, now],
                )?;
                Ok(id)
            })
        })
    }

    pub fn chat_messages(&self, session_id: &str) -> Result<Vec<ChatMessage>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT id, role, content, created_at FROM chat_messages WHERE session_id = ?1 ORDER BY id",
                args![session_id],
                |r| {
                    Ok(ChatMessage {
                        id: r.get(0)?,
                        role: r.get(1)?,
                        content: serde_json::from_str(&r.get::<String>(2)?).unwrap_or(Value::Null),
                        created_at: r.get(3)?,
                    })
                },
            )
        })
    }

    pub fn insert_chat_call(&self, call: &ChatCall) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO chat_calls (id, session_id, message_id, seq, tool, args, agent_id, class, status, result, is_error, created_at, hold_reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                args![
                    &call.id,
                    &call.session_id,
                    call.message_id,
                    call.seq,
                    &call.tool,
                    call.args.to_string(),
                    call.agent_id.as_deref(),
                    &call.class,
                    &call.status,
                    call.result.as_ref().map(Value::to_string),
                    call.is_error,
                    &call.created_at,
                    call.hold_reason.as_deref()
                ],
            )?;
            Ok(())
        })
    }

    pub fn chat_call(&self, id: &str) -> Result<Option<ChatCall>> {
        self.read_db(|c| c.query_opt(&format!("{CALL_COLUMNS} WHERE id = ?1"), args![id], call_row))
    }

    /// Every call of a conversation, in the order they were asked for.
    pub fn chat_calls(&self, session_id: &str) -> Result<Vec<ChatCall>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{CALL_COLUMNS} WHERE session_id = ?1 ORDER BY message_id, seq"),
                args![session_id],
                call_row,
            )
        })
    }

    /// Moves a held call on (to running when approved, to denied with its result), only
    /// if it is still held: of two decisions racing, exactly one wins.
    pub fn decide_chat_call(
        &self,
        id: &str,
        to: &str,
        result: Option<&Value>,
        decided_by: &str,
        now: &str,
    ) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE chat_calls SET status = ?2, result = COALESCE(?3, result), decided_by = ?4, decided_at = ?5
                 WHERE id = ?1 AND status = 'held'",
                args![id, to, result.map(Value::to_string), decided_by, now],
            )? == 1)
        })
    }

    /// Calls that were running when the server stopped: whether they ran on the PC is
    /// unknown, and the model is told exactly that. Held calls are left held.
    pub fn end_unfinished_chat_calls(&self, now: &str) -> Result<usize> {
        let result = serde_json::json!([{"type": "text", "text": "The server restarted while this call was running; whether it ran on the PC is unknown. Check before trying again."}]);
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE chat_calls SET status = 'done', is_error = 1, result = ?1, decided_at = COALESCE(decided_at, ?2) WHERE status = 'running'",
                args![result.to_string(), now],
            )? as usize)
        })
    }

    /// Ends the chat calls still running that started before `before` (their replica
    /// died), as [`Store::end_unfinished_chat_calls`] does at a restart.
    pub fn end_chat_calls_running_before(&self, before: &str, now: &str) -> Result<usize> {
        let result = serde_json::json!([{"type": "text", "text": "The server running this call stopped; whether it ran on the PC is unknown. Check before trying again."}]);
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE chat_calls SET status = 'done', is_error = 1, result = ?1, decided_at = COALESCE(decided_at, ?2)
                 WHERE status = 'running' AND COALESCE(decided_at, created_at) < ?3",
                args![result.to_string(), now, before],
            )? as usize)
        })
    }

    pub fn finish_chat_call(&self, id: &str, result: &Value, is_error: bool) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "UPDATE chat_calls SET status = 'done', result = ?2, is_error = ?3 WHERE id = ?1",
                args![id, result.to_string(), is_error],
            )?;
            Ok(())
        })
    }
}

/// One user's model use on one day (UTC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ChatUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub turns: u64,
}

impl ChatUsage {
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl Store {
    /// Adds one model turn's tokens to the user's count for `day` (`YYYY-MM-DD`).
    pub fn add_chat_usage(&self, user_id: i64, day: &str, input_tokens: u64, output_tokens: u64) -> Result<()> {
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.write_db(|c| {
            c.execute(
                "INSERT INTO chat_usage (user_id, day, input_tokens, output_tokens, turns) VALUES (?1, ?2, ?3, ?4, 1)
                 ON CONFLICT (user_id, day) DO UPDATE SET input_tokens = chat_usage.input_tokens + excluded.input_tokens,
                 output_tokens = chat_usage.output_tokens + excluded.output_tokens, turns = chat_usage.turns + 1",
                args![user_id, day, clamp(input_tokens), clamp(output_tokens)],
            )?;
            Ok(())
        })
    }

    pub fn chat_usage(&self, user_id: i64, day: &str) -> Result<ChatUsage> {
        self.read_db(|c| {
            let row = c.query_opt(
                "SELECT input_tokens, output_tokens, turns FROM chat_usage WHERE user_id = ?1 AND day = ?2",
                args![user_id, day],
                |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?, r.get::<i64>(2)?)),
            )?;
            let n = |v: i64| u64::try_from(v).unwrap_or(0);
            Ok(row.map_or_else(ChatUsage::default, |(i, o, t)| ChatUsage {
                input_tokens: n(i),
                output_tokens: n(o),
                turns: n(t),
            }))
        })
    }
}
