//! Two replicas sharing one PostgreSQL and one NATS server, both started here on
//! loopback: forwarded calls entering at the replica that holds the agent against
//! calls entering at the other one (one NATS hop each way), and a replica restart met
//! by every agent it held, timed until the other replica lists them all online.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use anyhow::Context;
use kenny_server::admin;
use kenny_server::principal::Role;
use kenny_server::store::Store;
use kenny_testkit::Mcp;
use kenny_testkit::nats::TestNats;
use kenny_testkit::postgres::TestPostgres;

use crate::fleet::register_agents;
use crate::harness::{Workload, level_row, run_level, spawn_agent, start_server_at, wait_online};
use crate::stats::{ms, summarize};
use crate::storm::{reconnect_all, wait_all_online, wait_listed_online};

pub(crate) async fn run(
    bin_dir: &Path,
    levels: &[usize],
    seconds: Duration,
    agents: usize,
    parallel: usize,
) -> anyhow::Result<()> {
    // The test kit's PostgreSQL set-up uses the blocking client, which must not run on
    // this runtime's threads.
    let (postgres, url, nats) = tokio::task::spawn_blocking(|| -> anyhow::Result<_> {
        let postgres = TestPostgres::start()?;
        let url = postgres.database("bench")?;
        Ok((postgres, url, TestNats::start()?))
    })
    .await??;
    let dir = tempfile::tempdir()?;
    let (token, enrollment, keys, server_pub) = {
        let store = Store::open_postgres(&url)?;
        admin::add_user(&store, "bench", Role::Superuser, &[], "bench-password")?;
        let token = admin::create_token(&store, "bench", Some("bench"))?;
        let enrollment = admin::add_agent(&store, dir.path(), "bench-pc")?;
        let keys = register_agents(&store, 0, agents)?;
        let key = kenny_server::server_key::server_key(&store, dir.path())?;
        (token, enrollment, keys, key.verifying_key())
    };
    let nats_url = nats.url();
    let env = [
        ("KENNY_DATABASE_URL", url.as_str()),
        ("KENNY_NATS_URL", nats_url.as_str()),
    ];
    let holder = start_server_at(bin_dir, &dir.path().join("a"), token.clone(), "127.0.0.1:0", &env).await?;
    let mut other = start_server_at(bin_dir, &dir.path().join("b"), token.clone(), "127.0.0.1:0", &env).await?;
    let _agent = spawn_agent(bin_dir, &holder, &enrollment, &dir.path().join("agent"))?;
    let file = dir.path().join("tiny.txt");
    std::fs::write(&file, "sixteen bytes!!\n")?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    for server in [&holder, &other] {
        wait_online(
            &Mcp::with_client(http.clone(), &server.base, &token),
            "bench-pc",
            Duration::from_secs(15),
        )
        .await?;
    }

    let workload = Workload::FsRead;
    let args = workload.args(&file);
    let answered = Arc::new(AtomicU64::new(0));
    println!("A 16-byte fs_read on one real agent, connected to replica A; PostgreSQL and NATS on the same machine.");
    println!();
    println!("| call enters at | concurrent clients | calls | calls/s | p50 ms | p95 ms | p99 ms | max ms | errors |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &c in levels {
        for (label, server) in [("A (holds the agent)", &holder), ("B (one NATS hop)", &other)] {
            let (mut samples, errors, elapsed) =
                run_level(&http, server, workload, &args, c, seconds, &answered).await?;
            println!("| {label} | {c} | {} |", level_row(&mut samples, errors, elapsed));
        }
    }

    // A replica restart: `agents` simulated agents on B, B killed and started again on
    // its port, every agent dialling it at once; the clock stops when A lists them.
    let addr = other.base.strip_prefix("http://").context("plain HTTP")?.to_owned();
    let ws_url = format!("ws://{addr}/agent/ws");
    let (held, _) = reconnect_all(&ws_url, &keys, parallel, server_pub).await?;
    let watcher = Mcp::with_client(http.clone(), &holder.base, &token);
    wait_listed_online(&watcher, agents + 1, Instant::now()).await?;
    other.child.kill().await?;
    drop(held);
    let began = Instant::now();
    other = start_server_at(bin_dir, &dir.path().join("b"), token.clone(), &addr, &env).await?;
    let restarted = began.elapsed();
    let (back, mut latencies) = reconnect_all(&ws_url, &keys, parallel, server_pub).await?;
    let sent = began.elapsed();
    let on_b = wait_all_online(&other, agents + 1, began).await?;
    let on_a = wait_listed_online(&watcher, agents + 1, began).await?;
    let s = summarize(&mut latencies);
    println!();
    println!(
        "{agents} agents on replica B; B killed and started again, every agent dialling it ({parallel} handshakes in flight at most):"
    );
    println!();
    println!(
        "| B listening ms | all handshakes done s | all listed online by B s | by A s | handshake p50 ms | p99 ms |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {:.0} | {:.2} | {:.2} | {:.2} | {} | {} |",
        restarted.as_secs_f64() * 1000.0,
        sent.as_secs_f64(),
        on_b.as_secs_f64(),
        on_a.as_secs_f64(),
        ms(s.p50),
        ms(s.p99)
    );
    drop(back);
    drop(other);
    drop(holder);
    tokio::task::spawn_blocking(move || drop((postgres, nats))).await?;
    Ok(())
}
