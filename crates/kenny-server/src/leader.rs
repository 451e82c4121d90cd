//! Which replica runs the work that must happen once for the whole fleet: pruning and
//! purging, downsampling history, update campaigns, alert delivery and digests, the
//! offline watch, the web filters' list refresh. One replica leads at a time (see
//! [`crate::store::Lead`]); the others keep trying, so when the leader stops, another
//! takes over within [`RETRY_EVERY`]. A single server on SQLite always leads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::{Lead, Store};

/// How often a follower tries to take the lead, and the leader checks it still holds it.
pub const RETRY_EVERY: Duration = Duration::from_secs(2);
/// The advisory lock's number: any fixed value no other kenny lock uses.
const LEAD_LOCK: i64 = 0x6b65_6e6e_7900_0002;

#[derive(Clone)]
pub struct Leader {
    leading: Arc<AtomicBool>,
}

impl Leader {
    /// Leads from the start and for ever: one server alone.
    pub fn always() -> Leader {
        Leader {
            leading: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Competes for the lead on `store` until `shutdown`. The first attempt is made
    /// before this returns, so a lone replica leads from its first tick.
    pub async fn elect(store: Arc<Store>, shutdown: CancellationToken) -> Leader {
        let leader = Leader {
            leading: Arc::new(AtomicBool::new(false)),
        };
        let first = attempt(&store, None).await;
        leader.leading.store(first.is_some(), Ordering::Release);
        if first.is_some() {
            tracing::info!("this replica leads the fleet-wide background work");
        }
        tokio::spawn(leader.clone().hold(store, first, shutdown));
        leader
    }

    pub fn is_leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// Runs `work` at once and then every `every`, each time this process leads, until
    /// `shutdown`: the shape of every fleet-wide periodic job. A tick missed while
    /// `work` ran is not made up.
    pub async fn every<F, Fut>(&self, every: Duration, shutdown: &CancellationToken, mut work: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            if self.is_leading() {
                work().await;
            }
        }
    }

    async fn hold(self, store: Arc<Store>, mut lead: Option<Lead>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(RETRY_EVERY);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.cancelled() => {
                    self.leading.store(false, Ordering::Release);
                    return;
                }
            }
            lead = attempt(&store, lead).await;
            let now = lead.is_some();
            if self.leading.swap(now, Ordering::AcqRel) != now {
                if now {
                    tracing::info!("this replica now leads the fleet-wide background work");
                } else {
                    tracing::warn!("this replica lost the lead of the fleet-wide background work");
                }
            }
        }
    }
}

/// Keeps `held` if it still holds, else tries to take the lead.
async fn attempt(store: &Arc<Store>, held: Option<Lead>) -> Option<Lead> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        if let Some(lead) = held
            && lead.still_held()
        {
            return Some(lead);
        }
        match store.try_lead(LEAD_LOCK) {
            Ok(lead) => lead,
            Err(e) => {
                tracing::warn!(error = %e, "could not compete for the lead; trying again shortly");
                None
            }
        }
    })
    .await
    .ok()
    .flatten()
}
