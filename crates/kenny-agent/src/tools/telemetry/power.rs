//! Sections about the machine's state that the kernel and the package tools leave in
//! files: whether a restart is pending (`reboot_pending`), the batteries' wear
//! (`battery`) and whether the system disk is encrypted (`encryption`).
//!
//! Linux reads `<run>/reboot-required` (Debian, Ubuntu; `KENNY_RUN_ROOT` stands in for
//! `/run`), `<sys>/class/power_supply/*` and `<sys>/dev/block/<major:minor>` with its
//! `dm/uuid` and `slaves/` (a LUKS mapping's uuid starts `CRYPT-`). Windows does not
//! collect these yet and says so.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::files::{read_small, read_text, root_from_env, sys_root};
use super::{Outcome, Status, not_collected_here, section};

/// Most batteries, packages named and device levels followed.
const MAX_BATTERIES: usize = 8;
const MAX_PACKAGES: usize = 20;
const MAX_DEPTH: usize = 8;

fn run_root() -> PathBuf {
    root_from_env("KENNY_RUN_ROOT", "/run")
}

pub(super) fn reboot_pending_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    Ok(reboot_pending(&run_root()))
}

fn reboot_pending(run: &Path) -> super::Section {
    let marker = run.join("reboot-required");
    if !marker.exists() {
        return section(
            Status::Ok,
            "no restart pending".into(),
            json!({"pending": false, "reasons": [], "source": "reboot-required"}),
        );
    }
    let packages: Vec<String> = read_text(&run.join("reboot-required.pkgs"), 64 * 1024)
        .map(|(text, _)| {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut reasons: Vec<String> = packages.iter().take(MAX_PACKAGES).cloned().collect();
    reasons.dedup();
    let summary = if reasons.is_empty() {
        "restart required".to_owned()
    } else {
        format!("restart required by {}", reasons.join(", "))
    };
    section(
        Status::Warn,
        summary,
        json!({"pending": true, "reasons": reasons, "source": "reboot-required"}),
    )
}

pub(super) fn battery_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    Ok(battery(&sys_root()))
}

fn battery(sys: &Path) -> super::Section {
    let dir = sys.join("class/power_supply");
    let mut names: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).take(64).collect())
        .unwrap_or_default();
    names.sort();
    let batteries: Vec<Value> = names
        .iter()
        .filter(|p| read_small(&p.join("type")).as_deref() == Some("Battery"))
        .take(MAX_BATTERIES)
        .map(|p| one_battery(p))
        .collect();
    if batteries.is_empty() {
        return section(
            Status::Ok,
            "no battery".into(),
            json!({"count": 0, "batteries": [], "health_percent": null}),
        );
    }
    let worst = batteries
        .iter()
        .filter_map(|b| b["health_percent"].as_f64())
        .reduce(f64::min);
    let summary = match worst {
        Some(h) => format!("{} battery, holding {h:.0}% of its design capacity", batteries.len()),
        None => format!("{} battery (no capacity figures)", batteries.len()),
    };
    section(
        Status::Ok,
        summary,
        json!({"count": batteries.len(), "batteries": batteries, "health_percent": worst}),
    )
}

fn one_battery(path: &Path) -> Value {
    let number = |name: &str| read_small(&path.join(name)).and_then(|v| v.parse::<f64>().ok());
    // Energy (µWh) on most laptops, charge (µAh) on some.
    let (full, design) = match (number("energy_full"), number("energy_full_design")) {
        (Some(f), Some(d)) => (Some(f), Some(d)),
        _ => (number("charge_full"), number("charge_full_design")),
    };
    let health = match (full, design) {
        (Some(f), Some(d)) if d > 0.0 => Some(((f / d * 100.0).min(100.0) * 10.0).round() / 10.0),
        _ => None,
    };
    json!({
        "name": path.file_name().map(|n| n.to_string_lossy().into_owned()),
        "status": read_small(&path.join("status")),
        "percent": number("capacity"),
        "cycles": number("cycle_count"),
        "health_percent": health,
    })
}

pub(super) fn encryption_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    Ok(encryption(&sys_root(), root_device()))
}

/// `major:minor` of the device holding `/`.
fn root_device() -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let dev = fs::metadata("/").ok()?.dev();
        Some(format!("{}:{}", libc::major(dev), libc::minor(dev)))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

fn encryption(sys: &Path, root: Option<String>) -> super::Section {
    let Some(root) = root else {
        return section(
            Status::Ok,
            "cannot tell which device holds /".into(),
            json!({"system_encrypted": null, "device": null}),
        );
    };
    let Ok(device) = fs::canonicalize(sys.join("dev/block").join(&root)) else {
        // Overlay and network roots (containers) have no block device.
        return section(
            Status::Ok,
            format!("/ is not on a block device ({root}); nothing to tell"),
            json!({"system_encrypted": null, "device": root}),
        );
    };
    let name = device.file_name().map(|n| n.to_string_lossy().into_owned());
    let encrypted = crypt_below(&device, 0);
    let summary = if encrypted {
        "the system disk is encrypted (dm-crypt)".to_owned()
    } else {
        "the system disk is not encrypted".to_owned()
    };
    section(
        Status::Ok,
        summary,
        json!({"system_encrypted": encrypted, "device": name, "method": encrypted.then_some("dm-crypt")}),
    )
}

/// Whether `device` or anything it is built on (`slaves/`, through LVM or RAID) is a
/// dm-crypt mapping.
fn crypt_below(device: &Path, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    if read_small(&device.join("dm/uuid")).is_some_and(|u| u.starts_with("CRYPT-")) {
        return true;
    }
    // A partition's parent disk is not what encrypts it: only follow what it is made of.
    fs::read_dir(device.join("slaves"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .take(16)
                .filter_map(|e| fs::canonicalize(e.path()).ok())
                .any(|slave| crypt_below(&slave, depth + 1))
        })
        .unwrap_or(false)
}

/// Not read through PowerShell yet.
pub(super) fn windows_query(section: &str) -> Option<&'static super::windows::Query> {
    let _ = section;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_pending_restart_names_its_packages() {
        let run = tempfile::tempdir().unwrap();
        let none = reboot_pending(run.path());
        assert_eq!((none["status"].as_str(), &none["pending"]), (Some("ok"), &json!(false)));
        write(&run.path().join("reboot-required"), "*** System restart required ***\n");
        write(
            &run.path().join("reboot-required.pkgs"),
            "linux-image-6.1.0-18-amd64\nlibc6\n\n",
        );
        let pending = reboot_pending(run.path());
        assert_eq!(pending["status"], "warn");
        assert_eq!(pending["reasons"], json!(["linux-image-6.1.0-18-amd64", "libc6"]));
        assert_eq!(
            pending["summary"],
            "restart required by linux-image-6.1.0-18-amd64, libc6"
        );
    }

    #[test]
    fn battery_wear_from_energy_or_charge_and_no_battery_is_fine() {
        let sys = tempfile::tempdir().unwrap();
        let supply = sys.path().join("class/power_supply");
        assert_eq!(battery(sys.path())["summary"], "no battery");
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
        let s = battery(sys.path());
        assert_eq!(s["count"], 2);
        assert_eq!(s["health_percent"], 71.9, "the worst battery speaks: {s:?}");
        assert_eq!(s["batteries"][0]["cycles"], 412.0);
        assert_eq!(s["batteries"][0]["status"], "Discharging");
        assert_eq!(s["batteries"][1]["health_percent"], 100.0);
    }

    #[test]
    #[cfg(unix)]
    fn encryption_follows_lvm_down_to_a_luks_mapping() {
        let sys = tempfile::tempdir().unwrap();
        let block = sys.path().join("block");
        // dm-1 (LVM root) is made of dm-0 (LUKS) which is made of sda2.
        write(&block.join("dm-1/dm/uuid"), "LVM-abc\n");
        write(&block.join("dm-0/dm/uuid"), "CRYPT-LUKS2-1234-sda2_crypt\n");
        fs::create_dir_all(block.join("dm-1/slaves")).unwrap();
        fs::create_dir_all(block.join("dm-0/slaves")).unwrap();
        fs::create_dir_all(block.join("sda/sda2")).unwrap();
        std::os::unix::fs::symlink(block.join("dm-0"), block.join("dm-1/slaves/dm-0")).unwrap();
        std::os::unix::fs::symlink(block.join("sda/sda2"), block.join("dm-0/slaves/sda2")).unwrap();
        fs::create_dir_all(sys.path().join("dev/block")).unwrap();
        std::os::unix::fs::symlink(block.join("dm-1"), sys.path().join("dev/block/254:1")).unwrap();
        std::os::unix::fs::symlink(block.join("sda/sda2"), sys.path().join("dev/block/8:2")).unwrap();

        let lvm_on_luks = encryption(sys.path(), Some("254:1".into()));
        assert_eq!(
            (&lvm_on_luks["system_encrypted"], &lvm_on_luks["device"]),
            (&json!(true), &json!("dm-1"))
        );
        let plain = encryption(sys.path(), Some("8:2".into()));
        assert_eq!(plain["system_encrypted"], false);
        assert_eq!(plain["summary"], "the system disk is not encrypted");
        let overlay = encryption(sys.path(), Some("0:35".into()));
        assert_eq!(overlay["system_encrypted"], Value::Null);
        assert_eq!(encryption(sys.path(), None)["system_encrypted"], Value::Null);
    }
}
