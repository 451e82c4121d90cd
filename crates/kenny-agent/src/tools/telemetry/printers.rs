//! The printers section: the printers set up on the PC, which is the default, their state and queued jobs.
//!
//! Windows: `Get-Printer` (name, driver, port, status, shared, local or connection, job
//! count) and `Win32_Printer.Default`, after checking the Print Spooler service; a
//! stopped spooler that should start on its own is a warning, one disabled on purpose
//! (a common hardening step) is not. Linux: CUPS through `lpstat -p -d -o` in the C
//! locale; no `lpstat` or no running scheduler means no printing here, said plainly.

use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::command::{self, Output, RunError, first_line};
use super::peripherals::clip;
use super::section as section_of;
use super::windows::{Query, json_of};
use super::{Outcome, Section, Status, not_collected_here};
use crate::tools::psjson;

const MAX_LISTED: usize = 50;
const LPSTAT_LIMIT: Duration = Duration::from_secs(5);

static QUERY: Query = Query {
    script: r#"$ErrorActionPreference = 'Stop'
$spooler = Get-Service -Name Spooler -ErrorAction SilentlyContinue
$state = if ($spooler) { [string]$spooler.Status } else { 'Missing' }
$startType = if ($spooler) { [string]$spooler.StartType } else { $null }
$default = $null
$printers = @()
if ($state -eq 'Running') {
    $default = Get-CimInstance -ClassName Win32_Printer -Filter 'Default = TRUE' | Select-Object -First 1 -ExpandProperty Name
    $printers = @(Get-Printer | ForEach-Object {
        [pscustomobject]@{
            Name = $_.Name
            DriverName = $_.DriverName
            PortName = $_.PortName
            PrinterStatus = [string]$_.PrinterStatus
            Shared = $_.Shared
            Type = [string]$_.Type
            JobCount = $_.JobCount
        }
    })
}
ConvertTo-Json -InputObject ([pscustomobject]@{ Spooler = $state; StartType = $startType; Default = $default; Printers = $printers }) -Compress -Depth 3
"#,
    limit: Duration::from_secs(10),
    parse: parse_windows,
};

pub(super) fn windows_query() -> Option<&'static Query> {
    Some(&QUERY)
}

#[derive(Debug, Clone, PartialEq)]
struct Printer {
    name: String,
    default: bool,
    /// Words describing the state: `Normal`, `Paused, Offline`, `idle`, `disabled`.
    status: String,
    /// A reason CUPS gives ("Filter failed"), or none.
    message: Option<String>,
    error: bool,
    jobs: Option<u64>,
    driver: Option<String>,
    port: Option<String>,
    shared: Option<bool>,
    kind: Option<String>,
}

impl Printer {
    fn to_json(&self) -> Value {
        json!({
            "name": clip(&self.name),
            "default": self.default,
            "status": clip(&self.status),
            "message": self.message.as_deref().map(clip),
            "error": self.error,
            "jobs": self.jobs,
            "driver": self.driver.as_deref().map(clip),
            "port": self.port.as_deref().map(clip),
            "shared": self.shared,
            "type": self.kind,
        })
    }
}

/// Get-Printer's status flags that mean the printer cannot print until someone acts.
/// `Offline` (switched off) and `Paused` are states, not faults; `TonerLow` is a notice.
const WINDOWS_ERRORS: &[&str] = &[
    "Error",
    "PaperJam",
    "PaperOut",
    "PaperProblem",
    "OutputBinFull",
    "NotAvailable",
    "NoToner",
    "UserIntervention",
    "OutOfMemory",
    "DoorOpen",
    "ServerUnknown",
];

/// MSFT_Printer.PrinterStatus bits, for output where the flags came as a number.
const WINDOWS_FLAGS: &[(u64, &str)] = &[
    (1, "Paused"),
    (2, "Error"),
    (4, "PendingDeletion"),
    (8, "PaperJam"),
    (16, "PaperOut"),
    (32, "ManualFeed"),
    (64, "PaperProblem"),
    (128, "Offline"),
    (256, "IOActive"),
    (512, "Busy"),
    (1024, "Printing"),
    (2048, "OutputBinFull"),
    (4096, "NotAvailable"),
    (8192, "Waiting"),
    (16384, "Processing"),
    (32768, "Initialization"),
    (65536, "WarmingUp"),
    (131_072, "TonerLow"),
    (262_144, "NoToner"),
    (524_288, "PagePunt"),
    (1_048_576, "UserIntervention"),
    (2_097_152, "OutOfMemory"),
    (4_194_304, "DoorOpen"),
    (8_388_608, "ServerUnknown"),
    (16_777_216, "PowerSave"),
];

/// `Normal`, `Paused, Offline` (the flags cast to text) or the raw number.
fn windows_status(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Number(n)) => {
            let bits = n.as_u64().unwrap_or(0);
            let names: Vec<String> = WINDOWS_FLAGS
                .iter()
                .filter(|(bit, _)| bits & bit != 0)
                .map(|(_, name)| (*name).to_owned())
                .collect();
            if names.is_empty() { vec!["Normal".into()] } else { names }
        }
        Some(Value::String(s)) if !s.trim().is_empty() => s.split(',').map(|w| w.trim().to_owned()).collect(),
        _ => vec!["Unknown".into()],
    }
}

/// `{Spooler, StartType, Default, Printers: [...]}`.
fn parse_windows(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let spooler = value.get("Spooler").and_then(Value::as_str).unwrap_or("Missing");
    if spooler != "Running" {
        let start = value.get("StartType").and_then(Value::as_str);
        return Ok(spooler_down(spooler, start));
    }
    let default = value.get("Default").and_then(Value::as_str).map(str::to_owned);
    let rows = psjson::rows_of(value.get("Printers").cloned().unwrap_or(Value::Null))?;
    let printers = rows
        .iter()
        .filter_map(|row| {
            let name = psjson::text(row, "Name")?;
            let flags = windows_status(row.get("PrinterStatus"));
            Some(Printer {
                default: default.as_deref() == Some(name.as_str()),
                error: flags.iter().any(|f| WINDOWS_ERRORS.contains(&f.as_str())),
                status: flags.join(", "),
                message: None,
                jobs: psjson::number(row, "JobCount").and_then(|n| u64::try_from(n).ok()),
                driver: psjson::text(row, "DriverName"),
                port: psjson::text(row, "PortName"),
                shared: row.get("Shared").and_then(Value::as_bool),
                kind: psjson::text(row, "Type").map(|t| t.to_lowercase()),
                name,
            })
        })
        .collect();
    Ok(build(printers, "Windows"))
}

fn spooler_down(state: &str, start_type: Option<&str>) -> Section {
    let (status, summary) = match (state, start_type) {
        ("Missing", _) => (
            Status::Ok,
            "no printers: the Print Spooler service is not installed".to_owned(),
        ),
        (_, Some("Disabled")) => (
            Status::Ok,
            "printing is turned off: the Print Spooler service is disabled".to_owned(),
        ),
        (_, Some("Automatic")) => (
            Status::Warn,
            format!(
                "the Print Spooler service is {} although it should start automatically: nothing can print",
                state.to_lowercase()
            ),
        ),
        _ => (
            Status::Ok,
            format!("no printing now: the Print Spooler service is {}", state.to_lowercase()),
        ),
    };
    section_of(
        status,
        summary,
        json!({
            "printers": [],
            "count": 0,
            "truncated": false,
            "default": null,
            "spooler": state,
            "spooler_start_type": start_type,
        }),
    )
}

pub(super) async fn section() -> Outcome {
    if !cfg!(unix) {
        return Ok(not_collected_here());
    }
    match command::run("lpstat", &["-p", "-d", "-o"], LPSTAT_LIMIT).await {
        Ok(output) => from_lpstat(&output),
        Err(RunError::Missing) => Ok(no_cups("no printers: CUPS is not installed (no lpstat)")),
        Err(e) => Err(e.describe("lpstat")),
    }
}

fn from_lpstat(output: &Output) -> Outcome {
    let said = format!("{}\n{}", output.stdout, output.stderr);
    if said.contains("Scheduler is not running") {
        return Ok(no_cups("no printers: the CUPS scheduler is not running"));
    }
    if said.contains("No destinations added") {
        return Ok(no_cups("no printers are set up in CUPS"));
    }
    if !output.success {
        return Err(format!("lpstat failed: {}", first_line(output)));
    }
    Ok(build(parse_lpstat(&output.stdout), "CUPS"))
}

fn no_cups(summary: &str) -> Section {
    section_of(
        Status::Ok,
        summary.to_owned(),
        json!({ "printers": [], "count": 0, "truncated": false, "default": null }),
    )
}

/// `lpstat -p -d -o` in the C locale:
/// `printer NAME is idle.  enabled since DATE`, `printer NAME now printing JOB.  enabled
/// since DATE`, `printer NAME disabled since DATE -` followed by a tab-indented reason,
/// `system default destination: NAME` (or `no system default destination`), and one
/// `NAME-ID  USER  SIZE  DATE` line per queued job.
fn parse_lpstat(text: &str) -> Vec<Printer> {
    let mut printers: Vec<Printer> = Vec::new();
    let mut default = None;
    let mut jobs: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("printer ") {
            let mut words = rest.split_whitespace();
            let Some(name) = words.next() else { continue };
            let state = match words.next() {
                Some("is") => words.next().unwrap_or("").trim_end_matches('.'),
                Some("now") => "printing",
                Some("disabled") => "disabled",
                Some(other) => other,
                None => "",
            };
            printers.push(Printer {
                name: name.to_owned(),
                default: false,
                status: state.to_owned(),
                message: None,
                error: false,
                jobs: Some(0),
                driver: None,
                port: None,
                shared: None,
                kind: None,
            });
        } else if line.starts_with(['\t', ' ']) {
            if let Some(last) = printers.last_mut()
                && last.message.is_none()
                && !line.trim().is_empty()
            {
                last.message = Some(line.trim().to_owned());
            }
        } else if let Some(name) = line.strip_prefix("system default destination:") {
            default = Some(name.trim().to_owned());
        } else if let Some(job) = line.split_whitespace().next()
            && let Some((dest, id)) = job.rsplit_once('-')
            && id.chars().all(|c| c.is_ascii_digit())
            && !id.is_empty()
        {
            jobs.push(dest.to_owned());
        }
    }
    for printer in &mut printers {
        printer.default = default.as_deref() == Some(printer.name.as_str());
        printer.jobs = Some(jobs.iter().filter(|d| **d == printer.name).count() as u64);
        // CUPS stops a queue on its own when the backend or a filter fails; one an
        // admin stopped says "Paused" (cupsdisable's default reason).
        printer.error = printer.status == "disabled" && printer.message.as_deref() != Some("Paused");
    }
    printers
}

fn build(mut printers: Vec<Printer>, source: &str) -> Section {
    printers.sort_by_key(|p| (!p.error, !p.default, p.name.to_lowercase()));
    let count = printers.len();
    let broken: Vec<&Printer> = printers.iter().filter(|p| p.error).collect();
    let default = printers.iter().find(|p| p.default).map(|p| clip(&p.name));
    let jobs: u64 = printers.iter().filter_map(|p| p.jobs).sum();
    let (status, summary) = if let Some(first) = broken.first() {
        let more = match broken.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        let why = first.message.as_deref().unwrap_or(&first.status);
        (
            Status::Warn,
            format!("printer {} needs attention ({}){more}", clip(&first.name), clip(why)),
        )
    } else if count == 0 {
        (Status::Ok, format!("no printers set up ({source})"))
    } else {
        let noun = if count == 1 { "printer" } else { "printers" };
        let mut text = format!("{count} {noun}");
        if let Some(name) = &default {
            text.push_str(&format!(", default {name}"));
        }
        if jobs > 0 {
            text.push_str(&format!(", {jobs} queued jobs"));
        }
        (Status::Ok, text)
    };
    let listed: Vec<Value> = printers.iter().take(MAX_LISTED).map(Printer::to_json).collect();
    section_of(
        status,
        summary,
        json!({
            "printers": listed,
            "count": count,
            "truncated": count > MAX_LISTED,
            "default": default,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LPSTAT: &str = "\
printer Office_Color now printing Office_Color-41.  enabled since Tue 01 Dec 2026 09:12:03 AM UTC
\tRendering completed
printer HP_LaserJet_M404 is idle.  enabled since Mon 30 Nov 2026 04:20:11 PM UTC
printer Label_Printer disabled since Mon 30 Nov 2026 08:01:55 AM UTC -
\t/usr/lib/cups/backend/usb failed
system default destination: HP_LaserJet_M404
Office_Color-41         alice           1048576   Tue 01 Dec 2026 09:12:01 AM UTC
Office_Color-42         bob               20480   Tue 01 Dec 2026 09:13:40 AM UTC
Label_Printer-7         root               2048   Mon 30 Nov 2026 08:01:50 AM UTC
";

    #[test]
    fn lpstat_printers_jobs_default_and_a_stopped_queue() {
        let s = from_lpstat(&Output::printed(LPSTAT, "", true)).unwrap();
        assert_eq!(s["status"], "warn");
        assert_eq!(
            s["summary"],
            "printer Label_Printer needs attention (/usr/lib/cups/backend/usb failed)"
        );
        assert_eq!(s["count"], 3);
        assert_eq!(s["default"], "HP_LaserJet_M404");
        let first = &s["printers"][0];
        assert_eq!(
            (first["name"].as_str(), first["jobs"].as_u64()),
            (Some("Label_Printer"), Some(1))
        );
        assert_eq!(s["printers"][1]["name"], "HP_LaserJet_M404");
        assert_eq!(s["printers"][1]["default"], true);
        assert_eq!(s["printers"][1]["status"], "idle");
        assert_eq!(s["printers"][2]["status"], "printing");
        assert_eq!(s["printers"][2]["jobs"], 2);
        assert_eq!(s["printers"][2]["error"], false);
    }

    #[test]
    fn a_queue_paused_by_an_admin_is_not_an_error() {
        let text =
            "printer Lab disabled since Mon 30 Nov 2026 08:01:55 AM UTC -\n\tPaused\nno system default destination\n";
        let s = from_lpstat(&Output::printed(text, "", true)).unwrap();
        assert_eq!(
            (s["status"].as_str(), s["summary"].as_str()),
            (Some("ok"), Some("1 printer"))
        );
        assert_eq!(s["default"], Value::Null);
    }

    #[test]
    fn no_scheduler_or_no_printers_is_ok_and_other_failures_say_why() {
        let down = from_lpstat(&Output::printed("", "lpstat: Scheduler is not running.\n", false)).unwrap();
        assert_eq!(
            (down["status"].as_str(), down["summary"].as_str()),
            (Some("ok"), Some("no printers: the CUPS scheduler is not running"))
        );
        let none = from_lpstat(&Output::printed("", "lpstat: No destinations added.\n", false)).unwrap();
        assert_eq!(none["summary"], "no printers are set up in CUPS");
        assert_eq!(none["count"], 0);
        assert_eq!(
            from_lpstat(&Output::printed("", "lpstat: Forbidden\n", false)),
            Err("lpstat failed: lpstat: Forbidden".to_owned())
        );
    }

    #[test]
    fn windows_status_flags_as_text_or_number() {
        assert_eq!(windows_status(Some(&json!("Paused, Offline"))), ["Paused", "Offline"]);
        assert_eq!(windows_status(Some(&json!(0))), ["Normal"]);
        assert_eq!(windows_status(Some(&json!(8 | 128))), ["PaperJam", "Offline"]);
        assert_eq!(windows_status(None), ["Unknown"]);
    }

    #[test]
    fn a_stopped_spooler_warns_only_when_it_should_run() {
        assert_eq!(spooler_down("Stopped", Some("Automatic"))["status"], "warn");
        assert_eq!(spooler_down("Stopped", Some("Disabled"))["status"], "ok");
        assert_eq!(spooler_down("Stopped", Some("Manual"))["status"], "ok");
        assert_eq!(spooler_down("Missing", None)["status"], "ok");
    }

    #[test]
    fn the_windows_query_reads_get_printer_and_the_default_from_cim() {
        for part in [
            "Get-Service -Name Spooler",
            "Get-Printer",
            "JobCount",
            "Win32_Printer -Filter 'Default = TRUE'",
        ] {
            assert!(QUERY.script.contains(part), "{part}");
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn this_machine_answers_without_failing() {
        let s = section().await.unwrap();
        assert!(s["printers"].is_array() && s["count"].is_u64(), "{s:?}");
        assert_ne!(s["status"], "crit", "{s:?}");
    }
}
