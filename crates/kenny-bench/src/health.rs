//! Fleet health at scale, against the real `kenny-server` on loopback:
//!
//! - ingest: N simulated agents (real mutual-auth handshakes) each push one snapshot of
//!   a real agent's size at once; the time until every verdict is stored gives the
//!   rate, set against what N agents pushing every 15 minutes need;
//! - reads: `list_agents` (a default page, a full page, a health filter) and
//!   `fleet_overview` latency (p50/p95) and response bytes at that fleet size;
//! - storage (`--storage`): a month of snapshots every 15 minutes for a few PCs written
//!   through the server's own store and history code, simulated time, then the
//!   database's size per PC.

use std::path::Path;
use std::time::{Duration, Instant};

use kenny_proto::frame::{Frame, Telemetry};
use kenny_server::store::{ChangeRow, HealthRow, MetricRow, NewSnapshot, Store};
use serde_json::{Map, Value, json};

use crate::fleet::{SimulatedFleet, connect_all, register_agents};
use crate::stats::{ms, summarize};
use kenny_testkit::Mcp;

const SAMPLES: usize = 40;

pub(crate) async fn run(bin_dir: &Path, levels: &[usize]) -> anyhow::Result<()> {
    // Held to the end: dropping it stops the server and removes its data.
    let sim = SimulatedFleet::start(bin_dir).await?;
    let (store, ws_url, server_pub, mcp) = (&sim.store, &sim.ws_url, sim.server_pub, &sim.mcp);
    println!(
        "snapshot pushed: {} bytes of JSON (a real Linux agent's sections, 200 packages listed)",
        serde_json::to_string(&snapshot(0))?.len()
    );
    println!();
    println!(
        "| agents | ingest: snapshots/s (needed at one per 15 min) | list_agents default page p50 / p95 ms, bytes | list_agents limit=100 p50 / p95 ms, bytes | list_agents health=attention p50 / p95 ms | fleet_overview p50 / p95 ms, bytes |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut keys = Vec::new();
    let mut held = Vec::new();
    for &n in levels {
        if keys.len() < n {
            keys.extend(register_agents(store, keys.len(), n)?);
        }
        held.extend(connect_all(ws_url, &keys, held.len(), n, server_pub).await?);
        let already = judged(store)?;
        let started = Instant::now();
        for (i, agent) in held.iter().enumerate().skip(already) {
            agent.send(&Frame::Telemetry(Telemetry {
                agent_id: format!("sim-{i:05}"),
                collected_at: "2026-06-04T18:00:00Z".into(),
                snapshot: snapshot(i),
            }))?;
        }
        while judged(store)? < n {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(600),
                "snapshots not stored within 10 minutes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let rate = (n - already) as f64 / started.elapsed().as_secs_f64();
        let needed = n as f64 / 900.0;

        let default_page = measure(mcp, "list_agents", json!({})).await?;
        let full_page = measure(mcp, "list_agents", json!({"limit": 100})).await?;
        let attention = measure(mcp, "list_agents", json!({"health": "attention"})).await?;
        let overview = measure(mcp, "fleet_overview", json!({})).await?;
        println!(
            "| {n} | {rate:.0} ({needed:.1}) | {} / {}, {} | {} / {}, {} | {} / {} | {} / {}, {} |",
            ms(default_page.0),
            ms(default_page.1),
            default_page.2,
            ms(full_page.0),
            ms(full_page.1),
            full_page.2,
            ms(attention.0),
            ms(attention.1),
            ms(overview.0),
            ms(overview.1),
            overview.2
        );
    }
    drop(held);
    Ok(())
}

/// PCs with a stored verdict.
fn judged(store: &Store) -> anyhow::Result<usize> {
    Ok(store.health_counts()?.iter().map(|(_, n)| *n as usize).sum())
}

/// (p50, p95, response bytes) of a call.
async fn measure(mcp: &Mcp, tool: &str, args: Value) -> anyhow::Result<(Duration, Duration, usize)> {
    let (_, bytes) = mcp.call_sized(tool, args.clone()).await?;
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let t = Instant::now();
        mcp.call_sized(tool, args.clone()).await?;
        samples.push(t.elapsed());
    }
    let s = summarize(&mut samples);
    Ok((s.p50, s.p95, bytes))
}

/// A snapshot shaped like a real Linux agent's (every section, 200 packages listed,
/// ports, accounts, processes); one PC in twenty has a full disk, one in a hundred a
/// hot CPU, so health filters find something.
pub(crate) fn snapshot(i: usize) -> Map<String, Value> {
    let disk = if i.is_multiple_of(20) { 96 } else { 40 + (i % 40) as u64 };
    let temperature = if i.is_multiple_of(100) { 97.0 } else { 55.0 };
    let apps: Vec<Value> = (0..200)
        .map(|a| json!({"name": format!("package-{a:03}"), "version": format!("1.{a}.{}", i % 7), "publisher": "Debian Maintainers", "install_date": "2025-06-24"}))
        .collect();
    let ports: Vec<Value> = (0..12)
        .map(|p| json!({"proto": "tcp", "address": "0.0.0.0", "port": 8000 + p, "pid": 1000 + p, "process": format!("service-{p}")}))
        .collect();
    let accounts: Vec<Value> = (0..6)
        .map(|a| json!({"name": format!("user{a}"), "display": format!("User {a}"), "enabled": true, "is_admin": a == 0, "kind": "local", "builtin_admin": false, "builtin_guest": false, "password_required": true, "password_locked": false, "password_last_set": "2025-06-24T00:00:00Z", "last_logon": null}))
        .collect();
    let procs: Vec<Value> = (0..5)
        .map(|p| json!({"name": format!("proc-{p}"), "pid": 100 + p, "cpu_percent": 1.5, "memory_bytes": 50_000_000}))
        .collect();
    let section = |status: &str, summary: String, fields: Value| {
        let mut m = fields.as_object().cloned().unwrap_or_default();
        m.insert("status".into(), status.into());
        m.insert("summary".into(), summary.into());
        Value::Object(m)
    };
    let mut s = Map::new();
    s.insert("disk".into(), section("ok", format!("/ {disk}% used"), json!({"volumes": [
        {"mount": "/", "device": "/dev/sda1", "fs": "ext4", "total_bytes": 500_000_000_000u64, "free_bytes": 100_000_000_000u64, "percent_used": disk, "read_only": false, "removable": false},
        {"mount": "/home", "device": "/dev/sda2", "fs": "ext4", "total_bytes": 900_000_000_000u64, "free_bytes": 400_000_000_000u64, "percent_used": 55, "read_only": false, "removable": false},
    ]})));
    s.insert("memory".into(), section("ok", "42% of 16 GiB used".into(), json!({"percent_used": 42, "total_bytes": 17_179_869_184u64, "used_bytes": 7_000_000_000u64, "available_bytes": 10_000_000_000u64, "swap_total_bytes": 0, "swap_used_bytes": 0})));
    s.insert("cpu".into(), section("ok", "load 0.4".into(), json!({"cores": 8, "physical_cores": 4, "load_1": 0.4, "load_5": 0.5, "load_15": 0.6, "usage_percent": 7.0, "model": "CPU"})));
    s.insert(
        "processes".into(),
        section(
            "ok",
            "180 processes".into(),
            json!({"count": 180, "top_cpu": procs, "top_memory": procs}),
        ),
    );
    s.insert(
        "uptime".into(),
        section(
            "ok",
            "up 3d".into(),
            json!({"seconds": 260_000, "boot_time": "2026-06-01T00:00:00Z"}),
        ),
    );
    s.insert("os".into(), section("ok", "Debian 12".into(), json!({"name": "Debian GNU/Linux", "version": "12", "kernel": "6.1.0", "arch": "x86_64", "hostname": format!("sim-{i:05}"), "support_days_left": 700, "support_end": "2028-06-30"})));
    s.insert(
        "time_sync".into(),
        section(
            "ok",
            "synchronised".into(),
            json!({"synchronized": true, "source": "systemd-timesyncd"}),
        ),
    );
    s.insert("thermals".into(), section("ok", "hottest 55C".into(), json!({"sensors": [{"label": "Package id 0", "temperature_c": temperature}, {"label": "acpitz", "temperature_c": 40.0}]})));
    s.insert("network".into(), section("ok", "default via 192.168.1.1".into(), json!({"default_routes": [{"family": "ipv4", "gateway": "192.168.1.1", "interface": "eth0", "metric": 100}], "dns_servers": ["192.168.1.1"], "interfaces": [{"name": "eth0", "state": "up", "mac": "02:00:00:00:00:01", "addresses": ["192.168.1.20/24"]}]})));
    s.insert(
        "failed_services".into(),
        section(
            "ok",
            "none failed".into(),
            json!({"count": 0, "units": [], "truncated": false}),
        ),
    );
    s.insert(
        "listening_ports".into(),
        section(
            "ok",
            "12 listening ports".into(),
            json!({"count": 12, "ports": ports, "truncated": false}),
        ),
    );
    s.insert(
        "installed_software".into(),
        section(
            "ok",
            "1400 packages".into(),
            json!({"count": 1400, "source": "dpkg", "apps": apps, "truncated": true}),
        ),
    );
    s.insert(
        "local_accounts".into(),
        section(
            "ok",
            "6 accounts, 1 admin".into(),
            json!({"count": 6, "accounts": accounts, "admins": ["user0"], "truncated": false}),
        ),
    );
    s.insert("logon_failures".into(), section("ok", "no failed logons in 24h".into(), json!({"count": 0, "accounts": [], "window_hours": 24, "source": "btmp", "truncated": false, "unmatched_count": 0})));
    s.insert(
        "defender".into(),
        section("ok", "n/a on this platform".into(), json!({})),
    );
    s.insert(
        "win_update".into(),
        section("ok", "n/a on this platform".into(), json!({})),
    );
    s.insert(
        "sandbox".into(),
        section(
            "ok",
            "Landlock ABI 7".into(),
            json!({"landlock": "enforced", "landlock_abi": 7, "mount_isolation": "enforced"}),
        ),
    );
    s
}

/// A month of one snapshot every 15 minutes for `pcs` PCs, stored the way the server
/// stores them (the snapshot with its verdict, its history point and, once a day, a
/// change), with the history thinned every simulated hour; prints the database's size
/// per PC.
pub(crate) fn storage(pcs: usize, days: i64) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    let start = kenny_server::clock::parse("2026-01-01T00:00:00Z").ok_or_else(|| anyhow::anyhow!("bad start"))?;
    let retention = kenny_server::history::Retention::default();
    let verdict = assessment_json();
    let started = Instant::now();
    let steps = days * 24 * 4;
    for step in 0..steps {
        let now = start + time::Duration::minutes(15 * step);
        let at = kenny_server::clock::format(now);
        for pc in 0..pcs {
            let agent_id = format!("pc-{pc:04}");
            let snap = serde_json::to_string(&snapshot(pc))?;
            let health = HealthRow {
                agent_id: agent_id.clone(),
                status: "ok",
                assessment_json: verdict.clone(),
            };
            let point = MetricRow {
                agent_id: agent_id.clone(),
                at: at.clone(),
                tier: 0,
                health: Some(0),
                cpu: Some(5.0 + (step % 30) as f64),
                load: Some(0.1),
                memory: Some(40.0 + (step % 10) as f64),
                temperature: Some(55.0),
                disks: r#"{"/":62.4,"/home":55.0}"#.into(),
            };
            let changes: Vec<ChangeRow> = if step % 96 == 0 && step > 0 {
                vec![ChangeRow {
                    id: 0,
                    agent_id: agent_id.clone(),
                    at: at.clone(),
                    section: "installed_software".into(),
                    kind: "changed".into(),
                    item: "package-042".into(),
                    detail: "package-042: version 1.42.1 → 1.42.2".into(),
                    priority: "normal".into(),
                }]
            } else {
                Vec::new()
            };
            store.insert_telemetry(
                &NewSnapshot {
                    agent_id: &agent_id,
                    collected_at: &at,
                    received_at: &at,
                    snapshot: &snap,
                    health: Some(&health),
                    changes: &changes,
                    metrics: Some(&point),
                },
                3,
            )?;
        }
        if step % 4 == 3 {
            kenny_server::history::downsample_once(&store, now, retention)?;
        }
    }
    let bytes = store.file_size()?;
    println!(
        "{pcs} PCs, {days} days of snapshots every 15 minutes ({} stored, {:.0} s): database {:.1} MiB, {:.0} KiB per PC ({:.0} KiB of it the three whole snapshots kept)",
        steps * pcs as i64,
        started.elapsed().as_secs_f64(),
        bytes as f64 / 1048576.0,
        bytes as f64 / 1024.0 / pcs as f64,
        3.0 * serde_json::to_string(&snapshot(0))?.len() as f64 / 1024.0
    );
    Ok(())
}

/// An assessment of the size the server stores for such a snapshot.
fn assessment_json() -> String {
    let sections: Vec<Value> = snapshot(1)
        .keys()
        .map(|name| json!({"section": name, "status": "ok", "summary": "a line of about this length, as agents write", "reason": null, "attention": null}))
        .collect();
    json!({"status": "ok", "reasons": [], "sections": sections, "skipped": ["defender", "win_update"],
           "collected_at": "2026-06-04T18:00:00Z", "assessed_at": "2026-06-04T18:00:00.123Z"})
    .to_string()
}
