//! The time_sync section: whether the clock is kept synchronised, from whichever source can tell.
//!
//! In order: `timedatectl` (when systemd runs), systemd-timesyncd's marker file,
//! `chronyc tracking`, then the kernel's own NTP status (`adjtimex`), which every
//! NTP client that disciplines the clock clears the "unsynchronised" flag of. A kernel
//! that still says unsynchronised proves little (chrony leaves the flag alone unless
//! told to), so that case, like no source at all, is a warning, never crit.
//!
//! On Windows the Windows Time service and `w32tm` are asked instead: see [`win`].

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::command::{self, RunError, first_line};
use super::{Outcome, Section, Status, not_collected_here, section};
use crate::tools::systemd::is_running as systemd_running;

mod win;

const TOOL_TIMEOUT: Duration = Duration::from_secs(5);
const TIMESYNCD_MARKER: &str = "/run/systemd/timesync/synchronized";
/// A synchronised clock further off than this still deserves a look.
const OFFSET_WARN_SECONDS: f64 = 1.0;

pub(super) async fn time_sync_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let mut tried = Vec::new();
    if systemd_running() {
        match command::run(
            "timedatectl",
            &["show", "-p", "NTPSynchronized", "-p", "NTP", "-p", "TimeUSec"],
            TOOL_TIMEOUT,
        )
        .await
        {
            Ok(out) if out.success => return Ok(from_timedatectl(&parse_key_values(&out.stdout))),
            Ok(out) => tried.push(format!("timedatectl: {}", first_line(&out))),
            Err(e) => tried.push(format!("timedatectl: {}", e.describe("timedatectl"))),
        }
    }
    if Path::new(TIMESYNCD_MARKER).exists() {
        return Ok(section(
            Status::Ok,
            "clock synchronised (systemd-timesyncd)".to_owned(),
            json!({ "synchronized": true, "source": "systemd-timesyncd" }),
        ));
    }
    // -n: numeric addresses, so asking chrony never makes a DNS lookup.
    match command::run("chronyc", &["-n", "tracking"], TOOL_TIMEOUT).await {
        Ok(out) if out.success => {
            if let Some(tracking) = parse_chrony(&out.stdout) {
                return Ok(from_chrony(&tracking));
            }
            tried.push("chronyc: unreadable output".to_owned());
        }
        Ok(out) => tried.push(format!("chronyc: {}", first_line(&out))),
        Err(RunError::Missing) => {}
        Err(e) => tried.push(format!("chronyc: {}", e.describe("chronyc"))),
    }
    Ok(from_kernel(kernel_synchronised(), &tried))
}

/// `Key=value` lines, as `timedatectl show` prints them.
fn parse_key_values(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn yes_no(value: Option<&str>) -> Option<bool> {
    match value {
        Some("yes") => Some(true),
        Some("no") => Some(false),
        _ => None,
    }
}

fn from_timedatectl(fields: &[(String, String)]) -> Section {
    let get = |key: &str| fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let synced = yes_no(get("NTPSynchronized"));
    let ntp = yes_no(get("NTP"));
    let (status, summary) = match (synced, ntp) {
        (Some(true), _) => (Status::Ok, "clock synchronised (NTP)"),
        (_, Some(false)) => (Status::Warn, "automatic time synchronisation is off"),
        (Some(false), _) => (Status::Warn, "time sync is on but the clock is not synchronised yet"),
        (None, _) => (
            Status::Warn,
            "timedatectl did not say whether the clock is synchronised",
        ),
    };
    section(
        status,
        summary.to_owned(),
        json!({
            "synchronized": synced,
            "ntp_enabled": ntp,
            "source": "timedatectl",
            "time": get("TimeUSec"),
        }),
    )
}

#[derive(Debug, Clone, PartialEq)]
struct Chrony {
    leap_status: String,
    reference: Option<String>,
    stratum: Option<u32>,
    /// Positive when the clock is ahead of NTP time.
    offset_seconds: Option<f64>,
}

/// `chronyc tracking` is `Name : value` lines. "System time : 0.000012 seconds fast of
/// NTP time" gives the offset; "Leap status : Not synchronised" means no source.
fn parse_chrony(text: &str) -> Option<Chrony> {
    let fields: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.split_once(" : "))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let leap_status = get("Leap status")?.to_owned();
    let offset_seconds = get("System time").and_then(|v| {
        let mut words = v.split_whitespace();
        let amount: f64 = words.next()?.parse().ok()?;
        let _seconds = words.next()?;
        match words.next()? {
            "fast" => Some(amount),
            "slow" => Some(-amount),
            _ => None,
        }
    });
    Some(Chrony {
        leap_status,
        reference: get("Reference ID").map(str::to_owned),
        stratum: get("Stratum").and_then(|s| s.parse().ok()),
        offset_seconds,
    })
}

fn from_chrony(tracking: &Chrony) -> Section {
    let synced = tracking.leap_status != "Not synchronised";
    let (status, summary) = match (synced, tracking.offset_seconds) {
        (false, _) => (
            Status::Warn,
            "chrony has no time source: the clock is not synchronised".to_owned(),
        ),
        (true, Some(offset)) if offset.abs() > OFFSET_WARN_SECONDS => (
            Status::Warn,
            format!("clock synchronised (chrony) but {offset:.1}s off"),
        ),
        (true, _) => (Status::Ok, "clock synchronised (chrony)".to_owned()),
    };
    section(
        status,
        summary,
        json!({
            "synchronized": synced,
            "source": "chrony",
            "leap_status": tracking.leap_status,
            "reference": tracking.reference,
            "stratum": tracking.stratum,
            "offset_seconds": tracking.offset_seconds,
        }),
    )
}

fn from_kernel(kernel_synced: Option<bool>, tried: &[String]) -> Section {
    let tried: Vec<Value> = tried.iter().map(|t| Value::from(t.as_str())).collect();
    if kernel_synced == Some(true) {
        return section(
            Status::Ok,
            "clock synchronised (kernel NTP status)".to_owned(),
            json!({ "synchronized": true, "source": "kernel", "tried": tried }),
        );
    }
    section(
        Status::Warn,
        "cannot tell whether the clock is synchronised (no timedatectl/chrony)".to_owned(),
        json!({
            "synchronized": null,
            "source": null,
            "kernel_synchronized": kernel_synced,
            "tried": tried,
        }),
    )
}

/// The kernel's view: synchronised when no NTP client left `STA_UNSYNC` set. `None`
/// when the call is not possible.
#[cfg(target_os = "linux")]
fn kernel_synchronised() -> Option<bool> {
    // SAFETY: timex is plain data; zeroed `modes` makes adjtimex read-only, and the
    // pointer is valid for the duration of the call.
    let (state, status) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        (libc::adjtimex(&mut tx), tx.status)
    };
    if state == -1 {
        return None;
    }
    Some(state != libc::TIME_ERROR && status & libc::STA_UNSYNC == 0)
}

#[cfg(not(target_os = "linux"))]
fn kernel_synchronised() -> Option<bool> {
    None
}

pub(super) fn windows_query() -> Option<&'static super::windows::Query> {
    Some(&win::QUERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timedatectl_answers_map_to_statuses() {
        let at = |text: &str| from_timedatectl(&parse_key_values(text));
        let ok = at("NTP=yes\nNTPSynchronized=yes\nTimeUSec=Sun 2026-11-30 14:00:00 UTC\n");
        assert_eq!(ok["status"], "ok");
        assert_eq!(ok["summary"], "clock synchronised (NTP)");
        assert_eq!(ok["time"], "Sun 2026-11-30 14:00:00 UTC");
        assert_eq!(ok["synchronized"], true);
        let off = at("NTP=no\nNTPSynchronized=no\n");
        assert_eq!(
            (off["status"].as_str(), off["summary"].as_str()),
            (Some("warn"), Some("automatic time synchronisation is off"))
        );
        let waiting = at("NTP=yes\nNTPSynchronized=no\n");
        assert_eq!(waiting["status"], "warn");
        assert_eq!(waiting["ntp_enabled"], true);
        assert_eq!(at("")["status"], "warn");
    }

    // `chronyc tracking` on Rocky Linux 9.
    const CHRONY_SYNCED: &str = "\
Reference ID    : A29FC87B (time.cloudflare.com)
Stratum         : 4
Ref time (UTC)  : Sun Nov 30 13:55:01 2026
System time     : 0.000012345 seconds slow of NTP time
Last offset     : -0.000004111 seconds
RMS offset      : 0.000021934 seconds
Frequency       : 3.214 ppm fast
Residual freq   : -0.001 ppm
Skew            : 0.043 ppm
Root delay      : 0.021551259 seconds
Root dispersion : 0.000736457 seconds
Update interval : 1031.9 seconds
Leap status     : Normal
";

    const CHRONY_LOST: &str = "\
Reference ID    : 00000000 ()
Stratum         : 0
Ref time (UTC)  : Thu Jan 01 00:00:00 1970
System time     : 2.500000000 seconds fast of NTP time
Leap status     : Not synchronised
";

    #[test]
    fn chrony_tracking_is_parsed() {
        let synced = parse_chrony(CHRONY_SYNCED).unwrap();
        assert_eq!(
            synced,
            Chrony {
                leap_status: "Normal".into(),
                reference: Some("A29FC87B (time.cloudflare.com)".into()),
                stratum: Some(4),
                offset_seconds: Some(-0.000012345),
            }
        );
        assert_eq!(from_chrony(&synced)["status"], "ok");
        let lost = parse_chrony(CHRONY_LOST).unwrap();
        assert_eq!(lost.offset_seconds, Some(2.5));
        let section = from_chrony(&lost);
        assert_eq!(section["status"], "warn");
        assert_eq!(section["synchronized"], false);
        let mut far = synced.clone();
        far.offset_seconds = Some(-3.0);
        assert_eq!(
            from_chrony(&far)["summary"],
            "clock synchronised (chrony) but -3.0s off"
        );
        assert_eq!(parse_chrony("506 Cannot talk to daemon\n"), None);
    }

    #[test]
    fn the_kernel_can_only_confirm() {
        assert_eq!(from_kernel(Some(true), &[])["status"], "ok");
        for unsure in [Some(false), None] {
            let section = from_kernel(unsure, &["chronyc: `chronyc` is not installed".into()]);
            assert_eq!(section["status"], "warn");
            assert_eq!(
                section["summary"],
                "cannot tell whether the clock is synchronised (no timedatectl/chrony)"
            );
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_gets_an_answer_that_is_never_crit() {
        let section = time_sync_section().await.unwrap();
        assert_ne!(section["status"], "crit", "{section:?}");
        assert!(kernel_synchronised().is_some(), "adjtimex is readable on Linux");
    }
}
