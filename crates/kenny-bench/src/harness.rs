//! Starting the real binaries on loopback, and the forwarded-call benchmark.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kenny_server::admin;
use kenny_server::principal::Role;
use kenny_server::store::Store;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::stats::{ms, summarize};
use kenny_testkit::Mcp;

/// A `kenny-server serve` child on 127.0.0.1, killed when dropped.
pub(crate) struct ServerProcess {
    pub child: Child,
    pub base: String,
    pub token: String,
}

impl ServerProcess {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Resident memory of the server process, from /proc.
    pub(crate) fn rss_bytes(&self) -> anyhow::Result<u64> {
        Ok(status_kib(self.pid(), "VmRSS:")? * 1024)
    }
}

/// One `kB` figure (VmRSS, VmHWM...) from /proc/PID/status.
pub(crate) fn status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("{field} not found for process {pid}"))
}

/// A real `kenny-agent run` enrolled with the server, killed when dropped.
pub(crate) fn spawn_agent(
    bin_dir: &Path,
    server: &ServerProcess,
    enrollment: &admin::AgentEnrollment,
    state_dir: &Path,
) -> anyhow::Result<Child> {
    Command::new(bin_dir.join("kenny-agent"))
        .args([
            "run",
            "--server",
            &server.base,
            "--agent-id",
            "bench-pc",
            "--server-pubkey",
            &enrollment.server_pubkey,
        ])
        .arg("--state-dir")
        .arg(state_dir)
        // In the environment, not on the command line other users can read.
        .env("KENNY_ENROLL_TOKEN", &enrollment.token)
        .env("KENNY_LOG", "warn")
        // net_quality pings the gateway and DNS server; benchmarks keep to loopback.
        .env("KENNY_NET_QUALITY_TARGETS", "gateway=127.0.0.1,dns=127.0.0.1")
        .kill_on_drop(true)
        .spawn()
        .context("starting kenny-agent")
}

/// Creates a data directory with a superuser and a PAT (through the library, so
/// set-up time is not benchmarked).
pub(crate) fn provision(data_dir: &Path) -> anyhow::Result<String> {
    let store = Store::open(data_dir)?;
    admin::add_user(&store, "bench", Role::Superuser, &[], "bench-password")?;
    admin::create_token(&store, "bench", Some("bench"))
}

pub(crate) async fn start_server(bin_dir: &Path, data_dir: &Path, token: String) -> anyhow::Result<ServerProcess> {
    start_server_at(bin_dir, data_dir, token, "127.0.0.1:0", &[]).await
}

/// As [`start_server`], on a given address (a restart takes back its port), with
/// settings in `env` (a replica's database and NATS).
pub(crate) async fn start_server_at(
    bin_dir: &Path,
    data_dir: &Path,
    token: String,
    listen: &str,
    env: &[(&str, &str)],
) -> anyhow::Result<ServerProcess> {
    let mut child = Command::new(bin_dir.join("kenny-server"))
        .args(["serve", "--listen", listen, "--data-dir"])
        .arg(data_dir)
        .envs(env.iter().copied())
        // Above the largest fleet measured (10 000 agents) plus the MCP client; as an
        // environment variable, so the same bench also drives builds without the setting.
        .env("KENNY_MAX_CONNECTIONS", "20000")
        .env("KENNY_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin_dir.join("kenny-server").display()))?;
    let stdout = child.stdout.take().context("server stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("server did not start within 30s")??
        .context("server exited before listening")?;
    let base = line
        .strip_prefix("kenny-server listening on ")
        .with_context(|| format!("unexpected first line: {line}"))?
        .to_owned();
    Ok(ServerProcess { child, base, token })
}

pub(crate) async fn wait_online(mcp: &Mcp, agent_id: &str, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(v) = mcp.call("list_agents", json!({})).await
            && v["agents"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["agent_id"] == agent_id && x["online"] == true))
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("agent {agent_id} did not come online within {within:?}")
}

/// What each benchmarked call asks the agent to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Workload {
    /// Read 16 bytes from a small file: the agent's own work is trivial.
    FsRead,
    /// `echo` through `sh -c`: the guard's parse and a sandboxed child process per call.
    ShellExec,
}

impl Workload {
    fn tool(self) -> &'static str {
        match self {
            Workload::FsRead => "fs_read",
            Workload::ShellExec => "shell_exec",
        }
    }

    pub(crate) fn args(self, file: &Path) -> serde_json::Value {
        match self {
            Workload::FsRead => json!({"agent_id": "bench-pc", "path": file.to_string_lossy(), "max_bytes": 64}),
            Workload::ShellExec => json!({"agent_id": "bench-pc", "command": "echo 'sixteen bytes!!'"}),
        }
    }

    /// Whether a result is the expected 16 bytes.
    fn answered(self, v: &serde_json::Value) -> bool {
        match self {
            Workload::FsRead => v["content"] == "sixteen bytes!!\n",
            Workload::ShellExec => v["stdout"] == "sixteen bytes!!\n",
        }
    }
}

pub(crate) async fn calls(
    bin_dir: &Path,
    levels: &[usize],
    seconds: Duration,
    workload: Workload,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("server");
    let token = provision(&data_dir)?;
    let enrollment = admin::add_agent(&Store::open(&data_dir)?, &data_dir, "bench-pc")?;
    let server = start_server(bin_dir, &data_dir, token).await?;

    let _agent = spawn_agent(bin_dir, &server, &enrollment, &dir.path().join("agent"))?;
    let file = dir.path().join("tiny.txt");
    std::fs::write(&file, "sixteen bytes!!\n")?;

    let http = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    let probe = Mcp::with_client(http.clone(), &server.base, &server.token);
    wait_online(&probe, "bench-pc", Duration::from_secs(15)).await?;
    let args = workload.args(&file);
    let check = probe.call(workload.tool(), args.clone()).await?;
    anyhow::ensure!(
        workload.answered(&check),
        "unexpected {} result: {check}",
        workload.tool()
    );

    // Every call the server answered, warm-up and the check above included, to hold
    // against what its /metrics counted.
    let answered = Arc::new(AtomicU64::new(1));
    println!("| concurrent clients | calls | calls/s | p50 ms | p95 ms | p99 ms | max ms | errors |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &c in levels {
        let (mut samples, errors, elapsed) = run_level(&http, &server, workload, &args, c, seconds, &answered).await?;
        println!("| {c} | {} |", level_row(&mut samples, errors, elapsed));
    }
    let counted = counted_calls(&http, &server.base, workload.tool()).await?;
    let made = answered.load(Ordering::Relaxed);
    println!();
    println!(
        "/metrics counted {counted} {} calls; the clients made {made}",
        workload.tool()
    );
    anyhow::ensure!(
        counted == made,
        "/metrics counted {counted} {} calls but the clients made {made}",
        workload.tool()
    );
    Ok(())
}

/// One level's figures as table cells: calls, calls/s, p50, p95, p99, max, errors.
pub(crate) fn level_row(samples: &mut [Duration], errors: u64, elapsed: Duration) -> String {
    let s = summarize(samples);
    format!(
        "{} | {:.0} | {} | {} | {} | {} | {errors}",
        s.count,
        s.count as f64 / elapsed.as_secs_f64(),
        ms(s.p50),
        ms(s.p95),
        ms(s.p99),
        ms(s.max)
    )
}

/// The sum of `kenny_calls_total` for `tool`, every outcome, scraped from `/metrics`.
async fn counted_calls(http: &reqwest::Client, base: &str, tool: &str) -> anyhow::Result<u64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    let prefix = format!("kenny_calls_total{{tool=\"{tool}\",");
    let mut total = 0.0;
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let value = line.rsplit(' ').next().unwrap_or("0");
        total += value.parse::<f64>().unwrap_or(0.0);
    }
    Ok(total as u64)
}

/// `c` clients, each an MCP session of its own on its own connection, all with the
/// same PAT, calling as fast as answers come back.
pub(crate) async fn run_level(
    http: &reqwest::Client,
    server: &ServerProcess,
    workload: Workload,
    args: &serde_json::Value,
    c: usize,
    seconds: Duration,
    answered: &Arc<AtomicU64>,
) -> anyhow::Result<(Vec<Duration>, u64, Duration)> {
    let errors = Arc::new(AtomicU64::new(0));
    let warmup_end = Instant::now() + Duration::from_secs(1);
    let end = warmup_end + seconds;
    let mut tasks = Vec::new();
    for _ in 0..c {
        let mcp = Mcp::with_client(http.clone(), &server.base, &server.token);
        let args = args.clone();
        let errors = errors.clone();
        let answered = answered.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            if mcp.initialize().await.is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
                return samples;
            }
            loop {
                let start = Instant::now();
                if start >= end {
                    return samples;
                }
                // Any answer counts on the server, a tool error (isError) included.
                let reply = mcp.call_outcome(workload.tool(), args.clone()).await;
                if reply.is_ok() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                let ok = reply.is_ok_and(|o| !o.is_error && workload.answered(&o.structured));
                if start >= warmup_end {
                    if ok {
                        samples.push(start.elapsed());
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await?);
    }
    Ok((all, errors.load(Ordering::Relaxed), seconds))
}
