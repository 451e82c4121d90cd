//! Windows: startup commands (Run keys, Startup folders) from WMI, and scheduled tasks
//! outside \Microsoft\ that start at logon or boot.

use std::time::Duration;

use serde_json::{Map, Value};

use super::Entry;
use crate::tools::shell::run_powershell;
use crate::tools::{ToolError, psjson};

const LIMIT: Duration = Duration::from_secs(50);
const OUTPUT_CAP: usize = 8 * 1024 * 1024;

/// Task Scheduler failures are caught on their own so that startup commands still come
/// back (the ScheduledTasks module is missing on some stripped-down systems).
pub(crate) const SCRIPT: &str = r"$ErrorActionPreference = 'Stop'
$startup = @(Get-CimInstance -ClassName Win32_StartupCommand | Select-Object Name,Command,Location,User)
$tasks = @()
$taskError = $null
try {
  $tasks = @(Get-ScheduledTask | Where-Object {
      $_.TaskPath -notlike '\Microsoft\*' -and
      @($_.Triggers | Where-Object { $_.CimClass.CimClassName -in 'MSFT_TaskLogonTrigger','MSFT_TaskBootTrigger' }).Count -gt 0
    } | ForEach-Object {
      [pscustomobject]@{
        Name = $_.TaskName
        Path = $_.TaskPath
        State = [string]$_.State
        Command = (@($_.Actions | ForEach-Object { ([string]$_.Execute + ' ' + [string]$_.Arguments).Trim() }) -join '; ')
        User = $_.Principal.UserId
        Triggers = (@($_.Triggers | ForEach-Object { $_.CimClass.CimClassName -replace '^MSFT_Task','' -replace 'Trigger$','' }) -join ',')
      }
    })
} catch {
  $taskError = $_.Exception.Message
}
[pscustomobject]@{ Startup = $startup; Tasks = $tasks; TaskError = $taskError } | ConvertTo-Json -Compress -Depth 4
";

pub(super) async fn list() -> Result<(Vec<Entry>, Vec<String>), ToolError> {
    let out = run_powershell(SCRIPT, LIMIT, OUTPUT_CAP).await?;
    if !out.status.success() {
        return Err(ToolError::exec_failed(format!(
            "listing startup commands with Get-CimInstance Win32_StartupCommand failed: {}",
            out.stderr.into_text().trim()
        )));
    }
    parse(&out.stdout.into_text()).map_err(ToolError::exec_failed)
}

pub(crate) fn parse(stdout: &str) -> Result<(Vec<Entry>, Vec<String>), String> {
    let mut notes = vec![
        "startup commands disabled in Task Manager are still listed by Windows; their `enabled` is null".to_owned(),
    ];
    let Some(reply) = psjson::rows(stdout)?.into_iter().next() else {
        return Err("PowerShell printed nothing for the startup query".to_owned());
    };
    let mut entries: Vec<Entry> = psjson::rows_of(reply.get("Startup").cloned().unwrap_or(Value::Null))?
        .iter()
        .filter_map(startup_command)
        .collect();
    entries.extend(
        psjson::rows_of(reply.get("Tasks").cloned().unwrap_or(Value::Null))?
            .iter()
            .filter_map(task),
    );
    if let Some(error) = psjson::text(&reply, "TaskError") {
        notes.push(format!("scheduled tasks could not be listed: {error}"));
    }
    Ok((entries, notes))
}

fn startup_command(row: &Map<String, Value>) -> Option<Entry> {
    let command = psjson::text(row, "Command");
    let name = psjson::text(row, "Name").or_else(|| command.clone())?;
    Some(Entry {
        kind: "startup",
        name,
        command,
        location: psjson::text(row, "Location").unwrap_or_default(),
        enabled: None,
        user: psjson::text(row, "User"),
        extra: Map::new(),
    })
}

fn task(row: &Map<String, Value>) -> Option<Entry> {
    let name = psjson::text(row, "Name")?;
    let path = psjson::text(row, "Path").unwrap_or_else(|| "\\".to_owned());
    let mut extra = Map::new();
    if let Some(triggers) = psjson::text(row, "Triggers") {
        extra.insert("triggers".into(), triggers.into());
    }
    Some(Entry {
        kind: "scheduled_task",
        name: format!("{path}{name}"),
        command: psjson::text(row, "Command"),
        location: format!("Task Scheduler {path}"),
        enabled: psjson::text(row, "State").map(|state| !state.eq_ignore_ascii_case("Disabled")),
        user: psjson::text(row, "User"),
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Windows PowerShell 5.1 output (recorded shape) with two startup commands and tasks.
    const RECORDED: &str = r#"{"Startup":[{"Name":"SecurityHealth","Command":"%windir%\\system32\\SecurityHealthSystray.exe","Location":"HKLM\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\Run","User":"Public"},{"Name":"OneDrive","Command":"\"C:\\Users\\kim\\AppData\\Local\\Microsoft\\OneDrive\\OneDrive.exe\" /background","Location":"HKU\\S-1-5-21-1004336348-1177238915-682003330-1001\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\Run","User":"PC-KIM\\kim"}],"Tasks":[{"Name":"GoogleUpdateTaskMachineCore","Path":"\\","State":"Ready","Command":"C:\\Program Files (x86)\\Google\\Update\\GoogleUpdate.exe /c","User":"SYSTEM","Triggers":"Logon,Daily"},{"Name":"Backup at boot","Path":"\\Vendor\\","State":"Disabled","Command":"C:\\Vendor\\backup.exe","User":null,"Triggers":"Boot"}],"TaskError":null}"#;

    #[test]
    fn startup_commands_and_tasks() {
        let (entries, notes) = parse(RECORDED).unwrap();
        assert_eq!(entries.len(), 4);
        assert_eq!(entries[0].kind, "startup");
        assert_eq!(entries[0].name, "SecurityHealth");
        assert_eq!(entries[0].enabled, None);
        assert_eq!(entries[1].user.as_deref(), Some("PC-KIM\\kim"));
        assert!(entries[1].location.starts_with("HKU\\S-1-5-21-"));
        assert_eq!(
            entries[1].command.as_deref(),
            Some("\"C:\\Users\\kim\\AppData\\Local\\Microsoft\\OneDrive\\OneDrive.exe\" /background")
        );
        assert_eq!(entries[2].kind, "scheduled_task");
        assert_eq!(entries[2].name, "\\GoogleUpdateTaskMachineCore");
        assert_eq!(entries[2].enabled, Some(true));
        assert_eq!(entries[2].extra["triggers"], "Logon,Daily");
        assert_eq!(entries[3].name, "\\Vendor\\Backup at boot");
        assert_eq!(entries[3].location, "Task Scheduler \\Vendor\\");
        assert_eq!(entries[3].enabled, Some(false));
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn single_objects_empty_lists_and_a_task_error() {
        let text = r#"{"Startup":{"Name":"Only","Command":"only.exe","Location":"Startup","User":"PC\\kim"},"Tasks":[],"TaskError":"The term 'Get-ScheduledTask' is not recognized"}"#;
        let (entries, notes) = parse(text).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].name, "Only");
        assert!(notes.iter().any(|n| n.contains("Get-ScheduledTask")), "{notes:?}");

        let (entries, _) = parse(r#"{"Startup":[],"Tasks":null,"TaskError":null}"#).unwrap();
        assert!(entries.is_empty());
        assert!(parse("").is_err());
        assert!(parse("not json").is_err());
    }

    #[test]
    fn the_script_skips_microsoft_tasks_and_keeps_logon_and_boot_triggers() {
        assert!(SCRIPT.contains(r"$_.TaskPath -notlike '\Microsoft\*'"));
        assert!(SCRIPT.contains("'MSFT_TaskLogonTrigger','MSFT_TaskBootTrigger'"));
        assert!(
            SCRIPT
                .contains("Get-CimInstance -ClassName Win32_StartupCommand | Select-Object Name,Command,Location,User")
        );
    }
}
