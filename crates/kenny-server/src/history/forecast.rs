//! When does a disk fill? A straight line through its recent use (least squares), if
//! it is rising and the points span long enough to mean something.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::store::MetricRow;

/// At least this many points over at least this many hours before saying anything.
const MIN_POINTS: usize = 3;
const MIN_SPAN_HOURS: f64 = 6.0;
/// A fill further away than this is no forecast worth making.
const HORIZON_DAYS: f64 = 365.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DiskForecast {
    pub mount: String,
    /// Use now, percent.
    pub percent: f64,
    /// Growth, percentage points per day.
    pub per_day: f64,
    pub days_to_full: f64,
    /// When it fills at this rate, RFC 3339.
    pub full_at: String,
}

/// A forecast for each disk filling within a year at its rate over `points`.
pub(crate) fn forecast(points: &[MetricRow]) -> Vec<DiskForecast> {
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut last_time = None;
    for p in points {
        let Some(t) = crate::clock::parse(&p.at) else { continue };
        let hours = t.unix_timestamp() as f64 / 3600.0;
        last_time = Some(t);
        let disks: BTreeMap<String, f64> = serde_json::from_str(&p.disks).unwrap_or_default();
        for (mount, percent) in disks {
            series.entry(mount).or_default().push((hours, percent));
        }
    }
    let Some(now) = last_time else { return Vec::new() };
    series
        .into_iter()
        .filter_map(|(mount, xy)| {
            let span = xy.last()?.0 - xy.first()?.0;
            if xy.len() < MIN_POINTS || span < MIN_SPAN_HOURS {
                return None;
            }
            let slope = slope(&xy)?;
            let percent = xy.last()?.1;
            if slope <= 0.0 || percent >= 100.0 {
                return None;
            }
            let days = (100.0 - percent) / slope / 24.0;
            (days <= HORIZON_DAYS).then(|| DiskForecast {
                mount,
                percent,
                per_day: (slope * 24.0 * 100.0).round() / 100.0,
                days_to_full: (days * 10.0).round() / 10.0,
                full_at: crate::clock::format(now + time::Duration::seconds_f64(days * 86_400.0)),
            })
        })
        .collect()
}

fn slope(xy: &[(f64, f64)]) -> Option<f64> {
    let n = xy.len() as f64;
    let mean_x = xy.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = xy.iter().map(|p| p.1).sum::<f64>() / n;
    let var: f64 = xy.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if var <= f64::EPSILON {
        return None;
    }
    Some(xy.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum::<f64>() / var)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hour: i64, disks: &str) -> MetricRow {
        MetricRow {
            agent_id: "pc".into(),
            at: crate::clock::format(
                crate::clock::parse("2026-06-01T00:00:00Z").unwrap() + time::Duration::hours(hour),
            ),
            tier: 0,
            health: None,
            cpu: None,
            load: None,
            memory: None,
            temperature: None,
            disks: disks.into(),
        }
    }

    #[test]
    fn a_disk_growing_a_point_a_day_from_90_fills_in_ten_days() {
        let points: Vec<MetricRow> = (0..=48)
            .step_by(12)
            .map(|h| at(h, &format!(r#"{{"/":{},"/data":50}}"#, 88.0 + h as f64 / 24.0)))
            .collect();
        let f = forecast(&points);
        assert_eq!(f.len(), 1, "/data is flat: {f:?}");
        assert_eq!(f[0].mount, "/");
        assert_eq!((f[0].percent, f[0].per_day, f[0].days_to_full), (90.0, 1.0, 10.0));
        assert_eq!(f[0].full_at, "2026-06-13T00:00:00.000Z");
    }

    #[test]
    fn too_few_points_too_short_or_shrinking_says_nothing() {
        assert!(forecast(&[at(0, r#"{"/":10}"#), at(12, r#"{"/":20}"#)]).is_empty());
        assert!(forecast(&[at(0, r#"{"/":10}"#), at(1, r#"{"/":20}"#), at(2, r#"{"/":30}"#)]).is_empty());
        assert!(forecast(&[at(0, r#"{"/":30}"#), at(12, r#"{"/":20}"#), at(24, r#"{"/":10}"#)]).is_empty());
        // A year away is no forecast.
        assert!(forecast(&[at(0, r#"{"/":10}"#), at(12, r#"{"/":10.01}"#), at(24, r#"{"/":10.02}"#)]).is_empty());
    }
}
