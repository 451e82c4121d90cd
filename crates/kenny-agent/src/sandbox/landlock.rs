//! Builds the Landlock ruleset: every path the command may use, granted level by level
//! around the few it may not (disk and memory devices: nothing; `/boot`, `/efi` and the
//! EFI variables: read only).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

/// The highest ABI whose rights we ask for. Later ABIs add rights (connecting to UNIX
/// sockets) that would stop `systemctl` from talking to systemd.
const ASK: ABI = ABI::V6;

/// The Landlock ABI this kernel offers, 0 when it has none.
pub(super) fn kernel_abi() -> i32 {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
    // returns a number.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    i32::try_from(abi).unwrap_or(0).max(0)
}

/// A built ruleset and what it needs to stay current.
pub(super) struct Built {
    pub fd: Arc<OwnedFd>,
    /// Directories whose entries were granted one by one, with their modification
    /// times: when one changes (a new entry), the ruleset is built again.
    pub watched: Vec<(PathBuf, Option<SystemTime>)>,
    pub signals_scoped: bool,
    pub rules: usize,
}

impl Built {
    pub(super) fn stale(&self) -> bool {
        self.watched.iter().any(|(dir, seen)| mtime(dir) != *seen)
    }
}

fn mtime(dir: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(dir).and_then(|m| m.modified()).ok()
}

/// What a protected path may still be used for.
#[derive(Clone, Copy)]
enum Keep {
    /// Nothing (disks, memory).
    Nothing,
    /// Reading and listing (`/boot`).
    ReadOnly,
}

/// Rights never granted: making device nodes (which would let a command make its own
/// disk device, or link one elsewhere).
fn never() -> BitFlags<AccessFs> {
    AccessFs::MakeBlock | AccessFs::MakeChar
}

fn all() -> BitFlags<AccessFs> {
    AccessFs::from_all(ASK)
}

fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::from_file(ASK)
}

fn kept(keep: Keep) -> BitFlags<AccessFs> {
    match keep {
        Keep::Nothing => BitFlags::EMPTY,
        Keep::ReadOnly => AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute,
    }
}

/// Character devices that are disks or memory by another name.
fn is_raw_char_device(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let digits_after = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_digit()))
    };
    matches!(name, "mem" | "kmem" | "port" | "nvram" | "msr")
        || rel.starts_with("bsg/")
        || digits_after("sg")
        || digits_after("nvme")
        || digits_after("mtd")
        || (name.starts_with("ng") && name[2..].contains('n'))
        || (name.starts_with("mtd") && name.ends_with("ro"))
}

/// Every protected node below `root` (recursively), as absolute paths.
fn protected_devices(root: &Path, all_devices: bool, out: &mut BTreeMap<PathBuf, Keep>) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let path = entry.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_block_device()
                || (ft.is_char_device()
                    && (all_devices || {
                        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
                        is_raw_char_device(&rel)
                    }))
            {
                out.insert(path, Keep::Nothing);
            }
        }
    }
}

/// Builds the ruleset: `/dev`'s disks and memory, the extra device directories, `/boot`,
/// `/efi` and the EFI variables.
pub(super) fn build(extra_device_dirs: &[PathBuf]) -> Result<Built, String> {
    let mut protected: BTreeMap<PathBuf, Keep> = BTreeMap::new();
    protected_devices(Path::new("/dev"), false, &mut protected);
    for dir in extra_device_dirs {
        if let Ok(dir) = std::fs::canonicalize(dir) {
            protected_devices(&dir, true, &mut protected);
        }
    }
    // Boot files and the firmware's boot variables: a command may look, not change.
    for dir in ["/boot", "/efi", "/sys/firmware/efi/efivars"] {
        if Path::new(dir).is_dir() {
            protected.insert(PathBuf::from(dir), Keep::ReadOnly);
        }
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all())
        .map_err(|e| e.to_string())?;
    ruleset = ruleset.scope(Scope::Signal).map_err(|e| e.to_string())?;
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    let mut rules = 0usize;
    let mut watched = Vec::new();
    let mut add =
        |created: &mut landlock::RulesetCreated, path: &Path, access: BitFlags<AccessFs>| -> Result<(), String> {
            let access = access & !never();
            if access.is_empty() {
                return Ok(());
            }
            let Ok(fd) = PathFd::new(path) else { return Ok(()) };
            created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            rules += 1;
            Ok(())
        };
    // Directories on the way to a protected path, with the rights denied below each.
    let mut above: BTreeMap<PathBuf, BitFlags<AccessFs>> = BTreeMap::new();
    for (path, keep) in &protected {
        // Devices are files: only file rights are theirs to lose (listing `/dev` stays).
        let denied = match keep {
            Keep::Nothing => file_rights(),
            Keep::ReadOnly => all() & !kept(*keep),
        };
        for ancestor in path.ancestors().skip(1) {
            *above.entry(ancestor.to_path_buf()).or_insert(BitFlags::EMPTY) |= denied;
        }
    }
    for (dir, denied) in &above {
        // The directory itself keeps what nothing below it is denied...
        add(&mut created, dir, all() & !*denied & !file_rights())?;
        watched.push((dir.clone(), mtime(dir)));
        // ...and each entry in it is granted on its own.
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if above.contains_key(&path) {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_symlink() {
                // Access is judged on what a link points to, never on the link.
                continue;
            }
            let access = match protected.get(&path) {
                Some(keep) => kept(*keep),
                None => all(),
            };
            let access = if ft.is_dir() { access } else { access & file_rights() };
            add(&mut created, &path, access)?;
        }
    }
    let signals_scoped = kernel_abi() >= 6;
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| "this kernel has no Landlock (or it is disabled)".to_owned())?;
    Ok(Built {
        fd: Arc::new(fd),
        watched,
        signals_scoped,
        rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_char_devices_by_name() {
        for n in [
            "mem",
            "kmem",
            "port",
            "sg0",
            "nvme0",
            "ng0n1",
            "mtd0",
            "mtd0ro",
            "bsg/0:0:0:0",
            "cpu/0/msr",
        ] {
            assert!(is_raw_char_device(n), "{n}");
        }
        for n in [
            "null", "zero", "tty", "ptmx", "nvme0n1", "random", "sgx", "kmsg", "net/tun",
        ] {
            assert!(!is_raw_char_device(n), "{n}");
        }
    }
}
