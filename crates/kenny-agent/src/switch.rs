//! The PC owner's "remote control off" switch: a file in the switch directory (the
//! agent's state directory, or for an installed service a directory every local user may
//! write to, since the switch belongs to the people at the PC, not to the administrator).
//! While it is there, every state-changing tool answers `disabled`; read-only tools keep
//! working, so the owner can still be helped by looking. Only someone on the PC can
//! flip it (`kenny-agent remote-control off|on`); no server message touches it.

use std::path::{Path, PathBuf};

pub const FILE: &str = "remote-control-off";

/// Where an installed Linux agent keeps the switch: writable by every local user
/// (sticky, so one user cannot delete another's switch file).
pub const LINUX_DIR: &str = "/var/lib/kenny-agent-switch";

#[derive(Debug, Clone)]
pub struct KillSwitch {
    path: PathBuf,
}

impl KillSwitch {
    pub fn new(dir: &Path) -> Self {
        KillSwitch { path: dir.join(FILE) }
    }

    /// The switch directory an installed service uses, when it exists on this PC.
    pub fn installed_dir() -> Option<PathBuf> {
        let dir = if cfg!(windows) {
            PathBuf::from(std::env::var_os("ProgramData")?)
                .join("kenny")
                .join("switch")
        } else {
            PathBuf::from(LINUX_DIR)
        };
        dir.is_dir().then_some(dir)
    }

    /// Read on every call, so flipping the switch takes effect at once.
    pub fn is_off(&self) -> bool {
        self.path.exists()
    }

    pub fn set_off(&self, off: bool) -> std::io::Result<()> {
        if off {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&self.path, "remote control turned off on this PC\n")
        } else {
            match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let switch = KillSwitch::new(&dir.path().join("state"));
        assert!(!switch.is_off());
        switch.set_off(true).unwrap();
        assert!(switch.is_off());
        switch.set_off(false).unwrap();
        switch.set_off(false).unwrap();
        assert!(!switch.is_off());
    }
}
