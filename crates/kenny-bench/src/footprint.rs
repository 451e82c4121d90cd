//! The agent's own footprint on the PC it runs on: binary size, resident memory when
//! idle, CPU used while idle (heartbeats only), and how long one full telemetry
//! collection takes, measured on a real agent connected to a real server.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use kenny_proto::args::PERSONAL_TELEMETRY_SECTIONS;
use kenny_server::admin;
use kenny_server::store::Store;
use serde_json::json;

use crate::harness::{provision, spawn_agent, start_server, status_kib, wait_online};
use crate::stats::{ms, summarize};
use kenny_testkit::Mcp;

pub(crate) async fn run(bin_dir: &Path, idle: Duration, collections: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("server");
    let token = provision(&data_dir)?;
    let enrollment = admin::add_agent(&Store::open(&data_dir)?, &data_dir, "bench-pc")?;
    let server = start_server(bin_dir, &data_dir, token).await?;
    let agent = spawn_agent(bin_dir, &server, &enrollment, &dir.path().join("agent"))?;
    let pid = agent.id().context("agent pid")?;
    let mcp = Mcp::with_client(reqwest::Client::new(), &server.base, &server.token);
    wait_online(&mcp, "bench-pc", Duration::from_secs(15)).await?;

    let binary = bin_dir.join("kenny-agent");
    let size = std::fs::metadata(&binary)?.len();
    // Let the first telemetry push (right after connecting) finish before measuring idle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_rss = status_kib(pid, "VmRSS:")?;
    let cpu_before = cpu_ticks(pid)?;
    let started = Instant::now();
    tokio::time::sleep(idle).await;
    let cpu_used = (cpu_ticks(pid)? - cpu_before) as f64 / clock_ticks_per_sec();
    let cpu_percent = 100.0 * cpu_used / started.elapsed().as_secs_f64();

    let mut samples = Vec::with_capacity(collections);
    let mut sections = Vec::new();
    for _ in 0..collections {
        let t = Instant::now();
        let v = mcp.call("telemetry_collect", json!({"agent_id": "bench-pc"})).await?;
        samples.push(t.elapsed());
        let snapshot = v["snapshot"]
            .as_object()
            .context("a telemetry result without a snapshot")?;
        sections = snapshot.keys().cloned().collect();
    }
    // Collected only when named, so never part of the full collections above.
    sections.extend(PERSONAL_TELEMETRY_SECTIONS.iter().map(|s| (*s).to_owned()));
    let after_rss = status_kib(pid, "VmRSS:")?;
    let peak_rss = status_kib(pid, "VmHWM:")?;
    // tokio retires idle blocking threads after 10 s; see what memory they hand back.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let settled_rss = status_kib(pid, "VmRSS:")?;
    let s = summarize(&mut samples);

    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| binary size ({}) | {:.1} MiB |",
        binary.display(),
        size as f64 / 1048576.0
    );
    println!("| RSS idle, connected | {:.1} MiB |", idle_rss as f64 / 1024.0);
    println!(
        "| CPU while idle over {}s (heartbeat 20 s) | {:.3} % of one core ({:.2} s) |",
        idle.as_secs(),
        cpu_percent,
        cpu_used
    );
    println!(
        "| full telemetry_collect, {} runs via /mcp | p50 {} ms, p95 {} ms, max {} ms |",
        s.count,
        ms(s.p50),
        ms(s.p95),
        ms(s.max)
    );
    println!("| RSS after the collections | {:.1} MiB |", after_rss as f64 / 1024.0);
    println!("| RSS 15 s later | {:.1} MiB |", settled_rss as f64 / 1024.0);
    println!("| peak RSS (VmHWM) | {:.1} MiB |", peak_rss as f64 / 1024.0);
    println!();
    section_times(&mcp, &sections, collections.clamp(1, 5)).await
}

/// Each section collected alone, `runs` times, through `/mcp`: where the collection's
/// time goes (they run at once, so the whole takes as long as the slowest).
async fn section_times(mcp: &Mcp, sections: &[String], runs: usize) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for name in sections {
        let mut samples = Vec::with_capacity(runs);
        let mut status = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            let v = mcp
                .call("telemetry_collect", json!({"agent_id": "bench-pc", "sections": [name]}))
                .await?;
            samples.push(t.elapsed());
            status = v["snapshot"][name]["status"].as_str().unwrap_or("?").to_owned();
        }
        rows.push((name.clone(), summarize(&mut samples), status));
    }
    rows.sort_by_key(|row| std::cmp::Reverse(row.1.p50));
    println!("| section, alone ({runs} runs via /mcp) | p50 ms | max ms | status |");
    println!("|---|---:|---:|---|");
    for (name, s, status) in rows {
        println!("| `{name}` | {} | {} | {status} |", ms(s.p50), ms(s.max));
    }
    Ok(())
}

/// utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat).
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; count fields after its closing ')'.
    let rest = stat.rsplit_once(')').context("malformed /proc stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    Ok(utime + stime)
}

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}
