//! Update campaigns: one release pinned to a set of PCs, and what became of it on each
//! PC. Every change of a PC's status is a conditional UPDATE, so the rollout engine and
//! an operator pausing or cancelling never overwrite each other's decision.

use super::db::{Row, args};
use super::{Result, Store, StoreError};

/// Longest reason kept for one PC (parts of it come from the agent).
const MAX_DETAIL: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CampaignRow {
    pub id: i64,
    pub version: String,
    /// `all`, `channel:<name>` or `list`.
    pub target: String,
    pub max_parallel: u32,
    pub state: String,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CampaignPc {
    pub agent_id: String,
    pub status: String,
    pub attempts: u32,
    pub rollbacks: u32,
    pub detail: String,
    /// When the current or last attempt started.
    pub started_at: Option<String>,
    pub updated_at: String,
    /// The PC is still registered here (a removed one can never be updated).
    #[serde(skip)]
    pub known: bool,
}

/// A campaign to store, with the PCs its target resolved to.
#[derive(Debug, Clone)]
pub struct NewCampaign {
    pub version: String,
    pub target: String,
    pub max_parallel: u32,
    pub created_by: String,
    pub now: String,
    pub agents: Vec<String>,
}

/// One PC's move from one status to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcChange<'a> {
    pub from: &'a str,
    pub to: &'a str,
    /// The move counts one more rollback.
    pub rollback: bool,
    pub detail: &'a str,
}

const CAMPAIGN_COLUMNS: &str =
    "SELECT id, version, target, max_parallel, state, created_by, created_at, updated_at FROM update_campaigns";

fn campaign(r: &Row) -> Result<CampaignRow> {
    Ok(CampaignRow {
        id: r.get(0)?,
        version: r.get(1)?,
        target: r.get(2)?,
        max_parallel: r.get(3)?,
        state: r.get(4)?,
        created_by: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

impl Store {
    /// Stores a campaign and one `pending` row per PC, in one transaction.
    pub fn create_campaign(&self, new: &NewCampaign) -> Result<i64> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let id: i64 = tx.query_one(
                    "INSERT INTO update_campaigns (version, target, max_parallel, state, created_by, created_at, updated_at)
                     VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?5) RETURNING id",
                    args![&new.version, &new.target, new.max_parallel, &new.created_by, &new.now],
                    |r| r.get(0),
                )?;
                for agent in &new.agents {
                    tx.execute(
                        "INSERT INTO update_campaign_pcs (campaign_id, agent_id, status, updated_at)
                         VALUES (?1, ?2, 'pending', ?3) ON CONFLICT (campaign_id, agent_id) DO NOTHING",
                        args![id, agent, &new.now],
                    )?;
                }
                Ok(id)
            })
        })
    }

    /// Every campaign, newest first.
    pub fn campaigns(&self) -> Result<Vec<CampaignRow>> {
        self.read_db(|c| c.query_all(&format!("{CAMPAIGN_COLUMNS} ORDER BY id DESC"), args![], campaign))
    }

    /// The campaigns the engine works on: running, and stopped ones with a PC still
    /// updating (its outcome is still to be recorded).
    pub fn active_campaigns(&self) -> Result<Vec<CampaignRow>> {
        self.read_db(|c| {
            c.query_all(
                &format!(
                    "{CAMPAIGN_COLUMNS} WHERE state = 'running' OR id IN
                     (SELECT campaign_id FROM update_campaign_pcs WHERE status = 'updating') ORDER BY id"
                ),
                args![],
                campaign,
            )
        })
    }

    pub fn campaign(&self, id: i64) -> Result<Option<CampaignRow>> {
        self.read_db(|c| c.query_opt(&format!("{CAMPAIGN_COLUMNS} WHERE id = ?1"), args![id], campaign))
    }

    /// A campaign's PCs, by id.
    pub fn campaign_pcs(&self, id: i64) -> Result<Vec<CampaignPc>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT p.agent_id, p.status, p.attempts, p.rollbacks, p.detail, p.started_at, p.updated_at,
                        CASE WHEN a.agent_id IS NULL THEN 0 ELSE 1 END
                 FROM update_campaign_pcs p LEFT JOIN agents a ON a.agent_id = p.agent_id
                 WHERE p.campaign_id = ?1 ORDER BY p.agent_id",
                args![id],
                |r| {
                    Ok(CampaignPc {
                        agent_id: r.get(0)?,
                        status: r.get(1)?,
                        attempts: r.get(2)?,
                        rollbacks: r.get(3)?,
                        detail: r.get(4)?,
                        started_at: r.get(5)?,
                        updated_at: r.get(6)?,
                        known: r.get(7)?,
                    })
                },
            )
        })
    }

    /// Moves a campaign from one of `from` to `to`; the error says why it cannot.
    /// Cancelling also marks its pending PCs `skipped`, in the same transaction.
    pub fn set_campaign_state(&self, id: i64, from: &[&str], to: &str, now: &str) -> Result<CampaignRow> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let refused = |current: &str| {
                    StoreError::Conflict(format!(
                        "campaign {id} is {current}; only a campaign that is {} can become {to}",
                        from.join(" or ")
                    ))
                };
                let current: Option<String> =
                    tx.query_opt("SELECT state FROM update_campaigns WHERE id = ?1", args![id], |r| r.get(0))?;
                let Some(current) = current else {
                    return Err(StoreError::NotFound(format!(
                        "no update campaign {id}; GET /api/campaigns lists them"
                    )));
                };
                if !from.contains(&current.as_str()) {
                    return Err(refused(&current));
                }
                // Only from the state just read: on PostgreSQL the read takes no lock,
                // so another replica may have moved the campaign since.
                let moved = tx.execute(
                    "UPDATE update_campaigns SET state = ?2, updated_at = ?3 WHERE id = ?1 AND state = ?4",
                    args![id, to, now, &current],
                )?;
                if moved == 0 {
                    let now_state: String =
                        tx.query_one("SELECT state FROM update_campaigns WHERE id = ?1", args![id], |r| r.get(0))?;
                    return Err(refused(&now_state));
                }
                if to == "cancelled" {
                    tx.execute(
                        "UPDATE update_campaign_pcs SET status = 'skipped', detail = 'the campaign was cancelled', updated_at = ?2
                         WHERE campaign_id = ?1 AND status IN ('pending', 'rolled_back')",
                        args![id, now],
                    )?;
                }
                tx.query_one(&format!("{CAMPAIGN_COLUMNS} WHERE id = ?1"), args![id], campaign)
            })
        })
    }

    /// The engine's start of an update: pending → updating, only while the campaign
    /// runs (a PC that rolled back once waits as `rolled_back`). `false` when a pause, a cancel or another start got there first.
    pub fn start_campaign_pc(&self, id: i64, agent_id: &str, now: &str) -> Result<bool> {
        self.write_db(|c| {
            let changed = c.execute(
                "UPDATE update_campaign_pcs SET status = 'updating', attempts = attempts + 1, started_at = ?3,
                        detail = 'updating', updated_at = ?3
                 WHERE campaign_id = ?1 AND agent_id = ?2 AND status IN ('pending', 'rolled_back')
                   AND (SELECT state FROM update_campaigns WHERE id = ?1) = 'running'",
                args![id, agent_id, now],
            )?;
            Ok(changed == 1)
        })
    }

    /// Records a PC's new status, only if it still has the status the engine decided
    /// from. `false` when the row had moved on meanwhile.
    pub fn settle_campaign_pc(&self, id: i64, agent_id: &str, change: &PcChange<'_>, now: &str) -> Result<bool> {
        let detail: String = change.detail.chars().take(MAX_DETAIL).collect();
        self.write_db(|c| {
            let changed = c.execute(
                "UPDATE update_campaign_pcs SET status = ?4, rollbacks = rollbacks + ?5, detail = ?6, updated_at = ?7
                 WHERE campaign_id = ?1 AND agent_id = ?2 AND status = ?3",
                args![id, agent_id, change.from, change.to, change.rollback, &detail, now],
            )?;
            Ok(changed == 1)
        })
    }

    /// A running campaign with nothing left to do becomes `finished`.
    pub fn finish_campaign(&self, id: i64, now: &str) -> Result<bool> {
        self.write_db(|c| {
            let changed = c.execute(
                "UPDATE update_campaigns SET state = 'finished', updated_at = ?2
                 WHERE id = ?1 AND state = 'running' AND NOT EXISTS
                   (SELECT 1 FROM update_campaign_pcs WHERE campaign_id = ?1 AND status IN ('pending', 'rolled_back', 'updating'))",
                args![id, now],
            )?;
            Ok(changed == 1)
        })
    }

    /// Puts an update channel on a PC.
    pub fn set_agent_channel(&self, agent_id: &str, channel: &str) -> Result<()> {
        self.write_db(|c| {
            let changed = c.execute(
                "UPDATE agents SET channel = ?2 WHERE agent_id = ?1",
                args![agent_id, channel],
            )?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!(
                    "no agent with id {agent_id:?}; GET /api/agents lists them"
                )));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(agents: &[&str]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for a in agents {
            store.create_agent(a, "hash", "2026-01-01T00:00:00.000Z").unwrap();
        }
        (dir, store)
    }

    fn change<'a>(from: &'a str, to: &'a str, rollback: bool) -> PcChange<'a> {
        PcChange {
            from,
            to,
            rollback,
            detail: "why",
        }
    }

    fn new(agents: &[&str]) -> NewCampaign {
        NewCampaign {
            version: "0.2.0".into(),
            target: "all".into(),
            max_parallel: 1,
            created_by: "root".into(),
            now: "2026-01-01T00:00:00.000Z".into(),
            agents: agents.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    #[test]
    fn a_paused_or_cancelled_campaign_starts_nothing_and_cancel_skips_the_pending() {
        let (_d, store) = store_with(&["pc-a", "pc-b"]);
        let id = store.create_campaign(&new(&["pc-a", "pc-b"])).unwrap();
        let t = "2026-01-01T00:00:01.000Z";
        assert!(store.start_campaign_pc(id, "pc-a", t).unwrap());
        assert!(!store.start_campaign_pc(id, "pc-a", t).unwrap(), "already updating");
        store.set_campaign_state(id, &["running"], "paused", t).unwrap();
        assert!(!store.start_campaign_pc(id, "pc-b", t).unwrap(), "paused");
        let err = store.set_campaign_state(id, &["running"], "paused", t).unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)));
        store
            .set_campaign_state(id, &["running", "paused"], "cancelled", t)
            .unwrap();
        let pcs = store.campaign_pcs(id).unwrap();
        let status: Vec<(&str, &str)> = pcs.iter().map(|p| (p.agent_id.as_str(), p.status.as_str())).collect();
        assert_eq!(status, [("pc-a", "updating"), ("pc-b", "skipped")]);
        // The update that was running still gets its outcome recorded.
        assert!(
            store
                .settle_campaign_pc(id, "pc-a", &change("updating", "done", false), t)
                .unwrap()
        );
        assert!(
            !store.finish_campaign(id, t).unwrap(),
            "a cancelled campaign stays cancelled"
        );
        assert!(store.active_campaigns().unwrap().is_empty());
    }

    #[test]
    fn a_campaign_finishes_only_when_nothing_is_pending_or_updating() {
        let (_d, store) = store_with(&["pc-a"]);
        let id = store.create_campaign(&new(&["pc-a", "pc-gone"])).unwrap();
        let t = "2026-01-01T00:00:01.000Z";
        let pcs = store.campaign_pcs(id).unwrap();
        assert_eq!(pcs.iter().map(|p| p.known).collect::<Vec<_>>(), [true, false]);
        assert!(store.start_campaign_pc(id, "pc-a", t).unwrap());
        assert!(!store.finish_campaign(id, t).unwrap());
        assert!(
            store
                .settle_campaign_pc(id, "pc-a", &change("updating", "pending", true), t)
                .unwrap()
        );
        assert!(store.start_campaign_pc(id, "pc-a", t).unwrap());
        assert!(
            store
                .settle_campaign_pc(id, "pc-a", &change("updating", "held", true), t)
                .unwrap()
        );
        assert!(
            store
                .settle_campaign_pc(id, "pc-gone", &change("pending", "skipped", false), t)
                .unwrap()
        );
        assert!(store.finish_campaign(id, t).unwrap());
        let pc = &store.campaign_pcs(id).unwrap()[0];
        assert_eq!((pc.status.as_str(), pc.attempts, pc.rollbacks), ("held", 2, 2));
        assert_eq!(store.campaign(id).unwrap().unwrap().state, "finished");
    }
}
