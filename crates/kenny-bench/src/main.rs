//! `kenny-bench`: measures what `docs/benchmarks.md` reports, against the real
//! `kenny-server` binary on loopback.
//!
//! - `calls`: forwarded-call latency and throughput through the whole path (MCP HTTP
//!   request → server → real `kenny-agent` → back) at several client concurrencies,
//!   all clients sharing one PAT; the agent's work is a 16-byte `fs_read`, or with
//!   `--workload shell-exec` an `echo` through `sh -c` (guard parse, sandboxed child).
//! - `fleet`: server memory with N simulated agents connected (real mutual-auth
//!   handshakes over loopback), and `list_agents` latency at that fleet size.
//! - `storm`: a server restart met by N simulated agents reconnecting at once; the
//!   time until the server lists all of them online again.
//! - `cluster`: two replicas on one PostgreSQL and one NATS: forwarded calls entering
//!   at the replica that holds the agent against the other one, and a replica restart
//!   met by N simulated agents, until the other replica lists them online.
//! - `health`: snapshot ingest rate, `list_agents` and `fleet_overview` latency and
//!   response size with N simulated agents that each pushed a snapshot; with
//!   `--storage-pcs`, the database size per PC after a simulated month.
//! - `proofs`: what signed results cost per call on each side (digests, signature,
//!   check), by answer size, in this process.

mod cluster;
mod fleet;
mod footprint;
mod harness;
mod health;
mod proofs;
mod stats;
mod storm;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "kenny-bench")]
struct Cli {
    /// Directory holding kenny-server and kenny-agent (default: next to this binary).
    #[arg(long, global = true)]
    bin_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Forwarded-call latency and throughput.
    Calls {
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        concurrency: Vec<usize>,
        /// Measured seconds per concurrency level (after one second of warm-up).
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// What each call asks the agent to do.
        #[arg(long, value_enum, default_value = "fs-read")]
        workload: harness::Workload,
    },
    /// The agent's footprint: binary size, idle memory and CPU, telemetry time.
    Agent {
        /// Seconds to watch the idle agent's CPU use.
        #[arg(long, default_value_t = 60)]
        idle_seconds: u64,
        /// Full telemetry collections to time.
        #[arg(long, default_value_t = 10)]
        collections: usize,
    },
    /// Server memory and list_agents latency with simulated agents connected.
    Fleet {
        #[arg(long, value_delimiter = ',', default_value = "1,1000,10000")]
        agents: Vec<usize>,
    },
    /// A server restart met by its whole fleet: how long until every agent is back.
    Storm {
        #[arg(long, default_value_t = 10_000)]
        agents: usize,
        /// Handshakes in flight at once (agents reconnecting together).
        #[arg(long, default_value_t = 1000)]
        parallel: usize,
        /// Restarts to time.
        #[arg(long, default_value_t = 3)]
        restarts: usize,
    },
    /// Two replicas: forwarded calls through one replica and across (one NATS hop), and
    /// a replica restart met by its agents.
    Cluster {
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        concurrency: Vec<usize>,
        /// Measured seconds per concurrency level and path.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Simulated agents on the replica that restarts.
        #[arg(long, default_value_t = 10_000)]
        agents: usize,
        /// Handshakes in flight at once.
        #[arg(long, default_value_t = 1000)]
        parallel: usize,
    },
    /// What signed results cost per call, agent and server side, by answer size.
    Proofs {
        /// Rounds for the smallest answer (fewer for bigger ones).
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
    },
    /// Snapshot ingest and the health tools at fleet sizes; database size per PC.
    Health {
        #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
        agents: Vec<usize>,
        /// Instead: simulate this many PCs' snapshots for `--storage-days` and report
        /// the database size per PC.
        #[arg(long)]
        storage_pcs: Option<usize>,
        #[arg(long, default_value_t = 30)]
        storage_days: i64,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let bin_dir = match cli.bin_dir {
        Some(d) => d,
        None => std::env::current_exe()?.parent().map(PathBuf::from).unwrap_or_default(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.command {
            Command::Calls {
                concurrency,
                seconds,
                workload,
            } => harness::calls(&bin_dir, &concurrency, Duration::from_secs(seconds), workload).await,
            Command::Fleet { agents } => fleet::run(&bin_dir, &agents).await,
            Command::Storm {
                agents,
                parallel,
                restarts,
            } => storm::run(&bin_dir, agents, parallel, restarts).await,
            Command::Cluster {
                concurrency,
                seconds,
                agents,
                parallel,
            } => cluster::run(&bin_dir, &concurrency, Duration::from_secs(seconds), agents, parallel).await,
            Command::Proofs { iterations } => proofs::run(iterations),
            Command::Health {
                agents,
                storage_pcs,
                storage_days,
            } => match storage_pcs {
                Some(pcs) => health::storage(pcs, storage_days),
                None => health::run(&bin_dir, &agents).await,
            },
            Command::Agent {
                idle_seconds,
                collections,
            } => footprint::run(&bin_dir, Duration::from_secs(idle_seconds), collections).await,
        }
    })
}
