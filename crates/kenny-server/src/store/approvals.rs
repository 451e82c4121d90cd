//! Approvals on the MCP path in storage: the rules saying whose state-changing MCP
//! calls wait for a person, and the calls held under them (`approvals` has the rules
//! about who may decide; this is only the rows).

use serde::Serialize;
use serde_json::Value;

use super::db::{Row, args};
use super::{Result, Store};

/// Whose calls a rule holds: a user (every credential of theirs) or one personal
/// access token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSubject {
    User,
    Token,
}

impl RuleSubject {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSubject::User => "user",
            RuleSubject::Token => "token",
        }
    }

    pub fn parse(s: &str) -> Option<RuleSubject> {
        match s {
            "user" => Some(RuleSubject::User),
            "token" => Some(RuleSubject::Token),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRule {
    pub subject: RuleSubject,
    pub subject_id: i64,
    /// The user's name, or the token's owner and label, for people reading the list.
    pub name: String,
    pub set_by: String,
    pub set_at: String,
}

/// Where a held call stands.
pub mod held_status {
    /// Waiting for a person.
    pub const HELD: &str = "held";
    /// Approved and sent to the PC.
    pub const RUNNING: &str = "running";
    /// Ran (or its end is unknown); `result` holds the MCP result.
    pub const DONE: &str = "done";
    pub const DENIED: &str = "denied";
    /// Read-side only: held past its deadline, so it can no longer be approved.
    pub const EXPIRED: &str = "expired";
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldCall {
    pub id: String,
    pub user_id: i64,
    pub username: String,
    pub credential_kind: String,
    pub credential_id: String,
    pub tool: String,
    /// The PC the call was frozen on when it was held.
    pub agent_id: kenny_proto::AgentId,
    /// The arguments as the caller gave them, without `agent_id`.
    pub args: Value,
    /// How the caller is asked: by MCP elicitation, or in the dashboard.
    pub asked_by: String,
    pub status: String,
    pub created_at: String,
    pub expires_at: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    /// The MCP tool result, once it ran.
    pub result: Option<Value>,
    pub is_error: bool,
}

impl HeldCall {
    /// Its status as of `now`: a held call past its deadline reads `expired`.
    pub fn status_at(&self, now: &str) -> &str {
        if self.status == held_status::HELD && self.expires_at.as_str() <= now {
            held_status::EXPIRED
        } else {
            &self.status
        }
    }
}

const HELD_COLUMNS: &str = "SELECT id, user_id, username, credential_kind, credential_id, tool, agent_id, args, asked_by, status, created_at, expires_at, decided_by, decided_at, result, is_error FROM held_calls";

fn held_row(r: &Row) -> Result<HeldCall> {
    let json = |text: String| serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(HeldCall {
        id: r.get(0)?,
        user_id: r.get(1)?,
        username: r.get(2)?,
        credential_kind: r.get(3)?,
        credential_id: r.get(4)?,
        tool: r.get(5)?,
        agent_id: super::agent_id_of(r, 6)?,
        args: json(r.get(7)?),
        asked_by: r.get(8)?,
        status: r.get(9)?,
        created_at: r.get(10)?,
        expires_at: r.get(11)?,
        decided_by: r.get(12)?,
        decided_at: r.get(13)?,
        result: r.get::<Option<String>>(14)?.map(json),
        is_error: r.get(15)?,
    })
}

impl Store {
    /// Whether a state-changing MCP call by `user_id` (through the personal access
    /// token `token_id`, if it came with one) waits for approval.
    pub fn approval_required(&self, user_id: i64, token_id: Option<i64>) -> Result<bool> {
        self.read_db(|c| {
            let hit = c.query_opt(
                "SELECT 1 FROM approval_rules WHERE (subject = 'user' AND subject_id = ?1) OR (subject = 'token' AND subject_id = ?2)",
                args![user_id, token_id.unwrap_or(-1)],
                |r| r.get::<i64>(0),
            )?;
            Ok(hit.is_some())
        })
    }

    pub fn approval_rules(&self) -> Result<Vec<ApprovalRule>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT r.subject, r.subject_id, COALESCE(u.username, tu.username || ' / ' || COALESCE(t.label, 'token ' || t.id), '(gone)'), r.set_by, r.set_at
                 FROM approval_rules r
                 LEFT JOIN users u ON r.subject = 'user' AND u.id = r.subject_id
                 LEFT JOIN tokens t ON r.subject = 'token' AND t.id = r.subject_id
                 LEFT JOIN users tu ON tu.id = t.user_id
                 ORDER BY r.subject, r.subject_id",
                args![],
                |r| {
                    let subject: String = r.get(0)?;
                    Ok(ApprovalRule {
                        subject: RuleSubject::parse(&subject).unwrap_or(RuleSubject::User),
                        subject_id: r.get(1)?,
                        name: r.get(2)?,
                        set_by: r.get(3)?,
                        set_at: r.get(4)?,
                    })
                },
            )
        })
    }

    /// Whether `subject_id` names an existing user, or a live personal access token.
    pub fn approval_subject_exists(&self, subject: RuleSubject, subject_id: i64) -> Result<bool> {
        let sql = match subject {
            RuleSubject::User => "SELECT 1 FROM users WHERE id = ?1",
            RuleSubject::Token => "SELECT 1 FROM tokens WHERE id = ?1 AND kind = 'pat' AND revoked_at IS NULL",
        };
        self.read_db(|c| Ok(c.query_opt(sql, args![subject_id], |r| r.get::<i64>(0))?.is_some()))
    }

    /// Adds a rule; false if it was already there.
    pub fn set_approval_rule(&self, subject: RuleSubject, subject_id: i64, set_by: &str, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "INSERT INTO approval_rules (subject, subject_id, set_by, set_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                args![subject.as_str(), subject_id, set_by, now],
            )? == 1)
        })
    }

    /// Removes a rule; false if there was none.
    pub fn clear_approval_rule(&self, subject: RuleSubject, subject_id: i64) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "DELETE FROM approval_rules WHERE subject = ?1 AND subject_id = ?2",
                args![subject.as_str(), subject_id],
            )? == 1)
        })
    }

    pub fn insert_held_call(&self, call: &HeldCall) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO held_calls (id, user_id, username, credential_kind, credential_id, tool, agent_id, args, asked_by, status, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                args![
                    &call.id,
                    call.user_id,
                    &call.username,
                    &call.credential_kind,
                    &call.credential_id,
                    &call.tool,
                    call.agent_id.as_str(),
                    call.args.to_string(),
                    &call.asked_by,
                    &call.status,
                    &call.created_at,
                    &call.expires_at
                ],
            )?;
            Ok(())
        })
    }

    pub fn held_call(&self, id: &str) -> Result<Option<HeldCall>> {
        self.read_db(|c| c.query_opt(&format!("{HELD_COLUMNS} WHERE id = ?1"), args![id], held_row))
    }

    /// Calls still waiting for a person (not past their deadline), oldest first.
    pub fn waiting_held_calls(&self, now: &str, limit: u32) -> Result<Vec<HeldCall>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{HELD_COLUMNS} WHERE status = 'held' AND expires_at > ?1 ORDER BY created_at, id LIMIT ?2"),
                args![now, i64::from(limit)],
                held_row,
            )
        })
    }

    /// The most recently held calls, whatever became of them, newest first.
    pub fn recent_held_calls(&self, limit: u32) -> Result<Vec<HeldCall>> {
        self.read_db(|c| {
            c.query_all(
                &format!("{HELD_COLUMNS} ORDER BY created_at DESC, id LIMIT ?1"),
                args![i64::from(limit)],
                held_row,
            )
        })
    }

    /// Claims a held call for running, only if it is still held and not past its
    /// deadline: of two approvals racing (elicitation and dashboard, two replicas),
    /// exactly one wins, so the call runs once.
    pub fn claim_held_call(&self, id: &str, decided_by: &str, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE held_calls SET status = 'running', decided_by = ?2, decided_at = ?3
                 WHERE id = ?1 AND status = 'held' AND expires_at > ?3",
                args![id, decided_by, now],
            )? == 1)
        })
    }

    /// Denies a held call, only if it is still held; `result` is what its caller reads.
    pub fn deny_held_call(&self, id: &str, decided_by: &str, result: &Value, now: &str) -> Result<bool> {
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE held_calls SET status = 'denied', decided_by = ?2, decided_at = ?3, result = ?4, is_error = ?5
                 WHERE id = ?1 AND status = 'held'",
                args![id, decided_by, now, result.to_string(), true],
            )? == 1)
        })
    }

    pub fn finish_held_call(&self, id: &str, result: &Value, is_error: bool) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "UPDATE held_calls SET status = 'done', result = ?2, is_error = ?3 WHERE id = ?1",
                args![id, result.to_string(), is_error],
            )?;
            Ok(())
        })
    }

    /// Held calls that were running when the server stopped (all of them at a single
    /// server's start; in a cluster those claimed before `before`, whose replica died):
    /// whether they ran on the PC is unknown, and their result says exactly that.
    /// Calls still held stay held.
    pub fn end_running_held_calls(&self, before: Option<&str>) -> Result<usize> {
        let text = "internal: the server running this approved call stopped; whether it ran on the PC is unknown. Check before asking again.";
        let result = serde_json::json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"error": {"code": "internal", "message": text}},
            "isError": true,
        });
        // Without `before`, a bound that every stored time passes.
        let before = before.unwrap_or("9999");
        self.write_db(|c| {
            Ok(c.execute(
                "UPDATE held_calls SET status = 'done', result = ?1, is_error = ?2
                 WHERE status = 'running' AND decided_at < ?3",
                args![result.to_string(), true, before],
            )? as usize)
        })
    }
}
