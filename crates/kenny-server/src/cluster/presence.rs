//! Presence entries: the key of an agent in the bucket, what a replica announces about
//! a connection it holds, and how each replica applies the entries it sees.

use async_nats::jetstream::kv::{Entry, Operation};

use crate::registry::{AgentLink, Registry, Remote};

/// The bucket key of an agent: its id in hex, since bucket keys may not hold every
/// character an agent id may (a trailing or doubled `.`).
pub(crate) fn key(agent_id: &str) -> String {
    hex::encode(agent_id.as_bytes())
}

/// The key and value announcing `link`, held by `replica`.
pub(crate) fn entry(replica: &str, link: &AgentLink) -> anyhow::Result<(String, bytes::Bytes)> {
    let remote = Remote {
        agent_id: link.agent_id.clone(),
        replica: replica.to_owned(),
        conn_id: link.conn_id,
        meta: link.meta.clone(),
        connected_at: link.connected_at.clone(),
        revision: 0,
    };
    Ok((key(link.agent_id.as_str()), serde_json::to_vec(&remote)?.into()))
}

/// Applies one entry of the bucket as replica `me` sees it.
pub(crate) fn apply(registry: &Registry, me: &str, entry: &Entry) {
    match entry.operation {
        Operation::Put => {
            let Ok(mut remote) = serde_json::from_slice::<Remote>(&entry.value) else {
                tracing::warn!(key = %entry.key, "a presence entry that is not kenny's; ignored");
                return;
            };
            if key(remote.agent_id.as_str()) != entry.key {
                tracing::warn!(key = %entry.key, "a presence entry under another agent's key; ignored");
                return;
            }
            remote.revision = entry.revision;
            let agent_id = remote.agent_id.clone();
            // A connection of ours announced before this one is replaced, wherever the
            // newer one is.
            if let Some(local) = registry.get(agent_id.as_str())
                && local.presence_rev() != 0
                && local.presence_rev() < entry.revision
            {
                registry.remove_if_current(agent_id.as_str(), local.conn_id);
                local.close("replaced by a newer connection from the same agent");
            }
            if remote.replica == me {
                registry.clear_remote(agent_id.as_str(), entry.revision);
            } else {
                registry.set_remote(remote);
            }
        }
        Operation::Delete | Operation::Purge => {
            let Some(agent_id) = hex::decode(&entry.key).ok().and_then(|b| String::from_utf8(b).ok()) else {
                return;
            };
            registry.clear_remote(&agent_id, entry.revision);
        }
    }
}
