//! The mount plan for one command: what its private mount namespace hides (empty,
//! read-only) or makes read-only. Built in the agent, carried out in the child with
//! plain system calls (see `child.rs`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::guard::AgentPaths;

pub(super) enum Op {
    /// An empty read-only tmpfs over a directory.
    HideDir(CString),
    /// An empty read-only file over a file.
    HideFile(CString),
    /// The file itself, read-only.
    ReadOnly(CString),
}

pub(super) struct Plan {
    pub ops: Vec<Op>,
    /// The empty file bound over hidden files.
    pub empty: CString,
}

fn c(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

fn real(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// Private SSH keys in `dir`: users' `id_*` and the host's `ssh_host_*_key`, without
/// the `.pub` halves.
fn ssh_keys(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let private = name.starts_with("id_") || (name.starts_with("ssh_host_") && name.ends_with("_key"));
        if private && !name.ends_with(".pub") && e.file_type().is_ok_and(|t| t.is_file()) {
            out.push(e.path());
        }
    }
}

/// Credential files to hide, as they are now.
fn credential_files() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow",
        "/etc/gshadow-",
        "/etc/security/opasswd",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    ssh_keys(Path::new("/root/.ssh"), &mut out);
    ssh_keys(Path::new("/etc/ssh"), &mut out);
    if let Ok(homes) = std::fs::read_dir("/home") {
        for h in homes.flatten() {
            ssh_keys(&h.path().join(".ssh"), &mut out);
        }
    }
    out
}

/// The plan for the agent's paths as registered now.
pub(super) fn plan(paths: &AgentPaths, empty: &Path) -> Option<Plan> {
    let empty = c(empty)?;
    let mut ops = Vec::new();
    let mut files: Vec<PathBuf> = credential_files();
    files.extend(paths.settings.iter().cloned());
    files.push(PathBuf::from("/etc/kenny-agent/agent.env"));
    for f in files.iter().filter_map(|f| real(f)).filter(|f| f.is_file()) {
        ops.extend(c(&f).map(Op::HideFile));
    }
    let mut read_only: Vec<PathBuf> = paths.binary.iter().cloned().collect();
    read_only.push(PathBuf::from("/usr/local/bin/kenny-agent"));
    read_only.push(PathBuf::from("/etc/systemd/system/kenny-agent.service"));
    for f in read_only.iter().filter_map(|f| real(f)).filter(|f| f.is_file()) {
        ops.extend(c(&f).map(Op::ReadOnly));
    }
    let mut dirs: Vec<PathBuf> = paths
        .state_dir
        .iter()
        .chain(paths.private_dirs.iter())
        .cloned()
        .collect();
    dirs.push(PathBuf::from("/var/lib/kenny-agent"));
    dirs.push(PathBuf::from("/etc/kenny-agent"));
    let mut dirs: Vec<PathBuf> = dirs.iter().filter_map(|d| real(d)).filter(|d| d.is_dir()).collect();
    // Outer directories first, so an inner one hidden later is not mounted over again.
    dirs.sort_by_key(|d| d.components().count());
    dirs.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if !kept.iter().any(|k| d.starts_with(k)) {
            kept.push(d);
        }
    }
    for d in &kept {
        ops.extend(c(d).map(Op::HideDir));
    }
    Some(Plan { ops, empty })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ssh_keys_of_users_and_the_host_are_found_but_not_public_halves() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "id_ed25519",
            "id_ed25519.pub",
            "ssh_host_ed25519_key",
            "ssh_host_ed25519_key.pub",
            "sshd_config",
            "known_hosts",
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let mut found = Vec::new();
        ssh_keys(dir.path(), &mut found);
        let mut names: Vec<String> = found
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["id_ed25519", "ssh_host_ed25519_key"]);
    }
}
