//! Web activity kept on the server: the `web_activity` section of a PC's snapshot
//! (domains, never URLs), each domain flagged on arrival when it falls in one of the
//! PC's filter categories or under a block or watch entry. Sections arrive on the
//! tunnel's read path, so they are queued and written by a task of their own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kenny_proto::server_args::EntryKind;
use serde_json::Value;
use tokio::sync::mpsc;

use super::lists::{Catalog, suffixes};
use crate::alerts::Alerts;
use crate::clock::Clock;
use crate::store::{ActivityRow, ChangeRow, Store};

/// Sections waiting to be written; beyond this a section is dropped (and logged),
/// never waited for.
const QUEUE: usize = 64;
/// Days a domain is kept after it was last seen.
pub(super) const KEPT_DAYS: i64 = 90;
/// Most domains kept from one section (the agent sends at most 300).
const DOMAINS_PER_SECTION: usize = 500;

/// What makes a domain worth flagging on one PC.
#[derive(Debug, Clone)]
pub(crate) struct Flagger {
    pub catalog: Arc<Catalog>,
    /// Every category the PC's filter names, on now or in a schedule window.
    pub categories: BTreeSet<String>,
    pub entries: BTreeMap<String, EntryKind>,
}

impl Flagger {
    /// Why `domain` is flagged, if it is.
    pub(crate) fn flag(&self, domain: &str) -> Option<String> {
        for s in suffixes(domain) {
            match self.entries.get(s) {
                Some(EntryKind::Allow) => return None,
                Some(EntryKind::Watch) => return Some(format!("watch entry {s}")),
                Some(EntryKind::Block) => return Some(format!("block entry {s}")),
                None => {}
            }
        }
        let found = self.catalog.categories_of(domain, self.categories.iter());
        (!found.is_empty()).then(|| format!("category {}", found.join(", ")))
    }
}

/// The section's domains as rows, flagged; anything malformed is skipped.
pub(crate) fn rows(section: &Value, flagger: &Flagger) -> Vec<ActivityRow> {
    let Some(domains) = section.get("domains").and_then(Value::as_array) else {
        return Vec::new();
    };
    domains
        .iter()
        .take(DOMAINS_PER_SECTION)
        .filter_map(|d| {
            let raw = d.get("domain")?.as_str()?;
            let domain = kenny_proto::domains::normalize(raw).ok()?;
            let time = |k: &str| {
                d.get(k)
                    .and_then(Value::as_str)
                    .and_then(crate::clock::parse)
                    .map(crate::clock::format)
            };
            let (first_seen, last_seen) = (time("first_seen")?, time("last_seen")?);
            Some(ActivityRow {
                flag: flagger.flag(&domain),
                domain,
                first_seen,
                last_seen,
                hits: d.get("hits").and_then(Value::as_i64).unwrap_or(1).clamp(0, 1_000_000),
            })
        })
        .collect()
}

/// A domain flagged for the first time is a high-priority change of the PC: it alerts
/// (through the channels and silences of section `web_activity`) once, not at every
/// report that repeats it.
fn flag_changes(agent: &str, at: &str, newly: &[ActivityRow]) -> Vec<ChangeRow> {
    newly
        .iter()
        .map(|r| ChangeRow {
            id: 0,
            agent_id: agent.to_owned(),
            at: at.to_owned(),
            section: "web_activity".to_owned(),
            kind: "flagged".to_owned(),
            item: r.domain.clone(),
            detail: format!("visited {} ({})", r.domain, r.flag.as_deref().unwrap_or("flagged")),
            priority: "high".to_owned(),
        })
        .collect()
}

pub(super) struct Queue {
    tx: mpsc::Sender<(String, Vec<ActivityRow>)>,
}

impl Queue {
    pub(super) fn new(store: Arc<Store>, clock: Clock, alerts: Alerts) -> Queue {
        let (tx, mut rx) = mpsc::channel::<(String, Vec<ActivityRow>)>(QUEUE);
        tokio::spawn(async move {
            while let Some((agent, rows)) = rx.recv().await {
                let at = clock.now();
                let (id, when) = (agent.clone(), at.clone());
                match store.blocking(move |s| s.record_activity(&id, &when, &rows)).await {
                    Ok(newly) => alerts.changes(&agent, &flag_changes(&agent, &at, &newly)),
                    Err(e) => tracing::warn!(agent = %agent, "could not keep web activity: {e}"),
                }
            }
        });
        Queue { tx }
    }

    pub(super) fn offer(&self, agent: &str, section: &Value, flagger: Flagger) {
        let rows = rows(section, &flagger);
        if rows.is_empty() {
            return;
        }
        if self.tx.try_send((agent.to_owned(), rows)).is_err() {
            tracing::warn!(agent = %agent, "web activity dropped: too many sections waiting to be written");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn domains_are_flagged_by_entry_first_then_category() {
        let mut entries = BTreeMap::new();
        entries.insert("watched.example".to_owned(), EntryKind::Watch);
        entries.insert("games-at-school.roblox.com".to_owned(), EntryKind::Allow);
        let flagger = Flagger {
            catalog: Arc::new(Catalog::build(&[], 1)),
            categories: ["games".to_owned()].into(),
            entries,
        };
        assert_eq!(
            flagger.flag("cdn.watched.example").as_deref(),
            Some("watch entry watched.example")
        );
        assert_eq!(flagger.flag("www.roblox.com").as_deref(), Some("category games"));
        assert_eq!(flagger.flag("games-at-school.roblox.com"), None);
        assert_eq!(
            flagger.flag("facebook.com"),
            None,
            "social is not one of this PC's categories"
        );
        let section = json!({"domains": [
            {"domain": "WWW.Roblox.com", "first_seen": "2026-12-01T10:00:00Z", "last_seen": "2026-12-01T11:00:00Z", "hits": 4},
            {"domain": "not a name", "first_seen": "2026-12-01T10:00:00Z", "last_seen": "2026-12-01T11:00:00Z"},
            {"domain": "quiet.example", "first_seen": "yesterday", "last_seen": "2026-12-01T11:00:00Z"},
            {"domain": "plain.example", "first_seen": "2026-12-01T10:00:00Z", "last_seen": "2026-12-01T11:00:00Z", "hits": 1},
        ]});
        let rows = rows(&section, &flagger);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].domain, "www.roblox.com");
        assert_eq!(rows[0].flag.as_deref(), Some("category games"));
        assert_eq!(rows[1].flag, None);
    }
}
