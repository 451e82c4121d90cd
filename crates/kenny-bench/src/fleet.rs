//! Simulated agents: real mutual-auth handshakes over loopback, then idle (answering
//! the server's pings), to measure what each connected agent costs the server.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use ed25519_dalek::SigningKey;
use kenny_proto::auth;
use kenny_server::store::Store;
use kenny_testkit::{AgentOptions, TestAgent};
use serde_json::json;

use crate::harness::{ServerProcess, provision, start_server};
use crate::stats::{ms, summarize};
use kenny_testkit::Mcp;

const CONNECT_PARALLELISM: usize = 200;

/// A real server in a temporary data directory, with what simulated agents need to
/// reach it and an MCP client with a superuser's token.
pub(crate) struct SimulatedFleet {
    pub server: ServerProcess,
    /// The server's database, opened beside it (as the admin CLI does) to register
    /// agents while it runs.
    pub store: Store,
    pub ws_url: String,
    pub server_pub: ed25519_dalek::VerifyingKey,
    pub mcp: Mcp,
    _dir: tempfile::TempDir,
}

impl SimulatedFleet {
    pub(crate) async fn start(bin_dir: &Path) -> anyhow::Result<SimulatedFleet> {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("server");
        let token = provision(&data_dir)?;
        let server = start_server(bin_dir, &data_dir, token).await?;
        let store = Store::open(&data_dir)?;
        let ws_url = format!("{}/agent/ws", server.base.replacen("http://", "ws://", 1));
        let server_pub = server_public_key(&data_dir)?;
        let mcp = Mcp::with_client(reqwest::Client::new(), &server.base, &server.token);
        mcp.initialize().await?;
        Ok(SimulatedFleet {
            server,
            store,
            ws_url,
            server_pub,
            mcp,
            _dir: dir,
        })
    }
}

pub(crate) async fn run(bin_dir: &Path, levels: &[usize]) -> anyhow::Result<()> {
    // Agents are registered level by level while the server runs (as `agent add`
    // would), so list_agents at level n lists exactly n agents.
    let SimulatedFleet {
        server,
        store,
        ws_url,
        server_pub,
        mcp,
        _dir,
    } = SimulatedFleet::start(bin_dir).await?;
    let mut keys = Vec::new();
    // Warm up every path an agent takes (handshake, registry, listing, disconnect) so
    // the baseline includes the one-off costs: runtime threads, SQLite cache.
    keys.extend(register_agents(&store, 0, 1)?);
    let warm = connect(ws_url.clone(), "sim-00000".into(), keys[0].clone(), server_pub).await?;
    mcp.call("list_agents", json!({})).await?;
    drop(warm);
    settle().await;
    let baseline = server.rss_bytes()?;
    println!(
        "server RSS after warm-up, no agent connected: {:.1} MiB",
        baseline as f64 / 1048576.0
    );
    println!();
    println!(
        "| connected agents | server RSS MiB | per agent KiB (vs. baseline) | per agent KiB (vs. previous level) | list_agents p50 ms | list_agents p95 ms |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");

    let mut held = Vec::new();
    let (mut prev_n, mut prev_rss) = (0usize, baseline);
    for &n in levels {
        if keys.len() < n {
            keys.extend(register_agents(&store, keys.len(), n)?);
        }
        held.extend(connect_all(&ws_url, &keys, held.len(), n, server_pub).await?);
        settle().await;
        let online = mcp.call("list_agents", json!({"online": true, "limit": 1})).await?["total"]
            .as_u64()
            .unwrap_or(0) as usize;
        if online != n {
            bail!("{online} agents online, expected {n}");
        }
        let rss = server.rss_bytes()?;
        let mut samples = Vec::new();
        for _ in 0..30 {
            let t = Instant::now();
            mcp.call("list_agents", json!({})).await?;
            samples.push(t.elapsed());
        }
        let s = summarize(&mut samples);
        println!(
            "| {n} | {:.1} | {:.1} | {:.1} | {} | {} |",
            rss as f64 / 1048576.0,
            rss.saturating_sub(baseline) as f64 / 1024.0 / n as f64,
            rss.saturating_sub(prev_rss) as f64 / 1024.0 / (n - prev_n).max(1) as f64,
            ms(s.p50),
            ms(s.p95)
        );
        (prev_n, prev_rss) = (n, rss);
    }
    drop(held);
    Ok(())
}

/// The server's public key, as agents pin it.
pub(crate) fn server_public_key(data_dir: &Path) -> anyhow::Result<ed25519_dalek::VerifyingKey> {
    Ok(auth::parse_public_key(&auth::encode_b64(
        kenny_server::secrets::load_or_create_server_key(data_dir)?
            .verifying_key()
            .as_bytes(),
    ))?)
}

/// Connects simulated agents `from..to` (`keys` registered), a batch at a time.
pub(crate) async fn connect_all(
    ws_url: &str,
    keys: &[SigningKey],
    from: usize,
    to: usize,
    server_pub: ed25519_dalek::VerifyingKey,
) -> anyhow::Result<Vec<TestAgent>> {
    let started = Instant::now();
    let mut held = Vec::with_capacity(to - from);
    let mut next = from;
    while next < to {
        let batch: Vec<_> = (next..to.min(next + CONNECT_PARALLELISM))
            .map(|i| {
                tokio::spawn(connect(
                    ws_url.to_owned(),
                    format!("sim-{i:05}"),
                    keys[i].clone(),
                    server_pub,
                ))
            })
            .collect();
        next += batch.len();
        for b in batch {
            held.push(b.await??);
        }
    }
    eprintln!("{to} agents connected in {:.1}s", started.elapsed().as_secs_f64());
    Ok(held)
}

/// Lets allocations from connecting settle before reading RSS.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

pub(crate) fn register_agents(store: &Store, from: usize, to: usize) -> anyhow::Result<Vec<SigningKey>> {
    let now = "2026-01-01T00:00:00Z";
    (from..to)
        .map(|i| {
            let key = SigningKey::generate(&mut rand::rngs::OsRng);
            let id = format!("sim-{i:05}");
            store.create_agent(&id, "unused", now)?;
            store.enroll_agent(&id, &auth::encode_b64(key.verifying_key().as_bytes()), now)?;
            Ok(key)
        })
        .collect()
}

/// One simulated agent: the test kit's, which logs in with mutual auth and then
/// answers the server's pings until dropped.
pub(crate) async fn connect(
    url: String,
    agent_id: String,
    key: SigningKey,
    server_pub: ed25519_dalek::VerifyingKey,
) -> anyhow::Result<TestAgent> {
    let mut options = AgentOptions::default();
    options.meta.hostname = agent_id.clone();
    options.meta.version = "bench".into();
    TestAgent::connect(&url, &agent_id, &key, &server_pub, options).await
}
