//! The account tools on Windows: the LocalAccounts cmdlets, with the Administrators
//! group found by its SID (S-1-5-32-544, whatever the language), `net accounts` for the
//! password policy, secedit for the deny-logon user rights, quser/msg/logoff and a
//! one-off task in the person's session for sessions, Win32_UserProfile for profiles.
//!
//! Every script is built here from fixed text and `powershell_literal` values (names
//! and SIDs, checked first); the password never enters a script: it reaches PowerShell
//! on standard input and becomes a SecureString there (`shell`'s secret bootstrap).
//! The accounts are read with the `local_accounts` telemetry query, so the rails see
//! what the section reports.

use std::time::Duration;

use kenny_proto::args::{
    AccountCreateArgs, AccountDeleteArgs, AccountSessionActionArgs, AccountSetAdminArgs, AccountSetEnabledArgs,
    AccountSetLogonRightsArgs, PasswordPolicySetArgs,
};
use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value, json};
use tokio::process::Command;

use super::rails::{self, Account, Change};
use super::{Deny, Secret, SessionAction, scrubbed};
use crate::tools::bounded::BoundedBuf;
use crate::tools::process::{ProgramOutput, run_captured_into};
use crate::tools::shell::{powershell_json, powershell_literal, powershell_output_with_secret, system32_tool};
use crate::tools::winsession;
use crate::tools::{ToolError, ToolResult};

const SCRIPT_LIMIT: Duration = Duration::from_secs(60);
const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// The well-known SID of the local Administrators group.
const ADMINISTRATORS_SID: &str = "S-1-5-32-544";
/// Relative ids of the accounts Windows makes itself: Administrator, Guest, krbtgt,
/// DefaultAccount, WDAGUtilityAccount.
const BUILTIN_RIDS: &[&str] = &["500", "501", "502", "503", "504"];
/// The most Windows allows `net accounts /minpwlen` (without the relaxed-limits policy).
const MAX_MIN_LENGTH: u64 = 14;

/// Prints the SID of the account the agent runs as (SYSTEM's, S-1-5-18, as a service).
const SELF_SID_SCRIPT: &str = "$ErrorActionPreference = 'Stop'\n\
    ConvertTo-Json -Compress -InputObject ([System.Security.Principal.WindowsIdentity]::GetCurrent().User.Value)\n";

/// The accounts as the rails see them, from the `local_accounts` section's list.
pub(super) fn roster(section: &Map<String, Value>, self_sid: Option<&str>) -> Vec<Account> {
    let list = section
        .get("accounts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    list.iter()
        .filter_map(|a| {
            let name = a.get("name")?.as_str()?.to_owned();
            let sid = a.get("sid").and_then(Value::as_str).unwrap_or_default().to_owned();
            let rid = sid.rsplit('-').next().unwrap_or_default();
            Some(Account {
                builtin: BUILTIN_RIDS.contains(&rid),
                is_self: self_sid.is_some_and(|s| s.eq_ignore_ascii_case(&sid)),
                kind: a.get("kind").and_then(Value::as_str).unwrap_or("local").to_owned(),
                // Unknown reads as enabled: the rails then count it as a possible admin
                // left, and refuse to guess about it as a target.
                enabled: a.get("enabled").and_then(Value::as_bool).unwrap_or(true),
                admin: a.get("is_admin").and_then(Value::as_bool),
                person: true,
                id: sid,
                name,
            })
        })
        .collect()
}

/// A SID as the scripts take it: `S-1-` and digits in dash-separated parts.
pub(super) fn check_sid(sid: &str) -> Result<(), ToolError> {
    let ok = sid.len() <= 200
        && sid.strip_prefix("S-1-").is_some_and(|rest| {
            rest.split('-')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        });
    if ok {
        Ok(())
    } else {
        Err(ToolError::exec_failed(format!(
            "`{sid}` is not a SID kenny can pass on"
        )))
    }
}

async fn read_roster() -> Result<Vec<Account>, ToolError> {
    let section = crate::tools::telemetry::windows_local_accounts()
        .await
        .map_err(|e| ToolError::exec_failed(format!("reading the local accounts failed: {e}")))?;
    let me = powershell_json("finding the account the agent runs as", SELF_SID_SCRIPT, SCRIPT_LIMIT).await?;
    Ok(roster(&section, me.as_str()))
}

async fn target(principal: &str) -> Result<(Vec<Account>, Account), ToolError> {
    let accounts = read_roster().await?;
    let account = rails::find(&accounts, principal, true)?.clone();
    check_sid(&account.id)?;
    Ok((accounts, account))
}

/// Runs a script whose last line is JSON; a failure is `exec_failed` with PowerShell's
/// own message.
async fn run_script(what: &str, script: &str) -> Result<Value, ToolError> {
    powershell_json(what, script, SCRIPT_LIMIT).await
}

pub(super) fn create_script(name: &str, display: Option<&str>, admin: bool) -> String {
    let mut script = format!(
        "$ErrorActionPreference = 'Stop'\n\
         $params = @{{ Name = {}; Password = $kennySecret; AccountNeverExpires = $true }}\n",
        powershell_literal(name)
    );
    if let Some(display) = display {
        script += &format!("$params.FullName = {}\n", powershell_literal(display));
    }
    script += "$user = New-LocalUser @params\n";
    if admin {
        // A failure here must not leave an account that is not what was asked.
        script += &format!(
            "try {{ Add-LocalGroupMember -SID {} -Member $user }} catch {{ Remove-LocalUser -SID $user.SID; throw }}\n",
            powershell_literal(ADMINISTRATORS_SID)
        );
    }
    script += "ConvertTo-Json -Compress -InputObject ([pscustomobject]@{ Name = $user.Name; Sid = $user.SID.Value })\n";
    script
}

pub(super) async fn create(args: AccountCreateArgs, password: &Secret) -> ToolResult {
    let name = args.name.as_str();
    let accounts = read_roster().await?;
    if rails::find(&accounts, name, true).is_ok() {
        return Err(ToolError::bad_args(format!(
            "an account named `{name}` already exists on this PC; choose another name, or change that one with the other account tools"
        )));
    }
    let admin = args.admin.unwrap_or(false);
    let script = create_script(name, args.display_name.as_deref(), admin);
    let out = powershell_output_with_secret(&script, password.expose(), SCRIPT_LIMIT)
        .await
        .map_err(|e| ToolError::new(e.code, scrubbed(&e.message, password)))?;
    let made = last_json(&out).ok_or_else(|| {
        ToolError::exec_failed(format!(
            "New-LocalUser failed (PowerShell exit code {}): {}",
            out.exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string()),
            scrubbed(&out.complaint(), password)
        ))
    })?;
    let mut result = json!({"ok": true, "principal": name, "kind": "local", "admin": admin});
    if let Some(sid) = made.get("Sid").and_then(Value::as_str) {
        result["sid"] = json!(sid);
    }
    Ok(result)
}

fn last_json(out: &ProgramOutput) -> Option<Value> {
    if !out.success() {
        return None;
    }
    let last = out.stdout.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    serde_json::from_str(last).ok()
}

pub(super) fn delete_script(sid: &str, remove_profile: bool) -> String {
    let sid = powershell_literal(sid);
    let mut script = format!(
        "$ErrorActionPreference = 'Stop'\n\
         Remove-LocalUser -SID {sid}\n\
         $removed = $false\n\
         $profileError = $null\n"
    );
    if remove_profile {
        // The profile is keyed by the SID and outlives the account; a loaded one (the
        // person still signed in) cannot go, which the answer says.
        script += &format!(
            "try {{\n\
             \x20 $profiles = @(Get-CimInstance -ClassName Win32_UserProfile -Filter (\"SID = '\" + {sid} + \"'\"))\n\
             \x20 foreach ($p in $profiles) {{ Remove-CimInstance -InputObject $p }}\n\
             \x20 $removed = $profiles.Count -gt 0\n\
             }} catch {{ $profileError = $_.Exception.Message }}\n"
        );
    }
    script += "ConvertTo-Json -Compress -InputObject ([pscustomobject]@{ ProfileRemoved = $removed; ProfileError = $profileError })\n";
    script
}

pub(super) async fn delete(args: AccountDeleteArgs) -> ToolResult {
    let (accounts, account) = target(&args.principal).await?;
    rails::check(&accounts, &account, Change::Delete)?;
    let remove = args.remove_profile.unwrap_or(false);
    let done = run_script("deleting the account", &delete_script(&account.id, remove)).await?;
    let mut result = json!({
        "ok": true,
        "principal": account.name,
        "profile_removed": done.get("ProfileRemoved").and_then(Value::as_bool).unwrap_or(false),
    });
    if let Some(why) = done.get("ProfileError").and_then(Value::as_str) {
        result["note"] = json!(format!("the account was deleted but its profile was not: {why}"));
    } else if remove && result["profile_removed"] == json!(false) {
        result["note"] = json!("the account had no profile on this PC");
    }
    Ok(result)
}

pub(super) fn enable_script(sid: &str, enabled: bool) -> String {
    format!(
        "$ErrorActionPreference = 'Stop'\n{} -SID {}\nConvertTo-Json -Compress -InputObject ((Get-LocalUser -SID {}).Enabled)\n",
        if enabled {
            "Enable-LocalUser"
        } else {
            "Disable-LocalUser"
        },
        powershell_literal(sid),
        powershell_literal(sid)
    )
}

pub(super) async fn set_enabled(args: AccountSetEnabledArgs) -> ToolResult {
    let (accounts, account) = target(&args.principal).await?;
    if !args.enabled {
        rails::check(&accounts, &account, Change::Disable)?;
    }
    let now = run_script(
        "changing whether the account may sign in",
        &enable_script(&account.id, args.enabled),
    )
    .await?;
    let enabled = now.as_bool().unwrap_or(args.enabled);
    Ok(json!({
        "ok": true,
        "principal": account.name,
        "kind": account.kind,
        "enabled": enabled,
        "changed": enabled != account.enabled,
    }))
}

pub(super) fn admin_script(sid: &str, admin: bool) -> String {
    let group = powershell_literal(ADMINISTRATORS_SID);
    let member = format!("(Get-LocalUser -SID {})", powershell_literal(sid));
    let (cmdlet, already) = if admin {
        ("Add-LocalGroupMember", "MemberExists")
    } else {
        ("Remove-LocalGroupMember", "MemberNotFound")
    };
    // Already so is no failure: the cmdlets' error ids say which case it was.
    format!(
        "$ErrorActionPreference = 'Stop'\n\
         $changed = $true\n\
         try {{ {cmdlet} -SID {group} -Member {member} }} catch {{ if ($_.FullyQualifiedErrorId -like '{already}*') {{ $changed = $false }} else {{ throw }} }}\n\
         ConvertTo-Json -Compress -InputObject ([pscustomobject]@{{ Changed = $changed }})\n"
    )
}

pub(super) async fn set_admin(args: AccountSetAdminArgs) -> ToolResult {
    let (accounts, account) = target(&args.principal).await?;
    if !args.admin {
        rails::check(&accounts, &account, Change::Demote)?;
    }
    let done = run_script(
        "changing the Administrators group",
        &admin_script(&account.id, args.admin),
    )
    .await?;
    Ok(json!({
        "ok": true,
        "principal": account.name,
        "kind": account.kind,
        "admin": args.admin,
        "changed": done.get("Changed").and_then(Value::as_bool).unwrap_or(true),
        "groups": ["Administrators"],
    }))
}

/// Exports the user rights and prints the two deny rights' current values.
pub(super) const EXPORT_RIGHTS_SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$dir = Join-Path ([System.IO.Path]::GetTempPath()) ('kenny-secedit-' + [guid]::NewGuid().ToString('N'))
New-Item -ItemType Directory -Path $dir | Out-Null
try {
  $cfg = Join-Path $dir 'rights.inf'
  $said = & "$env:SystemRoot\System32\secedit.exe" /export /cfg $cfg /areas USER_RIGHTS /quiet 2>&1
  if ($LASTEXITCODE -ne 0) { throw "secedit /export failed ($LASTEXITCODE): $said" }
  $rights = [ordered]@{ SeDenyNetworkLogonRight = $null; SeDenyRemoteInteractiveLogonRight = $null }
  foreach ($line in Get-Content -LiteralPath $cfg -Encoding Unicode) {
    if ($line -match '^\s*(SeDenyNetworkLogonRight|SeDenyRemoteInteractiveLogonRight)\s*=\s*(.*)$') { $rights[$Matches[1]] = $Matches[2].Trim() }
  }
  ConvertTo-Json -Compress -InputObject ([pscustomobject]$rights)
} finally {
  Remove-Item -LiteralPath $dir -Recurse -Force -ErrorAction SilentlyContinue
}
"#;

/// A user right's new value: the entries it had (`*SID` or a name), without `sid`, and
/// with it again when it is to be denied.
pub(super) fn updated_right(current: Option<&str>, sid: &str, deny: bool) -> String {
    let mine = format!("*{sid}");
    let mut entries: Vec<&str> = current
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty() && !e.eq_ignore_ascii_case(&mine))
        .collect();
    if deny {
        entries.push(&mine);
    }
    entries.join(",")
}

/// The security template secedit applies: only the two deny rights, each with its
/// full list (an empty list clears the right).
pub(super) fn rights_template(network: &str, remote: &str) -> String {
    format!(
        "[Unicode]\r\nUnicode=yes\r\n[Version]\r\nsignature=\"$CHICAGO$\"\r\nRevision=1\r\n[Privilege Rights]\r\nSeDenyNetworkLogonRight = {network}\r\nSeDenyRemoteInteractiveLogonRight = {remote}\r\n"
    )
}

pub(super) fn import_rights_script(template: &str) -> String {
    format!(
        r#"$ErrorActionPreference = 'Stop'
$dir = Join-Path ([System.IO.Path]::GetTempPath()) ('kenny-secedit-' + [guid]::NewGuid().ToString('N'))
New-Item -ItemType Directory -Path $dir | Out-Null
try {{
  $inf = Join-Path $dir 'kenny.inf'
  Set-Content -LiteralPath $inf -Value {} -Encoding Unicode -NoNewline
  $said = & "$env:SystemRoot\System32\secedit.exe" /configure /db (Join-Path $dir 'kenny.sdb') /cfg $inf /areas USER_RIGHTS /quiet 2>&1
  if ($LASTEXITCODE -ne 0) {{ throw "secedit /configure failed ($LASTEXITCODE): $said" }}
}} finally {{
  Remove-Item -LiteralPath $dir -Recurse -Force -ErrorAction SilentlyContinue
}}
ConvertTo-Json -Compress -InputObject ([pscustomobject]@{{ Applied = $true }})
"#,
        powershell_literal(template)
    )
}

pub(super) async fn set_logon_rights(args: AccountSetLogonRightsArgs, deny: Vec<Deny>) -> ToolResult {
    let (_accounts, account) = target(&args.principal).await?;
    let current = run_script("reading the user rights", EXPORT_RIGHTS_SCRIPT).await?;
    let value = |right: Deny| {
        updated_right(
            current.get(right.windows_right()).and_then(Value::as_str),
            &account.id,
            deny.contains(&right),
        )
    };
    let template = rights_template(&value(Deny::Network), &value(Deny::RemoteInteractive));
    run_script("changing the user rights", &import_rights_script(&template)).await?;
    Ok(json!({
        "ok": true,
        "principal": account.name,
        "kind": account.kind,
        "deny": deny.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
        "mechanism": "user rights",
    }))
}

/// `net accounts`' arguments for the policy asked; Windows limits the minimum length.
pub(super) fn net_accounts_args(args: &PasswordPolicySetArgs) -> Result<Vec<String>, ToolError> {
    let mut out = Vec::new();
    if let Some(min) = args.min_length {
        if min > MAX_MIN_LENGTH {
            return Err(ToolError::bad_args(format!(
                "min_length {min} cannot be set on Windows: net accounts takes 0 to {MAX_MIN_LENGTH}"
            )));
        }
        out.push(format!("/minpwlen:{min}"));
    }
    if let Some(days) = args.max_age_days {
        out.push(if days == 0 {
            "/maxpwage:unlimited".to_owned()
        } else {
            format!("/maxpwage:{days}")
        });
    }
    if let Some(threshold) = args.lockout_threshold {
        out.push(format!("/lockoutthreshold:{threshold}"));
    }
    Ok(out)
}

async fn run_native(program: &str, args: &[String]) -> Result<ProgramOutput, ToolError> {
    let mut cmd = Command::new(system32_tool(program));
    cmd.args(args);
    Ok(run_captured_into(
        cmd,
        None,
        COMMAND_LIMIT,
        BoundedBuf::new(64 * 1024),
        BoundedBuf::new(16 * 1024),
    )
    .await?
    .into())
}

pub(super) async fn password_policy(args: PasswordPolicySetArgs) -> ToolResult {
    let argv: Vec<String> = std::iter::once("accounts".to_owned())
        .chain(net_accounts_args(&args)?)
        .collect();
    let out = run_native("net.exe", &argv).await?;
    if !out.success() {
        return Err(ToolError::exec_failed(format!(
            "net accounts failed (exit code {}): {}",
            out.exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string()),
            out.complaint()
        )));
    }
    let policy = super::policy_set(&args);
    Ok(json!({"ok": true, "applies_to": "local_only", "policy": policy}))
}

/// The sessions of `name` in `query user`'s table (`DOMAIN\name` or `name`).
pub(super) fn sessions_of<'a>(sessions: &'a [winsession::Session], name: &str) -> Vec<&'a winsession::Session> {
    sessions
        .iter()
        .filter(|s| {
            let user = s.user.rsplit('\\').next().unwrap_or(&s.user);
            user.eq_ignore_ascii_case(name)
        })
        .collect()
}

/// msg's arguments: the warning to one session, shown for as long as it waits.
pub(super) fn msg_args(session: u32, seconds: u64, text: &str) -> Vec<String> {
    vec![session.to_string(), format!("/TIME:{seconds}"), text.to_owned()]
}

/// What the lock task runs in the person's session.
pub(super) const LOCK_COMMAND: &str = r"C:\Windows\System32\rundll32.exe user32.dll,LockWorkStation";

pub(super) async fn session_action(args: AccountSessionActionArgs, action: SessionAction) -> ToolResult {
    let (_accounts, account) = target(&args.principal).await?;
    let all = winsession::query_user().await;
    let mine: Vec<winsession::Session> = sessions_of(&all, &account.name).into_iter().cloned().collect();
    let warn = args.warn_seconds.unwrap_or(0);
    let mut notes = Vec::new();
    if warn > 0 && !mine.is_empty() {
        let text = super::warning_text(action, warn);
        for session in &mine {
            match run_native("msg.exe", &msg_args(session.id, warn, &text)).await {
                Ok(out) if out.success() => {}
                Ok(out) => notes.push(format!("session {}: msg failed: {}", session.id, out.complaint())),
                Err(e) => notes.push(format!("session {}: msg did not run: {}", session.id, e.message)),
            }
        }
        tokio::time::sleep(Duration::from_secs(warn)).await;
    }
    let desktops = if action == SessionAction::Lock && !mine.is_empty() {
        desktop_owners().await
    } else {
        Vec::new()
    };
    let mut sessions = Vec::new();
    for session in &mine {
        let acted = match action {
            SessionAction::Logoff => match run_native("logoff.exe", &[session.id.to_string()]).await {
                Ok(out) if out.success() => true,
                Ok(out) => {
                    notes.push(format!("session {}: logoff failed: {}", session.id, out.complaint()));
                    false
                }
                Err(e) => {
                    notes.push(format!("session {}: {}", session.id, e.message));
                    false
                }
            },
            SessionAction::Lock => match lock(session, &desktops).await {
                Ok(()) => true,
                Err(e) => {
                    notes.push(format!("session {}: {}", session.id, e.message));
                    false
                }
            },
        };
        sessions.push(json!({
            "session_id": session.id,
            "state": session.state.to_lowercase(),
            "acted": acted,
        }));
    }
    Ok(super::session_result(&account.name, action, sessions, warn, notes))
}

async fn desktop_owners() -> Vec<winsession::DesktopOwner> {
    winsession::desktops().await.unwrap_or_default()
}

/// A session with nobody at its desktop (disconnected) cannot be locked: it is already
/// out of anyone's reach.
async fn lock(session: &winsession::Session, desktops: &[winsession::DesktopOwner]) -> Result<(), ToolError> {
    if session.name.is_none() {
        return Err(ToolError::exec_failed(
            "it is disconnected, so there is no screen to lock",
        ));
    }
    let account = desktops
        .iter()
        .find(|d| d.session == session.id)
        .map_or_else(|| session.user.clone(), |d| d.account.clone());
    winsession::check_account(&account)?;
    let task = format!("kenny-lock-{}-{}", session.id, rand::random::<u32>());
    winsession::schtasks(
        &winsession::user_task_args(&task, LOCK_COMMAND, &account),
        "create the lock task",
    )
    .await?;
    let ran = winsession::schtasks(&winsession::run_named_task_args(&task), "run the lock task").await;
    let _ = winsession::schtasks(&winsession::delete_named_task_args(&task), "delete the lock task").await;
    ran.map_err(|e| ToolError::new(ErrorCode::ExecFailed, e.message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn testdata(name: &str) -> String {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/accounts/windows")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The accounts of the recorded `local_accounts` query (telemetry's recording).
    fn recorded_roster(self_sid: Option<&str>) -> Vec<Account> {
        let section = crate::tools::telemetry::windows_local_accounts_recorded("typical").unwrap();
        roster(&section, self_sid)
    }

    #[test]
    fn the_recorded_accounts_give_the_rails_what_they_need() {
        let accounts = recorded_roster(None);
        let by = |n: &str| accounts.iter().find(|a| a.name == n).unwrap().clone();
        for builtin in ["Administrator", "Guest", "DefaultAccount", "WDAGUtilityAccount"] {
            assert!(by(builtin).builtin, "{builtin}");
        }
        let papa = by("papa");
        assert_eq!(
            (papa.kind.as_str(), papa.admin, papa.enabled),
            ("microsoft", Some(true), true)
        );
        let kid = by("kid");
        assert_eq!(kid.admin, Some(false));
        // papa is the one enabled administrator (the built-in one is disabled).
        for change in [Change::Disable, Change::Demote, Change::Delete] {
            let err = rails::check(&accounts, &papa, change).unwrap_err();
            assert_eq!(err.code, ErrorCode::Blocked);
            assert!(
                err.message.contains("last enabled local administrator"),
                "{}",
                err.message
            );
        }
        assert_eq!(rails::check(&accounts, &kid, Change::Delete), Ok(()));
        let err = rails::check(&accounts, &by("Administrator"), Change::Delete).unwrap_err();
        assert!(err.message.contains("built-in"), "{}", err.message);
        assert_eq!(
            rails::find(&accounts, "PAPA", true).map(|a| a.name.clone()),
            Ok("papa".into())
        );
        // An agent running as a local account protects it.
        let me = recorded_roster(Some(&kid.id));
        let err = rails::check(&me, rails::find(&me, "kid", true).unwrap(), Change::Disable).unwrap_err();
        assert!(err.message.contains("runs as"), "{}", err.message);
    }

    #[test]
    fn scripts_name_accounts_by_literal_sid_and_never_hold_the_password() {
        let hostile = "x'; Remove-Item C:\\ -Recurse; '";
        let create = create_script("kid", Some(hostile), true);
        assert!(create.contains("Password = $kennySecret"), "{create}");
        assert!(create.contains(&powershell_literal(hostile)), "{create}");
        assert!(
            create.contains("Add-LocalGroupMember -SID 'S-1-5-32-544' -Member $user"),
            "{create}"
        );
        assert!(!create_script("kid", None, false).contains("Add-LocalGroupMember"));
        let sid = "S-1-5-21-1-2-3-1002";
        assert!(delete_script(sid, false).contains("Remove-LocalUser -SID 'S-1-5-21-1-2-3-1002'"));
        let with_profile = delete_script(sid, true);
        assert!(with_profile.contains("Win32_UserProfile") && with_profile.contains("Remove-CimInstance"));
        assert!(
            enable_script(sid, false)
                .starts_with("$ErrorActionPreference = 'Stop'\nDisable-LocalUser -SID 'S-1-5-21-1-2-3-1002'")
        );
        assert!(enable_script(sid, true).contains("Enable-LocalUser -SID"));
        let demote = admin_script(sid, false);
        assert!(
            demote.contains(
                "Remove-LocalGroupMember -SID 'S-1-5-32-544' -Member (Get-LocalUser -SID 'S-1-5-21-1-2-3-1002')"
            ),
            "{demote}"
        );
        assert!(admin_script(sid, true).contains("'MemberExists*'"));
        assert!(check_sid(sid).is_ok());
        for bad in ["S-1-5-21-x", "S-1-", "1-5-21", "S-1-5-'", ""] {
            assert!(check_sid(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_deny_rights_keep_other_entries_and_add_or_drop_only_this_sid() {
        let exported = testdata("secedit_export.json");
        let current: Value = serde_json::from_str(exported.trim()).unwrap();
        let network = current["SeDenyNetworkLogonRight"].as_str();
        let sid = "S-1-5-21-3623811015-3361044348-30300820-1002";
        assert_eq!(
            updated_right(network, sid, true),
            "*S-1-5-32-546,*S-1-5-21-3623811015-3361044348-30300820-1002"
        );
        assert_eq!(updated_right(network, sid, false), "*S-1-5-32-546");
        let remote = current["SeDenyRemoteInteractiveLogonRight"].as_str();
        assert_eq!(remote, Some("*S-1-5-21-3623811015-3361044348-30300820-1002"));
        assert_eq!(updated_right(remote, sid, false), "");
        assert_eq!(updated_right(None, sid, true), format!("*{sid}"));
        assert_eq!(updated_right(remote, sid, true), format!("*{sid}"), "listed once");
        let template = rights_template("*S-1-5-32-546", "");
        assert!(template.contains("signature=\"$CHICAGO$\""));
        assert!(template.ends_with("SeDenyRemoteInteractiveLogonRight = \r\n"));
        let import = import_rights_script(&template);
        assert!(import.contains("/configure /db") && import.contains("/areas USER_RIGHTS"));
        assert!(import.contains(&powershell_literal(&template)));
        assert!(EXPORT_RIGHTS_SCRIPT.contains("/export /cfg $cfg /areas USER_RIGHTS"));
    }

    #[test]
    fn net_accounts_takes_the_policy_windows_allows() {
        let args: PasswordPolicySetArgs =
            crate::tools::typed(json!({"min_length": 8, "max_age_days": 0, "lockout_threshold": 10}));
        assert_eq!(
            net_accounts_args(&args).unwrap(),
            ["/minpwlen:8", "/maxpwage:unlimited", "/lockoutthreshold:10"]
        );
        let args: PasswordPolicySetArgs = crate::tools::typed(json!({"max_age_days": 90}));
        assert_eq!(net_accounts_args(&args).unwrap(), ["/maxpwage:90"]);
        let args: PasswordPolicySetArgs = crate::tools::typed(json!({"min_length": 15}));
        let err = net_accounts_args(&args).unwrap_err();
        assert!(err.message.contains("0 to 14"), "{}", err.message);
    }

    #[test]
    fn the_persons_sessions_are_found_in_the_recorded_query_user_table() {
        let table = testdata("query_user.txt");
        let all = winsession::parse_query_user(&table);
        let kid = sessions_of(&all, "kid");
        assert_eq!(kid.len(), 2, "{all:?}");
        assert_eq!((kid[0].id, kid[0].state.as_str()), (2, "Active"));
        assert_eq!((kid[1].id, kid[1].name.as_deref()), (4, None), "disconnected");
        assert_eq!(sessions_of(&all, "PAPA").len(), 1);
        assert!(sessions_of(&all, "nobody").is_empty());
        assert_eq!(msg_args(2, 60, "Save your work"), ["2", "/TIME:60", "Save your work"]);
        let task = winsession::user_task_args("kenny-lock-2-1", LOCK_COMMAND, "PC\\kid");
        assert!(task.contains(&LOCK_COMMAND.to_owned()) && task.contains(&"PC\\kid".to_owned()));
    }
}
