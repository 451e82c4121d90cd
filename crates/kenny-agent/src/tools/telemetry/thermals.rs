//! The thermals section: temperatures from the kernel's thermal zones and hwmon sensors
//! (Linux) or the ACPI thermal zones (Windows).
//!
//! Linux reads `<sys>/class/thermal/thermal_zone*/{type,temp}` and
//! `<sys>/class/hwmon/hwmon*/{name,temp*_input,temp*_label}` (millidegrees Celsius).
//! Status by the hottest sensor: warn at 85 °C, crit at 95 °C, where most desktop and
//! laptop CPUs start throttling. Containers and VMs usually expose no sensors: that is
//! `ok`, not a fault.
//!
//! Windows reads `MSAcpi_ThermalZoneTemperature` (`root/wmi`, tenths of kelvin). Many
//! PCs' firmware offers no thermal zone to Windows ("Not supported"): that is an `ok`
//! section without sensors and a note, like Linux without sensors. CPU package sensors
//! need a vendor driver on Windows and are not read.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::Output;
use super::files::{read_small, sys_root};
use super::format::clip;
use super::format::one_decimal;
use super::power::MAX_TEXT;
use super::windows::{Query, json_of};
use super::{Outcome, Status, not_collected_here, section};
use crate::tools::psjson::{number, rows_of, text};

const WARN_C: f64 = 85.0;
const CRIT_C: f64 = 95.0;
/// Readings outside this are sensor faults (unconnected inputs read -273 or 255).
const PLAUSIBLE_C: std::ops::RangeInclusive<f64> = -40.0..=150.0;
/// Bounds the directory walk on machines with unusual numbers of sensors.
const MAX_DEVICES: usize = 64;
const MAX_INPUTS_PER_DEVICE: usize = 32;
const MAX_SENSORS: usize = 128;

#[derive(Debug, Clone, PartialEq)]
struct Sensor {
    label: String,
    temperature_c: f64,
}

pub(super) fn thermals_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    Ok(build(read_sensors(&sys_root())))
}

fn read_sensors(sys: &Path) -> Vec<Sensor> {
    let mut sensors = thermal_zones(&sys.join("class/thermal"));
    sensors.extend(hwmon(&sys.join("class/hwmon")));
    sensors.truncate(MAX_SENSORS);
    sensors
}

/// Entries of `dir` named `<prefix><number>`, in numeric order, at most `MAX_DEVICES`.
fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .take(MAX_DEVICES * 4)
        .collect();
    found.sort();
    found.into_iter().take(MAX_DEVICES).map(|(_, p)| p).collect()
}

fn thermal_zones(dir: &Path) -> Vec<Sensor> {
    numbered(dir, "thermal_zone")
        .iter()
        .filter_map(|zone| {
            let temperature_c = millidegrees(&zone.join("temp"))?;
            let label = read_small(&zone.join("type"))
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| file_name(zone));
            Some(Sensor { label, temperature_c })
        })
        .collect()
}

fn hwmon(dir: &Path) -> Vec<Sensor> {
    let mut sensors = Vec::new();
    for device in numbered(dir, "hwmon") {
        let chip = read_small(&device.join("name"))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| file_name(&device));
        let Ok(entries) = fs::read_dir(&device) else {
            continue;
        };
        let mut inputs: Vec<(u32, String)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let n = name.strip_prefix("temp")?.strip_suffix("_input")?.parse().ok()?;
                Some((n, name))
            })
            .take(MAX_INPUTS_PER_DEVICE * 4)
            .collect();
        inputs.sort();
        for (n, input) in inputs.into_iter().take(MAX_INPUTS_PER_DEVICE) {
            let Some(temperature_c) = millidegrees(&device.join(&input)) else {
                continue;
            };
            let label = read_small(&device.join(format!("temp{n}_label")))
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| format!("temp{n}"));
            sensors.push(Sensor {
                label: format!("{chip} {label}"),
                temperature_c,
            });
        }
    }
    sensors
}

fn millidegrees(path: &Path) -> Option<f64> {
    let milli: i64 = read_small(path)?.parse().ok()?;
    let celsius = milli as f64 / 1000.0;
    PLAUSIBLE_C.contains(&celsius).then(|| one_decimal(celsius))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn build(sensors: Vec<Sensor>) -> super::Section {
    build_with_note(sensors, None)
}

/// The section; `note` says why there are no sensors when the reason is known.
fn build_with_note(sensors: Vec<Sensor>, note: Option<String>) -> super::Section {
    let hottest = sensors
        .iter()
        .max_by(|a, b| a.temperature_c.total_cmp(&b.temperature_c));
    let (status, summary) = match (hottest, &note) {
        (None, None) => (Status::Ok, "no temperature sensors exposed".to_owned()),
        (None, Some(note)) => (Status::Ok, format!("no temperature sensors exposed: {note}")),
        (Some(hot), _) => {
            let status = if hot.temperature_c >= CRIT_C {
                Status::Crit
            } else if hot.temperature_c >= WARN_C {
                Status::Warn
            } else {
                Status::Ok
            };
            (status, format!("hottest {}C ({})", hot.temperature_c, hot.label))
        }
    };
    let listed: Vec<_> = sensors
        .iter()
        .map(|s| json!({"label": s.label, "temperature_c": s.temperature_c}))
        .collect();
    let mut fields = json!({ "sensors": listed });
    if let (Some(note), Value::Object(map)) = (note, &mut fields) {
        map.insert("note".into(), note.into());
    }
    section(status, summary, fields)
}

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&WINDOWS)
}

/// The thermal zones, or why the firmware offers none (the documented CIM errors for a
/// class without instances); access denied and the rest stop the script.
static WINDOWS: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$zones = @()
$unsupported = $null
try {
  $zones = @(Get-CimInstance -Namespace 'root/wmi' -ClassName MSAcpi_ThermalZoneTemperature |
    Select-Object InstanceName, CurrentTemperature, CriticalTripPoint, Active)
} catch [Microsoft.Management.Infrastructure.CimException] {
  $code = [string]$_.Exception.NativeErrorCode
  if ($code -ne 'NotSupported' -and $code -ne 'InvalidClass') { throw }
  $unsupported = $_.Exception.Message
}
[pscustomobject]@{ Zones = $zones; Unsupported = $unsupported } | ConvertTo-Json -Compress -Depth 3
"#,
    limit: Duration::from_secs(10),
    parse: parse_windows,
};

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let Value::Object(mut all) = json_of(output)? else {
        return Err("the thermal zone query printed no object; run it by hand to see why".to_owned());
    };
    let zones = rows_of(all.remove("Zones").unwrap_or(Value::Null))?;
    let sensors: Vec<Sensor> = zones
        .iter()
        .filter_map(|zone| {
            let tenths_kelvin = number(zone, "CurrentTemperature")?;
            let celsius = tenths_kelvin as f64 / 10.0 - 273.15;
            PLAUSIBLE_C.contains(&celsius).then(|| Sensor {
                label: zone_label(text(zone, "InstanceName").as_deref()),
                temperature_c: one_decimal(celsius),
            })
        })
        .take(MAX_SENSORS)
        .collect();
    let note = match all.get("Unsupported").and_then(Value::as_str) {
        Some(reason) => Some(format!(
            "the firmware offers no ACPI thermal zone to Windows ({})",
            clip(reason, MAX_TEXT)
        )),
        None if sensors.is_empty() && !zones.is_empty() => {
            Some("the ACPI thermal zones report no plausible temperature".to_owned())
        }
        None if sensors.is_empty() => Some("the firmware offers no ACPI thermal zone to Windows".to_owned()),
        None => None,
    };
    Ok(build_with_note(sensors, note))
}

/// `ACPI\ThermalZone\TZ00_0` → `ACPI TZ00`, like Linux's zone types.
fn zone_label(instance: Option<&str>) -> String {
    let Some(instance) = instance else {
        return "ACPI thermal zone".to_owned();
    };
    let zone = instance.rsplit('\\').next().unwrap_or(instance);
    let zone = match zone.rsplit_once('_') {
        Some((name, n)) if !name.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => zone,
    };
    clip(&format!("ACPI {zone}"), MAX_TEXT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        crate::tools::telemetry::files::put(root, rel, text.as_bytes()).unwrap();
    }

    /// A laptop's sysfs as recorded: two thermal zones, coretemp with labels, an NVMe
    /// drive, and an unconnected input reading nonsense.
    fn laptop_sys() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "class/thermal/thermal_zone0/type", "acpitz\n");
        write(root, "class/thermal/thermal_zone0/temp", "48500\n");
        write(root, "class/thermal/thermal_zone10/type", "x86_pkg_temp\n");
        write(root, "class/thermal/thermal_zone10/temp", "61000\n");
        write(root, "class/thermal/thermal_zone2/type", "iwlwifi_1\n");
        write(root, "class/thermal/thermal_zone2/temp", "not a number\n");
        write(root, "class/thermal/cooling_device0/type", "Processor\n");
        write(root, "class/hwmon/hwmon3/name", "coretemp\n");
        write(root, "class/hwmon/hwmon3/temp1_input", "62000\n");
        write(root, "class/hwmon/hwmon3/temp1_label", "Package id 0\n");
        write(root, "class/hwmon/hwmon3/temp2_input", "59000\n");
        write(root, "class/hwmon/hwmon3/temp2_label", "Core 0\n");
        write(root, "class/hwmon/hwmon3/temp2_crit", "100000\n");
        write(root, "class/hwmon/hwmon1/name", "nvme\n");
        write(root, "class/hwmon/hwmon1/temp1_input", "38850\n");
        write(root, "class/hwmon/hwmon4/name", "acpi_fan\n");
        write(root, "class/hwmon/hwmon4/temp1_input", "-273150\n");
        dir
    }

    fn labels(section: &super::super::Section) -> Vec<(String, f64)> {
        section["sensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["label"].as_str().unwrap().to_owned(),
                    s["temperature_c"].as_f64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn reads_thermal_zones_and_hwmon_in_order() {
        let sys = laptop_sys();
        let section = build(read_sensors(sys.path()));
        assert_eq!(
            labels(&section),
            [
                ("acpitz".to_owned(), 48.5),
                ("x86_pkg_temp".to_owned(), 61.0),
                ("nvme temp1".to_owned(), 38.9),
                ("coretemp Package id 0".to_owned(), 62.0),
                ("coretemp Core 0".to_owned(), 59.0),
            ]
        );
        assert_eq!(section["status"], "ok");
        assert_eq!(section["summary"], "hottest 62C (coretemp Package id 0)");
    }

    #[test]
    fn hot_is_warn_at_85_and_crit_at_95() {
        let at = |c: f64| {
            build(vec![Sensor {
                label: "cpu".into(),
                temperature_c: c,
            }])["status"]
                .clone()
        };
        assert_eq!(at(84.9), "ok");
        assert_eq!(at(85.0), "warn");
        assert_eq!(at(94.9), "warn");
        assert_eq!(at(95.0), "crit");
    }

    #[test]
    fn the_windows_query_reads_the_acpi_thermal_zones() {
        assert!(
            WINDOWS
                .script
                .contains("-Namespace 'root/wmi' -ClassName MSAcpi_ThermalZoneTemperature")
        );
        assert!(WINDOWS.script.contains("CurrentTemperature"));
        assert_eq!(zone_label(Some(r"ACPI\ThermalZone\TZ00_0")), "ACPI TZ00");
        assert_eq!(zone_label(Some(r"ACPI\ThermalZone\CPUZ_0")), "ACPI CPUZ");
        assert_eq!(zone_label(Some("THRM")), "ACPI THRM");
        assert_eq!(zone_label(None), "ACPI thermal zone");
    }

    #[test]
    #[cfg(unix)]
    fn this_machine() {
        let s = thermals_section().unwrap();
        eprintln!("{}", serde_json::to_string_pretty(&s).unwrap());
        assert!(s["sensors"].is_array(), "{s:?}");
        assert!(["ok", "warn", "crit"].contains(&s["status"].as_str().unwrap()));
    }

    #[test]
    fn no_sensors_is_fine() {
        let empty = tempfile::tempdir().unwrap();
        let section = build(read_sensors(empty.path()));
        assert_eq!(section["status"], "ok");
        assert_eq!(section["summary"], "no temperature sensors exposed");
        assert_eq!(section["sensors"], json!([]));
    }
}
