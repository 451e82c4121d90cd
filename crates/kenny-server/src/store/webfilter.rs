//! The web filter's tables: each PC's configuration, what the server last applied and
//! last saw there, the list sources with their last good copies, and the web activity
//! kept from PCs that record it.

use super::db::{Row, args};
use super::{Result, Store};

/// A PC's stored configuration (JSON, read by `webfilter::config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterConfigRow {
    pub agent_id: String,
    pub config: String,
    pub updated_at: String,
    pub updated_by: String,
}

/// What the server applied to a PC and what it last saw there.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FilterStateRow {
    pub agent_id: String,
    /// The hash of the list in force; `None` after a clear (or before any push).
    pub applied_hash: Option<String>,
    pub applied_count: i64,
    /// When the last push (apply or clear) succeeded; `None`: never pushed.
    pub applied_at: Option<String>,
    /// Who pushed it: a user name, or `kenny` for the server's own pushes.
    pub applied_by: Option<String>,
    /// Why: the call, or the rule that made the server push.
    pub applied_rule: Option<String>,
    pub observed_hash: Option<String>,
    pub observed_active: Option<bool>,
    pub observed_at: Option<String>,
    /// The last push that failed or was refused (over the cap), and when.
    pub problem: Option<String>,
    pub problem_at: Option<String>,
    /// Whether the list in force came with browsers' DNS-over-HTTPS turned off.
    pub applied_doh: bool,
}

/// A list source as stored, without its list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceRow {
    pub id: i64,
    pub category: String,
    pub url: String,
    pub refresh_minutes: i64,
    #[serde(skip)]
    pub etag: Option<String>,
    #[serde(skip)]
    pub last_modified: Option<String>,
    pub domain_count: i64,
    /// When the list in use arrived.
    pub fetched_at: Option<String>,
    /// The last attempt, good or not.
    pub checked_at: Option<String>,
    /// Why the last attempt failed; `None` when it went well.
    pub error: Option<String>,
    pub created_by: String,
    pub created_at: String,
}

/// How a fetch ended, to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceFetch {
    /// A new list: it replaces the last good one.
    Fresh {
        domains: Vec<String>,
        etag: Option<String>,
        last_modified: Option<String>,
    },
    /// The server said the list has not changed.
    Unchanged,
    /// The attempt failed; the last good list stays.
    Failed(String),
}

/// One domain of a PC's web activity.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ActivityRow {
    pub domain: String,
    pub first_seen: String,
    pub last_seen: String,
    pub hits: i64,
    /// Why it is flagged (`category social`, `watch entry example.com`), if it is.
    pub flag: Option<String>,
}

const SOURCE_COLUMNS: &str = "id, category, url, refresh_minutes, etag, last_modified, domain_count, fetched_at, \
     checked_at, error, created_by, created_at";

fn source_row(r: &Row) -> Result<SourceRow> {
    Ok(SourceRow {
        id: r.get(0)?,
        category: r.get(1)?,
        url: r.get(2)?,
        refresh_minutes: r.get(3)?,
        etag: r.get(4)?,
        last_modified: r.get(5)?,
        domain_count: r.get(6)?,
        fetched_at: r.get(7)?,
        checked_at: r.get(8)?,
        error: r.get(9)?,
        created_by: r.get(10)?,
        created_at: r.get(11)?,
    })
}

impl Store {
    pub fn filter_configs(&self) -> Result<Vec<FilterConfigRow>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT agent_id, config, updated_at, updated_by FROM webfilter_configs ORDER BY agent_id",
                args![],
                |r| {
                    Ok(FilterConfigRow {
                        agent_id: r.get(0)?,
                        config: r.get(1)?,
                        updated_at: r.get(2)?,
                        updated_by: r.get(3)?,
                    })
                },
            )
        })
    }

    pub fn put_filter_config(&self, row: &FilterConfigRow) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO webfilter_configs (agent_id, config, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (agent_id) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at,
                 updated_by = excluded.updated_by",
                args![&row.agent_id, &row.config, &row.updated_at, &row.updated_by],
            )?;
            Ok(())
        })
    }

    pub fn filter_states(&self) -> Result<Vec<FilterStateRow>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT agent_id, applied_hash, applied_count, applied_at, applied_by, applied_rule, observed_hash,
                        observed_active, observed_at, problem, problem_at, applied_doh FROM webfilter_state",
                args![],
                |r| {
                    Ok(FilterStateRow {
                        agent_id: r.get(0)?,
                        applied_hash: r.get(1)?,
                        applied_count: r.get(2)?,
                        applied_at: r.get(3)?,
                        applied_by: r.get(4)?,
                        applied_rule: r.get(5)?,
                        observed_hash: r.get(6)?,
                        observed_active: r.get(7)?,
                        observed_at: r.get(8)?,
                        problem: r.get(9)?,
                        problem_at: r.get(10)?,
                        applied_doh: r.get(11)?,
                    })
                },
            )
        })
    }

    pub fn put_filter_state(&self, s: &FilterStateRow) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO webfilter_state (agent_id, applied_hash, applied_count, applied_at, applied_by, applied_rule,
                     observed_hash, observed_active, observed_at, problem, problem_at, applied_doh)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (agent_id) DO UPDATE SET applied_hash = excluded.applied_hash,
                     applied_count = excluded.applied_count, applied_at = excluded.applied_at,
                     applied_by = excluded.applied_by, applied_rule = excluded.applied_rule,
                     observed_hash = excluded.observed_hash, observed_active = excluded.observed_active,
                     observed_at = excluded.observed_at, problem = excluded.problem, problem_at = excluded.problem_at,
                     applied_doh = excluded.applied_doh",
                args![
                    &s.agent_id,
                    s.applied_hash.as_deref(),
                    s.applied_count,
                    s.applied_at.as_deref(),
                    s.applied_by.as_deref(),
                    s.applied_rule.as_deref(),
                    s.observed_hash.as_deref(),
                    s.observed_active,
                    s.observed_at.as_deref(),
                    s.problem.as_deref(),
                    s.problem_at.as_deref(),
                    s.applied_doh
                ],
            )?;
            Ok(())
        })
    }

    pub fn list_sources(&self) -> Result<Vec<SourceRow>> {
        self.read_db(|c| {
            c.query_all(
                &format!("SELECT {SOURCE_COLUMNS} FROM webfilter_sources ORDER BY id"),
                args![],
                source_row,
            )
        })
    }

    /// Every source's last good list: (category, url, domains).
    pub fn source_lists(&self) -> Result<Vec<(String, String, Vec<String>)>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT category, url, domains FROM webfilter_sources WHERE domains IS NOT NULL ORDER BY id",
                args![],
                |r| {
                    let text: String = r.get(2)?;
                    Ok((r.get(0)?, r.get(1)?, text.lines().map(str::to_owned).collect()))
                },
            )
        })
    }

    pub fn add_source(&self, category: &str, url: &str, refresh_minutes: i64, by: &str, at: &str) -> Result<SourceRow> {
        self.write_db(|c| {
            let added = c.query_opt(
                &format!(
                    "INSERT INTO webfilter_sources (category, url, refresh_minutes, created_by, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (url) DO NOTHING RETURNING {SOURCE_COLUMNS}"
                ),
                args![category, url, refresh_minutes, by, at],
                source_row,
            )?;
            added.ok_or_else(|| {
                super::StoreError::Conflict(format!("{url} is already a list source; remove it first to change it"))
            })
        })
    }

    pub fn source(&self, id: i64) -> Result<Option<SourceRow>> {
        self.read_db(|c| {
            c.query_opt(
                &format!("SELECT {SOURCE_COLUMNS} FROM webfilter_sources WHERE id = ?1"),
                args![id],
                source_row,
            )
        })
    }

    pub fn remove_source(&self, id: i64) -> Result<bool> {
        self.write_db(|c| Ok(c.execute("DELETE FROM webfilter_sources WHERE id = ?1", args![id])? > 0))
    }

    /// Records a fetch: a fresh list replaces the last good one; a failure keeps it and
    /// says why.
    pub fn record_fetch(&self, id: i64, at: &str, fetch: &SourceFetch) -> Result<()> {
        self.write_db(|c| {
            match fetch {
                SourceFetch::Fresh {
                    domains,
                    etag,
                    last_modified,
                } => c.execute(
                    "UPDATE webfilter_sources SET domains = ?2, domain_count = ?3, etag = ?4, last_modified = ?5,
                         fetched_at = ?6, checked_at = ?6, error = NULL WHERE id = ?1",
                    args![
                        id,
                        domains.join("\n"),
                        domains.len(),
                        etag.as_deref(),
                        last_modified.as_deref(),
                        at
                    ],
                )?,
                SourceFetch::Unchanged => c.execute(
                    "UPDATE webfilter_sources SET checked_at = ?2, error = NULL WHERE id = ?1",
                    args![id, at],
                )?,
                SourceFetch::Failed(why) => c.execute(
                    "UPDATE webfilter_sources SET checked_at = ?2, error = ?3 WHERE id = ?1",
                    args![id, at, why],
                )?,
            };
            Ok(())
        })
    }

    /// Keeps a report's domains: a domain seen again widens its first and last sight
    /// and takes the newer report's visit count (each report covers the day before it).
    /// Returns the rows flagged now that were not flagged before (to alert on once).
    pub fn record_activity(&self, agent_id: &str, at: &str, rows: &[ActivityRow]) -> Result<Vec<ActivityRow>> {
        self.write_db(|c| {
            c.in_tx(|tx| {
                let mut newly = Vec::new();
                for r in rows.iter().filter(|r| r.flag.is_some()) {
                    let flagged_before: Option<bool> = tx.query_opt(
                        "SELECT CASE WHEN flag IS NULL THEN 0 ELSE 1 END FROM web_activity WHERE agent_id = ?1 AND domain = ?2",
                        args![agent_id, &r.domain],
                        |row| row.get(0),
                    )?;
                    if flagged_before != Some(true) {
                        newly.push(r.clone());
                    }
                }
                // The times are RFC 3339 text, so the earlier of two is the smaller string.
                for r in rows {
                    tx.execute(
                        "INSERT INTO web_activity (agent_id, domain, first_seen, last_seen, hits, flag, recorded_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT (agent_id, domain) DO UPDATE SET
                             first_seen = CASE WHEN excluded.first_seen < web_activity.first_seen
                                 THEN excluded.first_seen ELSE web_activity.first_seen END,
                             last_seen = CASE WHEN excluded.last_seen > web_activity.last_seen
                                 THEN excluded.last_seen ELSE web_activity.last_seen END,
                             hits = excluded.hits, flag = excluded.flag, recorded_at = excluded.recorded_at",
                        args![
                            agent_id,
                            &r.domain,
                            &r.first_seen,
                            &r.last_seen,
                            r.hits,
                            r.flag.as_deref(),
                            at
                        ],
                    )?;
                }
                Ok(newly)
            })
        })
    }

    /// A PC's domains last seen at or after `since`, most recent first.
    pub fn activity(&self, agent_id: &str, since: &str, flagged_only: bool, limit: u32) -> Result<Vec<ActivityRow>> {
        self.read_db(|c| {
            c.query_all(
                "SELECT domain, first_seen, last_seen, hits, flag FROM web_activity
                 WHERE agent_id = ?1 AND last_seen >= ?2 AND (CAST(?3 AS BIGINT) = 0 OR flag IS NOT NULL)
                 ORDER BY last_seen DESC, domain LIMIT ?4",
                args![agent_id, since, flagged_only, limit],
                |r| {
                    Ok(ActivityRow {
                        domain: r.get(0)?,
                        first_seen: r.get(1)?,
                        last_seen: r.get(2)?,
                        hits: r.get(3)?,
                        flag: r.get(4)?,
                    })
                },
            )
        })
    }

    /// Drops activity last seen before `before`; how many rows went.
    pub fn prune_activity(&self, before: &str) -> Result<usize> {
        self.write_db(|c| Ok(c.execute("DELETE FROM web_activity WHERE last_seen < ?1", args![before])? as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(domain: &str, last_seen: &str, flag: Option<&str>) -> ActivityRow {
        ActivityRow {
            domain: domain.into(),
            first_seen: "2026-12-01T08:00:00.000Z".into(),
            last_seen: last_seen.into(),
            hits: 2,
            flag: flag.map(str::to_owned),
        }
    }

    #[test]
    fn activity_widens_its_times_and_a_flag_is_new_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let at = "2026-12-01T12:00:00.000Z";
        let first = [
            row("casino.example", "2026-12-01T09:00:00.000Z", Some("category gambling")),
            row("plain.example", "2026-12-01T09:00:00.000Z", None),
        ];
        let newly = store.record_activity("pc", at, &first).unwrap();
        assert_eq!(
            newly.iter().map(|r| r.domain.as_str()).collect::<Vec<_>>(),
            ["casino.example"]
        );
        // The next report repeats it: nothing new to alert on, the last sight moves on.
        let again = [row(
            "casino.example",
            "2026-12-01T11:00:00.000Z",
            Some("category gambling"),
        )];
        assert!(store.record_activity("pc", at, &again).unwrap().is_empty());
        let kept = store.activity("pc", "2026-12-01T00:00:00.000Z", true, 10).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].last_seen, "2026-12-01T11:00:00.000Z");
        assert_eq!(kept[0].first_seen, "2026-12-01T08:00:00.000Z");
        // Another PC's activity is its own.
        assert!(
            store
                .activity("other", "2026-12-01T00:00:00.000Z", false, 10)
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.prune_activity("2026-12-01T10:00:00.000Z").unwrap(), 1);
    }
}
