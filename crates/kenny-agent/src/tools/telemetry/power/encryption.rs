//! The encryption section: whether the system disk is encrypted, and every encrypted
//! volume.
//!
//! Linux: the device holding `/` (`<sys>/dev/block/<major:minor>`), followed down through
//! what it is built on (`slaves/`: LVM, RAID) to a dm-crypt mapping (`dm/uuid` starting
//! `CRYPT-`; verity and integrity targets use the same prefix but encrypt nothing).
//! Every dm-crypt mapping in `<sys>/block/dm-*` is listed with its name, what it is built
//! on and where it (or a volume on it) is mounted (`/proc/self/mountinfo`).
//!
//! Windows: BitLocker per volume from `Win32_EncryptableVolume`
//! (`root/cimv2/Security/MicrosoftVolumeEncryption`, administrators only) and its
//! `GetConversionStatus` and `GetEncryptionMethod` methods. The system drive counts as
//! encrypted only when fully encrypted with protection on: a suspended BitLocker, or
//! device encryption waiting for activation, keeps the key in the clear next to the data,
//! and a drive still being encrypted is partly in the clear. Windows editions
//! without BitLocker have no such namespace: the section says so (`system_encrypted`
//! unknown) instead of failing.

use std::fs;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::super::command::Output;
use super::super::files::{read_small, read_text, sys_root};
use super::super::format::clip;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section, Status, not_collected_here, section};
use super::MAX_TEXT;
use crate::tools::psjson::{number, rows_of, text};

/// Device levels followed, mappings and holders looked at, volumes listed.
const MAX_DEPTH: usize = 8;
const MAX_DM: usize = 256;
const MAX_LISTED: usize = 32;

pub(in crate::tools::telemetry) fn encryption_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let mountinfo = read_text(Path::new("/proc/self/mountinfo"), 4 * 1024 * 1024)
        .map(|(text, _)| text)
        .unwrap_or_default();
    Ok(encryption(&sys_root(), root_device(), &mountinfo))
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

fn encryption(sys: &Path, root: Option<String>, mountinfo: &str) -> Section {
    let (volumes, count) = crypt_volumes(sys, mountinfo);
    let listed = json!({"volumes": volumes, "count": count, "truncated": count > volumes.len()});
    let mut fields = match listed {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let more = match count {
        0 => String::new(),
        1 => "; 1 encrypted volume".to_owned(),
        n => format!("; {n} encrypted volumes"),
    };
    let Some(root) = root else {
        fields.extend(into_map(
            json!({"system_encrypted": null, "device": null, "method": null}),
        ));
        return section(
            Status::Ok,
            format!("cannot tell which device holds /{more}"),
            Value::Object(fields),
        );
    };
    let Ok(device) = fs::canonicalize(sys.join("dev/block").join(&root)) else {
        // Overlay and network roots (containers) have no block device.
        fields.extend(into_map(
            json!({"system_encrypted": null, "device": root, "method": null}),
        ));
        return section(
            Status::Ok,
            format!("/ is not on a block device ({root}); nothing to tell{more}"),
            Value::Object(fields),
        );
    };
    let name = device.file_name().map(|n| clip(&n.to_string_lossy(), MAX_TEXT));
    let method = crypt_below(&device, 0);
    let (status, summary) = match &method {
        Some(m) => (
            Status::Ok,
            format!("the system disk is encrypted (dm-crypt, {m}){more}"),
        ),
        None => (Status::Warn, format!("the system disk is not encrypted{more}")),
    };
    fields.extend(into_map(json!({
        "system_encrypted": method.is_some(),
        "device": name,
        "method": method.map(|m| format!("dm-crypt {m}")),
    })));
    section(status, summary, Value::Object(fields))
}

fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The encryption of a dm-crypt mapping's uuid (`CRYPT-LUKS2-<uuid>-<name>` → `LUKS2`);
/// `None` for other device-mapper targets, and for verity and integrity, which
/// cryptsetup also names `CRYPT-` but which only check data.
fn crypt_kind(uuid: &str) -> Option<String> {
    let kind = uuid.strip_prefix("CRYPT-")?.split('-').next()?;
    let checks_only = ["VERITY", "INTEGRITY", "SUBDEV"].contains(&kind);
    (!kind.is_empty() && !checks_only).then(|| clip(kind, 20))
}

/// The encryption of `device` or of anything it is built on (`slaves/`, through LVM or
/// RAID), if any.
fn crypt_below(device: &Path, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(kind) = read_small(&device.join("dm/uuid")).and_then(|u| crypt_kind(&u)) {
        return Some(kind);
    }
    // A partition's parent disk is not what encrypts it: only follow what it is made of.
    fs::read_dir(device.join("slaves"))
        .ok()?
        .filter_map(Result::ok)
        .take(16)
        .find_map(|e| {
            let slave = fs::canonicalize(e.path()).ok()?;
            crypt_below(&slave, depth + 1)
        })
}

/// Every dm-crypt mapping (listed ones first `MAX_LISTED`, by name), and how many there are.
fn crypt_volumes(sys: &Path, mountinfo: &str) -> (Vec<Value>, usize) {
    let block = sys.join("block");
    let Ok(entries) = fs::read_dir(&block) else {
        return (Vec::new(), 0);
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.starts_with("dm-"))
        .take(MAX_DM)
        .collect();
    names.sort_by_key(|n| n[3..].parse::<u32>().unwrap_or(u32::MAX));
    let mounts = mount_points(mountinfo);
    let volumes: Vec<Value> = names
        .iter()
        .filter_map(|name| {
            let dir = block.join(name);
            let kind = crypt_kind(&read_small(&dir.join("dm/uuid"))?)?;
            Some(json!({
                "device": name,
                "name": read_small(&dir.join("dm/name")).map(|n| clip(&n, MAX_TEXT)),
                "mount": mount_of(&block, name, &mounts, 0),
                "encrypted": true,
                "protection": null,
                "percent": null,
                "method": kind,
                "below": listing(&dir.join("slaves")),
            }))
        })
        .collect();
    let count = volumes.len();
    (volumes.into_iter().take(MAX_LISTED).collect(), count)
}

/// Names in a sysfs folder (`slaves/`, `holders/`), sorted, at most 16.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .take(16)
                .map(|e| clip(&e.file_name().to_string_lossy(), MAX_TEXT))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `major:minor` → mount point, from `/proc/self/mountinfo` (fields: id, parent,
/// major:minor, root, mount point, ...; spaces in paths written `\040`).
fn mount_points(mountinfo: &str) -> Vec<(String, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let device = fields.nth(2)?;
            let point = fields.nth(1)?;
            Some((device.to_owned(), clip(&point.replace("\\040", " "), MAX_TEXT)))
        })
        .collect()
}

/// Where `name` or a volume built on it (`holders/`: an LVM volume on a LUKS mapping) is
/// mounted; `/` first when it is among them.
fn mount_of(block: &Path, name: &str, mounts: &[(String, String)], depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    let dir = block.join(name);
    let dev = read_small(&dir.join("dev"))?;
    let here: Vec<&String> = mounts.iter().filter(|(d, _)| *d == dev).map(|(_, p)| p).collect();
    if let Some(point) = here.iter().find(|p| p.as_str() == "/").or(here.first()) {
        return Some((*point).clone());
    }
    let above: Vec<String> = listing(&dir.join("holders"))
        .iter()
        .filter_map(|holder| mount_of(block, holder, mounts, depth + 1))
        .collect();
    above.iter().find(|p| p.as_str() == "/").or(above.first()).cloned()
}

/// Each volume's BitLocker state through the documented class and its methods; a
/// missing namespace (editions without BitLocker) is told apart from other failures.
pub(super) static WINDOWS: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$namespace = 'root/cimv2/Security/MicrosoftVolumeEncryption'
$available = $true
$reason = $null
try {
  $volumes = @(Get-CimInstance -Namespace $namespace -ClassName Win32_EncryptableVolume)
} catch [Microsoft.Management.Infrastructure.CimException] {
  $code = [string]$_.Exception.NativeErrorCode
  if ($code -ne 'InvalidNamespace' -and $code -ne 'InvalidClass') { throw }
  $available = $false
  $reason = $_.Exception.Message
  $volumes = @()
}
$rows = foreach ($v in $volumes) {
  $conversion = Invoke-CimMethod -InputObject $v -MethodName GetConversionStatus
  $method = Invoke-CimMethod -InputObject $v -MethodName GetEncryptionMethod
  [pscustomobject]@{
    DeviceID = $v.DeviceID
    DriveLetter = $v.DriveLetter
    VolumeType = $v.VolumeType
    ProtectionStatus = $v.ProtectionStatus
    ConversionStatus = $conversion.ConversionStatus
    EncryptionPercentage = $conversion.EncryptionPercentage
    EncryptionMethod = $method.EncryptionMethod
  }
}
[pscustomobject]@{
  Available = $available
  Reason = $reason
  SystemDrive = $env:SystemDrive
  Volumes = @($rows)
} | ConvertTo-Json -Compress -Depth 3
"#,
    limit: Duration::from_secs(12),
    parse: parse_windows,
};

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let Value::Object(mut all) = json_of(output)? else {
        return Err("the BitLocker query printed no object; run it by hand to see why".to_owned());
    };
    if all.get("Available") == Some(&Value::Bool(false)) {
        return Ok(section(
            Status::Ok,
            "BitLocker is not available on this edition of Windows; cannot tell whether the system drive is encrypted"
                .to_owned(),
            json!({
                "system_encrypted": null,
                "method": null,
                "volumes": [],
                "count": 0,
                "truncated": false,
                "reason": all.get("Reason").and_then(Value::as_str).map(|r| clip(r, MAX_TEXT)),
            }),
        ));
    }
    let system_drive = text(&all, "SystemDrive").unwrap_or_else(|| "C:".to_owned());
    let rows = rows_of(all.remove("Volumes").unwrap_or(Value::Null))?;
    // Volumes without a letter (recovery partitions) say nothing an admin acts on, except
    // the OS volume, which always counts.
    let volumes: Vec<BitLocker> = rows
        .iter()
        .map(|r| BitLocker::of(r, &system_drive))
        .filter(|v| v.mount.is_some() || v.system)
        .collect();
    let system = volumes.iter().find(|v| v.system);
    // Half-converted data is half in the clear: only a finished, protected volume counts.
    let system_encrypted = system.map(|v| v.protection == Some("on") && v.encrypted());
    let (status, summary) = match system {
        None => (Status::Ok, "BitLocker lists no system volume; cannot tell".to_owned()),
        Some(v) => system_summary(
            v,
            volumes
                .iter()
                .filter(|v| !v.system && v.protection == Some("on"))
                .count(),
        ),
    };
    let count = volumes.len();
    Ok(section(
        status,
        summary,
        json!({
            "system_encrypted": system_encrypted,
            "method": system.and_then(|v| v.method),
            "volumes": volumes.iter().take(MAX_LISTED).map(BitLocker::to_json).collect::<Vec<_>>(),
            "count": count,
            "truncated": count > MAX_LISTED,
        }),
    ))
}

struct BitLocker {
    mount: Option<String>,
    system: bool,
    protection: Option<&'static str>,
    conversion: Option<&'static str>,
    percent: Option<i64>,
    method: Option<&'static str>,
}

impl BitLocker {
    fn of(row: &Map<String, Value>, system_drive: &str) -> Self {
        let mount = text(row, "DriveLetter").map(|d| clip(&d, 8));
        // VolumeType exists from Windows 8 on; before, the system drive's letter tells.
        let system = match number(row, "VolumeType") {
            Some(kind) => kind == 0,
            None => mount.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(system_drive)),
        };
        BitLocker {
            mount,
            system,
            protection: number(row, "ProtectionStatus").and_then(|p| match p {
                0 => Some("off"),
                1 => Some("on"),
                2 => Some("unknown"),
                _ => None,
            }),
            conversion: number(row, "ConversionStatus").and_then(conversion_word),
            percent: number(row, "EncryptionPercentage"),
            method: number(row, "EncryptionMethod").and_then(method_word),
        }
    }

    fn encrypted(&self) -> bool {
        self.conversion == Some("fully_encrypted")
    }

    fn to_json(&self) -> Value {
        json!({
            "mount": self.mount,
            "system": self.system,
            "encrypted": self.encrypted(),
            "protection": self.protection,
            "conversion": self.conversion,
            "percent": self.percent,
            "method": self.method,
        })
    }
}

fn system_summary(v: &BitLocker, other_protected: usize) -> (Status, String) {
    let drive = v.mount.clone().unwrap_or_else(|| "the system drive".to_owned());
    let others = match other_protected {
        0 => String::new(),
        1 => "; 1 more volume protected".to_owned(),
        n => format!("; {n} more volumes protected"),
    };
    let method = v.method.map(|m| format!(", {m}")).unwrap_or_default();
    let percent = v.percent.unwrap_or(0);
    match (v.protection, v.conversion) {
        (Some("on"), Some("fully_encrypted")) => (Status::Ok, format!("BitLocker protects {drive}{method}{others}")),
        (_, Some("fully_encrypted")) => (
            Status::Warn,
            format!(
                "BitLocker on {drive} is suspended: the data is encrypted but its key is stored in the clear{others}"
            ),
        ),
        (_, Some("encrypting")) => (
            Status::Warn,
            format!("{drive} is being encrypted ({percent}%); not protected until it is done{others}"),
        ),
        (_, Some("encryption_paused")) => (
            Status::Warn,
            format!("encryption of {drive} is paused at {percent}%; not protected until it is done{others}"),
        ),
        (_, Some("decrypting" | "decryption_paused")) => (
            Status::Warn,
            format!("BitLocker is being turned off on {drive} ({percent}% still encrypted){others}"),
        ),
        _ => (Status::Warn, format!("{drive} is not encrypted{others}")),
    }
}

/// `ConversionStatus` of `Win32_EncryptableVolume` / `GetConversionStatus`.
fn conversion_word(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "fully_decrypted",
        1 => "fully_encrypted",
        2 => "encrypting",
        3 => "decrypting",
        4 => "encryption_paused",
        5 => "decryption_paused",
        _ => return None,
    })
}

/// `GetEncryptionMethod`'s `EncryptionMethod`; 0 is "none".
fn method_word(code: i64) -> Option<&'static str> {
    Some(match code {
        1 => "AES-128 with diffuser",
        2 => "AES-256 with diffuser",
        3 => "AES-128",
        4 => "AES-256",
        5 => "hardware encryption",
        6 => "XTS-AES-128",
        7 => "XTS-AES-256",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn write(path: &Path, text: &str) {
        crate::tools::telemetry::files::put_file(path, text.as_bytes()).unwrap();
    }

    #[cfg(unix)]
    fn link(target: &Path, at: &Path) {
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).unwrap();
    }

    /// dm-1 (LVM root) on dm-0 (LUKS2) on sda3; dm-2 a LUKS1 data disk on sdb; dm-3 a
    /// verity image; sda2 a plain /boot.
    #[cfg(unix)]
    fn laptop() -> tempfile::TempDir {
        let sys = tempfile::tempdir().unwrap();
        let block = sys.path().join("block");
        write(
            &block.join("dm-0/dm/uuid"),
            "CRYPT-LUKS2-8b0c1f6e2a4d4f0e9d7c5b3a1f2e4d6c-sda3_crypt\n",
        );
        write(&block.join("dm-0/dm/name"), "sda3_crypt\n");
        write(&block.join("dm-0/dev"), "254:0\n");
        write(&block.join("dm-1/dm/uuid"), "LVM-Zq3Y8xkT\n");
        write(&block.join("dm-1/dm/name"), "vg0-root\n");
        write(&block.join("dm-1/dev"), "254:1\n");
        write(&block.join("dm-2/dm/uuid"), "CRYPT-LUKS1-0f3e2d1c-data\n");
        write(&block.join("dm-2/dm/name"), "data\n");
        write(&block.join("dm-2/dev"), "254:2\n");
        write(&block.join("dm-3/dm/uuid"), "CRYPT-VERITY-5d1e-usr\n");
        write(&block.join("dm-3/dev"), "254:3\n");
        write(&block.join("sda/sda3/dev"), "8:3\n");
        write(&block.join("sda/sda2/dev"), "8:2\n");
        write(&block.join("sdb/dev"), "8:16\n");
        link(&block.join("dm-0"), &block.join("dm-1/slaves/dm-0"));
        link(&block.join("dm-1"), &block.join("dm-0/holders/dm-1"));
        link(&block.join("sda/sda3"), &block.join("dm-0/slaves/sda3"));
        link(&block.join("sdb"), &block.join("dm-2/slaves/sdb"));
        link(&block.join("dm-1"), &sys.path().join("dev/block/254:1"));
        link(&block.join("sda/sda2"), &sys.path().join("dev/block/8:2"));
        link(&block.join("dm-3"), &sys.path().join("dev/block/254:3"));
        sys
    }

    #[cfg(unix)]
    const MOUNTINFO: &str = "\
22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/mapper/vg0-root rw
25 22 8:2 / /boot rw,relatime shared:2 - ext4 /dev/sda2 rw
31 22 254:2 / /srv/my\\040data rw,relatime shared:3 - xfs /dev/mapper/data rw
";

    #[test]
    #[cfg(unix)]
    fn follows_lvm_down_to_luks_and_lists_every_mapping() {
        let sys = laptop();
        let s = encryption(sys.path(), Some("254:1".into()), MOUNTINFO);
        assert_eq!(s["status"], "ok");
        assert_eq!(s["system_encrypted"], true);
        assert_eq!(s["device"], "dm-1");
        assert_eq!(s["method"], "dm-crypt LUKS2");
        assert_eq!(
            s["summary"],
            "the system disk is encrypted (dm-crypt, LUKS2); 2 encrypted volumes"
        );
        assert_eq!(s["count"], 2);
        assert_eq!(
            s["volumes"],
            json!([
                {"device": "dm-0", "name": "sda3_crypt", "mount": "/", "encrypted": true,
                 "protection": null, "percent": null, "method": "LUKS2", "below": ["sda3"]},
                {"device": "dm-2", "name": "data", "mount": "/srv/my data", "encrypted": true,
                 "protection": null, "percent": null, "method": "LUKS1", "below": ["sdb"]},
            ])
        );
    }

    #[test]
    #[cfg(unix)]
    fn plain_verity_overlay_and_unknown_roots() {
        let sys = laptop();
        let plain = encryption(sys.path(), Some("8:2".into()), MOUNTINFO);
        assert_eq!(
            (plain["status"].as_str(), &plain["system_encrypted"]),
            (Some("warn"), &json!(false))
        );
        assert_eq!(
            plain["summary"],
            "the system disk is not encrypted; 2 encrypted volumes"
        );
        let verity = encryption(sys.path(), Some("254:3".into()), MOUNTINFO);
        assert_eq!(verity["system_encrypted"], false, "verity checks, it does not encrypt");
        let overlay = encryption(sys.path(), Some("0:35".into()), MOUNTINFO);
        assert_eq!(overlay["system_encrypted"], Value::Null);
        assert_eq!(overlay["status"], "ok");
        assert_eq!(encryption(sys.path(), None, "")["system_encrypted"], Value::Null);
        let bare = tempfile::tempdir().unwrap();
        let nothing = encryption(bare.path(), Some("8:1".into()), "");
        assert_eq!((&nothing["count"], &nothing["volumes"]), (&json!(0), &json!([])));
    }

    #[test]
    fn crypt_kinds() {
        assert_eq!(crypt_kind("CRYPT-LUKS2-abc-name").as_deref(), Some("LUKS2"));
        assert_eq!(crypt_kind("CRYPT-PLAIN-swap").as_deref(), Some("PLAIN"));
        assert_eq!(crypt_kind("CRYPT-BITLK-abc-usb").as_deref(), Some("BITLK"));
        assert_eq!(crypt_kind("CRYPT-INTEGRITY-x"), None);
        assert_eq!(crypt_kind("CRYPT-SUBDEV-x"), None);
        assert_eq!(crypt_kind("LVM-abc"), None);
    }

    #[test]
    #[cfg(unix)]
    fn this_machine() {
        let s = encryption_section().unwrap();
        eprintln!("{}", serde_json::to_string_pretty(&s).unwrap());
        if cfg!(target_os = "linux") {
            assert!(s.contains_key("system_encrypted"), "{s:?}");
            assert!(s["volumes"].is_array(), "{s:?}");
            assert!(s["count"].is_u64(), "{s:?}");
        }
    }

    #[test]
    fn the_windows_query_uses_the_bitlocker_class_and_methods() {
        for part in [
            "'root/cimv2/Security/MicrosoftVolumeEncryption'",
            "-ClassName Win32_EncryptableVolume",
            "GetConversionStatus",
            "GetEncryptionMethod",
            "ProtectionStatus",
            "VolumeType",
            "'InvalidNamespace'",
        ] {
            assert!(WINDOWS.script.contains(part), "{part}");
        }
    }
}
