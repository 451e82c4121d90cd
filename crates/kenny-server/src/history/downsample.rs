//! Keeping the history small: points older than the raw retention are averaged into
//! one point per hour, hourly points older than theirs into one per day, and daily
//! points past theirs are deleted. Runs at start-up and every quarter hour, one PC at a
//! time, each in its own transaction.
//!
//! Changes, closed alerts and their deliveries go when the daily points of their time
//! do.
//!
//! A cut-off always falls on a whole hour (or day), so every hour is merged in one go
//! and never half of it twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::Retention;
use crate::clock::Clock;
use crate::store::{MetricRow, Result, Store};

const EVERY: Duration = Duration::from_secs(15 * 60);

pub(crate) async fn run(
    store: Arc<Store>,
    clock: Clock,
    retention: Retention,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) {
    let pass = || {
        let (store, now) = (store.clone(), clock.now_utc());
        async move {
            let s = store.clone();
            match store.blocking(move |_| once(&s, now, retention)).await {
                Ok((0, 0)) => {}
                Ok((merged, pruned)) => tracing::debug!(merged, pruned, "history downsampled"),
                Err(e) => tracing::warn!(error = %e, "history not downsampled; trying again later"),
            }
        }
    };
    leader.every(EVERY, &shutdown, pass).await;
}

/// One pass; returns (PCs merged, daily points deleted).
pub fn once(store: &Store, now: OffsetDateTime, retention: Retention) -> Result<(usize, usize)> {
    let span = |d: Duration| time::Duration::try_from(d).unwrap_or(time::Duration::ZERO);
    let hour_cut = crate::clock::format(whole_hour(now - span(retention.raw)));
    let day_cut = crate::clock::format(whole_day(now - span(retention.hourly)));
    let mut merged = 0;
    for (from, cut, bucket) in [(0, &hour_cut, hour_of as fn(&str) -> String), (1, &day_cut, day_of)] {
        for agent in store.agents_with_metrics_before(from, cut)? {
            let rows = store.metrics_before(&agent, from, cut)?;
            store.merge_metrics(&agent, from, cut, &merge(&rows, from + 1, bucket))?;
            merged += 1;
        }
    }
    // What happened (changes, alerts and their deliveries) is kept as long as the
    // history that shows it.
    let oldest = crate::clock::format(now - span(retention.daily));
    let pruned = store.prune_metrics(2, &oldest)?;
    let mut gone = 0;
    loop {
        let n = store.prune_changes(&oldest, 1000)?;
        gone += n;
        if n < 1000 {
            break;
        }
    }
    gone += store.prune_alerts(&oldest)?;
    if gone > 0 {
        tracing::info!(rows = gone, before = %oldest, "pruned changes and alerts past the history's retention");
    }
    Ok((merged, pruned))
}

/// Points grouped by `bucket` of their time, each group one point of `tier`: the worst
/// health and the hottest temperature, the mean of the rest.
pub(crate) fn merge(rows: &[MetricRow], tier: i64, bucket: fn(&str) -> String) -> Vec<MetricRow> {
    let mut groups: BTreeMap<(String, String), Vec<&MetricRow>> = BTreeMap::new();
    for r in rows {
        groups.entry((r.agent_id.clone(), bucket(&r.at))).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((agent_id, at), points)| {
            let mean = |f: fn(&MetricRow) -> Option<f64>| {
                let values: Vec<f64> = points.iter().filter_map(|p| f(p)).collect();
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
            };
            let mut disks: BTreeMap<String, (f64, usize)> = BTreeMap::new();
            for p in &points {
                let map: BTreeMap<String, f64> = serde_json::from_str(&p.disks).unwrap_or_default();
                for (mount, percent) in map {
                    let e = disks.entry(mount).or_default();
                    e.0 += percent;
                    e.1 += 1;
                }
            }
            let disks: BTreeMap<String, f64> = disks
                .into_iter()
                .map(|(m, (sum, n))| (m, (sum / n as f64 * 10.0).round() / 10.0))
                .collect();
            MetricRow {
                agent_id,
                at,
                tier,
                health: points.iter().filter_map(|p| p.health).max(),
                cpu: mean(|p| p.cpu),
                load: mean(|p| p.load),
                memory: mean(|p| p.memory),
                temperature: points.iter().filter_map(|p| p.temperature).reduce(f64::max),
                disks: serde_json::to_string(&disks).unwrap_or_else(|_| "{}".into()),
            }
        })
        .collect()
}

fn whole_hour(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_time(time::Time::from_hms(t.hour(), 0, 0).unwrap_or(time::Time::MIDNIGHT))
}

fn whole_day(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_time(time::Time::MIDNIGHT)
}

/// `2026-06-04T18:23:11.000Z` → `2026-06-04T18:00:00.000Z` (times are stored in UTC,
/// in this one format).
fn hour_of(at: &str) -> String {
    format!("{}:00:00.000Z", at.get(..13).unwrap_or(at))
}

fn day_of(at: &str) -> String {
    format!("{}T00:00:00.000Z", at.get(..10).unwrap_or(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at: &str, cpu: f64, health: i64, disks: &str) -> MetricRow {
        MetricRow {
            agent_id: "pc-a".into(),
            at: at.into(),
            tier: 0,
            health: Some(health),
            cpu: Some(cpu),
            load: None,
            memory: Some(50.0),
            temperature: Some(cpu),
            disks: disks.into(),
        }
    }

    #[test]
    fn an_hour_becomes_one_point_worst_health_mean_use() {
        let rows = [
            point("2026-06-04T18:05:00.000Z", 10.0, 0, r#"{"/":40}"#),
            point("2026-06-04T18:50:00.000Z", 30.0, 3, r#"{"/":42,"/data":10}"#),
            point("2026-06-04T19:10:00.000Z", 5.0, 0, r#"{"/":43}"#),
        ];
        let merged = merge(&rows, 1, hour_of);
        assert_eq!(merged.len(), 2);
        let first = &merged[0];
        assert_eq!(first.at, "2026-06-04T18:00:00.000Z");
        assert_eq!(
            (first.tier, first.health, first.cpu, first.load),
            (1, Some(3), Some(20.0), None)
        );
        assert_eq!(first.temperature, Some(30.0));
        assert_eq!(first.disks, r#"{"/":41.0,"/data":10.0}"#);
        assert_eq!(merge(&rows, 2, day_of)[0].at, "2026-06-04T00:00:00.000Z");
    }

    #[test]
    fn a_pass_keeps_recent_points_merges_older_and_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = crate::clock::parse("2026-06-10T12:30:00Z").unwrap();
        let at = |hours: i64| crate::clock::format(now - time::Duration::hours(hours));
        let insert = |m: MetricRow| store.merge_metrics(&m.agent_id.clone(), 9, "", &[m]).unwrap();
        for hours in [1, 47, 50, 50, 24 * 40, 24 * 400] {
            let mut p = point(&at(hours), hours as f64, 0, "{}");
            if hours == 24 * 40 {
                p.tier = 1;
            }
            if hours == 24 * 400 {
                p.tier = 2;
            }
            insert(p);
        }
        let (merged, pruned) = once(&store, now, Retention::default()).unwrap();
        assert_eq!((merged, pruned), (2, 1));
        let kept = store.metrics("pc-a", "").unwrap();
        let tiers: Vec<(i64, &str)> = kept.iter().map(|m| (m.tier, &m.at[..13])).collect();
        assert_eq!(
            tiers,
            [
                (2, "2026-05-01T00"),
                (1, "2026-06-08T10"),
                (0, "2026-06-08T13"),
                (0, "2026-06-10T11")
            ],
            "{kept:?}"
        );
        // Running again changes nothing.
        assert_eq!(once(&store, now, Retention::default()).unwrap(), (0, 0));
    }
}
