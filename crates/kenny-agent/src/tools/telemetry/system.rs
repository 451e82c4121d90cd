//! The machine basics: disk, memory and uptime sections.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};
use sysinfo::System;

use super::format::{human_bytes, percent_of, rfc3339};
use super::{Outcome, Status, section};
use crate::tools::fs::{Volume, volumes};

const DISK_WARN_PERCENT: u64 = 90;
const DISK_CRIT_PERCENT: u64 = 97;
const MEMORY_WARN_PERCENT: u64 = 90;

pub(super) fn disk_section() -> Outcome {
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

pub(super) fn memory_section() -> Outcome {
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

pub(super) fn uptime_section() -> Outcome {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
