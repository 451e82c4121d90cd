//! Arguments of the tools the server answers itself, from what it stores (no PC is
//! contacted): typed like the forwarded tools' in [`crate::args`], their schemas
//! derived the same way. Serde checks only types: [`ServerArgs::check`] checks the
//! bounds a caller could abuse (page sizes, the query and cursor lengths); the other
//! text arguments are bounded where they are used (a section or duration that is not
//! one is `bad_args`, a reason is cut to 500 characters).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

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
