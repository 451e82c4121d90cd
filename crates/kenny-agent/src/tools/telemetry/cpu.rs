//! The cpu section (load, cores, current usage) and the processes section (the busiest and the biggest).
//!
//! Thresholds, on the load average (runnable plus uninterruptible tasks; Unix only):
//! - warn when the 5-minute load is at least 2× the logical cores: for minutes, tasks
//!   have been waiting for a CPU (or for disk, as D-state counts too) as long as they
//!   ran. The 1-minute figure is shown but not judged: an update or a compile spikes it.
//! - crit when the 15-minute load is at least 4× the cores: a quarter hour of a
//!   machine that is effectively unusable interactively.
//!
//! The usage percent is one short sample and is not judged either.

use std::cmp::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use sysinfo::System;

use super::format::{human_bytes, one_decimal};
use super::{Outcome, Status, section};
use crate::tools::diag::{self, Row};

const LOAD5_WARN_PER_CORE: f64 = 2.0;
const LOAD15_CRIT_PER_CORE: f64 = 4.0;
const TOP: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Load {
    one: f64,
    five: f64,
    fifteen: f64,
}

pub(super) fn cpu_section() -> Outcome {
    let mut sys = System::new().map_err(|e| format!("cannot read CPU information: {e}"))?;
    sys.refresh_cpu_usage();
    // Usage is the difference between two samples; sysinfo needs this long between them.
    std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL + Duration::from_millis(50));
    sys.refresh_cpu_usage();
    let cores = sys.cpus().len();
    if cores == 0 {
        return Err("the OS reported no CPUs".to_owned());
    }
    let model = sys
        .cpus()
        .first()
        .map(|c| c.brand().trim().to_owned())
        .filter(|b| !b.is_empty());
    // Windows has no load average; sysinfo would answer zeros there.
    let load = if cfg!(unix) {
        System::load_average().ok().map(|l| Load {
            one: l.one,
            five: l.five,
            fifteen: l.fifteen,
        })
    } else {
        None
    };
    let usage = one_decimal(f64::from(sys.global_cpu_usage()));
    let (status, summary) = cpu_verdict(load, cores, usage);
    Ok(section(
        status,
        summary,
        json!({
            "cores": cores,
            "physical_cores": System::physical_core_count().ok(),
            "model": model,
            "usage_percent": usage,
            "load_1": load.map(|l| round2(l.one)),
            "load_5": load.map(|l| round2(l.five)),
            "load_15": load.map(|l| round2(l.fifteen)),
        }),
    ))
}

fn cpu_verdict(load: Option<Load>, cores: usize, usage: f64) -> (Status, String) {
    let busy = format!("{usage}% busy");
    let Some(load) = load else {
        return (Status::Ok, format!("{busy} on {cores} cores"));
    };
    let per_core = |value: f64| value / cores as f64;
    let status = if per_core(load.fifteen) >= LOAD15_CRIT_PER_CORE {
        Status::Crit
    } else if per_core(load.five) >= LOAD5_WARN_PER_CORE {
        Status::Warn
    } else {
        Status::Ok
    };
    let summary = format!(
        "load {:.2} {:.2} {:.2} on {cores} cores; {busy}",
        load.one, load.five, load.fifteen
    );
    (status, summary)
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

pub(super) fn processes_section() -> Outcome {
    let rows = diag::sample()?;
    Ok(processes_from(rows))
}

fn processes_from(mut rows: Vec<Row>) -> super::Section {
    let count = rows.len();
    rows.sort_by(|a, b| b.cpu_percent.total_cmp(&a.cpu_percent).then(a.pid.cmp(&b.pid)));
    let top_cpu: Vec<Row> = rows.iter().take(TOP).cloned().collect();
    rows.sort_by(|a, b| b.memory_bytes.cmp(&a.memory_bytes).then(a.pid.cmp(&b.pid)));
    let top_memory: Vec<Row> = rows.into_iter().take(TOP).collect();
    let mut summary = format!("{count} {}", if count == 1 { "process" } else { "processes" });
    if let Some(busiest) = top_cpu
        .first()
        .filter(|r| r.cpu_percent.total_cmp(&0.5) == Ordering::Greater)
    {
        summary += &format!(
            "; busiest {} ({}% CPU)",
            super::format::clip(&busiest.name, 64),
            one_decimal(f64::from(busiest.cpu_percent))
        );
    }
    if let Some(biggest) = top_memory.first() {
        summary += &format!(
            "; biggest {} ({})",
            super::format::clip(&biggest.name, 64),
            human_bytes(biggest.memory_bytes)
        );
    }
    section(
        Status::Ok,
        summary,
        json!({
            "count": count,
            "top_cpu": top_cpu.iter().map(process_json).collect::<Vec<_>>(),
            "top_memory": top_memory.iter().map(process_json).collect::<Vec<_>>(),
        }),
    )
}

/// `cpu_percent` is relative to one core, as in `diag_processes`: 200 is two cores busy.
fn process_json(row: &Row) -> Value {
    json!({
        "pid": row.pid,
        "name": super::format::clip(&row.name, 200),
        "cpu_percent": one_decimal(f64::from(row.cpu_percent)),
        "memory_bytes": row.memory_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(one: f64, five: f64, fifteen: f64) -> Option<Load> {
        Some(Load { one, five, fifteen })
    }

    #[test]
    fn load_thresholds_scale_with_cores() {
        assert_eq!(
            cpu_verdict(load(0.2, 0.81, 1.09), 2, 7.0),
            (Status::Ok, "load 0.20 0.81 1.09 on 2 cores; 7% busy".into())
        );
        // A one-minute spike alone is not judged.
        assert_eq!(cpu_verdict(load(30.0, 3.9, 1.0), 2, 99.0).0, Status::Ok);
        assert_eq!(cpu_verdict(load(5.0, 4.0, 2.0), 2, 99.0).0, Status::Warn);
        assert_eq!(cpu_verdict(load(5.0, 15.9, 7.9), 8, 99.0).0, Status::Ok);
        assert_eq!(cpu_verdict(load(5.0, 16.0, 7.9), 8, 99.0).0, Status::Warn);
        assert_eq!(cpu_verdict(load(40.0, 40.0, 32.0), 8, 100.0).0, Status::Crit);
        assert_eq!(cpu_verdict(None, 4, 12.5), (Status::Ok, "12.5% busy on 4 cores".into()));
    }

    fn row(pid: u32, name: &str, cpu_percent: f32, memory_bytes: u64) -> Row {
        Row {
            pid,
            name: name.into(),
            cpu_percent,
            memory_bytes,
            user_id: Value::Null,
            command: String::new(),
        }
    }

    #[test]
    fn lists_the_busiest_and_the_biggest() {
        let rows: Vec<Row> = (1..=8)
            .map(|i| row(i, &format!("p{i}"), i as f32 * 10.0, u64::from(100 - i) << 20))
            .collect();
        let out = processes_from(rows);
        assert_eq!(out["status"], "ok");
        assert_eq!(out["count"], 8);
        let pids = |key: &str| -> Vec<u64> {
            out[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["pid"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(pids("top_cpu"), [8, 7, 6, 5, 4]);
        assert_eq!(pids("top_memory"), [1, 2, 3, 4, 5]);
        assert_eq!(
            out["top_cpu"][0],
            json!({"pid": 8, "name": "p8", "cpu_percent": 80.0, "memory_bytes": 92u64 << 20})
        );
        assert_eq!(
            out["summary"],
            "8 processes; busiest p8 (80% CPU); biggest p1 (99.0 MiB)"
        );

        let idle = processes_from(vec![row(1, "init", 0.0, 4096)]);
        assert_eq!(idle["summary"], "1 process; biggest init (4.0 KiB)");
    }

    #[test]
    fn reads_this_machine() {
        let cpu = cpu_section().unwrap();
        assert!(cpu["cores"].as_u64().unwrap() >= 1, "{cpu:?}");
        let usage = cpu["usage_percent"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&usage), "{cpu:?}");
        if cfg!(target_os = "linux") {
            let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap();
            assert!(loadavg.starts_with(|c: char| c.is_ascii_digit()));
            assert!(cpu["load_15"].as_f64().is_some(), "{cpu:?}");
        }
        let processes = processes_section().unwrap();
        assert!(processes["count"].as_u64().unwrap() >= 1);
        for key in ["top_cpu", "top_memory"] {
            let listed = processes[key].as_array().unwrap();
            assert!(!listed.is_empty() && listed.len() <= TOP, "{processes:?}");
        }
    }
}
