//! A new campaign, checked: a release the server holds, one target, a rate in bounds.
//! The target is resolved to PCs here, once: a PC enrolled or moved to the channel
//! later is not part of it (start another campaign for it).

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use crate::store::{AgentRecord, NewCampaign};
use crate::updates::releases;

/// The update channels a PC can be on.
pub(crate) const CHANNELS: [&str; 2] = ["stable", "beta"];
pub(crate) const MAX_PARALLEL: u32 = 50;
/// Most PCs one campaign may name in a list.
const MAX_LISTED: usize = 10_000;

/// `POST /api/campaigns`: exactly one of `all`, `channel`, `agents`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Request {
    pub version: String,
    #[serde(default)]
    pub all: bool,
    pub channel: Option<String>,
    pub agents: Option<Vec<String>>,
    pub max_parallel: Option<u32>,
}

pub(crate) const SHAPE: &str =
    r#"{"version": "1.2.3", "all": true | "channel": "stable" | "beta" | "agents": ["pc-a", ...], "max_parallel": 1}"#;

/// Checks `req` against the builds in `releases_dir` and the registered `agents`, and
/// turns it into the campaign to store; the error says what is wrong and what to do.
pub(crate) fn check(
    req: &Request,
    releases_dir: &Path,
    agents: &[AgentRecord],
    created_by: &str,
    now: &str,
) -> Result<NewCampaign, String> {
    let version_text = req.version.trim();
    let Some(version) = kenny_proto::results::parse_version(version_text) else {
        return Err(format!(
            "version must look like 1.2.3, got {:?}",
            crate::health::clean(version_text, 40)
        ));
    };
    if releases::platforms_of(releases_dir, version).is_empty() {
        return Err(format!(
            "this server has no build of kenny-agent {version_text}: put kenny-agent-{version_text}-<os>-<arch> (.exe on Windows) in {} first",
            releases_dir.display()
        ));
    }
    let max_parallel = req.max_parallel.unwrap_or(1);
    if !(1..=MAX_PARALLEL).contains(&max_parallel) {
        return Err(format!(
            "max_parallel is how many PCs may update at once: 1 to {MAX_PARALLEL}, got {max_parallel}"
        ));
    }
    let chosen = usize::from(req.all) + usize::from(req.channel.is_some()) + usize::from(req.agents.is_some());
    if chosen != 1 {
        return Err(
            "name the PCs with exactly one of \"all\": true, \"channel\": \"stable\" or \"beta\", or \"agents\": [ids]"
                .into(),
        );
    }
    let (target, ids): (String, Vec<String>) = if req.all {
        ("all".into(), agents.iter().map(|a| a.agent_id.to_string()).collect())
    } else if let Some(channel) = &req.channel {
        if !CHANNELS.contains(&channel.as_str()) {
            return Err(format!(
                "channel must be stable or beta, got {:?}",
                crate::health::clean(channel, 40)
            ));
        }
        let ids = agents
            .iter()
            .filter(|a| a.channel == *channel)
            .map(|a| a.agent_id.to_string())
            .collect();
        (format!("channel:{channel}"), ids)
    } else {
        let listed = req.agents.as_deref().unwrap_or_default();
        if listed.len() > MAX_LISTED {
            return Err(format!(
                "agents lists {} PCs; at most {MAX_LISTED}: use a channel instead",
                listed.len()
            ));
        }
        let known: BTreeSet<&str> = agents.iter().map(|a| a.agent_id.as_str()).collect();
        let unknown: Vec<String> = listed
            .iter()
            .filter(|id| !known.contains(id.as_str()))
            .take(5)
            .map(|id| format!("{:?}", crate::health::clean(id, 64)))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "no agent with id {}; GET /api/agents lists the ids",
                unknown.join(", ")
            ));
        }
        let ids: BTreeSet<String> = listed.iter().cloned().collect();
        ("agents".into(), ids.into_iter().collect())
    };
    if ids.is_empty() {
        let hint = match &req.channel {
            Some(c) => format!("no PC is on the {c} channel: put PCs on it with PUT /api/agents/<id>/channel"),
            None => "the target names no PC: enroll one first or list agent ids".into(),
        };
        return Err(hint);
    }
    Ok(NewCampaign {
        version: version_text.to_owned(),
        target,
        max_parallel,
        created_by: created_by.to_owned(),
        now: now.to_owned(),
        agents: ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, channel: &str) -> AgentRecord {
        AgentRecord {
            agent_id: kenny_proto::AgentId::parse(id).unwrap(),
            public_key: None,
            hostname: None,
            os: None,
            version: None,
            arch: None,
            last_seen: None,
            channel: channel.into(),
        }
    }

    fn req(body: serde_json::Value) -> Request {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn targets_resolve_once_and_bad_requests_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kenny-agent-0.2.0-linux-x86_64"), b"x").unwrap();
        let agents = [agent("pc-a", "stable"), agent("pc-b", "beta")];
        let ok = |body| check(&req(body), dir.path(), &agents, "root", "t");
        let all = ok(serde_json::json!({"version": "0.2.0", "all": true})).unwrap();
        assert_eq!((all.agents.len(), all.max_parallel, all.target.as_str()), (2, 1, "all"));
        let beta = ok(serde_json::json!({"version": "0.2.0", "channel": "beta", "max_parallel": 3})).unwrap();
        assert_eq!(
            (beta.agents, beta.target.as_str()),
            (vec!["pc-b".to_owned()], "channel:beta")
        );
        let listed = ok(serde_json::json!({"version": "0.2.0", "agents": ["pc-b", "pc-a", "pc-b"]})).unwrap();
        assert_eq!(listed.agents, ["pc-a", "pc-b"]);

        let refused = |body| ok(body).unwrap_err();
        assert!(
            refused(serde_json::json!({"version": "0.3.0", "all": true})).contains("no build of kenny-agent 0.3.0")
        );
        assert!(refused(serde_json::json!({"version": "latest", "all": true})).contains("1.2.3"));
        assert!(refused(serde_json::json!({"version": "0.2.0"})).contains("exactly one"));
        assert!(
            refused(serde_json::json!({"version": "0.2.0", "all": true, "channel": "beta"})).contains("exactly one")
        );
        assert!(refused(serde_json::json!({"version": "0.2.0", "channel": "nightly"})).contains("stable or beta"));
        assert!(refused(serde_json::json!({"version": "0.2.0", "agents": ["pc-x"]})).contains("\"pc-x\""));
        assert!(refused(serde_json::json!({"version": "0.2.0", "agents": []})).contains("names no PC"));
        assert!(refused(serde_json::json!({"version": "0.2.0", "all": true, "max_parallel": 51})).contains("1 to 50"));
        assert!(refused(serde_json::json!({"version": "0.2.0", "all": true, "max_parallel": 0})).contains("1 to 50"));
        let empty = [agent("pc-a", "stable")];
        let none = check(
            &req(serde_json::json!({"version": "0.2.0", "channel": "beta"})),
            dir.path(),
            &empty,
            "r",
            "t",
        );
        assert!(none.unwrap_err().contains("PUT /api/agents/<id>/channel"));
    }
}
