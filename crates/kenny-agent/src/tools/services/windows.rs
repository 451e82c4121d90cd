//! Windows services, from WMI's Win32_Service through PowerShell.

use serde_json::{Map, Value, json};

use super::{COMMAND_LIMIT, OUTPUT_CAP, Service, Standing};
use crate::tools::ToolError;
use crate::tools::psjson;
use crate::tools::shell::run_powershell;

pub(super) const SCRIPT: &str = "\
$ErrorActionPreference = 'Stop'
Get-CimInstance -ClassName Win32_Service |
  Select-Object Name,DisplayName,State,StartMode,ProcessId,ExitCode |
  ConvertTo-Json -Compress
";

/// Win32 exit codes that do not mean the service failed: it stopped normally, or it was
/// never started since boot (ERROR_SERVICE_NEVER_STARTED).
const BENIGN_EXIT_CODES: [i64; 2] = [0, 1077];

pub(super) async fn services() -> Result<Vec<Service>, ToolError> {
    let out = run_powershell(SCRIPT, COMMAND_LIMIT, OUTPUT_CAP).await?;
    if !out.status.success() {
        return Err(ToolError::exec_failed(format!(
            "listing services with Get-CimInstance Win32_Service failed: {}",
            out.stderr.into_text().trim()
        )));
    }
    parse(&out.stdout.into_text()).map_err(ToolError::exec_failed)
}

pub(crate) fn parse(stdout: &str) -> Result<Vec<Service>, String> {
    Ok(psjson::rows(stdout)?.iter().filter_map(service).collect())
}

fn service(row: &Map<String, Value>) -> Option<Service> {
    let name = psjson::text(row, "Name")?;
    let display = psjson::text(row, "DisplayName");
    let state = psjson::text(row, "State").unwrap_or_default();
    let exit_code = psjson::number(row, "ExitCode");
    let stopped = state.eq_ignore_ascii_case("Stopped");
    let standing = Standing {
        running: state.eq_ignore_ascii_case("Running"),
        stopped,
        failed: stopped && exit_code.is_some_and(|code| !BENIGN_EXIT_CODES.contains(&code)),
        unknown: state.is_empty() || state.eq_ignore_ascii_case("Unknown"),
    };
    let pid = psjson::number(row, "ProcessId").filter(|&pid| pid > 0);
    let mut names = vec![name.clone()];
    names.extend(display.clone());
    Some(Service {
        names,
        standing,
        entry: json!({
            "name": name,
            "description": display,
            "active": active(&state),
            "sub": state,
            "start_type": psjson::text(row, "StartMode").map(|m| m.to_lowercase()),
            "pid": pid,
            "exit_code": exit_code,
        }),
    })
}

/// Win32_Service.State in the words the systemd listing uses.
fn active(state: &str) -> String {
    match state.to_ascii_lowercase().as_str() {
        "running" => "running".into(),
        "stopped" => "stopped".into(),
        "start pending" => "starting".into(),
        "stop pending" => "stopping".into(),
        "continue pending" => "resuming".into(),
        "pause pending" => "pausing".into(),
        "paused" => "paused".into(),
        "" => "unknown".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::services::{StateFilter, render};

    /// Windows PowerShell 5.1 output for a few services (recorded shape, ConvertTo-Json -Compress).
    const MANY: &str = r#"[{"Name":"AudioSrv","DisplayName":"Windows Audio","State":"Running","StartMode":"Auto","ProcessId":2412,"ExitCode":0},{"Name":"BITS","DisplayName":"Background Intelligent Transfer Service","State":"Stopped","StartMode":"Manual","ProcessId":0,"ExitCode":0},{"Name":"MapsBroker","DisplayName":"Downloaded Maps Manager","State":"Stopped","StartMode":"Auto","ProcessId":0,"ExitCode":1077},{"Name":"Spooler","DisplayName":"Print Spooler","State":"Stopped","StartMode":"Auto","ProcessId":0,"ExitCode":1067},{"Name":"wuauserv","DisplayName":"Windows Update","State":"Start Pending","StartMode":"Manual","ProcessId":1308,"ExitCode":0}]"#;

    fn names(services: &[Service], filter: StateFilter, name: Option<&str>) -> Vec<String> {
        render("windows", services.to_vec(), filter, name, 100)["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn parses_an_array_and_maps_the_fields() {
        let services = parse(MANY).unwrap();
        assert_eq!(services.len(), 5);
        assert_eq!(
            services[0].entry,
            json!({"name": "AudioSrv", "description": "Windows Audio", "active": "running", "sub": "Running",
                   "start_type": "auto", "pid": 2412, "exit_code": 0})
        );
        assert_eq!(services[1].entry["pid"], Value::Null, "pid 0 means no process");
        assert_eq!(services[4].entry["active"], "starting");
        assert_eq!(names(&services, StateFilter::Running, None), ["AudioSrv"]);
        assert_eq!(
            names(&services, StateFilter::Stopped, None),
            ["BITS", "MapsBroker", "Spooler"]
        );
        assert_eq!(
            names(&services, StateFilter::Failed, None),
            ["Spooler"],
            "1067 = the process ended unexpectedly"
        );
        // Display names are matched too: people know "Windows Update", not wuauserv.
        assert_eq!(names(&services, StateFilter::All, Some("windows update")), ["wuauserv"]);
    }

    #[test]
    fn a_single_service_is_an_object_not_an_array() {
        let one = r#"{"Name":"Spooler","DisplayName":"Print Spooler","State":"Running","StartMode":"Auto","ProcessId":3020,"ExitCode":0}"#;
        let services = parse(one).unwrap();
        assert_eq!(services.len(), 1);
        assert_eq!(services[0].entry["name"], "Spooler");
        assert_eq!(services[0].entry["pid"], 3020);
    }

    #[test]
    fn no_output_is_no_services_and_garbage_is_an_error() {
        assert!(parse("").unwrap().is_empty());
        assert!(parse("\r\n").unwrap().is_empty());
        assert!(parse("Get-CimInstance : Access denied").is_err());
        // Rows without a name are skipped rather than invented.
        assert!(parse(r#"[{"DisplayName":"x"}]"#).unwrap().is_empty());
    }

    #[test]
    fn the_script_is_fixed_text() {
        assert!(SCRIPT.contains("Get-CimInstance -ClassName Win32_Service"));
        assert!(SCRIPT.contains("Select-Object Name,DisplayName,State,StartMode,ProcessId,ExitCode"));
        assert!(SCRIPT.trim_end().ends_with("ConvertTo-Json -Compress"));
    }
}
