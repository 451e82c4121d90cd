//! Remote help through Quick Assist (Windows).
//!
//! The agent runs as a service in session 0, where nothing it starts can be seen. Quick
//! Assist has to open on the desktop of the person at the PC, so it is started by a
//! one-off scheduled task that runs as that signed-in user, interactively. Quick Assist
//! itself asks the person to accept; nothing connects without them.

use std::time::{Duration, Instant};

use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value, json};
use tokio::process::Command;

use super::bounded::{BoundedBuf, blocking};
use super::process::run_captured_into;
use super::shell::{powershell_json, system32_tool};
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
         $explorer = @(Get-CimInstance -ClassName Win32_Process -Filter \"Name = 'explorer.exe'\" -ErrorAction SilentlyContinue | ForEach-Object {{\n\
         \x20   $owner = Invoke-CimMethod -InputObject $_ -MethodName GetOwner -ErrorAction SilentlyContinue\n\
         \x20   [pscustomobject]@{{ session = [int]$_.SessionId; domain = \"$($owner.Domain)\"; user = \"$($owner.User)\" }}\n\
         }})\n\
         $package = $null\n\
         if ($qa) {{ $package = [pscustomobject]@{{ name = $qa.Name; version = \"$($qa.Version)\"; full_name = $qa.PackageFullName }} }}\n\
         [pscustomobject]@{{ package = $package; explorer = $explorer }} | ConvertTo-Json -Compress -Depth 4\n"
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

/// The owner of an explorer.exe: someone with a desktop in that session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DesktopOwner {
    pub session: u32,
    pub account: String,
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
    let explorer: Vec<&Value> = match value.get("explorer") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(item @ Value::Object(_)) => vec![item],
        _ => Vec::new(),
    };
    let desktops = explorer
        .into_iter()
        .filter_map(|e| {
            let session = u32::try_from(e.get("session")?.as_u64()?).ok()?;
            let user = e.get("user")?.as_str()?.trim();
            let domain = e.get("domain").and_then(Value::as_str).unwrap_or("").trim();
            if user.is_empty() {
                return None;
            }
            let account = if domain.is_empty() {
                user.to_owned()
            } else {
                format!("{domain}\\{user}")
            };
            Some(DesktopOwner { session, account })
        })
        .collect();
    PackageFacts { version, desktops }
}

/// One row of `query user` (quser.exe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Session {
    pub user: String,
    /// `console`, `rdp-tcp#3`, ...; none for a disconnected session.
    pub name: Option<String>,
    pub id: u32,
    pub state: String,
}

/// Parses `query user`'s table. Column titles are translated, but their positions are
/// not: the user name runs up to where the second title starts, and a session without
/// a session name (disconnected) goes straight to its numeric id. User names may hold
/// spaces; session names do not.
pub(super) fn parse_query_user(text: &str) -> Vec<Session> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let header: Vec<char> = header.chars().collect();
    let Some(name_col) = (1..header.len()).find(|&i| {
        header[i - 1] == ' ' && header[i] != ' ' && {
            // the second title: after the first one has started
            header[..i].iter().any(|c| *c != ' ')
        }
    }) else {
        return Vec::new();
    };
    lines
        .filter_map(|line| {
            let chars: Vec<char> = line.chars().collect();
            if chars.len() <= name_col {
                return None;
            }
            let user: String = chars[1.min(chars.len())..name_col].iter().collect();
            let rest: String = chars[name_col..].iter().collect();
            let mut tokens = rest.split_whitespace();
            let first = tokens.next()?;
            let (name, id) = if first.chars().all(|c| c.is_ascii_digit()) {
                (None, first)
            } else {
                (Some(first.to_owned()), tokens.next()?)
            };
            Some(Session {
                user: user.trim().to_owned(),
                name,
                id: id.parse().ok()?,
                state: tokens.next().unwrap_or("").to_owned(),
            })
        })
        .filter(|s| !s.user.is_empty())
        .collect()
}

/// Who Quick Assist should open for: the user of a connected session (the console
/// first), named as explorer.exe's owner there (`DOMAIN\user`, which schtasks needs)
/// when known. Without quser (Home editions lack it), any desktop outside session 0.
pub(super) fn interactive_user(sessions: &[Session], desktops: &[DesktopOwner]) -> Option<DesktopOwner> {
    let mut connected: Vec<&Session> = sessions.iter().filter(|s| s.name.is_some()).collect();
    connected.sort_by_key(|s| (s.name.as_deref() != Some("console"), s.id));
    if let Some(session) = connected.first() {
        let account = desktops
            .iter()
            .find(|d| d.session == session.id)
            .map_or_else(|| session.user.clone(), |d| d.account.clone());
        return Some(DesktopOwner {
            session: session.id,
            account,
        });
    }
    if sessions.is_empty() {
        return desktops.iter().find(|d| d.session != 0).cloned();
    }
    None
}

pub(super) fn create_task_args(account: &str) -> Vec<String> {
    user_task_args(TASK_NAME, &format!("explorer.exe {APP_ID}"), account)
}

/// A one-off task that runs `command` as `account` on that user's desktop (`/it`); run
/// with `/run`, then deleted. How a service in session 0 shows anything to a person.
pub(crate) fn user_task_args(task_name: &str, command: &str, account: &str) -> Vec<String> {
    [
        "/create", "/tn", task_name, "/tr", command, "/sc", "once", "/st", "00:00", "/ru", account, "/it", "/f",
    ]
    .map(String::from)
    .into()
}

pub(super) fn run_task_args() -> Vec<String> {
    run_named_task_args(TASK_NAME)
}

pub(super) fn delete_task_args() -> Vec<String> {
    delete_named_task_args(TASK_NAME)
}

pub(crate) fn run_named_task_args(task_name: &str) -> Vec<String> {
    ["/run", "/tn", task_name].map(String::from).into()
}

pub(crate) fn delete_named_task_args(task_name: &str) -> Vec<String> {
    ["/delete", "/tn", task_name, "/f"].map(String::from).into()
}

/// An account name goes to schtasks as one argument; it must look like one.
pub(crate) fn check_account(account: &str) -> Result<(), ToolError> {
    let ok = !account.is_empty()
        && account.chars().count() <= 104
        && !account.chars().any(|c| c.is_control() || "\"/[]:|<>+=;,?*".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ToolError::exec_failed(format!(
            "the signed-in account name {account:?} cannot be passed to schtasks"
        )))
    }
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

/// The person signed in at this PC's desktop, if any (`DOMAIN\\user`).
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) async fn signed_in_user() -> Result<Option<String>, ToolError> {
    Ok(gather().await?.user.map(|u| u.account))
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

/// `query user` is missing on some editions and exits 1 when nobody is signed in;
/// both read as "no sessions".
async fn query_user() -> Vec<Session> {
    let cmd = Command::new(system32_tool("quser.exe"));
    match run_captured_into(
        cmd,
        None,
        COMMAND_LIMIT,
        BoundedBuf::new(64 * 1024),
        BoundedBuf::new(4096),
    )
    .await
    {
        Ok(done) => parse_query_user(&done.stdout.into_text()),
        Err(_) => Vec::new(),
    }
}

async fn internet_ok() -> bool {
    matches!(
        tokio::time::timeout(CONNECT_LIMIT, tokio::net::TcpStream::connect((SERVICE_HOST, 443))).await,
        Ok(Ok(_))
    )
}

pub async fn status(_args: &Map<String, Value>) -> ToolResult {
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

pub async fn start(_args: &Map<String, Value>) -> ToolResult {
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

pub async fn stop(_args: &Map<String, Value>) -> ToolResult {
    windows_only()?;
    let value = powershell_json("stopping Quick Assist", &stop_script(), SCRIPT_LIMIT).await?;
    let count = value.get("stopped").and_then(Value::as_u64).unwrap_or(0);
    let mut result = json!({"stopped": count > 0, "processes": count});
    if count == 0 {
        result["note"] = Value::from("Quick Assist was not running");
    }
    Ok(result)
}

pub(crate) async fn schtasks(args: &[String], what: &str) -> Result<(), ToolError> {
    let mut cmd = Command::new(system32_tool("schtasks.exe"));
    cmd.args(args);
    let done = run_captured_into(
        cmd,
        None,
        COMMAND_LIMIT,
        BoundedBuf::new(16 * 1024),
        BoundedBuf::new(16 * 1024),
    )
    .await
    .map_err(|e| ToolError::new(e.code, format!("could not {what}: {}", e.message)))?;
    if done.status.success() {
        return Ok(());
    }
    let stderr = done.stderr.into_text();
    let said = if stderr.trim().is_empty() {
        done.stdout.into_text()
    } else {
        stderr
    };
    Err(ToolError::exec_failed(format!(
        "could not {what}: schtasks said: {}",
        said.trim()
    )))
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

    /// `query user` on a PC with a console user, a disconnected user whose name has a
    /// space, and an RDP user; quser marks its own session with `>`.
    const QUERY_USER: &str = " USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME\r\n\
        >alice                 console             1  Active      none   7/2/2026 9:01 AM\r\n\
        \x20john smith                                2  Disc         1:02  7/1/2026 8:00 PM\r\n\
        \x20bob                   rdp-tcp#3           3  Active          .  7/2/2026 10:15 AM\r\n";

    const QUERY_USER_DE: &str = " BENUTZERNAME          SITZUNGSNAME       ID  STATUS  LEERLAUF   ANMELDEZEIT\r\n\
        \x20eva                                       2  Getr.        1:02  01.07.2026 20:00\r\n";

    #[test]
    fn query_user_table_is_read_in_any_language() {
        let sessions = parse_query_user(QUERY_USER);
        assert_eq!(
            sessions,
            [
                Session {
                    user: "alice".into(),
                    name: Some("console".into()),
                    id: 1,
                    state: "Active".into()
                },
                Session {
                    user: "john smith".into(),
                    name: None,
                    id: 2,
                    state: "Disc".into()
                },
                Session {
                    user: "bob".into(),
                    name: Some("rdp-tcp#3".into()),
                    id: 3,
                    state: "Active".into()
                },
            ]
        );
        let german = parse_query_user(QUERY_USER_DE);
        assert_eq!(
            german,
            [Session {
                user: "eva".into(),
                name: None,
                id: 2,
                state: "Getr.".into()
            }]
        );
        assert_eq!(parse_query_user(""), []);
        assert_eq!(parse_query_user("No User exists for *\r\n"), []);
    }

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
        let none = Map::new();
        for result in [status(&none).await, start(&none).await, stop(&none).await] {
            assert_eq!(result.unwrap_err().code, ErrorCode::Unsupported);
        }
    }
}
