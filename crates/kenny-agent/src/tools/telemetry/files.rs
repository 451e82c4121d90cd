//! Bounded reads of system files, and the roots that tests (and odd installs) can point elsewhere.
//!
//! `KENNY_ETC_ROOT` stands in for `/etc` (passwd, shadow, group, login.defs, os-release)
//! and `KENNY_SYS_ROOT` for `/sys` (temperature sensors, batteries, block devices);
//! `KENNY_RUN_ROOT` for `/run` (`power`).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Enough for any configuration file a section reads whole.
pub(super) const CONFIG_CAP: u64 = 4 * 1024 * 1024;

pub(super) fn etc_root() -> PathBuf {
    root_from_env("KENNY_ETC_ROOT", "/etc")
}

pub(super) fn sys_root() -> PathBuf {
    root_from_env("KENNY_SYS_ROOT", "/sys")
}

pub(super) fn root_from_env(var: &str, default: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(root) if !root.is_empty() => PathBuf::from(root),
        _ => PathBuf::from(default),
    }
}

/// The first `cap` bytes of a file as text (invalid UTF-8 replaced), and whether the
/// file went on past the cap.
pub(super) fn read_text(path: &Path, cap: u64) -> io::Result<(String, bool)> {
    let mut bytes = Vec::new();
    File::open(path)?.take(cap + 1).read_to_end(&mut bytes)?;
    let truncated = bytes.len() as u64 > cap;
    bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    Ok((String::from_utf8_lossy(&bytes).into_owned(), truncated))
}

/// Like [`read_text`] for small files where a cut makes no difference (sysfs values,
/// one-line state files): the text, trimmed.
pub(super) fn read_small(path: &Path) -> Option<String> {
    read_text(path, 64 * 1024).ok().map(|(text, _)| text.trim().to_owned())
}

/// The last `cap` bytes of a file, starting at a multiple of `align` from the file's
/// start (so fixed-size records stay whole), and whether anything before was skipped.
pub(super) fn read_tail(path: &Path, cap: u64, align: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut start = len.saturating_sub(cap);
    if align > 1 {
        start = start.div_ceil(align) * align;
    }
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(len - start.min(len)).read_to_end(&mut bytes)?;
    Ok((bytes, start > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_stop_at_the_cap_and_say_so() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(b"0123456789").unwrap();
        assert_eq!(read_text(file.path(), 10).unwrap(), ("0123456789".into(), false));
        assert_eq!(read_text(file.path(), 4).unwrap(), ("0123".into(), true));
        assert_eq!(read_tail(file.path(), 100, 1).unwrap(), (b"0123456789".to_vec(), false));
        assert_eq!(read_tail(file.path(), 4, 1).unwrap(), (b"6789".to_vec(), true));
        // Records of 3 bytes: the tail starts on a record boundary (6), not mid-record (5).
        assert_eq!(read_tail(file.path(), 5, 3).unwrap(), (b"6789".to_vec(), true));
        assert_eq!(read_tail(file.path(), 7, 3).unwrap(), (b"3456789".to_vec(), true));
        assert!(read_text(Path::new("/nonexistent/kenny"), 10).is_err());
    }
}
