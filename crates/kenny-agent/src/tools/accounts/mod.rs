//! Local account governance: create, delete, enable or disable an account, grant or
//! remove administrator rights, refuse network or remote sign-in, lock or sign out a
//! person's sessions, and set the local password policy. `linux` runs the system's
//! account programs, `windows` builds PowerShell and native command lines (unit-tested
//! here on recorded output), `rails` refuses what would cut the PC off from its own
//! administration, `config` edits Linux configuration files byte for byte.
//!
//! What every tool shares is here: names are checked before they reach any program,
//! the password travels only as a [`Secret`] (never in argv, a script's text, a log
//! line or an error), and one account change runs at a time, so the rails judge the
//! accounts as the change finds them.

mod config;
mod linux;
mod rails;
mod windows;

use kenny_proto::args::{
    AccountCreateArgs, AccountDeleteArgs, AccountSessionActionArgs, AccountSetAdminArgs, AccountSetEnabledArgs,
    AccountSetLogonRightsArgs, PasswordPolicySetArgs,
};

use super::{ToolError, ToolResult};

/// One change to the accounts at a time: the rails' count of administrators must still
/// hold when the change it allowed is made.
static ONE_CHANGE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MAX_PASSWORD_CHARS: usize = 256;

/// A password on its way to the OS. Its `Debug` says nothing, and it leaves only
/// through [`Secret::expose`], into a program's standard input.
pub(super) struct Secret(String);

impl Secret {
    pub(super) fn new(text: String) -> Secret {
        Secret(text)
    }

    pub(super) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// `text` with every occurrence of the password cut out: programs such as chpasswd
/// may echo what they read in an error.
pub(super) fn scrubbed(text: &str, secret: &Secret) -> String {
    if secret.0.is_empty() {
        return text.to_owned();
    }
    text.replace(secret.expose(), "<password>")
}

/// A password the OS tools take whole: 1 to 256 characters, no NUL and no line break
/// (each ends chpasswd's line or PowerShell's read). The message never repeats it.
pub(super) fn check_password(password: &str) -> Result<(), ToolError> {
    let count = password.chars().count();
    if count == 0 || count > MAX_PASSWORD_CHARS {
        return Err(ToolError::bad_args(format!(
            "the password must be 1 to {MAX_PASSWORD_CHARS} characters long; the one given has {count}"
        )));
    }
    if password.contains(['\0', '\n', '\r']) {
        return Err(ToolError::bad_args(
            "the password may not contain a NUL character or a line break",
        ));
    }
    Ok(())
}

/// A new account's name by the POSIX portable rules, which both OSes accept: letters,
/// digits, `.`, `_` and `-`, not starting with `-` (it would read as an option), not
/// all digits (it would read as a uid), at most 32 characters (20 on Windows).
pub(super) fn check_new_name(name: &str, windows: bool) -> Result<(), ToolError> {
    let max = if windows { 20 } else { 32 };
    let portable = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let problem = if name.is_empty() {
        Some("is empty".to_owned())
    } else if name.chars().count() > max {
        Some(format!("is longer than {max} characters"))
    } else if name.starts_with('-') {
        Some("starts with `-`".to_owned())
    } else if !portable {
        Some("has a character other than letters, digits, `.`, `_` and `-`".to_owned())
    } else if name.chars().all(|c| c.is_ascii_digit()) {
        Some("is all digits".to_owned())
    } else if name.chars().all(|c| c == '.') {
        Some("is only dots".to_owned())
    } else {
        None
    };
    match problem {
        Some(why) => Err(ToolError::bad_args(format!(
            "the account name `{}` {why}; use letters, digits, `.`, `_` and `-` (not first), at most {max} characters",
            name.escape_debug()
        ))),
        None => Ok(()),
    }
}

/// An existing account's name as a caller gives it: the same rules on Linux, where it
/// becomes an argument; on Windows also spaces and other characters local account
/// names have (it only selects an account from the list, which is then named by SID).
pub(super) fn check_principal(principal: &str) -> Result<(), ToolError> {
    // A trailing `$` marks a machine account (Samba), which the portable rules lack.
    let core = principal.strip_suffix('$').unwrap_or(principal);
    let bad = principal.is_empty()
        || principal.starts_with('-')
        || principal.chars().any(|c| c.is_control())
        || (!cfg!(windows) && check_new_name(core, false).is_err());
    if bad {
        return Err(ToolError::bad_args(format!(
            "`{}` is not an account name this tool accepts: letters, digits, `.`, `_` and `-`, not starting with `-`",
            principal.escape_debug()
        )));
    }
    Ok(())
}

/// A display name goes into passwd's GECOS field (`:` and line breaks end it) or
/// FullName.
fn check_display_name(display: &str) -> Result<(), ToolError> {
    if display.contains(':') || display.chars().any(char::is_control) {
        return Err(ToolError::bad_args(
            "display_name may not contain `:` or control characters",
        ));
    }
    Ok(())
}

/// A way into the PC that `account_set_logon_rights` can refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Deny {
    Network,
    RemoteInteractive,
}

impl Deny {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Deny::Network => "network",
            Deny::RemoteInteractive => "remote_interactive",
        }
    }

    /// The Windows user right that refuses it.
    pub(super) fn windows_right(self) -> &'static str {
        match self {
            Deny::Network => "SeDenyNetworkLogonRight",
            Deny::RemoteInteractive => "SeDenyRemoteInteractiveLogonRight",
        }
    }
}

fn parse_deny(list: &[String]) -> Result<Vec<Deny>, ToolError> {
    let mut out = Vec::new();
    for item in list {
        let deny = match item.trim() {
            "network" => Deny::Network,
            "remote_interactive" => Deny::RemoteInteractive,
            other => {
                return Err(ToolError::bad_args(format!(
                    "deny takes `network` and `remote_interactive`; `{}` is neither",
                    other.escape_debug()
                )));
            }
        };
        out.push(deny);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SessionAction {
    Lock,
    Logoff,
}

impl SessionAction {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            SessionAction::Lock => "lock",
            SessionAction::Logoff => "logoff",
        }
    }
}

/// The warning shown before the action: kenny's own words, no caller text.
pub(super) fn warning_text(action: SessionAction, seconds: u64) -> String {
    match action {
        SessionAction::Lock => {
            format!("Your administrator will lock this session in {seconds} seconds. Your work stays open.")
        }
        SessionAction::Logoff => format!(
            "Your administrator will sign you out in {seconds} seconds. Save your work now: anything unsaved will be lost."
        ),
    }
}

/// `account_session_action`'s answer, the same on both OSes.
pub(super) fn session_result(
    name: &str,
    action: SessionAction,
    sessions: Vec<serde_json::Value>,
    warned: u64,
    mut notes: Vec<String>,
) -> serde_json::Value {
    if sessions.is_empty() {
        notes.push(format!("`{name}` has no sessions"));
    }
    let mut result = serde_json::json!({
        "ok": true,
        "principal": name,
        "action": action.as_str(),
        "warned_seconds": if sessions.is_empty() { 0 } else { warned },
        "sessions": sessions,
    });
    if !notes.is_empty() {
        result["note"] = serde_json::json!(notes.join("; "));
    }
    result
}

/// The policy as set: the fields the caller gave.
pub(super) fn policy_set(args: &PasswordPolicySetArgs) -> serde_json::Map<String, serde_json::Value> {
    [
        ("min_length", args.min_length),
        ("max_age_days", args.max_age_days),
        ("lockout_threshold", args.lockout_threshold),
    ]
    .into_iter()
    .filter_map(|(key, value)| Some((key.to_owned(), serde_json::json!(value?))))
    .collect()
}

pub(super) async fn create(args: AccountCreateArgs) -> ToolResult {
    check_new_name(&args.name, cfg!(windows))?;
    check_password(&args.password)?;
    if let Some(display) = &args.display_name {
        check_display_name(display)?;
    }
    let mut args = args;
    let password = Secret::new(std::mem::take(&mut args.password));
    let _one = ONE_CHANGE.lock().await;
    let outcome = if cfg!(windows) {
        windows::create(args, &password).await
    } else {
        linux::create(args, &password).await
    };
    // Whatever failed below, its message leaves without the password in it.
    outcome.map_err(|e| ToolError::new(e.code, scrubbed(&e.message, &password)))
}

pub(super) async fn delete(args: AccountDeleteArgs) -> ToolResult {
    check_principal(&args.principal)?;
    let _one = ONE_CHANGE.lock().await;
    if cfg!(windows) {
        windows::delete(args).await
    } else {
        linux::delete(args).await
    }
}

pub(super) async fn set_enabled(args: AccountSetEnabledArgs) -> ToolResult {
    check_principal(&args.principal)?;
    let _one = ONE_CHANGE.lock().await;
    if cfg!(windows) {
        windows::set_enabled(args).await
    } else {
        linux::set_enabled(args).await
    }
}

pub(super) async fn set_admin(args: AccountSetAdminArgs) -> ToolResult {
    check_principal(&args.principal)?;
    let _one = ONE_CHANGE.lock().await;
    if cfg!(windows) {
        windows::set_admin(args).await
    } else {
        linux::set_admin(args).await
    }
}

pub(super) async fn set_logon_rights(args: AccountSetLogonRightsArgs) -> ToolResult {
    check_principal(&args.principal)?;
    let deny = parse_deny(&args.deny)?;
    let _one = ONE_CHANGE.lock().await;
    if cfg!(windows) {
        windows::set_logon_rights(args, deny).await
    } else {
        linux::set_logon_rights(args, deny).await
    }
}

pub(super) async fn session_action(args: AccountSessionActionArgs) -> ToolResult {
    check_principal(&args.principal)?;
    let action = match args.action.trim() {
        "lock" => SessionAction::Lock,
        "logoff" => SessionAction::Logoff,
        other => {
            return Err(ToolError::bad_args(format!(
                "action must be `lock` or `logoff`, not `{}`",
                other.escape_debug()
            )));
        }
    };
    if args.warn_seconds.is_some_and(|w| w > 300) {
        return Err(ToolError::bad_args("warn_seconds is at most 300"));
    }
    // No lock: the warning may wait minutes, and sessions are not what the rails count.
    if cfg!(windows) {
        windows::session_action(args, action).await
    } else {
        linux::session_action(args, action).await
    }
}

pub(super) async fn password_policy(args: PasswordPolicySetArgs) -> ToolResult {
    if args.min_length.is_none() && args.max_age_days.is_none() && args.lockout_threshold.is_none() {
        return Err(ToolError::bad_args(
            "password_policy_set needs at least one of min_length, max_age_days, lockout_threshold",
        ));
    }
    let _one = ONE_CHANGE.lock().await;
    if cfg!(windows) {
        windows::password_policy(args).await
    } else {
        linux::password_policy(args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    #[test]
    fn new_names_follow_the_portable_rules() {
        for good in ["kid", "guest-visit", "a.b_c", "x1", "Papa"] {
            assert_eq!(check_new_name(good, false), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-r",
            "--help",
            "a b",
            "a:b",
            "a/b",
            "1000",
            "..",
            "née",
            "x\n",
            "abcdefghijklmnopqrstuvwxyz0123456",
        ] {
            let err = check_new_name(bad, false).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadArgs, "{bad}");
        }
        assert!(
            check_new_name("abcdefghijklmnopqrstu", true).is_err(),
            "21 is too long on Windows"
        );
        assert!(check_principal("-rf").is_err());
        assert!(check_principal("pc01$").is_ok());
        if !cfg!(windows) {
            assert!(check_principal("a b$").is_err());
        }
        assert!(check_principal("").is_err());
    }

    #[test]
    fn passwords_are_checked_without_being_repeated() {
        assert_eq!(check_password("correct horse: battery"), Ok(()));
        for bad in ["", "line\nbreak", "nul\0", "cr\r"] {
            let err = check_password(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::BadArgs);
            if !bad.is_empty() {
                assert!(!err.message.contains(bad), "{}", err.message);
            }
        }
        let long = "é".repeat(257);
        let err = check_password(&long).unwrap_err();
        assert!(
            err.message.contains("257") && !err.message.contains('é'),
            "{}",
            err.message
        );
        assert_eq!(check_password(&"é".repeat(256)), Ok(()));
    }

    #[test]
    fn secrets_never_print_and_are_scrubbed_from_messages() {
        let secret = Secret::new("hunter2-secret".into());
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(
            scrubbed("chpasswd: line 1: bad hunter2-secret here", &secret),
            "chpasswd: line 1: bad <password> here"
        );
        let args: AccountCreateArgs = crate::tools::typed(serde_json::json!({
            "name": "kid", "password": "hunter2-secret"
        }));
        let shown = format!("{:?}", kenny_proto::catalog::ToolCall::AccountCreate(args));
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn deny_lists_and_actions_are_checked() {
        assert_eq!(
            parse_deny(&["remote_interactive".into(), "network".into(), "network".into()]),
            Ok(vec![Deny::Network, Deny::RemoteInteractive])
        );
        assert_eq!(parse_deny(&[]), Ok(vec![]));
        assert!(parse_deny(&["interactive".into()]).is_err());
        assert_eq!(Deny::Network.windows_right(), "SeDenyNetworkLogonRight");
        assert!(warning_text(SessionAction::Logoff, 60).contains("60 seconds"));
        assert!(check_display_name("Papa Bear").is_ok());
        assert!(check_display_name("a:b").is_err() && check_display_name("a\nb").is_err());
    }

    #[tokio::test]
    async fn bad_arguments_are_refused_before_anything_runs() {
        let err = create(crate::tools::typed(serde_json::json!({
            "name": "--help", "password": "s3cret-pass"
        })))
        .await
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        let err = password_policy(crate::tools::typed(serde_json::json!({})))
            .await
            .unwrap_err();
        assert!(err.message.contains("at least one"), "{}", err.message);
        let err = session_action(crate::tools::typed(serde_json::json!({
            "principal": "kid", "action": "shutdown"
        })))
        .await
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
    }
}
