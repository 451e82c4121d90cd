//! Remote help through Quick Assist (Windows).
//!
//! The agent runs as a service in session 0, where nothing it starts can be seen. Quick
//! Assist has to open on the desktop of the person at the PC, so it is started by a
//! one-off scheduled task that runs as that signed-in user, interactively. Quick Assist
//! itself asks the person to accept; nothing connects without them.

use std::time::{Duration, Instant};

use kenny_proto::error::ErrorCode;
use serde_json::{Value, json};

use super::bounded::blocking;
use super::shell::powershell_json;
use super::winsession::{
    DESKTOPS_SCRIPT, DesktopOwner, check_account, delete_named_task_args, interactive_user, parse_desktops, query_user,
    run_named_task_args, schtasks, user_task_args,
};
use super::{ToolError, ToolResult};

const PACKAGE_NAME: &str = "MicrosoftCorporationII.QuickAssist";
const APP_ID: &str = r"shell:AppsFolder\MicrosoftCorporationII.QuickAssist_8wekyb3d8bbwe!App";
const PROCESS_NAME: &str = "QuickAssist";
const TASK_NAME: &str = "kenny-quickassist";
/// Quick Assist's service; reaching it is what a session needs.
const SERVICE_HOST: &str = "remoteassistance.support.services.microsoft.com";
const CONNECT_LIMIT: Duration = Duration::from_secs(4);
const SCRIPT_LIMIT: Duration = Duration::from_secs(20);
const COMMAND_LIMIT: Duration = Duration::from_secs(10);
/// How long to look for Quick Assist's window process after the task ran.
const APPEAR_WAIT: Duration = Duration::from_secs(8);

/// Facts about the package and who is signed in, from one PowerShell run. The package is
/// looked up for all users: the service account has no Quick Assist of its own.
pub(super) fn status_script() -> String {
    format!(
        "$ErrorActionPreference = 'Stop'\n\
         $qa = Get-AppxPackage -AllUsers -Name '{PACKAGE_NAME}' -ErrorAction SilentlyContinue |\n\
         \x20   Sort-Object -Property {{ [version]$_.Version }} -Descending | Select-Object -First 1\n\
         {desktops}\
         $package = $null\n\
         if ($qa) {{ $package = [pscustomobject]@{{ name = $qa.Name; version = \"$($qa.Version)\"; full_name = $qa.PackageFullName }} }}\n\
         [pscustomobject]@{{ package = $package; explorer = $explorer }} | ConvertTo-Json -Compress -Depth 4\n",
        desktops = DESKTOPS_SCRIPT,
    )
}

pub(super) fn stop_script() -> String {
    format!(
        "$ErrorActionPreference = 'Stop'\n\
         $running = @(Get-Process -Name '{PROCESS_NAME}' -ErrorAction SilentlyContinue)\n\
         if ($running.Count -gt 0) {{ $running | Stop-Process -Force }}\n\
         [pscustomobject]@{{ stopped = $running.Count }} | ConvertTo-Json -Compress\n"
    )
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct PackageFacts {
    pub version: Option<String>,
    pub desktops: Vec<DesktopOwner>,
}

/// Reads the status script's JSON. PowerShell writes a one-element array as a bare
/// object in some versions, so both forms are accepted.
pub(super) fn parse_status(value: &Value) -> PackageFacts {
    let version = value
        .get("package")
        .and_then(|p| p.get("version"))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    PackageFacts {
        version,
        desktops: parse_desktops(value.get("explorer")),
    }
}

pub(super) fn create_task_args(account: &str) -> Vec<String> {
    user_task_args(TASK_NAME, &format!("explorer.exe {APP_ID}"), account)
}

pub(super) fn run_task_args() -> Vec<String> {
    run_named_task_args(TASK_NAME)
}

pub(super) fn delete_task_args() -> Vec<String> {
    delete_named_task_args(TASK_NAME)
}

fn windows_only() -> Result<(), ToolError> {
    if cfg!(windows) {
        Ok(())
    } else {
        Err(ToolError::new(
            ErrorCode::Unsupported,
            "Quick Assist exists only on Windows",
        ))
    }
}

struct Facts {
    version: Option<String>,
    user: Option<DesktopOwner>,
}

async fn gather() -> Result<Facts, ToolError> {
    let value = powershell_json(
        "looking up Quick Assist and the signed-in users",
        &status_script(),
        SCRIPT_LIMIT,
    )
    .await?;
    let facts = parse_status(&value);
    let sessions = query_user().await;
    Ok(Facts {
        version: facts.version,
        user: interactive_user(&sessions, &facts.desktops),
    })
}

async fn internet_ok() -> bool {
    matches!(
        tokio::time::timeout(CONNECT_LIMIT, tokio::net::TcpStream::connect((SERVICE_HOST, 443))).await,
        Ok(Ok(_))
    )
}

pub(super) async fn status() -> ToolResult {
    windows_only()?;
    let (facts, online) = tokio::join!(gather(), internet_ok());
    let facts = facts?;
    Ok(json!({
        "installed": facts.version.is_some(),
        "version": facts.version,
        "internet_ok": online,
        "interactive_session": facts.user.is_some(),
        "user": facts.user.map(|u| u.account),
    }))
}

pub(super) async fn start() -> ToolResult {
    windows_only()?;
    let facts = gather().await?;
    if facts.version.is_none() {
        return Err(ToolError::not_found(
            "Quick Assist is not installed on this PC; install it from the Microsoft Store (winget_install with id 9P7BP5VNWKX5 from the msstore source)",
        ));
    }
    let Some(user) = facts.user else {
        return Err(ToolError::exec_failed(
            "nobody is signed in at this PC: Quick Assist needs a person at the desktop to accept the session",
        ));
    };
    check_account(&user.account)?;
    schtasks(
        &create_task_args(&user.account),
        "create the task that opens Quick Assist",
    )
    .await?;
    let ran = schtasks(&run_task_args(), "run the task that opens Quick Assist").await;
    let pid = if ran.is_ok() {
        wait_for_quick_assist().await
    } else {
        None
    };
    // The task is a one-off; leaving it would clutter the user's Task Scheduler.
    let deleted = schtasks(&delete_task_args(), "delete the one-off task").await;
    ran?;
    let mut note = format!(
        "Quick Assist opened on {}'s desktop. A helper must share the security code and the person at this PC must accept the connection.",
        user.account
    );
    if pid.is_none() {
        note.push_str(&format!(
            " Its window did not show up within {}s; ask the person whether it opened.",
            APPEAR_WAIT.as_secs()
        ));
    }
    if let Err(e) = deleted {
        note.push_str(&format!(
            " The scheduled task {TASK_NAME} could not be removed: {}",
            e.message
        ));
    }
    Ok(json!({"launched": true, "pid": pid, "user": user.account, "note": note}))
}

pub(super) async fn stop() -> ToolResult {
    windows_only()?;
    let value = powershell_json("stopping Quick Assist", &stop_script(), SCRIPT_LIMIT).await?;
    let count = value.get("stopped").and_then(Value::as_u64).unwrap_or(0);
    let mut result = json!({"stopped": count > 0, "processes": count});
    if count == 0 {
        result["note"] = Value::from("Quick Assist was not running");
    }
    Ok(result)
}

/// Quick Assist's process id once it runs, looked up for a few seconds.
async fn wait_for_quick_assist() -> Option<u32> {
    let until = Instant::now() + APPEAR_WAIT;
    loop {
        let found = blocking("looking for Quick Assist", COMMAND_LIMIT, find_quick_assist)
            .await
            .ok()
            .flatten();
        if found.is_some() || Instant::now() >= until {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn find_quick_assist() -> Option<u32> {
    let mut sys = sysinfo::System::new().ok()?;
    sys.refresh_processes(sysinfo::ProcessesToUpdate::All, true);
    let wanted = format!("{PROCESS_NAME}.exe");
    sys.processes()
        .iter()
        .find(|(_, p)| p.name().to_string_lossy().eq_ignore_ascii_case(&wanted))
        .map(|(pid, _)| pid.as_u32())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::winsession::tests::{QUERY_USER, QUERY_USER_DE};
    use crate::tools::winsession::{Session, parse_query_user};

    /// The status script's output, as ConvertTo-Json -Compress writes it.
    const STATUS_JSON: &str = r#"{"package":{"name":"MicrosoftCorporationII.QuickAssist","version":"2.0.34.0","full_name":"MicrosoftCorporationII.QuickAssist_2.0.34.0_x64__8wekyb3d8bbwe"},"explorer":[{"session":1,"domain":"PC-KITCHEN","user":"alice"},{"session":3,"domain":"AzureAD","user":"BobJones"}]}"#;

    #[test]
    fn package_and_desktops_are_read() {
        let facts = parse_status(&serde_json::from_str(STATUS_JSON).unwrap());
        assert_eq!(facts.version.as_deref(), Some("2.0.34.0"));
        assert_eq!(
            facts.desktops,
            [
                DesktopOwner {
                    session: 1,
                    account: "PC-KITCHEN\\alice".into()
                },
                DesktopOwner {
                    session: 3,
                    account: "AzureAD\\BobJones".into()
                },
            ]
        );
        let single = r#"{"package":null,"explorer":{"session":2,"domain":"","user":"eva"}}"#;
        let facts = parse_status(&serde_json::from_str(single).unwrap());
        assert_eq!(facts.version, None);
        assert_eq!(
            facts.desktops,
            [DesktopOwner {
                session: 2,
                account: "eva".into()
            }]
        );
        let nobody = r#"{"package":null,"explorer":[]}"#;
        assert_eq!(
            parse_status(&serde_json::from_str(nobody).unwrap()),
            PackageFacts::default()
        );
    }

    #[test]
    fn the_console_user_is_chosen_by_their_full_account_name() {
        let sessions = parse_query_user(QUERY_USER);
        let desktops = parse_status(&serde_json::from_str(STATUS_JSON).unwrap()).desktops;
        assert_eq!(
            interactive_user(&sessions, &desktops),
            Some(DesktopOwner {
                session: 1,
                account: "PC-KITCHEN\\alice".into()
            })
        );
        // Only an RDP session connected: its user, named by explorer's owner there.
        let rdp_only: Vec<Session> = sessions.iter().filter(|s| s.id != 1).cloned().collect();
        assert_eq!(
            interactive_user(&rdp_only, &desktops).unwrap().account,
            "AzureAD\\BobJones"
        );
        // Nobody connected: no one to accept a session.
        let disconnected = parse_query_user(QUERY_USER_DE);
        assert_eq!(interactive_user(&disconnected, &desktops), None);
        // No quser on this edition: any desktop outside session 0.
        assert_eq!(interactive_user(&[], &desktops).unwrap().session, 1);
        assert_eq!(
            interactive_user(
                &[],
                &[DesktopOwner {
                    session: 0,
                    account: "x".into()
                }]
            ),
            None
        );
        // quser's name when explorer's owner is unknown.
        assert_eq!(interactive_user(&sessions, &[]).unwrap().account, "alice");
    }

    #[test]
    fn scheduled_task_command_lines() {
        assert_eq!(
            create_task_args("PC-KITCHEN\\alice"),
            [
                "/create",
                "/tn",
                "kenny-quickassist",
                "/tr",
                "explorer.exe shell:AppsFolder\\MicrosoftCorporationII.QuickAssist_8wekyb3d8bbwe!App",
                "/sc",
                "once",
                "/st",
                "00:00",
                "/ru",
                "PC-KITCHEN\\alice",
                "/it",
                "/f",
            ]
        );
        assert_eq!(run_task_args(), ["/run", "/tn", "kenny-quickassist"]);
        assert_eq!(delete_task_args(), ["/delete", "/tn", "kenny-quickassist", "/f"]);
        // A name with a space stays one argument.
        assert_eq!(create_task_args("john smith")[10], "john smith");
        assert!(check_account("AzureAD\\BobJones").is_ok());
        assert!(check_account("john smith").is_ok());
        for bad in ["", "a\"b", "a\nb", "x /delete", "a|b"] {
            assert!(check_account(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scripts() {
        let status = status_script();
        assert!(
            status.contains("Get-AppxPackage -AllUsers -Name 'MicrosoftCorporationII.QuickAssist'"),
            "{status}"
        );
        assert!(
            status.contains("[version]$_.Version"),
            "versions sort as versions, not text"
        );
        assert!(status.contains("Name = 'explorer.exe'"));
        assert!(status.contains("GetOwner"));
        assert!(status.trim_end().ends_with("ConvertTo-Json -Compress -Depth 4"));
        let stop = stop_script();
        assert!(stop.contains("Get-Process -Name 'QuickAssist'"));
        assert!(stop.contains("Stop-Process -Force"));
        assert!(stop.trim_end().ends_with("ConvertTo-Json -Compress"));
    }

    #[cfg(not(windows))]
    #[tokio::test]
    async fn off_windows_the_handlers_refuse_plainly() {
        for result in [status().await, start().await, stop().await] {
            assert_eq!(result.unwrap_err().code, ErrorCode::Unsupported);
        }
    }
}
