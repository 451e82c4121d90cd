//! What the guard protects on disk: credential stores nobody may read through the
//! agent, disks, boot files and logs nobody may overwrite, directories nobody may
//! delete wholesale, and the agent's own files (binary, settings, key, state, and for
//! `kenny up` the server's data directory).

use std::path::{Path, PathBuf};
use std::sync::{LazyLock, RwLock};

use super::pattern::Pattern;

/// Where this agent's own files are, learned at start-up. The installed locations are
/// protected whether or not this process uses them.
#[derive(Debug, Clone, Default)]
pub struct AgentPaths {
    /// The running binary.
    pub binary: Option<PathBuf>,
    /// The settings file (`--config`), which may hold a token.
    pub settings: Option<PathBuf>,
    /// The state directory: the agent key and enrollment marker.
    pub state_dir: Option<PathBuf>,
    /// Directories nobody reaches through the agent at all: for `kenny up`, the
    /// server's data directory (database, server key).
    pub private_dirs: Vec<PathBuf>,
}

static AGENT_PATHS: RwLock<Option<AgentPaths>> = RwLock::new(None);

/// Records the agent's own paths (absolute, as far as they can be resolved). Called
/// once when the agent starts (tests call it again: a later call replaces the binary,
/// settings and state directory and adds private directories).
pub fn register(paths: AgentPaths) {
    let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    let resolved = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or_else(|_| absolute(p));
    let mut guard = AGENT_PATHS.write().unwrap_or_else(|p| p.into_inner());
    let current = guard.get_or_insert_with(AgentPaths::default);
    if let Some(b) = paths.binary {
        current.binary = Some(resolved(b));
    }
    if let Some(s) = paths.settings {
        current.settings = Some(resolved(s));
    }
    if let Some(s) = paths.state_dir {
        current.state_dir = Some(resolved(s));
    }
    current
        .private_dirs
        .extend(paths.private_dirs.into_iter().map(resolved));
    let own = own_paths(current);
    *OWN.write().unwrap_or_else(|p| p.into_inner()) = Some(own);
}

/// The registered paths (empty until [`register`]).
pub fn agent_paths() -> AgentPaths {
    AGENT_PATHS
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_default()
}

/// A protected path and why.
pub(super) struct Protected {
    pub pattern: Pattern,
    pub what: &'static str,
    /// Text any path it matches must contain: a cheap test before the full comparison,
    /// so a file tool's path is checked in microseconds.
    needles: Vec<String>,
    /// The pattern starts with its first needle: a path must start with it too.
    anchored: bool,
    /// The directories above it (and itself), with their needles, for whole-tree uses.
    above: Vec<(Pattern, Vec<String>)>,
}

impl Protected {
    fn new(pattern: Pattern, what: &'static str) -> Protected {
        let needles = pattern.literal_runs();
        let anchored = matches!(pattern.0.first(), Some(super::pattern::Tok::Lit(_)));
        let above = pattern
            .ancestors_and_self()
            .into_iter()
            .filter(|a| !a.is_empty())
            .map(|a| {
                let n = a.literal_runs();
                (a, n)
            })
            .collect();
        Protected {
            pattern,
            what,
            needles,
            anchored,
            above,
        }
    }

    /// The cheap test: every needle is in `text` (the first at its start when anchored).
    fn may_match(&self, text: &str) -> bool {
        match self.needles.split_first() {
            None => true,
            Some((first, rest)) => {
                (if self.anchored {
                    text.starts_with(first.as_str())
                } else {
                    text.contains(first.as_str())
                }) && rest.iter().all(|n| text.contains(n.as_str()))
            }
        }
    }

    /// Whether `path` may name this or a directory above it.
    fn meets_tree(&self, path: &Pattern, text: Option<&str>) -> bool {
        self.above.iter().any(|(a, needles)| {
            text.is_none_or(|t| needles.iter().all(|n| t.contains(n.as_str()))) && path.intersects(a)
        })
    }

    /// Whether `path` (with `text`, its literal text when it has one) may name this.
    fn meets(&self, path: &Pattern, text: Option<&str>) -> bool {
        if let Some(t) = text
            && !self.may_match(t)
        {
            return false;
        }
        path.intersects(&self.pattern)
    }
}

fn table(rows: &[(&str, &'static str)]) -> Vec<Protected> {
    rows.iter()
        .map(|(p, what)| Protected::new(Pattern::glob(p), what))
        .collect()
}

/// Files that hold credentials; no argument of any command and no file tool may name
/// them. `**` is any depth (anyone's home, any browser profile).
static CREDENTIALS: LazyLock<Vec<Protected>> = LazyLock::new(|| {
    table(&[
        ("/etc/shadow", "the system password hashes"),
        ("/etc/shadow-", "the system password hashes"),
        ("/etc/gshadow", "the system password hashes"),
        ("/etc/gshadow-", "the system password hashes"),
        ("/etc/security/opasswd", "old password hashes"),
        ("/etc/master.passwd", "the system password hashes"),
        ("/etc/ssh/ssh_host_*_key", "this PC's SSH host keys"),
        ("**/.ssh/id_*", "SSH private keys"),
        ("**/.ssh/*_key", "SSH private keys"),
        ("**/.gnupg/private-keys-v1.d**", "GnuPG private keys"),
        ("**/.gnupg/secring.gpg", "GnuPG private keys"),
        ("**/.password-store**", "a password store"),
        ("**/keyrings/*.keyring", "the desktop keyring"),
        ("**/user data/**/login data*", "a browser's saved passwords"),
        ("**/google-chrome**/login data*", "a browser's saved passwords"),
        ("**/chromium/**/login data*", "a browser's saved passwords"),
        ("**/bravesoftware/**/login data*", "a browser's saved passwords"),
        ("**/microsoft-edge/**/login data*", "a browser's saved passwords"),
        ("**/opera**/login data*", "a browser's saved passwords"),
        ("**/vivaldi/**/login data*", "a browser's saved passwords"),
        ("**/.mozilla/**/logins.json", "a browser's saved passwords"),
        ("**/.mozilla/**/key[34].db", "a browser's saved passwords"),
        ("**/firefox/profiles/**/logins.json", "a browser's saved passwords"),
        ("**/firefox/profiles/**/key[34].db", "a browser's saved passwords"),
        ("**/.thunderbird/**/logins.json", "a mail client's saved passwords"),
        ("**/.thunderbird/**/key[34].db", "a mail client's saved passwords"),
        ("**/.mozilla/**/signons.sqlite", "a browser's saved passwords"),
        ("?:/windows/system32/config/sam**", "the Windows credential hives"),
        ("?:/windows/system32/config/security**", "the Windows credential hives"),
        ("?:/windows/system32/config/system", "the Windows credential hives"),
        ("?:/windows/system32/config/regback**", "the Windows credential hives"),
        ("?:/windows/repair/sam**", "the Windows credential hives"),
        ("?:/windows/repair/security**", "the Windows credential hives"),
        ("?:/windows/repair/system", "the Windows credential hives"),
        ("?:/windows/ntds/ntds.dit", "the domain's password database"),
        ("**/microsoft/credentials**", "Windows saved credentials"),
        ("**/microsoft/protect**", "Windows DPAPI master keys"),
        ("**/microsoft/vault**", "the Windows credential vault"),
        // A process's memory holds its keys and tokens (the agent's own included); its
        // environment often holds secrets too.
        ("/proc/*/mem", "a program's memory"),
        ("/proc/*/task/*/mem", "a program's memory"),
        ("/proc/*/environ", "a program's environment"),
        ("/proc/*/task/*/environ", "a program's environment"),
        ("/proc/*/map_files/**", "a program's memory"),
        ("/proc/*/task/*/map_files/**", "a program's memory"),
        ("/proc/kcore", "the kernel's memory"),
        ("/dev/mem", "the computer's memory"),
        ("/dev/kmem", "the kernel's memory"),
        // The installed agent's own secrets, wherever this process keeps its own.
        ("/etc/kenny-agent**", "the kenny agent's settings"),
        ("/var/lib/kenny-agent", "the kenny agent's key and state"),
        ("/var/lib/kenny-agent/**", "the kenny agent's key and state"),
        ("?:/programdata/kenny/agent.env", "the kenny agent's settings"),
        ("?:/programdata/kenny/state**", "the kenny agent's key and state"),
    ])
});

/// Names that are not secrets even though a credential pattern covers them.
fn is_public_half(path: &Pattern) -> bool {
    path.as_literal().is_some_and(|p| p.ends_with(".pub"))
}

/// Devices whose contents are the disk (or memory) itself.
static DISKS: LazyLock<Vec<Protected>> = LazyLock::new(|| {
    let mut rows = Vec::new();
    for name in [
        "sd*",
        "hd*",
        "vd*",
        "xvd*",
        "nvme*",
        "mmcblk*",
        "dm-*",
        "md*",
        "mapper/**",
        "disk/**",
        "block/**",
        "sr*",
        "sg*",
        "bsg/**",
        "mtd*",
        "ng*",
        "zd*",
        "rbd*",
        "nbd*",
        "bcache*",
        "loop*",
        "root",
        "disk*",
        "rdisk*",
        "mem",
        "kmem",
        "port",
        "nvram",
        "cpu/**",
    ] {
        rows.push(Protected::new(
            Pattern::glob(&format!("/dev/{name}")),
            "a disk or memory device",
        ));
    }
    rows
});

/// Paths whose contents nobody overwrites, truncates or deletes through the agent.
static WRITE_PROTECTED: LazyLock<Vec<Protected>> = LazyLock::new(|| {
    table(&[
        ("/boot", "the boot files"),
        ("/boot/**", "the boot files"),
        ("/efi/**", "the boot files"),
        ("/sys/firmware/efi/efivars**", "the firmware's boot variables"),
        ("/etc/ld.so.preload", "the list of libraries every program loads"),
        ("/proc/sysrq-trigger", "the kernel's emergency controls"),
        (
            "/proc/sys/kernel/core_pattern",
            "the program the kernel runs on a crash",
        ),
        (
            "/proc/sys/kernel/modprobe",
            "the program the kernel runs to load drivers",
        ),
        ("/usr/local/bin/kenny-agent", "the kenny agent's binary"),
        ("/etc/systemd/system/kenny-agent.service**", "the kenny agent's service"),
        // Drop-ins, links in `*.wants` and runtime overrides change or stop it too.
        ("/etc/systemd/**/kenny-agent.service**", "the kenny agent's service"),
        ("/run/systemd/**/kenny-agent.service**", "the kenny agent's service"),
        ("/lib/systemd/system/kenny-agent.service**", "the kenny agent's service"),
        (
            "/usr/lib/systemd/system/kenny-agent.service**",
            "the kenny agent's service",
        ),
        ("/etc/init.d/kenny-agent", "the kenny agent's service"),
        ("?:/program files/kenny**", "the kenny agent's binary"),
        ("?:/programdata/kenny/agent.env", "the kenny agent's settings"),
        ("?:/programdata/kenny/state**", "the kenny agent's key and state"),
        ("?:/windows/system32/config/**", "the Windows registry hives"),
        ("?:/windows/system32/winevt/logs/**", "the Windows event logs"),
        ("?:/bootmgr", "the boot files"),
        ("?:/boot/**", "the boot files"),
        ("?:/efi/**", "the boot files"),
    ])
});

/// Logs: appending is fine, deleting or truncating them erases what was done.
static LOGS: LazyLock<Vec<Protected>> = LazyLock::new(|| {
    table(&[
        ("/var/log", "the system logs"),
        ("/var/log/**", "the system logs"),
        ("/run/log/journal**", "the system journal"),
        ("?:/windows/system32/winevt/**", "the Windows event logs"),
    ])
});

/// Directories that must never be deleted, moved, or have their permissions reset as a
/// whole. A pattern that could name one of them (or a parent) is refused.
static CRITICAL_DIRS: LazyLock<Vec<Protected>> = LazyLock::new(|| {
    let mut rows = table(&[
        ("/", "the whole file system"),
        ("/home/*", "a home directory"),
        ("/users/*", "a home directory"),
        ("/usr/*", "a system directory"),
        ("/var/lib", "a system directory"),
        ("/var/cache", "a system directory"),
        ("?:/", "a whole drive"),
        ("?:/windows/*", "a Windows system directory"),
        ("?:/users/*", "a home directory"),
        ("?:/program files/*", "installed programs"),
        ("?:/program files (x86)/*", "installed programs"),
        ("?:/programdata/microsoft", "a Windows system directory"),
        // Everything in these at once (a glob, a recursive delete) is the system itself.
        ("/usr/*/*", "a system directory"),
        ("/bin/*", "the system's programs"),
        ("/sbin/*", "the system's programs"),
        ("/lib*/*", "the system's libraries"),
        ("?:/windows/system32/*", "Windows itself"),
        ("?:/windows/syswow64/*", "Windows itself"),
        ("?:/windows/winsxs/*", "Windows itself"),
    ]);
    for top in [
        "bin",
        "boot",
        "dev",
        "etc",
        "home",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "opt",
        "proc",
        "root",
        "run",
        "sbin",
        "srv",
        "sys",
        "usr",
        "var",
        "snap",
        "efi",
        "system",
        "library",
        "applications",
        "users",
        "private",
    ] {
        rows.push(Protected::new(
            Pattern::literal(&format!("/{top}")),
            "a system directory",
        ));
    }
    for dir in [
        "windows",
        "users",
        "program files",
        "program files (x86)",
        "programdata",
    ] {
        rows.push(Protected::new(
            Pattern::glob(&format!("?:/{dir}")),
            "a Windows system directory",
        ));
    }
    rows
});

fn pattern_of(path: &Path) -> Pattern {
    Pattern::literal(&path.to_string_lossy()).normalized_path()
}

fn with_subtree(dir: &Path) -> [Pattern; 2] {
    let base = pattern_of(dir);
    let mut all = base.clone();
    all.push_str("/");
    all.push_deep();
    [base, all]
}

/// The agent's own paths as protected patterns, rebuilt on [`register`]: its secrets
/// (key, state, settings, private directories; read and write protected) and its binary.
#[derive(Default)]
struct Own {
    secrets: Vec<Protected>,
    binary: Option<Protected>,
}

static OWN: RwLock<Option<Own>> = RwLock::new(None);

fn own_paths(paths: &AgentPaths) -> Own {
    let mut own = Own::default();
    if let Some(dir) = &paths.state_dir {
        own.secrets
            .extend(with_subtree(dir).map(|p| Protected::new(p, "the kenny agent's key and state")));
    }
    if let Some(file) = &paths.settings {
        own.secrets
            .push(Protected::new(pattern_of(file), "the kenny agent's settings"));
    }
    for dir in &paths.private_dirs {
        own.secrets
            .extend(with_subtree(dir).map(|p| Protected::new(p, "the kenny server's data directory")));
    }
    own.binary = paths
        .binary
        .as_deref()
        .map(|b| Protected::new(pattern_of(b), "the kenny agent's binary"));
    own
}

/// What a path may be used for, for the check to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// Read, listed, copied, sent anywhere: only credentials and the agent's secrets.
    Read,
    /// Opened for writing or appended to.
    Write,
    /// Overwritten from the start, truncated, deleted, renamed or its permissions
    /// changed: also logs.
    Replace,
    /// Deleted, moved or re-permissioned with everything below it: also every
    /// directory above a protected path, and the critical directories.
    Tree,
}

/// [`refusal`] for a plain (normalized) path: the protected entries are first tested
/// by their needles alone, so the common case builds no pattern at all.
pub(super) fn refusal_text(text: &str, usage: Use) -> Option<String> {
    let contains = |needles: &[String]| needles.iter().all(|n| text.contains(n.as_str()));
    let candidate = |p: &Protected| {
        if usage == Use::Tree {
            p.above.iter().any(|(_, n)| contains(n))
        } else {
            p.may_match(text)
        }
    };
    let own = OWN.read().unwrap_or_else(|p| p.into_inner());
    let mut tables: Vec<&[Protected]> = vec![&CREDENTIALS];
    if usage != Use::Read {
        tables.extend([&DISKS[..], &WRITE_PROTECTED[..], &LOGS[..], &CRITICAL_DIRS[..]]);
    }
    let any = own
        .as_ref()
        .is_some_and(|o| o.secrets.iter().chain(o.binary.iter()).any(candidate))
        || tables.iter().any(|t| t.iter().any(candidate));
    drop(own);
    if !any {
        return None;
    }
    refusal(&Pattern::literal(text), usage)
}

/// Whether a resolved path is a disk or memory device, by name.
pub(super) fn device_text(text: &str) -> Option<&'static str> {
    DISKS
        .iter()
        .find(|d| d.may_match(text) && Pattern::literal(text).intersects(&d.pattern))
        .map(|d| d.what)
}

/// Why `path` may not be used this way, if it may not.
pub(super) fn refusal(path: &Pattern, usage: Use) -> Option<String> {
    let text = path.as_literal();
    let text = text.as_deref();
    let hit = |p: &Protected| {
        if usage == Use::Tree {
            p.meets_tree(path, text)
        } else {
            p.meets(path, text)
        }
    };
    let own = OWN.read().unwrap_or_else(|p| p.into_inner());
    let own = own.as_ref();
    for p in own.iter().flat_map(|o| o.secrets.iter()) {
        if hit(p) {
            return Some(format!("touches {}", p.what));
        }
    }
    if !is_public_half(path)
        && let Some(c) = CREDENTIALS.iter().find(|c| c.meets(path, text))
    {
        return Some(format!("reads {}", c.what));
    }
    if usage == Use::Read {
        return None;
    }
    if let Some(d) = DISKS.iter().find(|d| d.meets(path, text)) {
        return Some(format!("writes to {}", d.what));
    }
    if let Some(b) = own.and_then(|o| o.binary.as_ref())
        && hit(b)
    {
        return Some("changes the kenny agent's binary".into());
    }
    if let Some(w) = WRITE_PROTECTED.iter().find(|w| hit(w)) {
        return Some(format!("changes {}", w.what));
    }
    if usage == Use::Write {
        return None;
    }
    if let Some(l) = LOGS.iter().find(|l| hit(l)) {
        return Some(format!("erases {}", l.what));
    }
    if usage == Use::Tree
        && let Some(c) = CRITICAL_DIRS.iter().find(|c| c.meets(path, text))
    {
        return Some(format!("deletes or breaks {} ({})", c.what, c.pattern));
    }
    None
}

/// A Windows device path that opens a raw disk, volume or the object namespace
/// (`\\.\PhysicalDrive0`, `\\.\C:`, `\\?\GLOBALROOT\...`, `\\?\Volume{...}`).
pub fn is_raw_device_path(text: &str) -> bool {
    // Every such path starts with two slashes of either kind.
    if !(text.starts_with("\\\\") || text.starts_with("//") || text.starts_with("\\/") || text.starts_with("/\\")) {
        return false;
    }
    let t = text.replace('/', "\\").to_ascii_lowercase();
    let t = t.trim_matches(|c| c == '"' || c == '\'');
    if t.contains("globalroot") || t.contains("harddiskvolumeshadowcopy") || t.contains("\\device\\harddisk") {
        return true;
    }
    let Some(rest) = t.strip_prefix("\\\\.\\").or_else(|| t.strip_prefix("\\\\?\\")) else {
        return false;
    };
    rest.starts_with("physicaldrive")
        || rest.starts_with("harddisk")
        || rest.starts_with("volume{")
        || rest.starts_with("cdrom")
        || rest.starts_with("tape")
        || rest.starts_with("scsi")
        || (rest.len() >= 2 && rest.as_bytes()[1] == b':' && rest.trim_end_matches('\\').len() == 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Pattern {
        Pattern::glob(p).normalized_path()
    }

    #[test]
    fn uses() {
        for (p, usage, refused) in [
            ("/etc/shadow", Use::Read, true),
            ("/etc/sha*", Use::Read, true),
            ("/home/sam/.ssh/id_rsa.pub", Use::Read, false),
            ("/home/sam/.ssh/id_rsa", Use::Read, true),
            ("/dev/sda", Use::Read, false),
            ("/dev/sda", Use::Write, true),
            ("/dev/null", Use::Write, false),
            ("/boot/grub/grub.cfg", Use::Write, true),
            ("/var/log/syslog", Use::Write, false),
            ("/var/log/syslog", Use::Replace, true),
            ("/tmp/foo", Use::Tree, false),
            ("/usr/local", Use::Tree, true),
            ("/usr/local/src/foo", Use::Tree, false),
            ("/*", Use::Tree, true),
            ("c:\\", Use::Tree, true),
            ("C:\\Windows\\Temp\\x", Use::Tree, false),
        ] {
            assert_eq!(refusal(&path(p), usage).is_some(), refused, "{p} {usage:?}");
        }
    }

    #[test]
    fn raw_device_paths() {
        for p in [
            r"\\.\PhysicalDrive0",
            r"\\.\C:",
            r"\\?\GLOBALROOT\Device\HarddiskVolumeShadowCopy1\Windows\System32\config\SAM",
            "//./physicaldrive1",
            r"\\?\Volume{1234}\",
        ] {
            assert!(is_raw_device_path(p), "{p}");
        }
        for p in [r"C:\Windows", r"\\server\share\x", r"\\?\C:\Users\x"] {
            assert!(!is_raw_device_path(p), "{p}");
        }
    }
}
