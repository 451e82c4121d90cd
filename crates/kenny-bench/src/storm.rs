//! A server restart met by its whole fleet: every simulated agent reconnects (the full
//! mutual Ed25519 handshake) as soon as the new process listens, `--parallel` at a
//! time, and the clock runs until the server itself lists every agent online.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ed25519_dalek::SigningKey;
use kenny_server::store::Store;
use kenny_testkit::{Mcp, TestAgent};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::fleet::{connect, register_agents, server_public_key};
use crate::harness::{ServerProcess, provision, start_server, start_server_at};
use crate::stats::{ms, summarize};

/// How long the whole fleet may take to come back before the run gives up.
const GIVE_UP: Duration = Duration::from_secs(120);

pub(crate) async fn run(bin_dir: &Path, agents: usize, parallel: usize, restarts: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("server");
    let token = provision(&data_dir)?;
    let keys = {
        let store = Store::open(&data_dir)?;
        register_agents(&store, 0, agents)?
    };
    let server_pub = server_public_key(&data_dir)?;
    let mut server = start_server(bin_dir, &data_dir, token.clone()).await?;
    let addr = server
        .base
        .strip_prefix("http://")
        .context("the bench server speaks plain HTTP")?
        .to_owned();
    let ws_url = format!("ws://{addr}/agent/ws");

    println!("{agents} agents, {parallel} handshakes in flight at most; times from the moment the server listens");
    println!();
    println!(
        "| run | server start ms | all handshakes sent s | all {agents} listed online s | agents/s | handshake p50 ms | p99 ms | max ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut held = Vec::new();
    for run in 0..=restarts {
        let start_ms = if run == 0 {
            None
        } else {
            // The old process dies as a crash or an OOM kill would end it; its agents see
            // their connections drop and dial again.
            server.child.kill().await?;
            drop(std::mem::take(&mut held));
            let started = Instant::now();
            server = start_server_at(bin_dir, &data_dir, token.clone(), &addr, &[]).await?;
            Some(started.elapsed())
        };
        let began = Instant::now();
        let (agents_back, mut latencies) = reconnect_all(&ws_url, &keys, parallel, server_pub).await?;
        let sent = began.elapsed();
        held = agents_back;
        let listed = wait_all_online(&server, agents, began).await?;
        let s = summarize(&mut latencies);
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.0} | {} | {} | {} |",
            if run == 0 {
                "first start".to_owned()
            } else {
                format!("restart {run}")
            },
            start_ms.map_or("-".to_owned(), |d| format!("{:.0}", d.as_secs_f64() * 1000.0)),
            sent.as_secs_f64(),
            listed.as_secs_f64(),
            agents as f64 / listed.as_secs_f64(),
            ms(s.p50),
            ms(s.p99),
            ms(s.max),
        );
    }
    drop(held);
    Ok(())
}

/// Every agent dials at once, at most `parallel` handshakes in flight; returns the
/// connected agents and each handshake's time (connect to proof sent).
pub(crate) async fn reconnect_all(
    ws_url: &str,
    keys: &[SigningKey],
    parallel: usize,
    server_pub: ed25519_dalek::VerifyingKey,
) -> anyhow::Result<(Vec<TestAgent>, Vec<Duration>)> {
    let gate = Arc::new(Semaphore::new(parallel.max(1)));
    let tasks: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let (gate, url, key) = (gate.clone(), ws_url.to_owned(), key.clone());
            tokio::spawn(async move {
                let _slot = gate.acquire_owned().await?;
                let t = Instant::now();
                let agent = connect(url, format!("sim-{i:05}"), key, server_pub).await?;
                anyhow::Ok((agent, t.elapsed()))
            })
        })
        .collect();
    let mut agents = Vec::with_capacity(keys.len());
    let mut latencies = Vec::with_capacity(keys.len());
    for task in tasks {
        let (agent, took) = task.await??;
        agents.push(agent);
        latencies.push(took);
    }
    Ok((agents, latencies))
}

/// Polls `list_agents` until the server lists `agents` online; the time since `began`.
pub(crate) async fn wait_all_online(server: &ServerProcess, agents: usize, began: Instant) -> anyhow::Result<Duration> {
    let mcp = Mcp::with_client(reqwest::Client::new(), &server.base, &server.token);
    wait_listed_online(&mcp, agents, began).await
}

/// Polls `list_agents` through `mcp` until it lists `agents` online.
pub(crate) async fn wait_listed_online(mcp: &Mcp, agents: usize, began: Instant) -> anyhow::Result<Duration> {
    mcp.initialize().await?;
    loop {
        let online = mcp.call("list_agents", json!({"online": true, "limit": 1})).await?["total"]
            .as_u64()
            .unwrap_or(0) as usize;
        if online == agents {
            return Ok(began.elapsed());
        }
        if began.elapsed() > GIVE_UP {
            bail!("{online} of {agents} agents online after {}s", GIVE_UP.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
