//! Process diagnostics: what is running and how much CPU and memory each process uses.

use std::cmp::Ordering;
use std::time::Duration;

use kenny_proto::args::DiagProcessesArgs;
use serde_json::{Value, json};
use sysinfo::{Process, ProcessRefreshKind, ProcessesToUpdate, System, ThreadKind, UpdateKind};

use super::bounded::blocking;
use super::{ToolError, ToolResult};

const DEFAULT_LIMIT: usize = 25;
const COMMAND_CHARS: usize = 200;
/// CPU usage is a difference between two samples; closer than this and it is noise.
const SAMPLE_GAP: Duration = Duration::from_millis(200);
const BACKSTOP: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SortBy {
    Cpu,
    Memory,
}

impl SortBy {
    fn as_str(self) -> &'static str {
        match self {
            SortBy::Cpu => "cpu",
            SortBy::Memory => "memory",
        }
    }
}

/// One process as sampled, before sorting and cutting.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) pid: u32,
    pub(super) name: String,
    pub(super) cpu_percent: f32,
    pub(super) memory_bytes: u64,
    pub(super) user_id: Value,
    pub(super) command: String,
}

pub(super) async fn processes(args: DiagProcessesArgs) -> ToolResult {
    let sort_by = sort_arg(args.sort_by.as_deref())?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let rows = blocking("diag_processes", BACKSTOP, sample)
        .await?
        .map_err(ToolError::exec_failed)?;
    Ok(render(rows, sort_by, limit))
}

fn sort_arg(sort_by: Option<&str>) -> Result<SortBy, ToolError> {
    match sort_by {
        None | Some("memory") => Ok(SortBy::Memory),
        Some("cpu") => Ok(SortBy::Cpu),
        Some(other) => Err(ToolError::bad_args(format!(
            "sort_by must be `cpu` or `memory`, got `{other}`"
        ))),
    }
}

/// Two samples `SAMPLE_GAP` apart, so `cpu_percent` reflects the present. Blocking.
/// Telemetry's processes section uses it too.
pub(super) fn sample() -> Result<Vec<Row>, String> {
    let mut sys = System::new().map_err(|e| format!("cannot read the process table: {e}"))?;
    // Threads are left out: they would crowd real processes off a short list.
    let what = ProcessRefreshKind::nothing()
        .with_cpu()
        .with_memory()
        .with_cmd(UpdateKind::OnlyIfNotSet)
        .with_user(UpdateKind::OnlyIfNotSet)
        .without_tasks();
    // Per-process CPU is relative to the machine's CPUs; until the CPU list is loaded
    // sysinfo reports 0 for every process (seen on the first call in a process).
    sys.refresh_cpu_usage();
    sys.refresh_processes_specifics(ProcessesToUpdate::All, true, what);
    // sysinfo refreshes the global CPU times only once its minimum interval has passed;
    // sleeping exactly that long races it and yields near-zero per-process figures.
    std::thread::sleep(SAMPLE_GAP.max(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL) + Duration::from_millis(50));
    sys.refresh_processes_specifics(ProcessesToUpdate::All, true, what);
    Ok(sys
        .processes()
        .values()
        .filter(|p| p.thread_kind() != Some(ThreadKind::Userland))
        .map(row)
        .collect())
}

fn row(process: &Process) -> Row {
    let command = process
        .cmd()
        .iter()
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    Row {
        pid: process.pid().as_u32(),
        name: process.name().to_string_lossy().into_owned(),
        cpu_percent: process.cpu_usage(),
        memory_bytes: process.memory(),
        user_id: process.user_id().map_or(Value::Null, uid_json),
        command: command.chars().take(COMMAND_CHARS).collect(),
    }
}

/// A number on Unix; a SID string on Windows.
#[cfg(unix)]
fn uid_json(uid: &sysinfo::Uid) -> Value {
    Value::from(**uid)
}

#[cfg(not(unix))]
fn uid_json(uid: &sysinfo::Uid) -> Value {
    Value::from((**uid).to_string())
}

fn render(mut rows: Vec<Row>, sort_by: SortBy, limit: usize) -> Value {
    rows.sort_by(|a, b| compare(a, b, sort_by));
    let total = rows.len();
    let listed: Vec<Value> = rows.into_iter().take(limit).map(row_json).collect();
    json!({
        "total": total,
        "sort_by": sort_by.as_str(),
        "truncated": total > listed.len(),
        "processes": listed,
    })
}

/// Biggest first; the other measure, then pid, break ties so the order is stable.
fn compare(a: &Row, b: &Row, sort_by: SortBy) -> Ordering {
    let by_cpu = b.cpu_percent.total_cmp(&a.cpu_percent);
    let by_memory = b.memory_bytes.cmp(&a.memory_bytes);
    let (first, second) = match sort_by {
        SortBy::Cpu => (by_cpu, by_memory),
        SortBy::Memory => (by_memory, by_cpu),
    };
    first.then(second).then(a.pid.cmp(&b.pid))
}

fn row_json(row: Row) -> Value {
    json!({
        "pid": row.pid,
        "name": row.name,
        "cpu_percent": one_decimal(row.cpu_percent),
        "memory_bytes": row.memory_bytes,
        "user_id": row.user_id,
        "command": row.command,
    })
}

/// Rounded in f64 so the JSON says 12.3, not 12.300000190734863.
fn one_decimal(value: f32) -> f64 {
    (f64::from(value) * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    use crate::tools::typed;

    fn row(pid: u32, cpu_percent: f32, memory_bytes: u64) -> Row {
        Row {
            pid,
            name: format!("p{pid}"),
            cpu_percent,
            memory_bytes,
            user_id: Value::Null,
            command: String::new(),
        }
    }

    fn pids(out: &Value) -> Vec<u64> {
        out["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect()
    }

    #[test]
    fn sorts_biggest_first_and_cuts_at_the_limit() {
        let rows = vec![row(1, 5.0, 100), row(2, 50.0, 10), row(3, 0.04, 1000), row(4, 50.0, 20)];
        let by_memory = render(rows.clone(), SortBy::Memory, 10);
        assert_eq!(pids(&by_memory), [3, 1, 4, 2]);
        assert_eq!(by_memory["truncated"], false);
        assert_eq!(by_memory["sort_by"], "memory");

        let by_cpu = render(rows, SortBy::Cpu, 2);
        assert_eq!(pids(&by_cpu), [4, 2], "cpu ties fall back to memory");
        assert_eq!(by_cpu["total"], 4);
        assert_eq!(by_cpu["truncated"], true);
    }

    #[test]
    fn cpu_is_rounded_to_one_decimal() {
        let out = render(vec![row(1, 12.345, 1), row(2, 0.04, 1)], SortBy::Cpu, 10);
        assert_eq!(out["processes"][0]["cpu_percent"].to_string(), "12.3");
        assert_eq!(out["processes"][1]["cpu_percent"].to_string(), "0.0");
    }

    #[tokio::test]
    async fn sort_by_accepts_only_cpu_or_memory() {
        let err = processes(typed(json!({"sort_by": "name"}))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(err.message.contains("`cpu` or `memory`"), "{}", err.message);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn lists_real_processes_with_a_busy_one_on_top_by_cpu() {
        // A separate busy process: sysinfo under-reports the sampling process itself on
        // its first sample, which is not what the tool is for.
        struct KillOnDrop(std::process::Child);
        impl Drop for KillOnDrop {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let busy = KillOnDrop(
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        );
        // On a loaded machine the busy process may get little CPU in one short sample,
        // so a few samples are allowed; the ordering must hold in every one of them.
        let mut busiest_seen = 0.0_f64;
        let mut me = Value::Null;
        for _ in 0..5 {
            let out = processes(typed(json!({"sort_by": "cpu", "limit": 500}))).await.unwrap();
            assert!(out["total"].as_u64().unwrap() >= 1);
            let listed = out["processes"].as_array().unwrap();
            let cpus: Vec<f64> = listed.iter().map(|p| p["cpu_percent"].as_f64().unwrap()).collect();
            assert!(cpus.windows(2).all(|w| w[0] >= w[1]), "sorted by cpu: {cpus:?}");
            me = listed
                .iter()
                .find(|p| p["pid"] == busy.0.id())
                .expect("the busy process is listed")
                .clone();
            busiest_seen = busiest_seen.max(me["cpu_percent"].as_f64().unwrap());
            if busiest_seen > 1.0 {
                break;
            }
        }
        drop(busy);
        assert!(busiest_seen > 1.0, "a busy process shows up: {me}");
        assert!(me["memory_bytes"].as_u64().unwrap() > 0);
        assert!(me["command"].as_str().unwrap().chars().count() <= COMMAND_CHARS);
        #[cfg(unix)]
        // SAFETY: getuid cannot fail and touches no memory.
        assert_eq!(me["user_id"], unsafe { libc::getuid() });
    }
}
