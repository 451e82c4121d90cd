//! A state-changing MCP call under an approval rule (`crate::approvals`). Held on the
//! PC it names, then asked about:
//!
//! - A client of protocol 2026-07-28 or later that declares form elicitation gets an
//!   `input_required` result carrying one elicitation (tool, arguments, the frozen PC)
//!   and the approval id as `requestState`; its retry with the person's answer runs
//!   the held call once (accept) or nothing (decline, cancel). `requestState` is only
//!   a handle: the call itself is the stored one, never the retry's.
//! - Any other client gets an `awaiting_approval` tool error naming the approval id;
//!   an operator approves or denies it in the dashboard, and `approval_status` tells
//!   the caller where it stands (and its result, once it ran).

use rmcp::model::{CallToolResponse, CallToolResult, InputRequest, InputRequiredResult, InputResponses, MetaObject};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

use super::results;
use super::target::take_target;
use crate::approvals;
use crate::fleet::Fleet;
use crate::forward::CallFailure;
use crate::principal::Principal;
use crate::server_tools;
use crate::store::{HeldCall, held_status};
use kenny_proto::error::ErrorCode;

/// The key of the one elicitation in an `input_required` result.
const ASK: &str = "approval";
/// Where a held result says which approval it waits on.
const APPROVAL_META_KEY: &str = "kenny/approval";
/// The longest rendering of a call's arguments an elicitation shows.
const MAX_SHOWN_ARGS: usize = 2000;

/// Whether `tool` changes something (a PC, or the server's state about one): the calls
/// an approval rule holds. Reads never wait.
pub(super) fn changes_state(tool: &str) -> bool {
    if let Some(spec) = kenny_proto::catalog::find(tool) {
        return !spec.read_only();
    }
    server_tools::find(tool).is_some_and(|t| !t.read_only)
}

/// Whether the caller's client can be asked by MCP elicitation on this request.
pub(super) fn can_elicit(context: &RequestContext<RoleServer>) -> bool {
    let modern = context.protocol_version().is_some_and(|v| !v.has_initialize());
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // A declaration naming no mode is the original form mode.
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    modern && form
}

/// A first call under a rule: checked, held on its PC, then asked about.
pub(super) async fn hold(
    fleet: &Fleet,
    who: &Principal,
    name: &str,
    mut args: Map<String, Value>,
    elicit: bool,
) -> CallToolResponse {
    let target = match take_target(&mut args) {
        Ok(t) => t,
        Err(failure) => return refused(fleet, who, None, name, &args, failure).await,
    };
    if let Err(failure) = server_tools::check_args(name, target.as_str(), &args) {
        return refused(fleet, who, Some(target.to_string()), name, &args, failure).await;
    }
    // A question too long to read whole is not asked: the call waits for the dashboard.
    let elicit = elicit
        && approvals::readable(&Value::Object(kenny_proto::args::without_secrets(&args))).len() <= MAX_SHOWN_ARGS;
    let held = match approvals::hold(fleet, who, name, &target, args.clone(), elicit).await {
        Ok(h) => h,
        Err(failure) => return refused(fleet, who, Some(target.to_string()), name, &args, failure).await,
    };
    if elicit {
        ask(fleet, &held).into()
    } else {
        waiting(&held).into()
    }
}

/// A retry carrying an approval id as `requestState`: the answer to our elicitation.
pub(super) async fn answer(
    fleet: &Fleet,
    who: &Principal,
    name: &str,
    args: Map<String, Value>,
    id: &str,
    responses: Option<InputResponses>,
) -> CallToolResponse {
    let held = match approvals::load(fleet, id).await {
        Ok(Some(h)) if approvals::is_caller(who, &h) => h,
        Ok(_) => {
            let failure = CallFailure::refusal(
                ErrorCode::NotFound,
                "the requestState names no call this credential holds; call the tool again without it",
            );
            return refused(fleet, who, None, name, &args, failure).await;
        }
        Err(f) => return results::failure(&f).into(),
    };
    if let Err(failure) = same_call(&held, name, args.clone()) {
        return refused(fleet, who, Some(held.agent_id.to_string()), name, &args, failure).await;
    }
    let now = fleet.clock.now();
    match held.status_at(&now) {
        held_status::HELD => {}
        held_status::EXPIRED => {
            return results::failure(&CallFailure::refusal(
                ErrorCode::Denied,
                format!(
                    "approval {} expired at {} undecided; nothing ran. Call the tool again to ask anew.",
                    held.id, held.expires_at
                ),
            ))
            .into();
        }
        _ => return decided(&held).into(),
    }
    let action = responses
        .as_ref()
        .and_then(|r| r.get(ASK))
        .and_then(|answer| answer.get("action"))
        .and_then(Value::as_str);
    match action {
        // Only a call that was put to the caller's client may be accepted by it: one
        // waiting for the dashboard is an operator's to decide, whatever a client sends.
        Some("accept") if held.asked_by != "elicitation" => {
            let failure = CallFailure::refusal(
                ErrorCode::AwaitingApproval,
                format!(
                    "approval {} waits for an operator in the dashboard; the caller cannot accept it. approval_status shows where it stands.",
                    held.id
                ),
            );
            refused(fleet, who, Some(held.agent_id.to_string()), name, &args, failure).await
        }
        Some("accept") => {
            let by = format!("{} (MCP elicitation)", who.username);
            match approvals::claim(fleet, &held.id, &by).await {
                Ok(true) => {
                    fleet
                        .forwarder
                        .audit_decision(who, held.agent_id.as_str(), "accept", &held.id)
                        .await;
                    run(fleet, &held).await.into()
                }
                // Decided elsewhere (the dashboard) in the meantime: report that.
                Ok(false) => match approvals::load(fleet, &held.id).await {
                    Ok(Some(now_held)) => decided(&now_held).into(),
                    _ => results::failure(&CallFailure::new(ErrorCode::Internal, "the held call vanished")).into(),
                },
                Err(f) => results::failure(&f).into(),
            }
        }
        Some(other @ ("decline" | "cancel")) => {
            let by = format!("{} (MCP elicitation: {other})", who.username);
            let failure = approvals::denied(&held, &by);
            match approvals::deny(fleet, &held.id, &by, failure_result(&failure)).await {
                Ok(true) => {
                    fleet
                        .forwarder
                        .audit_decision(who, held.agent_id.as_str(), "decline", &held.id)
                        .await;
                    results::failure(&failure).into()
                }
                Ok(false) => match approvals::load(fleet, &held.id).await {
                    Ok(Some(now_held)) => decided(&now_held).into(),
                    _ => results::failure(&CallFailure::new(ErrorCode::Internal, "the held call vanished")).into(),
                },
                Err(f) => results::failure(&f).into(),
            }
        }
        // No answer (or one we cannot read): ask again, about the same held call, if it
        // was put to this client at all.
        _ if held.asked_by == "elicitation" => ask(fleet, &held).into(),
        _ => waiting(&held).into(),
    }
}

/// Runs an approved (claimed) call as its caller, on its frozen PC, keeps its result
/// and returns it. The caller's credential must still be valid.
pub(crate) async fn run(fleet: &Fleet, held: &HeldCall) -> CallToolResult {
    let result = match approvals::caller(fleet, held).await {
        Ok(who) => {
            let mut args = held.args.as_object().cloned().unwrap_or_default();
            if server_tools::find(&held.tool).is_some() {
                args.insert(
                    kenny_proto::catalog::AGENT_ID_ARG.into(),
                    Value::String(held.agent_id.to_string()),
                );
                match server_tools::call(fleet, &who, &held.tool, args).await {
                    Some(outcome) => results::outcome(outcome),
                    None => results::failure(&CallFailure::new(ErrorCode::Internal, "the held tool is unknown")),
                }
            } else {
                let forwarded = fleet
                    .forwarder
                    .forward_proved(&who, &held.agent_id, &held.tool, args)
                    .await;
                results::proved(forwarded, held.agent_id.as_str())
            }
        }
        Err(failure) => results::failure(&failure),
    };
    let mut result = result;
    tag(&mut result, held, held_status::DONE);
    let stored = serde_json::to_value(&result).unwrap_or(Value::Null);
    approvals::finish(fleet, &held.id, stored, result.is_error == Some(true)).await;
    result
}

/// A failure as the stored MCP result of a held call that will never run.
pub(crate) fn failure_result(failure: &CallFailure) -> Value {
    serde_json::to_value(results::failure(failure)).unwrap_or(Value::Null)
}

/// Runs a call an operator approved in the dashboard and keeps its result.
pub(crate) async fn run_approved(fleet: Fleet, held: HeldCall) {
    let _ = run(&fleet, &held).await;
}

/// The retry must be the call that was held: same tool, same PC, same arguments.
/// The retry's arguments are read as the held ones were (normalized like a forwarded
/// call's), and secrets are left out of the comparison: a decided call no longer
/// keeps its password, and what runs is always the stored call, never the retry's.
fn same_call(held: &HeldCall, name: &str, mut args: Map<String, Value>) -> Result<(), CallFailure> {
    let target = take_target(&mut args).ok();
    if let Some(spec) = kenny_proto::catalog::find(name) {
        // A retry whose arguments do not normalize is not the held call either.
        let _ = spec.normalize_args(&mut args);
    }
    let stored = held.args.as_object().cloned().unwrap_or_default();
    let without_secrets = kenny_proto::args::without_secrets;
    let same = name == held.tool
        && target.as_ref() == Some(&held.agent_id)
        && without_secrets(&args) == without_secrets(&stored);
    if same {
        return Ok(());
    }
    Err(CallFailure::refusal(
        ErrorCode::BadArgs,
        format!(
            "approval {} is for {} on {} with the arguments it was held with; this retry asks for something else, and nothing ran",
            held.id, held.tool, held.agent_id
        ),
    ))
}

/// The `input_required` result asking the caller's client about `held`.
fn ask(fleet: &Fleet, held: &HeldCall) -> InputRequiredResult {
    let hostname = fleet
        .registry
        .online_meta(held.agent_id.as_str())
        .flatten()
        .map(|m| m.hostname);
    // The host name is the PC's own word: quoted, its control characters escaped.
    let pc = match hostname {
        Some(h) => format!(
            "{} (host name {})",
            held.agent_id,
            approvals::readable(&Value::String(h))
        ),
        None => held.agent_id.to_string(),
    };
    let shown = approvals::readable(&approvals::shown_args(held));
    let message = format!(
        "kenny: approve {tool} on {pc}?\n\nAn operator requires approval for {user}'s calls that change a PC. \
If you accept, this call runs once, on {agent} only, with these arguments:\n\n{shown}\n\n\
Approval {id}; it expires at {expires}. Decline to run nothing.",
        tool = held.tool,
        user = held.username,
        agent = held.agent_id,
        id = held.id,
        expires = held.expires_at,
    );
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {}},
        },
    });
    let mut requests = std::collections::BTreeMap::new();
    if let Ok(request) = serde_json::from_value::<InputRequest>(request) {
        requests.insert(ASK.to_owned(), request);
    }
    InputRequiredResult::new(Some(requests), Some(held.id.clone())).with_meta(MetaObject(meta(held, held_status::HELD)))
}

/// The tool error a client that cannot be asked gets: held, with its id.
fn waiting(held: &HeldCall) -> CallToolResult {
    let failure = CallFailure::refusal(
        ErrorCode::AwaitingApproval,
        format!(
            "{tool} on {agent} is held for approval {id}: an operator requires approval for {user}'s calls that change a PC. \
Nothing has run. A person approves or denies it on the dashboard's Approvals page; it then runs once, on {agent} only. \
Call approval_status with approval_id {id} to see where it stands and, once it ran, its result. It expires at {expires}.",
            tool = held.tool,
            agent = held.agent_id,
            id = held.id,
            user = held.username,
            expires = held.expires_at,
        ),
    );
    let mut result = results::failure(&failure);
    tag(&mut result, held, held_status::HELD);
    result
}

/// What a retry of an already decided call gets: its stored result, or why there is none.
fn decided(held: &HeldCall) -> CallToolResult {
    if held.status == held_status::RUNNING {
        let mut result = results::failure(&CallFailure::refusal(
            ErrorCode::AwaitingApproval,
            format!(
                "approval {} was approved by {} and the call is running on {}; approval_status shows its result when it ends",
                held.id,
                held.decided_by.as_deref().unwrap_or("someone"),
                held.agent_id
            ),
        ));
        tag(&mut result, held, held_status::RUNNING);
        return result;
    }
    match held.result.clone().map(serde_json::from_value::<CallToolResult>) {
        Some(Ok(result)) => result,
        _ => results::failure(&CallFailure::new(
            ErrorCode::Internal,
            format!("approval {} was {} but its result does not read", held.id, held.status),
        )),
    }
}

fn meta(held: &HeldCall, status: &str) -> serde_json::Map<String, Value> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        APPROVAL_META_KEY.into(),
        json!({"approval_id": held.id, "status": status, "agent_id": held.agent_id, "tool": held.tool}),
    );
    meta
}

/// Marks a result with the approval it belongs to, beside any proof it carries.
fn tag(result: &mut CallToolResult, held: &HeldCall, status: &str) {
    let mut all = result.meta.take().map(|m| m.0).unwrap_or_default();
    all.extend(meta(held, status));
    result.meta = Some(MetaObject(all));
}

async fn refused(
    fleet: &Fleet,
    who: &Principal,
    agent: Option<String>,
    name: &str,
    args: &Map<String, Value>,
    failure: CallFailure,
) -> CallToolResponse {
    fleet.forwarder.audit_refusal(who, agent, name, args, &failure).await;
    fleet.metrics.call(name, "refused", std::time::Duration::ZERO);
    results::failure(&failure).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_never_wait() {
        assert!(changes_state("shell_exec"));
        assert!(changes_state("webfilter_set"));
        assert!(!changes_state("telemetry_collect"));
        assert!(!changes_state("list_agents"));
        assert!(!changes_state("fleet_run"));
        assert!(!changes_state("approval_status"));
        assert!(!changes_state("no_such_tool"));
    }

    #[test]
    fn every_server_tool_that_changes_state_has_its_arguments_checked_before_it_is_held() {
        for tool in server_tools::TOOLS.iter().filter(|t| !t.read_only) {
            let mut unknown = Map::new();
            unknown.insert("no_such_argument".into(), json!(1));
            let refused = server_tools::check_args(tool.name, "pc-a", &unknown);
            assert!(refused.is_err(), "{} is held with its arguments unchecked", tool.name);
        }
    }
}
