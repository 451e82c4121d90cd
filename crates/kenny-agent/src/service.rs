//! Running the agent as a system service: what `kenny-agent install` writes and runs
//! (a systemd unit on Linux, a Windows service), and the settings file both read.
//!
//! Everything here is plain data and text, so the Windows plan is built and tested on
//! Linux as well; only carrying out the plan touches the machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const SERVICE_NAME: &str = "kenny-agent";

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
    /// Makes the settings, state and switch directories, locks the private ones down,
    /// and only then writes the settings file, in this order; a failed step stops the
    /// install with nothing secret on disk. Run even when nothing is started.
    pub setup: Vec<Step>,
    /// The systemd unit file and its text (Linux only).
    pub unit: Option<(PathBuf, String)>,
    /// Commands that register and start the service, in order.
    pub start: Vec<Vec<String>>,
    /// Commands that stop and remove it, in order; failures are reported, not fatal.
    pub stop: Vec<Vec<String>>,
}

/// One step of preparing the directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create a directory and its parents; on Unix, then set this mode on it.
    MakeDir { path: PathBuf, mode: u32 },
    /// Run a program with these arguments; failing stops the install.
    Run(Vec<String>),
    /// Run a Windows PowerShell script (see [`powershell_argv`]); a script that fails
    /// says why on stderr and stops the install.
    PowerShell(String),
    /// Write the settings file (it holds the enrollment token), owner-only.
    WriteSettings,
}

/// Windows well-known SIDs, so no step depends on the language of group names.
const SYSTEM_SID: &str = "S-1-5-18";
const ADMINISTRATORS_SID: &str = "S-1-5-32-544";
const USERS_SID: &str = "S-1-5-32-545";

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
    let settings_dir = config.parent().unwrap_or(Path::new("/etc"));
    Ok(InstallPlan {
        binary: rooted(root, binary),
        config: rooted(root, config),
        config_text: settings.config_text(state_dir, Path::new(crate::switch::LINUX_DIR), true)?,
        state_dir: rooted(root, state_dir),
        switch_dir: rooted(root, Path::new(crate::switch::LINUX_DIR)),
        // /etc and /var/lib belong to root, so nobody else can have made these first.
        setup: vec![
            Step::MakeDir {
                path: rooted(root, settings_dir),
                mode: 0o700,
            },
            Step::MakeDir {
                path: rooted(root, state_dir),
                mode: 0o700,
            },
            // Any local user may turn remote control off; sticky, so nobody removes
            // another's switch.
            Step::MakeDir {
                path: rooted(root, Path::new(crate::switch::LINUX_DIR)),
                mode: 0o1777,
            },
            Step::WriteSettings,
        ],
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
///
/// Any local user may create folders in `ProgramData`, so a user could make
/// `ProgramData\kenny` first, keep rights to it, and read the token or plant a key
/// there. Each private directory (settings, then state) is therefore: checked if it
/// exists (a plain directory, owned by Administrators or SYSTEM, holding only what
/// kenny puts there), created, given to Administrators, restricted to SYSTEM and
/// Administrators with inheritance off, and verified (owner, no other entry in its
/// ACL, still nothing foreign in it) before anything secret is written.
pub fn windows_plan(
    program_files: &Path,
    program_data: &Path,
    settings: &InstallSettings,
) -> Result<InstallPlan, String> {
    // Joined by hand: this plan is also built (and tested) where `/` is the separator.
    let win_join = |base: &Path, rest: &str| PathBuf::from(format!("{}\\{rest}", base.display()));
    let binary = win_join(program_files, "kenny\\kenny-agent.exe");
    let settings_dir = win_join(program_data, "kenny");
    let config = win_join(&settings_dir, "agent.env");
    let state_dir = win_join(&settings_dir, "state");
    let switch_dir = win_join(&settings_dir, "switch");
    let bin_path = format!("\"{}\" service --config \"{}\"", binary.display(), config.display());
    let sc = |args: &[&str]| -> Vec<String> {
        std::iter::once("sc.exe")
            .chain(args.iter().copied())
            .map(String::from)
            .collect()
    };
    let settings_entries = ["agent.env", "agent.tmp", "state", "switch"];
    let state_entries = [
        crate::identity::KEY_FILE,
        crate::identity::ENROLLED_FILE,
        crate::switch::FILE,
    ];
    let mut setup = private_dir_steps(&settings_dir, &settings_entries);
    setup.extend(private_dir_steps(&state_dir, &state_entries));
    setup.extend([
        // Inside the private directory, with one more grant: local Users may change
        // the switch directory's contents (turn remote control off).
        Step::MakeDir {
            path: switch_dir.clone(),
            mode: 0o1777,
        },
        Step::Run(icacls(&switch_dir, &["/grant:r", &format!("*{USERS_SID}:(OI)(CI)M")])),
        // Inherits the settings directory's ACL: SYSTEM and Administrators only.
        Step::WriteSettings,
    ]);
    Ok(InstallPlan {
        config_text: settings.config_text(&state_dir, &switch_dir, false)?,
        setup,
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

fn icacls(target: &Path, args: &[&str]) -> Vec<String> {
    let mut argv = vec!["icacls.exe".to_owned(), target.to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    argv
}

/// The steps that make `dir` private to SYSTEM and Administrators (see
/// [`windows_plan`]); `expected` names the entries kenny itself keeps in it.
fn private_dir_steps(dir: &Path, expected: &[&str]) -> Vec<Step> {
    vec![
        Step::PowerShell(check_existing_dir_script(dir, expected)),
        Step::MakeDir {
            path: dir.to_owned(),
            mode: 0o700,
        },
        Step::Run(icacls(dir, &["/setowner", &format!("*{ADMINISTRATORS_SID}")])),
        Step::Run(icacls(
            dir,
            &[
                "/inheritance:r",
                "/grant:r",
                &format!("*{SYSTEM_SID}:(OI)(CI)F"),
                "/grant:r",
                &format!("*{ADMINISTRATORS_SID}:(OI)(CI)F"),
            ],
        )),
        Step::PowerShell(verify_private_dir_script(dir, expected)),
    ]
}

/// What every install script starts with: stop at the first error, and a `Fail` that
/// says why on stderr and exits 1 (a bare `throw` would wrap the message in noise).
fn script_prelude(dir: &Path, expected: &[&str]) -> String {
    let expected: Vec<String> = expected.iter().map(|e| ps_literal(e)).collect();
    format!(
        "$ErrorActionPreference = 'Stop'\n\
         $dir = {dir}\n\
         $expected = @({expected})\n\
         $trusted = @('{SYSTEM_SID}', '{ADMINISTRATORS_SID}')\n\
         function Fail($message) {{ [Console]::Error.WriteLine($message); exit 1 }}\n\
         function Foreign {{ @(Get-ChildItem -LiteralPath $dir -Force | Where-Object {{ $expected -notcontains $_.Name }} | ForEach-Object {{ $_.Name }}) }}\n",
        dir = ps_literal(&dir.to_string_lossy()),
        expected = expected.join(", "),
    )
}

/// Before creating `dir`: if it is there already, it must be a plain directory that an
/// administrator made (owned by Administrators or SYSTEM) holding only kenny's entries.
fn check_existing_dir_script(dir: &Path, expected: &[&str]) -> String {
    script_prelude(dir, expected)
        + "if (Test-Path -LiteralPath $dir) {\n\
           \x20 $item = Get-Item -LiteralPath $dir -Force\n\
           \x20 if (-not $item.PSIsContainer -or ($item.Attributes -band [IO.FileAttributes]::ReparsePoint)) { Fail \"$dir exists and is not a plain directory (a file, link or junction); remove it and install again\" }\n\
           \x20 $owner = (Get-Acl -LiteralPath $dir).GetOwner([Security.Principal.SecurityIdentifier]).Value\n\
           \x20 if ($trusted -notcontains $owner) { Fail \"$dir exists already and belongs to $owner, not to Administrators or SYSTEM: someone else may have made it to read or plant the agent's secrets. Check what is in it, remove it, and install again\" }\n\
           \x20 $foreign = @(Foreign)\n\
           \x20 if ($foreign.Count -gt 0) { Fail \"$dir already holds entries kenny did not put there ($($foreign -join ', ')); move them elsewhere and install again\" }\n\
           }\n"
}

/// After restricting `dir`: owned by Administrators or SYSTEM, inheritance off, no
/// other account in its ACL, and still nothing foreign in it (a fresh directory was
/// open to local users between its creation and the ACL change).
fn verify_private_dir_script(dir: &Path, expected: &[&str]) -> String {
    script_prelude(dir, expected)
        + "$acl = Get-Acl -LiteralPath $dir\n\
           $owner = $acl.GetOwner([Security.Principal.SecurityIdentifier]).Value\n\
           $others = @($acl.GetAccessRules($true, $true, [Security.Principal.SecurityIdentifier]) | ForEach-Object { $_.IdentityReference.Value } | Where-Object { $trusted -notcontains $_ })\n\
           if (-not $acl.AreAccessRulesProtected -or $trusted -notcontains $owner -or $others.Count -gt 0) { Fail \"could not make $dir private to SYSTEM and Administrators (owner $owner, inheritance off: $($acl.AreAccessRulesProtected), other accounts: $($others -join ', ')); remove those entries with icacls, or remove the directory, and install again\" }\n\
           $foreign = @(Foreign)\n\
           if ($foreign.Count -gt 0) { Fail \"entries appeared in $dir while it was being locked down ($($foreign -join ', ')); someone on this PC may be trying to plant files. Remove them and install again\" }\n"
}

/// A PowerShell single-quoted literal: nothing inside is expanded.
fn ps_literal(text: &str) -> String {
    crate::tools::powershell_literal(text)
}

/// How [`Step::PowerShell`] runs: the inbox Windows PowerShell with the script as
/// `-EncodedCommand` (base64 of UTF-16LE), so no quoting rule of the Windows command
/// line can change what it says.
pub fn powershell_argv(script: &str) -> Vec<String> {
    std::iter::once("powershell.exe".to_owned())
        .chain(crate::tools::powershell_encoded_args(script))
        .collect()
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
        assert_eq!(vars["KENNY_SWITCH_DIR"], crate::switch::LINUX_DIR);
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
        assert_eq!(plan.stop.last().unwrap(), &["sc.exe", "delete", "kenny-agent"]);
        assert!(
            plan.config_text
                .contains("KENNY_STATE_DIR=C:\\ProgramData\\kenny\\state\n")
        );
    }

    /// One line per step, with the script steps named by what they do.
    fn describe(step: &Step) -> String {
        match step {
            Step::MakeDir { path, mode } => format!("mkdir {} {mode:o}", path.display()),
            Step::Run(argv) => argv.join(" "),
            Step::PowerShell(script) => {
                let dir = script.lines().find_map(|l| l.strip_prefix("$dir = ")).unwrap_or("?");
                let what = if script.contains("Test-Path") {
                    "check"
                } else if script.contains("GetAccessRules") {
                    "verify"
                } else {
                    "?"
                };
                format!("powershell {what} {dir}")
            }
            Step::WriteSettings => "write settings".into(),
        }
    }

    #[test]
    fn windows_private_directories_are_locked_down_before_the_settings_are_written() {
        let plan = windows_plan(
            Path::new(r"C:\Program Files"),
            Path::new(r"C:\ProgramData"),
            &settings(),
        )
        .unwrap();
        let steps: Vec<String> = plan.setup.iter().map(describe).collect();
        let private = |dir: &str| {
            [
                format!("powershell check '{dir}'"),
                format!("mkdir {dir} 700"),
                format!("icacls.exe {dir} /setowner *S-1-5-32-544"),
                format!(
                    "icacls.exe {dir} /inheritance:r /grant:r *S-1-5-18:(OI)(CI)F /grant:r *S-1-5-32-544:(OI)(CI)F"
                ),
                format!("powershell verify '{dir}'"),
            ]
        };
        let mut expected: Vec<String> = private(r"C:\ProgramData\kenny").into();
        expected.extend(private(r"C:\ProgramData\kenny\state"));
        expected.extend([
            r"mkdir C:\ProgramData\kenny\switch 1777".to_owned(),
            r"icacls.exe C:\ProgramData\kenny\switch /grant:r *S-1-5-32-545:(OI)(CI)M".to_owned(),
            "write settings".to_owned(),
        ]);
        assert_eq!(steps, expected);
        assert_eq!(plan.config, Path::new(r"C:\ProgramData\kenny\agent.env"));
        assert_eq!(plan.state_dir, Path::new(r"C:\ProgramData\kenny\state"));
        // Only the switch directory grants local Users anything.
        let grants_users = |s: &String| s.contains("S-1-5-32-545");
        assert_eq!(steps.iter().filter(|s| grants_users(s)).count(), 1);
    }

    #[test]
    fn windows_checks_refuse_foreign_directories_and_loose_acls() {
        let plan = windows_plan(Path::new(r"C:\Program Files"), Path::new(r"C:\Data's"), &settings()).unwrap();
        let scripts: Vec<&String> = plan
            .setup
            .iter()
            .filter_map(|s| match s {
                Step::PowerShell(script) => Some(script),
                _ => None,
            })
            .collect();
        assert_eq!(scripts.len(), 4, "check and verify, for settings and for state");
        let (check, verify) = (scripts[0], scripts[1]);
        // The path is one PowerShell literal, whatever it holds.
        assert!(check.contains("$dir = 'C:\\Data''s\\kenny'\n"), "{check}");
        assert!(
            check.contains("$expected = @('agent.env', 'agent.tmp', 'state', 'switch')\n"),
            "{check}"
        );
        assert!(check.contains("$trusted = @('S-1-5-18', 'S-1-5-32-544')\n"));
        for refusal in [
            "[IO.FileAttributes]::ReparsePoint",
            "GetOwner([Security.Principal.SecurityIdentifier])",
            "if ($trusted -notcontains $owner) { Fail",
            "$foreign = @(Foreign)",
        ] {
            assert!(check.contains(refusal), "the check lacks {refusal}: {check}");
        }
        for requirement in [
            "-not $acl.AreAccessRulesProtected",
            "$trusted -notcontains $owner",
            "$others.Count -gt 0",
            "$foreign = @(Foreign)",
        ] {
            assert!(
                verify.contains(requirement),
                "the verification lacks {requirement}: {verify}"
            );
        }
        assert!(scripts[2].contains("$expected = @('agent_ed25519.key', 'enrolled', 'remote-control-off')"));
        for script in &scripts {
            assert!(script.starts_with("$ErrorActionPreference = 'Stop'\n"));
            assert!(!script.contains('"') || script.matches('"').count() % 2 == 0);
        }
    }

    #[test]
    fn powershell_scripts_reach_powershell_unquoted() {
        use base64::Engine;
        let script = "Fail \"it's $dir\" ; 'x'";
        let argv = powershell_argv(script);
        assert_eq!(
            argv[..7],
            [
                "powershell.exe",
                "-NoLogo",
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-EncodedCommand"
            ]
        );
        let bytes = base64::engine::general_purpose::STANDARD.decode(&argv[7]).unwrap();
        let units: Vec<u16> = bytes.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(String::from_utf16(&units).unwrap(), script);
        assert!(argv[7].chars().all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c)));
    }

    #[test]
    fn linux_directories_are_made_before_the_settings_are_written() {
        let plan = linux_plan(Path::new("/stage"), &settings()).unwrap();
        let steps: Vec<String> = plan.setup.iter().map(describe).collect();
        assert_eq!(
            steps,
            [
                "mkdir /stage/etc/kenny-agent 700",
                "mkdir /stage/var/lib/kenny-agent 700",
                "mkdir /stage/var/lib/kenny-agent-switch 1777",
                "write settings"
            ]
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
