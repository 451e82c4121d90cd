//! A PC's history over time, kept compactly: from each snapshot one small point (health,
//! CPU, load, memory, hottest temperature, each disk's use), not the whole snapshot.
//! Points are kept as they come for a while, then averaged into hourly and later daily
//! points, then dropped ([`Retention`]; 48 hours, 30 days and a year by default). The
//! host page draws them ([`crate::web`]), and [`forecast`] says when a disk fills at
//! its current rate.

mod downsample;
mod forecast;

pub use downsample::once as downsample_once;
pub(crate) use downsample::run as downsample_loop;
pub(crate) use forecast::{DiskForecast, forecast};

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::health::{Status, clean};
use crate::store::MetricRow;

/// How long each resolution is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Every point, as received.
    pub raw: Duration,
    /// One point an hour.
    pub hourly: Duration,
    /// One point a day; older is deleted.
    pub daily: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            raw: Duration::from_secs(48 * 3600),
            hourly: Duration::from_secs(30 * 86_400),
            daily: Duration::from_secs(365 * 86_400),
        }
    }
}

/// The point kept from one snapshot.
pub(crate) fn point(agent_id: &str, at: &str, snapshot: &Map<String, Value>, health: Status) -> MetricRow {
    let section = |name: &str| snapshot.get(name).and_then(Value::as_object);
    let number = |name: &str, field: &str| {
        section(name)
            .and_then(|s| s.get(field))
            .and_then(Value::as_f64)
            .filter(|n| n.is_finite())
    };
    let load = match (number("cpu", "load_15"), number("cpu", "cores")) {
        (Some(load), Some(cores)) if cores >= 1.0 => Some(load / cores),
        _ => None,
    };
    let temperature = section("thermals")
        .and_then(|t| t.get("sensors"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("temperature_c").and_then(Value::as_f64))
        .filter(|t| t.is_finite())
        .reduce(f64::max);
    let mut disks = BTreeMap::new();
    let volumes = section("disk").and_then(|d| d.get("volumes")).and_then(Value::as_array);
    for v in volumes.into_iter().flatten().filter_map(Value::as_object).take(16) {
        if v.get("read_only") == Some(&Value::Bool(true)) || v.get("removable") == Some(&Value::Bool(true)) {
            continue;
        }
        let (Some(mount), Some(percent)) = (
            v.get("mount").and_then(Value::as_str),
            v.get("percent_used").and_then(Value::as_f64),
        ) else {
            continue;
        };
        disks.insert(clean(mount, 120), (percent * 10.0).round() / 10.0);
    }
    MetricRow {
        agent_id: agent_id.to_owned(),
        at: at.to_owned(),
        tier: 0,
        health: Some(rank(health)),
        cpu: number("cpu", "usage_percent"),
        load,
        memory: number("memory", "percent_used"),
        temperature,
        disks: serde_json::to_string(&disks).unwrap_or_else(|_| "{}".into()),
    }
}

/// Health as a number a chart can draw (and an hour's worst can be taken of).
pub(crate) fn rank(s: Status) -> i64 {
    match s {
        Status::Ok => 0,
        Status::Unknown => 1,
        Status::Warn => 2,
        Status::Crit => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_point_keeps_the_numbers_that_matter_and_nothing_else() {
        let snap = json!({
            "cpu": {"usage_percent": 12.5, "load_15": 3.0, "cores": 2},
            "memory": {"percent_used": 41},
            "thermals": {"sensors": [{"temperature_c": 55.0}, {"temperature_c": 71.5}, {"temperature_c": "hot"}]},
            "disk": {"volumes": [
                {"mount": "/", "percent_used": 81.26},
                {"mount": "/media/usb", "percent_used": 99, "removable": true},
                {"mount": "/snap/x", "percent_used": 100, "read_only": true},
            ]},
            "installed_software": {"apps": [{"name": "a"}]},
        });
        let p = point("pc-a", "2026-01-01T00:00:00Z", snap.as_object().unwrap(), Status::Warn);
        assert_eq!(
            (p.cpu, p.load, p.memory, p.temperature),
            (Some(12.5), Some(1.5), Some(41.0), Some(71.5))
        );
        assert_eq!(p.health, Some(2));
        assert_eq!(p.disks, r#"{"/":81.3}"#);
        let empty = point("pc-a", "t", &Map::new(), Status::Ok);
        assert_eq!((empty.cpu, empty.memory, empty.disks.as_str()), (None, None, "{}"));
    }
}
