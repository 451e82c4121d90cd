//! `kenny-server install`: the server as a systemd service. It copies this binary to
//! `/usr/local/bin`, writes the settings file `/etc/kenny/server.toml` (kept if one is
//! there: it is the administrator's), and a unit that runs the server as the system
//! user `kenny` with its data in `/var/lib/kenny` (systemd's `StateDirectory`, private
//! to that user) under systemd's sandboxing. Logs go to the journal, which rotates
//! them. `--root DIR` stages it all under another directory (packaging, tests) and
//! runs nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

pub const BINARY: &str = "usr/local/bin/kenny-server";
pub const SETTINGS: &str = "etc/kenny/server.toml";
pub const UNIT: &str = "etc/systemd/system/kenny-server.service";
pub const DATA_DIR: &str = "/var/lib/kenny";
const USER: &str = "kenny";

/// What the settings file starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallSettings {
    pub listen: String,
    pub public_url: Option<String>,
}

/// What `install` did, for the message the command prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub binary: PathBuf,
    pub settings: PathBuf,
    /// False when a settings file was already there and was kept.
    pub settings_written: bool,
    pub unit: PathBuf,
    pub started: bool,
}

/// The settings file a new install starts with: every value quoted as a TOML string.
pub fn settings_text(s: &InstallSettings) -> String {
    let quote = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    let mut text = String::from(
        "# kenny-server settings: any flag of `kenny-server serve --help`, in snake_case.\n\
         # Flags and KENNY_* variables override what is here.\n",
    );
    text.push_str(&format!("listen = {}\n", quote(&s.listen)));
    text.push_str(&format!("data_dir = {}\n", quote(DATA_DIR)));
    match &s.public_url {
        Some(url) => text.push_str(&format!("public_url = {}\n", quote(url))),
        None => text.push_str("# public_url = \"https://kenny.example.com\"\n"),
    }
    text.push_str(
        "# Built-in TLS (files readable by the user kenny):\n\
         # tls_cert = \"/etc/kenny/tls/fullchain.pem\"\n\
         # tls_key = \"/etc/kenny/tls/privkey.pem\"\n",
    );
    text
}

/// The unit: the server as `kenny`, restarted on failure, allowed to bind ports below
/// 1024 and nothing else a root process could do, with a read-only view of the system
/// outside its data directory.
pub fn unit_text() -> String {
    format!(
        "[Unit]
Description=kenny server (remote administration: dashboard, MCP, agent tunnel)
After=network-online.target
Wants=network-online.target

[Service]
User={USER}
Group={USER}
ExecStart=/{BINARY} serve --config /{SETTINGS}
Restart=on-failure
RestartSec=5
StateDirectory=kenny
StateDirectoryMode=0700
UMask=0077
AmbientCapabilities=CAP_NET_BIND_SERVICE
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
RestrictNamespaces=yes
LockPersonality=yes
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
"
    )
}

/// Installs under `root` (`/` for real). A real install also creates the user, reloads
/// systemd and starts the service; a staged one (`root` not `/`) runs nothing.
pub fn install(root: &Path, settings: &InstallSettings) -> anyhow::Result<Installed> {
    let staged = root != Path::new("/");
    if !staged && !is_root() {
        bail!("installing a service needs root: run it with sudo (or --root DIR to stage the files)");
    }
    let binary = root.join(BINARY);
    let settings_path = root.join(SETTINGS);
    let unit = root.join(UNIT);
    let this = std::env::current_exe().context("finding this program's own file")?;
    for path in [&binary, &settings_path, &unit] {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
    }
    if !same_file(&this, &binary) {
        // A new name, then a rename: a running server's binary is never written over.
        let fresh = binary.with_extension("new");
        std::fs::copy(&this, &fresh).with_context(|| format!("copying {} to {}", this.display(), fresh.display()))?;
        set_mode(&fresh, 0o755)?;
        std::fs::rename(&fresh, &binary).with_context(|| format!("putting {} in place", binary.display()))?;
    }
    let settings_written = !settings_path.exists();
    if settings_written {
        std::fs::write(&settings_path, settings_text(settings))
            .with_context(|| format!("writing {}", settings_path.display()))?;
    }
    // Read by the service's user only through its group: it may come to hold tokens.
    set_mode(&settings_path, 0o640)?;
    std::fs::write(&unit, unit_text()).with_context(|| format!("writing {}", unit.display()))?;
    set_mode(&unit, 0o644)?;
    if staged {
        return Ok(Installed {
            binary,
            settings: settings_path,
            settings_written,
            unit,
            started: false,
        });
    }
    if !user_exists(USER) {
        run(&[
            "useradd",
            "--system",
            "--home-dir",
            DATA_DIR,
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            USER,
        ])?;
    }
    run(&["chgrp", USER, &settings_path.to_string_lossy()])?;
    run(&["systemctl", "daemon-reload"])?;
    run(&["systemctl", "enable", "--now", "kenny-server.service"])?;
    Ok(Installed {
        binary,
        settings: settings_path,
        settings_written,
        unit,
        started: true,
    })
}

fn run(argv: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(argv[0])
        .args(&argv[1..])
        .status()
        .with_context(|| format!("running {}", argv.join(" ")))?;
    if !status.success() {
        bail!("{} failed ({status})", argv.join(" "));
    }
    Ok(())
}

fn user_exists(name: &str) -> bool {
    std::fs::read_to_string("/etc/passwd")
        .map(|p| p.lines().any(|l| l.split(':').next() == Some(name)))
        .unwrap_or(false)
}

#[cfg(unix)]
fn is_root() -> bool {
    // The effective uid, read from /proc rather than through an unsafe libc call.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

#[cfg(not(unix))]
fn is_root() -> bool {
    false
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> anyhow::Result<()> {
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_file_is_valid_toml_with_the_values_given() {
        let text = settings_text(&InstallSettings {
            listen: "0.0.0.0:443".into(),
            public_url: Some("https://k.example/\"x\"".into()),
        });
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(table["listen"].as_str(), Some("0.0.0.0:443"));
        assert_eq!(table["data_dir"].as_str(), Some(DATA_DIR));
        assert_eq!(table["public_url"].as_str(), Some("https://k.example/\"x\""));
        assert_eq!(table.len(), 3, "the rest is commented out: {text}");
    }

    #[test]
    fn the_unit_runs_the_server_unprivileged_from_the_settings_file() {
        let unit = unit_text();
        for line in [
            "User=kenny",
            "ExecStart=/usr/local/bin/kenny-server serve --config /etc/kenny/server.toml",
            "StateDirectory=kenny",
            "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
            "ProtectSystem=strict",
            "NoNewPrivileges=yes",
            "WantedBy=multi-user.target",
        ] {
            assert!(unit.contains(&format!("\n{line}\n")), "{line} missing:\n{unit}");
        }
    }
}
