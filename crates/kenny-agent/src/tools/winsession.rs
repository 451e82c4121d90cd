//! Who is signed in at a Windows PC's desktop, and how the agent runs something there.
//! The agent is a service in session 0, where nothing it starts can be seen: a window
//! for the person at the PC comes from a one-off scheduled task that runs as that
//! signed-in user, interactively. Quick Assist (`remotehelp`) and the screen copy
//! (`screen`) both work this way.

use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use super::ToolError;
use super::bounded::BoundedBuf;
use super::process::run_captured_into;
use super::shell::{powershell_json, system32_tool};

const COMMAND_LIMIT: Duration = Duration::from_secs(10);
const SCRIPT_LIMIT: Duration = Duration::from_secs(20);

/// PowerShell that sets `$explorer` to the owner of every explorer.exe (someone with a
/// desktop in that session), for a script to report as JSON.
pub(crate) const DESKTOPS_SCRIPT: &str = "$explorer = @(Get-CimInstance -ClassName Win32_Process -Filter \"Name = 'explorer.exe'\" -ErrorAction SilentlyContinue | ForEach-Object {\n\
    \x20   $owner = Invoke-CimMethod -InputObject $_ -MethodName GetOwner -ErrorAction SilentlyContinue\n\
    \x20   [pscustomobject]@{ session = [int]$_.SessionId; domain = \"$($owner.Domain)\"; user = \"$($owner.User)\" }\n\
    })\n";

/// The owner of an explorer.exe: someone with a desktop in that session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DesktopOwner {
    pub session: u32,
    pub account: String,
}

/// Reads `$explorer` as a script reported it. PowerShell writes a one-element array as a
/// bare object in some versions, so both forms are accepted.
pub(crate) fn parse_desktops(explorer: Option<&Value>) -> Vec<DesktopOwner> {
    let explorer: Vec<&Value> = match explorer {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(item @ Value::Object(_)) => vec![item],
        _ => Vec::new(),
    };
    explorer
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
        .collect()
}

/// One row of `query user` (quser.exe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
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
pub(crate) fn parse_query_user(text: &str) -> Vec<Session> {
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
pub(crate) fn interactive_user(sessions: &[Session], desktops: &[DesktopOwner]) -> Option<DesktopOwner> {
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

/// A one-off task that runs `command` as `account` on that user's desktop (`/it`); run
/// with `/run`, then deleted. How a service in session 0 shows anything to a person.
pub(crate) fn user_task_args(task_name: &str, command: &str, account: &str) -> Vec<String> {
    [
        "/create", "/tn", task_name, "/tr", command, "/sc", "once", "/st", "00:00", "/ru", account, "/it", "/f",
    ]
    .map(String::from)
    .into()
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

/// The desktops' owners as a JSON array (`-InputObject` keeps a one-element array an array).
fn signed_in_script() -> String {
    format!("$ErrorActionPreference = 'Stop'\n{DESKTOPS_SCRIPT}ConvertTo-Json -Compress -InputObject $explorer\n")
}

/// The person signed in at this PC's desktop, if any (`DOMAIN\\user`).
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) async fn signed_in_user() -> Result<Option<String>, ToolError> {
    let desktops = desktops().await?;
    Ok(interactive_user(&query_user().await, &desktops).map(|u| u.account))
}

/// Who has a desktop in which session (explorer.exe's owners).
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) async fn desktops() -> Result<Vec<DesktopOwner>, ToolError> {
    let explorer = powershell_json("looking up who is signed in", &signed_in_script(), SCRIPT_LIMIT).await?;
    Ok(parse_desktops(Some(&explorer)))
}

/// `query user` is missing on some editions and exits 1 when nobody is signed in;
/// both read as "no sessions".
pub(crate) async fn query_user() -> Vec<Session> {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `query user` on a PC with a console user, a disconnected user whose name has a
    /// space, and an RDP user; quser marks its own session with `>`.
    pub(crate) const QUERY_USER: &str = " USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME\r\n\
        >alice                 console             1  Active      none   7/2/2026 9:01 AM\r\n\
        \x20john smith                                2  Disc         1:02  7/1/2026 8:00 PM\r\n\
        \x20bob                   rdp-tcp#3           3  Active          .  7/2/2026 10:15 AM\r\n";

    pub(crate) const QUERY_USER_DE: &str = " BENUTZERNAME          SITZUNGSNAME       ID  STATUS  LEERLAUF   ANMELDEZEIT\r\n\
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

    #[test]
    fn the_desktop_owners_script_reports_explorer_owners_as_json() {
        let script = signed_in_script();
        assert!(
            script.contains("Name = 'explorer.exe'") && script.contains("GetOwner"),
            "{script}"
        );
        assert!(script.contains("ForEach-Object {\n    $owner = "), "{script}");
        assert!(
            script
                .trim_end()
                .ends_with("ConvertTo-Json -Compress -InputObject $explorer")
        );
        let owners = parse_desktops(Some(
            &serde_json::json!([{"session": 2, "domain": "PC", "user": "eva"}]),
        ));
        assert_eq!(
            owners,
            [DesktopOwner {
                session: 2,
                account: "PC\\eva".into()
            }]
        );
        assert_eq!(parse_desktops(Some(&serde_json::json!([]))), []);
    }
}
