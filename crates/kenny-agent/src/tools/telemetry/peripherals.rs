//! The peripherals section: the devices attached to the PC, with the ones Windows reports a problem for listed first.
//!
//! Windows: `Get-PnpDevice -PresentOnly` (Win32_PnPEntity underneath); a device whose
//! `ConfigManagerErrorCode` is not 0 has a problem (Device Manager's yellow mark), and
//! any problem other than "disabled" makes the section warn. Linux has no such code: it
//! lists USB devices from `<sys>/bus/usb/devices` (root hubs left out) and the input
//! devices not on USB from `<sys>/class/input`.

use std::fs;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::Output;
use super::files::{read_small, sys_root};
use super::section as section_of;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, not_collected_here};
use crate::tools::psjson;

/// Listed devices; `count` has them all (a PC has a few hundred PnP devices).
const MAX_LISTED: usize = 100;
/// Longest text taken from the PC (names, ids) into a section.
const MAX_TEXT: usize = 200;
/// Device directories read at most, against a sysfs gone wild.
const MAX_SCANNED: usize = 512;
/// Device Manager's code for a device the user or an admin turned off on purpose.
const CODE_DISABLED: i64 = 22;

static QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$devices = @(Get-PnpDevice -PresentOnly | ForEach-Object {
    [pscustomobject]@{
        FriendlyName = $_.FriendlyName
        Class = $_.Class
        Status = [string]$_.Status
        Problem = [string]$_.Problem
        ConfigManagerErrorCode = $_.ConfigManagerErrorCode
        InstanceId = $_.InstanceId
    }
})
ConvertTo-Json -InputObject $devices -Compress -Depth 3
"#,
    limit: Duration::from_secs(12),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

/// `text` cut to [`MAX_TEXT`] characters: names and ids come from the PC, and a hostile
/// one must not fill the dashboard.
pub(super) fn clip(text: &str) -> String {
    super::format::clip(text, MAX_TEXT)
}

#[derive(Debug, Clone, PartialEq)]
struct Device {
    name: String,
    class: Option<String>,
    status: String,
    /// Windows' ConfigManagerErrorCode when not 0.
    problem_code: Option<i64>,
    /// Where the device sits: the PnP instance id, or vendor:product on USB.
    id: Option<String>,
    speed_mbps: Option<f64>,
}

impl Device {
    fn problem(&self) -> Option<String> {
        self.problem_code
            .map(|code| format!("code {code}: {}", problem_text(code)))
    }

    /// A problem worth a look: anything but a device switched off on purpose.
    fn broken(&self) -> bool {
        self.problem_code.is_some_and(|c| c != CODE_DISABLED)
    }

    fn to_json(&self) -> Value {
        json!({
            "name": clip(&self.name),
            "class": self.class.as_deref().map(clip),
            "status": clip(&self.status),
            "problem": self.problem(),
            "problem_code": self.problem_code,
            "id": self.id.as_deref().map(clip),
            "speed_mbps": self.speed_mbps,
        })
    }
}

/// What Device Manager says for its error codes (Microsoft's "Device Manager error
/// messages" list), shortened.
fn problem_text(code: i64) -> &'static str {
    match code {
        1 => "not configured correctly",
        3 => "its driver may be corrupted, or the system is low on memory",
        10 => "the device cannot start",
        12 => "not enough free resources for it",
        14 => "needs a restart to work",
        18 => "its drivers must be reinstalled",
        19 => "its registry configuration is incomplete or damaged",
        21 => "Windows is removing it",
        22 => "disabled",
        24 => "not present, not working, or not all its drivers are installed",
        28 => "its drivers are not installed",
        29 => "disabled by the firmware",
        31 => "Windows cannot load its drivers",
        32 => "its driver service is disabled",
        37 => "its driver failed to initialise",
        39 => "its driver is missing or corrupted",
        43 => "stopped after it reported problems",
        45 => "not connected",
        48 => "its driver is blocked from starting",
        52 => "Windows cannot verify its driver's signature",
        _ => "see Device Manager",
    }
}

/// `Get-PnpDevice -PresentOnly` rows: FriendlyName, Class, Status (OK, Error, Degraded,
/// Unknown), Problem, ConfigManagerErrorCode, InstanceId.
fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let rows = psjson::rows_of(json_of(output)?)?;
    let devices = rows
        .iter()
        .map(|row| {
            let id = psjson::text(row, "InstanceId");
            let code = psjson::number(row, "ConfigManagerErrorCode").filter(|c| *c != 0);
            Device {
                name: psjson::text(row, "FriendlyName")
                    .or_else(|| id.clone())
                    .unwrap_or_else(|| "unnamed device".into()),
                class: psjson::text(row, "Class"),
                status: psjson::text(row, "Status").unwrap_or_else(|| "Unknown".into()),
                problem_code: code,
                id,
                speed_mbps: None,
            }
        })
        .collect();
    Ok(build(devices))
}

pub(super) async fn section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    Ok(linux_at(&sys_root()))
}

fn linux_at(sys: &Path) -> Section {
    let usb_root = sys.join("bus/usb/devices");
    let input_root = sys.join("class/input");
    if !usb_root.exists() && !input_root.exists() {
        let mut empty = build(Vec::new());
        empty.insert(
            "summary".into(),
            "no devices visible: there is no USB bus or input device in /sys (a container or a VM without them)".into(),
        );
        return empty;
    }
    let mut devices = usb_devices(&usb_root);
    devices.extend(input_devices(&input_root));
    build(devices)
}

fn sorted_entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut paths: Vec<_> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .take(MAX_SCANNED)
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths
}

/// USB devices (entries with an `idVendor`; interfaces have none). Root hubs (`usbN`)
/// are the controller, not something plugged in.
fn usb_devices(root: &Path) -> Vec<Device> {
    sorted_entries(root)
        .into_iter()
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("usb")))
        .filter_map(|path| {
            let vendor = read_small(&path.join("idVendor"))?;
            let product_id = read_small(&path.join("idProduct")).unwrap_or_default();
            let id = format!("{vendor}:{product_id}");
            let manufacturer = read_small(&path.join("manufacturer")).filter(|s| !s.is_empty());
            let product = read_small(&path.join("product")).filter(|s| !s.is_empty());
            let name = match (manufacturer, product) {
                (Some(m), Some(p)) if p.starts_with(&m) => p,
                (Some(m), Some(p)) => format!("{m} {p}"),
                (None, Some(p)) => p,
                (Some(m), None) => format!("{m} device {id}"),
                (None, None) => format!("USB device {id}"),
            };
            Some(Device {
                name,
                class: Some(usb_class(&path).to_owned()),
                status: "OK".into(),
                problem_code: None,
                id: Some(id),
                speed_mbps: read_small(&path.join("speed")).and_then(|s| s.parse().ok()),
            })
        })
        .collect()
}

/// The device's USB class, or its first interface's when the device leaves it to them
/// (class 00, most devices).
fn usb_class(device: &Path) -> &'static str {
    let mut class = read_small(&device.join("bDeviceClass")).unwrap_or_default();
    if class == "00" {
        let name = device
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        class = sorted_entries(device)
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{name}:")))
            })
            .and_then(|p| read_small(&p.join("bInterfaceClass")))
            .unwrap_or_default();
    }
    match class.as_str() {
        "01" => "audio",
        "02" | "0a" => "communications",
        "03" => "hid",
        "06" => "imaging",
        "07" => "printer",
        "08" => "storage",
        "09" => "hub",
        "0b" => "smart card",
        "0e" => "video",
        "e0" => "wireless",
        "ef" => "miscellaneous",
        "ff" => "vendor specific",
        _ => "usb",
    }
}

/// Input devices that are not on USB (those are listed as USB devices already): the
/// built-in keyboard, touchpad, power button, lid switch.
fn input_devices(root: &Path) -> Vec<Device> {
    const BUS_USB: &str = "0003";
    let mut seen: Vec<String> = Vec::new();
    sorted_entries(root)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("input")))
        .filter(|p| read_small(&p.join("id/bustype")).as_deref() != Some(BUS_USB))
        .filter_map(|p| read_small(&p.join("name")).filter(|n| !n.is_empty()))
        .filter(|name| {
            let new = !seen.contains(name);
            seen.push(name.clone());
            new
        })
        .map(|name| Device {
            name,
            class: Some("input".into()),
            status: "OK".into(),
            problem_code: None,
            id: None,
            speed_mbps: None,
        })
        .collect()
}

/// Windows' device classes for the machine's own plumbing (chipset, ACPI, volumes,
/// software devices): a PC has a hundred of them, so they go after what is plugged in
/// and are the ones cut when the list is capped.
const PLUMBING_CLASSES: &[&str] = &[
    "System",
    "SoftwareDevice",
    "SoftwareComponent",
    "Volume",
    "VolumeSnapshot",
    "Processor",
    "Computer",
    "Firmware",
    "Extension",
    "LegacyDriver",
    "SCSIAdapter",
    "HDC",
];

fn build(mut devices: Vec<Device>) -> Section {
    // Broken first, then disabled, then peripherals before plumbing, by class and name.
    devices.sort_by_key(|d| {
        let plumbing = d.class.as_deref().is_some_and(|c| PLUMBING_CLASSES.contains(&c));
        (
            !d.broken(),
            d.problem_code.is_none(),
            plumbing,
            d.class.clone(),
            d.name.clone(),
        )
    });
    let count = devices.len();
    let problem_count = devices.iter().filter(|d| d.problem_code.is_some()).count();
    let broken: Vec<&Device> = devices.iter().filter(|d| d.broken()).collect();
    let disabled = problem_count - broken.len();
    let noun = if count == 1 { "device" } else { "devices" };
    let mut summary = format!("{count} {noun}");
    if let Some(first) = broken.first() {
        let more = match broken.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        summary.push_str(&format!(
            "; with a problem: {} ({}){more}",
            clip(&first.name),
            first.problem().unwrap_or_default()
        ));
    }
    if disabled > 0 {
        summary.push_str(&format!(", {disabled} disabled"));
    }
    let status = if broken.is_empty() { Status::Ok } else { Status::Warn };
    let listed: Vec<Value> = devices.iter().take(MAX_LISTED).map(Device::to_json).collect();
    section_of(
        status,
        summary,
        json!({
            "devices": listed,
            "count": count,
            "problem_count": problem_count,
            "truncated": count > MAX_LISTED,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        crate::tools::telemetry::files::put(root, rel, text.as_bytes()).unwrap();
    }

    fn laptop() -> tempfile::TempDir {
        let sys = tempfile::tempdir().unwrap();
        let usb = "bus/usb/devices";
        write(sys.path(), &format!("{usb}/usb1/idVendor"), "1d6b\n");
        write(sys.path(), &format!("{usb}/usb1/product"), "xHCI Host Controller\n");
        write(sys.path(), &format!("{usb}/1-2/idVendor"), "046d\n");
        write(sys.path(), &format!("{usb}/1-2/idProduct"), "c52b\n");
        write(sys.path(), &format!("{usb}/1-2/manufacturer"), "Logitech\n");
        write(sys.path(), &format!("{usb}/1-2/product"), "USB Receiver\n");
        write(sys.path(), &format!("{usb}/1-2/bDeviceClass"), "00\n");
        write(sys.path(), &format!("{usb}/1-2/speed"), "12\n");
        write(sys.path(), &format!("{usb}/1-2/1-2:1.0/bInterfaceClass"), "03\n");
        write(sys.path(), &format!("{usb}/1-2:1.0/bInterfaceClass"), "03\n");
        write(sys.path(), &format!("{usb}/2-1/idVendor"), "0781\n");
        write(sys.path(), &format!("{usb}/2-1/idProduct"), "5583\n");
        write(sys.path(), &format!("{usb}/2-1/bDeviceClass"), "00\n");
        write(sys.path(), &format!("{usb}/2-1/speed"), "5000\n");
        write(sys.path(), &format!("{usb}/2-1/2-1:1.0/bInterfaceClass"), "08\n");
        write(sys.path(), "class/input/input3/name", "AT Translated Set 2 keyboard\n");
        write(sys.path(), "class/input/input3/id/bustype", "0011\n");
        write(sys.path(), "class/input/input9/name", "Logitech USB Receiver Mouse\n");
        write(sys.path(), "class/input/input9/id/bustype", "0003\n");
        write(sys.path(), "class/input/event3/name", "not a device\n");
        sys
    }

    #[test]
    fn usb_and_input_devices_from_sysfs() {
        let sys = laptop();
        let s = linux_at(sys.path());
        assert_eq!(s["status"], "ok");
        assert_eq!(s["summary"], "3 devices");
        assert_eq!(s["count"], 3);
        assert_eq!(s["problem_count"], 0);
        let names: Vec<(&str, &str)> = s["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["class"].as_str().unwrap(), d["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                ("hid", "Logitech USB Receiver"),
                ("input", "AT Translated Set 2 keyboard"),
                ("storage", "USB device 0781:5583"),
            ]
        );
        assert_eq!(s["devices"][0]["id"], "046d:c52b");
        assert_eq!(s["devices"][0]["speed_mbps"], 12.0);
        assert_eq!(s["devices"][0]["problem"], Value::Null);
    }

    #[test]
    fn no_bus_at_all_says_so() {
        let sys = tempfile::tempdir().unwrap();
        let s = linux_at(sys.path());
        assert_eq!((s["status"].as_str(), &s["count"]), (Some("ok"), &json!(0)));
        assert!(s["summary"].as_str().unwrap().contains("no USB bus"));
    }

    fn device(name: &str, code: Option<i64>) -> Device {
        Device {
            name: name.into(),
            class: Some("Net".into()),
            status: if code.is_some() { "Error" } else { "OK" }.into(),
            problem_code: code,
            id: None,
            speed_mbps: None,
        }
    }

    #[test]
    fn problems_come_first_and_only_real_ones_warn() {
        let s = build(vec![
            device("Ethernet", None),
            device("Old modem", Some(22)),
            device("Wi-Fi", Some(10)),
        ]);
        assert_eq!(s["status"], "warn");
        assert_eq!(
            s["summary"],
            "3 devices; with a problem: Wi-Fi (code 10: the device cannot start), 1 disabled"
        );
        assert_eq!(s["devices"][0]["name"], "Wi-Fi");
        assert_eq!(s["devices"][1]["problem"], "code 22: disabled");
        assert_eq!(s["problem_count"], 2);
        let mut root_port = device("PCI Express Root Port", None);
        root_port.class = Some("System".into());
        let mut camera = device("Integrated Webcam", None);
        camera.class = Some("Camera".into());
        let s = build(vec![root_port, device("Ethernet", None), camera]);
        let order: Vec<&str> = s["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["Integrated Webcam", "Ethernet", "PCI Express Root Port"]);
        let only_disabled = build(vec![device("Old modem", Some(22))]);
        assert_eq!(only_disabled["status"], "ok");
    }

    #[test]
    fn long_text_from_the_pc_is_clipped_and_lists_capped() {
        let long = "x".repeat(500);
        assert_eq!(clip(&long).chars().count(), MAX_TEXT);
        assert_eq!(clip("  short "), "short");
        let many: Vec<Device> = (0..150).map(|i| device(&format!("d{i:03}"), None)).collect();
        let s = build(many);
        assert_eq!(s["devices"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!((s["count"].as_u64(), s["truncated"].as_bool()), (Some(150), Some(true)));
    }

    #[test]
    fn the_windows_query_lists_present_pnp_devices() {
        assert!(QUERY.script.contains("Get-PnpDevice -PresentOnly"));
        assert!(QUERY.script.contains("ConfigManagerErrorCode"));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_lists_what_it_can_see() {
        let s = section().await.unwrap();
        assert_eq!(s["status"], "ok", "{s:?}");
        assert!(s["devices"].is_array() && s["count"].is_u64(), "{s:?}");
    }
}
