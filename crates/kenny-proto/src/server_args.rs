//! Arguments of the tools the server answers itself, from what it stores (no PC is
//! contacted): typed like the forwarded tools' in [`crate::args`], their schemas
//! derived the same way. Serde checks only types: [`ServerArgs::check`] checks the
//! bounds a caller could abuse (page sizes, the query and cursor lengths); the other
//! text arguments are bounded where they are used (a section or duration that is not
//! one is `bad_args`, a reason is cut to 500 characters).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A server tool's argument struct.
pub trait ServerArgs: DeserializeOwned + JsonSchema {
    /// The bounds serde does not check; the message names the argument.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A health state to filter PCs by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum HealthFilter {
    Ok,
    Unknown,
    Warn,
    Crit,
    // warn or crit.
    Attention,
    // No snapshot received yet.
    NoData,
}

/// An OS to filter PCs by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum OsFilter {
    Linux,
    Windows,
    Macos,
}

impl OsFilter {
    pub fn as_str(self) -> &'static str {
        match self {
            OsFilter::Linux => "linux",
            OsFilter::Windows => "windows",
            OsFilter::Macos => "macos",
        }
    }
}

/// Most PCs on one page of `list_agents`.
pub const LIST_LIMIT_MAX: u32 = 100;
/// PCs on a page when the caller does not say.
pub const LIST_LIMIT_DEFAULT: u32 = 50;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListAgentsArgs {
    /// Only PCs connected now (true) or not (false).
    pub online: Option<bool>,
    /// Only PCs in this health: ok, unknown, warn, crit, attention (warn or crit), or no_data (no snapshot yet).
    pub health: Option<HealthFilter>,
    /// Only PCs running this OS.
    pub os: Option<OsFilter>,
    /// Only PCs whose id, host name, OS, version or health reason contains this text (any case).
    #[schemars(length(min = 1, max = 200))]
    pub query: Option<String>,
    /// PCs per page, 1 to 100 (50 if omitted).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// Where to go on from: the next_cursor of the previous page.
    #[schemars(length(min = 1, max = 200))]
    pub cursor: Option<String>,
}

impl ServerArgs for ListAgentsArgs {
    fn check(&self) -> Result<(), String> {
        if let Some(limit) = self.limit
            && !(1..=LIST_LIMIT_MAX).contains(&limit)
        {
            return Err(format!("limit must be 1 to {LIST_LIMIT_MAX}, not {limit}"));
        }
        if let Some(q) = &self.query
            && !(1..=200).contains(&q.chars().count())
        {
            return Err("query must be 1 to 200 characters".into());
        }
        if let Some(c) = &self.cursor
            && !(1..=200).contains(&c.chars().count())
        {
            return Err("cursor must be the next_cursor of a previous page".into());
        }
        Ok(())
    }
}

/// Most PCs one `fleet_run` may name, whatever the server's setting.
pub const FLEET_RUN_MAX: u32 = 1000;
/// Seconds a `fleet_run` may take in all, when the caller does not say.
pub const FLEET_RUN_DEADLINE_DEFAULT: u32 = 120;

/// One read-only tool on an explicit list of PCs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetRunArgs {
    /// The PCs to run it on: agent ids from list_agents, each once. Required; there is no "all".
    #[schemars(length(min = 1, max = 1000))]
    pub agent_ids: Vec<String>,
    /// A read-only forwarded tool (diag_processes, fs_disk_usage, net_config, ...). Tools that change a PC are refused.
    #[schemars(length(min = 1, max = 64))]
    pub tool: String,
    /// The tool's arguments, the same for every PC, without agent_id.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// Seconds the whole run may take, 5 to 600 (120 if omitted); PCs not answered by then are reported `timeout`.
    #[schemars(range(min = 5, max = 600))]
    pub deadline_s: Option<u32>,
}

impl ServerArgs for FleetRunArgs {
    fn check(&self) -> Result<(), String> {
        if self.agent_ids.is_empty() {
            return Err("agent_ids must name at least one PC (list_agents shows them); there is no \"all\"".into());
        }
        let mut seen = std::collections::HashSet::new();
        for id in &self.agent_ids {
            crate::AgentId::parse(id).map_err(|e| format!("agent_ids: {e}"))?;
            if !seen.insert(id.as_str()) {
                return Err(format!("agent_ids names {id} twice; name each PC once"));
            }
        }
        if self.args.contains_key(crate::catalog::AGENT_ID_ARG) {
            return Err("args must not hold agent_id: the PCs are the ones in agent_ids".into());
        }
        if let Some(d) = self.deadline_s
            && !(5..=600).contains(&d)
        {
            return Err(format!("deadline_s must be 5 to 600, not {d}"));
        }
        Ok(())
    }
}

/// Where a call held for approval stands.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalStatusArgs {
    /// The approval id a held call's result gave (apr_ and 32 hex digits).
    #[schemars(length(min = 36, max = 36))]
    pub approval_id: String,
}

impl ServerArgs for ApprovalStatusArgs {
    fn check(&self) -> Result<(), String> {
        let well_formed = self
            .approval_id
            .strip_prefix("apr_")
            .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        if well_formed {
            Ok(())
        } else {
            Err("approval_id must be the id a held call's result gave: apr_ and 32 hex digits".into())
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetOverviewArgs {}

impl ServerArgs for FleetOverviewArgs {}

/// The one argument of a tool about one PC.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentHealthArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
}

impl ServerArgs for AgentHealthArgs {}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSnapshotArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// Only this section (disk, memory, local_accounts, ...); omit for the whole snapshot.
    #[schemars(length(min = 1, max = 64))]
    pub section: Option<String>,
}

impl ServerArgs for AgentSnapshotArgs {}

/// Most changes `agent_changes` returns at once.
pub const CHANGES_LIMIT_MAX: u32 = 500;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentChangesArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// From when: an RFC 3339 time, or how long back (30m, 24h, 7d); 7d if omitted.
    #[schemars(length(min = 2, max = 40))]
    pub since: Option<String>,
    /// Most changes to return, newest first: 1 to 500 (100 if omitted).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
}

impl ServerArgs for AgentChangesArgs {
    fn check(&self) -> Result<(), String> {
        if let Some(limit) = self.limit
            && !(1..=CHANGES_LIMIT_MAX).contains(&limit)
        {
            return Err(format!("limit must be 1 to {CHANGES_LIMIT_MAX}, not {limit}"));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertSilenceSetArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// The section to silence (disk, memory, offline, ...); omit to silence every alert of the PC.
    #[schemars(length(min = 1, max = 64))]
    pub section: Option<String>,
    /// For how long: 30m, 2h, 7d (at most 90d).
    #[schemars(length(min = 2, max = 10))]
    pub duration: String,
    /// Why, for whoever looks next.
    #[schemars(length(min = 1, max = 500))]
    pub reason: String,
}

impl ServerArgs for AlertSilenceSetArgs {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertSilenceListArgs {
    /// Only this PC's silences; omit for every PC you can reach.
    #[schemars(length(min = 1))]
    pub agent_id: Option<String>,
}

impl ServerArgs for AlertSilenceListArgs {}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertSilenceClearArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// End only the silence of this section; omit to end all of the PC's silences.
    #[schemars(length(min = 1, max = 64))]
    pub section: Option<String>,
}

impl ServerArgs for AlertSilenceClearArgs {}

/// What a PC's web filter does when it is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum FilterMode {
    /// Block the list in the PC's hosts file.
    Block,
    /// Block nothing; only flag visits (needs record_activity).
    Monitor,
}

/// What a custom entry does with a domain and every name under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum EntryKind {
    /// Blocked (the name and its `www.` form go into the hosts file).
    Block,
    /// Never blocked, whatever a category lists; wins over block.
    Allow,
    /// Not blocked, but visits are flagged.
    Watch,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Block => "block",
            EntryKind::Allow => "allow",
            EntryKind::Watch => "watch",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct FilterEntry {
    /// A domain such as `example.com`; it also covers every name under it.
    #[schemars(length(min = 1, max = 253))]
    pub domain: String,
    /// block, allow or watch.
    pub kind: EntryKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum Switch {
    On,
    Off,
}

/// A weekly window during which categories, or the whole filter, are switched on or off.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct ScheduleWindow {
    /// A short name, shown in the panel and the audit trail, e.g. `school nights`.
    #[schemars(length(min = 1, max = 60))]
    pub name: String,
    /// The days the window starts on (mon ... sun).
    #[schemars(length(min = 1, max = 7))]
    pub days: Vec<Weekday>,
    /// Start, `HH:MM` in the time zone.
    #[schemars(length(min = 5, max = 5))]
    pub start: String,
    /// End, `HH:MM`; an end at or before the start ends the next day (21:00 to 07:00).
    #[schemars(length(min = 5, max = 5))]
    pub end: String,
    /// IANA time zone, e.g. `Europe/London`.
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: String,
    /// The categories it switches; omit to switch the whole filter.
    #[schemars(length(min = 1, max = 32))]
    pub categories: Option<Vec<String>>,
    /// on or off during the window.
    pub set: Switch,
}

/// Most custom entries a PC's filter keeps.
pub const FILTER_ENTRIES_MAX: usize = 2000;
/// Most schedule windows a PC's filter keeps.
pub const FILTER_WINDOWS_MAX: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebfilterGetArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// Also ask the PC (when online) what its hosts file holds now, to show drift.
    pub check: Option<bool>,
}

impl ServerArgs for WebfilterGetArgs {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebfilterSetArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// Turn the filter on or off.
    pub enabled: Option<bool>,
    /// block (default) or monitor (flag only).
    pub mode: Option<FilterMode>,
    /// The categories on, replacing the current set (see webfilter_get for the ones there are).
    #[schemars(length(max = 32))]
    pub categories: Option<Vec<String>>,
    /// Custom entries to add (or change the kind of).
    #[schemars(length(max = 500))]
    pub add_entries: Option<Vec<FilterEntry>>,
    /// Domains whose custom entries to remove.
    #[schemars(length(max = 500))]
    pub remove_entries: Option<Vec<String>>,
    /// Turn browsers' DNS-over-HTTPS off on the PC, so it cannot go around the filter.
    pub doh_lockdown: Option<bool>,
    /// Collect and keep the domains the PC visits (its web_activity), flagging matches.
    pub record_activity: Option<bool>,
    /// The schedule windows, replacing the current ones (an empty list removes them).
    #[schemars(length(max = 20))]
    pub schedules: Option<Vec<ScheduleWindow>>,
}

impl ServerArgs for WebfilterSetArgs {
    fn check(&self) -> Result<(), String> {
        let long = |n: Option<usize>, max: usize| n.is_some_and(|n| n > max);
        if long(self.categories.as_ref().map(Vec::len), 32) {
            return Err("categories takes at most 32 names".into());
        }
        if long(self.add_entries.as_ref().map(Vec::len), 500) || long(self.remove_entries.as_ref().map(Vec::len), 500) {
            return Err("add_entries and remove_entries take at most 500 each; send more in several calls".into());
        }
        if long(self.schedules.as_ref().map(Vec::len), FILTER_WINDOWS_MAX) {
            return Err(format!("schedules takes at most {FILTER_WINDOWS_MAX} windows"));
        }
        let nothing = self.enabled.is_none()
            && self.mode.is_none()
            && self.categories.is_none()
            && self.add_entries.is_none()
            && self.remove_entries.is_none()
            && self.doh_lockdown.is_none()
            && self.record_activity.is_none()
            && self.schedules.is_none();
        if nothing {
            return Err("nothing to change: give at least one of enabled, mode, categories, add_entries, remove_entries, doh_lockdown, record_activity, schedules".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebfilterPushArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
}

impl ServerArgs for WebfilterPushArgs {}

/// Most hours `web_activity_query` looks back.
pub const ACTIVITY_HOURS_MAX: u32 = 720;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebActivityQueryArgs {
    /// Id of the PC (see list_agents). Required; nothing is remembered between calls.
    #[schemars(length(min = 1))]
    pub agent_id: String,
    /// How far back, 1 to 720 hours (24 if omitted).
    #[schemars(range(min = 1, max = 720))]
    pub hours: Option<u32>,
    /// Only domains flagged by a category or a watch or block entry.
    pub flagged_only: Option<bool>,
    /// Most domains to return, 1 to 500 (100 if omitted), most recent first.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
}

impl ServerArgs for WebActivityQueryArgs {
    fn check(&self) -> Result<(), String> {
        if let Some(h) = self.hours
            && !(1..=ACTIVITY_HOURS_MAX).contains(&h)
        {
            return Err(format!("hours must be 1 to {ACTIVITY_HOURS_MAX}, not {h}"));
        }
        if let Some(l) = self.limit
            && !(1..=500).contains(&l)
        {
            return Err(format!("limit must be 1 to 500, not {l}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::schema_of;
    use serde_json::json;

    #[test]
    fn schemas_are_flat_objects_with_bounds_and_enums_inline() {
        let s = schema_of::<ListAgentsArgs>();
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["properties"]["limit"]["maximum"], json!(100));
        assert_eq!(
            s["properties"]["health"]["enum"],
            json!(["ok", "unknown", "warn", "crit", "attention", "no_data"])
        );
        assert!(s.get("$defs").is_none(), "{s}");
        let one = schema_of::<AgentHealthArgs>();
        assert_eq!(one["required"], json!(["agent_id"]));
    }

    #[test]
    fn bounds_are_checked_with_the_argument_named() {
        let args = ListAgentsArgs {
            limit: Some(500),
            ..Default::default()
        };
        assert!(args.check().unwrap_err().contains("limit must be 1 to 100"));
        let bad: Result<ListAgentsArgs, _> = serde_json::from_value(json!({"health": "sick"}));
        assert!(bad.unwrap_err().to_string().contains("unknown variant `sick`"));
    }
}
