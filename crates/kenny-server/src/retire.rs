//! Taking a PC out of the fleet, from the API and the dashboard: `rekey` forgets its key
//! and issues a new enrollment token (a reinstalled or stolen PC), `remove` deletes it
//! (no key or token logs in as it again, and nobody is given it any more), both
//! cutting off the live connection at once. A removed PC's history is purged by
//! `purge_loop` once `--removed-pc-retention-days` have passed.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::state::Fleet;
use crate::store::{Store, StoreError};

/// Ends the PC's live connection, if any, on whichever replica holds it: whatever it
/// was doing fails as disconnected.
async fn cut_off(fleet: &Fleet, agent_id: &str, why: &str) {
    if let Some(link) = fleet.registry.get(agent_id) {
        link.close(why);
    }
    if let Some(cluster) = &fleet.cluster {
        cluster
            .publish_change(crate::cluster::changes::Change::CutOff {
                agent_id: agent_id.to_owned(),
                reason: why.to_owned(),
            })
            .await;
    }
}

pub(crate) async fn remove(fleet: &Fleet, agent_id: &str, by: &str) -> Result<(), StoreError> {
    let (id, who, now) = (agent_id.to_owned(), by.to_owned(), fleet.clock.now());
    fleet.store.blocking(move |s| s.remove_agent(&id, &who, &now)).await?;
    cut_off(fleet, agent_id, "the PC was removed from kenny").await;
    fleet.health.forget(agent_id);
    tracing::info!(agent = %agent_id, by = %by, "agent removed");
    Ok(())
}

pub(crate) async fn rekey(
    fleet: &Fleet,
    data_dir: &std::path::Path,
    agent_id: &str,
) -> anyhow::Result<crate::admin::AgentEnrollment> {
    let (store, dir, id) = (fleet.store.clone(), data_dir.to_owned(), agent_id.to_owned());
    let enrollment = tokio::task::spawn_blocking(move || crate::admin::rekey_agent(&store, &dir, &id)).await??;
    cut_off(fleet, agent_id, "the PC's enrollment was rotated").await;
    Ok(enrollment)
}

const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// Purges removed PCs' history past `retention`: at start-up, then hourly.
pub(crate) async fn purge_loop(
    store: Arc<Store>,
    clock: Clock,
    retention: Duration,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) {
    let pass = || {
        let store = store.clone();
        let before = crate::clock::format(clock.now_utc() - retention);
        async move {
            match store.blocking(move |s| s.purge_removed_agents(&before)).await {
                Ok(gone) if !gone.is_empty() => {
                    tracing::info!(agents = ?gone, "purged the history of removed PCs past the retention period")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not purge removed PCs' history; trying again in an hour"),
            }
        }
    };
    leader.every(PURGE_EVERY, &shutdown, pass).await;
}
