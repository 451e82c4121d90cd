//! Simulated agents: real mutual-auth handshakes over loopback, then idle (answering
//! the server's pings), to measure what each connected agent costs the server.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ed25519_dalek::SigningKey;
use futures_util::{SinkExt, StreamExt};
use kenny_proto::auth;
use kenny_proto::frame::{Auth, Frame, Limits, Register, decode, encode};
use kenny_server::store::Store;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::harness::{provision, start_server};
use crate::mcp_client::Mcp;
use crate::stats::{ms, summarize};

const CONNECT_PARALLELISM: usize = 200;

pub async fn run(bin_dir: &Path, levels: &[usize]) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("server");
    let token = provision(&data_dir)?;
    let server = start_server(bin_dir, &data_dir, token).await?;
    // Agents are registered level by level while the server runs (as `agent add`
    // would), so list_agents at level n lists exactly n agents.
    let store = Store::open(&data_dir)?;
    let mut keys = Vec::new();
    let ws_url = format!("{}/agent/ws", server.base.replacen("http://", "ws://", 1));
    let server_pub = auth::parse_public_key(&auth::encode_b64(
        kenny_server::secrets::load_or_create_server_key(&data_dir)?
            .verifying_key()
            .as_bytes(),
    ))?;
    let mcp = Mcp::new(reqwest::Client::new(), &server.base, &server.token);
    mcp.initialize().await?;
    // Warm up every path an agent takes (handshake, registry, listing, disconnect) so
    // the baseline includes the one-off costs: runtime threads, SQLite cache.
    keys.extend(register_agents(&store, 0, 1)?);
    let warm = connect(ws_url.clone(), "sim-00000".into(), keys[0].clone(), server_pub).await?;
    mcp.call("list_agents", json!({})).await?;
    warm.abort();
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
        let started = Instant::now();
        while held.len() < n {
            let batch: Vec<_> = (held.len()..n.min(held.len() + CONNECT_PARALLELISM))
                .map(|i| {
                    tokio::spawn(connect(
                        ws_url.clone(),
                        format!("sim-{i:05}"),
                        keys[i].clone(),
                        server_pub,
                    ))
                })
                .collect();
            for b in batch {
                held.push(b.await??);
            }
        }
        eprintln!("{n} agents connected in {:.1}s", started.elapsed().as_secs_f64());
        settle().await;
        let online = mcp.call("list_agents", json!({})).await?["agents"]
            .as_array()
            .map(|a| a.iter().filter(|x| x["online"] == true).count())
            .unwrap_or(0);
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

/// Lets allocations from connecting settle before reading RSS.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

fn register_agents(store: &Store, from: usize, to: usize) -> anyhow::Result<Vec<SigningKey>> {
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

/// One simulated agent: handshake, then a task that answers pings until dropped.
async fn connect(
    url: String,
    agent_id: String,
    key: SigningKey,
    server_pub: ed25519_dalek::VerifyingKey,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let config = WebSocketConfig::default().read_buffer_size(4096).write_buffer_size(0);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(&url, Some(config), true)
        .await
        .context("connect")?;
    let client_nonce = kenny_server::secrets::random_nonce();
    let register = Frame::Register(Register {
        agent_id: agent_id.clone(),
        token: None,
        protocol: Some(kenny_proto::MUTUAL_AUTH_PROTOCOL.into()),
        client_nonce: Some(auth::encode_b64(&client_nonce)),
        meta: Some(kenny_proto::frame::AgentMeta {
            hostname: agent_id.clone(),
            os: "linux".into(),
            version: "bench".into(),
            arch: Some("x86_64".into()),
            channel: None,
            dialect: Some(kenny_proto::dialect::CURRENT.into()),
        }),
    });
    ws.send(Message::text(encode(&register))).await?;
    let Some(Ok(Message::Text(text))) = ws.next().await else {
        bail!("{agent_id}: no challenge")
    };
    let Frame::Challenge(ch) = decode(text.as_str(), Limits::HANDSHAKE)? else {
        bail!("{agent_id}: expected a challenge")
    };
    let server_nonce: [u8; 32] = auth::decode_fixed("server_nonce", &ch.server_nonce)?;
    let transcript = auth::transcript(&agent_id, &client_nonce, &server_nonce);
    auth::verify(&server_pub, &transcript, &ch.server_sig)?;
    ws.send(Message::text(encode(&Frame::Auth(Auth {
        agent_sig: auth::sign(&key, &transcript),
    }))))
    .await?;
    Ok(tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            if let Message::Text(t) = msg
                && t.as_str().contains("\"ping\"")
                && ws.send(Message::text(encode(&Frame::Pong))).await.is_err()
            {
                return;
            }
        }
    }))
}
