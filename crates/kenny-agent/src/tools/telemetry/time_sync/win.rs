//! The time_sync section on Windows: the Windows Time service (W32Time), its settings, and `w32tm /query /status /verbose`.
//!
//! w32tm prints localised labels and, in some languages, decimal commas, so its lines
//! are read by position (the order is fixed) and checked by the shape of each value:
//! leap indicator and stratum start with a number, the reference id is hex, offsets
//! are seconds with an `s`. `/verbose` adds the phase offset (how far the clock is off
//! its source) and the time since the last good sync, which the plain `/status` lacks.
//!
//! On a PC outside a domain W32Time is a trigger-start service: it may well be stopped
//! between its (weekly) syncs. Stopped there means "cannot tell now", not "broken";
//! disabled, or time sync switched off (`Type` = NoSync), is a warning.

use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::super::command::Output;
use super::super::format::clip;
use super::super::format::rfc3339_from_unix;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section, Status, section};
use super::OFFSET_WARN_SECONDS;
use crate::tools::psjson;

/// "The service has not been started", as w32tm reports it in every language.
const NOT_STARTED: &str = "0x80070426";
/// The local clock as a reference ("LOCL"): a PC that serves its own time.
const LOCAL_CLOCK_ID: &str = "0x4C4F434C";
/// Longer than the weekly sync of a PC outside a domain, with room for a week away.
const STALE_SYNC_DAYS: i64 = 15;

pub(in super::super) static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(10),
    parse,
};

const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$service = $null
$svc = Get-Service -Name W32Time -ErrorAction SilentlyContinue
if ($svc) { $service = [pscustomobject]@{ Status = [string]$svc.Status; StartType = [string]$svc.StartType } }
$params = Get-ItemProperty -LiteralPath 'HKLM:\SYSTEM\CurrentControlSet\Services\W32Time\Parameters' -ErrorAction SilentlyContinue
$ErrorActionPreference = 'Continue'
$lines = @(& "$env:SystemRoot\System32\w32tm.exe" /query /status /verbose 2>&1 | ForEach-Object { [string]$_ })
$exit = $LASTEXITCODE
$ErrorActionPreference = 'Stop'
[pscustomobject]@{
  Service = $service
  Type = $(if ($params) { [string]$params.Type } else { $null })
  NtpServer = $(if ($params) { [string]$params.NtpServer } else { $null })
  W32tm = $lines
  W32tmExit = $exit
} | ConvertTo-Json -Compress -Depth 3
"#;

/// What `w32tm /query /status /verbose` says, read by position.
#[derive(Debug, Clone, PartialEq)]
struct W32tmStatus {
    leap_indicator: u8,
    stratum: u8,
    reference_id: String,
    /// The `Source` line: a server name (with its `,0x9` flags cut), or the local clock
    /// in the PC's language.
    source: String,
    /// Positive when the clock is ahead of its source.
    offset_seconds: Option<f64>,
    since_last_sync_seconds: Option<f64>,
}

impl W32tmStatus {
    fn synchronised(&self) -> bool {
        self.leap_indicator != 3
            && self.stratum != 0
            && !self.reference_id.eq_ignore_ascii_case("0x00000000")
            && !self.reference_id.eq_ignore_ascii_case(LOCAL_CLOCK_ID)
    }
}

/// The service and settings the script read besides w32tm.
#[derive(Debug, Clone, Default)]
struct Setup {
    /// `Running`, `Stopped`, ...; `None` when there is no W32Time service.
    state: Option<String>,
    /// `Automatic`, `Manual`, `Disabled`.
    start: Option<String>,
    /// `NTP`, `NT5DS` (the domain hierarchy), `AllSync`, `NoSync`.
    sync_type: Option<String>,
    ntp_servers: Vec<String>,
}

impl Setup {
    fn of(root: &Map<String, Value>) -> Self {
        let service = root.get("Service").and_then(Value::as_object);
        Setup {
            state: service.and_then(|s| psjson::text(s, "Status")),
            start: service.and_then(|s| psjson::text(s, "StartType")),
            sync_type: psjson::text(root, "Type").map(|t| clip(&t, 20)),
            ntp_servers: psjson::text(root, "NtpServer")
                .map(|list| list.split_whitespace().take(10).map(server_name).collect())
                .unwrap_or_default(),
        }
    }

    /// Whether Windows is set to synchronise at all; `None` when nothing says.
    fn sync_enabled(&self) -> Option<bool> {
        if self.start.as_deref() == Some("Disabled") || self.sync_type.as_deref() == Some("NoSync") {
            return Some(false);
        }
        (self.start.is_some() || self.sync_type.is_some()).then_some(true)
    }
}

/// `time.windows.com,0x9` → `time.windows.com` (the flags say how to poll it).
fn server_name(entry: &str) -> String {
    clip(entry.split(',').next().unwrap_or(entry), 100)
}

fn parse(output: &Output, now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Value::Object(root) = value else {
        return Err(format!("the time query printed {value} instead of an object"));
    };
    let setup = Setup::of(&root);
    let lines: Vec<String> = match root.get("W32tm") {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    let failed = psjson::number(&root, "W32tmExit").is_some_and(|code| code != 0);
    let not_started = lines.iter().any(|l| l.contains(NOT_STARTED));
    if setup.state.is_none() && setup.start.is_none() {
        return Ok(no_service(&setup));
    }
    if not_started || setup.state.as_deref().is_some_and(|s| s != "Running") {
        return Ok(stopped(&setup));
    }
    if failed {
        let first = lines
            .iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .unwrap_or("no output");
        return Err(format!("w32tm /query /status failed: {}", clip(first, 200)));
    }
    let status = read_status(&lines).ok_or_else(|| {
        let first = lines
            .iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .unwrap_or("no output");
        format!("w32tm printed a status this agent cannot read: {}", clip(first, 200))
    })?;
    Ok(running(&status, &setup, now))
}

/// The values of w32tm's `Label: value` lines, in order. Values may hold colons
/// (times, "source IP: ..."); labels do not.
fn values(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .filter_map(|line| line.split_once(':'))
        .map(|(_, value)| value.trim())
        .collect()
}

/// Lines by position: leap indicator, stratum, precision, root delay, root dispersion,
/// reference id, last sync time, source, poll interval; with /verbose then phase offset,
/// clock rate, state machine, source flags, server role, last sync error, time since
/// the last good sync.
fn read_status(lines: &[String]) -> Option<W32tmStatus> {
    let values = values(lines);
    if values.len() < 9 {
        return None;
    }
    let leap_indicator = leading_number(values[0]).filter(|l| *l <= 3)?;
    let stratum = leading_number(values[1]).filter(|s| *s <= 16)?;
    let reference_id = values[5].split_whitespace().next()?.to_owned();
    if !reference_id.starts_with("0x") {
        return None;
    }
    let verbose = values.len() >= 16;
    Some(W32tmStatus {
        leap_indicator,
        stratum,
        reference_id,
        source: server_name(values[7]),
        offset_seconds: verbose.then(|| seconds(values[9])).flatten(),
        since_last_sync_seconds: verbose.then(|| seconds(values[15])).flatten(),
    })
}

/// "0(no warning)", "4 (secondary reference - syncd by (S)NTP)" → the number.
fn leading_number(value: &str) -> Option<u8> {
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// "-0.0002616s" or, in some languages, "-0,0002616s" → seconds.
fn seconds(value: &str) -> Option<f64> {
    let number = value.trim().strip_suffix('s')?.replace(',', ".");
    number.trim().parse().ok().filter(|s: &f64| s.is_finite())
}

fn base_fields(setup: &Setup) -> Value {
    json!({
        "source": "w32time",
        "ntp_enabled": setup.sync_enabled(),
        "service_state": setup.state.as_deref().map(str::to_lowercase),
        "service_start": setup.start.as_deref().map(str::to_lowercase),
        "sync_type": setup.sync_type,
        "ntp_servers": setup.ntp_servers,
    })
}

fn no_service(setup: &Setup) -> Section {
    let mut fields = base_fields(setup);
    fields["synchronized"] = Value::Null;
    section(
        Status::Warn,
        "there is no Windows Time service: cannot tell whether the clock is synchronised".to_owned(),
        fields,
    )
}

fn stopped(setup: &Setup) -> Section {
    let mut fields = base_fields(setup);
    if setup.sync_enabled() == Some(false) {
        fields["synchronized"] = false.into();
        let why = if setup.start.as_deref() == Some("Disabled") {
            "the Windows Time service is disabled"
        } else {
            "automatic time synchronisation is off"
        };
        return section(Status::Warn, format!("{why}: the clock is not synchronised"), fields);
    }
    fields["synchronized"] = Value::Null;
    section(
        Status::Ok,
        "Windows Time is stopped between syncs (it starts when needed): cannot tell whether the clock is synchronised now"
            .to_owned(),
        fields,
    )
}

fn running(status: &W32tmStatus, setup: &Setup, now: OffsetDateTime) -> Section {
    let synced = status.synchronised() && setup.sync_enabled() != Some(false);
    let last_sync = status
        .since_last_sync_seconds
        .filter(|_| synced)
        .and_then(|since| rfc3339_from_unix(now.unix_timestamp() - since.round() as i64));
    let days_since = status.since_last_sync_seconds.map(|s| (s / 86_400.0) as i64);
    let (state, summary) = match (synced, status.offset_seconds, days_since) {
        (false, _, _) if setup.sync_enabled() == Some(false) => {
            (Status::Warn, "automatic time synchronisation is off".to_owned())
        }
        (false, _, _) => (
            Status::Warn,
            "Windows Time has no time source: the clock is not synchronised".to_owned(),
        ),
        (true, Some(offset), _) if offset.abs() > OFFSET_WARN_SECONDS => (
            Status::Warn,
            format!(
                "clock synchronised (Windows Time, {}) but {offset:.1}s off",
                status.source
            ),
        ),
        (true, _, Some(days)) if days >= STALE_SYNC_DAYS => (
            Status::Warn,
            format!("clock last synchronised {days} days ago ({})", status.source),
        ),
        (true, _, _) => (
            Status::Ok,
            format!("clock synchronised (Windows Time, {})", status.source),
        ),
    };
    let mut fields = base_fields(setup);
    fields["synchronized"] = synced.into();
    fields["reference"] = status.source.clone().into();
    fields["stratum"] = status.stratum.into();
    fields["leap_indicator"] = status.leap_indicator.into();
    // Without a source the "offset" is measured against nothing.
    fields["offset_seconds"] = status.offset_seconds.filter(|_| synced).into();
    fields["last_sync"] = last_sync.into();
    section(state, summary, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_query_reads_w32time_its_settings_and_w32tm() {
        let query = super::super::windows_query().expect("time_sync has a Windows query");
        assert!(std::ptr::eq(query, &QUERY));
        for needle in [
            "Get-Service -Name W32Time",
            r"'HKLM:\SYSTEM\CurrentControlSet\Services\W32Time\Parameters'",
            "$params.Type",
            "$params.NtpServer",
            "System32\\w32tm.exe\" /query /status /verbose",
            "$LASTEXITCODE",
        ] {
            assert!(SCRIPT.contains(needle), "the script lacks {needle}");
        }
    }

    #[test]
    fn values_are_read_by_position_and_shape() {
        assert_eq!(leading_number("0(no warning)"), Some(0));
        assert_eq!(leading_number("4 (secondary reference - syncd by (S)NTP)"), Some(4));
        assert_eq!(leading_number("unspecified"), None);
        assert_eq!(seconds("-0.0002616s"), Some(-0.0002616));
        assert_eq!(seconds("1,5000000s"), Some(1.5));
        assert_eq!(seconds("10 (1024s)"), None);
        let plain = lines(
            "Leap Indicator: 0(no warning)\n\
             Stratum: 3 (secondary reference - syncd by (S)NTP)\n\
             Precision: -23 (119.209ns per tick)\n\
             Root Delay: 0.0156250s\n\
             Root Dispersion: 7.7756000s\n\
             ReferenceId: 0xC0A80101 (source IP:  192.168.1.1)\n\
             Last Successful Sync Time: 6/4/2026 10:12:03 PM\n\
             Source: 192.168.1.1,0x8\n\
             Poll Interval: 10 (1024s)\n",
        );
        let status = read_status(&plain).unwrap();
        assert_eq!(status.source, "192.168.1.1");
        assert_eq!(status.offset_seconds, None, "plain /status has no offset");
        assert!(status.synchronised());
        assert_eq!(read_status(&plain[..6]), None);
        let mut odd = plain.clone();
        odd[5] = "ReferenceId: unknown".into();
        assert_eq!(read_status(&odd), None);
    }

    #[test]
    fn the_local_clock_is_not_a_time_source() {
        let status = W32tmStatus {
            leap_indicator: 0,
            stratum: 1,
            reference_id: LOCAL_CLOCK_ID.into(),
            source: "Local CMOS Clock".into(),
            offset_seconds: Some(0.0),
            since_last_sync_seconds: Some(10.0),
        };
        assert!(!status.synchronised());
        assert!(
            W32tmStatus {
                reference_id: "0x14654039".into(),
                ..status.clone()
            }
            .synchronised()
        );
        let setup = Setup {
            state: Some("Running".into()),
            start: Some("Manual".into()),
            sync_type: Some("NTP".into()),
            ntp_servers: vec!["time.windows.com".into()],
        };
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(30);
        let section = running(&status, &setup, now);
        assert_eq!(section["synchronized"], false);
        assert_eq!(section["last_sync"], Value::Null);
        assert_eq!(section["status"], "warn");
    }
}
