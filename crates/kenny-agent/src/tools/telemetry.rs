//! Health telemetry: a snapshot of disk, memory, uptime and OS sections, each with a status and a one-line summary.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use sysinfo::System;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::bounded::join_error_message;
use super::fs::{Volume, volumes};
use super::{ToolError, ToolResult};

/// Every section this agent can collect, in the order they appear in a snapshot.
pub const SECTIONS: &[&str] = &["disk", "memory", "uptime", "os"];

/// All sections together must finish within this; a stuck one (statfs on a hung mount)
/// is reported as failed instead of holding back the snapshot.
const COLLECT_TIME: Duration = Duration::from_secs(15);

const DISK_WARN_PERCENT: u64 = 90;
const DISK_CRIT_PERCENT: u64 = 97;
const MEMORY_WARN_PERCENT: u64 = 90;

type Section = Map<String, Value>;
type Collector = fn() -> Result<Section, String>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Crit,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Crit => "crit",
        }
    }
}

/// Collects the named sections (all when `None`). Never fails as a whole: a section
/// whose collector errors, panics or hangs comes back as `crit` with the reason.
/// Unknown names are skipped; `collect_tool` refuses them before getting here.
pub async fn collect(sections: Option<&[String]>) -> Map<String, Value> {
    let jobs: Vec<(&'static str, Collector)> = SECTIONS
        .iter()
        .filter(|known| sections.is_none_or(|wanted| wanted.iter().any(|w| w == *known)))
        .filter_map(|&name| collector(name).map(|run| (name, run)))
        .collect();
    if let Some(wanted) = sections {
        for unknown in wanted.iter().filter(|w| !SECTIONS.contains(&w.as_str())) {
            tracing::warn!(section = %unknown, "skipping unknown telemetry section");
        }
    }
    run_collectors(jobs).await
}

pub async fn collect_tool(args: &Map<String, Value>) -> ToolResult {
    let sections = requested_sections(args)?;
    let collected_at = rfc3339(SystemTime::now());
    let snapshot = collect(sections.as_deref()).await;
    Ok(json!({ "collected_at": collected_at, "snapshot": snapshot }))
}

fn requested_sections(args: &Map<String, Value>) -> Result<Option<Vec<String>>, ToolError> {
    let items = match args.get("sections") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ToolError::bad_args("`sections` must be a list of section names"));
        }
    };
    let mut names = Vec::with_capacity(items.len());
    for item in items {
        let name = item
            .as_str()
            .ok_or_else(|| ToolError::bad_args("`sections` must be a list of section names"))?;
        if !SECTIONS.contains(&name) {
            return Err(ToolError::bad_args(format!(
                "unknown telemetry section `{name}`; known sections: {}",
                SECTIONS.join(", ")
            )));
        }
        names.push(name.to_owned());
    }
    Ok(Some(names))
}

fn collector(name: &str) -> Option<Collector> {
    match name {
        "disk" => Some(disk_section),
        "memory" => Some(memory_section),
        "uptime" => Some(uptime_section),
        "os" => Some(os_section),
        _ => None,
    }
}

/// Runs every collector on its own blocking thread at once, so one slow section does
/// not delay the rest, and isolates their failures from each other.
async fn run_collectors(jobs: Vec<(&'static str, Collector)>) -> Map<String, Value> {
    let deadline = tokio::time::Instant::now() + COLLECT_TIME;
    let running: Vec<_> = jobs
        .into_iter()
        .map(|(name, run)| (name, tokio::task::spawn_blocking(run)))
        .collect();
    let mut snapshot = Map::new();
    for (name, handle) in running {
        let section = match tokio::time::timeout_at(deadline, handle).await {
            Ok(Ok(Ok(section))) => section,
            Ok(Ok(Err(reason))) => failed_section(&reason),
            Ok(Err(join)) => failed_section(&join_error_message(join)),
            Err(_) => failed_section(&format!("no answer within {}s", COLLECT_TIME.as_secs())),
        };
        snapshot.insert(name.to_owned(), Value::Object(section));
    }
    snapshot
}

fn failed_section(reason: &str) -> Section {
    section(Status::Crit, format!("collector failed: {reason}"), json!({}))
}

/// A section object: `fields` plus the `status` and `summary` every section has.
fn section(status: Status, summary: String, fields: Value) -> Section {
    let mut map = match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    map.insert("status".into(), status.as_str().into());
    map.insert("summary".into(), summary.into());
    map
}

// ---- disk ----

fn disk_section() -> Result<Section, String> {
    let volumes = volumes()?;
    let listed: Vec<Value> = volumes.iter().map(Volume::to_json).collect();
    let (status, summary) = disk_verdict(&volumes);
    Ok(section(status, summary, json!({ "volumes": listed })))
}

/// Judged on the fullest writable, fixed volume: read-only images are full by design,
/// and a full USB stick is not the PC's health.
fn disk_verdict(volumes: &[Volume]) -> (Status, String) {
    let fullest = volumes
        .iter()
        .filter(|v| !v.read_only && !v.removable)
        .max_by_key(|v| v.percent_used());
    let Some(fullest) = fullest else {
        return (Status::Warn, "no writable fixed volumes found".to_owned());
    };
    let percent = fullest.percent_used();
    let status = if percent >= DISK_CRIT_PERCENT {
        Status::Crit
    } else if percent >= DISK_WARN_PERCENT {
        Status::Warn
    } else {
        Status::Ok
    };
    let summary = format!(
        "{} {percent}% used ({} free)",
        fullest.mount,
        human_bytes(fullest.free_bytes)
    );
    (status, summary)
}

// ---- memory ----

fn memory_section() -> Result<Section, String> {
    let mut sys = System::new().map_err(|e| format!("cannot read memory information: {e}"))?;
    sys.refresh_memory();
    let total = sys.total_memory();
    if total == 0 {
        return Err("the OS reported no memory".to_owned());
    }
    // Used = not available: page cache the kernel can drop at once is not pressure.
    let used = total.saturating_sub(sys.available_memory());
    let percent = percent_of(used, total);
    let status = if percent >= MEMORY_WARN_PERCENT {
        Status::Warn
    } else {
        Status::Ok
    };
    let summary = format!("{percent}% of {} used", human_bytes(total));
    Ok(section(
        status,
        summary,
        json!({
            "total_bytes": total,
            "used_bytes": used,
            "available_bytes": sys.available_memory(),
            "percent_used": percent,
            "swap_total_bytes": sys.total_swap(),
            "swap_used_bytes": sys.used_swap(),
        }),
    ))
}

// ---- uptime ----

fn uptime_section() -> Result<Section, String> {
    let seconds = System::uptime().map_err(|e| format!("cannot read uptime: {e}"))?;
    let boot_time = System::boot_time()
        .ok()
        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
        .and_then(rfc3339);
    Ok(section(
        Status::Ok,
        uptime_text(seconds),
        json!({ "seconds": seconds, "boot_time": boot_time }),
    ))
}

fn uptime_text(seconds: u64) -> String {
    let (days, hours, minutes) = (seconds / 86_400, seconds % 86_400 / 3_600, seconds % 3_600 / 60);
    if days > 0 {
        format!("up {days}d {hours}h")
    } else if hours > 0 {
        format!("up {hours}h {minutes}m")
    } else {
        format!("up {minutes}m")
    }
}

// ---- os ----

fn os_section() -> Result<Section, String> {
    let name = System::name().ok();
    let version = System::os_version().ok();
    let kernel = System::kernel_version().ok();
    let hostname = System::host_name().ok();
    let arch = System::cpu_arch();
    let summary = format!(
        "{} {} (kernel {}) on {arch}",
        name.as_deref().unwrap_or(std::env::consts::OS),
        version.as_deref().unwrap_or("?"),
        kernel.as_deref().unwrap_or("?"),
    );
    Ok(section(
        Status::Ok,
        summary,
        json!({
            "name": name,
            "version": version,
            "kernel": kernel,
            "hostname": hostname,
            "arch": arch,
        }),
    ))
}

// ---- shared formatting ----

/// RFC 3339 in UTC, whole seconds. `None` for times the calendar cannot express, which
/// a corrupt file timestamp can produce.
pub(super) fn rfc3339(at: SystemTime) -> Option<String> {
    let nanos = match at.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).ok()?,
        Err(before) => -i128::try_from(before.duration().as_nanos()).ok()?,
    };
    let utc = OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?;
    utc.replace_nanosecond(0).ok()?.format(&Rfc3339).ok()
}

/// Rounded integer percentage; 0 when there is no whole to compare with.
fn percent_of(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    let (part, whole) = (u128::from(part), u128::from(whole));
    u64::try_from((part * 100 + whole / 2) / whole).unwrap_or(u64::MAX)
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    use crate::tools::test_args as args;

    fn assert_section_shape(name: &str, section: &Value) {
        let status = section["status"].as_str().unwrap_or_default();
        assert!(["ok", "warn", "crit"].contains(&status), "{name}: {section}");
        assert!(
            section["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{name}: {section}"
        );
    }

    #[tokio::test]
    async fn collects_every_section_by_default() {
        let snapshot = collect(None).await;
        let names: Vec<&str> = snapshot.keys().map(String::as_str).collect();
        let mut expected = SECTIONS.to_vec();
        expected.sort_unstable();
        let mut names_sorted = names.clone();
        names_sorted.sort_unstable();
        assert_eq!(names_sorted, expected);
        for (name, section) in &snapshot {
            assert_section_shape(name, section);
        }
        assert_eq!(snapshot["os"]["status"], "ok");
        assert_eq!(snapshot["os"]["arch"], System::cpu_arch());
        assert!(snapshot["memory"]["total_bytes"].as_u64().unwrap() > 0);
        assert!(snapshot["uptime"]["seconds"].as_u64().unwrap() > 0);
        assert!(snapshot["disk"]["volumes"].is_array());
    }

    #[tokio::test]
    async fn the_tool_collects_only_the_sections_asked_for() {
        let out = collect_tool(&args(json!({"sections": ["memory", "os"]})))
            .await
            .unwrap();
        let snapshot = out["snapshot"].as_object().unwrap();
        let mut names: Vec<&str> = snapshot.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["memory", "os"]);
        let stamp = out["collected_at"].as_str().unwrap();
        let parsed = OffsetDateTime::parse(stamp, &Rfc3339).unwrap();
        assert!(
            (OffsetDateTime::now_utc() - parsed).whole_seconds().abs() < 60,
            "{stamp}"
        );
        assert!(stamp.ends_with('Z'), "{stamp}");
    }

    #[tokio::test]
    async fn an_unknown_section_is_refused_with_the_known_ones() {
        let err = collect_tool(&args(json!({"sections": ["disk", "cpu"]})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(err.message.contains("`cpu`"), "{}", err.message);
        assert!(err.message.contains("disk, memory, uptime, os"), "{}", err.message);
    }

    #[tokio::test]
    async fn a_failing_collector_does_not_take_the_others_down() {
        fn panics() -> Result<Section, String> {
            panic!("sensor on fire")
        }
        fn errors() -> Result<Section, String> {
            Err("no such counter".to_owned())
        }
        let snapshot = run_collectors(vec![("boom", panics), ("bad", errors), ("os", os_section)]).await;
        assert_eq!(snapshot["boom"]["status"], "crit");
        let boom = snapshot["boom"]["summary"].as_str().unwrap();
        assert!(
            boom.starts_with("collector failed:") && boom.contains("sensor on fire"),
            "{boom}"
        );
        assert_eq!(
            snapshot["bad"],
            json!({"status": "crit", "summary": "collector failed: no such counter"})
        );
        assert_eq!(snapshot["os"]["status"], "ok");
    }

    fn volume(mount: &str, total: u64, free: u64) -> Volume {
        Volume {
            mount: mount.into(),
            fs: "ext4".into(),
            device: format!("/dev/{}", mount.len()),
            total_bytes: total,
            free_bytes: free,
            removable: false,
            read_only: false,
        }
    }

    #[test]
    fn disk_status_follows_the_fullest_writable_volume() {
        let at = |percent: u64| disk_verdict(&[volume("/", 100, 100 - percent), volume("/data", 100, 50)]).0;
        assert_eq!(at(42), Status::Ok);
        assert_eq!(at(89), Status::Ok);
        assert_eq!(at(90), Status::Warn);
        assert_eq!(at(96), Status::Warn);
        assert_eq!(at(97), Status::Crit);

        let (status, summary) = disk_verdict(&[volume("/", 1 << 30, 1 << 29), volume("/data", 100, 20)]);
        assert_eq!(status, Status::Ok);
        assert_eq!(summary, "/data 80% used (20 B free)");

        let mut snap = volume("/snap/core", 100, 0);
        snap.read_only = true;
        let mut stick = volume("/media/usb", 100, 0);
        stick.removable = true;
        let (status, summary) = disk_verdict(&[volume("/", 100, 58), snap, stick]);
        assert_eq!(status, Status::Ok, "{summary}");
        assert_eq!(summary, "/ 42% used (58 B free)");

        assert_eq!(disk_verdict(&[]).0, Status::Warn);
    }

    #[test]
    fn uptime_reads_like_a_person_would_say_it() {
        assert_eq!(uptime_text(59), "up 0m");
        assert_eq!(uptime_text(3 * 60), "up 3m");
        assert_eq!(uptime_text(2 * 3600 + 5 * 60), "up 2h 5m");
        assert_eq!(uptime_text(3 * 86_400 + 4 * 3600 + 59 * 60), "up 3d 4h");
    }

    #[test]
    fn timestamps_are_utc_rfc3339_and_never_panic() {
        assert_eq!(rfc3339(UNIX_EPOCH).as_deref(), Some("1970-01-01T00:00:00Z"));
        let later = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        assert_eq!(rfc3339(later).as_deref(), Some("2023-11-14T22:13:20Z"));
        let before = UNIX_EPOCH - Duration::from_secs(86_400);
        assert_eq!(rfc3339(before).as_deref(), Some("1969-12-31T00:00:00Z"));
        if let Some(far) = UNIX_EPOCH.checked_add(Duration::from_secs(u64::MAX / 4)) {
            assert_eq!(rfc3339(far), None);
        }
    }

    #[test]
    fn sizes_and_percentages() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(16 * (1 << 30)), "16.0 GiB");
        assert_eq!(percent_of(1, 3), 33);
        assert_eq!(percent_of(2, 3), 67);
        assert_eq!(percent_of(5, 0), 0);
    }
}
