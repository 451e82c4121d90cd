//! The tool catalog: every forwarded tool's name, description, class, supported OSes
//! and argument schema. The agent dispatches from it, the server validates and builds
//! its MCP tool list from it, so the two can never drift apart.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::args;

/// The argument the server consumes for routing; it never reaches an agent.
pub const AGENT_ID_ARG: &str = "agent_id";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    ReadOnly,
    /// Small and reversible (flush DNS, start remote help).
    StandardChange,
    /// Anything else that changes state.
    NormalChange,
}

impl ToolClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::StandardChange => "standard_change",
            Self::NormalChange => "normal_change",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    Windows,
    Macos,
}

impl Os {
    pub fn as_str(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Windows => "windows",
            Os::Macos => "macos",
        }
    }

    /// The OS this binary was built for, if kenny supports it.
    pub fn current() -> Option<Os> {
        match std::env::consts::OS {
            "linux" => Some(Os::Linux),
            "windows" => Some(Os::Windows),
            "macos" => Some(Os::Macos),
            _ => None,
        }
    }
}

/// Every forwarded tool: its name, the type of the arguments a caller passes, and
/// (where the server rewrites them) the type the agent receives. One list makes
/// [`Tool`], the argument schemas and [`ToolCall`], which the agent's dispatcher
/// matches without a wildcard, so a catalog tool that no handler serves does not
/// compile.
macro_rules! catalog_tools {
    ($($variant:ident => $name:literal ($args:ty $(, wire $wire:ty)?),)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Tool {
            $($variant,)*
        }

        impl Tool {
            pub const ALL: &'static [Tool] = &[$(Tool::$variant,)*];

            /// The name callers and the wire use.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Tool::$variant => $name,)*
                }
            }

            pub fn from_name(name: &str) -> Option<Tool> {
                match name {
                    $($name => Some(Tool::$variant),)*
                    _ => None,
                }
            }

            /// The schema of a caller's arguments, derived from their type.
            fn derive_args_schema(self) -> Value {
                match self {
                    $(Tool::$variant => args::schema_of::<$args>(),)*
                }
            }

            /// The caller's argument names in declaration order.
            fn derive_arg_names(self) -> &'static [&'static str] {
                match self {
                    $(Tool::$variant => args::field_names::<$args>(),)*
                }
            }

            /// Whether `args` decode as this tool's caller arguments.
            fn decode_caller_args(self, args: &Map<String, Value>) -> Result<(), serde_json::Error> {
                match self {
                    $(Tool::$variant => <$args as serde::Deserialize>::deserialize(args).map(drop),)*
                }
            }
        }

        /// A call decoded into its tool's argument type: what an agent's handler gets.
        #[derive(Debug, Clone, PartialEq)]
        pub enum ToolCall {
            $($variant(wire_type!($args $(, $wire)?)),)*
        }

        impl ToolCall {
            /// Decodes the arguments an agent received for `tool`. Unknown fields and
            /// wrong types are refused (serde's message names the field).
            pub fn decode(tool: Tool, args: &Map<String, Value>) -> Result<ToolCall, serde_json::Error> {
                use serde::Deserialize as _;
                Ok(match tool {
                    $(Tool::$variant => ToolCall::$variant(<wire_type!($args $(, $wire)?)>::deserialize(args)?),)*
                })
            }

            pub fn tool(&self) -> Tool {
                match self {
                    $(ToolCall::$variant(_) => Tool::$variant,)*
                }
            }
        }
    };
}

/// The type an agent receives for a tool: its caller arguments, unless the catalog
/// names a wire type the server builds from them.
macro_rules! wire_type {
    ($args:ty) => {
        $args
    };
    ($args:ty, $wire:ty) => {
        $wire
    };
}

catalog_tools! {
    ShellExec => "shell_exec" (args::ShellExecArgs),
    PowershellExec => "powershell_exec" (args::PowershellExecArgs),
    FsList => "fs_list" (args::FsListArgs),
    FsRead => "fs_read" (args::FsReadArgs),
    FsSearch => "fs_search" (args::FsSearchArgs),
    FsDiskUsage => "fs_disk_usage" (args::FsDiskUsageArgs),
    DiagProcesses => "diag_processes" (args::DiagProcessesArgs),
    NetConfig => "net_config" (args::NoArgs),
    DiagServices => "diag_services" (args::DiagServicesArgs),
    DiagEventlog => "diag_eventlog" (args::DiagEventlogArgs),
    DiagAutostart => "diag_autostart" (args::NoArgs),
    NetDnsFlush => "net_dns_flush" (args::NoArgs),
    NetAdapterReset => "net_adapter_reset" (args::NetAdapterResetArgs),
    NetPing => "net_ping" (args::NetPingArgs),
    NetDnsLookup => "net_dns_lookup" (args::NetDnsLookupArgs),
    NetPortCheck => "net_port_check" (args::NetPortCheckArgs),
    ScreenCapture => "screen_capture" (args::ScreenCaptureArgs),
    WingetList => "winget_list" (args::PackageListArgs),
    WingetInstall => "winget_install" (args::PackageArgs),
    WingetUninstall => "winget_uninstall" (args::PackageArgs),
    WingetUpdate => "winget_update" (args::PackageUpdateArgs),
    WebfilterStatus => "webfilter_status" (args::NoArgs),
    WebfilterApply => "webfilter_apply" (args::WebfilterApplyArgs),
    WebfilterClear => "webfilter_clear" (args::NoArgs),
    RemotehelpStatus => "remotehelp_status" (args::NoArgs),
    RemotehelpStart => "remotehelp_start" (args::NoArgs),
    RemotehelpStop => "remotehelp_stop" (args::NoArgs),
    AgentUpdate => "agent_update" (args::AgentUpdateArgs, wire crate::update::UpdateOrder),
    TelemetryCollect => "telemetry_collect" (args::TelemetryCollectArgs),
    AccountCreate => "account_create" (args::AccountCreateArgs),
    AccountDelete => "account_delete" (args::AccountDeleteArgs),
    AccountSetEnabled => "account_set_enabled" (args::AccountSetEnabledArgs),
    AccountSetAdmin => "account_set_admin" (args::AccountSetAdminArgs),
    AccountSetLogonRights => "account_set_logon_rights" (args::AccountSetLogonRightsArgs),
    AccountSessionAction => "account_session_action" (args::AccountSessionActionArgs),
    PasswordPolicySet => "password_policy_set" (args::PasswordPolicySetArgs),
}

/// Argument schemas and names, derived once per process: validation reads them on
/// every call.
struct DerivedArgs {
    schema: Value,
    names: &'static [&'static str],
}

fn derived(tool: Tool) -> &'static DerivedArgs {
    static DERIVED: OnceLock<Vec<DerivedArgs>> = OnceLock::new();
    let all = DERIVED.get_or_init(|| {
        Tool::ALL
            .iter()
            .map(|t| DerivedArgs {
                schema: t.derive_args_schema(),
                names: t.derive_arg_names(),
            })
            .collect()
    });
    &all[tool as usize]
}

impl Tool {
    /// This tool's catalog entry.
    pub fn spec(self) -> &'static ToolSpec {
        // Every variant has its entry: `every_tool_has_one_catalog_entry` checks it.
        &TOOLS[self as usize]
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug)]
pub struct ToolSpec {
    pub tool: Tool,
    pub title: &'static str,
    pub description: &'static str,
    pub class: ToolClass,
    /// Reads something personal (screen, files, browsing history).
    pub privacy_sensitive: bool,
    /// Sends something from the PC to a host the caller names (a ping, a DNS lookup,
    /// a TCP connection): a way out for data, so the chat never runs it unasked.
    pub reaches_out: bool,
    pub platforms: &'static [Os],
    /// Longest the agent works on a call that sets no `timeout_s` of its own; the
    /// server waits this long (plus a grace) before answering `timeout` itself.
    pub default_timeout_s: u64,
}

const ALL_OS: &[Os] = &[Os::Linux, Os::Windows, Os::Macos];
const UNIX: &[Os] = &[Os::Linux, Os::Macos];
const WINDOWS: &[Os] = &[Os::Windows];
const LINUX_WINDOWS: &[Os] = &[Os::Linux, Os::Windows];

pub const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        tool: Tool::ShellExec,
        title: "Run a shell command",
        description: "Run a command with `sh -c` on a Linux or macOS PC. Returns stdout, stderr, exit_code and whether output was truncated. On Windows PCs use powershell_exec instead.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: UNIX,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::PowershellExec,
        title: "Run a PowerShell script",
        description: "Run a PowerShell script on a Windows PC. Returns stdout, stderr, exit_code and whether output was truncated. On Linux or macOS PCs use shell_exec instead.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::FsList,
        title: "List a directory",
        description: "List the entries of a directory: name, kind (file, dir, symlink, other), size in bytes and modification time. Bounded; `truncated` says when entries were left out.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: true,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 90,
    },
    ToolSpec {
        tool: Tool::FsRead,
        title: "Read a file",
        description: "Read a text file, at most max_bytes from offset (default 65536, cap 1048576). Non-UTF-8 bytes are replaced. Returns content, size, offset, bytes_read and truncated.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: true,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 90,
    },
    ToolSpec {
        tool: Tool::FsSearch,
        title: "Find files by name",
        description: "Search a directory tree for files whose name contains `pattern` (case-insensitive) or matches it as a glob with * and ?. Bounded in results, depth and entries visited.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: true,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 90,
    },
    ToolSpec {
        tool: Tool::FsDiskUsage,
        title: "Disk usage",
        description: "Without a path: every mounted volume with total, free and percent used. With a path: the total size of that directory and its largest children.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 90,
    },
    ToolSpec {
        tool: Tool::DiagProcesses,
        title: "Running processes",
        description: "Running processes with pid, name, CPU percent and memory, sorted by cpu or memory (default memory), top `limit` (default 25).",
        class: ToolClass::ReadOnly,
        // Each row carries the command line, which names the files and pages people
        // open and sometimes carries a secret passed as an argument.
        privacy_sensitive: true,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::NetConfig,
        title: "Network configuration",
        description: "Network interfaces with their addresses, MAC and traffic counters, plus the hostname, the DNS servers and the default gateway.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::DiagServices,
        title: "System services",
        description: "System services with their state. Linux: systemd units (load, active and sub state, description). Windows: services (status, start type, display name). Filter by `state` (running, failed, stopped, all) and a name fragment; bounded by `limit`.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::DiagEventlog,
        title: "System event log",
        description: "Recent system log entries, newest first. Linux: the systemd journal (or /var/log/syslog where systemd does not run), filterable by `unit` and `priority`. Windows: the System or Application event log (`log`), filterable by source (`unit`) and level (`priority`). `since` is an RFC 3339 time or a span like 30m, 6h, 2d.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::DiagAutostart,
        title: "Programs started at boot or login",
        description: "What starts by itself. Linux: enabled systemd units, XDG autostart entries (system and per user) and cron @reboot lines. Windows: startup commands (Run keys, Startup folders) and non-Microsoft scheduled tasks at logon/boot.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::NetDnsFlush,
        title: "Flush the DNS cache",
        description: "Flush this PC's DNS resolver cache. Linux: systemd-resolved (resolvectl flush-caches) or nscd; says unsupported when the PC keeps no local cache. Windows: Clear-DnsClientCache.",
        class: ToolClass::StandardChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::NetAdapterReset,
        title: "Reset a network adapter",
        description: "Take one network adapter down and bring it back up (see net_config for names). The PC may drop off kenny for a few seconds if this is the adapter it talks through. Linux: ip link. Windows: Restart-NetAdapter.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::NetPing,
        title: "Ping a host",
        description: "Is a host reachable, and how fast: ICMP echo with round-trip times and loss. Where ICMP is not available it measures TCP connect time to port 443 instead and says so (`method`).",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: true,
        platforms: ALL_OS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::NetDnsLookup,
        title: "Resolve a host name",
        description: "Resolve a host name with this PC's own resolver (as its programs would): the addresses, how long it took, and the DNS servers configured.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: true,
        platforms: ALL_OS,
        default_timeout_s: 45,
    },
    ToolSpec {
        tool: Tool::NetPortCheck,
        title: "Check a TCP port",
        description: "Try a TCP connection from this PC to host:port: `open` with the connect time, `refused`, `timeout` or `unresolved`.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: true,
        platforms: ALL_OS,
        default_timeout_s: 45,
    },
    ToolSpec {
        tool: Tool::ScreenCapture,
        title: "Screenshot",
        description: "A PNG screenshot of the PC's screen, scaled down to at most `max_width` pixels wide (default 1280) so it fits in a tool result. Linux: the X11 display; Windows: the primary screen of the signed-in user.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: true,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::WingetList,
        title: "Installed packages",
        description: "Installed packages with id, name, version and the newer version available (empty when up to date). Windows: winget. Linux: the system package manager (apt/dpkg or dnf/rpm). Filter with `query`; bounded by `limit`.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 120,
    },
    ToolSpec {
        tool: Tool::WingetInstall,
        title: "Install a package",
        description: "Install one package by id. Windows: winget id (e.g. `Mozilla.Firefox`). Linux: the distribution's package name for apt or dnf (e.g. `firefox-esr`).",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 900,
    },
    ToolSpec {
        tool: Tool::WingetUninstall,
        title: "Uninstall a package",
        description: "Remove one package by id (winget id on Windows, apt/dnf package name on Linux). Configuration files are kept.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 900,
    },
    ToolSpec {
        tool: Tool::WingetUpdate,
        title: "Update packages",
        description: "Upgrade one package by id, or every package with an update when `all` is true. Windows: winget upgrade. Linux: apt or dnf.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 1800,
    },
    ToolSpec {
        tool: Tool::WebfilterStatus,
        title: "Web filter status",
        description: "Whether kenny's web filter is active in this PC's hosts file: blocked entry count, the list hash and when it was applied.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::WebfilterApply,
        title: "Apply a web filter",
        description: "Block a list of domains on this PC through its hosts file, replacing any list kenny applied before (entries outside kenny's marked block are kept). Domains are validated; reserved names such as localhost are refused. `doh_policy: disable` also turns off browsers' DNS-over-HTTPS where the OS allows, which would bypass the hosts file.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::WebfilterClear,
        title: "Remove the web filter",
        description: "Remove kenny's block from this PC's hosts file (other entries are kept) and undo a DNS-over-HTTPS policy it set.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::RemotehelpStatus,
        title: "Remote help status",
        description: "Windows only: whether Quick Assist is installed, its version, whether a user is signed in to accept a session, and whether the internet is reachable.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: WINDOWS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::RemotehelpStart,
        title: "Start remote help",
        description: "Windows only: open Quick Assist on the signed-in user's desktop. A helper then shares a security code and the person at the PC must accept; nothing connects without them.",
        class: ToolClass::StandardChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: WINDOWS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::RemotehelpStop,
        title: "Stop remote help",
        description: "Windows only: close Quick Assist, ending any remote help session.",
        class: ToolClass::StandardChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: WINDOWS,
        default_timeout_s: 30,
    },
    ToolSpec {
        tool: Tool::AgentUpdate,
        title: "Update the agent",
        description: "Replace this PC's kenny-agent with a build the kenny server offers (newest newer one, or the `version` named). The server picks the file and signs a manifest of it (version, OS, architecture, size, SHA-256); the agent checks the signature against the server key it pinned, downloads only from its own server, checks size and hash, then restarts into the new build on trial: if that build does not reconnect in time, the previous one is restored and the failure reported. Older versions only for a superuser naming the exact version with allow_downgrade.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 600,
    },
    ToolSpec {
        tool: Tool::TelemetryCollect,
        title: "Collect health telemetry",
        description: "Collect a health snapshot now: sections disk, memory, cpu, processes, uptime, os, time_sync, thermals, battery, disk_smart, peripherals, printers, network, routing, wifi_quality, net_quality, failed_services, services, scheduled_tasks, autostart, listening_ports, firewall, installed_software, app_updates, local_accounts, logon_failures, defender, defender_quarantine, av_thirdparty, win_update, reboot_pending, encryption, reliability, backup_status, screen_time, web_activity, browser_extensions, sandbox, each with status (ok, warn, crit) and a summary. `sections` limits which are collected; the personal sections web_activity and screen_time come only when named.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: ALL_OS,
        default_timeout_s: 90,
    },
    ToolSpec {
        tool: Tool::AccountCreate,
        title: "Create a local account",
        description: "Create a local account with a password, optionally a display name and administrator rights. Linux: useradd (home directory created), the password set by chpasswd on standard input, sudo/wheel/admin group for `admin`. Windows: New-LocalUser with the password passed as a SecureString read from standard input, Administrators (found by SID) for `admin`. The password is never logged or returned. An existing name is refused.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::AccountDelete,
        title: "Delete a local account",
        description: "Delete a local account, with its home directory and files when `remove_profile` is true. Linux: userdel (-r). Windows: Remove-LocalUser, and its Win32_UserProfile. Refused (blocked, nothing changed) for a built-in account, the account the kenny agent runs as, and the last enabled local administrator.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 120,
    },
    ToolSpec {
        tool: Tool::AccountSetEnabled,
        title: "Enable or disable a local account",
        description: "Let a local account sign in, or stop it. Linux: disabling locks the password and expires the account (usermod -L -e 1), which also stops SSH keys; enabling unlocks and clears the expiry. Windows: Disable-LocalUser / Enable-LocalUser. Disabling is refused (blocked) for a built-in account, the account the kenny agent runs as, and the last enabled local administrator.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::AccountSetAdmin,
        title: "Grant or remove administrator rights",
        description: "Make a local account an administrator or take that away. Linux: membership of the sudo, wheel or admin group (gpasswd). Windows: membership of Administrators, found by its SID S-1-5-32-544 whatever the language. Removing is refused (blocked) for a built-in account, the account the kenny agent runs as, and the last enabled local administrator.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 60,
    },
    ToolSpec {
        tool: Tool::AccountSetLogonRights,
        title: "Refuse network or remote sign-in",
        description: "Refuse a local account sign-in over the network and/or by remote desktop (`deny`: network, remote_interactive); an empty list allows both again. Windows: the SeDenyNetworkLogonRight and SeDenyRemoteInteractiveLogonRight user rights (secedit). Linux: both mean SSH, a DenyUsers line in kenny's own sshd drop-in, sshd reloaded if it runs; local sign-in is unaffected.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 90,
    },
    ToolSpec {
        tool: Tool::AccountSessionAction,
        title: "Lock or sign out a person's sessions",
        description: "Lock the screen of, or sign out, every session of a local account, after an optional warning on their screen (`warn_seconds`, at most 300). Linux: loginctl (needs systemd-logind), the warning through wall to their terminals. Windows: query session, msg for the warning, logoff, and the lock through a one-off task in their session. Returns each session and whether it was acted on.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 360,
    },
    ToolSpec {
        tool: Tool::PasswordPolicySet,
        title: "Set the local password policy",
        description: "Set the local accounts' password rules (at least one of min_length, max_age_days, lockout_threshold; 0 age or threshold means never). Windows: net accounts. Linux: pwquality's minlen, PASS_MAX_DAYS in login.defs plus chage -M on existing people's accounts, and faillock's deny; files are edited in place of their own lines, atomically. Local accounts only: a domain's or Microsoft's policy is not changed.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        reaches_out: false,
        platforms: LINUX_WINDOWS,
        default_timeout_s: 120,
    },
];

/// Argument names of the existing kenny (tool, its name, ours), accepted as aliases.
pub const ALIASES: &[(&str, &str, &str)] = &[
    ("fs_search", "root", "path"),
    ("diag_services", "filter", "name"),
    ("diag_eventlog", "count", "limit"),
    ("net_adapter_reset", "name", "adapter"),
];

pub fn find(name: &str) -> Option<&'static ToolSpec> {
    Tool::from_name(name).map(Tool::spec)
}

impl ToolSpec {
    pub fn name(&self) -> &'static str {
        self.tool.name()
    }

    pub fn supports(&self, os: Os) -> bool {
        self.platforms.contains(&os)
    }

    /// The server turns the caller's arguments into different wire arguments, so the
    /// agent decodes them itself instead of checking them against the caller's type.
    pub fn args_built_by_server(&self) -> bool {
        self.tool == Tool::AgentUpdate
    }

    pub fn read_only(&self) -> bool {
        self.class == ToolClass::ReadOnly
    }

    /// Needs at least the `operator` role, whatever hosts the caller may reach: the web
    /// filter's changes (a `user`, say a child's account, must not lift its own filter)
    /// and every change to local accounts (nor make itself an administrator).
    pub fn needs_operator(&self) -> bool {
        matches!(
            self.tool,
            Tool::WebfilterApply
                | Tool::WebfilterClear
                | Tool::AccountCreate
                | Tool::AccountDelete
                | Tool::AccountSetEnabled
                | Tool::AccountSetAdmin
                | Tool::AccountSetLogonRights
                | Tool::AccountSessionAction
                | Tool::PasswordPolicySet
        )
    }

    /// How long the agent may work on a call: its `timeout_s` when it has one, else the
    /// tool's default. The agent stops the work and answers `timeout` at this point; the
    /// server waits a little longer, so the agent's own answer arrives first.
    pub fn work_limit(&self, args: &Map<String, Value>) -> std::time::Duration {
        let secs = args
            .get("timeout_s")
            .and_then(Value::as_u64)
            .unwrap_or(self.default_timeout_s);
        std::time::Duration::from_secs(secs)
    }

    /// JSON schema of a caller's arguments (without `agent_id`), derived from the
    /// tool's argument type in [`crate::args`].
    pub fn args_schema(&self) -> Value {
        derived(self.tool).schema.clone()
    }

    /// The caller's argument names, in the order the argument type declares them.
    pub fn arg_names(&self) -> &'static [&'static str] {
        derived(self.tool).names
    }

    /// Whether the tool takes an argument called `name`.
    pub fn takes(&self, name: &str) -> bool {
        self.arg_names().contains(&name)
    }

    /// JSON schema of the arguments an MCP client passes: the agent's plus the
    /// required routing argument.
    pub fn mcp_input_schema(&self) -> Value {
        let mut schema = self.args_schema();
        schema["properties"][AGENT_ID_ARG] = json!({
            "type": "string",
            "minLength": 1,
            "description": "Id of the PC to run on (see list_agents). Required on every call; nothing is remembered between calls.",
        });
        if let Some(required) = schema["required"].as_array_mut() {
            required.insert(0, Value::from(AGENT_ID_ARG));
        }
        schema
    }

    /// Checks agent-side arguments (without `agent_id`) against the parameters.
    /// Rewrites the existing kenny's argument names into ours ([`ALIASES`]), so prompts
    /// and clients written for it keep working. Both spellings given with different
    /// values is an error, never a guess. (A bare `winget_update`, which the existing
    /// kenny reads as "upgrade everything", stays an error that asks for `all: true`:
    /// an empty call must not upgrade a whole PC.)
    pub fn normalize_args(&self, args: &mut Map<String, Value>) -> Result<(), String> {
        for (tool, old, ours) in ALIASES {
            if *tool != self.name() {
                continue;
            }
            let Some(value) = args.remove(*old) else { continue };
            match args.get(*ours) {
                Some(existing) if *existing != value => {
                    return Err(format!(
                        "`{old}` and `{ours}` are two names for one argument of {tool} and they differ; pass `{ours}` only"
                    ));
                }
                _ => {
                    args.insert((*ours).to_owned(), value);
                }
            }
        }
        Ok(())
    }

    /// Checks a caller's arguments (without `agent_id`) against the tool's argument
    /// type: every name known, required ones present, each value of its type and
    /// within its bounds, then decoded as that type. Each refusal names the argument.
    pub fn validate_args(&self, args: &Map<String, Value>) -> Result<(), String> {
        self.check_args(args)?;
        self.tool
            .decode_caller_args(args)
            .map_err(|e| format!("the arguments of {} do not fit: {e}", self.name()))
    }

    /// The checks of [`ToolSpec::validate_args`] without its decoding, for a caller
    /// that decodes the arguments itself next ([`ToolCall::decode`], in the agent).
    pub fn check_args(&self, args: &Map<String, Value>) -> Result<(), String> {
        let derived = derived(self.tool);
        let properties = derived.schema.get("properties").and_then(Value::as_object);
        let property = |name: &str| properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        for key in args.keys() {
            if !derived.names.contains(&key.as_str()) {
                return Err(format!(
                    "unknown argument `{key}` for {}; it takes: {}",
                    self.name(),
                    if derived.names.is_empty() {
                        "no arguments".to_owned()
                    } else {
                        derived.names.join(", ")
                    }
                ));
            }
        }
        let required = derived.schema.get("required").and_then(Value::as_array);
        for name in derived.names {
            let schema = property(name);
            match args.get(*name) {
                None | Some(Value::Null) if required.is_some_and(|r| r.iter().any(|n| n == name)) => {
                    let about = schema.get("description").and_then(Value::as_str).unwrap_or_default();
                    return Err(format!("missing required argument `{name}` ({about})"));
                }
                None | Some(Value::Null) => {}
                Some(value) => check_value(name, schema, value)?,
            }
        }
        Ok(())
    }
}

/// Checks one argument against its property schema: the kinds our argument types
/// use (string, integer, boolean, list of strings) and their bounds. A string's
/// bound is in bytes, stricter than the schema's characters.
fn check_value(name: &str, schema: &Value, v: &Value) -> Result<(), String> {
    let bound = |key: &str| schema.get(key).and_then(Value::as_i64);
    let len = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => match v.as_str() {
            Some(s) => match bound("maxLength") {
                Some(max) if len(s.len()) > max => Err(format!("`{name}` is {} bytes; at most {max} allowed", s.len())),
                _ => Ok(()),
            },
            None => Err(format!("`{name}` must be a string")),
        },
        Some("integer") => match v.as_i64() {
            Some(n) => {
                let (min, max) = (
                    bound("minimum").unwrap_or(i64::MIN),
                    bound("maximum").unwrap_or(i64::MAX),
                );
                if (min..=max).contains(&n) {
                    Ok(())
                } else {
                    Err(format!("`{name}` is {n}; it must be between {min} and {max}"))
                }
            }
            None => Err(format!("`{name}` must be an integer")),
        },
        Some("boolean") => v
            .is_boolean()
            .then_some(())
            .ok_or_else(|| format!("`{name}` must be true or false")),
        Some("array") => match v.as_array() {
            Some(items) if bound("maxItems").is_some_and(|max| len(items.len()) > max) => Err(format!(
                "`{name}` has {} items; at most {} allowed",
                items.len(),
                bound("maxItems").unwrap_or_default()
            )),
            Some(items) if items.iter().all(Value::is_string) => Ok(()),
            _ => Err(format!("`{name}` must be a list of strings")),
        },
        // Kinds no argument type uses yet: decoding into the type checks them.
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_existing_kennys_argument_names_are_accepted() {
        let norm = |tool: &str, v: Value| {
            let mut args = v.as_object().unwrap().clone();
            find(tool)
                .unwrap()
                .normalize_args(&mut args)
                .map(|()| Value::Object(args))
        };
        assert_eq!(
            norm("fs_search", json!({"root": "/srv", "pattern": "*.log"})),
            Ok(json!({"path": "/srv", "pattern": "*.log"}))
        );
        assert_eq!(
            norm("diag_services", json!({"filter": "ssh"})),
            Ok(json!({"name": "ssh"}))
        );
        assert_eq!(norm("diag_eventlog", json!({"count": 5})), Ok(json!({"limit": 5})));
        assert_eq!(
            norm("net_adapter_reset", json!({"name": "eth0"})),
            Ok(json!({"adapter": "eth0"}))
        );
        assert_eq!(
            norm("winget_update", json!({})),
            Ok(json!({})),
            "an empty call upgrades nothing"
        );
        assert_eq!(
            norm("winget_update", json!({"id": "Git.Git"})),
            Ok(json!({"id": "Git.Git"}))
        );
        // Ours stay as they are; the same value twice is fine; two values are refused.
        assert_eq!(
            norm("fs_search", json!({"path": "/srv", "root": "/srv"})),
            Ok(json!({"path": "/srv"}))
        );
        let err = norm("fs_search", json!({"path": "/srv", "root": "/etc"})).unwrap_err();
        assert!(err.contains("`root` and `path`"), "{err}");
        // `name` is ours on diag_services, not an alias there.
        assert_eq!(
            norm("diag_services", json!({"name": "cron"})),
            Ok(json!({"name": "cron"}))
        );
    }

    #[test]
    fn every_tool_has_one_catalog_entry() {
        assert_eq!(TOOLS.len(), Tool::ALL.len());
        for (i, tool) in Tool::ALL.iter().enumerate() {
            assert_eq!(TOOLS[i].tool, *tool, "TOOLS[{i}] is out of order");
            assert_eq!(Tool::from_name(tool.name()), Some(*tool));
            assert_eq!(find(tool.name()).map(|s| s.tool), Some(*tool));
        }
        assert_eq!(find("no_such_tool").map(|s| s.tool), None);
    }

    #[test]
    fn names_are_unique_and_schemas_require_agent_id() {
        let mut names: Vec<_> = TOOLS.iter().map(|t| t.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len());
        for tool in TOOLS {
            let schema = tool.mcp_input_schema();
            assert_eq!(schema["required"][0], AGENT_ID_ARG, "{}", tool.name());
            assert!(tool.args_schema()["properties"].get(AGENT_ID_ARG).is_none());
            assert!(!tool.platforms.is_empty());
        }
    }

    /// Fills every required argument with a value of its kind, the way a caller
    /// reading only the schema would.
    fn minimal_args(spec: &ToolSpec) -> Map<String, Value> {
        let schema = spec.args_schema();
        let mut args = Map::new();
        for name in schema["required"].as_array().unwrap() {
            let name = name.as_str().unwrap();
            let prop = &schema["properties"][name];
            let value = match prop["type"].as_str().unwrap() {
                "string" => json!("x"),
                "integer" => prop["minimum"].clone(),
                "boolean" => json!(true),
                "array" => json!(["example.com"]),
                other => panic!("{}: no sample for {other}", spec.name()),
            };
            args.insert(name.to_owned(), value);
        }
        args
    }

    #[test]
    fn every_tools_arguments_decode_into_its_type() {
        for spec in TOOLS {
            let schema = spec.args_schema();
            let mut listed: Vec<&str> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut names = spec.arg_names().to_vec();
            listed.sort_unstable();
            names.sort_unstable();
            assert_eq!(listed, names, "{}: schema and type disagree", spec.name());
            assert_eq!(schema["additionalProperties"], json!(false), "{}", spec.name());

            let args = minimal_args(spec);
            assert_eq!(spec.validate_args(&args), Ok(()), "{}", spec.name());
            if spec.args_built_by_server() {
                // The agent receives a signed order instead, which the caller's
                // arguments are not.
                assert!(ToolCall::decode(spec.tool, &args).is_err());
                continue;
            }
            let call = ToolCall::decode(spec.tool, &args).unwrap();
            assert_eq!(call.tool(), spec.tool);
            let mut extra = args.clone();
            extra.insert("surprise".into(), json!(1));
            let err = ToolCall::decode(spec.tool, &extra).unwrap_err().to_string();
            assert!(err.contains("surprise"), "{}: {err}", spec.name());
        }
    }

    #[test]
    fn typed_fields_carry_the_values_given() {
        let args = json!({"path": "/var/log", "offset": 10, "max_bytes": 4096});
        let call = ToolCall::decode(Tool::FsRead, args.as_object().unwrap()).unwrap();
        assert_eq!(
            call,
            ToolCall::FsRead(args::FsReadArgs {
                path: "/var/log".into(),
                offset: Some(10),
                max_bytes: Some(4096),
            })
        );
        // null is the same as leaving an optional argument out, on both sides.
        let args = json!({"path": "/", "offset": null});
        assert_eq!(
            find("fs_read").unwrap().validate_args(args.as_object().unwrap()),
            Ok(())
        );
        let ToolCall::FsRead(read) = ToolCall::decode(Tool::FsRead, args.as_object().unwrap()).unwrap() else {
            panic!("decoded as another tool");
        };
        assert_eq!(read.offset, None);
    }

    #[test]
    fn validation_names_the_problem() {
        let shell = find("shell_exec").unwrap();
        let check = |args: Value, expect: Option<&str>| {
            let got = shell.validate_args(args.as_object().unwrap());
            match expect {
                None => assert_eq!(got, Ok(()), "{args}"),
                Some(needle) => {
                    let err = got.unwrap_err();
                    assert!(err.contains(needle), "{args}: {err}");
                }
            }
        };
        check(json!({"command": "true"}), None);
        check(json!({"command": "true", "timeout_s": 5}), None);
        check(json!({}), Some("missing required argument `command`"));
        check(json!({"command": 5}), Some("must be a string"));
        check(json!({"command": "x", "timeout_s": 0}), Some("between 1 and 3600"));
        check(json!({"command": "x", "cwd": "/"}), Some("unknown argument `cwd`"));
        let tel = find("telemetry_collect").unwrap();
        assert!(
            tel.validate_args(json!({"sections": ["disk", 1]}).as_object().unwrap())
                .is_err()
        );
    }
}
