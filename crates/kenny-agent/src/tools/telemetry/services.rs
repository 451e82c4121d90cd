//! The failed_services and services sections: services that failed, and every service with its state.
//!
//! Linux: systemd units (`systemctl list-units`, with `list-unit-files` for how each one
//! starts). Without systemd as the init system there are no units to fail or list; that
//! is reported as `ok` with a note, since it is how the PC is built, not something wrong
//! with it. Windows: Win32_Service, where a service failed when it is set to start
//! automatically but is stopped with an exit code other than 0 (stopped normally) or
//! 1077 (never started since boot).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, first_line};
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, section};
use crate::tools::services::{Service, Unit, parse_units_json, parse_units_text, parse_win32_services};
use crate::tools::systemd::{is_running as systemd_running, pid1_name};

const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(8);
/// Listed by name; more than this many failed units is a story the count tells.
const MAX_LISTED: usize = 50;
/// Every service of a PC: a Windows PC has about 300, a Linux desktop fewer.
const MAX_SERVICES: usize = 400;
/// Names and descriptions come from the PC; a hostile one could make them long.
const TEXT_CHARS: usize = 200;

/// Services set to start automatically that are stopped; the parser keeps those whose
/// exit code says they failed.
static FAILED_QUERY: Query = Query {
    script: "$ErrorActionPreference = 'Stop'
Get-CimInstance -ClassName Win32_Service -Filter \"StartMode='Auto' AND State='Stopped'\" |
  Select-Object Name,DisplayName,State,StartMode,ProcessId,ExitCode |
  ConvertTo-Json -Compress -Depth 2
",
    limit: Duration::from_secs(10),
    parse: parse_failed_windows,
};

static SERVICES_QUERY: Query = Query {
    script: "$ErrorActionPreference = 'Stop'
Get-CimInstance -ClassName Win32_Service |
  Select-Object Name,DisplayName,State,StartMode,ProcessId,ExitCode |
  ConvertTo-Json -Compress -Depth 2
",
    limit: Duration::from_secs(10),
    parse: parse_services_windows,
};

pub(super) fn windows_query(section: &str) -> Option<&'static Query> {
    match section {
        "failed_services" => Some(&FAILED_QUERY),
        "services" => Some(&SERVICES_QUERY),
        _ => None,
    }
}

/// `n thing` or `n things`.
pub(super) fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

pub(super) use super::format::clip as capped;

fn no_systemd(empty_list: &str, summary: &str) -> Section {
    let init = pid1_name();
    let mut fields = json!({
        "count": 0,
        "truncated": false,
        "note": format!("PID 1 is `{init}`, not systemd, so there are no systemd units to list"),
    });
    fields[empty_list] = json!([]);
    section(Status::Ok, summary.to_owned(), fields)
}

async fn systemctl(args: &[&str]) -> Result<String, String> {
    let output = command::run("systemctl", args, SYSTEMCTL_TIMEOUT)
        .await
        .map_err(|e| e.describe("systemctl"))?;
    if !output.success {
        return Err(format!(
            "`systemctl {}` failed: {}",
            args.join(" "),
            first_line(&output)
        ));
    }
    if output.truncated {
        return Err(format!(
            "`systemctl {}` printed more than the agent keeps",
            args.join(" ")
        ));
    }
    Ok(output.stdout)
}

// ---- failed_services ----

pub(super) async fn failed_services_section() -> Outcome {
    if !systemd_running() {
        return Ok(no_systemd("units", "systemd not running; nothing to check"));
    }
    let table = systemctl(&[
        "list-units",
        "--state=failed",
        "--no-legend",
        "--plain",
        "--no-pager",
        "--full",
    ])
    .await?;
    Ok(build_failed(
        parse_units_text(&table).iter().map(unit_json).collect(),
        "unit",
    ))
}

fn unit_json(unit: &Unit) -> Value {
    json!({
        "name": capped(&unit.name, TEXT_CHARS),
        "load": unit.load,
        "active": unit.active,
        "sub": unit.sub,
        "description": capped(&unit.description, TEXT_CHARS),
    })
}

fn parse_failed_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let failed: Vec<Value> = win32_services(output)?
        .into_iter()
        .filter(failed_automatic)
        .map(|s| {
            json!({
                "name": capped(s.entry["name"].as_str().unwrap_or_default(), TEXT_CHARS),
                "description": s.entry["description"].as_str().map(|d| capped(d, TEXT_CHARS)),
                "active": "failed",
                "sub": "stopped",
                "start_type": "auto",
                "exit_code": s.entry["exit_code"],
            })
        })
        .collect();
    Ok(build_failed(failed, "service"))
}

fn win32_services(output: &Output) -> Result<Vec<Service>, String> {
    let value = json_of(output)?;
    let mut services = parse_win32_services(&value.to_string())?;
    services.sort_by_cached_key(|s| s.entry["name"].as_str().map(str::to_lowercase));
    Ok(services)
}

fn start_mode(service: &Service) -> Option<&str> {
    service.entry["start_type"].as_str()
}

/// A service someone stopped by hand, or one started only on demand, may well end with
/// an error code without anything being wrong; one meant to run all the time may not.
fn failed_automatic(service: &Service) -> bool {
    service.standing.failed && start_mode(service) == Some("auto")
}

/// `units` are `{name, ...}` objects; `noun` is what the OS calls them.
fn build_failed(units: Vec<Value>, noun: &str) -> Section {
    let count = units.len();
    let (status, summary) = if count == 0 {
        (Status::Ok, format!("no failed {noun}s"))
    } else {
        let names: Vec<&str> = units.iter().take(3).filter_map(|u| u["name"].as_str()).collect();
        let more = if count > 3 {
            format!(" and {} more", count - 3)
        } else {
            String::new()
        };
        let noun = if count == 1 {
            noun.to_owned()
        } else {
            format!("{noun}s")
        };
        (
            Status::Warn,
            format!("{count} failed {noun}: {}{more}", names.join(", ")),
        )
    };
    let listed: Vec<Value> = units.into_iter().take(MAX_LISTED).collect();
    section(
        status,
        summary,
        json!({ "units": listed, "count": count, "truncated": count > MAX_LISTED }),
    )
}

// ---- services ----

/// One service as the section lists it, in the same words on both OSes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    name: String,
    description: Option<String>,
    /// systemd's words: active, inactive, failed, activating, ...
    active: String,
    /// The finer state: running, exited, dead, stopped, ...
    sub: String,
    /// Linux: the unit file's state (enabled, disabled, static, masked); Windows: the
    /// start mode (auto, manual, disabled, boot, system).
    start_type: Option<String>,
}

impl Row {
    fn failed(&self) -> bool {
        self.active == "failed"
    }

    fn running(&self) -> bool {
        self.sub == "running"
    }
}

pub(super) async fn services_section() -> Outcome {
    if !systemd_running() {
        return Ok(no_systemd("services", "systemd not running; no services to list"));
    }
    let base = ["list-units", "--type=service", "--all", "--no-pager", "--full"];
    // JSON needs systemd 246+; older versions print their table instead.
    let json_reply = systemctl(&[&base[..], &["--output=json"]].concat()).await?;
    let units = match parse_units_json(&json_reply) {
        Some(units) => units,
        None => parse_units_text(&systemctl(&[&base[..], &["--plain", "--no-legend"]].concat()).await?),
    };
    let files = systemctl(&[
        "list-unit-files",
        "--type=service",
        "--no-legend",
        "--no-pager",
        "--plain",
        "--full",
    ])
    .await;
    let (states, note) = match files {
        Ok(table) => (parse_unit_file_states(&table), None),
        Err(e) => (HashMap::new(), Some(format!("start types unknown: {e}"))),
    };
    let rows = units.iter().map(|u| unit_row(u, &states)).collect();
    let mut built = build_services(rows);
    if let Some(note) = note {
        built.insert("note".into(), note.into());
    }
    Ok(built)
}

/// `list-unit-files --plain --no-legend`: `UNIT STATE [PRESET]` a line.
fn parse_unit_file_states(table: &str) -> HashMap<String, String> {
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some((fields.next()?.to_owned(), fields.next()?.to_owned()))
        })
        .collect()
}

fn unit_row(unit: &Unit, states: &HashMap<String, String>) -> Row {
    // Instances (getty@tty1.service) have no unit file of their own; their template does.
    let template = unit
        .name
        .split_once('@')
        .and_then(|(prefix, rest)| rest.rsplit_once('.').map(|(_, kind)| format!("{prefix}@.{kind}")));
    let start_type = states
        .get(&unit.name)
        .or_else(|| template.and_then(|t| states.get(&t)))
        .cloned();
    Row {
        name: unit.name.clone(),
        description: Some(unit.description.clone()).filter(|d| !d.is_empty()),
        active: unit.active.clone(),
        sub: unit.sub.clone(),
        start_type,
    }
}

fn parse_services_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let rows: Vec<Row> = win32_services(output)?.iter().map(service_row).collect();
    if rows.is_empty() {
        // Windows cannot run without services; an empty answer means WMI is broken.
        return Err(
            "Win32_Service listed no services at all; WMI may need repair (winmgmt /verifyrepository)".to_owned(),
        );
    }
    Ok(build_services(rows))
}

/// Win32_Service in systemd's words, so the dashboard reads both alike.
fn service_row(service: &Service) -> Row {
    let state = service.entry["sub"].as_str().unwrap_or_default().to_lowercase();
    let active = if failed_automatic(service) {
        "failed".to_owned()
    } else if service.standing.running {
        "active".to_owned()
    } else if service.standing.stopped {
        "inactive".to_owned()
    } else {
        service.entry["active"].as_str().unwrap_or("unknown").to_owned()
    };
    Row {
        name: service.entry["name"].as_str().unwrap_or_default().to_owned(),
        description: service.entry["description"].as_str().map(str::to_owned),
        active,
        sub: if state.is_empty() { "unknown".to_owned() } else { state },
        start_type: start_mode(service).map(str::to_owned),
    }
}

fn build_services(mut rows: Vec<Row>) -> Section {
    // Failed ones first, so a cut list still shows them.
    rows.sort_by_cached_key(|r| (!r.failed(), r.name.to_lowercase()));
    let count = rows.len();
    let running = rows.iter().filter(|r| r.running()).count();
    let failed: Vec<&str> = rows.iter().filter(|r| r.failed()).map(|r| r.name.as_str()).collect();
    let (status, summary) = if failed.is_empty() {
        (
            Status::Ok,
            format!(
                "{}, {running} running, none failed",
                counted(count, "service", "services")
            ),
        )
    } else {
        let named: Vec<String> = failed.iter().take(3).map(|n| capped(n, 60)).collect();
        let more = if failed.len() > 3 {
            format!(" and {} more", failed.len() - 3)
        } else {
            String::new()
        };
        (
            Status::Warn,
            format!(
                "{}, {running} running, {} failed: {}{more}",
                counted(count, "service", "services"),
                failed.len(),
                named.join(", ")
            ),
        )
    };
    let failed_count = failed.len();
    let listed: Vec<Value> = rows
        .iter()
        .take(MAX_SERVICES)
        .map(|r| {
            json!({
                "name": capped(&r.name, TEXT_CHARS),
                "description": r.description.as_deref().map(|d| capped(d, TEXT_CHARS)),
                "active": r.active,
                "sub": r.sub,
                "start_type": r.start_type,
            })
        })
        .collect();
    section(
        status,
        summary,
        json!({
            "services": listed,
            "count": count,
            "running": running,
            "failed": failed_count,
            "truncated": count > MAX_SERVICES,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // `systemctl list-units --state=failed --no-legend --plain` on Debian 12, and a unit
    // as systemd 239 prints it when its file is gone.
    const FAILED: &str = "\
apt-daily.service            loaded failed failed Daily apt download activities
smartd.service               loaded failed failed Self Monitoring and Reporting Technology (SMART) Daemon
● ghost.mount                not-found failed failed ghost.mount
";

    fn failed_units(text: &str) -> Vec<Value> {
        parse_units_text(text).iter().map(unit_json).collect()
    }

    #[test]
    fn any_failed_unit_is_a_warning() {
        let section = build_failed(failed_units(FAILED), "unit");
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "3 failed units: apt-daily.service, smartd.service, ghost.mount"
        );
        assert_eq!(section["count"], 3);
        assert_eq!(
            section["units"][1],
            json!({"name": "smartd.service", "load": "loaded", "active": "failed", "sub": "failed",
                   "description": "Self Monitoring and Reporting Technology (SMART) Daemon"})
        );
        assert_eq!(section["units"][2]["load"], "not-found");
        let one = build_failed(failed_units(FAILED.lines().next().unwrap()), "unit");
        assert_eq!(one["summary"], "1 failed unit: apt-daily.service");
        let none = build_failed(vec![], "unit");
        assert_eq!(
            (none["status"].as_str(), none["summary"].as_str()),
            (Some("ok"), Some("no failed units"))
        );
        let many: Vec<Value> = (0..60)
            .flat_map(|i| failed_units(&format!("u{i}.service loaded failed failed U")))
            .collect();
        let many = build_failed(many, "unit");
        assert_eq!(many["units"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(many["truncated"], true);
        assert!(many["summary"].as_str().unwrap().ends_with("and 57 more"));
    }

    #[test]
    fn long_text_from_the_pc_is_capped() {
        assert_eq!(capped("  short ", 10), "short");
        let long = "x".repeat(500);
        let cut = capped(&long, TEXT_CHARS);
        assert_eq!(cut.chars().count(), TEXT_CHARS);
        assert!(cut.ends_with('…'));
        let unit = format!("{long}.service loaded failed failed {long}");
        let section = build_failed(failed_units(&unit), "unit");
        assert_eq!(
            section["units"][0]["name"].as_str().unwrap().chars().count(),
            TEXT_CHARS
        );
        assert_eq!(
            section["units"][0]["description"].as_str().unwrap().chars().count(),
            TEXT_CHARS
        );
    }

    // `systemctl list-units --type=service --all --output=json` (systemd 252) and
    // `list-unit-files --type=service --plain --no-legend`.
    const UNITS_JSON: &str = r#"[{"unit":"cron.service","load":"loaded","active":"active","sub":"running","description":"Regular background program processing daemon"},{"unit":"getty@tty1.service","load":"loaded","active":"active","sub":"running","description":"Getty on tty1"},{"unit":"apt-daily.service","load":"loaded","active":"inactive","sub":"dead","description":"Daily apt download activities"},{"unit":"smartd.service","load":"loaded","active":"failed","sub":"failed","description":"Self Monitoring and Reporting Technology (SMART) Daemon"},{"unit":"plymouth-quit.service","load":"not-found","active":"inactive","sub":"dead","description":"plymouth-quit.service"}]"#;
    const UNIT_FILES: &str = "\
apt-daily.service                      static          -
cron.service                           enabled         enabled
getty@.service                         enabled         enabled
smartd.service                         enabled         enabled
";

    #[test]
    fn every_unit_with_its_start_type_and_failed_ones_first() {
        let states = parse_unit_file_states(UNIT_FILES);
        let units = parse_units_json(UNITS_JSON).unwrap();
        let section = build_services(units.iter().map(|u| unit_row(u, &states)).collect());
        assert_eq!(section["status"], "warn");
        assert_eq!(section["summary"], "5 services, 2 running, 1 failed: smartd.service");
        assert_eq!(
            (section["count"].as_u64(), section["running"].as_u64()),
            (Some(5), Some(2))
        );
        assert_eq!(section["failed"], 1);
        assert_eq!(section["truncated"], false);
        let services = section["services"].as_array().unwrap();
        let names: Vec<&str> = services.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "smartd.service",
                "apt-daily.service",
                "cron.service",
                "getty@tty1.service",
                "plymouth-quit.service"
            ]
        );
        assert_eq!(
            services[2],
            json!({"name": "cron.service", "description": "Regular background program processing daemon",
                   "active": "active", "sub": "running", "start_type": "enabled"})
        );
        assert_eq!(services[1]["start_type"], "static");
        assert_eq!(
            services[3]["start_type"], "enabled",
            "an instance takes its template's state"
        );
        assert_eq!(services[4]["start_type"], Value::Null, "no unit file");

        let healthy = build_services(units[..3].iter().map(|u| unit_row(u, &states)).collect());
        assert_eq!(healthy["status"], "ok");
        assert_eq!(healthy["summary"], "3 services, 2 running, none failed");
        let many: Vec<Row> = (0..MAX_SERVICES + 5)
            .map(|i| {
                unit_row(
                    &parse_units_text(&format!("s{i}.service loaded active running S"))[0],
                    &states,
                )
            })
            .collect();
        let many = build_services(many);
        assert_eq!(many["services"].as_array().unwrap().len(), MAX_SERVICES);
        assert_eq!(many["count"], MAX_SERVICES + 5);
        assert_eq!(many["truncated"], true);
    }

    #[test]
    fn the_windows_queries_read_win32_service() {
        for section in ["failed_services", "services"] {
            let script = windows_query(section).unwrap().script;
            assert!(script.contains("Get-CimInstance -ClassName Win32_Service"), "{section}");
            assert!(script.contains("Select-Object Name,DisplayName,State,StartMode,ProcessId,ExitCode"));
        }
        assert!(
            FAILED_QUERY
                .script
                .contains("-Filter \"StartMode='Auto' AND State='Stopped'\"")
        );
        assert!(!SERVICES_QUERY.script.contains("-Filter"));
        assert!(windows_query("disk").is_none());
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers_without_failing() {
        let failed = failed_services_section().await.unwrap();
        let all = services_section().await.unwrap();
        if !systemd_running() {
            assert_eq!(failed["status"], "ok");
            assert_eq!(failed["summary"], "systemd not running; nothing to check");
            assert!(failed["note"].as_str().unwrap().contains("PID 1 is"));
            assert_eq!(all["summary"], "systemd not running; no services to list");
            assert_eq!(all["services"], json!([]));
        } else {
            assert!(failed["count"].is_u64());
            assert!(all["count"].as_u64().unwrap() > 0, "{all:?}");
            assert!(all["services"][0]["name"].is_string());
        }
    }
}
