//! Approvals on the MCP path: an operator's rule that a user's (or one token's)
//! state-changing MCP calls wait for a person. A held call is frozen when it is held
//! (tool, arguments, the PC) and runs at most once, as its caller, when a person
//! approves it: through MCP elicitation by the caller's own client, or in the dashboard
//! by an operator. This module holds the rules of it (which calls wait, who may
//! decide, claiming a call so it runs once); `mcp` asks and runs, `api::approvals`
//! serves the dashboard's side.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::alerts::message::Message;
use crate::fleet::Fleet;
use crate::forward::CallFailure;
use crate::principal::{CredentialKind, Principal, Role};
use crate::store::{HeldCall, held_status};
use kenny_proto::AgentId;
use kenny_proto::error::ErrorCode;

/// How long a held call waits for a decision; after that it can no longer run.
pub(crate) const HOLD_FOR: Duration = Duration::from_secs(24 * 3600);
/// Most calls one user may have waiting at once: a held caller cannot bury the queue.
pub(crate) const MAX_WAITING_PER_USER: u64 = 20;

/// Whether `who`'s state-changing calls wait for approval: a rule on the caller's user
/// or on the personal access token it came with. `None` if none holds it, else whether
/// the caller's own MCP client may be asked. (Which calls change state is the caller's
/// to say: `mcp` asks only for those.)
pub(crate) async fn required(fleet: &Fleet, who: &Principal) -> Result<Option<bool>, CallFailure> {
    let token = match who.credential_kind {
        CredentialKind::Pat => who.credential_id.parse::<i64>().ok(),
        _ => None,
    };
    let user = who.user_id;
    fleet
        .store
        .blocking(move |s| s.approval_required(user, token))
        .await
        .map_err(|e| {
            CallFailure::new(
                ErrorCode::Internal,
                format!("could not read the approval rules, so the call was not run: {e}"),
            )
        })
}

/// A new approval id: unguessable, since it is the handle a client echoes back.
fn new_id() -> String {
    let mut bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    format!("apr_{}", hex::encode(bytes))
}

/// Holds `who`'s call of `tool` on `target` (arguments without `agent_id`), after the
/// checks it would meet if it ran now (reach, role, arguments; a server tool's
/// arguments are its caller's to check), so nobody is asked to approve a call that
/// could not run. The PC's enrolled key is frozen with it. Audited as `held`; a call to
/// be approved in the dashboard also notifies the alert channels.
pub(crate) async fn hold(
    fleet: &Fleet,
    who: &Principal,
    tool: &str,
    target: &AgentId,
    mut args: Map<String, Value>,
    by_elicitation: bool,
) -> Result<HeldCall, CallFailure> {
    if kenny_proto::catalog::find(tool).is_some() {
        fleet.forwarder.check_call(who, target, tool, &mut args)?;
    } else {
        fleet.forwarder.check_reach(who, target.as_str())?;
    }
    let now = fleet.clock.now_utc();
    let (user, at, agent) = (who.user_id, crate::clock::format(now), target.to_string());
    let (waiting, agent_key) = fleet
        .store
        .blocking(move |s| {
            let key = s.agent(&agent)?.and_then(|a| a.public_key);
            Ok((s.waiting_held_calls_of(user, &at)?, key))
        })
        .await
        .map_err(not_held)?;
    if waiting >= MAX_WAITING_PER_USER {
        return Err(CallFailure::refusal(
            ErrorCode::Denied,
            format!(
                "{} already has {waiting} calls waiting for approval, the most there may be; wait for them to be decided",
                who.username
            ),
        ));
    }
    let held = HeldCall {
        id: new_id(),
        user_id: who.user_id,
        username: who.username.clone(),
        credential_kind: who.credential_kind.as_str().to_owned(),
        credential_id: who.credential_id.clone(),
        tool: tool.to_owned(),
        agent_id: target.clone(),
        agent_key,
        args: Value::Object(args.clone()),
        asked_by: if by_elicitation { "elicitation" } else { "dashboard" }.to_owned(),
        status: held_status::HELD.to_owned(),
        created_at: crate::clock::format(now),
        expires_at: crate::clock::format(now + HOLD_FOR),
        decided_by: None,
        decided_at: None,
        result: None,
        is_error: false,
    };
    let row = held.clone();
    fleet
        .store
        .blocking(move |s| s.insert_held_call(&row))
        .await
        .map_err(not_held)?;
    fleet
        .forwarder
        .audit_held(who, target.as_str(), tool, &args, &held.id)
        .await;
    if !by_elicitation {
        notify(fleet, &held).await;
    }
    Ok(held)
}

fn not_held(e: crate::store::StoreError) -> CallFailure {
    CallFailure::new(
        ErrorCode::Internal,
        format!("could not hold the call for approval: {e}"),
    )
}

/// Tells every enabled alert channel that a call waits (tool, PC, who, the id; never
/// the arguments, which can hold secrets and leave the server here).
async fn notify(fleet: &Fleet, held: &HeldCall) {
    let message = Message {
        event: "approval".into(),
        title: format!("Approval needed: {} on {}", held.tool, held.agent_id),
        text: format!(
            "{} asked over MCP to run {} on {}. Approve or deny it on the dashboard's Approvals page (id {}); it expires at {}.",
            held.username, held.tool, held.agent_id, held.id, held.expires_at
        ),
        priority: 4,
        agent_id: Some(held.agent_id.to_string()),
        key: None,
        status: None,
        reason: None,
        attention: None,
        at: held.created_at.clone(),
    };
    let Ok(json) = serde_json::to_string(&message) else {
        return;
    };
    let now = fleet.clock.now();
    let queued = fleet
        .store
        .blocking(move |s| {
            let mut n = 0;
            for channel in s.channels()?.into_iter().filter(|c| c.enabled) {
                s.queue_delivery(channel.id, "approval", &json, &now)?;
                n += 1;
            }
            Ok(n)
        })
        .await;
    match queued {
        Ok(0) => {}
        Ok(_) => fleet.alerts.wake.notify_one(),
        Err(e) => tracing::warn!(error = %e, approval = %held.id, "could not queue the approval notification"),
    }
}

/// Whether `who` may approve or deny `held`: an operator or superuser who can reach its
/// PC, signed in to the dashboard. A bearer token never decides: the model holding
/// the caller's token must not be able to approve its own calls.
pub(crate) fn may_decide(who: &Principal, held: &HeldCall) -> Result<(), String> {
    signed_in(who)?;
    if who.role < Role::Operator {
        return Err(format!(
            "approving calls needs the operator role and {} is a {}",
            who.username,
            who.role.as_str()
        ));
    }
    if !who.may_reach(held.agent_id.as_str()) {
        return Err(format!("{} may not reach agent {}", who.username, held.agent_id));
    }
    Ok(())
}

/// Whether `who` decides as a person signed in to the dashboard, as every decision
/// must be made: a bearer token never decides.
pub(crate) fn signed_in(who: &Principal) -> Result<(), String> {
    if who.credential_kind == CredentialKind::Session {
        return Ok(());
    }
    Err("approvals are given in the dashboard, signed in; a token cannot approve or deny a held call".into())
}

/// Whether `who` may read `held`: its caller (any credential of theirs), or, signed in
/// to the dashboard, an operator who may decide it. An operator's token does not read
/// other people's held calls.
pub(crate) fn may_read(who: &Principal, held: &HeldCall) -> bool {
    held.user_id == who.user_id || may_decide(who, held).is_ok()
}

/// Whether `who` is the credential that asked for `held` (an MCP retry carrying its
/// approval id must come from it): the same token, or for OAuth the same user's app
/// (its access token may have been refreshed since).
pub(crate) fn is_caller(who: &Principal, held: &HeldCall) -> bool {
    held.user_id == who.user_id
        && held.credential_kind == who.credential_kind.as_str()
        && (who.credential_kind == CredentialKind::OAuth || held.credential_id == who.credential_id)
}

/// The caller of `held` as it stands now, if its call may still run: the credential
/// still valid (not revoked, the user not disabled or deleted) and the PC still the one
/// enrolled when the call was held.
pub(crate) async fn caller(fleet: &Fleet, held: &HeldCall) -> Result<Principal, CallFailure> {
    let kind = match held.credential_kind.as_str() {
        "pat" => CredentialKind::Pat,
        "oauth" => CredentialKind::OAuth,
        _ => CredentialKind::Session,
    };
    let (id, agent) = (held.credential_id.clone(), held.agent_id.to_string());
    let (found, agent) = fleet
        .store
        .blocking(move |s| Ok((s.principal_for_credential(kind, &id)?, s.agent(&agent)?)))
        .await
        .map_err(|e| CallFailure::new(ErrorCode::Internal, format!("could not look up the caller: {e}")))?;
    if agent.as_ref().and_then(|a| a.public_key.as_ref()) != held.agent_key.as_ref() {
        return Err(CallFailure::refusal(
            ErrorCode::Denied,
            format!(
                "agent {} was enrolled anew (or removed) since the call was held, so it may be another machine; nothing ran",
                held.agent_id
            ),
        ));
    }
    found.filter(|p| p.user_id == held.user_id).ok_or_else(|| {
        CallFailure::refusal(
            ErrorCode::Forbidden,
            format!(
                "the credential {} used to ask for this call is no longer valid (revoked, or the user disabled), so it did not run",
                held.username
            ),
        )
    })
}

pub(crate) async fn load(fleet: &Fleet, id: &str) -> Result<Option<HeldCall>, CallFailure> {
    if !plausible_id(id) {
        return Ok(None);
    }
    let id = id.to_owned();
    fleet
        .store
        .blocking(move |s| s.held_call(&id))
        .await
        .map_err(|e| CallFailure::new(ErrorCode::Internal, format!("could not read the held call: {e}")))
}

/// An id this server could have made (`apr_` and 32 hex digits); anything else is not
/// looked up.
pub(crate) fn plausible_id(id: &str) -> bool {
    id.strip_prefix("apr_")
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Claims `held` for running; false if someone else decided first or it expired.
pub(crate) async fn claim(fleet: &Fleet, id: &str, decided_by: &str) -> Result<bool, CallFailure> {
    let (id, by, now) = (id.to_owned(), decided_by.to_owned(), fleet.clock.now());
    fleet
        .store
        .blocking(move |s| s.claim_held_call(&id, &by, &now))
        .await
        .map_err(|e| CallFailure::new(ErrorCode::Internal, format!("could not record the approval: {e}")))
}

/// Denies `held`; false if it was no longer held. `result` is what its caller reads.
pub(crate) async fn deny(fleet: &Fleet, id: &str, decided_by: &str, result: Value) -> Result<bool, CallFailure> {
    let (id, by, now) = (id.to_owned(), decided_by.to_owned(), fleet.clock.now());
    fleet
        .store
        .blocking(move |s| s.deny_held_call(&id, &by, &result, &now))
        .await
        .map_err(|e| CallFailure::new(ErrorCode::Internal, format!("could not record the denial: {e}")))
}

/// Keeps the result of a held call that ran.
pub(crate) async fn finish(fleet: &Fleet, id: &str, result: Value, is_error: bool) {
    let key = id.to_owned();
    if let Err(e) = fleet
        .store
        .blocking(move |s| s.finish_held_call(&key, &result, is_error))
        .await
    {
        tracing::warn!(error = %e, approval = id, "could not store a held call's result");
    }
}

/// What a held call's caller and the dashboard read about it.
pub(crate) fn shown(held: &HeldCall, now: &str) -> Value {
    json!({
        "approval_id": held.id,
        "status": held.status_at(now),
        "tool": held.tool,
        "agent_id": held.agent_id,
        "args": shown_args(held),
        "caller": held.username,
        "asked_by": held.asked_by,
        "created_at": held.created_at,
        "expires_at": held.expires_at,
        "decided_by": held.decided_by,
        "decided_at": held.decided_at,
        "result": held.result,
    })
}

/// A held call's arguments as people see them: secrets replaced.
pub(crate) fn shown_args(held: &HeldCall) -> Value {
    match &held.args {
        Value::Object(args) => Value::Object(kenny_proto::args::without_secrets(args)),
        other => other.clone(),
    }
}

/// A JSON value as a person reads it (an elicitation's question, the dashboard): pretty, with every character that
/// could hide or reorder text (controls, bidirectional and other format characters)
/// written as its `\u{..}` escape.
pub(crate) fn readable(value: &Value) -> String {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
    let mut out = String::with_capacity(pretty.len());
    for c in pretty.chars() {
        let hidden = (c.is_control() && c != '\n')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}');
        if hidden {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// The result a denied call's caller reads.
pub(crate) fn denied(held: &HeldCall, by: &str) -> CallFailure {
    CallFailure::refusal(
        ErrorCode::Denied,
        format!(
            "{by} denied {} on {} (approval {}); nothing ran on the PC",
            held.tool, held.agent_id, held.id
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(agent: &str) -> HeldCall {
        HeldCall {
            id: new_id(),
            user_id: 7,
            username: "kim".into(),
            credential_kind: "pat".into(),
            credential_id: "3".into(),
            tool: "shell_exec".into(),
            agent_id: AgentId::parse(agent).unwrap(),
            agent_key: None,
            args: json!({"command": "true"}),
            asked_by: "dashboard".into(),
            status: held_status::HELD.into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            expires_at: "2026-01-02T00:00:00Z".into(),
            decided_by: None,
            decided_at: None,
            result: None,
            is_error: false,
        }
    }

    fn who(role: Role, kind: CredentialKind, hosts: Option<Vec<&str>>) -> Principal {
        Principal {
            user_id: 1,
            username: "ann".into(),
            role,
            hosts: hosts.map(|h| h.into_iter().map(|a| AgentId::parse(a).unwrap()).collect()),
            credential_kind: kind,
            credential_id: "9".into(),
            client_addr: None,
        }
    }

    #[test]
    fn only_a_signed_in_operator_reaching_the_pc_decides() {
        let call = held("pc-a");
        assert!(may_decide(&who(Role::Operator, CredentialKind::Session, None), &call).is_ok());
        let token = may_decide(&who(Role::Superuser, CredentialKind::Pat, None), &call).unwrap_err();
        assert!(token.contains("token cannot approve"), "{token}");
        let oauth = may_decide(&who(Role::Superuser, CredentialKind::OAuth, None), &call);
        assert!(oauth.is_err());
        let user = may_decide(&who(Role::User, CredentialKind::Session, Some(vec!["pc-a"])), &call).unwrap_err();
        assert!(user.contains("operator role"), "{user}");
    }

    #[test]
    fn a_held_call_past_its_deadline_reads_expired() {
        let call = held("pc-a");
        assert_eq!(call.status_at("2026-01-01T12:00:00Z"), held_status::HELD);
        assert_eq!(call.status_at("2026-01-02T00:00:00Z"), held_status::EXPIRED);
    }

    #[test]
    fn only_ids_this_server_makes_are_looked_up() {
        assert!(plausible_id(&new_id()));
        for bad in ["", "apr_", "apr_xyz", "../etc", &format!("apr_{}", "0".repeat(33))] {
            assert!(!plausible_id(bad), "{bad}");
        }
    }
}
