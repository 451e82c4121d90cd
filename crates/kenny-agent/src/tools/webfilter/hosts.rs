//! kenny's block in the hosts file: finding it, writing it, taking it out again.
//!
//! The file is handled as bytes: whatever else it holds (other tools' entries, comments
//! in a legacy code page) is kept byte for byte. The block is one marked run of lines;
//! when the file did not end with a line break, the block brings its own and says so in
//! its header, so removing the block restores the file exactly.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

pub(super) const START: &str = "# >>> kenny webfilter (managed by kenny; do not edit) >>>";
pub(super) const END: &str = "# <<< kenny webfilter <<<";
const START_PREFIX: &[u8] = b"# >>> kenny webfilter";
const END_PREFIX: &[u8] = b"# <<< kenny webfilter";

/// The facts kept in the block's header line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Meta {
    pub list_hash: String,
    pub applied_at: String,
    pub doh_policy: String,
    /// The block added the line break the file lacked before it.
    pub eol_added: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Block {
    /// Bytes of the file that belong to the block (with the line break it added).
    pub range: Range<usize>,
    pub meta: Meta,
    pub domains: Vec<String>,
}

/// Lines as byte ranges, each with its line break.
fn lines(text: &[u8]) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let end = text[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |i| start + i + 1);
        let line = start..end;
        start = end;
        Some(line)
    })
}

fn content<'a>(text: &'a [u8], line: &Range<usize>) -> &'a [u8] {
    let bytes = &text[line.clone()];
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// kenny's block, if the file has one. `Err` when the markers are not one clean pair:
/// then nothing may be changed, and the message says how to repair the file.
pub(super) fn find_block(text: &[u8], path: &Path) -> Result<Option<Block>, String> {
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    for (number, line) in lines(text).enumerate() {
        let bytes = content(text, &line);
        let trimmed = bytes.trim_ascii_start();
        if trimmed.starts_with(START_PREFIX) {
            starts.push((number + 1, line));
        } else if trimmed.starts_with(END_PREFIX) {
            ends.push((number + 1, line));
        }
    }
    let fix = format!(
        "nothing was changed; edit {} by hand so that it holds either no kenny lines or exactly one block from `{START}` to `{END}` (deleting every line from the first marker to the last is safe), then try again",
        path.display()
    );
    let (start, end) = match (starts.as_slice(), ends.as_slice()) {
        ([], []) => return Ok(None),
        ([(_, start)], [(_, end)]) if start.start < end.start => (start.clone(), end.clone()),
        ([(n, _)], []) => {
            return Err(format!(
                "kenny's web filter block in the hosts file starts at line {n} but has no end marker; {fix}"
            ));
        }
        ([], [(n, _)]) => {
            return Err(format!(
                "the hosts file has kenny's end marker at line {n} but no start marker; {fix}"
            ));
        }
        ([(s, _)], [(e, _)]) => {
            return Err(format!(
                "kenny's end marker (line {e}) comes before its start marker (line {s}) in the hosts file; {fix}"
            ));
        }
        _ => {
            let mut numbers: Vec<usize> = starts.iter().chain(&ends).map(|(n, _)| *n).collect();
            numbers.sort_unstable();
            let numbers: Vec<String> = numbers.iter().map(usize::to_string).collect();
            return Err(format!(
                "the hosts file has more than one kenny web filter marker pair (lines {}); {fix}",
                numbers.join(", ")
            ));
        }
    };
    let mut meta = Meta::default();
    let mut domains = Vec::new();
    let inner = &text[start.end..end.start];
    for line in lines(inner) {
        let line_text = String::from_utf8_lossy(content(inner, &line)).into_owned();
        let line_text = line_text.trim();
        if let Some(header) = line_text.strip_prefix('#') {
            for token in header.split_whitespace() {
                match token.split_once('=') {
                    Some(("list_hash", v)) => meta.list_hash = v.to_owned(),
                    Some(("applied_at", v)) => meta.applied_at = v.to_owned(),
                    Some(("doh_policy", v)) => meta.doh_policy = v.to_owned(),
                    Some(("eol_added", v)) => meta.eol_added = v == "1",
                    _ => {}
                }
            }
        } else if let Some(("0.0.0.0", domain)) = line_text.split_once(char::is_whitespace) {
            domains.push(domain.trim().to_owned());
        }
    }
    let mut range = start.start..end.end;
    if meta.eol_added {
        if text[..range.start].ends_with(b"\r\n") {
            range.start -= 2;
        } else if text[..range.start].ends_with(b"\n") {
            range.start -= 1;
        }
    }
    Ok(Some(Block { range, meta, domains }))
}

/// The file without kenny's block.
pub(super) fn without_block(text: &[u8], block: &Block) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() - block.range.len());
    out.extend_from_slice(&text[..block.range.start]);
    out.extend_from_slice(&text[block.range.end..]);
    out
}

/// `base` (a file without kenny's block) with a new block appended, in the file's own
/// line-break style (CRLF if it uses any, else the platform's for an empty file).
pub(super) fn with_block(base: &[u8], domains: &[String], meta: &Meta) -> Vec<u8> {
    let crlf = if base.is_empty() {
        cfg!(windows)
    } else {
        base.windows(2).any(|w| w == b"\r\n")
    };
    let eol = if crlf { "\r\n" } else { "\n" };
    let eol_added = !base.is_empty() && !base.ends_with(b"\n");
    let mut out = base.to_vec();
    let mut block = String::with_capacity(64 + domains.len() * 48);
    if eol_added {
        block.push_str(eol);
    }
    block.push_str(START);
    block.push_str(eol);
    block.push_str(&format!(
        "# list_hash={} applied_at={} doh_policy={} entries={} eol_added={}{eol}",
        meta.list_hash,
        meta.applied_at,
        meta.doh_policy,
        domains.len(),
        u8::from(eol_added)
    ));
    for domain in domains {
        block.push_str(&format!("0.0.0.0 {domain}{eol}:: {domain}{eol}"));
    }
    block.push_str(END);
    block.push_str(eol);
    out.extend_from_slice(block.as_bytes());
    out
}

/// The hosts file: the context's stand-in (tests), else the system's.
pub(super) fn hosts_path(ctx: &crate::tools::ToolContext) -> PathBuf {
    if let Some(path) = &ctx.hosts_file {
        return path.clone();
    }
    if cfg!(windows) {
        let root = std::env::var_os("SystemRoot").unwrap_or_else(|| r"C:\Windows".into());
        PathBuf::from(root).join(r"System32\drivers\etc\hosts")
    } else {
        PathBuf::from("/etc/hosts")
    }
}

/// Replaces `path` with `bytes`: a temporary file in the same directory (same owner and
/// permissions), flushed to disk, renamed over the original. Where the file cannot be
/// replaced — a bind-mounted /etc/hosts in a container, a hosts file held open on
/// Windows — it is rewritten in place instead.
pub(in crate::tools) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    // A symlinked hosts file (NixOS, some images) is updated where it points, so the link
    // stays a link.
    let resolved = std::fs::canonicalize(path).ok();
    let path = resolved.as_deref().unwrap_or(path);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let original = std::fs::metadata(path).ok();
    let temp = dir.join(format!(
        ".{name}.kenny-{}-{}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&temp)?;
        file.write_all(bytes)?;
        if let Some(meta) = &original {
            file.set_permissions(meta.permissions())?;
            keep_owner(&file, meta);
        }
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(format!(
            "could not write a new copy of {} next to it: {e}",
            path.display()
        ));
    }
    match std::fs::rename(&temp, path) {
        Ok(()) => {
            sync_dir(dir);
            Ok(())
        }
        Err(rename_err) => {
            let _ = std::fs::remove_file(&temp);
            if !matches!(
                rename_err.kind(),
                ErrorKind::ResourceBusy | ErrorKind::CrossesDevices | ErrorKind::PermissionDenied
            ) {
                return Err(format!("could not replace {}: {rename_err}", path.display()));
            }
            write_in_place(path, bytes).map_err(|e| {
                format!(
                    "could not replace {} ({rename_err}) nor rewrite it in place ({e}); it may be read-only or held by security software",
                    path.display()
                )
            })
        }
    }
}

fn write_in_place(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).truncate(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(unix)]
fn keep_owner(file: &File, meta: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    // Only root can give a file away; for anyone else the file is already theirs.
    let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
}

#[cfg(not(unix))]
fn keep_owner(_file: &File, _meta: &std::fs::Metadata) {}

#[cfg(unix)]
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            list_hash: "a1b2c3d4e5f60718".into(),
            applied_at: "2026-07-02T09:15:00Z".into(),
            doh_policy: "disable".into(),
            eol_added: false,
        }
    }

    fn domains() -> Vec<String> {
        vec!["badsite.example".into(), "www.badsite.example".into()]
    }

    const P: &str = "/etc/hosts";

    #[test]
    fn a_block_round_trips_and_leaves_the_rest_byte_for_byte() {
        let originals: [&[u8]; 6] = [
            b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n",
            b"127.0.0.1 localhost\n# no final newline",
            b"",
            b"# Windows\r\n127.0.0.1       localhost\r\n",
            b"# latin-1 comment: caf\xe9\n10.0.0.2 nas.lan\n",
            b"\n\n",
        ];
        for original in originals {
            let applied = with_block(original, &domains(), &meta());
            assert!(applied.starts_with(original));
            let block = find_block(&applied, Path::new(P)).unwrap().expect("a block");
            assert_eq!(block.domains, domains());
            assert_eq!(block.meta.list_hash, "a1b2c3d4e5f60718");
            assert_eq!(block.meta.applied_at, "2026-07-02T09:15:00Z");
            assert_eq!(block.meta.doh_policy, "disable");
            assert_eq!(
                without_block(&applied, &block),
                original,
                "{:?}",
                String::from_utf8_lossy(original)
            );
            assert_eq!(find_block(original, Path::new(P)).unwrap(), None);
        }
    }

    #[test]
    fn the_block_is_the_documented_text_in_the_files_line_style() {
        let unix = with_block(b"127.0.0.1 localhost\n", &domains(), &meta());
        assert_eq!(
            String::from_utf8(unix).unwrap(),
            "127.0.0.1 localhost\n\
             # >>> kenny webfilter (managed by kenny; do not edit) >>>\n\
             # list_hash=a1b2c3d4e5f60718 applied_at=2026-07-02T09:15:00Z doh_policy=disable entries=2 eol_added=0\n\
             0.0.0.0 badsite.example\n\
             :: badsite.example\n\
             0.0.0.0 www.badsite.example\n\
             :: www.badsite.example\n\
             # <<< kenny webfilter <<<\n"
        );
        let windows = String::from_utf8(with_block(b"127.0.0.1 localhost\r\n", &domains(), &meta())).unwrap();
        assert!(windows.ends_with(":: www.badsite.example\r\n# <<< kenny webfilter <<<\r\n"));
        assert_eq!(windows.matches('\n').count(), windows.matches("\r\n").count());
        let glued = String::from_utf8(with_block(b"10.0.0.1 a.lan", &domains(), &meta())).unwrap();
        assert!(glued.starts_with("10.0.0.1 a.lan\n# >>> kenny"), "{glued}");
        assert!(glued.contains("eol_added=1"));
    }

    #[test]
    fn a_block_in_the_middle_is_found_and_cut_out() {
        let before = b"127.0.0.1 localhost\n";
        let after = b"10.0.0.5 printer.lan\n";
        let mut text = with_block(before, &domains(), &meta());
        text.extend_from_slice(after);
        let block = find_block(&text, Path::new(P)).unwrap().unwrap();
        assert_eq!(without_block(&text, &block), [&before[..], &after[..]].concat());
    }

    #[test]
    fn malformed_markers_are_refused_with_a_way_out() {
        let start_only = format!("127.0.0.1 localhost\n{START}\n0.0.0.0 a.example\n");
        let err = find_block(start_only.as_bytes(), Path::new(P)).unwrap_err();
        assert!(err.contains("starts at line 2 but has no end marker"), "{err}");
        assert!(err.contains("nothing was changed; edit /etc/hosts by hand"), "{err}");

        let end_only = format!("127.0.0.1 localhost\n{END}\n");
        assert!(
            find_block(end_only.as_bytes(), Path::new(P))
                .unwrap_err()
                .contains("no start marker")
        );

        let reversed = format!("{END}\n{START}\n");
        assert!(
            find_block(reversed.as_bytes(), Path::new(P))
                .unwrap_err()
                .contains("comes before")
        );

        let twice = format!("{START}\n{END}\n{START}\n{END}\n");
        let err = find_block(twice.as_bytes(), Path::new(P)).unwrap_err();
        assert!(
            err.contains("more than one") && err.contains("lines 1, 2, 3, 4"),
            "{err}"
        );
    }

    #[test]
    fn atomic_write_keeps_permissions_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        std::fs::write(&path, b"old\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        write_atomic(&path, b"new\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["hosts"]);

        let missing_dir = dir.path().join("nope").join("hosts");
        assert!(
            write_atomic(&missing_dir, b"x")
                .unwrap_err()
                .contains("could not write a new copy")
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_hosts_file_stays_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real-hosts");
        let link = dir.path().join("hosts");
        std::fs::write(&real, b"old\n").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new\n").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new\n");
    }

    #[test]
    fn the_hosts_path_is_the_systems_unless_the_context_names_one() {
        let system = hosts_path(&crate::tools::ToolContext::default());
        if !cfg!(windows) {
            assert_eq!(system, PathBuf::from("/etc/hosts"));
        }
        let ctx = crate::tools::ToolContext {
            hosts_file: Some(PathBuf::from("/tmp/stand-in-hosts")),
            ..Default::default()
        };
        assert_eq!(hosts_path(&ctx), PathBuf::from("/tmp/stand-in-hosts"));
    }
}
