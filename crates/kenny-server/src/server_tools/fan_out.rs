//! `fleet_run`: one read-only tool on an explicit list of PCs. Each PC's call goes
//! through the forwarder on its own (scope, arguments, audit row, signature), a few at
//! a time, under one deadline for the whole run; the answer lists every PC with its
//! result or its error. There is no "all" and no selection by the server: the caller
//! names every PC, and a tool that changes a PC cannot be fanned out.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kenny_proto::AgentId;
use kenny_proto::catalog;
use kenny_proto::error::ErrorCode;
use kenny_proto::server_args::{FLEET_RUN_DEADLINE_DEFAULT, FleetRunArgs};
use serde_json::{Value, json};

use crate::forward::{CallFailure, Forwarded, Provenance};
use crate::principal::Principal;
use crate::state::Fleet;

/// PCs called at once: enough to finish 100 quick calls in a few seconds, few enough
/// that a run does not crowd out everyone else's calls.
const AT_ONCE: usize = 16;
/// Tools whose answers are too big to gather from many PCs into one result.
const NOT_FANNED_OUT: &[&str] = &["screen_capture"];

pub(super) async fn fleet_run(fleet: &Fleet, who: &Principal, args: FleetRunArgs) -> Result<Value, CallFailure> {
    let max = fleet.fleet_run_max;
    if args.agent_ids.len() > max {
        return Err(CallFailure::refusal(
            ErrorCode::BadArgs,
            format!(
                "fleet_run takes at most {max} PCs at once (this server's --fleet-run-max), not {}; split the list",
                args.agent_ids.len()
            ),
        ));
    }
    let Some(spec) = catalog::find(&args.tool) else {
        return Err(CallFailure::refusal(
            ErrorCode::Unsupported,
            format!("there is no forwarded tool {:?}; tools/list shows them", args.tool),
        ));
    };
    if !spec.read_only() {
        return Err(CallFailure::refusal(
            ErrorCode::BadArgs,
            format!(
                "{} changes the PC, and only read-only tools can be fanned out; call it on each PC on its own",
                args.tool
            ),
        ));
    }
    if NOT_FANNED_OUT.contains(&args.tool.as_str()) {
        return Err(CallFailure::refusal(
            ErrorCode::Unsupported,
            format!(
                "{} answers with a picture, too big to gather from many PCs; call it on each PC",
                args.tool
            ),
        ));
    }
    let targets: Vec<AgentId> = args
        .agent_ids
        .iter()
        .map(|id| AgentId::parse(id))
        .collect::<Result<_, _>>()
        .map_err(|e| CallFailure::refusal(ErrorCode::BadArgs, format!("agent_ids: {e}")))?;
    let limit = Duration::from_secs(u64::from(args.deadline_s.unwrap_or(FLEET_RUN_DEADLINE_DEFAULT)));
    let deadline = Instant::now() + limit;
    let mut done: Vec<Option<Forwarded>> = (0..targets.len()).map(|_| None).collect();
    let mut waiting = targets.iter().enumerate();
    let mut running = futures_util::stream::FuturesUnordered::new();
    loop {
        while running.len() < AT_ONCE {
            let Some((i, target)) = waiting.next() else { break };
            running.push(run_one(fleet, who, target, &args, deadline, i));
        }
        match running.next().await {
            Some((i, forwarded)) => done[i] = forwarded,
            None => break,
        }
    }
    let mut succeeded = 0;
    let results: Vec<Value> = targets
        .iter()
        .zip(done)
        .map(|(target, forwarded)| {
            let Some(Forwarded {
                outcome, provenance, ..
            }) = forwarded
            else {
                let message = format!(
                    "not sent: the run's deadline of {}s passed before this PC's turn",
                    limit.as_secs()
                );
                return json!({"agent_id": target, "ok": false, "error": {"code": "timeout", "message": message}});
            };
            let mut entry = match outcome {
                Ok(result) => {
                    succeeded += 1;
                    json!({"agent_id": target, "ok": true, "result": result})
                }
                Err(f) => json!({"agent_id": target, "ok": false, "error": {"code": f.code, "message": f.message}}),
            };
            match provenance {
                Provenance::Signed(proof) => entry["proof"] = serde_json::to_value(proof).unwrap_or(Value::Null),
                Provenance::Unsigned => entry["signed"] = Value::Bool(false),
                Provenance::NotAnswered => {}
            }
            entry
        })
        .collect();
    Ok(json!({
        "tool": args.tool,
        "succeeded": succeeded,
        "failed": results.len() - succeeded,
        "results": results,
    }))
}

/// One PC's call, unless the deadline passed before its turn (then nothing is sent).
async fn run_one(
    fleet: &Fleet,
    who: &Principal,
    target: &AgentId,
    args: &FleetRunArgs,
    deadline: Instant,
    i: usize,
) -> (usize, Option<Forwarded>) {
    if Instant::now() >= deadline {
        return (i, None);
    }
    let forwarded = fleet
        .forwarder
        .forward_by(who, target, &args.tool, args.args.clone(), Some(deadline))
        .await;
    (i, Some(forwarded))
}
