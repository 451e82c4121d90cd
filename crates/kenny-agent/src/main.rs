//! `kenny-agent`: parse the command line and run the agent until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
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
    /// For the person at this PC: turn remote control off (only read-only tools keep
    /// working) or back on, or show which it is.
    RemoteControl {
        #[arg(value_enum)]
        state: SwitchState,
        /// The agent's state directory.
        #[arg(long, env = "KENNY_STATE_DIR", default_value = "kenny-agent-state")]
        state_dir: PathBuf,
    },
}

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
    #[arg(long, env = "KENNY_TOKEN", conflicts_with_all = ["server_pubkey", "enroll_token"])]
    token: Option<String>,
    /// Mutual auth: the server's Ed25519 public key (base64) to pin.
    #[arg(long, env = "KENNY_SERVER_PUBKEY")]
    server_pubkey: Option<String>,
    /// Mutual auth: the enrollment token, needed until this agent's key is enrolled.
    #[arg(long, env = "KENNY_ENROLL_TOKEN", requires = "server_pubkey")]
    enroll_token: Option<String>,
    /// Where the agent keeps its key and enrollment state.
    #[arg(long, env = "KENNY_STATE_DIR", default_value = "kenny-agent-state")]
    state_dir: PathBuf,
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
    /// Seconds between telemetry snapshots pushed to the server.
    #[arg(long, env = "KENNY_TELEMETRY_INTERVAL_SECS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(10..=86400))]
    telemetry_interval_secs: u64,
}

fn main() -> anyhow::Result<()> {
    let args = match Cli::parse().command {
        Command::Run(args) => args,
        Command::RemoteControl { state, state_dir } => return remote_control(state, &state_dir),
    };
    kenny_host::init_logging("info");
    let auth = match (args.token, args.server_pubkey) {
        (Some(token), _) => AuthMode::Token(Secret(token)),
        (None, Some(server_pubkey)) => AuthMode::Mutual {
            server_pubkey,
            enroll_token: args.enroll_token.map(Secret),
        },
        (None, None) => {
            anyhow::bail!("pass --server-pubkey (and --enroll-token the first time), or --token for legacy auth")
        }
    };
    let mut config = AgentConfig::new(args.server, args.agent_id, auth, args.state_dir);
    config.heartbeat = Duration::from_secs(args.heartbeat_secs);
    config.max_backoff = Duration::from_secs(args.max_backoff_secs);
    config.telemetry_interval = Duration::from_secs(args.telemetry_interval_secs);
    config.allow_plaintext = args.allow_plaintext;

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

fn remote_control(state: SwitchState, state_dir: &std::path::Path) -> anyhow::Result<()> {
    let switch = kenny_agent::switch::KillSwitch::new(state_dir);
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
