//! The battery section: each battery's charge and wear (what it holds now against what
//! it was designed to hold).
//!
//! Linux: `<sys>/class/power_supply/*` of type `Battery` (`energy_*` in µWh on most
//! laptops, `charge_*` in µAh on some). Windows: `Win32_Battery` (charge, status) and,
//! where the firmware offers them, the `root/wmi` classes `BatteryStaticData` (design
//! capacity), `BatteryFullChargedCapacity` and `BatteryCycleCount`; many PCs answer "Not
//! supported" for some of these, and the section uses what exists. `health_percent` is
//! the worst battery's; below 60% the section warns (a replacement is due).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::super::command::Output;
use super::super::files::{read_small, sys_root};
use super::super::format::clip;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section, Status, not_collected_here, section};
use super::MAX_TEXT;
use crate::tools::psjson::{number, rows_of, text};

const MAX_BATTERIES: usize = 8;
/// Below this share of its design capacity a battery is worn out; the server's default
/// threshold too.
const HEALTH_WARN_PERCENT: f64 = 60.0;

pub(in crate::tools::telemetry) fn battery_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    Ok(battery(&sys_root()))
}

/// One battery, the same on both systems.
struct Battery {
    name: String,
    status: Option<String>,
    percent: Option<i64>,
    cycles: Option<i64>,
    health_percent: Option<f64>,
}

fn battery(sys: &Path) -> Section {
    let dir = sys.join("class/power_supply");
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).take(64).collect())
        .unwrap_or_default();
    paths.sort();
    let batteries: Vec<Battery> = paths
        .iter()
        .filter(|p| read_small(&p.join("type")).as_deref() == Some("Battery"))
        .take(MAX_BATTERIES)
        .map(|p| linux_battery(p))
        .collect();
    build(&batteries, json!({}))
}

fn linux_battery(path: &Path) -> Battery {
    let number = |name: &str| read_small(&path.join(name)).and_then(|v| v.parse::<f64>().ok());
    let whole = |name: &str| read_small(&path.join(name)).and_then(|v| v.parse::<i64>().ok());
    let (full, design) = match (number("energy_full"), number("energy_full_design")) {
        (Some(f), Some(d)) => (Some(f), Some(d)),
        _ => (number("charge_full"), number("charge_full_design")),
    };
    Battery {
        name: path
            .file_name()
            .map(|n| clip(&n.to_string_lossy(), MAX_TEXT))
            .unwrap_or_default(),
        status: read_small(&path.join("status")).map(|s| clip(&s, 40)),
        percent: whole("capacity"),
        // Drivers that do not count cycles report 0.
        cycles: whole("cycle_count").filter(|c| *c > 0),
        health_percent: health(full, design),
    }
}

/// Full-charge capacity as a share of design capacity, one decimal, at most 100.
fn health(full: Option<f64>, design: Option<f64>) -> Option<f64> {
    match (full, design) {
        (Some(f), Some(d)) if d > 0.0 && f >= 0.0 => Some(((f / d * 100.0).min(100.0) * 10.0).round() / 10.0),
        _ => None,
    }
}

/// The section from the batteries found; `extra` adds fields (what Windows could not read).
fn build(batteries: &[Battery], extra: Value) -> Section {
    let mut fields = match extra {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let worst = batteries.iter().filter_map(|b| b.health_percent).reduce(f64::min);
    let (status, summary) = match (batteries.len(), worst) {
        (0, _) => (Status::Ok, "no battery".to_owned()),
        (n, Some(h)) => {
            let noun = batteries_noun(n);
            let status = if h < HEALTH_WARN_PERCENT {
                Status::Warn
            } else {
                Status::Ok
            };
            let advice = if h < HEALTH_WARN_PERCENT {
                "; worn out, plan a replacement"
            } else {
                ""
            };
            let which = if n == 1 { "" } else { "the most worn " };
            (
                status,
                format!("{noun}, {which}holding {h:.0}% of its design capacity{advice}"),
            )
        }
        (n, None) => {
            let noun = batteries_noun(n);
            (Status::Ok, format!("{noun} (no capacity figures)"))
        }
    };
    let listed: Vec<Value> = batteries
        .iter()
        .map(|b| {
            json!({
                "name": b.name,
                "status": b.status,
                "percent": b.percent,
                "cycles": b.cycles,
                "health_percent": b.health_percent,
            })
        })
        .collect();
    fields.insert("count".into(), batteries.len().into());
    fields.insert("batteries".into(), listed.into());
    fields.insert("health_percent".into(), json!(worst));
    section(status, summary, Value::Object(fields))
}

fn batteries_noun(n: usize) -> String {
    if n == 1 {
        "1 battery".to_owned()
    } else {
        format!("{n} batteries")
    }
}

/// `Win32_Battery` always exists; each `root/wmi` class is read on its own, and one
/// that throws ("Not supported" on many PCs) is noted and left out.
pub(super) static WINDOWS: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$wmi = @{}
$unavailable = @()
foreach ($class in 'BatteryStaticData', 'BatteryFullChargedCapacity', 'BatteryCycleCount') {
  try {
    $wmi[$class] = @(Get-CimInstance -Namespace 'root/wmi' -ClassName $class)
  } catch {
    $wmi[$class] = @()
    $unavailable += "${class}: $($_.Exception.Message)"
  }
}
[pscustomobject]@{
  Batteries = @(Get-CimInstance -ClassName Win32_Battery |
    Select-Object DeviceID, Name, EstimatedChargeRemaining, BatteryStatus)
  StaticData = @($wmi['BatteryStaticData'] | Select-Object InstanceName, DesignedCapacity, DeviceName)
  FullChargedCapacity = @($wmi['BatteryFullChargedCapacity'] | Select-Object InstanceName, FullChargedCapacity)
  CycleCount = @($wmi['BatteryCycleCount'] | Select-Object InstanceName, CycleCount)
  Unavailable = $unavailable
} | ConvertTo-Json -Compress -Depth 4
"#,
    limit: Duration::from_secs(10),
    parse: parse_windows,
};

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let Value::Object(mut all) = json_of(output)? else {
        return Err("the battery query printed no object; run it by hand to see why".to_owned());
    };
    let mut list = |key: &str| rows_of(all.remove(key).unwrap_or(Value::Null));
    let win32 = list("Batteries")?;
    let statics = list("StaticData")?;
    let full = list("FullChargedCapacity")?;
    let cycles = list("CycleCount")?;
    let unavailable: Vec<String> = match all.remove("Unavailable") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|s| clip(s, MAX_TEXT))
            .collect(),
        Some(Value::String(one)) => vec![clip(&one, MAX_TEXT)],
        _ => Vec::new(),
    };
    // The root/wmi classes describe the same batteries under one InstanceName each;
    // Win32_Battery has no such key, so its rows pair with them in order (nearly every
    // laptop has one battery).
    let by_instance = |rows: &[Map<String, Value>], instance: &str, key: &str| {
        rows.iter()
            .find(|r| text(r, "InstanceName").as_deref() == Some(instance))
            .and_then(|r| number(r, key))
    };
    let count = win32.len().max(statics.len()).min(MAX_BATTERIES);
    let batteries: Vec<Battery> = (0..count)
        .map(|i| {
            let row = win32.get(i);
            let instance = statics.get(i).and_then(|r| text(r, "InstanceName"));
            let wmi = |rows: &[Map<String, Value>], key: &str| match &instance {
                Some(instance) => by_instance(rows, instance, key),
                None => rows.get(i).and_then(|r| number(r, key)),
            };
            let design = statics.get(i).and_then(|r| number(r, "DesignedCapacity"));
            let name = row
                .and_then(|r| text(r, "Name").or_else(|| text(r, "DeviceID")))
                .or_else(|| statics.get(i).and_then(|r| text(r, "DeviceName")))
                .unwrap_or_else(|| format!("battery {}", i + 1));
            Battery {
                name: clip(&name, MAX_TEXT),
                status: row
                    .and_then(|r| number(r, "BatteryStatus"))
                    .and_then(status_word)
                    .map(str::to_owned),
                percent: row.and_then(|r| number(r, "EstimatedChargeRemaining")),
                cycles: wmi(&cycles, "CycleCount").filter(|c| *c > 0),
                health_percent: health(
                    wmi(&full, "FullChargedCapacity").map(|f| f as f64),
                    design.map(|d| d as f64),
                ),
            }
        })
        .collect();
    let extra = if unavailable.is_empty() || batteries.is_empty() {
        json!({})
    } else {
        json!({ "unavailable": unavailable })
    };
    Ok(build(&batteries, extra))
}

/// `Win32_Battery.BatteryStatus`, in the words Linux uses where there is one.
fn status_word(code: i64) -> Option<&'static str> {
    Some(match code {
        1 => "Discharging",
        // "Unknown" in the documentation: on AC power, not necessarily charging.
        2 => "Not charging",
        3 => "Full",
        4 => "Low",
        5 => "Critical",
        6..=9 => "Charging",
        11 => "Partially charged",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        crate::tools::telemetry::files::put_file(path, text.as_bytes()).unwrap();
    }

    #[test]
    fn battery_wear_from_energy_or_charge_and_no_battery_is_fine() {
        let sys = tempfile::tempdir().unwrap();
        let supply = sys.path().join("class/power_supply");
        let none = battery(sys.path());
        assert_eq!(
            (none["summary"].as_str(), &none["count"]),
            (Some("no battery"), &json!(0))
        );
        write(&supply.join("AC/type"), "Mains\n");
        write(&supply.join("BAT0/type"), "Battery\n");
        write(&supply.join("BAT0/energy_full"), "41000000\n");
        write(&supply.join("BAT0/energy_full_design"), "57000000\n");
        write(&supply.join("BAT0/capacity"), "88\n");
        write(&supply.join("BAT0/cycle_count"), "412\n");
        write(&supply.join("BAT0/status"), "Discharging\n");
        write(&supply.join("BAT1/type"), "Battery\n");
        write(&supply.join("BAT1/charge_full"), "3000\n");
        write(&supply.join("BAT1/charge_full_design"), "3000\n");
        write(&supply.join("BAT1/cycle_count"), "0\n");
        let s = battery(sys.path());
        assert_eq!(s["count"], 2);
        assert_eq!(s["health_percent"], 71.9, "the worst battery speaks: {s:?}");
        assert_eq!(s["status"], "ok");
        assert_eq!(
            s["summary"],
            "2 batteries, the most worn holding 72% of its design capacity"
        );
        assert_eq!(s["batteries"][0]["cycles"], 412);
        assert_eq!(s["batteries"][0]["percent"], 88);
        assert_eq!(s["batteries"][0]["status"], "Discharging");
        assert_eq!(s["batteries"][1]["health_percent"], 100.0);
        assert_eq!(s["batteries"][1]["cycles"], Value::Null, "0 means not counted");
    }

    #[test]
    fn a_worn_battery_warns() {
        let sys = tempfile::tempdir().unwrap();
        let bat = sys.path().join("class/power_supply/BAT0");
        write(&bat.join("type"), "Battery\n");
        write(&bat.join("energy_full"), "25000000\n");
        write(&bat.join("energy_full_design"), "50000000\n");
        let s = battery(sys.path());
        assert_eq!(s["status"], "warn");
        assert_eq!(
            s["summary"],
            "1 battery, holding 50% of its design capacity; worn out, plan a replacement"
        );
    }

    #[test]
    fn windows_batteries_pair_the_wmi_classes_by_instance() {
        let stdout = r#"{"Batteries":[{"DeviceID":"1","Name":"Main","EstimatedChargeRemaining":50,"BatteryStatus":6},{"DeviceID":"2","Name":"Bay","EstimatedChargeRemaining":null,"BatteryStatus":10}],"StaticData":[{"InstanceName":"ACPI\\PNP0C0A\\1_0","DesignedCapacity":50000},{"InstanceName":"ACPI\\PNP0C0A\\2_0","DesignedCapacity":20000}],"FullChargedCapacity":[{"InstanceName":"ACPI\\PNP0C0A\\2_0","FullChargedCapacity":10000},{"InstanceName":"ACPI\\PNP0C0A\\1_0","FullChargedCapacity":45000}],"CycleCount":{"InstanceName":"ACPI\\PNP0C0A\\1_0","CycleCount":300},"Unavailable":[]}"#;
        let output = Output::printed(stdout, "", true);
        let s = parse_windows(&output, OffsetDateTime::UNIX_EPOCH).unwrap();
        assert_eq!(s["batteries"][0]["health_percent"], 90.0);
        assert_eq!(s["batteries"][0]["cycles"], 300);
        assert_eq!(s["batteries"][0]["status"], "Charging");
        assert_eq!(s["batteries"][1]["health_percent"], 50.0);
        assert_eq!(s["batteries"][1]["cycles"], Value::Null);
        assert_eq!(s["batteries"][1]["status"], Value::Null);
        assert_eq!((&s["health_percent"], &s["status"]), (&json!(50.0), &json!("warn")));
    }

    #[test]
    #[cfg(unix)]
    fn this_machine() {
        let s = battery_section().unwrap();
        eprintln!("{}", serde_json::to_string_pretty(&s).unwrap());
        assert!(s["count"].is_u64(), "{s:?}");
        assert!(s["batteries"].is_array(), "{s:?}");
    }

    #[test]
    fn the_windows_query_reads_the_documented_classes() {
        for part in [
            "Win32_Battery",
            "EstimatedChargeRemaining",
            "BatteryStatus",
            "'root/wmi'",
            "'BatteryStaticData'",
            "'BatteryFullChargedCapacity'",
            "'BatteryCycleCount'",
            "Select-Object InstanceName, DesignedCapacity",
            "Select-Object InstanceName, FullChargedCapacity",
            "Select-Object InstanceName, CycleCount",
        ] {
            assert!(WINDOWS.script.contains(part), "{part}");
        }
        assert_eq!(status_word(6), Some("Charging"));
        assert_eq!(status_word(10), None);
    }
}
