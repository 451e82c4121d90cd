//! The failed_services section: systemd units in the failed state.
//!
//! Without systemd as the init system there are no units to fail; that is reported as
//! `ok` with a note, since it is how the PC is built, not something wrong with it.

use std::time::Duration;

use serde_json::{Value, json};

use super::command::{self, first_line};
use super::{Outcome, Status, not_collected_here, section};
use crate::tools::systemd::{is_running as systemd_running, pid1_name};

const SYSTEMCTL_TIMEOUT: Duration = Duration::from_secs(8);
/// Listed by name; more than this many failed units is a story the count tells.
const MAX_LISTED: usize = 50;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Unit {
    unit: String,
    load: String,
    active: String,
    sub: String,
    description: String,
}

pub(super) async fn failed_services_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    if !systemd_running() {
        let init = pid1_name();
        return Ok(section(
            Status::Ok,
            "systemd not running; nothing to check".to_owned(),
            json!({
                "units": [],
                "count": 0,
                "truncated": false,
                "note": format!("PID 1 is `{init}`, not systemd, so there are no systemd units that could fail"),
            }),
        ));
    }
    let args = [
        "list-units",
        "--state=failed",
        "--no-legend",
        "--plain",
        "--no-pager",
        "--full",
    ];
    let output = command::run("systemctl", &args, SYSTEMCTL_TIMEOUT)
        .await
        .map_err(|e| e.describe("systemctl"))?;
    if !output.success {
        return Err(format!("systemctl list-units failed: {}", first_line(&output)));
    }
    Ok(build(parse_units(&output.stdout)))
}

/// `systemctl list-units --no-legend --plain` lines: unit, load, active, sub, then the
/// description (which has spaces). Older versions print a `●` before units not found.
fn parse_units(text: &str) -> Vec<Unit> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start().trim_start_matches('●').trim();
            let mut words = line.split_whitespace();
            let unit = words.next()?.to_owned();
            let load = words.next()?.to_owned();
            let active = words.next()?.to_owned();
            let sub = words.next()?.to_owned();
            let description = words.collect::<Vec<_>>().join(" ");
            Some(Unit {
                unit,
                load,
                active,
                sub,
                description,
            })
        })
        .collect()
}

fn build(units: Vec<Unit>) -> super::Section {
    let count = units.len();
    let (status, summary) = if count == 0 {
        (Status::Ok, "no failed units".to_owned())
    } else {
        let names: Vec<&str> = units.iter().take(3).map(|u| u.unit.as_str()).collect();
        let more = if count > 3 {
            format!(" and {} more", count - 3)
        } else {
            String::new()
        };
        let noun = if count == 1 { "unit" } else { "units" };
        (
            Status::Warn,
            format!("{count} failed {noun}: {}{more}", names.join(", ")),
        )
    };
    let listed: Vec<Value> = units
        .iter()
        .take(MAX_LISTED)
        .map(|u| {
            json!({
                "unit": u.unit,
                "load": u.load,
                "active": u.active,
                "sub": u.sub,
                "description": u.description,
            })
        })
        .collect();
    section(
        status,
        summary,
        json!({ "units": listed, "count": count, "truncated": count > MAX_LISTED }),
    )
}

/// STUB: every service, being written (issue 12).
pub(super) async fn services_section() -> Outcome {
    Ok(not_collected_here())
}

/// Not read through PowerShell yet.
pub(super) fn windows_query(section: &str) -> Option<&'static super::windows::Query> {
    let _ = section;
    None
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

    #[test]
    fn failed_units_are_parsed_with_their_descriptions() {
        let units = parse_units(FAILED);
        assert_eq!(units.len(), 3);
        assert_eq!(
            units[1],
            Unit {
                unit: "smartd.service".into(),
                load: "loaded".into(),
                active: "failed".into(),
                sub: "failed".into(),
                description: "Self Monitoring and Reporting Technology (SMART) Daemon".into(),
            }
        );
        assert_eq!(units[2].unit, "ghost.mount");
        assert_eq!(units[2].load, "not-found");
        assert!(parse_units("").is_empty());
        assert!(parse_units("\n  \n").is_empty());
    }

    #[test]
    fn any_failed_unit_is_a_warning() {
        let section = build(parse_units(FAILED));
        assert_eq!(section["status"], "warn");
        assert_eq!(
            section["summary"],
            "3 failed units: apt-daily.service, smartd.service, ghost.mount"
        );
        assert_eq!(section["count"], 3);
        let one = build(parse_units(FAILED.lines().next().unwrap()));
        assert_eq!(one["summary"], "1 failed unit: apt-daily.service");
        let none = build(vec![]);
        assert_eq!(
            (none["status"].as_str(), none["summary"].as_str()),
            (Some("ok"), Some("no failed units"))
        );
        let many: Vec<Unit> = (0..60)
            .map(|i| parse_units(&format!("u{i}.service loaded failed failed U"))[0].clone())
            .collect();
        let many = build(many);
        assert_eq!(many["units"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(many["truncated"], true);
        assert!(many["summary"].as_str().unwrap().ends_with("and 57 more"));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers_without_failing() {
        let section = failed_services_section().await.unwrap();
        if !systemd_running() {
            assert_eq!(section["status"], "ok");
            assert_eq!(section["summary"], "systemd not running; nothing to check");
            assert!(section["note"].as_str().unwrap().contains("PID 1 is"));
        } else {
            assert!(section["count"].is_u64());
        }
    }
}
