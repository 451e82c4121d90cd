//! The tools the server answers itself from what it knows (the fleet, stored
//! snapshots, health verdicts): no PC is contacted, so they work for offline PCs too.
//! Each is scoped like every other tool (a PC outside the caller's hosts is
//! `forbidden`); all read, except the silence tools, which change the server's own
//! state (never a PC's) and are audited. `/mcp` and the chat both offer them; neither knows how they
//! work.

mod fan_out;
mod listing;
mod one_pc;
mod outputs;
mod silence;
mod webfilter;

use serde_json::{Map, Value};

use crate::forward::CallFailure;
use crate::principal::Principal;
use crate::state::Fleet;
use kenny_proto::error::ErrorCode;
use kenny_proto::server_args::{
    AgentChangesArgs, AgentHealthArgs, AgentSnapshotArgs, AlertSilenceClearArgs, AlertSilenceListArgs,
    AlertSilenceSetArgs, ApprovalStatusArgs, FleetOverviewArgs, FleetRunArgs, ListAgentsArgs, ServerArgs,
    WebActivityQueryArgs, WebfilterGetArgs, WebfilterPushArgs, WebfilterSetArgs,
};

pub(crate) const LIST_AGENTS: &str = "list_agents";
pub(crate) const FLEET_OVERVIEW: &str = "fleet_overview";
pub(crate) const AGENT_HEALTH: &str = "agent_health";
pub(crate) const AGENT_SNAPSHOT: &str = "agent_snapshot";
pub(crate) const AGENT_CHANGES: &str = "agent_changes";
pub(crate) const ALERT_SILENCE_SET: &str = "alert_silence_set";
pub(crate) const ALERT_SILENCE_LIST: &str = "alert_silence_list";
pub(crate) const ALERT_SILENCE_CLEAR: &str = "alert_silence_clear";
pub(crate) const WEBFILTER_GET: &str = "webfilter_get";
pub(crate) const WEBFILTER_SET: &str = "webfilter_set";
pub(crate) const WEBFILTER_PUSH: &str = "webfilter_push";
pub(crate) const WEB_ACTIVITY_QUERY: &str = "web_activity_query";
pub(crate) const FLEET_RUN: &str = "fleet_run";
pub(crate) const APPROVAL_STATUS: &str = "approval_status";

/// How a server tool presents itself.
pub(crate) struct ServerTool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// Whether it concerns one PC (and so takes a required `agent_id`).
    pub one_pc: bool,
    /// Whether it only reads; the others change the server's state (and are audited).
    pub read_only: bool,
    /// Whether what it returns is personal (browsing): the chat holds it for approval.
    pub privacy_sensitive: bool,
    /// Whether the chat offers it. A change it offers waits for approval.
    pub in_chat: bool,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
}

pub(crate) const TOOLS: &[ServerTool] = &[
    ServerTool {
        name: LIST_AGENTS,
        title: "List PCs",
        description: "List the PCs you can reach, a page at a time (sorted by agent_id): agent_id, online, os, \
hostname, version, last_seen, health and its top reason. Filter by online, health, os or a text query; `total` \
counts every match and `next_cursor` fetches the next page. Use an agent_id from here on every other call.",
        one_pc: false,
        read_only: true,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<ListAgentsArgs>,
        output_schema: outputs::list_agents,
    },
    ServerTool {
        name: FLEET_OVERVIEW,
        title: "Fleet overview",
        description: "The fleet at a glance, from what the server knows (no PC is contacted): how many PCs are \
online and offline, how many are ok, warn, crit, unknown or not yet reported, the PCs that need attention with \
their top reason (worst first), and the mix of operating systems and agent versions.",
        one_pc: false,
        read_only: true,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<FleetOverviewArgs>,
        output_schema: outputs::fleet_overview,
    },
    ServerTool {
        name: AGENT_HEALTH,
        title: "PC health",
        description: "The server's health verdict on one PC from its latest snapshot: overall status, the reasons, \
and for every section its status, summary, reason and what to do. Works for offline PCs. Requires agent_id: the \
PC (from list_agents); it is never inferred.",
        one_pc: true,
        read_only: true,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<AgentHealthArgs>,
        output_schema: outputs::agent_health,
    },
    ServerTool {
        name: AGENT_SNAPSHOT,
        title: "PC snapshot",
        description: "The latest telemetry snapshot the server stored for one PC (disk, memory, accounts, \
software, ports, ...), whole or one section; works for offline PCs (see collected_at for its age). Requires \
agent_id: the PC (from list_agents); it is never inferred. For a fresh one, use telemetry_collect.",
        one_pc: true,
        read_only: true,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<AgentSnapshotArgs>,
        output_schema: outputs::agent_snapshot,
    },
    ServerTool {
        name: AGENT_CHANGES,
        title: "PC changes",
        description: "What changed on one PC between its snapshots, newest first: accounts and administrators, \
installed software, listening ports, autostart entries, services. A new local administrator is high priority. \
Works for offline PCs. Requires agent_id: the PC (from list_agents); it is never inferred.",
        one_pc: true,
        read_only: true,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<AgentChangesArgs>,
        output_schema: outputs::agent_changes,
    },
    ServerTool {
        name: ALERT_SILENCE_SET,
        title: "Silence alerts",
        description: "Silence one PC's alerts for a while: one section (disk, offline, ...) or all, with a reason. \
Alerts are still recorded; nothing is sent until it ends. Operators and superusers only; audited. Requires \
agent_id: the PC (from list_agents); it is never inferred.",
        one_pc: true,
        read_only: false,
        privacy_sensitive: false,
        in_chat: false,
        input_schema: kenny_proto::args::schema_of::<AlertSilenceSetArgs>,
        output_schema: outputs::silence,
    },
    ServerTool {
        name: ALERT_SILENCE_LIST,
        title: "List alert silences",
        description: "The alert silences in force: of one PC (agent_id) or of every PC you can reach, with \
section, until when, why and who set them.",
        one_pc: false,
        read_only: true,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<AlertSilenceListArgs>,
        output_schema: outputs::silences,
    },
    ServerTool {
        name: ALERT_SILENCE_CLEAR,
        title: "End alert silences",
        description: "End one PC's alert silences now: the one of a section, or all of them. Operators and \
superusers only; audited. Requires agent_id: the PC (from list_agents); it is never inferred.",
        one_pc: true,
        read_only: false,
        privacy_sensitive: false,
        in_chat: false,
        input_schema: kenny_proto::args::schema_of::<AlertSilenceClearArgs>,
        output_schema: outputs::silences,
    },
    ServerTool {
        name: WEBFILTER_GET,
        title: "Web filter settings",
        description: "One PC's web filter as the server keeps it: on or off, mode, categories (and the ones there \
are), custom block/allow/watch entries, DNS-over-HTTPS lockdown, schedule windows, and its state: what it should \
block now, what was last applied (hash, when, by whom, why), drift from what the PC holds, over the cap, the next \
schedule change. `check: true` also asks the PC (if online) what its hosts file holds. Requires agent_id: the PC \
(from list_agents); it is never inferred.",
        one_pc: true,
        read_only: true,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<WebfilterGetArgs>,
        output_schema: outputs::webfilter,
    },
    ServerTool {
        name: WEBFILTER_SET,
        title: "Change a web filter",
        description: "Change one PC's web filter: turn it on or off, mode (block, or monitor: flag only), the \
categories on, custom entries to add or remove (block, allow, watch; each covers the names under it, allow wins), \
DNS-over-HTTPS lockdown, activity recording, and weekly schedule windows (days, HH:MM start and end, IANA time \
zone) that switch categories or the whole filter on or off. The server then keeps the PC at that state (pushing at \
each schedule edge and when it comes online). Operators and superusers only; audited. Requires agent_id: the PC \
(from list_agents); it is never inferred.",
        one_pc: true,
        read_only: false,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<WebfilterSetArgs>,
        output_schema: outputs::webfilter,
    },
    ServerTool {
        name: WEBFILTER_PUSH,
        title: "Apply a web filter now",
        description: "Send one PC the list its web filter should block now (its categories and block entries, allow \
entries taken out, as the schedule has it) through webfilter_apply, or clear it when nothing should be blocked; \
records the applied hash. A list over the server's cap is refused with the reason and nothing is sent. Operators and \
superusers only; audited. Requires agent_id: the PC (from list_agents); it is never inferred.",
        one_pc: true,
        read_only: false,
        privacy_sensitive: false,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<WebfilterPushArgs>,
        output_schema: outputs::webfilter,
    },
    ServerTool {
        name: WEB_ACTIVITY_QUERY,
        title: "Web activity",
        description: "The web domains one PC visited (never URLs or page contents), as kept by the server for PCs \
whose filter records activity: first and last seen, visits, and why a domain is flagged (a category of its filter, a \
watch or block entry). `hours` looks back (24 by default), `flagged_only` keeps the flagged ones. Personal data: \
audited, and held for approval in the chat. Requires agent_id: the PC (from list_agents); it is never inferred.",
        one_pc: true,
        read_only: true,
        privacy_sensitive: true,
        in_chat: true,
        input_schema: kenny_proto::args::schema_of::<WebActivityQueryArgs>,
        output_schema: outputs::web_activity,
    },
    ServerTool {
        name: FLEET_RUN,
        title: "Run a read-only tool on several PCs",
        description: "Run one read-only forwarded tool (diag_processes, fs_disk_usage, net_config, telemetry_collect, \
...) with the same arguments on an explicit list of PCs: agent_ids is required and names every PC (from list_agents); \
there is no \"all\". Each PC's call is scoped and audited on its own; a few run at once, under one deadline \
(deadline_s, 120 by default). The result lists every PC with its result or its error (offline, forbidden, timeout, \
...), and the agent's signed proof when it signs. Tools that change a PC cannot be fanned out.",
        one_pc: false,
        read_only: true,
        privacy_sensitive: false,
        in_chat: false,
        input_schema: kenny_proto::args::schema_of::<FleetRunArgs>,
        output_schema: outputs::fleet_run,
    },
    ServerTool {
        name: APPROVAL_STATUS,
        title: "Where a held call stands",
        description: "Where a call held for approval stands, by the approval_id its result gave: held (waiting for \
a person in the dashboard), running, done (with the tool's result), denied, or expired (not decided within 24 hours; \
it never ran). It ran on the PC it was held for, and at most once. Reads only; only the call's caller and the \
operators who may decide it can see it.",
        one_pc: false,
        read_only: true,
        privacy_sensitive: false,
        in_chat: false,
        input_schema: kenny_proto::args::schema_of::<ApprovalStatusArgs>,
        output_schema: outputs::approval_status,
    },
];

pub(crate) fn find(name: &str) -> Option<&'static ServerTool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Answers a server tool; `None` when `name` is not one.
pub(crate) async fn call(
    fleet: &Fleet,
    who: &Principal,
    name: &str,
    args: Map<String, Value>,
) -> Option<Result<Value, CallFailure>> {
    let started = std::time::Instant::now();
    let outcome = match name {
        LIST_AGENTS => match decode::<ListAgentsArgs>(name, &args) {
            Ok(a) => listing::list_agents(fleet, who, a).await,
            Err(f) => Err(f),
        },
        FLEET_OVERVIEW => match decode::<FleetOverviewArgs>(name, &args) {
            Ok(_) => listing::fleet_overview(fleet, who).await,
            Err(f) => Err(f),
        },
        AGENT_HEALTH => match decode::<AgentHealthArgs>(name, &args) {
            Ok(a) => one_pc::agent_health(fleet, who, &a.agent_id).await,
            Err(f) => Err(f),
        },
        AGENT_SNAPSHOT => match decode::<AgentSnapshotArgs>(name, &args) {
            Ok(a) => one_pc::agent_snapshot(fleet, who, &a.agent_id, a.section.as_deref()).await,
            Err(f) => Err(f),
        },
        AGENT_CHANGES => match decode::<AgentChangesArgs>(name, &args) {
            Ok(a) => one_pc::agent_changes(fleet, who, a).await,
            Err(f) => Err(f),
        },
        ALERT_SILENCE_SET => match decode::<AlertSilenceSetArgs>(name, &args) {
            Ok(a) => silence::set(fleet, who, a).await,
            Err(f) => Err(f),
        },
        ALERT_SILENCE_LIST => match decode::<AlertSilenceListArgs>(name, &args) {
            Ok(a) => silence::list(fleet, who, a).await,
            Err(f) => Err(f),
        },
        ALERT_SILENCE_CLEAR => match decode::<AlertSilenceClearArgs>(name, &args) {
            Ok(a) => silence::clear(fleet, who, a).await,
            Err(f) => Err(f),
        },
        WEBFILTER_GET => match decode::<WebfilterGetArgs>(name, &args) {
            Ok(a) => webfilter::get(fleet, who, a).await,
            Err(f) => Err(f),
        },
        WEBFILTER_SET => match decode::<WebfilterSetArgs>(name, &args) {
            Ok(a) => webfilter::set(fleet, who, a).await,
            Err(f) => Err(f),
        },
        WEBFILTER_PUSH => match decode::<WebfilterPushArgs>(name, &args) {
            Ok(a) => webfilter::push(fleet, who, a).await,
            Err(f) => Err(f),
        },
        WEB_ACTIVITY_QUERY => match decode::<WebActivityQueryArgs>(name, &args) {
            Ok(a) => webfilter::activity(fleet, who, a).await,
            Err(f) => Err(f),
        },
        FLEET_RUN => match decode::<FleetRunArgs>(name, &args) {
            Ok(a) => fan_out::fleet_run(fleet, who, a).await,
            Err(f) => Err(f),
        },
        APPROVAL_STATUS => match decode::<ApprovalStatusArgs>(name, &args) {
            Ok(a) => approval_status(fleet, who, &a.approval_id).await,
            Err(f) => Err(f),
        },
        _ => return None,
    };
    let ended = match &outcome {
        Ok(_) => "ok",
        Err(f) if f.refused => "refused",
        Err(_) => "error",
    };
    fleet.metrics.call(name, ended, started.elapsed());
    if let Err(failure) = &outcome
        && failure.refused
    {
        let agent = args.get("agent_id").and_then(Value::as_str).map(str::to_owned);
        fleet.forwarder.audit_refusal(who, agent, name, &args, failure).await;
    }
    Some(outcome)
}

/// Checks a call's arguments as running it would (`target` back in as `agent_id`),
/// without running it: a call held for approval is checked before anyone is asked.
pub(crate) fn check_args(name: &str, target: &str, args: &Map<String, Value>) -> Result<(), CallFailure> {
    let mut full = args.clone();
    full.insert("agent_id".into(), Value::String(target.to_owned()));
    match name {
        ALERT_SILENCE_SET => decode::<AlertSilenceSetArgs>(name, &full).map(drop),
        ALERT_SILENCE_CLEAR => decode::<AlertSilenceClearArgs>(name, &full).map(drop),
        WEBFILTER_SET => decode::<WebfilterSetArgs>(name, &full).map(drop),
        WEBFILTER_PUSH => decode::<WebfilterPushArgs>(name, &full).map(drop),
        _ => Ok(()),
    }
}

/// A held call as its caller or an operator who may decide it sees it; anyone else
/// learns only that there is no such call they can see.
async fn approval_status(fleet: &Fleet, who: &Principal, id: &str) -> Result<Value, CallFailure> {
    let held = crate::approvals::load(fleet, id).await?;
    match held {
        Some(held) if crate::approvals::may_read(who, &held) => Ok(crate::approvals::shown(&held, &fleet.clock.now())),
        _ => Err(CallFailure::refusal(
            ErrorCode::NotFound,
            format!(
                "no held call {id} that {} may see; the id comes from the held call's result",
                who.username
            ),
        )),
    }
}

/// Arguments typed and bounded; a missing `agent_id` is `no_agent`, like a forwarded
/// tool's, anything else wrong is `bad_args` naming it.
fn decode<T: ServerArgs>(tool: &str, args: &Map<String, Value>) -> Result<T, CallFailure> {
    let one_pc = find(tool).is_some_and(|t| t.one_pc);
    if one_pc && args.get("agent_id").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(CallFailure::refusal(
            ErrorCode::NoAgent,
            format!("{tool} needs agent_id: the PC to look at (list_agents shows them); it is never inferred"),
        ));
    }
    let typed: T = serde_json::from_value(Value::Object(args.clone()))
        .map_err(|e| CallFailure::refusal(ErrorCode::BadArgs, format!("bad arguments for {tool}: {e}")))?;
    typed
        .check()
        .map_err(|e| CallFailure::refusal(ErrorCode::BadArgs, format!("bad arguments for {tool}: {e}")))?;
    Ok(typed)
}
