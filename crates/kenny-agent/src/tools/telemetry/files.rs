//! Bounded reads of system files, and the roots that tests (and odd installs) can point elsewhere.
//!
//! `KENNY_ETC_ROOT` stands in for `/etc` (passwd, shadow, group, login.defs, os-release)
//! and `KENNY_SYS_ROOT` for `/sys` (temperature sensors, batteries, block devices);
//! `KENNY_RUN_ROOT` for `/run` (`power`).

use std::fs::{File, OpenOptions};
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
    text_of(File::open(path)?, cap)
}

/// [`read_text`] for a file a user of the PC controls (a browser profile, a config in a
/// home folder), through [`open_user_file`].
pub(super) fn read_user_text(path: &Path, cap: u64) -> io::Result<(String, bool)> {
    text_of(open_user_file(path)?, cap)
}

fn text_of(file: File, cap: u64) -> io::Result<(String, bool)> {
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    let truncated = bytes.len() as u64 > cap;
    bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    Ok((String::from_utf8_lossy(&bytes).into_owned(), truncated))
}

/// Opens a file in a place an ordinary user controls without letting it steer the agent,
/// which reads as root or SYSTEM: the last component is not followed if it is a link (a
/// user's `Preferences` pointing at `/etc/shadow` or `/dev/watchdog`), the open never
/// waits (a FIFO), and only a regular file is accepted.
pub(super) fn open_user_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        /// Opens a symbolic link or junction itself instead of what it points to.
        const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
        options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file; not read", path.display()),
        ));
    }
    Ok(file)
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

/// Writes a test fixture at `path`, creating its folders.
#[cfg(test)]
pub(super) fn put_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, contents)
}

/// Writes a test fixture at `root/relative`, creating the folders.
#[cfg(test)]
pub(super) fn put(root: &Path, relative: &str, contents: &[u8]) -> io::Result<()> {
    put_file(&root.join(relative), contents)
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

    #[cfg(unix)]
    #[test]
    fn a_users_file_is_read_only_when_it_is_a_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("Preferences");
        std::fs::write(&plain, "{}").unwrap();
        assert_eq!(read_user_text(&plain, 10).unwrap(), ("{}".into(), false));

        let link = dir.path().join("linked");
        std::os::unix::fs::symlink(&plain, &link).unwrap();
        assert!(read_user_text(&link, 10).is_err(), "a link is not followed");

        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        let err = read_user_text(&fifo, 10).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "opening a FIFO does not wait"
        );

        assert!(read_user_text(dir.path(), 10).is_err(), "a folder is not a file");
    }
}
