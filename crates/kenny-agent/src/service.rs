//! Running the agent as a system service: what `kenny-agent install` writes and runs
//! (a systemd unit on Linux, a Windows service), and the settings file both read.
//!
//! Everything here is plain data and text, so the Windows plan is built and tested on
//! Linux as well; only carrying out the plan touches the machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const SERVICE_NAME: &str = "kenny-agent";

/// Where an installed Linux agent keeps the remote-control switch: writable by every
/// local user (sticky, so one user cannot delete another's switch file).
pub const LINUX_SWITCH_DIR: &str = "/var/lib/kenny-agent-switch";

/// The settings a config file may hold: the `KENNY_*` variables `kenny-agent run` reads.
pub const KNOWN_SETTINGS: &[&str] = &[
    "KENNY_SERVER",
    "KENNY_AGENT_ID",
    "KENNY_TOKEN",
    "KENNY_SERVER_PUBKEY",
    "KENNY_ENROLL_TOKEN",
    "KENNY_ENROLL_TOKEN_FILE",
    "KENNY_STATE_DIR",
    "KENNY_SWITCH_DIR",
    "KENNY_HEARTBEAT_SECS",
    "KENNY_MAX_BACKOFF_SECS",
    "KENNY_ALLOW_PLAINTEXT",
    "KENNY_TELEMETRY_INTERVAL_SECS",
];

/// The settings `install` records, as `KENNY_*` variables in the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallSettings {
    pub server: String,
    pub agent_id: String,
    pub server_pubkey: Option<String>,
    pub enroll_token: Option<String>,
    pub token: Option<String>,
    pub allow_plaintext: bool,
}

/// Where things go and what runs, for one OS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallPlan {
    /// Where the agent binary is copied to.
    pub binary: PathBuf,
    pub config: PathBuf,
    pub config_text: String,
    pub state_dir: PathBuf,
    /// The remote-control switch directory, writable by the PC's own users.
    pub switch_dir: PathBuf,
    /// Commands that restrict access once the files exist (Windows ACLs; on Linux the
    /// modes are set as the files are created). Run even when nothing is started.
    pub secure: Vec<Vec<String>>,
    /// The systemd unit file and its text (Linux only).
    pub unit: Option<(PathBuf, String)>,
    /// Commands that register and start the service, in order.
    pub start: Vec<Vec<String>>,
    /// Commands that stop and remove it, in order; failures are reported, not fatal.
    pub stop: Vec<Vec<String>>,
}

impl InstallSettings {
    /// The config file: one `KEY=value` per line, readable by systemd's
    /// `EnvironmentFile=` and by `kenny-agent run --config`.
    pub fn config_text(&self, state_dir: &Path, switch_dir: &Path, systemd: bool) -> Result<String, String> {
        let mut vars: Vec<(&str, String)> = vec![
            ("KENNY_SERVER", self.server.clone()),
            ("KENNY_AGENT_ID", self.agent_id.clone()),
            ("KENNY_STATE_DIR", state_dir.to_string_lossy().into_owned()),
            ("KENNY_SWITCH_DIR", switch_dir.to_string_lossy().into_owned()),
        ];
        if let Some(key) = &self.server_pubkey {
            vars.push(("KENNY_SERVER_PUBKEY", key.clone()));
        }
        if let Some(token) = &self.enroll_token {
            vars.push(("KENNY_ENROLL_TOKEN", token.clone()));
        }
        if let Some(token) = &self.token {
            vars.push(("KENNY_TOKEN", token.clone()));
        }
        if self.allow_plaintext {
            vars.push(("KENNY_ALLOW_PLAINTEXT", "true".into()));
        }
        let mut text =
            String::from("# kenny agent settings, written by `kenny-agent install`. Holds secrets: keep it private.\n");
        for (key, value) in vars {
            // systemd reads quotes, backslashes and `$` specially in this file; none of
            // kenny's values (URLs, ids, base64 keys, tokens) need them. Windows paths
            // have backslashes and spaces, and only kenny reads the file there.
            let special = |c: char| {
                if systemd {
                    c.is_whitespace() || "\"'\\$`".contains(c)
                } else {
                    c.is_control()
                }
            };
            if value.is_empty() || value.trim() != value || value.chars().any(special) {
                return Err(format!(
                    "{key} must be non-empty and have no spaces, quotes, backslashes or $: {value:?}"
                ));
            }
            text.push_str(&format!("{key}={value}\n"));
        }
        Ok(text)
    }
}

/// The Linux plan under `root` (normally `/`; a staging directory for packaging or tests).
pub fn linux_plan(root: &Path, settings: &InstallSettings) -> Result<InstallPlan, String> {
    let binary = Path::new("/usr/local/bin/kenny-agent");
    let config = Path::new("/etc/kenny-agent/agent.env");
    let state_dir = Path::new("/var/lib/kenny-agent");
    let unit_text = format!(
        "[Unit]\n\
         Description=kenny agent: remote administration by {server}\n\
         Documentation=https://github.com/kenny-admin/kenny\n\
         Wants=network-online.target\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={binary} run --config {config}\n\
         Restart=always\n\
         RestartSec=5\n\
         # Restart however often it fails: a PC that cannot be reached is worse than log noise.\n\
         StartLimitIntervalSec=0\n\
         # The agent administers the PC (packages, services, network), so it runs as root;\n\
         # its compiled-in guard and the operator's rules bound what a call may do.\n\
         User=root\n\
         UMask=0077\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        server = settings.server,
        binary = binary.display(),
        config = config.display(),
    );
    let systemctl = |args: &[&str]| -> Vec<String> {
        std::iter::once("systemctl")
            .chain(args.iter().copied())
            .map(String::from)
            .collect()
    };
    Ok(InstallPlan {
        binary: rooted(root, binary),
        config: rooted(root, config),
        config_text: settings.config_text(state_dir, Path::new(LINUX_SWITCH_DIR), true)?,
        state_dir: rooted(root, state_dir),
        switch_dir: rooted(root, Path::new(LINUX_SWITCH_DIR)),
        secure: Vec::new(),
        unit: Some((
            rooted(root, Path::new("/etc/systemd/system/kenny-agent.service")),
            unit_text,
        )),
        start: vec![
            systemctl(&["daemon-reload"]),
            systemctl(&["enable", "--now", "kenny-agent.service"]),
        ],
        stop: vec![
            systemctl(&["disable", "--now", "kenny-agent.service"]),
            systemctl(&["daemon-reload"]),
        ],
    })
}

/// The Windows plan: `Program Files` for the binary, `ProgramData` for settings and
/// state, and a service that restarts on failure.
pub fn windows_plan(
    program_files: &Path,
    program_data: &Path,
    settings: &InstallSettings,
) -> Result<InstallPlan, String> {
    // Joined by hand: this plan is also built (and tested) where `/` is the separator.
    let win_join = |base: &Path, rest: &str| PathBuf::from(format!("{}\\{rest}", base.display()));
    let binary = win_join(program_files, "kenny\\kenny-agent.exe");
    let config = win_join(program_data, "kenny\\agent.env");
    let state_dir = win_join(program_data, "kenny\\state");
    let switch_dir = win_join(program_data, "kenny\\switch");
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let icacls = |target: &Path, grants: &[&str]| -> Vec<String> {
        let mut argv = vec!["icacls.exe".to_owned(), path(target)];
        for grant in grants {
            argv.extend(["/grant:r".to_owned(), (*grant).to_owned()]);
        }
        argv
    };
    let bin_path = format!("\"{}\" service --config \"{}\"", binary.display(), config.display());
    let sc = |args: &[&str]| -> Vec<String> {
        std::iter::once("sc.exe")
            .chain(args.iter().copied())
            .map(String::from)
            .collect()
    };
    Ok(InstallPlan {
        config_text: settings.config_text(&state_dir, &switch_dir, false)?,
        // SYSTEM (S-1-5-18) and Administrators (S-1-5-32-544) only for the settings and
        // the agent's key; local Users (S-1-5-32-545) may change the switch directory.
        secure: vec![
            [
                icacls(&config, &["*S-1-5-18:F", "*S-1-5-32-544:F"]),
                vec!["/inheritance:r".into()],
            ]
            .concat(),
            [
                icacls(&state_dir, &["*S-1-5-18:(OI)(CI)F", "*S-1-5-32-544:(OI)(CI)F"]),
                vec!["/inheritance:r".into()],
            ]
            .concat(),
            icacls(&switch_dir, &["*S-1-5-32-545:(OI)(CI)M"]),
        ],
        start: vec![
            // sc.exe wants each `option=` and its value as separate arguments.
            sc(&[
                "create",
                SERVICE_NAME,
                "binPath=",
                &bin_path,
                "start=",
                "delayed-auto",
                "DisplayName=",
                "kenny agent",
            ]),
            sc(&[
                "description",
                SERVICE_NAME,
                &format!("Remote administration by {}", settings.server),
            ]),
            sc(&[
                "failure",
                SERVICE_NAME,
                "reset=",
                "86400",
                "actions=",
                "restart/5000/restart/5000/restart/30000",
            ]),
            sc(&["failureflag", SERVICE_NAME, "1"]),
            sc(&["start", SERVICE_NAME]),
        ],
        stop: vec![sc(&["stop", SERVICE_NAME]), sc(&["delete", SERVICE_NAME])],
        binary,
        config,
        state_dir,
        switch_dir,
        unit: None,
    })
}

fn rooted(root: &Path, absolute: &Path) -> PathBuf {
    root.join(absolute.strip_prefix("/").unwrap_or(absolute))
}

/// Reads a config file written by `install` (or by hand): `KEY=value` lines, `#`
/// comments, blank lines. Only known settings are accepted, so a typo is an error
/// rather than a silently ignored setting.
pub fn parse_config(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut vars = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: expected KEY=value, got {line:?}", n + 1));
        };
        let key = key.trim();
        if !KNOWN_SETTINGS.contains(&key) {
            return Err(format!(
                "line {}: {key:?} is not a kenny agent setting; known settings: {}",
                n + 1,
                KNOWN_SETTINGS.join(", ")
            ));
        }
        vars.insert(key.to_owned(), value.trim().to_owned());
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> InstallSettings {
        InstallSettings {
            server: "https://kenny.example.com".into(),
            agent_id: "kids-pc".into(),
            server_pubkey: Some("c2VydmVyLWtleQ==".into()),
            enroll_token: Some("kenny_agt_abc123".into()),
            token: None,
            allow_plaintext: false,
        }
    }

    #[test]
    fn linux_unit_restarts_and_reads_the_config() {
        let plan = linux_plan(Path::new("/stage"), &settings()).unwrap();
        let (unit_path, unit) = plan.unit.as_ref().unwrap();
        assert_eq!(unit_path, Path::new("/stage/etc/systemd/system/kenny-agent.service"));
        assert!(unit.contains("\nExecStart=/usr/local/bin/kenny-agent run --config /etc/kenny-agent/agent.env\n"));
        assert!(unit.contains("\nRestart=always\n") && unit.contains("\nWantedBy=multi-user.target\n"));
        assert_eq!(plan.binary, Path::new("/stage/usr/local/bin/kenny-agent"));
        assert_eq!(plan.start[1], ["systemctl", "enable", "--now", "kenny-agent.service"]);
        let vars = parse_config(&plan.config_text).unwrap();
        assert_eq!(vars["KENNY_STATE_DIR"], "/var/lib/kenny-agent");
        assert_eq!(vars["KENNY_SWITCH_DIR"], LINUX_SWITCH_DIR);
        assert!(plan.secure.is_empty(), "Linux sets modes as it creates the files");
        assert_eq!(vars["KENNY_ENROLL_TOKEN"], "kenny_agt_abc123");
        assert!(!vars.contains_key("KENNY_TOKEN"));
    }

    #[test]
    fn windows_service_is_created_with_restart_on_failure() {
        let plan = windows_plan(
            Path::new(r"C:\Program Files"),
            Path::new(r"C:\ProgramData"),
            &settings(),
        )
        .unwrap();
        let create = &plan.start[0];
        assert_eq!(&create[..3], ["sc.exe", "create", "kenny-agent"]);
        let bin_path = &create[create.iter().position(|a| a == "binPath=").unwrap() + 1];
        assert!(bin_path.starts_with("\"C:\\Program Files"), "{bin_path}");
        assert!(
            bin_path.contains("kenny-agent.exe\" service --config \"C:\\ProgramData"),
            "{bin_path}"
        );
        assert!(
            plan.start
                .iter()
                .any(|c| c[1] == "failure" && c.contains(&"restart/5000/restart/5000/restart/30000".to_owned()))
        );
        // Locked down as part of installing, not of starting (`--no-start` must not skip it).
        assert!(!plan.start.iter().any(|c| c[0] == "icacls.exe"));
        assert_eq!(
            plan.secure[0],
            [
                "icacls.exe",
                r"C:\ProgramData\kenny\agent.env",
                "/grant:r",
                "*S-1-5-18:F",
                "/grant:r",
                "*S-1-5-32-544:F",
                "/inheritance:r"
            ]
        );
        assert!(plan.secure[1][1].ends_with(r"kenny\state") && plan.secure[1].contains(&"/inheritance:r".to_owned()));
        assert!(
            plan.secure[2][1].ends_with(r"kenny\switch")
                && plan.secure[2].contains(&"*S-1-5-32-545:(OI)(CI)M".to_owned())
        );
        assert_eq!(plan.stop.last().unwrap(), &["sc.exe", "delete", "kenny-agent"]);
        assert!(
            plan.config_text
                .contains("KENNY_STATE_DIR=C:\\ProgramData\\kenny\\state\n")
        );
    }

    #[test]
    fn config_values_that_systemd_would_misread_are_refused() {
        let mut s = settings();
        s.agent_id = "pc one".into();
        assert!(linux_plan(Path::new("/"), &s).unwrap_err().contains("KENNY_AGENT_ID"));
        s.agent_id = "pc$HOME".into();
        assert!(linux_plan(Path::new("/"), &s).is_err());
    }

    #[test]
    fn config_parsing_rejects_what_it_does_not_know() {
        let vars = parse_config("# c\n\nKENNY_SERVER = https://x\nKENNY_AGENT_ID=pc\n").unwrap();
        assert_eq!(vars["KENNY_SERVER"], "https://x");
        assert!(parse_config("SERVER=https://x").unwrap_err().contains("line 1"));
        assert!(
            parse_config("KENNY_AGNET_ID=pc")
                .unwrap_err()
                .contains("not a kenny agent setting")
        );
        assert!(parse_config("KENNY_SERVER").unwrap_err().contains("expected KEY=value"));
    }
}
