//! Health telemetry: a snapshot of independent sections (disk, cpu, network, accounts, ...), each with a status and a one-line summary.
//!
//! Every section is `{status: ok|warn|crit, summary, ...details}`; names and shapes follow
//! the 0.17 wire reference where it has the section. This module is the runner: each
//! collector runs on its own thread or task, all at once, and a collector that fails,
//! panics or hangs becomes a `crit` section with the reason without touching the others.

mod accounts;
mod app_updates;
mod backup;
mod browser_extensions;
mod command;
mod cpu;
mod defender;
mod disk_smart;
#[cfg(test)]
mod documented;
mod files;
mod firewall;
mod format;
mod logons;
mod net_quality;
mod network;
mod os;
mod peripherals;
mod ports;
mod power;
mod printers;
#[cfg(test)]
mod recorded;
mod reliability;
mod routing;
mod scheduled_tasks;
mod screen_time;
mod services;
mod software;
mod startup;
mod system;
mod thermals;
mod time_sync;
mod web_activity;
mod wifi;
mod win_update;
mod windows;

use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;
use kenny_proto::args::{PERSONAL_TELEMETRY_SECTIONS, TelemetryCollectArgs};
use serde_json::{Map, Value, json};

use super::bounded::join_error_message;
use super::{ToolError, ToolResult};

pub(in crate::tools) use accounts::{ADMIN_GROUPS, AccountFiles, PasswdEntry, Password};
pub(in crate::tools) use format::rfc3339;

/// The `local_accounts` section on Windows, which the account tools judge their rails
/// by (the same query, so the two never disagree about who is an administrator).
#[cfg_attr(not(windows), allow(dead_code))]
pub(in crate::tools) async fn windows_local_accounts() -> Outcome {
    match accounts::windows_query() {
        Some(query) => windows::collect(query).await,
        None => Err("the local accounts have no Windows query".to_owned()),
    }
}

/// The same from a recording of the query (`testdata/windows/local_accounts/<case>`).
#[cfg(test)]
pub(in crate::tools) fn windows_local_accounts_recorded(case: &str) -> Outcome {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/windows/local_accounts");
    let stdout = std::fs::read_to_string(dir.join(format!("{case}.stdout"))).map_err(|e| e.to_string())?;
    let query = accounts::windows_query().ok_or("no query")?;
    (query.parse)(
        &command::Output::printed(&stdout, "", true),
        time::OffsetDateTime::now_utc(),
    )
}

/// Every section this agent can collect, in the order they appear in a snapshot.
pub(super) const SECTIONS: &[&str] = &[
    "disk",
    "memory",
    "cpu",
    "processes",
    "uptime",
    "os",
    "time_sync",
    "thermals",
    "battery",
    "disk_smart",
    "peripherals",
    "printers",
    "network",
    "routing",
    "wifi_quality",
    "net_quality",
    "failed_services",
    "services",
    "scheduled_tasks",
    "autostart",
    "listening_ports",
    "firewall",
    "installed_software",
    "app_updates",
    "local_accounts",
    "logon_failures",
    "defender",
    "defender_quarantine",
    "av_thirdparty",
    "win_update",
    "reboot_pending",
    "encryption",
    "reliability",
    "backup_status",
    "screen_time",
    "web_activity",
    "browser_extensions",
    "sandbox",
];

/// All sections together must finish within this; a stuck one (statfs on a hung mount,
/// a sensor read stuck in a driver) is reported as failed instead of holding back the
/// snapshot. Subprocesses get shorter timeouts of their own. On Windows most sections
/// are PowerShell queries taking a second or two each, run a few at a time
/// (`windows::AT_ONCE`), so the whole needs longer there.
const COLLECT_TIME: Duration = if cfg!(windows) {
    Duration::from_secs(60)
} else {
    Duration::from_secs(15)
};

type Section = Map<String, Value>;
type Outcome = Result<Section, String>;

/// How a section is collected.
#[derive(Clone, Copy)]
enum Collector {
    /// File, /proc and sysinfo reads: on a blocking thread.
    Blocking(fn() -> Outcome),
    /// Collectors that wait on subprocesses: as a task, so a timeout can cancel them
    /// (which kills the subprocess).
    Async(fn() -> BoxFuture<'static, Outcome>),
    /// A PowerShell query on Windows: as a task, like `Async`.
    Windows(&'static windows::Query),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Ok,
    Warn,
    Crit,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Crit => "crit",
        }
    }
}

/// Collects the named sections (when `None`, all but the personal ones: those only
/// when a call names them). Never fails as a whole: a section
/// whose collector errors, panics or hangs comes back as `crit` with the reason.
/// Unknown names are skipped; `collect_tool` refuses them before getting here.
pub async fn collect(sections: Option<&[String]>) -> Map<String, Value> {
    let wanted = |name: &&str| match sections {
        Some(wanted) => wanted.iter().any(|w| w == *name),
        None => !PERSONAL_TELEMETRY_SECTIONS.contains(name),
    };
    let jobs: Vec<(&'static str, Collector)> = SECTIONS
        .iter()
        .filter(|name| wanted(name))
        .filter_map(|&name| collector(name).map(|run| (name, run)))
        .collect();
    if let Some(wanted) = sections {
        for unknown in wanted.iter().filter(|w| !SECTIONS.contains(&w.as_str())) {
            tracing::warn!(section = %unknown, "skipping unknown telemetry section");
        }
    }
    let snapshot = run_collectors(jobs, COLLECT_TIME).await;
    release_freed_memory();
    snapshot
}

/// Collectors run on many threads at once, and glibc gives each thread its own malloc
/// arena, keeping what they freed (about 16 MiB after a full collection: the package
/// database parse alone is 3 MiB). The agent idles for minutes between collections, so
/// hand it back to the OS.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

pub(super) async fn collect_tool(args: TelemetryCollectArgs) -> ToolResult {
    let sections = requested_sections(args.sections)?;
    let collected_at = rfc3339(SystemTime::now());
    let snapshot = collect(sections.as_deref()).await;
    Ok(json!({ "collected_at": collected_at, "snapshot": snapshot }))
}

fn requested_sections(sections: Option<Vec<String>>) -> Result<Option<Vec<String>>, ToolError> {
    let Some(names) = sections else { return Ok(None) };
    if let Some(unknown) = names.iter().find(|name| !SECTIONS.contains(&name.as_str())) {
        return Err(ToolError::bad_args(format!(
            "unknown telemetry section `{unknown}`; known sections: {}",
            SECTIONS.join(", ")
        )));
    }
    Ok(Some(names))
}

/// What the kernel layer under shell commands does here (Landlock ABI, mount isolation).
fn sandbox_section() -> Outcome {
    match crate::sandbox::status() {
        Value::Object(map) => Ok(map),
        _ => Err("no sandbox status".into()),
    }
}

fn collector(name: &str) -> Option<Collector> {
    use Collector::{Async, Blocking};
    if cfg!(windows)
        && !windows::ONE_OF_SEVERAL_SOURCES.contains(&name)
        && let Some(query) = windows::query(name)
    {
        return Some(Collector::Windows(query));
    }
    Some(match name {
        "disk" => Blocking(system::disk_section),
        "memory" => Blocking(system::memory_section),
        "cpu" => Blocking(cpu::cpu_section),
        "processes" => Blocking(cpu::processes_section),
        "uptime" => Blocking(system::uptime_section),
        "os" => Blocking(os::os_section),
        "time_sync" => Async(|| Box::pin(time_sync::time_sync_section())),
        "thermals" => Blocking(thermals::thermals_section),
        "battery" => Blocking(power::battery_section),
        "disk_smart" => Async(|| Box::pin(disk_smart::section())),
        "peripherals" => Async(|| Box::pin(peripherals::section())),
        "printers" => Async(|| Box::pin(printers::section())),
        "network" => Blocking(network::network_section),
        "routing" => Async(|| Box::pin(routing::section())),
        "wifi_quality" => Async(|| Box::pin(wifi::section())),
        "net_quality" => Async(|| Box::pin(net_quality::section())),
        "failed_services" => Async(|| Box::pin(services::failed_services_section())),
        "services" => Async(|| Box::pin(services::services_section())),
        "scheduled_tasks" => Async(|| Box::pin(scheduled_tasks::section())),
        "autostart" => Async(|| Box::pin(startup::section())),
        "listening_ports" => Blocking(ports::listening_ports_section),
        "firewall" => Async(|| Box::pin(firewall::section())),
        "installed_software" => Async(|| Box::pin(software::installed_software_section())),
        "app_updates" => Async(|| Box::pin(app_updates::section())),
        "local_accounts" => Blocking(accounts::local_accounts_section),
        "logon_failures" => Async(|| Box::pin(logons::logon_failures_section())),
        "defender" | "defender_quarantine" | "av_thirdparty" | "win_update" => Blocking(windows_only),
        "reboot_pending" => Blocking(power::reboot_pending_section),
        "encryption" => Blocking(power::encryption_section),
        "reliability" => Async(|| Box::pin(reliability::section())),
        "backup_status" => Async(|| Box::pin(backup::section())),
        "screen_time" => Async(|| Box::pin(screen_time::section())),
        "web_activity" => Async(|| Box::pin(web_activity::section())),
        "browser_extensions" => Async(|| Box::pin(browser_extensions::section())),
        "sandbox" => Blocking(sandbox_section),
        _ => return None,
    })
}

/// Runs every collector at once, so one slow section does not delay the rest, and
/// isolates their failures from each other. Whatever has not answered by `limit` is
/// reported as failed; a task still running then is cancelled (killing its
/// subprocesses), a blocking thread is left to finish on its own.
async fn run_collectors(jobs: Vec<(&'static str, Collector)>, limit: Duration) -> Map<String, Value> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut snapshot = Map::new();
    let mut running = Vec::new();
    for (name, run) in jobs {
        // A blocking collector cannot be stopped (statfs on a hung mount, a stuck sensor
        // read); starting it again each interval would pile up threads until the pool
        // is gone. While its last run is still stuck, say so instead.
        let Some(slot) = Busy::claim(name, limit) else {
            snapshot.insert(name.to_owned(), Value::Object(failed_section(STUCK)));
            continue;
        };
        let handle = match run {
            Collector::Blocking(run) => tokio::task::spawn_blocking(move || {
                let _slot = slot;
                run()
            }),
            Collector::Async(run) => {
                let work = run();
                tokio::spawn(async move {
                    let _slot = slot;
                    work.await
                })
            }
            Collector::Windows(query) => {
                let work = windows::collect(query);
                tokio::spawn(async move {
                    let _slot = slot;
                    work.await
                })
            }
        };
        running.push((name, handle));
    }
    for (name, mut handle) in running {
        let section = match tokio::time::timeout_at(deadline, &mut handle).await {
            Ok(Ok(Ok(section))) => section,
            Ok(Ok(Err(reason))) => failed_section(&reason),
            Ok(Err(join)) => failed_section(&join_error_message(join)),
            Err(_) => {
                handle.abort();
                failed_section(&format!("no answer within {}s", limit.as_secs_f32()))
            }
        };
        snapshot.insert(name.to_owned(), Value::Object(section));
    }
    snapshot
}

/// Collector runs in progress, across every collection in this process: section name,
/// when it started, and a number telling runs apart.
static BUSY: std::sync::Mutex<Vec<(&'static str, std::time::Instant, u64)>> = std::sync::Mutex::new(Vec::new());
static NEXT_RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One collector run, registered until it ends (or its cancelled task is dropped).
struct Busy(u64);

impl Busy {
    /// None when a run of this section has outlived `limit`: it is stuck, and another
    /// would only join it. Runs that are merely concurrent (a push and a tool call) are fine.
    fn claim(name: &'static str, limit: Duration) -> Option<Busy> {
        let mut busy = BUSY.lock().unwrap_or_else(|e| e.into_inner());
        if busy
            .iter()
            .any(|(n, started, _)| *n == name && started.elapsed() > limit)
        {
            return None;
        }
        let id = NEXT_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        busy.push((name, std::time::Instant::now(), id));
        Some(Busy(id))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, _, id)| *id != self.0);
    }
}

/// Runs the blocking part of an `Async` collector on a blocking thread, registered like a
/// `Blocking` collector: cancelling the task at the deadline cannot stop the thread
/// (a read stuck on a hung mount or a user's FIFO), so while it is stuck the section
/// says so instead of leaving one more stuck thread each interval.
pub(super) async fn off_thread<T: Send + 'static>(
    section: &'static str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    off_thread_within(section, COLLECT_TIME, work).await
}

async fn off_thread_within<T: Send + 'static>(
    section: &'static str,
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let Some(slot) = Busy::claim(section, limit) else {
        return Err(STUCK.to_owned());
    };
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        work()
    })
    .await
    .map_err(join_error_message)
}

const STUCK: &str = "its previous run has not finished yet (stuck in the system); not started again";

fn failed_section(reason: &str) -> Section {
    section(
        Status::Crit,
        format!("collector failed: {}", format::clip(reason, 300)),
        json!({}),
    )
}

/// A section object: `fields` plus the `status` and `summary` every section has.
fn section(status: Status, summary: String, fields: Value) -> Section {
    let mut map = match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    map.insert("status".into(), status.as_str().into());
    map.insert("summary".into(), summary.into());
    map
}

/// A section whose idea does not exist on this PC (Defender on Linux, Wi-Fi quality
/// without a wireless card): present, `ok`, and saying why, so it is never mistaken for
/// data that is missing.
fn not_applicable(reason: &str) -> Section {
    section(
        Status::Ok,
        format!("n/a: {reason}"),
        json!({ "applicable": false, "reason": reason }),
    )
}

/// Windows-only sections on other systems: present, so every agent's snapshot has the
/// same keys (0.17 agents send the same summary), and plainly not applicable.
fn windows_only() -> Outcome {
    if cfg!(windows) {
        return Ok(not_collected_here());
    }
    Ok(section(
        Status::Ok,
        "n/a on this platform".to_owned(),
        json!({ "applicable": false, "reason": "a Windows feature; this PC does not run Windows" }),
    ))
}

/// A section this agent build does not collect on this OS yet: said plainly, and not a
/// fault of the PC.
fn not_collected_here() -> Section {
    section(
        Status::Ok,
        format!(
            "not collected on {} by kenny-agent {} yet",
            std::env::consts::OS,
            env!("CARGO_PKG_VERSION")
        ),
        json!({ "collected": false }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;
    use std::time::Instant;
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    use crate::tools::typed;

    fn assert_section_shape(name: &str, section: &Value) {
        let status = section["status"].as_str().unwrap_or_default();
        assert!(["ok", "warn", "crit"].contains(&status), "{name}: {section}");
        assert!(
            section["summary"]
                .as_str()
                .is_some_and(|s| !s.is_empty() && !s.contains('\n')),
            "{name}: {section}"
        );
    }

    #[test]
    fn every_section_has_a_collector_and_appears_once() {
        for name in SECTIONS {
            assert!(collector(name).is_some(), "{name} has no collector");
            assert_eq!(SECTIONS.iter().filter(|n| *n == name).count(), 1, "{name}");
        }
        assert!(collector("registry").is_none());
    }

    #[test]
    fn the_catalog_names_every_section_in_order() {
        let spec = kenny_proto::catalog::find("telemetry_collect").unwrap();
        assert!(spec.description.contains(&SECTIONS.join(", ")), "{}", spec.description);
    }

    #[tokio::test]
    async fn collects_every_section_by_default() {
        let started = Instant::now();
        let snapshot = collect(None).await;
        let took = started.elapsed();
        let mut names: Vec<&str> = snapshot.keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = SECTIONS
            .iter()
            .copied()
            .filter(|s| !PERSONAL_TELEMETRY_SECTIONS.contains(s))
            .collect();
        expected.sort_unstable();
        names.sort_unstable();
        assert_eq!(names, expected);
        for (name, section) in &snapshot {
            assert_section_shape(name, section);
            assert!(
                !section["summary"].as_str().unwrap().starts_with("collector failed"),
                "{name}: {section}"
            );
        }
        assert_eq!(snapshot["os"]["arch"], sysinfo::System::cpu_arch());
        assert!(snapshot["memory"]["total_bytes"].as_u64().unwrap() > 0);
        assert!(snapshot["uptime"]["seconds"].as_u64().unwrap() > 0);
        assert!(snapshot["disk"]["volumes"].is_array());
        assert!(snapshot["cpu"]["cores"].as_u64().unwrap() >= 1);
        assert!(snapshot["processes"]["count"].as_u64().unwrap() >= 1);
        if cfg!(not(windows)) {
            for name in ["defender", "win_update"] {
                assert_eq!(
                    snapshot[name],
                    json!({"status": "ok", "summary": "n/a on this platform", "applicable": false,
                           "reason": "a Windows feature; this PC does not run Windows"})
                );
            }
        }
        eprintln!("full telemetry collection took {} ms", took.as_millis());
    }

    /// Times a few full collections, then each section alone; `cargo test -p kenny-agent --lib telemetry_timing -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "a measurement, not a check"]
    async fn telemetry_timing() {
        let mut samples = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let snapshot = collect(None).await;
            samples.push(started.elapsed().as_millis());
            assert_eq!(snapshot.len(), SECTIONS.len() - PERSONAL_TELEMETRY_SECTIONS.len());
        }
        eprintln!("full collection, 5 runs (ms): {samples:?}");
        for name in SECTIONS {
            let run = collector(name).unwrap();
            let started = Instant::now();
            let _ = run_collectors(vec![(name, run)], COLLECT_TIME).await;
            eprintln!("  {name}: {} ms alone", started.elapsed().as_millis());
        }
    }

    #[tokio::test]
    async fn the_tool_collects_only_the_sections_asked_for() {
        let out = collect_tool(typed(json!({"sections": ["memory", "os"]})))
            .await
            .unwrap();
        let snapshot = out["snapshot"].as_object().unwrap();
        let mut names: Vec<&str> = snapshot.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["memory", "os"]);
        let stamp = out["collected_at"].as_str().unwrap();
        let parsed = OffsetDateTime::parse(stamp, &Rfc3339).unwrap();
        assert!(
            (OffsetDateTime::now_utc() - parsed).whole_seconds().abs() < 60,
            "{stamp}"
        );
        assert!(stamp.ends_with('Z'), "{stamp}");
    }

    #[tokio::test]
    async fn an_unknown_section_is_refused_with_the_known_ones() {
        let err = collect_tool(typed(json!({"sections": ["disk", "registry"]})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(err.message.contains("`registry`"), "{}", err.message);
        assert!(err.message.contains(&SECTIONS.join(", ")), "{}", err.message);
    }

    fn panics() -> Outcome {
        panic!("sensor on fire")
    }

    fn errors() -> Outcome {
        Err("no such counter".to_owned())
    }

    fn hangs() -> Outcome {
        std::thread::sleep(Duration::from_secs(3));
        Ok(section(Status::Ok, "too late".into(), json!({})))
    }

    fn hangs_async() -> BoxFuture<'static, Outcome> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(section(Status::Ok, "never".into(), json!({})))
        })
    }

    fn panics_async() -> BoxFuture<'static, Outcome> {
        Box::pin(async { panic!("task on fire") })
    }

    fn quick() -> Outcome {
        Ok(section(Status::Warn, "fine".into(), json!({"x": 1})))
    }

    #[tokio::test]
    async fn a_stuck_thread_under_an_async_collector_is_not_joined_by_another() {
        let limit = Duration::from_millis(100);
        let first = off_thread_within("stuck_inner", limit, || std::thread::sleep(Duration::from_secs(2)));
        assert!(tokio::time::timeout(Duration::from_millis(50), first).await.is_err());
        tokio::time::sleep(Duration::from_millis(150)).await;
        let again = off_thread_within("stuck_inner", limit, || 1).await;
        assert_eq!(again, Err(STUCK.to_owned()));
        assert_eq!(off_thread_within("fine_inner", limit, || 2).await, Ok(2));
    }

    #[tokio::test]
    async fn a_failing_collector_does_not_take_the_others_down() {
        use Collector::{Async, Blocking};
        let started = Instant::now();
        let snapshot = run_collectors(
            vec![
                ("boom", Blocking(panics)),
                ("bad", Blocking(errors)),
                ("stuck", Blocking(hangs)),
                ("stuck_task", Async(hangs_async)),
                ("boom_task", Async(panics_async)),
                ("quick", Blocking(quick)),
                ("os", Blocking(os::os_section)),
            ],
            Duration::from_millis(500),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the deadline bounds the wait"
        );
        assert_eq!(snapshot["boom"]["status"], "crit");
        let boom = snapshot["boom"]["summary"].as_str().unwrap();
        assert!(
            boom.starts_with("collector failed:") && boom.contains("sensor on fire"),
            "{boom}"
        );
        assert_eq!(
            snapshot["bad"],
            json!({"status": "crit", "summary": "collector failed: no such counter"})
        );
        for stuck in ["stuck", "stuck_task"] {
            assert_eq!(
                snapshot[stuck],
                json!({"status": "crit", "summary": "collector failed: no answer within 0.5s"}),
                "{stuck}"
            );
        }
        // The stuck thread is still sleeping: the next collection does not start another
        // one beside it. The cancelled task is gone (once the runtime has dropped it), so
        // its section simply runs again.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let again = run_collectors(
            vec![("stuck", Blocking(hangs)), ("stuck_task", Async(hangs_async))],
            Duration::from_millis(200),
        )
        .await;
        assert!(
            again["stuck"]["summary"]
                .as_str()
                .unwrap()
                .contains("previous run has not finished"),
            "{again:?}"
        );
        assert_eq!(
            again["stuck_task"]["summary"],
            "collector failed: no answer within 0.2s"
        );
        assert!(
            snapshot["boom_task"]["summary"]
                .as_str()
                .unwrap()
                .contains("task on fire"),
            "{}",
            snapshot["boom_task"]
        );
        assert_eq!(snapshot["quick"], json!({"status": "warn", "summary": "fine", "x": 1}));
        assert!(snapshot["os"]["summary"].as_str().is_some_and(|s| s.contains(" on ")));
    }
}
