//! The disk_smart section: each physical disk's own health report (SMART), temperature,
//! hours and wear.
//!
//! Linux: the disks in `<sys>/block` (not loop, zram, device-mapper, RAID or optical
//! devices), each read with `smartctl --json -H -A -n standby /dev/<disk>` when
//! smartmontools is installed and the agent runs as root (`-n standby` leaves a sleeping
//! disk asleep). Otherwise sysfs tells what it can without root: model, size, whether it
//! spins, and the temperature of NVMe drives (and SATA drives with `drivetemp`) from
//! hwmon; `health` is then `unknown` and `reason` says why.
//!
//! Windows: `Get-PhysicalDisk` (health and operational status, as the Storage
//! subsystem judges them) with `Get-StorageReliabilityCounter` per disk (temperature,
//! wear, uncorrected errors, power-on hours; administrators only).
//!
//! `health` is `ok`, `warning`, `failing` or `unknown`; the section is `crit` when a disk
//! is failing and `warn` when one has a warning (sectors remapped or pending, endurance
//! nearly used up, uncorrected errors).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, RunError, first_line};
use super::files::{read_small, sys_root};
use super::format::clip;
use super::format::{human_bytes, one_decimal};
use super::power::MAX_TEXT;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, not_collected_here, section as new_section};
use crate::tools::psjson::{number, rows_of, text};

const MAX_DISKS: usize = 32;
/// Per smartctl run; the disks are read at once, so this is also about the section's time.
const SMARTCTL_LIMIT: Duration = Duration::from_secs(8);
/// Endurance used (percent of the rated writes) from which an SSD deserves a warning.
const WEAR_WARN_PERCENT: i64 = 90;
/// Block devices that are not physical disks.
const NOT_DISKS: &[&str] = &[
    "loop", "ram", "zram", "dm-", "md", "sr", "nbd", "fd", "zd", "rbd", "drbd",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Health {
    Unknown,
    Ok,
    Warning,
    Failing,
}

impl Health {
    fn as_str(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Ok => "ok",
            Health::Warning => "warning",
            Health::Failing => "failing",
        }
    }
}

/// One disk, the same on both systems.
#[derive(Debug, Default)]
struct Disk {
    name: String,
    model: Option<String>,
    media: Option<&'static str>,
    bus: Option<String>,
    size_bytes: Option<u64>,
    health: Option<Health>,
    temperature_c: Option<f64>,
    power_on_hours: Option<i64>,
    wear_percent: Option<i64>,
    errors: Option<i64>,
    /// Why the health is what it is, in words (the failing attribute, why it is unknown).
    note: Option<String>,
}

impl Disk {
    fn health(&self) -> Health {
        self.health.unwrap_or(Health::Unknown)
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "model": self.model,
            "media": self.media,
            "bus": self.bus,
            "size_bytes": self.size_bytes,
            "health": self.health().as_str(),
            "temperature_c": self.temperature_c,
            "power_on_hours": self.power_on_hours,
            "wear_percent": self.wear_percent,
            "errors": self.errors,
            "note": self.note,
        })
    }
}

pub(super) async fn section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    // sysfs reads of a disk's hwmon send the drive a command: a hung controller must
    // block a blocking thread, never the runtime.
    let mut disks = super::off_thread("disk_smart", || sysfs_disks(&sys_root())).await?;
    if disks.is_empty() {
        return Ok(build(&disks, "sysfs", None));
    }
    if let Some(reason) = smartctl_pointless(&disks, running_as_root()) {
        return Ok(build(&disks, "sysfs", Some(reason.to_owned())));
    }
    let runs = disks.iter().map(|d| {
        let device = format!("/dev/{}", d.name);
        async move {
            command::run(
                "smartctl",
                &["--json", "-H", "-A", "-n", "standby", &device],
                SMARTCTL_LIMIT,
            )
            .await
        }
    });
    let results = futures_util::future::join_all(runs).await;
    if results.iter().any(|r| matches!(r, Err(RunError::Missing))) {
        let reason = "smartctl is not installed (package smartmontools): SMART health unknown";
        return Ok(build(&disks, "sysfs", Some(reason.to_owned())));
    }
    for (disk, result) in disks.iter_mut().zip(results) {
        match result {
            Ok(out) => apply_smartctl(disk, &out),
            Err(e) => disk.note = Some(clip(&e.describe("smartctl"), MAX_TEXT)),
        }
    }
    Ok(build(&disks, "smartctl", None))
}

/// Why running smartctl would tell nothing, if it would not.
fn smartctl_pointless(disks: &[Disk], root: bool) -> Option<&'static str> {
    if disks.iter().all(|d| d.bus.as_deref() == Some("Virtual")) {
        return Some("virtual disks have no SMART health of their own; watch the host's disks");
    }
    (!root).then_some("smartctl needs root and the agent runs as a normal user: SMART health unknown")
}

fn running_as_root() -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user.
        fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// The physical disks sysfs knows, with what it tells without root.
fn sysfs_disks(sys: &Path) -> Vec<Disk> {
    let block = sys.join("block");
    let Ok(entries) = fs::read_dir(&block) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| !NOT_DISKS.iter().any(|p| n.starts_with(p)))
        .filter(|n| !(n.starts_with("mmcblk") && n.contains("boot")))
        .take(MAX_DISKS * 4)
        .collect();
    names.sort();
    names
        .iter()
        .filter_map(|name| sysfs_disk(&block.join(name), name))
        .take(MAX_DISKS)
        .collect()
}

fn sysfs_disk(dir: &Path, name: &str) -> Option<Disk> {
    // Partitions and virtual devices have no device link; empty card readers have no size.
    let device = fs::canonicalize(dir.join("device")).ok()?;
    let sectors: u64 = read_small(&dir.join("size"))?.parse().ok()?;
    if sectors == 0 {
        return None;
    }
    let bus = bus_of(name, &device, dir);
    let media = match (bus, read_small(&dir.join("queue/rotational")).as_deref()) {
        ("Virtual", _) => None,
        ("NVMe", _) | (_, Some("0")) => Some("ssd"),
        (_, Some("1")) => Some("hdd"),
        _ => None,
    };
    Some(Disk {
        name: clip(name, MAX_TEXT),
        model: read_small(&dir.join("device/model"))
            .filter(|m| !m.is_empty())
            .map(|m| clip(&m, MAX_TEXT)),
        media,
        bus: Some(bus.to_owned()),
        size_bytes: Some(sectors.saturating_mul(512)),
        temperature_c: hwmon_temperature(&dir.join("device")),
        ..Disk::default()
    })
}

fn bus_of(name: &str, device: &Path, dir: &Path) -> &'static str {
    let subsystem = fs::canonicalize(dir.join("device/subsystem"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    if name.starts_with("nvme") {
        "NVMe"
    } else if device.to_string_lossy().contains("/usb") {
        "USB"
    } else if name.starts_with("vd") || name.starts_with("xvd") || subsystem.as_deref() == Some("virtio") {
        "Virtual"
    } else if name.starts_with("mmcblk") {
        "MMC"
    } else if read_small(&dir.join("device/vendor")).as_deref() == Some("ATA") {
        // libata disks say "ATA" as their SCSI vendor.
        "SATA"
    } else {
        "SCSI"
    }
}

/// `temp1_input` of the disk's hwmon (nvme, drivetemp), millidegrees.
fn hwmon_temperature(device: &Path) -> Option<f64> {
    let candidates = [device.to_path_buf(), device.join("hwmon")];
    candidates.iter().find_map(|dir| {
        let mut hwmons: Vec<PathBuf> = fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("hwmon"))
            .map(|e| e.path())
            .take(8)
            .collect();
        hwmons.sort();
        hwmons.iter().find_map(|h| {
            let milli: i64 = read_small(&h.join("temp1_input"))?.parse().ok()?;
            let celsius = milli as f64 / 1000.0;
            (-40.0..=150.0).contains(&celsius).then(|| one_decimal(celsius))
        })
    })
}

/// What smartctl's JSON says about `disk`. smartctl's exit status is a bit mask that is
/// non-zero for a failing disk too, so the JSON is read whatever the status.
fn apply_smartctl(disk: &mut Disk, out: &Output) {
    let Ok(report) = serde_json::from_str::<Value>(out.stdout.trim()) else {
        disk.note = Some(clip(&format!("smartctl: {}", first_line(out)), MAX_TEXT));
        return;
    };
    smartctl_figures(disk, &report);
    let findings = smartctl_findings(disk, &report);
    judge(disk, &findings);
    if disk.health.is_none() {
        disk.note = Some(no_verdict_note(&report));
    }
}

/// Model, temperature, hours, wear, as smartctl reports them for ATA, NVMe and SCSI.
fn smartctl_figures(disk: &mut Disk, report: &Value) {
    let int = |pointer: &str| report.pointer(pointer).and_then(Value::as_i64);
    if let Some(model) = ["/model_name", "/scsi_model_name"]
        .iter()
        .find_map(|p| report.pointer(p).and_then(Value::as_str))
    {
        disk.model = Some(clip(model, MAX_TEXT));
    }
    if let Some(t) = int("/temperature/current").filter(|t| (-40..=150).contains(t)) {
        disk.temperature_c = Some(t as f64);
    }
    disk.power_on_hours = int("/power_on_time/hours");
    disk.wear_percent = int("/nvme_smart_health_information_log/percentage_used")
        .or_else(|| int("/endurance_used/current_percent"))
        .or_else(|| int("/scsi_percentage_used_endurance_indicator"));
    if int("/rotation_rate") == Some(0) {
        disk.media = Some("ssd");
    }
}

/// Everything in the report that bears on health, each with its level.
fn smartctl_findings(disk: &mut Disk, report: &Value) -> Vec<(Health, String)> {
    let mut findings = Vec::new();
    match report.pointer("/smart_status/passed").and_then(Value::as_bool) {
        Some(false) => findings.push((
            Health::Failing,
            "the disk's SMART self-assessment says it is failing".into(),
        )),
        Some(true) => findings.push((Health::Ok, String::new())),
        None => {}
    }
    if let Some(table) = report.pointer("/ata_smart_attributes/table").and_then(Value::as_array) {
        ata_findings(table, disk, &mut findings);
    }
    if let Some(log) = report.get("nvme_smart_health_information_log") {
        if let Some(warning) = log.get("critical_warning").and_then(Value::as_i64).filter(|w| *w != 0) {
            findings.push((Health::Warning, format!("NVMe critical warning {warning:#04x}")));
        }
        disk.errors = log.get("media_errors").and_then(Value::as_i64);
        if let Some(n) = disk.errors.filter(|n| *n > 0) {
            findings.push((Health::Warning, format!("{n} media errors")));
        }
    }
    if let Some(wear) = disk.wear_percent.filter(|w| *w >= WEAR_WARN_PERCENT) {
        findings.push((Health::Warning, format!("{wear}% of its rated endurance used")));
    }
    findings
}

/// The worst finding is the disk's health; its words (all at that level) are the note.
fn judge(disk: &mut Disk, findings: &[(Health, String)]) {
    let worst = findings.iter().map(|(h, _)| *h).max();
    disk.health = worst;
    let words: Vec<&str> = findings
        .iter()
        .filter(|(h, w)| Some(*h) == worst && !w.is_empty())
        .map(|(_, w)| w.as_str())
        .collect();
    if !words.is_empty() {
        disk.note = Some(clip(&words.join("; "), MAX_TEXT));
    }
}

/// Why smartctl gave no health: a sleeping disk it did not wake, or its own message.
fn no_verdict_note(report: &Value) -> String {
    let messages: Vec<&str> = report
        .pointer("/smartctl/messages")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(|m| m.get("string")?.as_str()).collect())
        .unwrap_or_default();
    if messages.iter().any(|m| m.to_ascii_uppercase().contains("STANDBY")) {
        return "in standby; not woken to read SMART".to_owned();
    }
    let said = messages.first().copied().unwrap_or("no SMART status");
    clip(&format!("smartctl: {said}"), MAX_TEXT)
}

/// ATA attributes an admin acts on: remapped, pending and uncorrectable sectors, and any
/// attribute at or below its failure threshold now.
fn ata_findings(table: &[Value], disk: &mut Disk, findings: &mut Vec<(Health, String)>) {
    let raw = |id: i64| {
        table
            .iter()
            .find(|a| a.get("id").and_then(Value::as_i64) == Some(id))
            .and_then(|a| a.get("raw")?.get("value")?.as_i64())
    };
    for (id, what) in [
        (5, "sectors remapped"),
        (197, "sectors pending remap"),
        (198, "sectors uncorrectable"),
    ] {
        if let Some(n) = raw(id).filter(|n| *n > 0) {
            findings.push((Health::Warning, format!("{n} {what}")));
        }
    }
    disk.errors = match (raw(187), raw(198)) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).max(b.unwrap_or(0))),
    };
    for attribute in table.iter().take(256) {
        if attribute.get("when_failed").and_then(Value::as_str) != Some("now") {
            continue;
        }
        let name = attribute.get("name").and_then(Value::as_str).unwrap_or("an attribute");
        let prefail = attribute
            .get("flags")
            .and_then(|f| f.get("prefailure"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let health = if prefail { Health::Failing } else { Health::Warning };
        findings.push((health, clip(&format!("{name} is at its failure threshold"), MAX_TEXT)));
    }
}

/// The section from the disks read; `reason` says why health is unknown for all.
fn build(disks: &[Disk], source: &str, reason: Option<String>) -> Section {
    let count = disks.len();
    let named = |health: Health| -> Vec<&str> {
        disks
            .iter()
            .filter(|d| d.health() == health)
            .map(|d| d.name.as_str())
            .collect()
    };
    let (failing, warning, healthy) = (named(Health::Failing), named(Health::Warning), named(Health::Ok));
    let noun = if count == 1 {
        "1 disk".to_owned()
    } else {
        format!("{count} disks")
    };
    let (status, summary) = if count == 0 {
        (
            Status::Ok,
            "no physical disks visible (a virtual machine or container?)".to_owned(),
        )
    } else if !failing.is_empty() {
        let detail = disks
            .iter()
            .find(|d| d.health() == Health::Failing)
            .and_then(|d| d.note.clone())
            .unwrap_or_default();
        (
            Status::Crit,
            format!("{noun}; failing: {} ({detail}); back up now", failing.join(", ")),
        )
    } else if !warning.is_empty() {
        let detail = disks
            .iter()
            .find(|d| d.health() == Health::Warning)
            .and_then(|d| d.note.clone())
            .unwrap_or_default();
        (
            Status::Warn,
            format!("{noun}; warning: {} ({detail})", warning.join(", ")),
        )
    } else if healthy.len() == count {
        (Status::Ok, format!("{noun}, all healthy"))
    } else if let Some(reason) = &reason {
        (Status::Ok, format!("{noun} ({}); {reason}", sizes(disks)))
    } else {
        (
            Status::Ok,
            format!("{noun}: {} healthy, {} unknown", healthy.len(), count - healthy.len()),
        )
    };
    let mut fields = Map::new();
    fields.insert(
        "disks".into(),
        disks.iter().map(Disk::to_json).collect::<Vec<_>>().into(),
    );
    fields.insert("count".into(), count.into());
    fields.insert("truncated".into(), false.into());
    fields.insert("source".into(), source.into());
    if let Some(reason) = reason {
        fields.insert("reason".into(), reason.into());
    }
    new_section(status, summary, Value::Object(fields))
}

fn sizes(disks: &[Disk]) -> String {
    disks
        .iter()
        .take(4)
        .map(|d| match d.size_bytes {
            Some(size) => format!("{} {}", d.name, human_bytes(size)),
            None => d.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&WINDOWS)
}

/// Every physical disk with its reliability counters; a disk whose counters cannot be
/// read (not an administrator, a USB bridge) keeps its Storage health.
static WINDOWS: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$rows = foreach ($disk in @(Get-PhysicalDisk)) {
  $counter = $null
  $counterError = $null
  try {
    $counter = $disk | Get-StorageReliabilityCounter
  } catch {
    $counterError = $_.Exception.Message
  }
  [pscustomobject]@{
    DeviceId = $disk.DeviceId
    FriendlyName = $disk.FriendlyName
    MediaType = $disk.MediaType
    BusType = $disk.BusType
    HealthStatus = $disk.HealthStatus
    OperationalStatus = @($disk.OperationalStatus)
    Size = $disk.Size
    Temperature = $counter.Temperature
    Wear = $counter.Wear
    ReadErrorsTotal = $counter.ReadErrorsTotal
    WriteErrorsTotal = $counter.WriteErrorsTotal
    ReadErrorsUncorrected = $counter.ReadErrorsUncorrected
    WriteErrorsUncorrected = $counter.WriteErrorsUncorrected
    PowerOnHours = $counter.PowerOnHours
    CounterError = $counterError
  }
}
[pscustomobject]@{ Disks = @($rows) } | ConvertTo-Json -Compress -Depth 4
"#,
    limit: Duration::from_secs(12),
    parse: parse_windows,
};

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let Value::Object(mut all) = json_of(output)? else {
        return Err("the physical disk query printed no object; run it by hand to see why".to_owned());
    };
    let rows = rows_of(all.remove("Disks").unwrap_or(Value::Null))?;
    let disks: Vec<Disk> = rows.iter().take(MAX_DISKS).map(windows_disk).collect();
    if disks.is_empty() {
        let mut s = build(&disks, "Get-PhysicalDisk", None);
        s.insert("summary".into(), "no physical disks reported by Windows".into());
        return Ok(s);
    }
    let mut s = build(&disks, "Get-PhysicalDisk", None);
    s.insert("truncated".into(), (rows.len() > MAX_DISKS).into());
    s.insert("count".into(), rows.len().into());
    Ok(s)
}

fn windows_disk(row: &Map<String, Value>) -> Disk {
    let counter = |key: &str| number(row, key);
    let uncorrected = match (counter("ReadErrorsUncorrected"), counter("WriteErrorsUncorrected")) {
        (None, None) => None,
        (r, w) => Some(r.unwrap_or(0) + w.unwrap_or(0)),
    };
    let mut disk = Disk {
        name: text(row, "DeviceId").map_or_else(|| "disk".to_owned(), |id| clip(&format!("disk {id}"), MAX_TEXT)),
        model: text(row, "FriendlyName").map(|m| clip(&m, MAX_TEXT)),
        media: enum_word(row.get("MediaType"), MEDIA_TYPE).filter(|m| *m != "unspecified"),
        bus: enum_word(row.get("BusType"), BUS_TYPE)
            .filter(|b| *b != "Unknown")
            .map(str::to_owned),
        size_bytes: counter("Size").and_then(|s| u64::try_from(s).ok()),
        // 0 is what disks without a sensor report.
        temperature_c: counter("Temperature").filter(|t| *t > 0 && *t <= 150).map(|t| t as f64),
        power_on_hours: counter("PowerOnHours"),
        wear_percent: counter("Wear"),
        errors: uncorrected,
        ..Disk::default()
    };
    let findings = windows_findings(row, &disk);
    judge(&mut disk, &findings);
    if disk.note.is_none() {
        disk.note =
            text(row, "CounterError").map(|e| clip(&format!("reliability counters unavailable: {e}"), MAX_TEXT));
    }
    disk
}

/// The Storage subsystem's health and operational status, and what the counters show.
fn windows_findings(row: &Map<String, Value>, disk: &Disk) -> Vec<(Health, String)> {
    let mut findings = Vec::new();
    match enum_word(row.get("HealthStatus"), HEALTH_STATUS) {
        Some("Healthy") => findings.push((Health::Ok, String::new())),
        Some("Warning") => findings.push((Health::Warning, "Windows Storage reports a warning".into())),
        Some("Unhealthy") => findings.push((Health::Failing, "Windows Storage reports the disk unhealthy".into())),
        _ => {}
    }
    let operational: Vec<&'static str> = match row.get("OperationalStatus") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| enum_word(Some(v), OPERATIONAL_STATUS))
            .collect(),
        one => enum_word(one, OPERATIONAL_STATUS).into_iter().collect(),
    };
    for status in operational {
        let level = match status {
            "Predictive Failure" | "Error" | "Non-Recoverable Error" | "Failed Media" => Health::Failing,
            "Degraded" | "Stressed" | "Lost Communication" | "No Contact" | "Transient Error" => Health::Warning,
            _ => continue,
        };
        findings.push((level, format!("operational status: {status}")));
    }
    if let Some(n) = disk.errors.filter(|n| *n > 0) {
        findings.push((Health::Warning, format!("{n} uncorrected read/write errors")));
    }
    if let Some(wear) = disk.wear_percent.filter(|w| *w >= WEAR_WARN_PERCENT) {
        findings.push((Health::Warning, format!("{wear}% of its rated endurance used")));
    }
    findings
}

/// A Storage enum as PowerShell may print it: its number, or its name.
fn enum_word(value: Option<&Value>, table: &[(i64, &'static str)]) -> Option<&'static str> {
    let by_code = |code: i64| table.iter().find(|(c, _)| *c == code).map(|(_, w)| *w);
    match value? {
        Value::Number(n) => by_code(n.as_i64()?),
        Value::String(s) => match s.trim().parse::<i64>() {
            Ok(code) => by_code(code),
            Err(_) => table
                .iter()
                .find(|(_, w)| w.eq_ignore_ascii_case(s.trim()))
                .map(|(_, w)| *w),
        },
        _ => None,
    }
}

/// `MSFT_PhysicalDisk.HealthStatus`.
const HEALTH_STATUS: &[(i64, &str)] = &[(0, "Healthy"), (1, "Warning"), (2, "Unhealthy"), (5, "Unknown")];

/// `MSFT_PhysicalDisk.MediaType`, in the section's words (names as Windows prints them
/// are matched without regard to case).
const MEDIA_TYPE: &[(i64, &str)] = &[(0, "unspecified"), (3, "hdd"), (4, "ssd"), (5, "scm")];

/// `MSFT_PhysicalDisk.BusType`.
const BUS_TYPE: &[(i64, &str)] = &[
    (0, "Unknown"),
    (1, "SCSI"),
    (2, "ATAPI"),
    (3, "ATA"),
    (4, "1394"),
    (5, "SSA"),
    (6, "Fibre Channel"),
    (7, "USB"),
    (8, "RAID"),
    (9, "iSCSI"),
    (10, "SAS"),
    (11, "SATA"),
    (12, "SD"),
    (13, "MMC"),
    (14, "Virtual"),
    (15, "File Backed Virtual"),
    (16, "Storage Spaces"),
    (17, "NVMe"),
    (18, "SCM"),
    (19, "UFS"),
];

/// `MSFT_PhysicalDisk.OperationalStatus`.
const OPERATIONAL_STATUS: &[(i64, &str)] = &[
    (0, "Unknown"),
    (1, "Other"),
    (2, "OK"),
    (3, "Degraded"),
    (4, "Stressed"),
    (5, "Predictive Failure"),
    (6, "Error"),
    (7, "Non-Recoverable Error"),
    (8, "Starting"),
    (9, "Stopping"),
    (10, "Stopped"),
    (11, "In Service"),
    (12, "No Contact"),
    (13, "Lost Communication"),
    (14, "Aborted"),
    (15, "Dormant"),
    (16, "Supporting Entity in Error"),
    (17, "Completed"),
    (0xD00D, "In Maintenance Mode"),
    (0xD00E, "Transient Error"),
    (0xD011, "Failed Media"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn write(path: &Path, text: &str) {
        crate::tools::telemetry::files::put_file(path, text.as_bytes()).unwrap();
    }

    fn out(stdout: &str, success: bool) -> Output {
        Output::printed(stdout, "", success)
    }

    fn smart(fixture: &str, name: &str) -> Disk {
        let text =
            fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/disk_smart/{fixture}")))
                .unwrap();
        let mut disk = Disk {
            name: name.into(),
            ..Disk::default()
        };
        apply_smartctl(&mut disk, &out(&text, true));
        disk
    }

    #[test]
    fn a_healthy_nvme_drive() {
        let d = smart("nvme_healthy.json", "nvme0n1");
        assert_eq!(d.health(), Health::Ok);
        assert_eq!(d.model.as_deref(), Some("Samsung SSD 980 PRO 1TB"));
        assert_eq!(
            (d.temperature_c, d.power_on_hours, d.wear_percent, d.errors),
            (Some(38.0), Some(2874), Some(3), Some(0))
        );
        assert_eq!(d.note, None);
    }

    #[test]
    fn a_sata_drive_with_remapped_sectors_warns() {
        let d = smart("sata_reallocated.json", "sda");
        assert_eq!(d.health(), Health::Warning);
        assert_eq!(d.note.as_deref(), Some("8 sectors remapped; 2 sectors pending remap"));
        assert_eq!(
            (d.temperature_c, d.power_on_hours, d.errors),
            (Some(34.0), Some(31876), Some(0))
        );
        assert_eq!(d.media, None, "a spinning disk has a rotation rate");
        let section = build(&[d], "smartctl", None);
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "1 disk; warning: sda (8 sectors remapped; 2 sectors pending remap)"
        );
    }

    #[test]
    fn a_failing_drive_is_crit() {
        let d = smart("sata_failing.json", "sdb");
        assert_eq!(d.health(), Health::Failing);
        let section = build(&[d], "smartctl", None);
        assert_eq!(section["status"], "crit");
        assert!(
            section["summary"]
                .as_str()
                .unwrap()
                .starts_with("1 disk; failing: sdb (the disk's SMART self-assessment says it is failing"),
            "{section:?}"
        );
    }

    #[test]
    fn a_sleeping_or_unreadable_drive_is_unknown() {
        let d = smart("standby.json", "sdc");
        assert_eq!(d.health(), Health::Unknown);
        assert_eq!(d.note.as_deref(), Some("in standby; not woken to read SMART"));
        let mut garbled = Disk::default();
        apply_smartctl(&mut garbled, &out("Segmentation fault", false));
        assert_eq!(garbled.note.as_deref(), Some("smartctl: Segmentation fault"));
    }

    #[test]
    #[cfg(unix)]
    fn sysfs_tells_model_size_media_and_nvme_temperature() {
        let sys = tempfile::tempdir().unwrap();
        let root = sys.path();
        let devices = root.join("devices");
        // nvme0n1 → a controller with hwmon; sda a SATA disk; vda virtio; loop0 and
        // sda1 are no disks; sdz an empty card reader.
        write(&devices.join("pci0/nvme/nvme0/model"), "Samsung SSD 980 PRO 1TB\n");
        write(&devices.join("pci0/nvme/nvme0/hwmon1/temp1_input"), "38850\n");
        write(
            &devices.join("pci1/ata1/host0/target0/0:0:0:0/model"),
            "ST2000DM008-2FR1\n",
        );
        write(&devices.join("pci1/ata1/host0/target0/0:0:0:0/vendor"), "ATA     \n");
        fs::create_dir_all(devices.join("virtio1")).unwrap();
        fs::create_dir_all(devices.join("usb1/1-2/host6/target6/6:0:0:0")).unwrap();
        let block = root.join("block");
        for (name, device, size, rotational) in [
            ("nvme0n1", "pci0/nvme/nvme0", "1953525168", "0"),
            ("sda", "pci1/ata1/host0/target0/0:0:0:0", "3907029168", "1"),
            ("vda", "virtio1", "536870912", "1"),
            ("sdz", "usb1/1-2/host6/target6/6:0:0:0", "0", "1"),
        ] {
            write(&block.join(name).join("size"), &format!("{size}\n"));
            write(&block.join(name).join("queue/rotational"), &format!("{rotational}\n"));
            std::os::unix::fs::symlink(devices.join(device), block.join(name).join("device")).unwrap();
        }
        write(&block.join("loop0/size"), "1024\n");
        let disks = sysfs_disks(root);
        let got: Vec<Value> = disks.iter().map(Disk::to_json).collect();
        assert_eq!(got.len(), 3, "{got:#?}");
        assert_eq!(
            got[0],
            json!({"name": "nvme0n1", "model": "Samsung SSD 980 PRO 1TB", "media": "ssd", "bus": "NVMe",
                   "size_bytes": 1_000_204_886_016_u64, "health": "unknown", "temperature_c": 38.9,
                   "power_on_hours": null, "wear_percent": null, "errors": null, "note": null})
        );
        assert_eq!(
            (&got[1]["bus"], &got[1]["media"], &got[1]["model"]),
            (&json!("SATA"), &json!("hdd"), &json!("ST2000DM008-2FR1"))
        );
        assert_eq!((&got[2]["bus"], &got[2]["media"]), (&json!("Virtual"), &Value::Null));
        let section = build(
            &disks,
            "sysfs",
            Some("smartctl is not installed (package smartmontools): SMART health unknown".into()),
        );
        assert_eq!(section["status"], "ok");
        assert_eq!(
            section["summary"],
            "3 disks (nvme0n1 931.5 GiB, sda 1.8 TiB, vda 256.0 GiB); smartctl is not installed (package smartmontools): SMART health unknown"
        );
    }

    #[test]
    fn smartctl_is_skipped_for_virtual_disks_and_without_root() {
        let disk = |bus: &str| Disk {
            name: "x".into(),
            bus: Some(bus.into()),
            ..Disk::default()
        };
        let vm = [disk("Virtual")];
        assert!(smartctl_pointless(&vm, true).unwrap().contains("virtual disks"));
        let pc = [disk("Virtual"), disk("SATA")];
        assert_eq!(smartctl_pointless(&pc, true), None);
        assert!(smartctl_pointless(&pc, false).unwrap().contains("needs root"));
    }

    #[tokio::test]
    #[cfg(unix)]
    async fn this_machine() {
        let s = section().await.unwrap();
        eprintln!("{}", serde_json::to_string_pretty(&s).unwrap());
        if cfg!(target_os = "linux") {
            assert!(s["disks"].is_array(), "{s:?}");
            assert_eq!(
                s["count"].as_u64().unwrap() as usize,
                s["disks"].as_array().unwrap().len()
            );
            assert!(["sysfs", "smartctl"].contains(&s["source"].as_str().unwrap()), "{s:?}");
            let health_known = s["disks"].as_array().unwrap().iter().any(|d| d["health"] != "unknown");
            assert!(
                health_known || s["reason"].is_string(),
                "unknown health says why: {s:?}"
            );
            assert!(!s["summary"].as_str().unwrap().starts_with("collector failed"));
        }
    }

    #[test]
    fn the_windows_query_reads_physical_disks_and_their_counters() {
        for part in [
            "@(Get-PhysicalDisk)",
            "Get-StorageReliabilityCounter",
            "HealthStatus",
            "OperationalStatus",
            "ReadErrorsUncorrected",
            "PowerOnHours",
            "Wear",
        ] {
            assert!(WINDOWS.script.contains(part), "{part}");
        }
        assert_eq!(enum_word(Some(&json!(4)), MEDIA_TYPE), Some("ssd"));
        assert_eq!(enum_word(Some(&json!("SSD")), MEDIA_TYPE), Some("ssd"));
        assert_eq!(
            enum_word(Some(&json!("predictive failure")), OPERATIONAL_STATUS),
            Some("Predictive Failure")
        );
        assert_eq!(enum_word(Some(&json!(17)), BUS_TYPE), Some("NVMe"));
        assert_eq!(enum_word(Some(&json!("17")), BUS_TYPE), Some("NVMe"));
        assert_eq!(enum_word(Some(&json!("Bogus")), BUS_TYPE), None);
    }
}
