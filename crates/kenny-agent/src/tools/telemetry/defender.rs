//! The antivirus sections of Windows: Microsoft Defender's state (`defender`), its detection history (`defender_quarantine`) and every antivirus registered with Windows Security Center (`av_thirdparty`).
//!
//! `defender` reads `Get-MpComputerStatus`, counts the threats `Get-MpThreat` still calls
//! active, and lists Security Center's antivirus products so a Defender that is passive
//! or off because another antivirus took over reads as that, not as a fault.
//! `defender_quarantine` joins `Get-MpThreatDetection` (one row per detection: when, what
//! was done, which files) with `Get-MpThreat` (the threat's name and severity).
//! `av_thirdparty` reads `root/SecurityCenter2:AntiVirusProduct`, which Windows Server
//! does not have. On other systems all three are "n/a on this platform" (see `mod.rs`).
//!
//! The scripts catch the Defender and CIM errors that mean "not here" and print them as
//! data (`Error`: the error id, the CIM error code and the message); the parsers decide
//! from the id and code, which Windows does not translate, never from the message.

use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::command::Output;
use super::format::rfc3339_from_unix;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, not_applicable, section};
use crate::tools::psjson;

/// Detections and products listed at most; `count` says how many there were.
const MAX_LISTED: usize = 20;
/// Files named per detection.
const MAX_RESOURCES: usize = 5;
/// Text from the PC (threat names, paths, product names, messages) is cut to this.
const MAX_TEXT: usize = 200;
/// Definitions older than this are worth a warning (the server's default threshold).
const SIGNATURE_MAX_AGE_DAYS: i64 = 7;
/// What `AntivirusSignatureAge` says when definitions were never installed.
const NEVER: i64 = 65535;

static DEFENDER_QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
function Failure($err) {
    $code = $null
    if ($err.Exception.PSObject.Properties['NativeErrorCode']) { $code = [string]$err.Exception.NativeErrorCode }
    [pscustomobject]@{ Id = [string]$err.FullyQualifiedErrorId; Code = $code; Message = [string]$err.Exception.Message }
}
$out = [ordered]@{ Status = $null; Error = $null; ActiveThreats = $null; ThreatsError = $null; Others = $null }
# Another antivirus registered with Security Center explains a passive or disabled Defender.
# Windows Server has no Security Center: Others stays null there.
try {
    $out.Others = @(Get-CimInstance -Namespace root/SecurityCenter2 -ClassName AntiVirusProduct |
        Select-Object displayName, productState, pathToSignedProductExe)
} catch { }
if (-not (Get-Command Get-MpComputerStatus -ErrorAction SilentlyContinue)) {
    $out.Error = [pscustomobject]@{ Id = 'CommandNotFoundException'; Code = $null; Message = 'Get-MpComputerStatus is not installed' }
} else {
    try {
        $out.Status = Get-MpComputerStatus | Select-Object AMServiceEnabled, AntivirusEnabled, AntispywareEnabled,
            RealTimeProtectionEnabled, BehaviorMonitorEnabled, IsTamperProtected, AMRunningMode, AMProductVersion,
            AntivirusSignatureVersion, AntivirusSignatureLastUpdated, AntivirusSignatureAge, DefenderSignaturesOutOfDate,
            QuickScanEndTime, FullScanEndTime, FullScanRequired, RebootRequired, ComputerState
    } catch { $out.Error = Failure $_ }
    if ($out.Status) {
        try { $out.ActiveThreats = @(Get-MpThreat | Where-Object { $_.IsActive }).Count } catch { $out.ThreatsError = Failure $_ }
    }
}
[pscustomobject]$out | ConvertTo-Json -Compress -Depth 4
"#,
    limit: Duration::from_secs(15),
    parse: parse_defender,
};

static QUARANTINE_QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$out = [ordered]@{ Threats = @(); Detections = @(); Total = 0; Error = $null }
if (-not (Get-Command Get-MpThreatDetection -ErrorAction SilentlyContinue)) {
    $out.Error = [pscustomobject]@{ Id = 'CommandNotFoundException'; Code = $null; Message = 'Get-MpThreatDetection is not installed' }
} else {
    try {
        $out.Threats = @(Get-MpThreat | Select-Object ThreatID, ThreatName, SeverityID, IsActive)
        $detections = @(Get-MpThreatDetection)
        $out.Total = $detections.Count
        $out.Detections = @($detections | Sort-Object InitialDetectionTime -Descending | Select-Object -First 200 ThreatID,
            InitialDetectionTime, LastThreatStatusChangeTime, ThreatStatusID, ActionSuccess, Resources)
    } catch {
        $code = $null
        if ($_.Exception.PSObject.Properties['NativeErrorCode']) { $code = [string]$_.Exception.NativeErrorCode }
        $out.Error = [pscustomobject]@{ Id = [string]$_.FullyQualifiedErrorId; Code = $code; Message = [string]$_.Exception.Message }
    }
}
[pscustomobject]$out | ConvertTo-Json -Compress -Depth 4
"#,
    limit: Duration::from_secs(15),
    parse: parse_quarantine,
};

static AV_QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$out = [ordered]@{ Products = $null; Error = $null }
try {
    $out.Products = @(Get-CimInstance -Namespace root/SecurityCenter2 -ClassName AntiVirusProduct |
        Select-Object displayName, productState, pathToSignedProductExe)
} catch {
    $code = $null
    if ($_.Exception.PSObject.Properties['NativeErrorCode']) { $code = [string]$_.Exception.NativeErrorCode }
    $out.Error = [pscustomobject]@{ Id = [string]$_.FullyQualifiedErrorId; Code = $code; Message = [string]$_.Exception.Message }
}
[pscustomobject]$out | ConvertTo-Json -Compress -Depth 4
"#,
    limit: Duration::from_secs(10),
    parse: parse_av,
};

pub(super) fn windows_query(section: &str) -> Option<&'static Query> {
    match section {
        "defender" => Some(&DEFENDER_QUERY),
        "defender_quarantine" => Some(&QUARANTINE_QUERY),
        "av_thirdparty" => Some(&AV_QUERY),
        _ => None,
    }
}

fn cut(text: &str) -> String {
    super::format::clip(text, MAX_TEXT)
}

/// `1 threat`, `2 threats`.
fn count_of(n: impl Into<i64>, one: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

fn top_object(output: &Output, what: &str) -> Result<Map<String, Value>, String> {
    match json_of(output)? {
        Value::Object(top) => Ok(top),
        _ => Err(format!("the {what} query printed no result object")),
    }
}

fn flag(row: &Map<String, Value>, key: &str) -> Option<bool> {
    row.get(key).and_then(Value::as_bool)
}

fn when(row: &Map<String, Value>, key: &str) -> Option<OffsetDateTime> {
    // Unset times come as null or as year 1 / 1601, depending on the Defender version.
    psjson::date(row.get(key)?).filter(|t| t.year() >= 2000)
}

fn stamp(at: Option<OffsetDateTime>) -> Option<String> {
    rfc3339_from_unix(at?.unix_timestamp())
}

// ---------------------------------------------------------------------------------------
// Errors the scripts print as data

/// A Defender or CIM error the script caught.
struct Failure {
    id: String,
    code: String,
    message: String,
}

impl Failure {
    fn of(row: &Map<String, Value>, key: &str) -> Option<Failure> {
        let Some(Value::Object(error)) = row.get(key) else {
            return None;
        };
        Some(Failure {
            id: psjson::text(error, "Id").unwrap_or_default(),
            code: psjson::text(error, "Code").unwrap_or_default(),
            message: psjson::text(error, "Message").map_or_else(|| "no message".to_owned(), |m| cut(m.trim())),
        })
    }

    /// Defender is not installed, or its service does not run: 0x800106ba is
    /// "the service is not running", which is how Windows answers once another
    /// antivirus has turned Defender off (or Windows Server lacks the feature).
    fn defender_absent(&self) -> bool {
        let id = self.id.to_ascii_lowercase();
        id.contains("0x800106ba") || id.contains("commandnotfoundexception")
    }

    fn no_security_center(&self) -> bool {
        self.code.eq_ignore_ascii_case("InvalidNamespace") || self.id.to_ascii_lowercase().contains("0x8004100e")
    }
}

// ---------------------------------------------------------------------------------------
// Security Center's antivirus products (av_thirdparty, and Defender's context)

#[derive(Debug, Clone, PartialEq)]
struct Product {
    name: String,
    enabled: Option<bool>,
    up_to_date: Option<bool>,
    is_defender: bool,
    path: Option<String>,
    state: Option<i64>,
}

impl Product {
    fn of(row: &Map<String, Value>) -> Product {
        let name = psjson::text(row, "displayName").map_or_else(|| "unnamed".to_owned(), |n| cut(n.trim()));
        let path = psjson::text(row, "pathToSignedProductExe").map(|p| cut(p.trim()));
        let state = psjson::number(row, "productState");
        // Defender registers with the pseudo-path windowsdefender:// under a name that
        // changed over the years (Windows Defender, Microsoft Defender Antivirus).
        let is_defender = path
            .as_deref()
            .is_some_and(|p| p.to_ascii_lowercase().starts_with("windowsdefender:"));
        Product {
            name,
            enabled: state.map(|s| (s >> 8) & 0x10 != 0),
            up_to_date: state.map(|s| s & 0x10 == 0),
            is_defender,
            path,
            state,
        }
    }

    fn active(&self) -> bool {
        self.enabled == Some(true)
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "enabled": self.enabled,
            "up_to_date": self.up_to_date,
            "is_defender": self.is_defender,
            "path": self.path,
            "product_state": self.state,
        })
    }
}

/// `None` when the list is null: Security Center could not be asked.
fn products(value: Option<&Value>) -> Result<Option<Vec<Product>>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(list) => Ok(Some(psjson::rows_of(list.clone())?.iter().map(Product::of).collect())),
    }
}

fn parse_av(output: &Output, _now: OffsetDateTime) -> Outcome {
    let top = top_object(output, "AntiVirusProduct")?;
    if let Some(failure) = Failure::of(&top, "Error") {
        if failure.no_security_center() {
            return Ok(not_applicable(
                "this Windows has no Security Center (root/SecurityCenter2 is absent on Windows Server), so registered antivirus products cannot be listed",
            ));
        }
        return Err(format!("Security Center could not be read: {}", failure.message));
    }
    let all = products(top.get("Products"))?.unwrap_or_default();
    Ok(av_section(&all))
}

fn av_section(all: &[Product]) -> Section {
    let active: Vec<&Product> = all.iter().filter(|p| p.active()).collect();
    let stale: Vec<&str> = active
        .iter()
        .filter(|p| p.up_to_date == Some(false))
        .map(|p| p.name.as_str())
        .collect();
    let names = |list: &[&Product]| list.iter().map(|p| p.name.clone()).collect::<Vec<_>>().join(", ");
    let (status, summary) = if all.is_empty() {
        (
            Status::Crit,
            "no antivirus is registered with Windows Security Center".to_owned(),
        )
    } else if active.is_empty() {
        (
            Status::Crit,
            format!(
                "no antivirus is active (registered but off: {})",
                names(&all.iter().collect::<Vec<_>>())
            ),
        )
    } else if !stale.is_empty() {
        (
            Status::Warn,
            format!(
                "{} active, but the definitions of {} are out of date",
                names(&active),
                stale.join(", ")
            ),
        )
    } else {
        (Status::Ok, format!("active and up to date: {}", names(&active)))
    };
    let listed: Vec<Value> = all.iter().take(MAX_LISTED).map(Product::to_json).collect();
    section(
        status,
        summary,
        json!({
            "products": listed,
            "count": all.len(),
            "truncated": all.len() > MAX_LISTED,
            "any_active": !active.is_empty(),
            "active": active.iter().take(MAX_LISTED).map(|p| p.name.clone()).collect::<Vec<_>>(),
        }),
    )
}

// ---------------------------------------------------------------------------------------
// defender

fn parse_defender(output: &Output, now: OffsetDateTime) -> Outcome {
    let top = top_object(output, "Get-MpComputerStatus")?;
    let others: Option<Vec<Product>> =
        products(top.get("Others"))?.map(|list| list.into_iter().filter(|p| !p.is_defender).collect());
    let Some(Value::Object(status)) = top.get("Status") else {
        return match Failure::of(&top, "Error") {
            Some(f) if f.defender_absent() => Ok(defender_absent(&f, others.as_deref())),
            Some(f) => Err(format!("Get-MpComputerStatus failed: {}", f.message)),
            None => Err("Get-MpComputerStatus printed nothing".to_owned()),
        };
    };
    let threats = match (psjson::number(&top, "ActiveThreats"), Failure::of(&top, "ThreatsError")) {
        (Some(n), _) => Ok(n.max(0)),
        (None, Some(f)) => Err(f.message),
        (None, None) => Err("Get-MpThreat printed nothing".to_owned()),
    };
    Ok(defender_section(
        status,
        threats,
        others.as_deref().unwrap_or_default(),
        now,
    ))
}

/// Defender cannot be asked: not installed, or its service stopped by another antivirus.
fn defender_absent(failure: &Failure, others: Option<&[Product]>) -> Section {
    let active: Vec<&str> = others
        .unwrap_or_default()
        .iter()
        .filter(|p| p.active())
        .map(|p| p.name.as_str())
        .collect();
    let not_installed = failure.id.to_ascii_lowercase().contains("commandnotfound");
    let (state, reason) = if not_installed {
        (
            "is not installed",
            "Defender's PowerShell module (Get-MpComputerStatus) is missing: Defender is not part of this Windows",
        )
    } else {
        (
            "is not running",
            "Defender's service answers 0x800106ba (not running): turned off by another antivirus or by policy",
        )
    };
    let (status, summary, replaced, actions) = if !active.is_empty() {
        let summary = format!("Microsoft Defender {state}; {} protects this PC", active.join(", "));
        (Status::Ok, summary, Some(true), vec![])
    } else if others.is_none() {
        let summary = format!(
            "Microsoft Defender {state}, and this Windows has no Security Center to tell whether another antivirus runs"
        );
        (
            Status::Warn,
            summary,
            None,
            vec!["check that another antivirus protects this PC"],
        )
    } else {
        let summary = format!("Microsoft Defender {state} and no other antivirus is active");
        (
            Status::Crit,
            summary,
            Some(false),
            vec!["turn Microsoft Defender on, or install another antivirus"],
        )
    };
    section(
        status,
        summary,
        json!({
            "enabled": false,
            "realtime_protection": false,
            "mode": if not_installed { "not_installed" } else { "off" },
            "replaced_by_third_party": replaced,
            "third_party": active,
            "last_signature_update": null,
            "signature_age_days": null,
            "signature_version": null,
            "product_version": null,
            "last_scan": null,
            "last_scan_type": null,
            "threats_found": null,
            "threats_error": null,
            "tamper_protected": null,
            "behavior_monitor": null,
            "action_needed": !actions.is_empty(),
            "actions": actions,
            "reason": reason,
            "error": failure.message,
        }),
    )
}

/// `AMRunningMode`: "Normal", "Passive Mode", "SxS Passive Mode", "EDR Block Mode", or
/// absent on Defender versions before it existed.
fn running_mode(status: &Map<String, Value>, enabled: bool) -> String {
    let Some(mode) = psjson::text(status, "AMRunningMode") else {
        return if enabled { "normal" } else { "off" }.to_owned();
    };
    let lower = mode.to_ascii_lowercase();
    if lower.contains("passive") {
        "passive".to_owned()
    } else if lower.contains("edr") {
        "edr_block".to_owned()
    } else if lower.contains("not running") {
        "off".to_owned()
    } else if lower == "normal" {
        "normal".to_owned()
    } else {
        cut(&lower.replace(' ', "_"))
    }
}

/// The newer of the last quick and full scan.
fn last_scan(status: &Map<String, Value>) -> (Option<OffsetDateTime>, Option<&'static str>) {
    match (when(status, "QuickScanEndTime"), when(status, "FullScanEndTime")) {
        (Some(quick), Some(full)) if full >= quick => (Some(full), Some("full")),
        (Some(quick), _) => (Some(quick), Some("quick")),
        (None, Some(full)) => (Some(full), Some("full")),
        (None, None) => (None, None),
    }
}

/// What Defender itself says needs doing: `ComputerState` bits (MSFT_MpComputerStatus)
/// and the flags beside them.
fn pending_actions(status: &Map<String, Value>) -> Vec<&'static str> {
    let state = psjson::number(status, "ComputerState").unwrap_or(0);
    let mut actions = Vec::new();
    let mut add = |on: bool, what: &'static str| {
        if on && !actions.contains(&what) {
            actions.push(what);
        }
    };
    add(state & 1 != 0, "a full scan is required");
    add(
        flag(status, "FullScanRequired") == Some(true),
        "a full scan is required",
    );
    add(state & 2 != 0, "a restart is required to finish removing a threat");
    add(
        flag(status, "RebootRequired") == Some(true),
        "a restart is required to finish removing a threat",
    );
    add(state & 4 != 0, "manual steps are required (see Windows Security)");
    add(state & 8 != 0, "an offline scan is required");
    add(state & 16 != 0, "Defender reports a critical failure");
    add(
        flag(status, "DefenderSignaturesOutOfDate") == Some(true),
        "virus definitions are out of date",
    );
    actions
}

fn defender_section(
    status: &Map<String, Value>,
    threats: Result<i64, String>,
    others: &[Product],
    now: OffsetDateTime,
) -> Section {
    let enabled = flag(status, "AMServiceEnabled") == Some(true) && flag(status, "AntivirusEnabled") == Some(true);
    let realtime = flag(status, "RealTimeProtectionEnabled") == Some(true);
    let mode = running_mode(status, enabled);
    let active_others: Vec<&str> = others.iter().filter(|p| p.active()).map(|p| p.name.as_str()).collect();
    let replaced = matches!(mode.as_str(), "passive" | "edr_block") || (!enabled && !active_others.is_empty());
    let updated = when(status, "AntivirusSignatureLastUpdated");
    let age_days = updated
        .map(|t| (now - t).whole_days().max(0))
        .or_else(|| psjson::number(status, "AntivirusSignatureAge").filter(|&d| d != NEVER));
    let (scanned, scan_type) = last_scan(status);
    let found = threats.as_ref().ok().copied();

    let mut actions: Vec<String> = Vec::new();
    if let Some(n) = found.filter(|&n| n > 0) {
        actions.push(format!("remove {}", count_of(n, "active threat")));
    }
    if !replaced && !enabled {
        actions.push("turn Microsoft Defender Antivirus on".to_owned());
    } else if !replaced && !realtime {
        actions.push("turn real-time protection on".to_owned());
    }
    actions.extend(pending_actions(status).into_iter().map(str::to_owned));

    let stale = !replaced && age_days.is_some_and(|d| d > SIGNATURE_MAX_AGE_DAYS);
    let by = active_others.join(", ");
    let (level, summary) = if !replaced && !enabled {
        (
            Status::Crit,
            "Microsoft Defender Antivirus is off and no other antivirus is active".to_owned(),
        )
    } else if !replaced && !realtime {
        (Status::Crit, "real-time protection is off".to_owned())
    } else if let Some(n) = found.filter(|&n| n > 0) {
        (Status::Crit, format!("{} found", count_of(n, "active threat")))
    } else if stale {
        let days = age_days.unwrap_or_default();
        (
            Status::Warn,
            format!("virus definitions are {} old", count_of(days, "day")),
        )
    } else if !actions.is_empty() {
        (
            Status::Warn,
            format!("Defender needs attention: {}", actions.join("; ")),
        )
    } else if replaced && !by.is_empty() {
        (
            Status::Ok,
            format!("Microsoft Defender is {mode}; {by} protects this PC"),
        )
    } else if replaced {
        (
            Status::Ok,
            format!("Microsoft Defender is {mode} (another antivirus is in charge)"),
        )
    } else {
        let age = match (updated, age_days) {
            (Some(at), _) => format!("updated {}", super::format::ymd(at.date())),
            (None, Some(days)) => format!("{} old", count_of(days, "day")),
            (None, None) => "of unknown age".to_owned(),
        };
        (
            Status::Ok,
            format!("Microsoft Defender is on with real-time protection; definitions {age}"),
        )
    };
    let version = |key: &str| psjson::text(status, key).map(|v| cut(&v));
    section(
        level,
        summary,
        json!({
            "enabled": enabled,
            "realtime_protection": realtime,
            "mode": mode,
            "replaced_by_third_party": replaced,
            "third_party": active_others,
            "last_signature_update": stamp(updated),
            "signature_age_days": age_days,
            "signature_version": version("AntivirusSignatureVersion"),
            "product_version": version("AMProductVersion"),
            "last_scan": stamp(scanned),
            "last_scan_type": scan_type,
            "threats_found": found,
            "threats_error": threats.err().map(|e| cut(&e)),
            "tamper_protected": flag(status, "IsTamperProtected"),
            "behavior_monitor": flag(status, "BehaviorMonitorEnabled"),
            "action_needed": !actions.is_empty(),
            "actions": actions,
            "reason": null,
            "error": null,
        }),
    )
}

// ---------------------------------------------------------------------------------------
// defender_quarantine

/// `SeverityID` of MSFT_MpThreat.
fn severity(id: Option<i64>) -> &'static str {
    match id {
        Some(1) => "low",
        Some(2) => "moderate",
        Some(4) => "high",
        Some(5) => "severe",
        _ => "unknown",
    }
}

/// `ThreatStatusID` of MSFT_MpThreatDetection, and whether it leaves the threat in place.
fn detection_status(id: Option<i64>) -> (&'static str, bool) {
    match id {
        Some(1) => ("detected", true),
        Some(2) => ("cleaned", false),
        Some(3) => ("quarantined", false),
        Some(4) => ("removed", false),
        Some(5) => ("allowed", false),
        Some(6) => ("blocked", false),
        Some(102) => ("quarantine_failed", true),
        Some(103) => ("remove_failed", true),
        Some(104) => ("allow_failed", true),
        Some(105) => ("abandoned", true),
        Some(107) => ("block_failed", true),
        _ => ("unknown", false),
    }
}

/// Resources read `file:_C:\path`, `containerfile:_...`, `process:_pid:..`,
/// `regkey:_HKLM\...`: the part after `kind:_` is what an admin looks for.
fn resource(raw: &str) -> String {
    let shown = match raw.split_once(":_") {
        Some((kind, rest)) if !kind.is_empty() && kind.chars().all(|c| c.is_ascii_alphabetic()) => rest,
        _ => raw,
    };
    cut(shown.trim())
}

fn resources(row: &Map<String, Value>) -> Vec<String> {
    match row.get("Resources") {
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .take(MAX_RESOURCES)
            .map(resource)
            .collect(),
        Some(Value::String(one)) => vec![resource(one)],
        _ => Vec::new(),
    }
}

struct Threat {
    name: String,
    severity: &'static str,
    active: bool,
}

fn parse_quarantine(output: &Output, _now: OffsetDateTime) -> Outcome {
    let top = top_object(output, "Get-MpThreatDetection")?;
    if let Some(failure) = Failure::of(&top, "Error") {
        if failure.defender_absent() {
            return Ok(not_applicable(
                "Microsoft Defender is not installed or not running here (another antivirus may have turned it off), so it keeps no detections",
            ));
        }
        return Err(format!("Defender's detections could not be read: {}", failure.message));
    }
    let threats: Vec<(i64, Threat)> = psjson::rows_of(top.get("Threats").cloned().unwrap_or(Value::Null))?
        .iter()
        .filter_map(|row| {
            let id = psjson::number(row, "ThreatID")?;
            let threat = Threat {
                name: psjson::text(row, "ThreatName").map_or_else(|| format!("threat {id}"), |n| cut(&n)),
                severity: severity(psjson::number(row, "SeverityID")),
                active: flag(row, "IsActive") == Some(true),
            };
            Some((id, threat))
        })
        .collect();
    let detections = psjson::rows_of(top.get("Detections").cloned().unwrap_or(Value::Null))?;
    let total = psjson::number(&top, "Total")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(detections.len())
        .max(detections.len());
    Ok(quarantine_section(&threats, &detections, total))
}

fn quarantine_section(threats: &[(i64, Threat)], detections: &[Map<String, Value>], total: usize) -> Section {
    let threat = |row: &Map<String, Value>| {
        let id = psjson::number(row, "ThreatID")?;
        threats.iter().find(|(t, _)| *t == id).map(|(_, t)| t)
    };
    let items: Vec<Value> = detections
        .iter()
        .map(|row| {
            let (status, unresolved) = detection_status(psjson::number(row, "ThreatStatusID"));
            let known = threat(row);
            let name = known.map_or_else(
                || {
                    psjson::number(row, "ThreatID")
                        .map_or_else(|| "unknown threat".to_owned(), |id| format!("threat {id}"))
                },
                |t| t.name.clone(),
            );
            json!({
                "threat": name,
                "severity": known.map_or("unknown", |t| t.severity),
                "detected_at": stamp(when(row, "InitialDetectionTime")),
                "status": status,
                "active": unresolved || known.is_some_and(|t| t.active),
                "resources": resources(row),
            })
        })
        .collect();
    let mut active: Vec<String> = items
        .iter()
        .filter(|i| i["active"] == true)
        .filter_map(|i| i["threat"].as_str().map(str::to_owned))
        .collect();
    // An active threat whose detections fell outside the listed ones still counts.
    for (_, t) in threats.iter().filter(|(_, t)| t.active) {
        if !active.contains(&t.name) {
            active.push(t.name.clone());
        }
    }
    active.dedup();
    let (status, summary) = if total == 0 && active.is_empty() {
        (Status::Ok, "no detections in Defender's history".to_owned())
    } else if active.is_empty() {
        (
            Status::Ok,
            format!(
                "{} in Defender's history, none left active",
                count_of(total as i64, "detection")
            ),
        )
    } else {
        (
            Status::Warn,
            format!(
                "{} not remediated: {}",
                count_of(active.len() as i64, "active threat"),
                active.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            ),
        )
    };
    let listed: Vec<Value> = items.into_iter().take(MAX_LISTED).collect();
    section(
        status,
        summary,
        json!({
            "truncated": total > listed.len(),
            "items": listed,
            "count": total,
            "active_count": active.len(),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stdout: &str) -> Output {
        Output::printed(stdout, "", true)
    }

    fn at(text: &str) -> OffsetDateTime {
        OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).unwrap()
    }

    #[test]
    fn each_section_has_its_query_built_from_the_documented_sources() {
        assert!(std::ptr::eq(windows_query("defender").unwrap(), &DEFENDER_QUERY));
        assert!(std::ptr::eq(
            windows_query("defender_quarantine").unwrap(),
            &QUARANTINE_QUERY
        ));
        assert!(std::ptr::eq(windows_query("av_thirdparty").unwrap(), &AV_QUERY));
        assert!(windows_query("firewall").is_none());

        let defender = DEFENDER_QUERY.script;
        for needle in [
            "Get-MpComputerStatus",
            "AMRunningMode",
            "RealTimeProtectionEnabled",
            "AntivirusSignatureLastUpdated",
            "QuickScanEndTime",
            "FullScanEndTime",
            "Get-MpThreat |",
            "IsActive",
            "root/SecurityCenter2 -ClassName AntiVirusProduct",
        ] {
            assert!(defender.contains(needle), "defender: {needle}");
        }
        let quarantine = QUARANTINE_QUERY.script;
        for needle in [
            "Get-MpThreat |",
            "Get-MpThreatDetection",
            "ThreatStatusID",
            "Resources",
            "SeverityID",
        ] {
            assert!(quarantine.contains(needle), "quarantine: {needle}");
        }
        let av = AV_QUERY.script;
        for needle in [
            "-Namespace root/SecurityCenter2",
            "-ClassName AntiVirusProduct",
            "productState",
        ] {
            assert!(av.contains(needle), "av: {needle}");
        }
        for script in [defender, quarantine, av] {
            assert!(script.contains("NativeErrorCode") || script.contains("FullyQualifiedErrorId"));
        }
    }

    fn product(name: &str, state: i64, path: &str) -> Product {
        let row = json!({"displayName": name, "productState": state, "pathToSignedProductExe": path});
        Product::of(row.as_object().unwrap())
    }

    #[test]
    fn product_state_bytes_say_enabled_and_up_to_date() {
        // 0x061100: Defender on and up to date; 0x060100 off; 0x041010 on, out of date.
        let on = product("Windows Defender", 397_568, "windowsdefender://");
        assert_eq!(
            (on.enabled, on.up_to_date, on.is_defender),
            (Some(true), Some(true), true)
        );
        let off = product("Windows Defender", 393_472, "windowsdefender://");
        assert_eq!((off.enabled, off.up_to_date), (Some(false), Some(true)));
        let stale = product(
            "Norton 360",
            0x041010,
            "C:\\Program Files\\Norton Security\\Engine\\22.24.1.6\\wscstub.exe",
        );
        assert_eq!(
            (stale.enabled, stale.up_to_date, stale.is_defender),
            (Some(true), Some(false), false)
        );
        let off3 = product(
            "Avast Antivirus",
            0x040000,
            "C:\\Program Files\\Avast Software\\Avast\\wsc_proxy.exe",
        );
        assert_eq!(off3.enabled, Some(false));
        let unknown = Product::of(json!({"displayName": "X"}).as_object().unwrap());
        assert_eq!((unknown.enabled, unknown.up_to_date), (None, None));
        assert!(!unknown.active());
    }

    #[test]
    fn av_verdicts() {
        let defender = product("Windows Defender", 397_568, "windowsdefender://");
        let norton_stale = product("Norton 360", 0x041010, "C:\\n.exe");
        let avast_off = product("Avast Antivirus", 0x040000, "C:\\a.exe");
        assert_eq!(av_section(&[defender])["status"], "ok");
        let s = av_section(&[norton_stale, product("Windows Defender", 393_472, "windowsdefender://")]);
        assert_eq!(s["status"], "warn");
        assert_eq!(
            s["summary"],
            "Norton 360 active, but the definitions of Norton 360 are out of date"
        );
        let s = av_section(&[avast_off]);
        assert_eq!(s["status"], "crit");
        assert_eq!(s["any_active"], false);
        assert_eq!(
            s["summary"],
            "no antivirus is active (registered but off: Avast Antivirus)"
        );
        assert_eq!(av_section(&[])["status"], "crit");
        let many: Vec<Product> = (0..30)
            .map(|i| product(&format!("AV {i}"), 0x041000, "C:\\x.exe"))
            .collect();
        let s = av_section(&many);
        assert_eq!((s["count"].as_u64(), s["truncated"].as_bool()), (Some(30), Some(true)));
        assert_eq!(s["products"].as_array().unwrap().len(), MAX_LISTED);
    }

    #[test]
    fn hostile_text_is_cut() {
        let long = "A".repeat(5000);
        let p = product(&long, 0x041000, &long);
        assert_eq!(p.name.chars().count(), MAX_TEXT);
        assert_eq!(p.path.unwrap().chars().count(), MAX_TEXT);
        assert_eq!(resource(&format!("file:_C:\\{long}")).chars().count(), MAX_TEXT);
    }

    #[test]
    fn resources_lose_their_kind_prefix_only() {
        assert_eq!(
            resource("file:_C:\\Users\\kid\\Downloads\\x.exe"),
            "C:\\Users\\kid\\Downloads\\x.exe"
        );
        assert_eq!(
            resource("containerfile:_C:\\Users\\kid\\Downloads\\pack.zip->x.exe"),
            "C:\\Users\\kid\\Downloads\\pack.zip->x.exe"
        );
        assert_eq!(resource("C:\\odd:_name"), "C:\\odd:_name");
        let row = json!({"Resources": "file:_C:\\one.exe"});
        assert_eq!(resources(row.as_object().unwrap()), ["C:\\one.exe"]);
        let many: Vec<String> = (0..9).map(|i| format!("file:_C:\\{i}.exe")).collect();
        let row = json!({ "Resources": many });
        assert_eq!(resources(row.as_object().unwrap()).len(), MAX_RESOURCES);
    }

    const STATUS_ON: &str = r#"{"AMServiceEnabled":true,"AntivirusEnabled":true,"RealTimeProtectionEnabled":true,"AMRunningMode":"Normal","AntivirusSignatureLastUpdated":"/Date(1780560000000)/","AntivirusSignatureAge":1,"QuickScanEndTime":"/Date(1780470000000)/","FullScanEndTime":null,"ComputerState":0}"#;

    #[test]
    fn defender_verdicts_follow_what_the_server_reads() {
        let now = at("2026-06-05T00:00:00Z");
        let parse = |status: &str, threats: &str, others: &str| {
            let text = format!(
                r#"{{"Status":{status},"Error":null,"ActiveThreats":{threats},"ThreatsError":null,"Others":{others}}}"#
            );
            parse_defender(&out(&text), now).unwrap()
        };
        let ok = parse(STATUS_ON, "0", "null");
        assert_eq!(ok["status"], "ok", "{ok:?}");
        assert_eq!(ok["last_signature_update"], "2026-06-04T08:00:00Z");
        assert_eq!(ok["signature_age_days"], 0);
        assert_eq!(ok["last_scan_type"], "quick");
        assert_eq!(ok["replaced_by_third_party"], false);
        let threat = parse(STATUS_ON, "2", "[]");
        assert_eq!(
            (threat["status"].as_str(), threat["threats_found"].as_i64()),
            (Some("crit"), Some(2))
        );
        assert_eq!(threat["action_needed"], true);
        let rtp_off = parse(
            &STATUS_ON.replace(
                "\"RealTimeProtectionEnabled\":true",
                "\"RealTimeProtectionEnabled\":false",
            ),
            "0",
            "[]",
        );
        assert_eq!(rtp_off["summary"], "real-time protection is off");
        let old = parse(&STATUS_ON.replace("1780560000000", "1779000000000"), "0", "[]");
        assert_eq!(old["status"], "warn");
        assert_eq!(old["summary"], "virus definitions are 18 days old");
        assert_eq!(count_of(1, "day"), "1 day");
        // Passive because Norton took over: not a fault, and the definitions do not matter.
        let passive = parse(
            &STATUS_ON
                .replace("\"Normal\"", "\"Passive Mode\"")
                .replace(
                    "\"RealTimeProtectionEnabled\":true",
                    "\"RealTimeProtectionEnabled\":false",
                )
                .replace("1780560000000", "1779000000000"),
            "0",
            r#"[{"displayName":"Norton 360","productState":266240,"pathToSignedProductExe":"C:\\n.exe"},{"displayName":"Windows Defender","productState":393472,"pathToSignedProductExe":"windowsdefender://"}]"#,
        );
        assert_eq!(passive["status"], "ok", "{passive:?}");
        assert_eq!(passive["mode"], "passive");
        assert_eq!(passive["replaced_by_third_party"], true);
        assert_eq!(passive["third_party"], json!(["Norton 360"]));
        assert_eq!(
            passive["summary"],
            "Microsoft Defender is passive; Norton 360 protects this PC"
        );
        // Off in normal mode with nothing else: the PC is unprotected.
        let off = parse(
            &STATUS_ON
                .replace("\"AntivirusEnabled\":true", "\"AntivirusEnabled\":false")
                .replace("\"Normal\"", "\"Not running\""),
            "0",
            "[]",
        );
        assert_eq!(
            (off["status"].as_str(), off["mode"].as_str()),
            (Some("crit"), Some("off"))
        );
        assert_eq!(off["replaced_by_third_party"], false);
        let unreadable_threats = parse_defender(
            &out(&format!(
                r#"{{"Status":{STATUS_ON},"Error":null,"ActiveThreats":null,"ThreatsError":{{"Id":"HRESULT 0x80070005,Get-MpThreat","Code":null,"Message":"Access denied."}},"Others":null}}"#
            )),
            now,
        )
        .unwrap();
        assert_eq!(unreadable_threats["threats_found"], Value::Null);
        assert_eq!(unreadable_threats["threats_error"], "Access denied.");
        assert_eq!(unreadable_threats["status"], "ok");
    }

    #[test]
    fn pending_actions_from_computer_state_are_not_repeated() {
        let row = json!({"ComputerState": 3, "RebootRequired": true, "FullScanRequired": true, "DefenderSignaturesOutOfDate": false});
        assert_eq!(
            pending_actions(row.as_object().unwrap()),
            [
                "a full scan is required",
                "a restart is required to finish removing a threat"
            ]
        );
        assert!(pending_actions(json!({"ComputerState": 0}).as_object().unwrap()).is_empty());
    }

    #[test]
    fn quarantine_counts_everything_but_lists_a_few() {
        let threats = vec![(
            2_147_735_503,
            Threat {
                name: "Trojan:Win32/Wacatac.B!ml".into(),
                severity: "severe",
                active: false,
            },
        )];
        let detections: Vec<Map<String, Value>> = (0..25)
            .map(|i| {
                json!({"ThreatID": 2_147_735_503_i64, "ThreatStatusID": 3, "InitialDetectionTime": format!("/Date({})/", 1_780_000_000_000_i64 - i * 1000),
                       "Resources": [format!("file:_C:\\Users\\kid\\Downloads\\{i}.exe")]})
                .as_object()
                .unwrap()
                .clone()
            })
            .collect();
        let s = quarantine_section(&threats, &detections, 25);
        assert_eq!(s["status"], "ok");
        assert_eq!((s["count"].as_u64(), s["truncated"].as_bool()), (Some(25), Some(true)));
        assert_eq!(s["items"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(s["items"][0]["severity"], "severe");
        assert_eq!(s["items"][0]["resources"], json!(["C:\\Users\\kid\\Downloads\\0.exe"]));
        let mut failed = detections.clone();
        failed[24].insert("ThreatStatusID".into(), json!(102));
        let s = quarantine_section(&threats, &failed, 25);
        assert_eq!(
            s["status"], "warn",
            "the unremediated one is past the listed ones: {s:?}"
        );
        assert_eq!(s["active_count"], 1);
    }
}
