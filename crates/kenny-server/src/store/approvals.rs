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

/// What setting a rule did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleChange {
    Added,
    Changed,
    Unchanged,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRule {
    pub subject: RuleSubject,
    pub subject_id: i64,
    /// The user's name, or the token's owner and label, for people reading the list.
    pub name: String,
    /// The user the rule holds (the token's owner for a token rule).
    pub user_id: i64,
    /// Whether the caller's own MCP client may be asked (elicitation); if not, only an
    /// operator in the dashboard decides.
    pub elicitation: bool,
    pub set_by: String,
    pub set_at: String,
}

/// How long a held call's record stays after it was held (the audit trail keeps its
/// rows, by their own retention).
pub const HELD_CALLS_KEPT: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

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
    /// That PC's enrolled key when the call was held: a PC enrolled anew since (another
    /// machine under the same id) does not get the call.
    pub agent_key: Option<String>,
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

const HELD_COLUMNS: &str = "SELECT id, user_id, username, credential_kind, credential_id, tool, agent_id, agent_key, args, asked_by, status, created_at, expires_at, decided_by, decided_at, result, is_error FROM held_calls";

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
        agent_key: r.get(7)?,
        args: json(r.get(8)?),
        asked_by: r.get(9)?,
        status: r.get(10)?,
        created_at: r.get(11)?,
        expires_at: r.get(12)?,
        decided_by: r.get(13)?,
        decided_at: r.get(14)?,
        result: r.get::<Option<String>>(15)?.map(json),
        is_error: r.get(16)?,
    })
}

impl Store {
    /// Whether a state-changing MCP call by `user_id` (through the personal access
    /// token `token_id`, if it came with one) waits for approval: `None` if no rule
    /// holds it, else whether the caller's own client may be asked (only if every rule
    /// that holds it allows that).
    pub fn approval_required(&self, user_id: i64, token_id: Option<i64>) -> Result<Option<bool>> {
        self.read_db(|c| {
            let rules: Vec<bool> = c.query_all(
                "SELECT elicitation FROM approval_rules WHERE user_id = ?1 OR token_id = ?2",
                args![user_id, token_id.unwrap_or(-1)],
                |r| r.get(0),
            )?;
            Ok((!rules.is_empty()).then(|| rules.iter().all(|allowed| *allowed)))
        })
    }

    pub fn approval_rules(&self) -> Result<Vec<ApprovalRule>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT CASE WHEN r.user_id IS NULL THEN 'token' ELSE 'user' END, COALESCE(r.user_id, r.token_id),
                        COALESCE(u.username, tu.username || ' / ' || COALESCE(t.label, 'token ' || t.id)),
                        COALESCE(u.id, tu.id), r.elicitation, r.set_by, r.set_at
                 FROM approval_rules r
                 LEFT JOIN users u ON u.id = r.user_id
                 LEFT JOIN tokens t ON t.id = r.token_id
                 LEFT JOIN users tu ON tu.id = t.user_id
                 ORDER BY r.id",
                args![],
                |r| {
                    let subject: String = r.get(0)?;
                    Ok(ApprovalRule {
                        subject: RuleSubject::parse(&subject).unwrap_or(RuleSubject::User),
                        subject_id: r.get(1)?,
                        name: r.get(2)?,
                        user_id: r.get(3)?,
                        elicitation: r.get(4)?,
                        set_by: r.get(5)?,
                        set_at: r.get(6)?,
                    })
                },
            )
        })
    }

    /// The user a rule's subject stands for: the user, or a live personal access
    /// token's owner; `None` if there is no such user or live token.
    pub fn approval_subject_user(&self, subject: RuleSubject, subject_id: i64) -> Result<Option<i64>> {
        let sql = match subject {
            RuleSubject::User => "SELECT id FROM users WHERE id = ?1",
            RuleSubject::Token => "SELECT user_id FROM tokens WHERE id = ?1 AND kind = 'pat' AND revoked_at IS NULL",
        };
        self.read_db(|c| c.query_opt(sql, args![subject_id], |r| r.get::<i64>(0)))
    }

    /// Adds a rule, or changes whether it allows elicitation.
    pub fn set_approval_rule(
        &self,
        subject: RuleSubject,
        subject_id: i64,
        elicitation: bool,
        set_by: &str,
        now: &str,
    ) -> Result<RuleChange> {
        let column = subject_column(subject);
        self.write_db(|c| {
            c.in_tx(|tx| {
                let current: Option<bool> = tx.query_opt(
                    &format!("SELECT elicitation FROM approval_rules WHERE {column} = ?1"),
                    args![subject_id],
                    |r| r.get(0),
                )?;
                let (sql, change) = match current {
                    Some(e) if e == elicitation => return Ok(RuleChange::Unchanged),
                    Some(_) => (
                        format!(
                            "UPDATE approval_rules SET elicitation = ?2, set_by = ?3, set_at = ?4 WHERE {column} = ?1"
                        ),
                        RuleChange::Changed,
                    ),
                    None => (
                        format!(
                            "INSERT INTO approval_rules ({column}, elicitation, set_by, set_at) VALUES (?1, ?2, ?3, ?4)"
                        ),
                        RuleChange::Added,
                    ),
                };
                tx.execute(&sql, args![subject_id, elicitation, set_by, now])?;
                Ok(change)
            })
        })
    }

    /// Removes a rule; false if there was none.
    pub fn clear_approval_rule(&self, subject: RuleSubject, subject_id: i64) -> Result<bool> {
        let column = subject_column(subject);
        self.write_db(|c| {
            Ok(c.execute(
                &format!("DELETE FROM approval_rules WHERE {column} = ?1"),
                args![subject_id],
            )? == 1)
        })
    }

    /// How many of `user_id`'s calls wait for a decision now.
    pub fn waiting_held_calls_of(&self, user_id: i64, now: &str) -> Result<u64> {
        self.read_db(|c| {
            let n: i64 = c.query_one(
                "SELECT COUNT(*) FROM held_calls WHERE user_id = ?1 AND status = 'held' AND expires_at > ?2",
                args![user_id, now],
                |r| r.get(0),
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    pub fn insert_held_call(&self, call: &HeldCall) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO held_calls (id, user_id, username, credential_kind, credential_id, tool, agent_id, agent_key, args, asked_by, status, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                args![
                    &call.id,
                    call.user_id,
                    &call.username,
                    &call.credential_kind,
                    &call.credential_id,
                    &call.tool,
                    call.agent_id.as_str(),
                    call.agent_key.as_deref(),
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

    /// Denies a held call, only if it is still held and not past its deadline;
    /// `result` is what its caller reads. Its secret arguments go with the decision.
    pub fn deny_held_call(&self, id: &str, decided_by: &str, result: &Value, now: &str) -> Result<bool> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let denied = tx.execute(
                    "UPDATE held_calls SET status = 'denied', decided_by = ?2, decided_at = ?3, result = ?4, is_error = ?5
                     WHERE id = ?1 AND status = 'held' AND expires_at > ?3",
                    args![id, decided_by, now, result.to_string(), true],
                )? == 1;
                if denied {
                    forget_secrets(tx, id)?;
                }
                Ok(denied)
            })
        })
    }

    /// Keeps the result of a held call that ran, and forgets its secret arguments.
    pub fn finish_held_call(&self, id: &str, result: &Value, is_error: bool) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                tx.execute(
                    "UPDATE held_calls SET status = 'done', result = ?2, is_error = ?3 WHERE id = ?1",
                    args![id, result.to_string(), is_error],
                )?;
                forget_secrets(tx, id).map(drop)
            })
        })
    }

    /// Housekeeping for held calls: the secret arguments of calls that expired
    /// undecided are forgotten, and calls held before `drop_before` are deleted (the
    /// audit trail keeps their record). Returns (forgotten, deleted).
    pub fn prune_held_calls(&self, now: &str, drop_before: &str) -> Result<(usize, usize)> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let expired: Vec<String> = tx.query_all(
                    "SELECT id FROM held_calls WHERE status = 'held' AND expires_at <= ?1",
                    args![now],
                    |r| r.get(0),
                )?;
                let mut forgotten = 0;
                for id in &expired {
                    forgotten += usize::from(forget_secrets(tx, id)?);
                }
                let deleted = tx.execute("DELETE FROM held_calls WHERE created_at < ?1", args![drop_before])?;
                Ok((forgotten, deleted as usize))
            })
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

fn subject_column(subject: RuleSubject) -> &'static str {
    match subject {
        RuleSubject::User => "user_id",
        RuleSubject::Token => "token_id",
    }
}

/// Replaces a held call's secret arguments with a placeholder once it no longer needs
/// them; true if there was one to replace.
fn forget_secrets(c: &super::db::Conn, id: &str) -> Result<bool> {
    let Some(text) = c.query_opt("SELECT args FROM held_calls WHERE id = ?1", args![id], |r| {
        r.get::<String>(0)
    })?
    else {
        return Ok(false);
    };
    let Ok(Value::Object(args)) = serde_json::from_str::<Value>(&text) else {
        return Ok(false);
    };
    let kept = kenny_proto::args::without_secrets(&args);
    if kept == args {
        return Ok(false);
    }
    c.execute(
        "UPDATE held_calls SET args = ?2 WHERE id = ?1",
        args![id, Value::Object(kept).to_string()],
    )?;
    Ok(true)
}
