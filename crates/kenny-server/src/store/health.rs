//! Health in storage: the operator's thresholds (one row, JSON) and each PC's latest
//! assessment (JSON, with its status beside it for queries).

use super::db::args;
use super::{Result, Store};

/// The thresholds as last saved: JSON (already validated), who and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredThresholds {
    pub thresholds_json: String,
    pub updated_by: String,
    pub updated_at: String,
}

/// A PC's assessment as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthRow {
    pub agent_id: String,
    pub status: &'static str,
    pub assessment_json: String,
}

impl Store {
    pub fn health_thresholds(&self) -> Result<Option<StoredThresholds>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT thresholds, updated_by, updated_at FROM health_thresholds WHERE id = 1",
                args![],
                |r| {
                    Ok(StoredThresholds {
                        thresholds_json: r.get(0)?,
                        updated_by: r.get(1)?,
                        updated_at: r.get(2)?,
                    })
                },
            )
        })
    }

    pub fn save_health_thresholds(&self, t: &StoredThresholds) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO health_thresholds (id, thresholds, updated_by, updated_at) VALUES (1, ?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET thresholds = excluded.thresholds,
                 updated_by = excluded.updated_by, updated_at = excluded.updated_at",
                args![&t.thresholds_json, &t.updated_by, &t.updated_at],
            )?;
            Ok(())
        })
    }

    /// Every stored assessment: (agent_id, JSON).
    pub fn assessments(&self) -> Result<Vec<(String, String)>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT agent_id, assessment FROM agent_health ORDER BY agent_id",
                args![],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    /// How many PCs are at each health status.
    pub fn health_counts(&self) -> Result<Vec<(String, i64)>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT status, COUNT(*) FROM agent_health GROUP BY status",
                args![],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    /// Replaces the stored assessments of these PCs, in one transaction.
    pub fn save_assessments(&self, rows: &[HealthRow]) -> Result<()> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                for row in rows {
                    tx.execute(UPSERT_HEALTH, args![&row.agent_id, row.status, &row.assessment_json])?;
                }
                Ok(())
            })
        })
    }
}

pub(super) const UPSERT_HEALTH: &str = "INSERT INTO agent_health (agent_id, status, assessment) VALUES (?1, ?2, ?3)
    ON CONFLICT (agent_id) DO UPDATE SET status = excluded.status, assessment = excluded.assessment";
