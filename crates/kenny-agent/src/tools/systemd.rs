//! Whether systemd manages this PC, and how to say so when it does not.

use std::path::Path;

/// The test sd_booted(3) documents: systemd creates this directory early at boot, and
/// nothing else does. `systemctl` being installed proves nothing (containers, WSL1).
pub(crate) fn is_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Why systemd-based answers are not available, naming what runs as PID 1 instead.
pub(crate) fn not_running_reason() -> String {
    format!("systemd is not running on this PC (PID 1 is `{}`)", pid1_name())
}

/// What runs as PID 1 (`unknown` when /proc does not say).
pub(crate) fn pid1_name() -> String {
    std::fs::read_to_string("/proc/1/comm")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_pid_1() {
        let comm = std::fs::read_to_string("/proc/1/comm").unwrap();
        assert!(not_running_reason().contains(&format!("(PID 1 is `{}`)", comm.trim())));
        let booted = Path::new("/run/systemd/system").is_dir();
        assert_eq!(is_running(), booted);
    }
}
