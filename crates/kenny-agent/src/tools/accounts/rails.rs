//! The rails no caller can override: before disabling, demoting or deleting an
//! account, the agent judges the change against the PC's accounts as they are, and
//! refuses it (`blocked`, nothing changed) when it would cut the PC off from its own
//! administration. Pure functions over a list of accounts, so both OSes share them and
//! tests give the list as data.

use kenny_proto::error::ErrorCode;

use crate::tools::ToolError;

/// One local account as the rails see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Account {
    pub name: String,
    /// The uid on Linux, the SID on Windows.
    pub id: String,
    /// `local`, `microsoft`, `azure_ad`, `domain`.
    pub kind: String,
    pub enabled: bool,
    /// None when the administrators' membership could not be read.
    pub admin: Option<bool>,
    /// Made by the OS (Linux: below UID_MIN, and nobody; Windows: the well-known RIDs).
    pub builtin: bool,
    /// Counts as a person who can administer the PC (Linux: the people's uid range;
    /// root is the OS's, not a person's, and is not counted).
    pub person: bool,
    /// The account this agent runs as.
    pub is_self: bool,
}

/// What a change does to the account it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Disable,
    Demote,
    Delete,
}

impl Change {
    fn doing(self) -> &'static str {
        match self {
            Change::Disable => "disabling",
            Change::Demote => "removing administrator rights from",
            Change::Delete => "deleting",
        }
    }
}

/// The account `principal` names: by name (case-insensitively where the OS's names
/// are, Windows) or by its id (a SID; a uid is not taken, a name may be all digits).
pub(super) fn find<'a>(accounts: &'a [Account], principal: &str, ignore_case: bool) -> Result<&'a Account, ToolError> {
    let same = |a: &str| {
        if ignore_case {
            a.eq_ignore_ascii_case(principal) || a.to_lowercase() == principal.to_lowercase()
        } else {
            a == principal
        }
    };
    accounts
        .iter()
        .find(|a| same(&a.name))
        .or_else(|| {
            principal
                .starts_with("S-1-")
                .then(|| accounts.iter().find(|a| a.id.eq_ignore_ascii_case(principal)))
                .flatten()
        })
        .ok_or_else(|| {
            ToolError::not_found(format!(
                "there is no local account named `{principal}` on this PC (telemetry's local_accounts section lists them)"
            ))
        })
}

/// Refuses `change` to `target` when it would take away the agent's own account, a
/// built-in account or the last enabled local administrator; counted as the accounts
/// would be after the change.
pub(super) fn check(accounts: &[Account], target: &Account, change: Change) -> Result<(), ToolError> {
    let doing = change.doing();
    let name = &target.name;
    if target.is_self {
        return Err(blocked(format!(
            "`{name}` is the account the kenny agent runs as{}; {doing} it would cut this PC off from kenny. Change it at the PC itself if you must",
            if target.builtin {
                " (and a built-in account)"
            } else {
                ""
            }
        )));
    }
    if target.builtin {
        return Err(blocked(format!(
            "`{name}` is a built-in account of the operating system; {doing} it can break the PC, so kenny never does. Change it at the PC itself if you must"
        )));
    }
    let takes_admin = match change {
        Change::Disable | Change::Delete => target.enabled,
        Change::Demote => true,
    };
    if !takes_admin || !target.person {
        return Ok(());
    }
    match target.admin {
        Some(false) => return Ok(()),
        Some(true) => {}
        None => {
            return Err(blocked(format!(
                "the members of the administrators' group could not be read, so kenny cannot tell whether `{name}` is the last local administrator"
            )));
        }
    }
    let unknown = accounts.iter().any(|a| a.person && a.enabled && a.admin.is_none());
    let others = accounts
        .iter()
        .filter(|a| a.person && a.enabled && a.admin == Some(true) && a.id != target.id)
        .count();
    if others == 0 && !unknown {
        return Err(blocked(format!(
            "`{name}` is the last enabled local administrator; {doing} it would leave nobody able to administer this PC. Make another account an administrator first (account_set_admin), then try again"
        )));
    }
    if others == 0 {
        return Err(blocked(format!(
            "the administrators' group could not be read for every account, so kenny cannot tell whether `{name}` is the last local administrator"
        )));
    }
    Ok(())
}

fn blocked(why: String) -> ToolError {
    ToolError::new(ErrorCode::Blocked, format!("refused: {why}. Nothing was changed."))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn account(name: &str, id: &str, enabled: bool, admin: bool) -> Account {
        Account {
            name: name.into(),
            id: id.into(),
            kind: "local".into(),
            enabled,
            admin: Some(admin),
            builtin: false,
            person: true,
            is_self: false,
        }
    }

    fn pc() -> Vec<Account> {
        vec![
            Account {
                builtin: true,
                person: false,
                is_self: true,
                ..account("root", "0", true, true)
            },
            Account {
                builtin: true,
                person: false,
                ..account("daemon", "1", false, false)
            },
            account("papa", "1000", true, true),
            account("mama", "1001", true, true),
            account("kid", "1002", true, false),
            account("old-admin", "1003", false, true),
        ]
    }

    fn judge(accounts: &[Account], name: &str, change: Change) -> Result<(), ToolError> {
        let target = find(accounts, name, false)?;
        check(accounts, target, change)
    }

    #[test]
    fn the_agents_own_and_built_in_accounts_are_never_touched() {
        let accounts = pc();
        for change in [Change::Disable, Change::Demote, Change::Delete] {
            let err = judge(&accounts, "root", change).unwrap_err();
            assert_eq!(err.code, ErrorCode::Blocked);
            assert!(err.message.contains("the kenny agent runs as"), "{}", err.message);
            assert!(err.message.ends_with("Nothing was changed."), "{}", err.message);
            let err = judge(&accounts, "daemon", change).unwrap_err();
            assert!(err.message.contains("built-in"), "{}", err.message);
        }
        let mut me = pc();
        me[4].is_self = true;
        assert!(
            judge(&me, "kid", Change::Delete)
                .unwrap_err()
                .message
                .contains("runs as")
        );
    }

    #[test]
    fn the_last_enabled_admin_stays_counted_as_after_the_change() {
        let mut accounts = pc();
        assert_eq!(judge(&accounts, "papa", Change::Disable), Ok(()), "mama is left");
        assert_eq!(judge(&accounts, "kid", Change::Delete), Ok(()));
        assert_eq!(
            judge(&accounts, "old-admin", Change::Delete),
            Ok(()),
            "a disabled admin administers nothing"
        );
        // mama disabled: papa is the last one, whatever the change.
        accounts[3].enabled = false;
        for change in [Change::Disable, Change::Demote, Change::Delete] {
            let err = judge(&accounts, "papa", change).unwrap_err();
            assert_eq!(err.code, ErrorCode::Blocked);
            assert!(
                err.message.contains("last enabled local administrator"),
                "{}",
                err.message
            );
            assert!(err.message.contains("account_set_admin"), "{}", err.message);
        }
        // Demoting a disabled admin still leaves papa.
        assert_eq!(judge(&accounts, "old-admin", Change::Demote), Ok(()));
        // root does not count as a person who administers the PC.
        assert!(accounts.iter().any(|a| a.name == "root" && a.admin == Some(true)));
    }

    #[test]
    fn unknown_membership_refuses_rather_than_guesses() {
        let mut accounts = pc();
        accounts[2].admin = None;
        let err = judge(&accounts, "papa", Change::Demote).unwrap_err();
        assert!(err.message.contains("could not be read"), "{}", err.message);
        // papa may or may not be an admin: mama may be the last one, so she stays.
        let err = judge(&accounts, "mama", Change::Demote).unwrap_err();
        assert!(err.message.contains("could not be read"), "{}", err.message);
        // A known non-admin is no administrator to lose.
        assert_eq!(judge(&accounts, "kid", Change::Disable), Ok(()));
    }

    #[test]
    fn accounts_are_found_by_name_or_sid_and_unknown_ones_are_not_found() {
        let accounts = vec![Account {
            kind: "microsoft".into(),
            ..account("Eva", "S-1-5-21-1-2-3-1001", true, false)
        }];
        assert_eq!(find(&accounts, "eva", true).unwrap().name, "Eva");
        assert!(find(&accounts, "eva", false).is_err());
        assert_eq!(find(&accounts, "S-1-5-21-1-2-3-1001", true).unwrap().name, "Eva");
        let err = find(&accounts, "nobody-here", true).unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(err.message.contains("`nobody-here`"), "{}", err.message);
    }
}
