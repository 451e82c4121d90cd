//! The account tools on Linux, with the system's own programs: useradd, usermod,
//! userdel, chpasswd (the password on its standard input), gpasswd, chage and
//! loginctl, every one started with argv, and kenny's own edits of the policy files
//! and its sshd drop-in. The account files are read the way the `local_accounts`
//! telemetry section reads them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kenny_proto::args::{
    AccountCreateArgs, AccountDeleteArgs, AccountSessionActionArgs, AccountSetAdminArgs, AccountSetEnabledArgs,
    AccountSetLogonRightsArgs, PasswordPolicySetArgs,
};
use kenny_proto::error::ErrorCode;
use serde_json::{Value, json};
use tokio::process::Command;

use super::config::{self, Style};
use super::rails::{self, Account, Change};
use super::{Deny, Secret, SessionAction, scrubbed};
use crate::tools::bounded::blocking;
use crate::tools::process::{ProgramOutput, run_captured, run_program};
use crate::tools::telemetry::{ADMIN_GROUPS, AccountFiles, PasswdEntry, Password};
use crate::tools::{ToolError, ToolResult};

const ETC: &str = "/etc";
const STEP_LIMIT: Duration = Duration::from_secs(30);
const FILE_BACKSTOP: Duration = Duration::from_secs(15);
const SSHD_DROP_IN: &str = "ssh/sshd_config.d/90-kenny-logon-rights.conf";
/// The uid the kernel and NFS give to "nobody"; an OS account wherever it appears.
const NOBODY_UID: u32 = 65534;
/// What PASS_MAX_DAYS and chage -M call "never".
const NEVER_DAYS: u64 = 99999;
/// The most sessions one person is expected to have; more are listed, not acted on.
const MAX_SESSIONS: usize = 32;

fn etc() -> PathBuf {
    PathBuf::from(ETC)
}

fn today_days() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp() / 86_400
}

/// The uid the agent runs as.
fn self_uid() -> Option<u32> {
    #[cfg(unix)]
    {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(unsafe { libc::geteuid() })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The accounts as the rails see them: built-in below UID_MIN (root included) and
/// `nobody`; people in the uid range login.defs gives them.
pub(super) fn roster(files: &AccountFiles, self_uid: Option<u32>, today: i64) -> Vec<Account> {
    files
        .users
        .iter()
        .map(|u| {
            let nobody = u.name == "nobody" || u.uid == NOBODY_UID;
            Account {
                name: u.name.clone(),
                id: u.uid.to_string(),
                kind: "local".to_owned(),
                enabled: files.is_enabled(u, today),
                admin: Some(files.is_admin(u)),
                builtin: u.uid < files.uid_min || nobody,
                person: files.is_person(u) && !nobody,
                is_self: Some(u.uid) == self_uid,
            }
        })
        .collect()
}

async fn read_files() -> Result<AccountFiles, ToolError> {
    blocking(
        "reading the account files",
        FILE_BACKSTOP,
        || AccountFiles::read(&etc()),
    )
    .await?
    .map_err(ToolError::exec_failed)
}

/// The account `principal` names, with its passwd entry and the whole roster.
async fn target(principal: &str) -> Result<(AccountFiles, Vec<Account>, Account), ToolError> {
    super::check_principal(principal)?;
    let files = read_files().await?;
    let accounts = roster(&files, self_uid(), today_days());
    let account = rails::find(&accounts, principal, false)?.clone();
    Ok((files, accounts, account))
}

fn passwd_entry<'a>(files: &'a AccountFiles, name: &str) -> Option<&'a PasswdEntry> {
    files.users.iter().find(|u| u.name == name)
}

/// Runs one step; a failure is `exec_failed` with what the program said.
async fn step(program: &str, args: &[&str]) -> Result<ProgramOutput, ToolError> {
    let out = run_program(program, args, STEP_LIMIT).await?;
    if out.success() {
        Ok(out)
    } else {
        Err(ToolError::exec_failed(format!(
            "{program} failed (exit code {}): {}",
            exit_text(&out),
            out.complaint()
        )))
    }
}

fn exit_text(out: &ProgramOutput) -> String {
    out.exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string())
}

/// The argv of useradd for a new account with its home directory.
pub(super) fn useradd_args<'a>(name: &'a str, display: Option<&'a str>) -> Vec<&'a str> {
    let mut args = vec!["-m"];
    if let Some(display) = display {
        args.extend(["-c", display]);
    }
    args.extend(["--", name]);
    args
}

/// chpasswd's standard input: `name:password`, one line. chpasswd splits at the first
/// `:` only, so a password may hold more of them.
pub(super) fn chpasswd_input(name: &str, password: &Secret) -> Vec<u8> {
    format!("{name}:{}\n", password.expose()).into_bytes()
}

/// Sets the password through chpasswd's standard input; what it says is scrubbed of the
/// password before anyone sees it.
async fn set_password(name: &str, password: &Secret) -> Result<(), ToolError> {
    let done: ProgramOutput = run_captured(
        Command::new("chpasswd"),
        Some(chpasswd_input(name, password)),
        STEP_LIMIT,
        16 * 1024,
    )
    .await
    .map_err(|e| ToolError::new(e.code, scrubbed(&e.message, password)))?
    .into();
    if done.success() {
        return Ok(());
    }
    Err(ToolError::exec_failed(format!(
        "chpasswd could not set the password (exit code {}): {}",
        exit_text(&done),
        scrubbed(&done.complaint(), password)
    )))
}

/// The first admin group this PC has, in the order sudo, wheel, admin.
fn admin_group(files: &AccountFiles) -> Result<String, ToolError> {
    ADMIN_GROUPS
        .iter()
        .find(|name| files.groups.iter().any(|g| g.name == **name))
        .map(|name| (*name).to_owned())
        .ok_or_else(|| {
            ToolError::new(
                ErrorCode::Unsupported,
                "this PC has none of the groups sudo, wheel or admin, so there is no administrators' group to use",
            )
        })
}

pub(super) async fn create(args: AccountCreateArgs, password: &Secret) -> ToolResult {
    let name = args.name.as_str();
    let files = read_files().await?;
    if passwd_entry(&files, name).is_some() {
        return Err(ToolError::bad_args(format!(
            "an account named `{name}` already exists on this PC; choose another name, or change that one with the other account tools"
        )));
    }
    let admin = args.admin.unwrap_or(false);
    let group = if admin { Some(admin_group(&files)?) } else { None };
    step("useradd", &useradd_args(name, args.display_name.as_deref())).await?;
    // A half-made account (no password, or not the admin it was asked to be) is worse
    // than none: it goes again, and the caller sees why.
    let finished = async {
        set_password(name, password).await?;
        if let Some(group) = &group {
            step("gpasswd", &["-a", name, group]).await?;
        }
        Ok::<(), ToolError>(())
    }
    .await;
    if let Err(e) = finished {
        let undone = step("userdel", &["-r", "--", name]).await;
        return Err(ToolError::new(
            e.code,
            format!(
                "{}; {}",
                e.message,
                match undone {
                    Ok(_) => format!("the new account `{name}` was deleted again"),
                    Err(u) => format!("deleting the new account `{name}` again failed too: {}", u.message),
                }
            ),
        ));
    }
    let files = read_files().await?;
    let entry = passwd_entry(&files, name);
    let mut result = json!({
        "ok": true,
        "principal": name,
        "kind": "local",
        "admin": admin,
    });
    if let Some(entry) = entry {
        result["uid"] = json!(entry.uid);
        if let Some(home) = home_of(name).await {
            result["home"] = json!(home);
        }
    }
    Ok(result)
}

/// The home directory passwd gives `name` (the telemetry reader leaves it out).
async fn home_of(name: &str) -> Option<String> {
    let name = name.to_owned();
    blocking("reading passwd", FILE_BACKSTOP, move || {
        let text = std::fs::read_to_string(etc().join("passwd")).ok()?;
        text.lines().find_map(|l| {
            let fields: Vec<&str> = l.split(':').collect();
            (fields.len() == 7 && fields[0] == name).then(|| fields[5].to_owned())
        })
    })
    .await
    .ok()
    .flatten()
}

pub(super) async fn delete(args: AccountDeleteArgs) -> ToolResult {
    let (_files, accounts, account) = target(&args.principal).await?;
    rails::check(&accounts, &account, Change::Delete)?;
    let name = account.name.as_str();
    let remove = args.remove_profile.unwrap_or(false);
    let argv: Vec<&str> = if remove {
        vec!["-r", "--", name]
    } else {
        vec!["--", name]
    };
    let out = run_program("userdel", &argv, STEP_LIMIT).await?;
    let mut note = None;
    let profile_removed = match out.exit_code {
        Some(0) => remove,
        // 12: the account is gone but its home directory could not be removed.
        Some(12) if remove => {
            note = Some(format!(
                "the account was deleted but its home directory was not: {}",
                out.complaint()
            ));
            false
        }
        _ => {
            return Err(ToolError::exec_failed(format!(
                "userdel failed (exit code {}): {}{}",
                exit_text(&out),
                out.complaint(),
                if out.exit_code == Some(8) {
                    " (the account is signed in or runs programs; sign it out first with account_session_action)"
                } else {
                    ""
                }
            )));
        }
    };
    // A refusal kenny wrote for it would otherwise outlive the account, and hit a new
    // account of the same name.
    if let Err(e) = update_sshd_drop_in(name, false).await {
        note = Some(format!(
            "{}kenny's sshd drop-in still names it: {}",
            note.map(|n| format!("{n}; ")).unwrap_or_default(),
            e.message
        ));
    }
    let mut result = json!({"ok": true, "principal": name, "profile_removed": profile_removed});
    if let Some(note) = note {
        result["note"] = json!(note);
    }
    Ok(result)
}

pub(super) async fn set_enabled(args: AccountSetEnabledArgs) -> ToolResult {
    let (files, accounts, account) = target(&args.principal).await?;
    let name = account.name.as_str();
    let mut notes = Vec::new();
    if args.enabled {
        // An empty expiry date removes it; the password is unlocked only if it has one
        // to unlock (usermod refuses to leave an account without a password).
        step("usermod", &["-e", "", "--", name]).await?;
        if files.shadow_of(name).is_some_and(|s| s.password == Password::Locked) {
            let out = run_program("usermod", &["-U", "--", name], STEP_LIMIT).await?;
            if !out.success() {
                notes.push(format!("its password stays locked: {}", out.complaint()));
            }
        }
    } else {
        rails::check(&accounts, &account, Change::Disable)?;
        // Expired as of 1970-01-02: PAM then refuses every way in, SSH keys included,
        // which a locked password alone does not.
        step("usermod", &["-L", "-e", "1", "--", name]).await?;
    }
    let files = read_files().await?;
    let enabled = passwd_entry(&files, name).is_some_and(|u| files.is_enabled(u, today_days()));
    if args.enabled && !enabled {
        notes.push("it still cannot sign in: its login shell is nologin or false".to_owned());
    }
    let mut result = json!({
        "ok": true,
        "principal": name,
        "kind": account.kind,
        "enabled": enabled,
        "changed": enabled != account.enabled,
    });
    if !notes.is_empty() {
        result["note"] = json!(notes.join("; "));
    }
    Ok(result)
}

pub(super) async fn set_admin(args: AccountSetAdminArgs) -> ToolResult {
    let (files, accounts, account) = target(&args.principal).await?;
    let name = account.name.as_str();
    let Some(entry) = passwd_entry(&files, name) else {
        return Err(ToolError::not_found(format!("`{name}` vanished from passwd")));
    };
    let mut groups = Vec::new();
    if args.admin {
        if account.admin != Some(true) {
            let group = admin_group(&files)?;
            step("gpasswd", &["-a", name, &group]).await?;
            groups.push(group);
        }
    } else {
        rails::check(&accounts, &account, Change::Demote)?;
        if let Some(primary) = files.admin_groups().find(|g| g.gid == entry.gid) {
            return Err(ToolError::exec_failed(format!(
                "`{name}`'s primary group is {}, an administrators' group; change its primary group at the PC (usermod -g), then try again. Nothing was changed.",
                primary.name
            )));
        }
        let listed: Vec<String> = files
            .admin_groups()
            .filter(|g| g.members.iter().any(|m| m == name))
            .map(|g| g.name.clone())
            .collect();
        for group in listed {
            step("gpasswd", &["-d", name, &group]).await?;
            groups.push(group);
        }
    }
    let after = read_files().await?;
    let admin = passwd_entry(&after, name).is_some_and(|u| after.is_admin(u));
    Ok(json!({
        "ok": true,
        "principal": name,
        "kind": account.kind,
        "admin": admin,
        "changed": !groups.is_empty(),
        "groups": groups,
    }))
}

pub(super) async fn set_logon_rights(args: AccountSetLogonRightsArgs, deny: Vec<Deny>) -> ToolResult {
    let (_files, _accounts, account) = target(&args.principal).await?;
    let name = account.name.as_str();
    let outcome = update_sshd_drop_in(name, !deny.is_empty()).await?;
    let mut notes =
        vec!["on Linux both `network` and `remote_interactive` mean SSH; local sign-in is not affected".to_owned()];
    notes.extend(outcome.notes);
    Ok(json!({
        "ok": true,
        "principal": name,
        "kind": account.kind,
        "deny": deny.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
        "mechanism": "sshd DenyUsers",
        "config_file": etc().join(SSHD_DROP_IN).display().to_string(),
        "sshd_reloaded": outcome.reloaded,
        "note": notes.join("; "),
    }))
}

struct DropInOutcome {
    reloaded: bool,
    notes: Vec<String>,
}

/// Puts `name` into kenny's sshd drop-in (or takes it out), checks the result with
/// `sshd -t` where sshd is installed (undoing the change if sshd rejects it), and has a
/// running sshd reload it.
async fn update_sshd_drop_in(name: &str, deny: bool) -> Result<DropInOutcome, ToolError> {
    let path = etc().join(SSHD_DROP_IN);
    let main = etc().join("ssh/sshd_config");
    let name_owned = name.to_owned();
    let (before, after, main_text) = blocking("writing kenny's sshd drop-in", FILE_BACKSTOP, {
        let path = path.clone();
        move || write_drop_in(&path, &main, &name_owned, deny)
    })
    .await?
    .map_err(ToolError::exec_failed)?;
    let mut notes = Vec::new();
    if before == after {
        return Ok(DropInOutcome { reloaded: false, notes });
    }
    match &main_text {
        None => notes.push("no OpenSSH server is configured here (no sshd_config); the rule applies once one is".to_owned()),
        Some(text) if !config::sshd_reads_drop_ins(text) => notes.push(
            "sshd_config does not include sshd_config.d, so sshd does not read kenny's drop-in; add `Include /etc/ssh/sshd_config.d/*.conf` at its top".to_owned(),
        ),
        Some(_) => {}
    }
    if main_text.is_some()
        && let Ok(test) = run_program("sshd", &["-t"], STEP_LIMIT).await
        && !test.success()
    {
        let restore = path.clone();
        let _ = blocking("restoring kenny's sshd drop-in", FILE_BACKSTOP, move || {
            restore_drop_in(&restore, before.as_deref())
        })
        .await;
        return Err(ToolError::exec_failed(format!(
            "sshd rejected its configuration with kenny's change, so the change was undone: {}",
            test.complaint()
        )));
    }
    let reloaded = match running_sshd() {
        Some(pid) => {
            let ok = hang_up(pid);
            if !ok {
                notes.push(format!(
                    "sshd (pid {pid}) could not be told to reload; it applies the rule when it restarts"
                ));
            }
            ok
        }
        None => false,
    };
    Ok(DropInOutcome { reloaded, notes })
}

type DropInChange = (Option<String>, Option<String>, Option<String>);

fn write_drop_in(path: &Path, main: &Path, name: &str, deny: bool) -> Result<DropInChange, String> {
    let before = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("could not read {}: {e}", path.display())),
    };
    let after = config::sshd_drop_in(before.as_deref().unwrap_or(""), name, deny);
    let main_text = std::fs::read_to_string(main).ok();
    if after != before {
        restore_drop_in(path, after.as_deref())?;
    }
    Ok((before, after, main_text))
}

/// Writes the drop-in (atomically) or removes it when it has nothing to say.
fn restore_drop_in(path: &Path, text: Option<&str>) -> Result<(), String> {
    match text {
        Some(text) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("could not create {}: {e}", dir.display()))?;
            }
            crate::tools::webfilter::write_atomic(path, text.as_bytes())
        }
        None => match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("could not remove {}: {e}", path.display())),
        },
    }
}

/// The listening sshd: a process named sshd whose parent is not one (the per-connection
/// ones are its children).
fn running_sshd() -> Option<u32> {
    let comm = |pid: &str| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok();
    let parent = |pid: &str| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = stat.rsplit_once(')')?.1;
        after.split_whitespace().nth(1).map(str::to_owned)
    };
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid = entry.file_name().to_string_lossy().into_owned();
        let pid_num: u32 = pid.parse().ok()?;
        let is_sshd = |p: &str| comm(p).is_some_and(|c| c.trim() == "sshd");
        (is_sshd(&pid) && !parent(&pid).is_some_and(|pp| is_sshd(&pp))).then_some(pid_num)
    })
}

/// SIGHUP: sshd's own "read your configuration again".
fn hang_up(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: kill has no memory preconditions; a stale pid only fails.
        unsafe { libc::kill(pid, libc::SIGHUP) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        false
    }
}

/// One row of `loginctl list-sessions --no-legend`: session id, uid, user, and more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LoginSession {
    pub id: String,
    pub uid: u32,
    pub user: String,
}

pub(super) fn parse_list_sessions(text: &str) -> Vec<LoginSession> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let id = words.next()?;
            // A legend line ("3 sessions listed.") has no uid where a session has one.
            let uid = words.next()?.parse().ok()?;
            let user = words.next()?;
            // Ids are plain tokens such as `2` or `c1`.
            id.chars().all(|c| c.is_ascii_alphanumeric()).then(|| LoginSession {
                id: id.to_owned(),
                uid,
                user: user.to_owned(),
            })
        })
        .collect()
}

/// `show-session -p State -p TTY` as `Key=value` lines.
pub(super) fn property<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// A terminal the warning may be written to: `pts/N` or `ttyN`, nothing else.
pub(super) fn tty_path(tty: &str) -> Option<PathBuf> {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let ok = tty.strip_prefix("pts/").is_some_and(digits) || tty.strip_prefix("tty").is_some_and(digits);
    ok.then(|| Path::new("/dev").join(tty))
}

/// loginctl's failure as what it means here: no logind is `unsupported`, saying so.
fn loginctl_failed(out: &ProgramOutput) -> ToolError {
    let said = out.complaint();
    let lower = said.to_lowercase();
    if lower.contains("bus") || lower.contains("not been booted with systemd") || lower.contains("logind") {
        ToolError::new(
            ErrorCode::Unsupported,
            format!("sessions are managed by systemd-logind, which does not answer on this PC (loginctl said: {said})"),
        )
    } else {
        ToolError::exec_failed(format!("loginctl failed (exit code {}): {said}", exit_text(out)))
    }
}

async fn loginctl(args: &[&str]) -> Result<ProgramOutput, ToolError> {
    let out = run_program("loginctl", args, STEP_LIMIT).await.map_err(|e| {
        if e.code == ErrorCode::Unsupported {
            ToolError::new(
                ErrorCode::Unsupported,
                format!("{}; sessions are managed through systemd-logind's loginctl", e.message),
            )
        } else {
            e
        }
    })?;
    if out.success() {
        Ok(out)
    } else {
        Err(loginctl_failed(&out))
    }
}

pub(super) async fn session_action(args: AccountSessionActionArgs, action: SessionAction) -> ToolResult {
    let (_files, _accounts, account) = target(&args.principal).await?;
    let name = account.name.as_str();
    let uid: Option<u32> = account.id.parse().ok();
    let listed = loginctl(&["list-sessions", "--no-legend", "--no-pager"]).await?;
    let mut mine: Vec<LoginSession> = parse_list_sessions(&listed.stdout)
        .into_iter()
        .filter(|s| s.user == name || Some(s.uid) == uid)
        .collect();
    let more = mine.len() > MAX_SESSIONS;
    mine.truncate(MAX_SESSIONS);
    let mut states = Vec::new();
    for session in &mine {
        let shown = loginctl(&["show-session", "--no-pager", "-p", "State", "-p", "TTY", &session.id]).await;
        let text = shown.map(|o| o.stdout).unwrap_or_default();
        states.push((
            property(&text, "State").unwrap_or("unknown").to_owned(),
            property(&text, "TTY").and_then(tty_path),
        ));
    }
    let warn = args.warn_seconds.unwrap_or(0);
    let mut notes = Vec::new();
    if warn > 0 && !mine.is_empty() {
        let message = super::warning_text(action, warn);
        let ttys: Vec<PathBuf> = states.iter().filter_map(|(_, t)| t.clone()).collect();
        let warned = blocking("warning on the terminals", FILE_BACKSTOP, move || {
            ttys.iter().filter(|t| write_tty(t, &message)).count()
        })
        .await
        .unwrap_or(0);
        if warned < mine.len() {
            notes.push(format!(
                "the warning reached {warned} of {} sessions (graphical sessions without a terminal get none)",
                mine.len()
            ));
        }
        tokio::time::sleep(Duration::from_secs(warn)).await;
    }
    let verb = match action {
        SessionAction::Lock => "lock-session",
        SessionAction::Logoff => "terminate-session",
    };
    let mut sessions = Vec::new();
    for (session, (state, _)) in mine.iter().zip(&states) {
        let acted = match loginctl(&[verb, "--no-pager", &session.id]).await {
            Ok(_) => true,
            Err(e) => {
                notes.push(format!("session {}: {}", session.id, e.message));
                false
            }
        };
        sessions.push(json!({
            "session_id": session_number(&session.id),
            "state": state,
            "acted": acted,
        }));
    }
    if more {
        notes.push(format!("only the first {MAX_SESSIONS} sessions were acted on"));
    }
    Ok(super::session_result(name, action, sessions, warn, notes))
}

/// The wire says a session id is a number; logind's are numbers except for the few
/// `cN` ids of sessions started without a seat, whose digits then stand for them.
pub(super) fn session_number(id: &str) -> Value {
    let digits: String = id.chars().filter(char::is_ascii_digit).collect();
    digits.parse::<u64>().map_or(Value::Null, Value::from)
}

/// Writes `message` to a terminal without waiting on it and without making it ours.
fn write_tty(path: &Path, message: &str) -> bool {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(format!("\r\n{message}\r\n").as_bytes()))
        .is_ok()
}

pub(super) async fn password_policy(args: PasswordPolicySetArgs) -> ToolResult {
    if let Some(min) = args.min_length
        && !(6..=64).contains(&min)
    {
        return Err(ToolError::bad_args(format!(
            "min_length {min} cannot be set on Linux: pwquality takes 6 to 64 (it treats anything shorter as 6)"
        )));
    }
    let mut edits: Vec<(&str, &str, String, Style)> = Vec::new();
    if let Some(min) = args.min_length {
        edits.push(("security/pwquality.conf", "minlen", min.to_string(), Style::Equals));
    }
    let max_days = args.max_age_days.map(|d| if d == 0 { NEVER_DAYS } else { d });
    if let Some(days) = max_days {
        edits.push(("login.defs", "PASS_MAX_DAYS", days.to_string(), Style::Space));
    }
    if let Some(deny) = args.lockout_threshold {
        edits.push(("security/faillock.conf", "deny", deny.to_string(), Style::Equals));
    }
    let files: Vec<String> = edits
        .iter()
        .map(|(f, ..)| etc().join(f).display().to_string())
        .collect();
    let edits_owned: Vec<(PathBuf, String, String, Style)> = edits
        .into_iter()
        .map(|(f, k, v, s)| (etc().join(f), k.to_owned(), v, s))
        .collect();
    blocking("editing the password policy files", FILE_BACKSTOP, move || {
        for (path, key, value, style) in &edits_owned {
            edit_file(path, key, value, *style)?;
        }
        Ok::<(), String>(())
    })
    .await?
    .map_err(ToolError::exec_failed)?;

    let mut notes = pam_notes(&args).await;
    let mut updated = Vec::new();
    if let Some(days) = max_days {
        // login.defs only shapes accounts made from now on; people's existing
        // accounts get the same maximum age, daemons' stay as they are.
        let accounts = read_files().await?;
        let people: Vec<String> = accounts
            .users
            .iter()
            .filter(|u| accounts.is_person(u) && u.name != "nobody")
            .map(|u| u.name.clone())
            .collect();
        let days = days.to_string();
        for name in people {
            match step("chage", &["-M", &days, "--", &name]).await {
                Ok(_) => updated.push(name),
                Err(e) => notes.push(format!("{name}: {}", e.message)),
            }
        }
    }
    let policy = super::policy_set(&args);
    let mut result = json!({
        "ok": true,
        "applies_to": "local_only",
        "policy": policy,
        "files": files,
        "accounts_updated": updated,
    });
    if !notes.is_empty() {
        result["note"] = json!(notes.join("; "));
    }
    Ok(result)
}

/// Sets one value in a configuration file, written atomically; a missing file is
/// created with only kenny's setting.
fn edit_file(path: &Path, key: &str, value: &str, style: Style) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("could not read {}: {e}", path.display())),
    };
    let updated = config::set_value(&text, key, value, style);
    if updated == text {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    }
    crate::tools::webfilter::write_atomic(path, updated.as_bytes())
}

/// What the PAM stack does not enforce: a value written for a module PAM does not
/// load changes nothing until it does.
async fn pam_notes(args: &PasswordPolicySetArgs) -> Vec<String> {
    let stack = blocking("reading the PAM configuration", FILE_BACKSTOP, || {
        let mut all = String::new();
        if let Ok(dir) = std::fs::read_dir(etc().join("pam.d")) {
            for entry in dir.flatten().take(200) {
                if let Ok(text) = std::fs::read_to_string(entry.path()) {
                    all.push_str(&text);
                }
            }
        }
        all
    })
    .await
    .unwrap_or_default();
    let mut notes = Vec::new();
    if args.min_length.is_some() && !stack.contains("pam_pwquality") {
        notes.push("pam_pwquality is not in this PC's PAM stack, so minlen applies once it is (Debian: install libpam-pwquality)".to_owned());
    }
    if args.lockout_threshold.is_some() && !stack.contains("pam_faillock") {
        notes.push("pam_faillock is not in this PC's PAM stack, so the lockout applies once it is (pam-auth-update or authselect enable-feature with-faillock)".to_owned());
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::accounts::rails::Change;

    const PASSWD: &str = "\
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
papa:x:1000:1000:Papa:/home/papa:/bin/bash
kid:x:1001:1001:Kid:/home/kid:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
";
    const SHADOW: &str = "\
root:$6$x$hash:19800:0:99999:7:::
daemon:*:19700:0:99999:7:::
papa:$6$x$hash:20000:0:99999:7:::
kid:!$6$x$hash:20000:0:99999:7::1:
nobody:*:19700:0:99999:7:::
";
    const GROUP: &str = "root:x:0:\nsudo:x:27:papa\nkid:x:1001:\n";

    fn files() -> AccountFiles {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("passwd", PASSWD), ("shadow", SHADOW), ("group", GROUP)] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        AccountFiles::read(dir.path()).unwrap()
    }

    #[test]
    fn the_roster_marks_built_in_people_admins_and_the_agent() {
        let accounts = roster(&files(), Some(0), 20_500);
        let by = |n: &str| accounts.iter().find(|a| a.name == n).unwrap().clone();
        assert!(by("root").builtin && by("root").is_self && !by("root").person);
        assert!(by("daemon").builtin && !by("daemon").person);
        assert!(by("nobody").builtin && !by("nobody").person, "65534 is the OS's");
        let papa = by("papa");
        assert!(papa.person && papa.enabled && papa.admin == Some(true) && !papa.builtin);
        assert!(!by("kid").enabled, "expired on day 1");
        // papa is the one enabled admin who is a person: the rails keep him.
        let err = rails::check(&accounts, &papa, Change::Demote).unwrap_err();
        assert!(
            err.message.contains("last enabled local administrator"),
            "{}",
            err.message
        );
        assert_eq!(rails::check(&accounts, &by("kid"), Change::Delete), Ok(()));
    }

    #[test]
    fn argv_carries_names_after_the_end_of_options_and_never_the_password() {
        assert_eq!(useradd_args("guest", None), ["-m", "--", "guest"]);
        assert_eq!(
            useradd_args("guest", Some("A Visitor")),
            ["-m", "-c", "A Visitor", "--", "guest"]
        );
        let secret = Secret::new("pa:ss word".into());
        assert_eq!(chpasswd_input("guest", &secret), b"guest:pa:ss word\n");
    }

    #[test]
    fn loginctl_output_is_read() {
        let listed = "      2 1000 papa seat0 tty2\n      c1  1001 kid        \n\n3 sessions listed.\n";
        assert_eq!(
            parse_list_sessions(listed),
            [
                LoginSession {
                    id: "2".into(),
                    uid: 1000,
                    user: "papa".into()
                },
                LoginSession {
                    id: "c1".into(),
                    uid: 1001,
                    user: "kid".into()
                },
            ]
        );
        let shown = "State=active\nTTY=pts/3\n";
        assert_eq!(property(shown, "State"), Some("active"));
        assert_eq!(
            property(shown, "TTY").and_then(tty_path),
            Some(PathBuf::from("/dev/pts/3"))
        );
        assert_eq!(property("TTY=\n", "TTY"), None);
        for bad in ["pts/../sda", "sda", "tty", "pts/", "tty1x"] {
            assert_eq!(tty_path(bad), None, "{bad}");
        }
        assert_eq!(session_number("c7"), json!(7));
        assert_eq!(session_number("12"), json!(12));
    }

    #[test]
    fn no_logind_is_unsupported_and_says_why() {
        let out = ProgramOutput {
            stdout: String::new(),
            stderr: "System has not been booted with systemd as init system (PID 1). Can't operate.\nFailed to connect to bus: Host is down\n".into(),
            exit_code: Some(1),
        };
        let err = loginctl_failed(&out);
        assert_eq!(err.code, ErrorCode::Unsupported);
        assert!(err.message.contains("systemd-logind"), "{}", err.message);
    }

    #[test]
    fn policy_files_are_edited_atomically_and_kept_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faillock.conf");
        let original = "# deny = 3\n#\n  audit\nunlock_time = 600\n";
        std::fs::write(&path, original).unwrap();
        edit_file(&path, "deny", "5", Style::Equals).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{original}{}\ndeny = 5\n", config::MARKER));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
        let fresh = dir.path().join("security/pwquality.conf");
        edit_file(&fresh, "minlen", "10", Style::Equals).unwrap();
        assert_eq!(
            std::fs::read_to_string(&fresh).unwrap(),
            format!("{}\nminlen = 10\n", config::MARKER)
        );
    }

    #[test]
    fn the_sshd_drop_in_is_written_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sshd_config.d/90-kenny.conf");
        let main = dir.path().join("sshd_config");
        let (before, after, main_text) = write_drop_in(&path, &main, "kid", true).unwrap();
        assert_eq!((before, main_text), (None, None));
        assert!(after.unwrap().ends_with("DenyUsers kid\n"));
        let (_, after, _) = write_drop_in(&path, &main, "kid", false).unwrap();
        assert_eq!(after, None);
        assert!(!path.exists());
    }
}
