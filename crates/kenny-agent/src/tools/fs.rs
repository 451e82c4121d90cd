//! File system tools: list a directory, read a file in pages, find files by name, and measure disk usage.

use std::collections::{HashSet, VecDeque};
use std::fs::{DirEntry, FileType, Metadata};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kenny_proto::args::{FsDiskUsageArgs, FsListArgs, FsReadArgs, FsSearchArgs};
use serde_json::{Value, json};

use super::bounded::{blocking, complete_utf8_len, lossy_text};
use super::telemetry::rfc3339;
use super::{ToolError, ToolResult};

const DEFAULT_LIST_LIMIT: usize = 500;
/// Entries read from one directory before giving up on seeing them all (and sorting
/// them all): beyond this a listing is not useful to a person anyway.
const LIST_SCAN_CAP: usize = 200_000;
const DEFAULT_READ_BYTES: usize = 65_536;
const DEFAULT_MAX_RESULTS: usize = 100;
const DEFAULT_MAX_DEPTH: usize = 12;
const SEARCH_VISIT_CAP: u64 = 200_000;
const DEFAULT_TOP: usize = 10;
const SIZE_VISIT_CAP: u64 = 500_000;
/// Walks stop here with `truncated: true`: a partial answer beats a timed-out call.
const WALK_TIME: Duration = Duration::from_secs(60);
/// For work stuck in the kernel, e.g. on a hung network mount, that no deadline check reaches.
const BACKSTOP: Duration = Duration::from_secs(90);

pub(super) async fn list(args: FsListArgs) -> ToolResult {
    let path = absolute_path(&args.path)?;
    let path = resolved(&path)?;
    let limit = args.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    blocking("fs_list", BACKSTOP, move || list_dir(&path, limit)).await?
}

pub(super) async fn read(args: FsReadArgs) -> ToolResult {
    let path = absolute_path(&args.path)?;
    let path = resolved(&path)?;
    let offset = args.offset.unwrap_or(0);
    let max_bytes = args.max_bytes.unwrap_or(DEFAULT_READ_BYTES);
    blocking("fs_read", BACKSTOP, move || read_chunk(&path, offset, max_bytes)).await?
}

pub(super) async fn search(args: FsSearchArgs) -> ToolResult {
    let root = absolute_path(&args.path)?;
    let root = resolved(&root)?;
    let query = SearchQuery {
        matcher: NameMatcher::new(&args.pattern),
        max_results: args.max_results.unwrap_or(DEFAULT_MAX_RESULTS),
        max_depth: args.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
    };
    let budget = Budget::new(SEARCH_VISIT_CAP, WALK_TIME);
    blocking("fs_search", BACKSTOP, move || search_tree(&root, &query, budget)).await?
}

pub(super) async fn disk_usage(args: FsDiskUsageArgs) -> ToolResult {
    let Some(path) = args.path else {
        let volumes = blocking("listing volumes", BACKSTOP, volumes)
            .await?
            .map_err(|e| ToolError::exec_failed(format!("could not list volumes: {e}")))?;
        let volumes: Vec<Value> = volumes.iter().map(Volume::to_json).collect();
        return Ok(json!({ "volumes": volumes }));
    };
    let path = absolute_path(&path)?;
    let path = resolved(&path)?;
    let top = args.top.unwrap_or(DEFAULT_TOP);
    let budget = Budget::new(SIZE_VISIT_CAP, WALK_TIME);
    blocking("fs_disk_usage", BACKSTOP, move || size_tree(&path, top, budget)).await?
}

fn absolute_path(raw: &str) -> Result<PathBuf, ToolError> {
    let path = Path::new(raw);
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        // Relative to what? The agent's working directory means nothing to the caller.
        Err(ToolError::bad_args(format!("path must be absolute, got `{raw}`")))
    }
}

/// The path with symlinks and `..` resolved, checked against what the guard protects
/// (the agent's key and settings, credential stores, devices): whatever name a caller
/// uses, the file it reaches is what is judged.
fn resolved(path: &Path) -> Result<PathBuf, ToolError> {
    let real = std::fs::canonicalize(path).map_err(|e| ToolError::io(&shown(path), &e))?;
    crate::guard::check_resolved_path(&real)
        .map_err(|b| ToolError::new(kenny_proto::error::ErrorCode::Blocked, b.message()))?;
    Ok(real)
}

/// Directories a walk never enters: the agent's own state and private directories.
fn private_dirs() -> Vec<PathBuf> {
    let paths = crate::guard::agent_paths();
    let mut out: Vec<PathBuf> = paths.state_dir.into_iter().chain(paths.private_dirs).collect();
    out.extend(
        [
            "/var/lib/kenny-agent",
            "/etc/kenny-agent",
            r"C:\ProgramData\kenny\state",
        ]
        .iter()
        .map(PathBuf::from),
    );
    out
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

fn kind_of(file_type: FileType) -> &'static str {
    if file_type.is_symlink() {
        "symlink"
    } else if file_type.is_dir() {
        "dir"
    } else if file_type.is_file() {
        "file"
    } else {
        "other"
    }
}

/// Metadata of `path` (following symlinks), which must be a directory.
fn require_dir(path: &Path) -> Result<Metadata, ToolError> {
    let meta = std::fs::metadata(path).map_err(|e| ToolError::io(&shown(path), &e))?;
    if meta.is_dir() {
        Ok(meta)
    } else {
        Err(ToolError::bad_args(format!(
            "{} is not a directory ({} bytes); use fs_read for files",
            shown(path),
            meta.len()
        )))
    }
}

/// Stops a walk after a number of entries or at a deadline, whichever comes first.
struct Budget {
    left: u64,
    deadline: Instant,
    exhausted: bool,
}

impl Budget {
    fn new(entries: u64, time: Duration) -> Self {
        Budget {
            left: entries,
            deadline: Instant::now() + time,
            exhausted: false,
        }
    }

    /// Spends one entry; false once the walk must stop.
    fn take(&mut self) -> bool {
        if self.left == 0 || Instant::now() >= self.deadline {
            self.exhausted = true;
        }
        if self.exhausted {
            return false;
        }
        self.left -= 1;
        true
    }
}

// ---- fs_list ----

fn list_dir(path: &Path, limit: usize) -> ToolResult {
    require_dir(path)?;
    let reader = std::fs::read_dir(path).map_err(|e| ToolError::io(&shown(path), &e))?;
    let mut found = Vec::new();
    let mut scan_cut = false;
    for entry in reader {
        if found.len() == LIST_SCAN_CAP {
            scan_cut = true;
            break;
        }
        // An entry that vanished or cannot be read between readdir and now is skipped.
        let Ok(entry) = entry else { continue };
        let kind = entry.file_type().map(kind_of).unwrap_or("other");
        found.push((kind, entry.file_name().to_string_lossy().into_owned()));
    }
    found.sort_by_cached_key(|(kind, name)| (*kind != "dir", name.to_lowercase(), name.clone()));
    let total = found.len();
    // Only the entries shown are stat'ed: a huge directory costs one readdir, not N stats.
    let entries: Vec<Value> = found
        .into_iter()
        .take(limit)
        .map(|(kind, name)| list_entry(&path.join(&name), kind, name))
        .collect();
    Ok(json!({
        "path": shown(path),
        "count": entries.len(),
        "total": total,
        "truncated": scan_cut || total > entries.len(),
        "entries": entries,
    }))
}

fn list_entry(path: &Path, kind: &str, name: String) -> Value {
    let meta = std::fs::symlink_metadata(path).ok();
    // A directory's own size is filesystem bookkeeping, not its contents: leave it out.
    let size = meta.as_ref().filter(|m| !m.is_dir()).map(Metadata::len);
    let modified = meta.and_then(|m| m.modified().ok()).and_then(rfc3339);
    json!({ "name": name, "kind": kind, "size": size, "modified": modified })
}

// ---- fs_read ----

fn read_chunk(path: &Path, offset: u64, max_bytes: usize) -> ToolResult {
    let name = shown(path);
    let meta = std::fs::metadata(path).map_err(|e| ToolError::io(&name, &e))?;
    if meta.is_dir() {
        return Err(ToolError::bad_args(format!("{name} is a directory; use fs_list")));
    }
    refuse_special(&name, &meta)?;
    let mut file = open_regular(path, &meta).map_err(|e| match e {
        OpenError::Io(e) => ToolError::io(&name, &e),
        OpenError::Swapped => ToolError::exec_failed(format!(
            "{name} changed while it was being opened (a symlink or file was swapped in); try again"
        )),
        #[cfg(target_os = "linux")]
        OpenError::Blocked(why) => ToolError::new(kenny_proto::error::ErrorCode::Blocked, why),
    })?;
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| ToolError::io(&name, &e))?;
    }
    // One byte more than asked tells whether anything follows, even for files whose
    // size the kernel reports as 0 (/proc, /sys).
    let want = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
    let mut buf = Vec::with_capacity(max_bytes.min(1 << 20).saturating_add(1));
    file.take(want)
        .read_to_end(&mut buf)
        .map_err(|e| ToolError::io(&name, &e))?;
    let more = buf.len() > max_bytes;
    buf.truncate(max_bytes);
    let binary = buf.contains(&0);
    if more && !binary {
        // End the page on a whole character so `offset + bytes_read` starts the next one
        // cleanly; but never return an empty page while more follows.
        let whole = complete_utf8_len(&buf);
        if whole > 0 {
            buf.truncate(whole);
        }
    }
    Ok(json!({
        "path": name,
        "size": meta.len(),
        "offset": offset,
        "bytes_read": buf.len(),
        "content": lossy_text(&buf, more),
        "truncated": more,
        "binary": binary,
    }))
}

/// Only regular files are read. Opening a FIFO blocks until a writer appears, sockets
/// cannot be read, and device files are the disks, memory or hardware themselves (some
/// act on being opened).
fn refuse_special(name: &str, meta: &Metadata) -> Result<(), ToolError> {
    if meta.is_file() {
        return Ok(());
    }
    Err(ToolError::new(
        kenny_proto::error::ErrorCode::Blocked,
        format!("refused by agent safety policy: {name} is a device, pipe or socket, not a regular file"),
    ))
}

enum OpenError {
    Io(std::io::Error),
    /// What was opened is not the file that was checked.
    Swapped,
    /// What was opened is a file the guard protects (a directory on the way was
    /// swapped for a symlink after the check). Linux names an open file's path.
    #[cfg(target_os = "linux")]
    Blocked(String),
}

/// Opens the checked, resolved path without following a symlink swapped in since, and
/// without blocking, then makes sure it is the same regular file that was checked.
#[cfg(unix)]
fn open_regular(path: &Path, checked: &Metadata) -> Result<std::fs::File, OpenError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(OpenError::Io)?;
    let opened = file.metadata().map_err(OpenError::Io)?;
    if !opened.is_file() || opened.dev() != checked.dev() || opened.ino() != checked.ino() {
        return Err(OpenError::Swapped);
    }
    // The path was checked before it was opened; a directory on the way could have
    // been replaced in between. Judge the file actually opened, by its own name.
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let actual = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(OpenError::Io)?;
        crate::guard::check_resolved_path(&actual).map_err(|b| OpenError::Blocked(b.message()))?;
    }
    Ok(file)
}

#[cfg(not(unix))]
fn open_regular(path: &Path, _checked: &Metadata) -> Result<std::fs::File, OpenError> {
    let file = std::fs::File::open(path).map_err(OpenError::Io)?;
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        Ok(_) => Err(OpenError::Swapped),
        Err(e) => Err(OpenError::Io(e)),
    }
}

// ---- fs_search ----

struct SearchQuery {
    matcher: NameMatcher,
    max_results: usize,
    max_depth: usize,
}

/// Breadth first, so shallow matches come before deep ones when results are cut.
fn search_tree(root: &Path, query: &SearchQuery, mut budget: Budget) -> ToolResult {
    require_dir(root)?;
    let mut matches = Vec::new();
    let mut visited = 0u64;
    let mut errors = 0u64;
    let mut truncated = false;
    let private = private_dirs();
    let mut queue = VecDeque::from([(root.to_path_buf(), 0usize)]);
    'walk: while let Some((dir, depth)) = queue.pop_front() {
        let entries = match sorted_entries(&dir, &mut errors) {
            Ok(entries) => entries,
            Err(e) if depth == 0 => return Err(ToolError::io(&shown(root), &e)),
            Err(_) => {
                errors += 1;
                continue;
            }
        };
        for entry in entries {
            if !budget.take() {
                truncated = true;
                break 'walk;
            }
            visited += 1;
            // DirEntry::file_type does not follow symlinks, so linked directories are
            // reported as symlinks and never entered (no loops, no escaping the tree).
            let kind = entry.file_type().map(kind_of).unwrap_or("other");
            if query.matcher.matches(&entry.file_name().to_string_lossy()) {
                if matches.len() == query.max_results {
                    truncated = true;
                    break 'walk;
                }
                matches.push(search_match(&entry, kind));
            }
            let path = entry.path();
            if kind == "dir" && depth + 1 < query.max_depth && !private.contains(&path) {
                queue.push_back((path, depth + 1));
            }
        }
    }
    Ok(json!({
        "path": shown(root),
        "matches": matches,
        "truncated": truncated,
        "visited": visited,
        "errors": errors,
    }))
}

/// A directory's entries in name order, so results are the same from one run to the next.
fn sorted_entries(dir: &Path, errors: &mut u64) -> std::io::Result<Vec<DirEntry>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        match entry {
            Ok(entry) => entries.push(entry),
            Err(_) => *errors += 1,
        }
    }
    entries.sort_by_key(DirEntry::file_name);
    Ok(entries)
}

fn search_match(entry: &DirEntry, kind: &str) -> Value {
    let size = match kind {
        "dir" => None,
        _ => entry.metadata().ok().map(|m| m.len()),
    };
    json!({ "path": shown(&entry.path()), "kind": kind, "size": size })
}

/// Matches file names case-insensitively: a glob when the pattern has `*` or `?`,
/// otherwise a substring.
#[derive(Debug)]
enum NameMatcher {
    Contains(String),
    Glob(Vec<char>),
}

impl NameMatcher {
    fn new(pattern: &str) -> Self {
        let pattern = pattern.to_lowercase();
        if pattern.contains(['*', '?']) {
            NameMatcher::Glob(pattern.chars().collect())
        } else {
            NameMatcher::Contains(pattern)
        }
    }

    fn matches(&self, name: &str) -> bool {
        let name = name.to_lowercase();
        match self {
            NameMatcher::Contains(part) => name.contains(part.as_str()),
            NameMatcher::Glob(glob) => glob_match(glob, &name.chars().collect::<Vec<_>>()),
        }
    }
}

/// `*` is any run of characters (also none), `?` exactly one; the whole name must match.
/// Linear backtracking: on a mismatch only the most recent `*` is widened.
fn glob_match(glob: &[char], name: &[char]) -> bool {
    let (mut g, mut n) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some('*') => {
                last_star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match last_star {
                Some((star_g, star_n)) => {
                    last_star = Some((star_g, star_n + 1));
                    g = star_g + 1;
                    n = star_n + 1;
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

// ---- fs_disk_usage ----

/// One mounted filesystem.
#[derive(Debug, Clone)]
pub(super) struct Volume {
    pub mount: String,
    pub fs: String,
    pub device: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub removable: bool,
    pub read_only: bool,
}

impl Volume {
    pub(super) fn percent_used(&self) -> u64 {
        if self.total_bytes == 0 {
            return 0;
        }
        let used = u128::from(self.total_bytes.saturating_sub(self.free_bytes));
        let total = u128::from(self.total_bytes);
        u64::try_from((used * 100 + total / 2) / total).unwrap_or(100)
    }

    pub(super) fn to_json(&self) -> Value {
        json!({
            "mount": self.mount,
            "fs": self.fs,
            "device": self.device,
            "total_bytes": self.total_bytes,
            "free_bytes": self.free_bytes,
            "percent_used": self.percent_used(),
            "removable": self.removable,
            "read_only": self.read_only,
        })
    }
}

/// Mounted volumes, each filesystem once, sorted by mount point. Blocking: statfs on a
/// hung network mount does not return.
pub(super) fn volumes() -> Result<Vec<Volume>, String> {
    let disks = sysinfo::Disks::new_with_refreshed_list().map_err(|e| e.to_string())?;
    let mut all: Vec<Volume> = disks
        .iter()
        .filter(|disk| disk.total_space() > 0)
        .map(|disk| Volume {
            mount: shown(disk.mount_point()),
            fs: disk.file_system().to_string_lossy().into_owned(),
            device: disk.name().to_string_lossy().into_owned(),
            total_bytes: disk.total_space(),
            free_bytes: disk.available_space(),
            removable: disk.is_removable(),
            read_only: disk.is_read_only(),
        })
        .collect();
    Ok(dedup_volumes(&mut all))
}

/// The same filesystem mounted again (bind mounts, container overlays, snaps) would be
/// counted twice; keep its shortest mount point.
fn dedup_volumes(all: &mut [Volume]) -> Vec<Volume> {
    all.sort_by(|a, b| (a.mount.len(), &a.mount).cmp(&(b.mount.len(), &b.mount)));
    let mut seen = HashSet::new();
    let mut kept: Vec<Volume> = all
        .iter()
        .filter(|v| seen.insert((v.device.clone(), v.fs.clone(), v.total_bytes)))
        .cloned()
        .collect();
    kept.sort_by(|a, b| a.mount.cmp(&b.mount));
    kept
}

#[derive(Default)]
struct Tally {
    files: u64,
    dirs: u64,
    errors: u64,
    /// Mount points below the root: not entered, like `du -x`, so sizing `/` does not
    /// wander into /proc or network shares.
    other_filesystems: u64,
}

fn size_tree(root: &Path, top: usize, mut budget: Budget) -> ToolResult {
    let root_meta = require_dir(root)?;
    let root_dev = device_of(&root_meta);
    let mut tally = Tally::default();
    let reader = std::fs::read_dir(root).map_err(|e| ToolError::io(&shown(root), &e))?;
    let mut children = Vec::new();
    for entry in reader {
        let Ok(entry) = entry else {
            tally.errors += 1;
            continue;
        };
        if !budget.take() {
            break;
        }
        let Ok(meta) = entry.metadata() else {
            tally.errors += 1;
            continue;
        };
        let bytes = entry_bytes(&entry.path(), &meta, root_dev, &mut budget, &mut tally);
        let kind = kind_of(meta.file_type());
        children.push((entry.file_name().to_string_lossy().into_owned(), kind, bytes));
    }
    let total: u64 = children.iter().map(|(_, _, bytes)| bytes).sum();
    children.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let top: Vec<Value> = children
        .into_iter()
        .take(top)
        .map(|(name, kind, bytes)| json!({ "name": name, "kind": kind, "bytes": bytes }))
        .collect();
    Ok(json!({
        "path": shown(root),
        "total_bytes": total,
        "files": tally.files,
        "dirs": tally.dirs,
        "errors": tally.errors,
        "other_filesystems": tally.other_filesystems,
        "truncated": budget.exhausted,
        "top": top,
    }))
}

/// Apparent size (file lengths, as `du --apparent-size`) of one entry: a file's length,
/// or everything under a directory on the same filesystem. Symlinks are not followed.
fn entry_bytes(path: &Path, meta: &Metadata, root_dev: Option<u64>, budget: &mut Budget, tally: &mut Tally) -> u64 {
    if !meta.is_dir() {
        tally.files += 1;
        return meta.len();
    }
    tally.dirs += 1;
    if device_of(meta) != root_dev {
        tally.other_filesystems += 1;
        return 0;
    }
    let mut bytes = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(reader) = std::fs::read_dir(&dir) else {
            tally.errors += 1;
            continue;
        };
        for entry in reader {
            if !budget.take() {
                return bytes;
            }
            let Ok((child, meta)) = entry.and_then(|e| Ok((e.path(), e.metadata()?))) else {
                tally.errors += 1;
                continue;
            };
            if !meta.is_dir() {
                tally.files += 1;
                bytes = bytes.saturating_add(meta.len());
            } else if device_of(&meta) == root_dev {
                tally.dirs += 1;
                stack.push(child);
            } else {
                tally.dirs += 1;
                tally.other_filesystems += 1;
            }
        }
    }
    bytes
}

#[cfg(unix)]
fn device_of(meta: &Metadata) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    Some(meta.dev())
}

/// Stable Rust cannot read a volume id here; junctions are skipped as symlinks instead.
#[cfg(not(unix))]
fn device_of(_meta: &Metadata) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    use crate::tools::typed;

    fn write(path: &Path, bytes: usize) {
        std::fs::write(path, vec![b'x'; bytes]).unwrap();
    }

    fn path_str(path: &Path) -> String {
        path.to_str().unwrap().to_owned()
    }

    /// Issue 9: fs_read of a device, of the agent's own key through a symlink or `..`,
    /// and of a FIFO are refused on the resolved path; walks skip the state directory.
    #[cfg(unix)]
    #[tokio::test]
    async fn devices_pipes_and_the_agents_own_files_are_refused_however_they_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(state.join("agent_ed25519.key"), "secret").unwrap();
        crate::guard::register(crate::guard::AgentPaths {
            state_dir: Some(state.clone()),
            ..Default::default()
        });
        let link = dir.path().join("innocent.txt");
        std::os::unix::fs::symlink(state.join("agent_ed25519.key"), &link).unwrap();
        let dotdot = format!("{}/sub/../state/agent_ed25519.key", path_str(dir.path()));
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(path_str(&fifo)).unwrap();
        // SAFETY: mkfifo only reads the NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let dev_link = dir.path().join("disk");
        std::os::unix::fs::symlink("/dev/null", &dev_link).unwrap();
        for path in [
            path_str(&link),
            dotdot,
            path_str(&state.join("agent_ed25519.key")),
            path_str(&fifo),
            "/dev/null".to_owned(),
            "/dev/zero".to_owned(),
            path_str(&dev_link),
        ] {
            let err = read(typed(json!({ "path": path }))).await.unwrap_err();
            assert_eq!(err.code, ErrorCode::Blocked, "{path}: {err:?}");
        }
        let err = list(typed(json!({ "path": path_str(&state) }))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Blocked, "{err:?}");
        let found = search(typed(
            json!({ "path": path_str(dir.path()), "pattern": "agent_ed25519" }),
        ))
        .await
        .unwrap();
        assert_eq!(found["matches"], json!([]), "the walk never enters the state directory");
        let fine = read(typed(
            json!({ "path": path_str(&dir.path().join("sub/../innocent.txt")) }),
        ))
        .await;
        assert_eq!(
            fine.unwrap_err().code,
            ErrorCode::Blocked,
            "the symlink leads to the key"
        );
    }

    /// A directory on the way swapped for a symlink between the check and the open: the
    /// file actually opened is judged, so the swap reaches nothing protected. The swap is
    /// simulated by calling the open step directly on a protected file.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_file_actually_opened_is_judged_not_only_the_path_checked() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        let secret = private.join("db.sqlite");
        std::fs::write(&secret, "secret").unwrap();
        crate::guard::register(crate::guard::AgentPaths {
            private_dirs: vec![private.clone()],
            ..Default::default()
        });
        let meta = std::fs::metadata(&secret).unwrap();
        let Err(OpenError::Blocked(why)) = open_regular(&secret, &meta) else {
            panic!("opened a protected file")
        };
        assert!(!why.is_empty());
    }

    #[tokio::test]
    async fn relative_paths_are_refused() {
        for call in [
            list(typed(json!({"path": "tmp"}))).await,
            read(typed(json!({"path": "./x"}))).await,
            search(typed(json!({"path": "..", "pattern": "x"}))).await,
            disk_usage(typed(json!({"path": "a/b"}))).await,
        ] {
            let err = call.unwrap_err();
            assert_eq!(err.code, ErrorCode::BadArgs);
            assert!(err.message.contains("path must be absolute"), "{}", err.message);
        }
    }

    #[tokio::test]
    async fn list_puts_dirs_first_then_names_and_honours_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("b.txt"), 3);
        write(&dir.path().join("A.txt"), 5);
        std::fs::create_dir(dir.path().join("zdir")).unwrap();
        std::fs::create_dir(dir.path().join("Adir")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("b.txt", dir.path().join("c-link")).unwrap();

        let out = list(typed(json!({"path": path_str(dir.path())}))).await.unwrap();
        let names: Vec<&str> = out["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        let expected: &[&str] = if cfg!(unix) {
            &["Adir", "zdir", "A.txt", "b.txt", "c-link"]
        } else {
            &["Adir", "zdir", "A.txt", "b.txt"]
        };
        assert_eq!(names, expected);
        assert_eq!(out["truncated"], false);
        assert_eq!(out["count"], expected.len());
        assert_eq!(out["path"], path_str(dir.path()));
        let entries = out["entries"].as_array().unwrap();
        assert_eq!(entries[0]["kind"], "dir");
        assert_eq!(entries[0]["size"], Value::Null);
        assert_eq!(entries[2]["kind"], "file");
        assert_eq!(entries[2]["size"], 5);
        let modified = entries[2]["modified"].as_str().unwrap();
        assert!(modified.ends_with('Z') && modified.contains('T'), "{modified}");
        #[cfg(unix)]
        assert_eq!(entries[4]["kind"], "symlink");

        let cut = list(typed(json!({"path": path_str(dir.path()), "limit": 2})))
            .await
            .unwrap();
        assert_eq!(cut["count"], 2);
        assert_eq!(cut["total"], expected.len());
        assert_eq!(cut["truncated"], true);
        assert_eq!(cut["entries"][1]["name"], "zdir");
    }

    #[tokio::test]
    async fn list_refuses_files_and_reports_missing_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        write(&file, 1);
        let err = list(typed(json!({"path": path_str(&file)}))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        let err = list(typed(json!({"path": path_str(&dir.path().join("nope"))})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
    }

    #[tokio::test]
    async fn read_pages_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("digits.txt");
        std::fs::write(&file, "0123456789").unwrap();
        let page = |offset: u64, max_bytes: u64| {
            let file = path_str(&file);
            async move {
                read(typed(json!({"path": file, "offset": offset, "max_bytes": max_bytes})))
                    .await
                    .unwrap()
            }
        };

        let first = page(0, 4).await;
        assert_eq!(first["content"], "0123");
        assert_eq!(first["bytes_read"], 4);
        assert_eq!(first["size"], 10);
        assert_eq!(first["offset"], 0);
        assert_eq!(first["truncated"], true);
        assert_eq!(first["binary"], false);

        let middle = page(3, 4).await;
        assert_eq!(middle["content"], "3456");
        assert_eq!(middle["truncated"], true);

        let last = page(8, 4).await;
        assert_eq!(last["content"], "89");
        assert_eq!(last["truncated"], false);

        let exact = page(6, 4).await;
        assert_eq!(exact["content"], "6789");
        assert_eq!(exact["truncated"], false, "nothing remains after the last byte");

        let past = page(20, 4).await;
        assert_eq!(past["content"], "");
        assert_eq!(past["bytes_read"], 0);
        assert_eq!(past["truncated"], false);

        let whole = read(typed(json!({"path": path_str(&file)}))).await.unwrap();
        assert_eq!(whole["content"], "0123456789");
        assert_eq!(whole["truncated"], false);
    }

    #[tokio::test]
    async fn read_ends_pages_on_whole_characters_and_flags_binary() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("euro.txt");
        std::fs::write(&text, "ab€cd").unwrap(); // € is bytes 2..5
        let page = read(typed(json!({"path": path_str(&text), "max_bytes": 3})))
            .await
            .unwrap();
        assert_eq!(page["content"], "ab");
        assert_eq!(page["bytes_read"], 2, "the next page starts at the €");
        assert_eq!(page["truncated"], true);
        let next = read(typed(json!({"path": path_str(&text), "offset": 2, "max_bytes": 3})))
            .await
            .unwrap();
        assert_eq!(next["content"], "€");

        let bin = dir.path().join("blob.bin");
        std::fs::write(&bin, b"MZ\0\0\xff").unwrap();
        let out = read(typed(json!({"path": path_str(&bin)}))).await.unwrap();
        assert_eq!(out["binary"], true);
        assert_eq!(out["bytes_read"], 5);
    }

    #[tokio::test]
    async fn read_reports_missing_files_and_refuses_directories() {
        let dir = tempfile::tempdir().unwrap();
        let err = read(typed(json!({"path": path_str(&dir.path().join("missing.txt"))})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(err.message.contains("missing.txt"), "{}", err.message);
        let err = read(typed(json!({"path": path_str(dir.path())}))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(err.message.contains("directory"), "{}", err.message);
    }

    #[test]
    fn glob_matching() {
        let m = |pattern: &str, name: &str| NameMatcher::new(pattern).matches(name);
        assert!(m("*.log", "app.log"));
        assert!(m("*.log", "APP.LOG"));
        assert!(m("*.log", ".log"));
        assert!(!m("*.log", "app.log.1"));
        assert!(m("*.log*", "app.log.1"));
        assert!(m("?.txt", "a.txt"));
        assert!(!m("?.txt", "ab.txt"));
        assert!(m("a*b*c", "aXXbYYbZc"));
        assert!(!m("a*b*c", "aXXbYYbZ"));
        assert!(m("*", ""));
        assert!(m("**x**", "x"));
        assert!(m("é*", "École"), "case folding is Unicode-aware");
        assert!(m("port", "Report.pdf"), "no wildcard: substring");
        assert!(!m("port", "pot"));
    }

    fn search_fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        write(&root.join("report.txt"), 7);
        write(&root.join("other.LOG"), 1);
        write(&root.join("sub/Report-2024.log"), 2);
        write(&root.join("sub/deeper/x.log"), 3);
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("sub"), root.join("linked")).unwrap();
        dir
    }

    async fn search_paths(root: &Path, extra: Value) -> (Vec<String>, Value) {
        let mut call = json!({"path": path_str(root)});
        if let (Some(call), Value::Object(extra)) = (call.as_object_mut(), extra) {
            call.extend(extra);
        }
        let out = search(typed(call)).await.unwrap();
        let mut paths: Vec<String> = out["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                m["path"]
                    .as_str()
                    .unwrap()
                    .strip_prefix(&path_str(root))
                    .unwrap()
                    .to_owned()
            })
            .collect();
        paths.sort();
        (paths, out)
    }

    #[tokio::test]
    async fn search_by_substring_and_glob_without_following_symlinks() {
        let dir = search_fixture();
        let root = dir.path();
        let sep = std::path::MAIN_SEPARATOR;
        let p = |rel: &str| format!("{sep}{}", rel.replace('/', &sep.to_string()));

        let (found, out) = search_paths(root, json!({"pattern": "REPORT"})).await;
        assert_eq!(found, [p("report.txt"), p("sub/Report-2024.log")]);
        assert_eq!(out["truncated"], false);
        assert_eq!(out["errors"], 0);
        let expected_visits = if cfg!(unix) { 7 } else { 6 };
        assert_eq!(
            out["visited"], expected_visits,
            "the symlinked dir is visited but not entered"
        );

        let (found, _) = search_paths(root, json!({"pattern": "*.log"})).await;
        assert_eq!(found, [p("other.LOG"), p("sub/Report-2024.log"), p("sub/deeper/x.log")]);

        let (found, out) = search_paths(root, json!({"pattern": "?.log"})).await;
        assert_eq!(found, [p("sub/deeper/x.log")]);
        assert_eq!(out["matches"][0]["kind"], "file");
        assert_eq!(out["matches"][0]["size"], 3);

        let (found, _) = search_paths(root, json!({"pattern": "*.log", "max_depth": 2})).await;
        assert_eq!(found, [p("other.LOG"), p("sub/Report-2024.log")]);

        let (found, out) = search_paths(root, json!({"pattern": "deeper"})).await;
        assert_eq!(found, [p("sub/deeper")]);
        assert_eq!(out["matches"][0]["kind"], "dir");
    }

    #[tokio::test]
    async fn search_stops_at_max_results_shallowest_first() {
        let dir = search_fixture();
        let (found, out) = search_paths(dir.path(), json!({"pattern": "*.log", "max_results": 1})).await;
        assert_eq!(out["truncated"], true);
        assert_eq!(found.len(), 1);
        assert!(found[0].ends_with("other.LOG"), "{found:?}");
    }

    #[test]
    fn search_stops_when_the_visit_budget_runs_out() {
        let dir = search_fixture();
        let query = SearchQuery {
            matcher: NameMatcher::new("*"),
            max_results: 1000,
            max_depth: 12,
        };
        let out = search_tree(dir.path(), &query, Budget::new(2, WALK_TIME)).unwrap();
        assert_eq!(out["visited"], 2);
        assert_eq!(out["truncated"], true);
        assert_eq!(out["matches"].as_array().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn search_of_a_missing_root_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = search(typed(
            json!({"path": path_str(&dir.path().join("gone")), "pattern": "x"}),
        ))
        .await
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
    }

    #[tokio::test]
    async fn disk_usage_sums_a_tree_and_ranks_children() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        write(&root.join("a"), 100);
        write(&root.join("b"), 250);
        write(&root.join("sub/c"), 1000);
        write(&root.join("sub/deeper/d"), 5);

        let out = disk_usage(typed(json!({"path": path_str(root)}))).await.unwrap();
        assert_eq!(out["total_bytes"], 1355);
        assert_eq!(out["files"], 4);
        assert_eq!(out["dirs"], 3);
        assert_eq!(out["truncated"], false);
        assert_eq!(out["errors"], 0);
        let top = out["top"].as_array().unwrap();
        let ranked: Vec<(&str, u64)> = top
            .iter()
            .map(|c| (c["name"].as_str().unwrap(), c["bytes"].as_u64().unwrap()))
            .collect();
        assert_eq!(ranked, [("sub", 1005), ("b", 250), ("a", 100), ("empty", 0)]);
        assert_eq!(top[0]["kind"], "dir");

        let two = disk_usage(typed(json!({"path": path_str(root), "top": 2})))
            .await
            .unwrap();
        assert_eq!(two["top"].as_array().unwrap().len(), 2);
        assert_eq!(two["total_bytes"], 1355, "`top` limits the list, not the sum");
    }

    #[test]
    fn disk_usage_flags_a_walk_cut_by_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..10 {
            write(&dir.path().join(format!("f{i}")), 10);
        }
        let out = size_tree(dir.path(), 10, Budget::new(4, WALK_TIME)).unwrap();
        assert_eq!(out["truncated"], true);
        assert_eq!(out["total_bytes"], 40);
    }

    #[tokio::test]
    async fn disk_usage_without_a_path_lists_volumes() {
        let out = disk_usage(typed(json!({}))).await.unwrap();
        for volume in out["volumes"].as_array().unwrap() {
            let percent = volume["percent_used"].as_u64().unwrap();
            assert!(percent <= 100, "{volume}");
            assert!(volume["total_bytes"].as_u64().unwrap() > 0);
            assert!(volume["mount"].is_string() && volume["fs"].is_string());
        }
    }

    #[test]
    fn volumes_are_deduplicated_and_percentages_rounded() {
        let v = |mount: &str, device: &str, total: u64, free: u64| Volume {
            mount: mount.into(),
            fs: "ext4".into(),
            device: device.into(),
            total_bytes: total,
            free_bytes: free,
            removable: false,
            read_only: false,
        };
        let mut all = vec![
            v("/var/lib/docker", "/dev/sda1", 1000, 400),
            v("/", "/dev/sda1", 1000, 400),
            v("/home", "/dev/sdb1", 3, 2),
        ];
        let kept = dedup_volumes(&mut all);
        let mounts: Vec<&str> = kept.iter().map(|v| v.mount.as_str()).collect();
        assert_eq!(mounts, ["/", "/home"]);
        assert_eq!(kept[0].percent_used(), 60);
        assert_eq!(kept[1].percent_used(), 33);
        assert_eq!(v("/x", "d", 0, 0).percent_used(), 0);
        assert_eq!(v("/x", "d", 200, 1).percent_used(), 100, "99.5% rounds up");
    }
}
