//! The reboot_pending section: whether the PC waits for a restart, and why.
//!
//! Linux: `<run>/reboot-required` (Debian, Ubuntu; the packages that asked are in
//! `reboot-required.pkgs`), and the running kernel (`/proc/sys/kernel/osrelease`) against
//! the installed ones: its `/lib/modules/<release>` removed, or a newer `/boot/vmlinuz-*`
//! of the same flavour. Like needrestart, it also finds processes still running code from
//! replaced libraries (`/proc/<pid>/maps` lines on a `.so` marked `(deleted)`): those need
//! their service restarted, not the PC, so they are listed (`services_to_restart`) and
//! make the section `warn` without making `pending` true.
//!
//! Windows: the registry markers Windows and installers leave (Component Based
//! Servicing, Windows Update, pending file renames, a computer rename, `UpdateExeVolatile`,
//! a domain join).

use std::cmp::Ordering;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::super::command::Output;
use super::super::files::{read_small, read_text, root_from_env};
use super::super::format::clip;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section, Status, not_collected_here, section};
use super::MAX_TEXT;

/// Most packages, processes and pending files named.
const MAX_PACKAGES: usize = 20;
const MAX_LISTED: usize = 20;
const MAX_FILES: usize = 5;
/// The /proc walk stops at this many processes or this much time, whichever comes first:
/// a busy server has thousands, and the maps of a browser run to megabytes.
const MAX_PROCESSES: usize = 4000;
const SCAN_BUDGET: Duration = Duration::from_secs(3);
const MAPS_CAP: u64 = 4 * 1024 * 1024;
const MAX_KERNELS: usize = 256;

/// Where the Linux reader looks; tests build a fake tree for each.
struct Roots {
    run: PathBuf,
    proc: PathBuf,
    boot: PathBuf,
    modules: PathBuf,
}

impl Roots {
    fn of_this_pc() -> Self {
        Roots {
            run: root_from_env("KENNY_RUN_ROOT", "/run"),
            proc: PathBuf::from("/proc"),
            boot: PathBuf::from("/boot"),
            modules: PathBuf::from("/lib/modules"),
        }
    }
}

pub(in crate::tools::telemetry) fn reboot_pending_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    Ok(reboot_pending(&Roots::of_this_pc(), SCAN_BUDGET))
}

fn reboot_pending(roots: &Roots, budget: Duration) -> Section {
    let packages = requested_by_packages(&roots.run);
    let kernel = kernel_state(&roots.proc, &roots.boot, &roots.modules);
    let stale = stale_processes(&roots.proc, budget);

    let mut reasons = Vec::new();
    let mut why = Vec::new();
    if let Some(packages) = &packages {
        reasons.push("PackageUpdate");
        why.push(if packages.is_empty() {
            "requested by a package update".to_owned()
        } else {
            format!("requested by {}", first_few(packages))
        });
    }
    if let Some(kernel_why) = kernel.why_outdated() {
        reasons.push("KernelUpdate");
        why.push(kernel_why);
    }
    let pending = !reasons.is_empty();
    let mut summary = if pending {
        format!("restart pending: {}", why.join("; "))
    } else {
        "no restart pending".to_owned()
    };
    if !stale.names.is_empty() {
        summary.push_str(&format!(
            "; {} still running replaced libraries ({})",
            plural(stale.names.len(), "service or program", "services or programs"),
            first_few(&stale.names)
        ));
    }
    let status = if pending || !stale.names.is_empty() {
        Status::Warn
    } else {
        Status::Ok
    };
    section(
        status,
        summary,
        json!({
            "pending": pending,
            "reasons": reasons,
            "packages": packages.unwrap_or_default(),
            "running_kernel": kernel.running,
            "newest_kernel": kernel.newest,
            "services_to_restart": stale.names.iter().take(MAX_LISTED).collect::<Vec<_>>(),
            "services_to_restart_count": stale.names.len(),
            "services_to_restart_truncated": stale.names.len() > MAX_LISTED,
            "processes_scanned": stale.scanned,
            "processes_unreadable": stale.unreadable,
            "scan_complete": stale.complete,
        }),
    )
}

/// The first three names, for a one-line summary; the fields have the rest.
fn first_few(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
    let more = if names.len() > 3 { ", ..." } else { "" };
    format!("{}{more}", shown.join(", "))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The packages that asked for a restart, or `None` when none did.
fn requested_by_packages(run: &Path) -> Option<Vec<String>> {
    if !run.join("reboot-required").exists() {
        return None;
    }
    let mut packages: Vec<String> = read_text(&run.join("reboot-required.pkgs"), 64 * 1024)
        .map(|(text, _)| {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|l| clip(l, MAX_TEXT))
                .collect()
        })
        .unwrap_or_default();
    // The file gets a line per trigger, so the same package can appear more than once.
    let mut seen = std::collections::HashSet::new();
    packages.retain(|p| seen.insert(p.clone()));
    packages.truncate(MAX_PACKAGES);
    Some(packages)
}

struct KernelState {
    running: Option<String>,
    newest: Option<String>,
    modules_removed: bool,
}

impl KernelState {
    fn why_outdated(&self) -> Option<String> {
        let running = self.running.as_deref()?;
        if let Some(newest) = &self.newest {
            return Some(format!("kernel {newest} is installed, {running} is running"));
        }
        self.modules_removed
            .then(|| format!("the running kernel {running} was uninstalled (its modules are gone)"))
    }
}

fn kernel_state(proc: &Path, boot: &Path, modules: &Path) -> KernelState {
    let running = read_small(&proc.join("sys/kernel/osrelease"))
        .filter(|r| !r.is_empty() && !r.contains('/'))
        .map(|r| clip(&r, MAX_TEXT));
    let Some(release) = running.clone() else {
        return KernelState {
            running,
            newest: None,
            modules_removed: false,
        };
    };
    let newest = installed_kernels(boot)
        .into_iter()
        .filter(|k| flavour(k) == flavour(&release))
        .max_by(|a, b| natural_cmp(a, b))
        .filter(|k| natural_cmp(k, &release) == Ordering::Greater)
        .map(|k| clip(&k, MAX_TEXT));
    // A kernel booted from outside (VMs, containers) has no /lib/modules at all: only a
    // tree holding other kernels' modules but not this one's means it was removed.
    let others_installed = fs::read_dir(modules).is_ok_and(|mut entries| entries.next().is_some());
    let modules_removed = others_installed && !modules.join(&release).exists();
    KernelState {
        running,
        newest,
        modules_removed,
    }
}

/// Releases of the kernels in `/boot` (`vmlinuz-6.1.0-18-amd64`); not `vmlinuz-linux`
/// (Arch names no version) nor rescue images.
fn installed_kernels(boot: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(boot) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .take(MAX_KERNELS)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let release = name.strip_prefix("vmlinuz-")?;
            let numbered = release.starts_with(|c: char| c.is_ascii_digit());
            (numbered && !release.contains("rescue")).then(|| release.to_owned())
        })
        .collect()
}

/// A release without its numbers (`6.1.0-18-amd64` → `..--amd`): kernels of another
/// flavour (`-rt`, `-lowlatency`) installed beside the running one are no update of it.
fn flavour(release: &str) -> String {
    release.chars().filter(|c| !c.is_ascii_digit()).collect()
}

/// Compares releases by their runs of digits as numbers, so `6.1.0-18` > `6.1.0-9`.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.chars().next(), b.chars().next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (na, ra) = split_digits(a);
                let (nb, rb) = split_digits(b);
                let by_number = na
                    .trim_start_matches('0')
                    .len()
                    .cmp(&nb.trim_start_matches('0').len())
                    .then_with(|| na.trim_start_matches('0').cmp(nb.trim_start_matches('0')));
                if by_number != Ordering::Equal {
                    return by_number;
                }
                (a, b) = (ra, rb);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(&y);
                }
                (a, b) = (&a[x.len_utf8()..], &b[y.len_utf8()..]);
            }
        }
    }
}

fn split_digits(text: &str) -> (&str, &str) {
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    text.split_at(end)
}

/// Processes running code from libraries that were replaced on disk.
struct Stale {
    /// Distinct systemd units (`ssh.service`) or, outside system services, process names.
    names: Vec<String>,
    scanned: usize,
    unreadable: usize,
    complete: bool,
}

fn stale_processes(proc: &Path, budget: Duration) -> Stale {
    let started = Instant::now();
    let mut stale = Stale {
        names: Vec::new(),
        scanned: 0,
        unreadable: 0,
        complete: true,
    };
    let Ok(entries) = fs::read_dir(proc) else {
        stale.complete = false;
        return stale;
    };
    let pids = entries.filter_map(Result::ok).filter(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    });
    for entry in pids {
        if stale.scanned >= MAX_PROCESSES || started.elapsed() > budget {
            stale.complete = false;
            break;
        }
        stale.scanned += 1;
        let dir = entry.path();
        let Ok((maps, _)) = read_text(&dir.join("maps"), MAPS_CAP) else {
            // Gone since the listing, or another user's process when not root.
            stale.unreadable += 1;
            continue;
        };
        if maps.lines().any(maps_deleted_library) {
            let name = service_of(&dir);
            if !name.is_empty() && !stale.names.contains(&name) {
                stale.names.push(name);
            }
        }
    }
    stale.names.sort();
    stale
}

/// A `/proc/<pid>/maps` line mapping a shared library that has since been deleted
/// (replaced by a package update). Memory files (`/memfd:`, `/dev/shm`) are not libraries.
fn maps_deleted_library(line: &str) -> bool {
    let Some(path) = line.trim_end().strip_suffix("(deleted)") else {
        return false;
    };
    let Some(start) = path.find('/') else {
        return false;
    };
    let path = path[start..].trim_end();
    if ["/memfd:", "/dev/shm/", "/tmp/", "/run/", "/SYSV"]
        .iter()
        .any(|p| path.starts_with(p))
    {
        return false;
    }
    let file = path.rsplit('/').next().unwrap_or(path);
    file.ends_with(".so") || file.contains(".so.")
}

/// The system service a process belongs to (`ssh.service`), else its name.
fn service_of(pid_dir: &Path) -> String {
    let unit = read_small(&pid_dir.join("cgroup")).and_then(|cgroup| {
        cgroup.lines().find_map(|line| {
            let path = line.splitn(3, ':').nth(2)?;
            let mut parts = path.split('/');
            let in_system = parts.any(|p| p == "system.slice");
            let unit = path.rsplit('/').next()?;
            (in_system && unit.ends_with(".service")).then(|| unit.to_owned())
        })
    });
    let name = unit.or_else(|| read_small(&pid_dir.join("comm"))).unwrap_or_default();
    clip(&name, 64)
}

/// The markers, as raw facts; the parser decides what they mean.
pub(super) static WINDOWS: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
function Value($path, $name) {
  $item = Get-ItemProperty -LiteralPath $path -Name $name -ErrorAction SilentlyContinue
  if ($item) { $item.$name }
}
$cv = 'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion'
$sm = 'HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager'
$cn = 'HKLM:\SYSTEM\CurrentControlSet\Control\ComputerName'
$nl = 'HKLM:\SYSTEM\CurrentControlSet\Services\Netlogon'
[pscustomobject]@{
  ComponentBasedServicing = Test-Path -LiteralPath "$cv\Component Based Servicing\RebootPending"
  WindowsUpdate = Test-Path -LiteralPath "$cv\WindowsUpdate\Auto Update\RebootRequired"
  PendingFileRenameOperations = @(Value $sm 'PendingFileRenameOperations') + @(Value $sm 'PendingFileRenameOperations2')
  ActiveComputerName = Value "$cn\ActiveComputerName" 'ComputerName'
  ComputerName = Value "$cn\ComputerName" 'ComputerName'
  UpdateExeVolatile = Value 'HKLM:\SOFTWARE\Microsoft\Updates' 'UpdateExeVolatile'
  DomainJoin = (Test-Path -LiteralPath "$nl\JoinDomain") -or (Test-Path -LiteralPath "$nl\AvoidSpnSet")
} | ConvertTo-Json -Compress -Depth 3
"#,
    limit: Duration::from_secs(10),
    parse: parse_windows,
};

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let Value::Object(row) = json_of(output)? else {
        return Err("the restart markers query printed no object; run it by hand to see why".to_owned());
    };
    let flag = |key: &str| row.get(key).and_then(Value::as_bool).unwrap_or(false);
    let renames = file_renames(row.get("PendingFileRenameOperations"));
    let rename = computer_rename(&row);
    let update_exe = row
        .get("UpdateExeVolatile")
        .and_then(Value::as_i64)
        .is_some_and(|v| v != 0);

    let mut reasons: Vec<&str> = Vec::new();
    let mut why: Vec<String> = Vec::new();
    let mut mark = |hit: bool, reason: &'static str, words: String| {
        if hit {
            reasons.push(reason);
            why.push(words);
        }
    };
    mark(flag("WindowsUpdate"), "WindowsUpdate", "Windows Update".into());
    mark(
        flag("ComponentBasedServicing"),
        "ComponentBasedServicing",
        "component servicing (updates, features)".into(),
    );
    mark(
        !renames.is_empty(),
        "PendingFileRename",
        plural(
            renames.len(),
            "file to move or delete at restart",
            "files to move or delete at restart",
        ),
    );
    mark(
        rename.is_some(),
        "ComputerRename",
        rename
            .as_ref()
            .map(|(_, to)| format!("computer rename to {to}"))
            .unwrap_or_default(),
    );
    mark(update_exe, "UpdateExeVolatile", "an installer's update".into());
    mark(flag("DomainJoin"), "DomainJoin", "a domain join".into());

    let pending = !reasons.is_empty();
    let (status, summary) = if pending {
        (Status::Warn, format!("restart pending: {}", why.join(", ")))
    } else {
        (Status::Ok, "no restart pending".to_owned())
    };
    let files: Vec<&Value> = renames.iter().take(MAX_FILES).collect();
    Ok(section(
        status,
        summary,
        json!({
            "pending": pending,
            "reasons": reasons,
            "pending_file_renames": renames.len(),
            "pending_files": files,
            "computer_rename": rename.map(|(from, to)| json!({"from": from, "to": to})),
        }),
    ))
}

/// PendingFileRenameOperations is a list of pairs: the file, then where it moves to
/// (`!` marks "replacing what is there"; an empty target means the file is deleted), with
/// NT path prefixes. `to` is null for a deletion.
fn file_renames(value: Option<&Value>) -> Vec<Value> {
    let entries: Vec<&str> = match value {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(one)) => vec![one.as_str()],
        _ => Vec::new(),
    };
    let plain = |path: &str| clip(path.trim_start_matches('!').trim_start_matches(r"\??\"), MAX_TEXT);
    entries
        .chunks(2)
        .filter(|pair| !pair[0].trim().is_empty())
        .map(|pair| {
            let target = pair.get(1).map(|t| plain(t)).filter(|t| !t.is_empty());
            json!({"file": plain(pair[0]), "to": target})
        })
        .collect()
}

/// The name the PC takes at its next start, when it differs from the one in use.
fn computer_rename(row: &Map<String, Value>) -> Option<(String, String)> {
    let active = row.get("ActiveComputerName")?.as_str()?.trim();
    let next = row.get("ComputerName")?.as_str()?.trim();
    (!active.is_empty() && !next.is_empty() && !active.eq_ignore_ascii_case(next))
        .then(|| (clip(active, MAX_TEXT), clip(next, MAX_TEXT)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        crate::tools::telemetry::files::put_file(path, text.as_bytes()).unwrap();
    }

    struct Tree {
        _dir: tempfile::TempDir,
        roots: Roots,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots {
            run: dir.path().join("run"),
            proc: dir.path().join("proc"),
            boot: dir.path().join("boot"),
            modules: dir.path().join("lib/modules"),
        };
        fs::create_dir_all(&roots.run).unwrap();
        write(&roots.proc.join("sys/kernel/osrelease"), "6.1.0-17-amd64\n");
        Tree { _dir: dir, roots }
    }

    fn process(proc: &Path, pid: u32, comm: &str, cgroup: &str, maps: &str) {
        write(&proc.join(format!("{pid}/comm")), &format!("{comm}\n"));
        write(&proc.join(format!("{pid}/cgroup")), cgroup);
        write(&proc.join(format!("{pid}/maps")), maps);
    }

    const FRESH_MAPS: &str = "\
55d0c6a00000-55d0c6a2c000 r--p 00000000 fe:01 1835119                    /usr/sbin/sshd
7f3a1c000000-7f3a1c022000 r--p 00000000 fe:01 1837001                    /usr/lib/x86_64-linux-gnu/libc.so.6
7fff5a3fd000-7fff5a41e000 rw-p 00000000 00:00 0                          [stack]
";
    const STALE_MAPS: &str = "\
55d0c6a00000-55d0c6a2c000 r--p 00000000 fe:01 1835119                    /usr/sbin/sshd
7f3a1c200000-7f3a1c26e000 r-xp 00000000 fe:01 1837222                    /usr/lib/x86_64-linux-gnu/libssl.so.3 (deleted)
";
    const MEMFD_MAPS: &str = "\
7fa1e4fe7000-7fa1e4ff1000 r--p 00000000 00:01 2                          /memfd:sealed-91173221a7ea (deleted)
7f0000000000-7f0000001000 rw-s 00000000 00:19 12                         /dev/shm/pulse-shm-1 (deleted)
";

    #[test]
    fn nothing_pending_on_a_current_system() {
        let t = tree();
        fs::create_dir_all(t.roots.modules.join("6.1.0-17-amd64")).unwrap();
        write(&t.roots.boot.join("vmlinuz-6.1.0-17-amd64"), "");
        write(&t.roots.boot.join("vmlinuz-6.1.0-9-amd64"), "");
        process(&t.roots.proc, 1, "systemd", "0::/init.scope\n", FRESH_MAPS);
        process(
            &t.roots.proc,
            812,
            "pulseaudio",
            "0::/user.slice/user-1000.slice\n",
            MEMFD_MAPS,
        );
        let s = reboot_pending(&t.roots, SCAN_BUDGET);
        assert_eq!(s["status"], "ok", "{s:?}");
        assert_eq!(s["summary"], "no restart pending");
        assert_eq!(s["pending"], false);
        assert_eq!(s["reasons"], json!([]));
        assert_eq!(s["running_kernel"], "6.1.0-17-amd64");
        assert_eq!(s["newest_kernel"], Value::Null);
        assert_eq!(s["processes_scanned"], 2);
        assert_eq!(s["scan_complete"], true);
    }

    #[test]
    fn a_package_marker_names_its_packages_once() {
        let t = tree();
        write(
            &t.roots.run.join("reboot-required"),
            "*** System restart required ***\n",
        );
        write(
            &t.roots.run.join("reboot-required.pkgs"),
            "linux-image-6.1.0-18-amd64\nlibc6\nlibc6\n\n",
        );
        let s = reboot_pending(&t.roots, SCAN_BUDGET);
        assert_eq!(s["status"], "warn");
        assert_eq!(s["pending"], true);
        assert_eq!(s["reasons"], json!(["PackageUpdate"]));
        assert_eq!(s["packages"], json!(["linux-image-6.1.0-18-amd64", "libc6"]));
        assert_eq!(
            s["summary"],
            "restart pending: requested by linux-image-6.1.0-18-amd64, libc6"
        );
        fs::remove_file(t.roots.run.join("reboot-required.pkgs")).unwrap();
        let bare = reboot_pending(&t.roots, SCAN_BUDGET);
        assert_eq!(bare["summary"], "restart pending: requested by a package update");
    }

    #[test]
    fn a_newer_kernel_of_the_same_flavour_means_a_restart() {
        let t = tree();
        fs::create_dir_all(t.roots.modules.join("6.1.0-17-amd64")).unwrap();
        for k in ["6.1.0-17-amd64", "6.1.0-18-amd64", "6.1.0-9-amd64", "6.3.0-1-rt-amd64"] {
            write(&t.roots.boot.join(format!("vmlinuz-{k}")), "");
        }
        write(&t.roots.boot.join("vmlinuz-0-rescue-4f2a"), "");
        let s = reboot_pending(&t.roots, SCAN_BUDGET);
        assert_eq!(s["reasons"], json!(["KernelUpdate"]));
        assert_eq!(s["newest_kernel"], "6.1.0-18-amd64");
        assert_eq!(
            s["summary"],
            "restart pending: kernel 6.1.0-18-amd64 is installed, 6.1.0-17-amd64 is running"
        );
    }

    #[test]
    fn removed_modules_mean_a_restart_but_no_modules_tree_does_not() {
        let t = tree();
        // A VM kernel booted from outside: no /lib/modules, no /boot.
        assert_eq!(reboot_pending(&t.roots, SCAN_BUDGET)["pending"], false);
        // Arch after an upgrade: vmlinuz-linux has no version; only the modules tell.
        write(&t.roots.boot.join("vmlinuz-linux"), "");
        fs::create_dir_all(t.roots.modules.join("6.1.1-arch1-1")).unwrap();
        let s = reboot_pending(&t.roots, SCAN_BUDGET);
        assert_eq!(s["reasons"], json!(["KernelUpdate"]));
        assert_eq!(
            s["summary"],
            "restart pending: the running kernel 6.1.0-17-amd64 was uninstalled (its modules are gone)"
        );
    }

    #[test]
    fn processes_on_replaced_libraries_are_named_by_service() {
        let t = tree();
        let p = &t.roots.proc;
        process(p, 1, "systemd", "0::/init.scope\n", FRESH_MAPS);
        process(p, 640, "sshd", "0::/system.slice/ssh.service\n", STALE_MAPS);
        process(p, 641, "sshd", "0::/system.slice/ssh.service\n", STALE_MAPS);
        process(
            p,
            2100,
            "firefox-bin",
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox.scope\n",
            STALE_MAPS,
        );
        process(p, 2200, "pulseaudio", "0::/user.slice\n", MEMFD_MAPS);
        write(&p.join("self/maps"), STALE_MAPS);
        let s = reboot_pending(&t.roots, SCAN_BUDGET);
        assert_eq!(s["status"], "warn");
        assert_eq!(s["pending"], false, "services restart without the PC");
        assert_eq!(s["services_to_restart"], json!(["firefox-bin", "ssh.service"]));
        assert_eq!(s["services_to_restart_count"], 2);
        assert_eq!(s["processes_scanned"], 5);
        assert_eq!(
            s["summary"],
            "no restart pending; 2 services or programs still running replaced libraries (firefox-bin, ssh.service)"
        );
    }

    #[test]
    fn the_process_walk_is_bounded() {
        let t = tree();
        for pid in 1..=5 {
            process(&t.roots.proc, pid, "x", "", STALE_MAPS);
        }
        let s = reboot_pending(&t.roots, Duration::ZERO);
        assert_eq!(s["scan_complete"], false);
        assert!(s["processes_scanned"].as_u64().unwrap() <= 1, "{s:?}");
    }

    #[test]
    fn maps_lines_that_count() {
        assert!(maps_deleted_library(
            "7f3a1c200000-7f3a1c26e000 r-xp 00000000 fe:01 1 /usr/lib/libssl.so.3 (deleted)"
        ));
        assert!(maps_deleted_library(
            "7f3a1c200000-7f3a1c26e000 r-xp 00000000 fe:01 1 /opt/app/lib/libfoo.so (deleted)"
        ));
        assert!(!maps_deleted_library(
            "7f3a1c200000-7f3a1c26e000 r-xp 00000000 fe:01 1 /usr/lib/libssl.so.3"
        ));
        assert!(!maps_deleted_library(
            "7f3a1c200000-7f3a1c26e000 r-xp 00000000 fe:01 1 /usr/share/fonts/cache (deleted)"
        ));
        assert!(!maps_deleted_library(
            "7fa1e4fe7000-7fa1e4ff1000 r--p 00000000 00:01 2 /memfd:libx.so (deleted)"
        ));
    }

    #[test]
    fn releases_compare_by_their_numbers() {
        assert_eq!(natural_cmp("6.1.0-18-amd64", "6.1.0-9-amd64"), Ordering::Greater);
        assert_eq!(
            natural_cmp("6.8.9-300.fc40.x86_64", "6.10.3-200.fc40.x86_64"),
            Ordering::Less
        );
        assert_eq!(natural_cmp("5.15.0-101-generic", "5.15.0-101-generic"), Ordering::Equal);
        assert_eq!(flavour("6.1.0-18-amd64"), flavour("6.1.0-9-amd64"));
        assert_ne!(flavour("6.1.0-18-amd64"), flavour("6.1.0-18-rt-amd64"));
    }

    #[test]
    #[cfg(unix)]
    fn this_machine() {
        let s = reboot_pending_section().unwrap();
        eprintln!("{}", serde_json::to_string_pretty(&s).unwrap());
        if cfg!(target_os = "linux") {
            assert!(s["pending"].is_boolean(), "{s:?}");
            assert!(s["reasons"].is_array());
            assert!(s["processes_scanned"].as_u64().unwrap() >= 1, "{s:?}");
            assert!(s["running_kernel"].is_string());
        }
    }

    #[test]
    fn the_windows_query_reads_the_documented_markers() {
        let script = WINDOWS.script;
        for marker in [
            r"Component Based Servicing\RebootPending",
            r"WindowsUpdate\Auto Update\RebootRequired",
            "PendingFileRenameOperations",
            r"Control\ComputerName'",
            r#"\ActiveComputerName" 'ComputerName'"#,
            r"SOFTWARE\Microsoft\Updates' 'UpdateExeVolatile",
            r"Netlogon'",
        ] {
            assert!(script.contains(marker), "{marker}");
        }
    }

    #[test]
    fn file_renames_come_in_pairs() {
        let list = json!([
            r"\??\C:\Windows\Temp\a.tmp",
            "",
            r"\??\C:\Program Files\App\app.dll",
            r"!\??\C:\Program Files\App\app.dll.new",
            null
        ]);
        let renames = file_renames(Some(&list));
        assert_eq!(
            renames,
            [
                json!({"file": r"C:\Windows\Temp\a.tmp", "to": null}),
                json!({"file": r"C:\Program Files\App\app.dll", "to": r"C:\Program Files\App\app.dll.new"}),
            ]
        );
        assert!(file_renames(Some(&json!([null, null]))).is_empty());
    }
}
