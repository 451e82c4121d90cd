//! Health in storage: the operator's thresholds (one row, JSON) and each PC's latest
//! assessment (JSON, with its status beside it for queries).

use rusqlite::{OptionalExtension, params};

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
        self.read(|c| {
            Ok(c.query_row(
                "SELECT thresholds, updated_by, updated_at FROM health_thresholds WHERE id = 1",
                [],
                |r| {
                    Ok(StoredThresholds {
                        thresholds_json: r.get(0)?,
                        updated_by: r.get(1)?,
                        updated_at: r.get(2)?,
                    })
                },
            )
            .optional()?)
        })
    }

    pub fn save_health_thresholds(&self, t: &StoredThresholds) -> Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO health_thresholds (id, thresholds, updated_by, updated_at) VALUES (1, ?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET thresholds = excluded.thresholds,
                 updated_by = excluded.updated_by, updated_at = excluded.updated_at",
                params![t.thresholds_json, t.updated_by, t.updated_at],
            )?;
            Ok(())
        })
    }

    /// Every stored assessment: (agent_id, JSON).
    pub fn assessments(&self) -> Result<Vec<(String, String)>> {
        self.read(|c| {
            let mut stmt = c.prepare("SELECT agent_id, assessment FROM agent_health ORDER BY agent_id")?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// How many PCs are at each health status.
    pub fn health_counts(&self) -> Result<Vec<(String, i64)>> {
        self.read(|c| {
            let mut stmt = c.prepare("SELECT status, COUNT(*) FROM agent_health GROUP BY status")?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// Replaces the stored assessments of these PCs, in one transaction.
    pub fn save_assessments(&self, rows: &[HealthRow]) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut upsert = tx.prepare_cached(UPSERT_HEALTH)?;
                for row in rows {
                    upsert.execute(params![row.agent_id, row.status, row.assessment_json])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }
}

pub(super) const UPSERT_HEALTH: &str = "INSERT INTO agent_health (agent_id, status, assessment) VALUES (?1, ?2, ?3)
    ON CONFLICT (agent_id) DO UPDATE SET status = excluded.status, assessment = excluded.assessment";
