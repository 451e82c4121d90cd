//! Update campaigns: one release pinned to a set of PCs, rolled out as they come
//! online. `create` checks a new campaign and resolves its target to PCs once, when it
//! is made; `plan` holds every decision as a pure function; this module is the engine,
//! a background task that once a second starts the updates `plan` allows and records
//! how each ended. Every update goes through the forwarder like any `agent_update`,
//! as the server's principal naming the campaign, so each has its audit row and
//! obeys the same version rules.

pub(crate) mod create;
pub(crate) mod plan;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kenny_proto::AgentId;
use kenny_proto::error::ErrorCode;
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::forward::{CallFailure, Forwarder};
use crate::principal::Principal;
use crate::registry::Registry;
use crate::store::{CampaignPc, CampaignRow, PcChange, Store};
use crate::updates::Outcome;
use plan::{Ended, PcNow, Status, Step};

const TICK: Duration = Duration::from_secs(1);
const UPDATE_TOOL: &str = "agent_update";

/// The engine's part: shared, cheap to clone.
#[derive(Clone)]
pub(crate) struct Rollout {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<Store>,
    registry: Arc<Registry>,
    forwarder: Arc<Forwarder>,
    clock: Clock,
    /// PCs with an update running in this process, whichever campaign started it: one
    /// update per PC at a time.
    busy: Mutex<HashSet<String>>,
    /// Once it fires, an update still running is left `updating`: its links are being
    /// closed, which says nothing of the PC, and the report after the restart will.
    shutdown: CancellationToken,
}

/// Starts the engine; it stops when `shutdown` fires. Running campaigns carry on
/// after a restart from what the store holds.
pub(crate) fn start(
    store: Arc<Store>,
    registry: Arc<Registry>,
    forwarder: Arc<Forwarder>,
    clock: Clock,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) {
    let rollout = Rollout {
        inner: Arc::new(Inner {
            store,
            registry,
            forwarder,
            clock,
            busy: Mutex::default(),
            shutdown: shutdown.clone(),
        }),
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = shutdown.cancelled() => return,
            }
            if !leader.is_leading() {
                continue;
            }
            if let Err(e) = rollout.tick().await {
                tracing::warn!("update campaigns: {e}");
            }
        }
    });
}

impl Rollout {
    fn busy(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.inner.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn tick(&self) -> Result<(), crate::store::StoreError> {
        let campaigns = self.inner.store.blocking(|s| s.active_campaigns()).await?;
        for campaign in campaigns {
            let id = campaign.id;
            let pcs = self.inner.store.blocking(move |s| s.campaign_pcs(id)).await?;
            for pc in pcs.iter().filter(|p| p.status == Status::Updating.as_str()) {
                if !self.busy().contains(&pc.agent_id) {
                    self.orphan(&campaign, pc).await?;
                }
            }
            let running = campaign.state == "running";
            let steps = {
                let busy = self.busy().clone();
                let links: Vec<_> = pcs
                    .iter()
                    .map(|p| self.inner.registry.online_meta(&p.agent_id))
                    .collect();
                let views: Vec<PcNow<'_>> = pcs
                    .iter()
                    .zip(&links)
                    .filter_map(|(p, link)| {
                        Some(PcNow {
                            agent_id: &p.agent_id,
                            status: Status::parse(&p.status)?,
                            known: p.known,
                            online: link
                                .as_ref()
                                .map(|meta| meta.as_ref().map_or("", |m| m.version.as_str())),
                            busy: busy.contains(&p.agent_id),
                        })
                    })
                    .collect();
                plan::plan(running, campaign.max_parallel, &campaign.version, &views)
            };
            for step in steps {
                match step {
                    Step::Start(agent_id) => self.start_one(&campaign, agent_id).await?,
                    Step::Settle { agent_id, to, why } => {
                        let from = pcs
                            .iter()
                            .find(|p| p.agent_id == agent_id)
                            .map(|p| p.status.clone())
                            .unwrap_or_default();
                        self.settle(id, &agent_id, &from, to, false, &why).await?;
                    }
                }
            }
            let all_final = pcs
                .iter()
                .all(|p| Status::parse(&p.status).is_some_and(Status::is_final));
            if running && all_final {
                let now = self.inner.clock.now();
                if self.inner.store.blocking(move |s| s.finish_campaign(id, &now)).await? {
                    tracing::info!(campaign = id, "update campaign finished");
                }
            }
        }
        Ok(())
    }

    async fn settle(
        &self,
        id: i64,
        agent_id: &str,
        from: &str,
        to: Status,
        rollback: bool,
        why: &str,
    ) -> Result<bool, crate::store::StoreError> {
        let (agent, from, why, now) = (
            agent_id.to_owned(),
            from.to_owned(),
            why.to_owned(),
            self.inner.clock.now(),
        );
        self.inner
            .store
            .blocking(move |s| {
                let change = PcChange {
                    from: &from,
                    to: to.as_str(),
                    rollback,
                    detail: &why,
                };
                s.settle_campaign_pc(id, &agent, &change, &now)
            })
            .await
    }

    /// Marks the PC updating (unless a pause or cancel got there first) and runs its
    /// update in a task of its own.
    async fn start_one(&self, campaign: &CampaignRow, agent_id: String) -> Result<(), crate::store::StoreError> {
        if !self.busy().insert(agent_id.clone()) {
            return Ok(());
        }
        let (id, agent, now) = (campaign.id, agent_id.clone(), self.inner.clock.now());
        let started = self
            .inner
            .store
            .blocking(move |s| s.start_campaign_pc(id, &agent, &now))
            .await;
        if !matches!(started, Ok(true)) {
            self.busy().remove(&agent_id);
            return started.map(|_| ());
        }
        tracing::info!(campaign = id, agent = %agent_id, version = %campaign.version, "update campaign starts an update");
        let (this, campaign) = (self.clone(), campaign.clone());
        tokio::spawn(async move {
            let ended = tokio::select! {
                ended = this.update(&campaign, &agent_id) => ended,
                () = this.inner.shutdown.cancelled() => None,
            };
            if let Some(ended) = ended
                && !this.inner.shutdown.is_cancelled()
                && let Err(e) = this.record(&campaign, &agent_id, &ended).await
            {
                tracing::warn!(campaign = campaign.id, agent = %agent_id, "could not record an update's outcome: {e}");
            }
            this.busy().remove(&agent_id);
        });
        Ok(())
    }

    /// Runs one update; `None` when its outcome is still to come (the agent took the
    /// build but its report did not arrive in time: `orphan` picks it up later).
    async fn update(&self, campaign: &CampaignRow, agent_id: &str) -> Option<Ended> {
        let updates = self.inner.forwarder.updates();
        let before = updates.last_report(agent_id).map_or(0, |r| r.seq);
        let Ok(target) = AgentId::parse(agent_id) else {
            return Some(Ended::Failed(format!("{agent_id:?} is not an agent id")));
        };
        let who = Principal::server(format!(
            "update campaign {}: kenny-agent {}",
            campaign.id, campaign.version
        ));
        let mut args = Map::new();
        args.insert("version".into(), json!(campaign.version));
        let result = self.inner.forwarder.forward(&who, &target, UPDATE_TOOL, args).await;
        let failure = match result {
            Ok(_) => return Some(Ended::Kept),
            Err(f) => f,
        };
        // The agent's own report, when one came for this order, says what happened.
        let report = updates
            .last_report(agent_id)
            .filter(|r| r.seq > before && r.version == campaign.version);
        if let Some(r) = report {
            return Some(match r.report.outcome {
                Outcome::Succeeded => Ended::Kept,
                Outcome::RolledBack => Ended::RolledBack(r.report.reason),
            });
        }
        classify(&failure)
    }

    /// Records how an update ended on the PC's row (it must still be `updating`).
    async fn record(
        &self,
        campaign: &CampaignRow,
        agent_id: &str,
        ended: &Ended,
    ) -> Result<(), crate::store::StoreError> {
        let id = campaign.id;
        let pcs = self.inner.store.blocking(move |s| s.campaign_pcs(id)).await?;
        let Some(pc) = pcs.into_iter().find(|p| p.agent_id == agent_id) else {
            return Ok(());
        };
        let (to, rollback, why) = plan::after(ended, &campaign.version, pc.rollbacks, pc.attempts);
        // A PC that was waiting when its campaign was cancelled is not tried again.
        let to = if to == Status::Pending || to == Status::RolledBack {
            let state = self.inner.store.blocking(move |s| s.campaign(id)).await?;
            if state.is_some_and(|c| c.state == "cancelled") {
                Status::Skipped
            } else {
                to
            }
        } else {
            to
        };
        tracing::info!(campaign = id, agent = %agent_id, status = to.as_str(), %why, "update campaign: an update ended");
        self.settle(id, agent_id, Status::Updating.as_str(), to, rollback, &why)
            .await?;
        Ok(())
    }

    /// An `updating` PC with no update running here: its stored report settles it, or
    /// once no report can come any more its outcome is unknown.
    async fn orphan(&self, campaign: &CampaignRow, pc: &CampaignPc) -> Result<(), crate::store::StoreError> {
        let Some(started) = pc.started_at.clone() else {
            return self
                .record(campaign, &pc.agent_id, &Ended::Unknown("no start time".into()))
                .await;
        };
        let agent = pc.agent_id.clone();
        let records = self.inner.store.blocking(move |s| s.agent_updates(&agent, 20)).await?;
        let reported = records
            .iter()
            .filter(|r| r.to_version == campaign.version && r.at >= started)
            .find_map(|r| match r.outcome.as_str() {
                "succeeded" => Some(Ended::Kept),
                "rolled_back" => Some(Ended::RolledBack(r.detail.clone())),
                _ => None,
            });
        let since = crate::clock::parse(&started)
            .map(|at| (self.inner.clock.now_utc() - at).unsigned_abs())
            .unwrap_or(plan::REPORT_WAIT);
        match plan::orphan(reported, since) {
            Some(ended) => self.record(campaign, &pc.agent_id, &ended).await,
            None => Ok(()),
        }
    }
}

/// What a failed call without the agent's report means for the PC.
fn classify(failure: &CallFailure) -> Option<Ended> {
    let why = failure.to_string();
    let offline = failure.code == ErrorCode::Offline.as_str();
    if failure.refused && offline {
        return Some(Ended::NotStarted(why));
    }
    if failure.refused {
        return Some(Ended::Failed(why));
    }
    if failure.code == ErrorCode::Timeout.as_str() {
        // Staged and restarted, report not yet in: it may still come.
        return None;
    }
    if offline {
        return Some(Ended::Unknown(why));
    }
    Some(Ended::Failed(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_without_a_report_are_told_apart_by_code() {
        let refused = |code| CallFailure::refusal(code, "m");
        let failed = |code| CallFailure::new(code, "m");
        assert!(matches!(
            classify(&refused(ErrorCode::Offline)),
            Some(Ended::NotStarted(_))
        ));
        assert!(matches!(
            classify(&refused(ErrorCode::NotFound)),
            Some(Ended::Failed(_))
        ));
        assert!(matches!(classify(&failed(ErrorCode::Offline)), Some(Ended::Unknown(_))));
        assert_eq!(classify(&failed(ErrorCode::Timeout)), None);
        assert!(matches!(
            classify(&failed(ErrorCode::ExecFailed)),
            Some(Ended::Failed(_))
        ));
    }
}
