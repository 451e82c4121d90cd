//! The scheduled_tasks section: jobs the PC runs on a schedule, and whether their last run failed.
//!
//! Windows: Task Scheduler tasks outside `\Microsoft\` (the ones Windows ships are
//! counted, not listed) with their last and next run from `Get-ScheduledTaskInfo`.
//! `last_result` is the task's Win32/HRESULT code; 0 and the informational SCHED_S_*
//! codes (running, not run yet, ...) are not failures. Linux: systemd timers
//! (`systemctl list-timers`, with the `Result` of the unit each one starts) and cron
//! jobs. There `last_result` is systemd's word (`success`, `exit-code`, ...), and null
//! for cron, which keeps no record.

mod cron;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, first_line};
use super::files::etc_root;
use super::format::rfc3339_from_unix;
use super::services::{capped, counted};
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, section as make_section};
use crate::tools::psjson;
use crate::tools::systemd::is_running as systemd_running;

/// Listed in full; the rest are counted.
const MAX_LISTED: usize = 100;
const TEXT_CHARS: usize = 200;
const ACTION_CHARS: usize = 300;
const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(6);
const MAX_NOTES: usize = 10;
/// SCHED_S_TASK_READY .. SCHED_S_*: informational results (running, has not run, no
/// more runs, terminated by the user), not failures.
const SCHED_S_CODES: std::ops::RangeInclusive<i64> = 0x0004_1300..=0x0004_1325;
/// Task Scheduler's "never ran" LastRunTime is 1999-11-30; anything before 2000 is that.
const YEAR_2000: i64 = 946_684_800;

static QUERY: Query = Query {
    script: r"$ErrorActionPreference = 'Stop'
$all = @(Get-ScheduledTask)
$mine = @($all | Where-Object { $_.TaskPath -notlike '\Microsoft\*' })
$tasks = @($mine | Select-Object -First 100 | ForEach-Object {
  $info = $null
  try { $info = Get-ScheduledTaskInfo -InputObject $_ -ErrorAction Stop } catch { }
  [pscustomobject]@{
    Path = $_.TaskPath
    Name = $_.TaskName
    State = [string]$_.State
    Action = (@($_.Actions | ForEach-Object { ([string]$_.Execute + ' ' + [string]$_.Arguments).Trim() }) -join '; ')
    RunAs = $_.Principal.UserId
    LastRunTime = $(if ($info) { $info.LastRunTime } else { $null })
    LastTaskResult = $(if ($info) { $info.LastTaskResult } else { $null })
    NextRunTime = $(if ($info) { $info.NextRunTime } else { $null })
  }
})
[pscustomobject]@{ Total = $all.Count; Count = $mine.Count; Tasks = $tasks } | ConvertTo-Json -Compress -Depth 4
",
    limit: Duration::from_secs(12),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

/// One scheduled job, in the fields both OSes share.
#[derive(Debug, Clone, Default, PartialEq)]
struct Task {
    /// Windows: the task's folder (`\Vendor\`); Linux: the file or `systemd`.
    path: String,
    name: String,
    state: String,
    action: Option<String>,
    run_as: Option<String>,
    /// A cron schedule (`17 3 * * *`, `@daily`, `daily` for run-parts folders).
    schedule: Option<String>,
    last_run: Option<String>,
    next_run: Option<String>,
    last_result: Value,
    /// Whether the last run failed, when the source can tell.
    failed: bool,
}

impl Task {
    /// Windows tasks by their full path (`\Vendor\Backup`), others by name.
    fn display_name(&self) -> String {
        if self.path.starts_with('\\') {
            format!("{}{}", self.path, self.name)
        } else {
            self.name.clone()
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "path": capped(&self.path, TEXT_CHARS),
            "name": capped(&self.name, TEXT_CHARS),
            "state": self.state,
            "action": self.action.as_deref().map(|a| capped(a, ACTION_CHARS)),
            "run_as": self.run_as.as_deref().map(|u| capped(u, TEXT_CHARS)),
            "schedule": self.schedule,
            "last_run": self.last_run,
            "next_run": self.next_run,
            "last_result": self.last_result,
        })
    }
}

// ---- Windows ----

fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Some(reply) = psjson::rows_of(value)?.into_iter().next() else {
        return Err("PowerShell printed nothing for the scheduled tasks query".to_owned());
    };
    let tasks: Vec<Task> = psjson::rows_of(reply.get("Tasks").cloned().unwrap_or(Value::Null))?
        .iter()
        .filter_map(windows_task)
        .collect();
    let count = count_of(&reply, "Count").unwrap_or(tasks.len());
    let total = count_of(&reply, "Total").unwrap_or(count);
    Ok(build(
        tasks,
        count,
        total,
        ("non-Microsoft task", "non-Microsoft tasks"),
        Vec::new(),
    ))
}

fn count_of(reply: &Map<String, Value>, key: &str) -> Option<usize> {
    psjson::number(reply, key).and_then(|n| usize::try_from(n).ok())
}

fn windows_task(row: &Map<String, Value>) -> Option<Task> {
    let name = psjson::text(row, "Name")?;
    let state = psjson::text(row, "State").unwrap_or_else(|| "Unknown".to_owned());
    let result = psjson::number(row, "LastTaskResult");
    let when = |key: &str| {
        row.get(key)
            .and_then(psjson::date)
            .filter(|at| at.unix_timestamp() >= YEAR_2000)
            .and_then(|at| rfc3339_from_unix(at.unix_timestamp()))
    };
    let last_run = when("LastRunTime");
    let failed = state != "Disabled" && last_run.is_some() && result.is_some_and(windows_failure);
    Some(Task {
        path: psjson::text(row, "Path").unwrap_or_else(|| "\\".to_owned()),
        name,
        state,
        action: psjson::text(row, "Action"),
        run_as: psjson::text(row, "RunAs"),
        schedule: None,
        last_run,
        next_run: when("NextRunTime"),
        last_result: result.map_or(Value::Null, Value::from),
        failed,
    })
}

fn windows_failure(code: i64) -> bool {
    code != 0 && !SCHED_S_CODES.contains(&code)
}

// ---- Linux ----

pub(super) async fn section() -> Outcome {
    let mut notes = Vec::new();
    let mut tasks = if systemd_running() {
        match timers(&mut notes).await {
            Ok(timers) => timers,
            Err(e) => {
                notes.push(format!("systemd timers could not be listed: {e}"));
                Vec::new()
            }
        }
    } else {
        notes.push("systemd is not running, so there are no systemd timers".to_owned());
        Vec::new()
    };
    let (jobs, cron_notes) = cron::cron_at(&etc_root(), Path::new("/var/spool/cron"));
    tasks.extend(jobs);
    notes.extend(cron_notes);
    let count = tasks.len();
    Ok(build(tasks, count, count, ("scheduled job", "scheduled jobs"), notes))
}

async fn systemctl(args: &[&str]) -> Result<String, String> {
    let output = command::run("systemctl", args, SYSTEMCTL_TIMEOUT)
        .await
        .map_err(|e| e.describe("systemctl"))?;
    if !output.success {
        return Err(format!("`systemctl {}` failed: {}", args[0], first_line(&output)));
    }
    Ok(output.stdout)
}

async fn timers(notes: &mut Vec<String>) -> Result<Vec<Task>, String> {
    let listing = systemctl(&["list-timers", "--all", "--no-pager", "--output=json"]).await?;
    let mut tasks = match parse_timers_json(&listing) {
        Some(tasks) => tasks,
        None => {
            // systemd before 246 prints its table whatever --output says; its times are
            // in the local zone and words, so only the units are taken from it.
            notes.push("systemd older than 246: the timers' next and last run times are not read".to_owned());
            parse_timers_table(&systemctl(&["list-timers", "--all", "--no-pager", "--no-legend"]).await?)
        }
    };
    let units: Vec<&str> = tasks.iter().filter_map(|t| t.action.as_deref()).collect();
    if !units.is_empty() {
        let mut args = vec!["show", "--no-pager", "--property=Id,Result"];
        args.extend(units);
        // Without results the timers are still worth listing.
        if let Ok(text) = systemctl(&args).await {
            apply_results(&mut tasks, &parse_results(&text));
        }
    }
    Ok(tasks)
}

/// The table `list-timers --no-legend` prints: times in words, then the timer and the
/// unit it starts as the last two columns.
fn parse_timers_table(table: &str) -> Vec<Task> {
    table
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().rev();
            let activates = words.next()?;
            let unit = words.next()?;
            unit.ends_with(".timer").then(|| Task {
                path: "systemd".to_owned(),
                name: unit.to_owned(),
                state: "unknown".to_owned(),
                action: Some(activates.to_owned()),
                ..Task::default()
            })
        })
        .collect()
}

/// `systemctl list-timers --all --output=json`: `[{next, left, last, passed, unit,
/// activates}]`, times in microseconds since 1970 (0 or null when there is none).
fn parse_timers_json(text: &str) -> Option<Vec<Task>> {
    let text = text.trim();
    if !text.starts_with('[') {
        return None;
    }
    let rows: Vec<Map<String, Value>> = serde_json::from_str(text).ok()?;
    let when = |row: &Map<String, Value>, key: &str| {
        row.get(key)
            .and_then(Value::as_u64)
            .filter(|&us| us > 0)
            .and_then(|us| rfc3339_from_unix(i64::try_from(us / 1_000_000).ok()?))
    };
    Some(
        rows.iter()
            .filter_map(|row| {
                let unit = row.get("unit")?.as_str()?.to_owned();
                let next_run = when(row, "next");
                Some(Task {
                    path: "systemd".to_owned(),
                    state: if next_run.is_some() { "waiting" } else { "inactive" }.to_owned(),
                    action: row.get("activates").and_then(Value::as_str).map(str::to_owned),
                    run_as: None,
                    schedule: None,
                    last_run: when(row, "last"),
                    next_run,
                    last_result: Value::Null,
                    failed: false,
                    name: unit,
                })
            })
            .collect(),
    )
}

/// `systemctl show --property=Id,Result a.service b.service`: blocks of `Key=value`.
fn parse_results(text: &str) -> HashMap<String, String> {
    let mut results = HashMap::new();
    let mut id = None;
    let mut result = None;
    for line in text.lines().chain([""]) {
        if line.trim().is_empty() {
            if let (Some(id), Some(result)) = (id.take(), result.take()) {
                results.insert(id, result);
            }
            continue;
        }
        match line.split_once('=') {
            Some(("Id", value)) => id = Some(value.trim().to_owned()),
            Some(("Result", value)) => result = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    results
}

/// A unit that never ran has `Result=success` too, so anything else means a run failed.
fn apply_results(tasks: &mut [Task], results: &HashMap<String, String>) {
    for task in tasks {
        let Some(result) = task.action.as_ref().and_then(|unit| results.get(unit)) else {
            continue;
        };
        task.failed = result != "success";
        task.last_result = Value::from(result.clone());
    }
}

// ---- both ----

/// `count` is what this section is about (non-Microsoft tasks on Windows), `total` all
/// there are; `tasks` may be fewer than `count` when the query already cut them.
fn build(tasks: Vec<Task>, count: usize, total: usize, noun: (&str, &str), notes: Vec<String>) -> Section {
    let failed: Vec<String> = tasks
        .iter()
        .filter(|t| t.failed)
        .map(|t| {
            let code = match &t.last_result {
                Value::Number(n) => n.as_i64().map(|c| format!(" ({})", result_code(c))),
                Value::String(s) => Some(format!(" ({s})")),
                _ => None,
            };
            format!("{}{}", capped(&t.display_name(), 80), code.unwrap_or_default())
        })
        .collect();
    let scope = if total > count {
        format!("{} ({total} total)", counted(count, noun.0, noun.1))
    } else {
        counted(count, noun.0, noun.1)
    };
    let (status, summary) = if failed.is_empty() {
        (Status::Ok, scope)
    } else {
        let more = if failed.len() > 3 {
            format!(" and {} more", failed.len() - 3)
        } else {
            String::new()
        };
        (
            Status::Warn,
            format!(
                "{scope}; last run failed: {}{more}",
                failed.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            ),
        )
    };
    let listed: Vec<Value> = tasks.iter().take(MAX_LISTED).map(Task::to_json).collect();
    let mut fields = json!({
        "tasks": listed,
        "count": count,
        "total_count": total,
        "failed": failed.len(),
        "truncated": count > listed.len(),
    });
    if !notes.is_empty() {
        let notes: Vec<String> = notes.iter().take(MAX_NOTES).map(|n| capped(n, TEXT_CHARS)).collect();
        fields["notes"] = json!(notes);
    }
    make_section(status, summary, fields)
}

/// Small codes (1, 2) are Win32 errors, read as decimals; HRESULTs as hex.
fn result_code(code: i64) -> String {
    if code > 0xFFFF {
        format!("0x{code:08X}")
    } else {
        code.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // `systemctl list-timers --all --output=json` (systemd 252): one timer that ran,
    // one that never ran and waits, one with no next run.
    const TIMERS: &str = r#"[{"next":1780642800000000,"left":1780642800000000,"last":1780556400123456,"passed":1780556400123456,"unit":"apt-daily.timer","activates":"apt-daily.service"},{"next":1780650000000000,"left":1780650000000000,"last":null,"passed":null,"unit":"fstrim.timer","activates":"fstrim.service"},{"next":0,"left":0,"last":1780470000000000,"passed":1780470000000000,"unit":"backup.timer","activates":"backup.service"}]"#;
    const RESULTS: &str = "Id=apt-daily.service\nResult=success\n\nId=fstrim.service\nResult=success\n\nId=backup.service\nResult=exit-code\n";

    #[test]
    fn timers_with_the_result_of_their_unit() {
        let mut tasks = parse_timers_json(TIMERS).unwrap();
        apply_results(&mut tasks, &parse_results(RESULTS));
        assert_eq!(tasks.len(), 3);
        assert_eq!(
            tasks[0].to_json(),
            json!({"path": "systemd", "name": "apt-daily.timer", "state": "waiting", "action": "apt-daily.service",
                   "run_as": null, "schedule": null, "last_run": "2026-06-04T07:00:00Z",
                   "next_run": "2026-06-05T07:00:00Z", "last_result": "success"})
        );
        assert_eq!((tasks[1].last_run.as_deref(), tasks[1].failed), (None, false));
        assert_eq!((tasks[2].state.as_str(), tasks[2].failed), ("inactive", true));
        let count = tasks.len();
        let section = build(tasks, count, count, ("scheduled job", "scheduled jobs"), Vec::new());
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "3 scheduled jobs; last run failed: backup.timer (exit-code)"
        );
        assert_eq!(
            (section["count"].as_u64(), section["total_count"].as_u64()),
            (Some(3), Some(3))
        );
        assert!(parse_timers_json("NEXT LEFT LAST PASSED UNIT ACTIVATES").is_none());
    }

    #[test]
    fn timers_from_the_table_of_an_old_systemd() {
        // `systemctl list-timers --all --no-legend` on Ubuntu 20.04 (systemd 245).
        let table = "\
Tue 2026-06-05 07:12:41 CEST 7h left       Mon 2026-06-04 07:01:02 CEST 16h ago     apt-daily-upgrade.timer      apt-daily-upgrade.service
n/a                          n/a           Mon 2026-06-04 10:00:00 CEST 14h ago     backup.timer                 backup.service
n/a                          n/a           n/a                          n/a         snapd.snap-repair.timer      snapd.snap-repair.service
";
        let tasks = parse_timers_table(table);
        let names: Vec<(&str, Option<&str>)> = tasks.iter().map(|t| (t.name.as_str(), t.action.as_deref())).collect();
        assert_eq!(
            names,
            [
                ("apt-daily-upgrade.timer", Some("apt-daily-upgrade.service")),
                ("backup.timer", Some("backup.service")),
                ("snapd.snap-repair.timer", Some("snapd.snap-repair.service"))
            ]
        );
        assert_eq!(tasks[0].next_run, None);
        assert!(parse_timers_table("0 timers listed.\n").is_empty());
    }

    #[test]
    fn cron_lines_in_both_formats() {
        let system = "\
SHELL=/bin/sh
PATH = /usr/local/sbin:/usr/local/bin:/sbin:/bin
# m h dom mon dow user  command
17 *\t* * *\troot    cd / && run-parts --report /etc/cron.hourly
@reboot root /usr/local/bin/mount-nas --wait
30 2 * * 1-5 backup /opt/backup/run.sh --full >/dev/null 2>&1
5 4 * * *
";
        let jobs = cron::parse_crontab(system, None);
        assert_eq!(jobs.len(), 3, "{jobs:?}");
        assert_eq!(jobs[0].schedule.as_deref(), Some("17 * * * *"));
        assert_eq!(jobs[0].run_as.as_deref(), Some("root"));
        assert_eq!(
            jobs[0].action.as_deref(),
            Some("cd / && run-parts --report /etc/cron.hourly")
        );
        assert_eq!(jobs[1].schedule.as_deref(), Some("@reboot"));
        assert_eq!(jobs[1].name, "mount-nas");
        assert_eq!(jobs[2].run_as.as_deref(), Some("backup"));
        assert_eq!(jobs[2].name, "run.sh");
        assert_eq!(jobs[0].name, "run-parts");
        let guarded = cron::parse_crontab(
            "30 3 * * 0 root test -e /run/systemd/system || SERVICE_MODE=1 /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron\n\
             25 6 * * * root test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }\n\
             0 0 * * * root test -x /bin/true\n",
            None,
        );
        let names: Vec<&str> = guarded.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["e2scrub_all_cron", "run-parts", "test"]);
        let user = cron::parse_crontab(
            "MAILTO=kim\n*/10 * * * * /home/kim/bin/sync a=b\n@daily rm -rf ~/tmp/*\n",
            Some("kim"),
        );
        assert_eq!(user.len(), 2);
        assert_eq!(
            (user[0].run_as.as_deref(), user[0].name.as_str()),
            (Some("kim"), "sync")
        );
        assert_eq!(user[0].action.as_deref(), Some("/home/kim/bin/sync a=b"));
        assert_eq!(user[1].schedule.as_deref(), Some("@daily"));
    }

    #[cfg(unix)]
    #[test]
    fn a_fake_etc_and_spool() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        let spool = root.path().join("spool");
        for dir in ["cron.d", "cron.daily", "cron.weekly"] {
            std::fs::create_dir_all(etc.join(dir)).unwrap();
        }
        std::fs::create_dir_all(spool.join("crontabs")).unwrap();
        std::fs::write(
            etc.join("crontab"),
            "25 6 * * * root test -x /usr/sbin/anacron || run-parts /etc/cron.daily\n",
        )
        .unwrap();
        std::fs::write(
            etc.join("cron.d/e2scrub_all"),
            "10 3 * * 0 root /usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron\n",
        )
        .unwrap();
        std::fs::write(etc.join("cron.d/old.dpkg-old"), "* * * * * root /never\n").unwrap();
        std::fs::write(etc.join("cron.daily/logrotate"), "#!/bin/sh\n").unwrap();
        std::fs::write(etc.join("cron.daily/.placeholder"), "").unwrap();
        std::fs::write(spool.join("crontabs/kim"), "0 * * * * /home/kim/bin/sync\n").unwrap();
        let (tasks, notes) = cron::cron_at(&etc, &spool);
        assert!(notes.is_empty(), "{notes:?}");
        let names: Vec<(&str, &str)> = tasks
            .iter()
            .map(|t| (t.path.rsplit('/').next().unwrap(), t.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("crontab", "run-parts"),
                ("e2scrub_all", "e2scrub_all_cron"),
                ("cron.daily", "logrotate"),
                ("kim", "sync")
            ]
        );
        assert_eq!(tasks[2].schedule.as_deref(), Some("daily"));
        assert_eq!(tasks[3].run_as.as_deref(), Some("kim"));

        std::fs::write(spool.join("crontabs/root"), "* * * * * /x\n").unwrap();
        let mut perms = std::fs::metadata(spool.join("crontabs/root")).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o000);
        std::fs::set_permissions(spool.join("crontabs/root"), perms).unwrap();
        let (_, notes) = cron::cron_at(&etc, &spool);
        // Root reads it anyway; a normal user is told what it could not read.
        if !notes.is_empty() {
            assert!(
                notes[0].starts_with("cannot read ") && notes[0].contains("crontabs/root"),
                "{notes:?}"
            );
        }
    }

    #[test]
    fn windows_results_and_failures() {
        assert!(!windows_failure(0));
        assert!(!windows_failure(0x41301), "running");
        assert!(!windows_failure(0x41303), "has not run yet");
        assert!(windows_failure(1));
        assert!(windows_failure(0x8007_0002));
        assert_eq!(result_code(1), "1");
        assert_eq!(result_code(0x8007_0005), "0x80070005");
    }

    #[test]
    fn many_tasks_are_cut_and_counted() {
        let tasks: Vec<Task> = (0..MAX_LISTED + 1)
            .map(|i| Task {
                name: format!("job{i}"),
                ..Task::default()
            })
            .collect();
        let section = build(
            tasks,
            150,
            400,
            ("non-Microsoft task", "non-Microsoft tasks"),
            vec!["x".into()],
        );
        assert_eq!(section["summary"], "150 non-Microsoft tasks (400 total)");
        assert_eq!(section["tasks"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(section["truncated"], true);
        assert_eq!(section["notes"], json!(["x"]));
    }

    #[test]
    fn the_windows_query_reads_task_scheduler() {
        let script = windows_query().unwrap().script;
        assert!(script.contains("Get-ScheduledTask)"));
        assert!(script.contains("Get-ScheduledTaskInfo -InputObject $_"));
        assert!(script.contains(r"$_.TaskPath -notlike '\Microsoft\*'"));
        assert!(
            script.contains("Select-Object -First 100"),
            "the query lists no more than the section keeps"
        );
        assert!(script.contains(&MAX_LISTED.to_string()));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers() {
        let section = section().await.unwrap();
        assert!(section["count"].is_u64() && section["tasks"].is_array(), "{section:?}");
        if !systemd_running() {
            assert!(
                section["notes"].to_string().contains("no systemd timers"),
                "{section:?}"
            );
        }
    }
}
