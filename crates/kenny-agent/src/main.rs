//! `kenny-agent`: parse the command line and run the agent until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use kenny_agent::{AgentConfig, AuthMode};
use kenny_proto::frame::Secret;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "kenny-agent",
    version,
    about = "kenny agent: runs a kenny server's tool calls on this PC"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Connect to the server and serve tool calls.
    Run(RunArgs),
    /// Windows: how the service manager starts the agent (`install` sets this up).
    Service(RunArgs),
    /// For the person at this PC: turn remote control off (only read-only tools keep
    /// working) or back on, or show which it is.
    RemoteControl {
        #[arg(value_enum)]
        state: SwitchState,
        /// The switch directory (an installed agent's is found without this).
        #[arg(long, env = "KENNY_SWITCH_DIR")]
        switch_dir: Option<PathBuf>,
        /// The agent's state directory, for an agent run by hand with its own --state-dir.
        #[arg(long, env = "KENNY_STATE_DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Install this agent as a system service (systemd on Linux, a Windows service)
    /// that starts at boot and restarts on failure, with its settings in a private file.
    Install(InstallArgs),
    /// Stop and remove the service and the installed binary.
    Uninstall {
        /// Also remove the settings file and the agent's key (its identity).
        #[arg(long)]
        purge: bool,
        /// Linux: the staging root the agent was installed under (default /).
        #[arg(long)]
        root: Option<PathBuf>,
        /// Only remove files; do not ask the service manager to stop anything.
        #[arg(long)]
        no_stop: bool,
    },
}

#[derive(clap::Args)]
struct InstallArgs {
    /// The server's URL, e.g. https://kenny.example.com.
    #[arg(long)]
    server: String,
    /// This PC's agent id, as registered with `kenny-server agent add`.
    #[arg(long)]
    agent_id: String,
    /// Mutual auth: the server's Ed25519 public key (base64).
    #[arg(long, required_unless_present = "token")]
    server_pubkey: Option<String>,
    /// Mutual auth: the enrollment token from `kenny-server agent add`. On the command
    /// line every local user can read it while this runs: prefer --enroll-token-file
    /// or the KENNY_ENROLL_TOKEN environment variable.
    #[arg(long, env = "KENNY_ENROLL_TOKEN", requires = "server_pubkey")]
    enroll_token: Option<String>,
    /// Mutual auth: a file holding the enrollment token.
    #[arg(long, conflicts_with = "enroll_token", requires = "server_pubkey")]
    enroll_token_file: Option<PathBuf>,
    /// Legacy auth: the per-agent token.
    #[arg(long, conflicts_with_all = ["server_pubkey", "enroll_token", "enroll_token_file"])]
    token: Option<String>,
    /// Allow plain http:// to a server that is not on this machine.
    #[arg(long)]
    allow_plaintext: bool,
    /// Linux: install under this directory instead of / (for packaging; implies nothing
    /// is started).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Write the files but do not register or start the service.
    #[arg(long)]
    no_start: bool,
}

const DEFAULT_STATE_DIR: &str = "kenny-agent-state";

#[derive(Clone, Copy, clap::ValueEnum)]
enum SwitchState {
    On,
    Off,
    Status,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The server's URL, e.g. http://127.0.0.1:7420.
    #[arg(long, env = "KENNY_SERVER")]
    server: String,
    /// This PC's agent id, as registered with `kenny-server agent add`.
    #[arg(long, env = "KENNY_AGENT_ID")]
    agent_id: String,
    /// Legacy auth: the per-agent token.
    #[arg(long, env = "KENNY_TOKEN", conflicts_with_all = ["server_pubkey", "enroll_token", "enroll_token_file"])]
    token: Option<String>,
    /// Mutual auth: the server's Ed25519 public key (base64) to pin.
    #[arg(long, env = "KENNY_SERVER_PUBKEY")]
    server_pubkey: Option<String>,
    /// Mutual auth: the enrollment token, needed until this agent's key is enrolled. On
    /// the command line every local user can read it (`ps`, /proc): prefer
    /// --enroll-token-file or the KENNY_ENROLL_TOKEN environment variable.
    #[arg(long, env = "KENNY_ENROLL_TOKEN", requires = "server_pubkey")]
    enroll_token: Option<String>,
    /// Mutual auth: a file holding the enrollment token (keep it owner-only).
    #[arg(
        long,
        env = "KENNY_ENROLL_TOKEN_FILE",
        conflicts_with = "enroll_token",
        requires = "server_pubkey"
    )]
    enroll_token_file: Option<PathBuf>,
    /// Where the agent keeps its key and enrollment state.
    #[arg(long, env = "KENNY_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// Where the remote-control switch lives (default: the state directory).
    #[arg(long, env = "KENNY_SWITCH_DIR")]
    switch_dir: Option<PathBuf>,
    /// Seconds between heartbeats.
    #[arg(long, env = "KENNY_HEARTBEAT_SECS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    heartbeat_secs: u64,
    /// Longest wait between reconnection attempts, in seconds.
    #[arg(long, env = "KENNY_MAX_BACKOFF_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    max_backoff_secs: u64,
    /// Allow plain http:// to a server that is not on this machine (no TLS: only on a
    /// network you trust).
    #[arg(long, env = "KENNY_ALLOW_PLAINTEXT")]
    allow_plaintext: bool,
    /// A settings file of KENNY_* lines (as `install` writes); flags and environment
    /// variables take precedence over it.
    #[arg(long, env = "KENNY_CONFIG")]
    config: Option<PathBuf>,
    /// Seconds between telemetry snapshots pushed to the server.
    #[arg(long, env = "KENNY_TELEMETRY_INTERVAL_SECS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(10..=86400))]
    telemetry_interval_secs: u64,
    /// Seconds a new build installed by agent_update has to log in to the server
    /// before the previous build is put back.
    #[arg(long, env = "KENNY_UPDATE_TRIAL_SECS", default_value_t = 90, value_parser = clap::value_parser!(u64).range(5..=600))]
    update_trial_secs: u64,
}

fn main() -> anyhow::Result<()> {
    limit_malloc_arenas();
    load_config_file()?;
    let matches = Cli::command().get_matches();
    let exposed = secrets_on_command_line(&matches);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    forget_secret_env();
    let (args, as_service) = match cli.command {
        Command::Run(args) => (args, false),
        Command::Service(args) => (args, true),
        Command::RemoteControl {
            state,
            switch_dir,
            state_dir,
        } => {
            let dir = switch_dir
                .or(state_dir)
                .or_else(kenny_agent::switch::KillSwitch::installed_dir)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
            return remote_control(state, &dir);
        }
        Command::Install(args) => {
            for flag in exposed {
                eprintln!("warning: {}", exposed_warning(flag));
            }
            return install(args);
        }
        Command::Uninstall { purge, root, no_stop } => {
            let plan = kenny_agent::install::plan_here(root.as_deref(), &placeholder_settings())?;
            return kenny_agent::install::uninstall(&plan, !no_stop && root.is_none(), purge);
        }
    };
    let settings_file = args.config.clone();
    kenny_host::init_logging("info");
    for flag in exposed {
        tracing::warn!("{}", exposed_warning(flag));
    }
    let enroll_token = match (args.enroll_token, &args.enroll_token_file) {
        (Some(token), _) => Some(token),
        (None, Some(path)) => Some(read_token_file(path)?),
        (None, None) => None,
    };
    let auth = match (args.token, args.server_pubkey) {
        (Some(token), _) => AuthMode::Token(Secret(token)),
        (None, Some(server_pubkey)) => AuthMode::Mutual {
            server_pubkey,
            enroll_token: enroll_token.map(Secret),
        },
        (None, None) => {
            anyhow::bail!("pass --server-pubkey (and --enroll-token the first time), or --token for legacy auth")
        }
    };
    let mut config = AgentConfig::new(args.server, args.agent_id, auth, args.state_dir);
    config.heartbeat = Duration::from_secs(args.heartbeat_secs);
    config.max_backoff = Duration::from_secs(args.max_backoff_secs);
    config.telemetry_interval = Duration::from_secs(args.telemetry_interval_secs);
    config.update_trial = Duration::from_secs(args.update_trial_secs);
    config.allow_plaintext = args.allow_plaintext;
    config.switch_dir = args.switch_dir;
    config.settings_file = settings_file;
    // The one place the agent reads where its tools should act from the environment.
    config.tools = kenny_agent::tools::ToolContext::from_env();
    if as_service {
        return run_as_service(config);
    }

    tokio::runtime::Runtime::new()?.block_on(async move {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            kenny_host::shutdown_signal().await;
            tracing::info!("stopping");
            stop.cancel();
        });
        kenny_agent::run(config, shutdown).await
    })
}

#[cfg(windows)]
fn run_as_service(config: AgentConfig) -> anyhow::Result<()> {
    kenny_agent::winservice::run_as_service(config)
}

#[cfg(not(windows))]
fn run_as_service(_config: AgentConfig) -> anyhow::Result<()> {
    anyhow::bail!("`service` is how the Windows service manager starts the agent; on this OS use `kenny-agent run`")
}

fn remote_control(state: SwitchState, dir: &std::path::Path) -> anyhow::Result<()> {
    let switch = kenny_agent::switch::KillSwitch::new(dir);
    match state {
        SwitchState::Off => switch.set_off(true)?,
        SwitchState::On => switch.set_off(false)?,
        SwitchState::Status => {}
    }
    println!(
        "remote control is {}",
        if switch.is_off() {
            "off: only read-only tools work"
        } else {
            "on"
        }
    );
    Ok(())
}

/// `run --config FILE` (or KENNY_CONFIG): the file's KENNY_* settings become environment
/// variables before the command line is parsed, so flags and real environment variables
/// still win and every setting has one source of defaults (clap's `env`).
fn load_config_file() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    let from_flag = argv.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--config=")
            .map(str::to_owned)
            .or_else(|| (a == "--config").then(|| argv.get(i + 1).cloned()).flatten())
    });
    let Some(path) = from_flag.or_else(|| std::env::var("KENNY_CONFIG").ok()) else {
        return Ok(());
    };
    let text =
        std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("cannot read the settings file {path}: {e}"))?;
    let vars = kenny_agent::service::parse_config(&text).map_err(|e| anyhow::anyhow!("settings file {path}: {e}"))?;
    for (key, value) in vars {
        if std::env::var_os(&key).is_none() {
            // SAFETY: called first thing in main, before any other thread exists.
            unsafe { std::env::set_var(key, value) };
        }
    }
    Ok(())
}

/// Secret flags whose value was typed on the command line (not taken from the
/// environment or a file), for a warning: /proc/<pid>/cmdline is world-readable.
fn secrets_on_command_line(matches: &ArgMatches) -> Vec<&'static str> {
    // Only these commands take tokens (asking another about an id it lacks panics).
    let Some(("run" | "service" | "install", sub)) = matches.subcommand() else {
        return Vec::new();
    };
    ["enroll_token", "token"]
        .into_iter()
        .filter(|id| sub.value_source(id) == Some(ValueSource::CommandLine))
        .collect()
}

fn exposed_warning(id: &str) -> String {
    let (flag, instead) = match id {
        "enroll_token" => ("--enroll-token", "--enroll-token-file or KENNY_ENROLL_TOKEN"),
        _ => ("--token", "KENNY_TOKEN or a settings file (--config)"),
    };
    format!(
        "{flag} was given on the command line, where every local user can read it while this runs; use {instead} instead"
    )
}

/// A token kept in a file: its first line, trimmed. A file others may read is used,
/// with a warning, since refusing would not make the token secret again.
fn read_token_file(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the enrollment token from {}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_owned();
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        anyhow::bail!(
            "{} must hold the enrollment token (one word, from `kenny-server agent add`) on its first line",
            path.display()
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            eprintln!(
                "warning: {} can be read by other users; make it owner-only (chmod 600)",
                path.display()
            );
        }
    }
    Ok(token)
}

fn install(args: InstallArgs) -> anyhow::Result<()> {
    let enroll_token = match (args.enroll_token, &args.enroll_token_file) {
        (Some(token), _) => Some(token),
        (None, Some(path)) => Some(read_token_file(path)?),
        (None, None) => None,
    };
    let settings = kenny_agent::service::InstallSettings {
        server: args.server.trim_end_matches('/').to_owned(),
        agent_id: args.agent_id,
        server_pubkey: args.server_pubkey,
        enroll_token,
        token: args.token,
        allow_plaintext: args.allow_plaintext,
    };
    // Refuse settings the agent would refuse at its first start, while someone is watching.
    let check = AgentConfig::new(
        settings.server.clone(),
        settings.agent_id.clone(),
        AuthMode::Token(Secret(String::new())),
        PathBuf::new(),
    );
    let mut check = check;
    check.allow_plaintext = settings.allow_plaintext;
    check.ws_url().map_err(|e| anyhow::anyhow!(e))?;
    let plan = kenny_agent::install::plan_here(args.root.as_deref(), &settings)?;
    kenny_agent::install::install(&plan, !args.no_start && args.root.is_none())
}

/// Uninstalling needs only the paths, which do not depend on the settings.
fn placeholder_settings() -> kenny_agent::service::InstallSettings {
    kenny_agent::service::InstallSettings {
        server: "https://placeholder".into(),
        agent_id: "placeholder".into(),
        server_pubkey: None,
        enroll_token: None,
        token: None,
        allow_plaintext: false,
    }
}

/// glibc gives every thread that allocates its own arena and keeps what it freed; the
/// agent's bursts of parallel work (telemetry runs 16 collectors at once) would leave
/// each burst's peak resident for good. Four arenas keep that small without making
/// concurrent calls queue for the allocator (two cost a quarter of the call throughput;
/// docs/benchmarks.md).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called first in main, before any thread exists or allocates.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

/// Once parsed, the agent's secrets leave the environment: every program the agent
/// starts (shell commands, package scripts, installers) would otherwise inherit them.
fn forget_secret_env() {
    for key in ["KENNY_TOKEN", "KENNY_ENROLL_TOKEN"] {
        // SAFETY: called in main before the runtime or any other thread starts.
        unsafe { std::env::remove_var(key) };
    }
}
