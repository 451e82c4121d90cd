//! Where a forwarded call's target comes from: the call's own `agent_id` argument, read
//! here, at the MCP edge, and nowhere else. Dashboard routes and the chat hold a typed
//! [`AgentId`] already and pass it to the forwarder directly.

use kenny_proto::AgentId;
use kenny_proto::catalog::AGENT_ID_ARG;
use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value};

use crate::forward::CallFailure;

/// Takes the routing argument out of `args`. Missing, non-string or blank is
/// `no_agent`: there is no fallback target.
pub(super) fn take_target(args: &mut Map<String, Value>) -> Result<AgentId, CallFailure> {
    match args.remove(AGENT_ID_ARG) {
        Some(Value::String(id)) if id.trim().is_empty() => Err(CallFailure::refusal(
            ErrorCode::NoAgent,
            "agent_id is blank; pass the id of the PC to run on (see list_agents)",
        )),
        Some(Value::String(id)) => AgentId::try_from(id)
            .map_err(|e| CallFailure::refusal(ErrorCode::UnknownAgent, format!("{e}; list_agents shows them"))),
        Some(_) => Err(CallFailure::refusal(
            ErrorCode::NoAgent,
            "agent_id must be a string naming the PC to run on (see list_agents)",
        )),
        None => Err(CallFailure::refusal(
            ErrorCode::NoAgent,
            "agent_id is required on every call; pass the id of the PC to run on (see list_agents). Nothing is remembered between calls.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target_of(v: Value) -> Result<String, String> {
        let mut args = v.as_object().unwrap().clone();
        let t = take_target(&mut args).map(AgentId::into_string).map_err(|e| e.code);
        assert!(!args.contains_key(AGENT_ID_ARG), "agent_id must always be consumed");
        t
    }

    #[test]
    fn target_comes_only_from_the_call() {
        assert_eq!(
            target_of(json!({"agent_id": "pc-a", "command": "x"})),
            Ok("pc-a".into())
        );
        assert_eq!(target_of(json!({"command": "x"})), Err("no_agent".into()));
        assert_eq!(target_of(json!({"agent_id": ""})), Err("no_agent".into()));
        assert_eq!(target_of(json!({"agent_id": " \t "})), Err("no_agent".into()));
        assert_eq!(target_of(json!({"agent_id": 7})), Err("no_agent".into()));
        assert_eq!(target_of(json!({"agent_id": null})), Err("no_agent".into()));
        assert_eq!(
            target_of(json!({"agent_id": "x".repeat(65)})),
            Err("unknown_agent".into())
        );
        assert_eq!(target_of(json!({"agent_id": "../pc"})), Err("unknown_agent".into()));
    }
}
