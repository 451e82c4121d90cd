//! `kenny up`: the first command a newcomer runs. Starts a server on 127.0.0.1 with an
//! embedded SQLite data directory, creates the first superuser and a personal access
//! token, starts an agent for this machine, and prints how to connect an MCP client.

mod setup;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "kenny",
    version,
    about = "Run kenny on this machine: server plus a local agent"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the server and a local agent; prints the MCP URL, a token and a client config.
    Up {
        #[arg(long, env = "KENNY_LISTEN", default_value = "127.0.0.1:7420")]
        listen: SocketAddr,
        #[arg(long, env = "KENNY_DATA_DIR", default_value = "kenny-data")]
        data_dir: PathBuf,
        /// Id for this machine's agent (default: its hostname).
        #[arg(long)]
        agent_id: Option<String>,
    },
}

fn main() -> anyhow::Result<()> {
    let Command::Up {
        listen,
        data_dir,
        agent_id,
    } = Cli::parse().command;
    kenny_host::init_logging("warn");
    let agent_id = agent_id.unwrap_or_else(setup::default_agent_id);
    let prepared = setup::prepare(&data_dir, &agent_id)?;
    tokio::runtime::Runtime::new()?.block_on(up(listen, data_dir, prepared))
}

async fn up(listen: SocketAddr, data_dir: PathBuf, prepared: setup::Prepared) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let mut config = kenny_server::ServeConfig::new(listen, data_dir.clone());
    // The dashboard chat turns on with KENNY_ANTHROPIC_API_KEY, as for kenny-server.
    config.chat = kenny_server::chat::ChatSettings::from_env();
    let server = kenny_server::start(config, shutdown.clone()).await?;
    let base = format!("http://{}", server.addr);

    let agent_config = prepared.agent_config(&base, &data_dir);
    let agent = tokio::spawn(kenny_agent::run(agent_config, shutdown.child_token()));
    let online = wait_online(&server, &prepared.agent_id, Duration::from_secs(10)).await;

    print!("{}", setup::banner(&base, &prepared, online));
    kenny_host::shutdown_signal().await;
    println!("stopping kenny");
    shutdown.cancel();
    let _ = agent.await;
    server.finished().await
}

async fn wait_online(server: &kenny_server::RunningServer, agent_id: &str, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if server.state.fleet.registry.get(agent_id).is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
