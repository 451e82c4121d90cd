//! The local_accounts section on Windows: local users, who is in Administrators, and the local password policy.
//!
//! One PowerShell query: `Get-LocalUser`, the members of the group with SID
//! S-1-5-32-544 (its name is localised: "Administratoren", "Administrateurs"), and
//! `net accounts`. `Get-LocalGroupMember` stops with error 1332 when a member's SID no
//! longer resolves (a deleted domain or Azure AD account), so the script then asks the
//! WinNT provider (`[ADSI]`), which lists such members as bare SIDs.
//!
//! `net accounts` prints localised labels and words, so its lines are read by position
//! (the order is fixed) and by the shape of the value: digits are a number, a single
//! word ("Never", "Nie", "Jamais", "Unlimited", "Unbegrenzt") means no limit, 0.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::super::command::Output;
use super::super::format::clip;
use super::super::format::rfc3339_from_unix;
use super::super::windows::{Query, json_of};
use super::super::{Outcome, Section, Status, section};
use super::{MAX_LISTED, noun};
use crate::tools::psjson;

/// Members of Administrators that are not local accounts listed at most.
const MAX_OTHER_ADMINS: usize = 50;

pub(in super::super) static QUERY: Query = Query {
    script: SCRIPT,
    limit: Duration::from_secs(10),
    parse,
};

const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$users = @(Get-LocalUser | ForEach-Object {
  [pscustomobject]@{
    Name = $_.Name
    FullName = $_.FullName
    Enabled = $_.Enabled
    PasswordRequired = $_.PasswordRequired
    PasswordLastSet = $_.PasswordLastSet
    LastLogon = $_.LastLogon
    Sid = $_.SID.Value
    PrincipalSource = [string]$_.PrincipalSource
  }
})
$adminSid = [System.Security.Principal.SecurityIdentifier]::new('S-1-5-32-544')
$adminsFrom = 'Get-LocalGroupMember'
$adminsError = $null
try {
  $admins = @(Get-LocalGroupMember -SID $adminSid | ForEach-Object {
    [pscustomobject]@{ Name = $_.Name; Sid = $_.SID.Value; PrincipalSource = [string]$_.PrincipalSource; ObjectClass = [string]$_.ObjectClass }
  })
} catch {
  $adminsFrom = 'ADSI'
  $adminsError = $_.Exception.Message
  try {
    $groupName = $adminSid.Translate([System.Security.Principal.NTAccount]).Value.Split('\')[-1]
    $group = [ADSI]"WinNT://./$groupName,group"
    $admins = @($group.Invoke('Members') | ForEach-Object {
      $type = $_.GetType()
      $sidBytes = [byte[]]$type.InvokeMember('objectSid', 'GetProperty', $null, $_, $null)
      [pscustomobject]@{
        Name = [string]$type.InvokeMember('Name', 'GetProperty', $null, $_, $null)
        Sid = [System.Security.Principal.SecurityIdentifier]::new($sidBytes, 0).Value
        PrincipalSource = $null
        ObjectClass = [string]$type.InvokeMember('Class', 'GetProperty', $null, $_, $null)
      }
    })
  } catch {
    $admins = $null
    $adminsError = "$adminsError / $($_.Exception.Message)"
  }
}
$ErrorActionPreference = 'Continue'
$net = @(& "$env:SystemRoot\System32\net.exe" accounts 2>&1 | ForEach-Object { [string]$_ })
$netExit = $LASTEXITCODE
$ErrorActionPreference = 'Stop'
[pscustomobject]@{
  Users = $users
  Admins = $admins
  AdminsFrom = $adminsFrom
  AdminsError = $adminsError
  NetAccounts = $net
  NetAccountsExit = $netExit
} | ConvertTo-Json -Compress -Depth 4
"#;

/// A member of Administrators as the script reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Member {
    name: String,
    sid: String,
    source: Option<String>,
    class: MemberClass,
}

impl Member {
    /// A SID no account answers to any more (a deleted domain or Azure AD account):
    /// both providers then give the SID as the name.
    fn unresolved(&self) -> bool {
        self.name == self.sid
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberClass {
    User,
    Group,
    Unknown,
}

impl MemberClass {
    /// `ObjectClass` from Get-LocalGroupMember is translated on some Windows languages;
    /// the WinNT provider's `Class` is always English.
    fn of(text: &str) -> Self {
        match text.trim().to_lowercase().as_str() {
            "user" | "benutzer" | "utilisateur" | "usuario" | "utente" | "gebruiker" => MemberClass::User,
            "group" | "gruppe" | "groupe" | "grupo" | "gruppo" | "groep" => MemberClass::Group,
            _ => MemberClass::Unknown,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            MemberClass::User => "user",
            MemberClass::Group => "group",
            MemberClass::Unknown => "unknown",
        }
    }
}

/// The local password policy as `net accounts` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PasswordPolicy {
    min_length: u64,
    /// 0: passwords never expire.
    max_age_days: u64,
    /// 0: wrong passwords never lock the account.
    lockout_threshold: u64,
}

fn parse(output: &Output, _now: OffsetDateTime) -> Outcome {
    let value = json_of(output)?;
    let Value::Object(root) = value else {
        return Err(format!("the accounts query printed {value} instead of an object"));
    };
    let users = psjson::rows_of(root.get("Users").cloned().unwrap_or(Value::Null))?;
    let members = match root.get("Admins") {
        None | Some(Value::Null) => None,
        Some(list) => Some(psjson::rows_of(list.clone())?.iter().map(member).collect::<Vec<_>>()),
    };
    let policy = net_accounts_lines(&root).and_then(|lines| password_policy(&lines));
    let mut notes = Vec::new();
    if members.is_none() {
        let why = psjson::text(&root, "AdminsError").unwrap_or_else(|| "no answer".to_owned());
        notes.push(format!(
            "the members of Administrators could not be read ({}): is_admin is unknown",
            clip(&why, 200)
        ));
    }
    if policy.is_none() {
        notes.push("`net accounts` gave no readable password policy".to_owned());
    }
    Ok(build(&users, members.as_deref(), policy, &notes))
}

fn member(row: &Map<String, Value>) -> Member {
    let sid = psjson::text(row, "Sid").unwrap_or_default();
    Member {
        name: psjson::text(row, "Name").unwrap_or_else(|| sid.clone()),
        source: psjson::text(row, "PrincipalSource"),
        class: psjson::text(row, "ObjectClass").map_or(MemberClass::Unknown, |c| MemberClass::of(&c)),
        sid,
    }
}

/// `PrincipalSource` to the section's `kind`.
fn kind(source: Option<&str>) -> &'static str {
    match source {
        Some("MicrosoftAccount") => "microsoft",
        Some("AzureAD") => "azure_ad",
        Some("ActiveDirectory") => "domain",
        Some("Local") => "local",
        _ => "unknown",
    }
}

fn build(
    users: &[Map<String, Value>],
    members: Option<&[Member]>,
    policy: Option<PasswordPolicy>,
    notes: &[String],
) -> Section {
    let admin_sids: Option<HashSet<&str>> = members.map(|m| m.iter().map(|m| m.sid.as_str()).collect());
    let mut accounts = Vec::new();
    let mut admins = Vec::new();
    let mut passwordless = Vec::new();
    let mut guests_enabled = Vec::new();
    let mut local_sids = HashSet::new();
    let mut sorted: Vec<&Map<String, Value>> = users.iter().collect();
    sorted.sort_by_key(|u| psjson::text(u, "Name").unwrap_or_default().to_lowercase());
    for user in sorted {
        let Some(name) = psjson::text(user, "Name").map(|n| clip(&n, 200)) else {
            continue;
        };
        let sid = psjson::text(user, "Sid").unwrap_or_default();
        let enabled = user.get("Enabled").and_then(Value::as_bool);
        // PasswordRequired is UF_PASSWD_NOTREQD: "policy need not require one". Windows
        // sets it on many accounts that do have a password, so it means "none" only
        // when no password was ever set either.
        let password_last_set = time_of(user.get("PasswordLastSet"));
        let password_required = match user.get("PasswordRequired").and_then(Value::as_bool) {
            Some(false) if password_last_set.is_some() => None,
            flag => flag,
        };
        let is_admin = admin_sids.as_ref().map(|sids| sids.contains(sid.as_str()));
        let builtin_guest = sid.ends_with("-501");
        // A disabled account cannot use its rights; counting the built-in Administrator,
        // disabled on every PC, would only raise the admin count everywhere.
        if is_admin == Some(true) && enabled != Some(false) {
            admins.push(name.clone());
        }
        if enabled == Some(true) && builtin_guest {
            guests_enabled.push(name.clone());
        } else if enabled == Some(true) && password_required == Some(false) {
            passwordless.push(name.clone());
        }
        let display = psjson::text(user, "FullName").map_or_else(|| name.clone(), |d| clip(d.trim(), 200));
        accounts.push(json!({
            "name": name,
            "display": display,
            "kind": kind(Some(psjson::text(user, "PrincipalSource").as_deref().unwrap_or("Local"))),
            "enabled": enabled,
            "is_admin": is_admin,
            "password_required": password_required,
            "password_locked": null,
            "password_last_set": password_last_set,
            "last_logon": time_of(user.get("LastLogon")),
            "builtin_admin": sid.ends_with("-500"),
            "builtin_guest": builtin_guest,
            "sid": clip(&sid, 200),
        }));
        local_sids.insert(sid);
    }
    let others: Vec<&Member> = members
        .unwrap_or_default()
        .iter()
        .filter(|m| !local_sids.contains(&m.sid))
        .collect();
    // People signing in with a domain or Azure AD account hold admin rights as surely
    // as local ones; groups and SIDs nobody resolves are listed, not counted.
    admins.extend(
        others
            .iter()
            .filter(|m| m.class == MemberClass::User && !m.unresolved())
            .map(|m| clip(&m.name, 200)),
    );
    let count = accounts.len();
    accounts.truncate(MAX_LISTED);
    let (status, summary) = judged(count, admins.len(), &passwordless, &guests_enabled);
    let other_admins: Vec<Value> = others
        .iter()
        .take(MAX_OTHER_ADMINS)
        .map(|m| {
            json!({
                "name": clip(&m.name, 200),
                "sid": clip(&m.sid, 200),
                "kind": kind(m.source.as_deref()),
                "class": if m.unresolved() { "unresolved" } else { m.class.as_str() },
            })
        })
        .collect();
    let mut fields = json!({
        "accounts": accounts,
        "admins": admins,
        "count": count,
        "truncated": count > MAX_LISTED,
        "other_admins": other_admins,
        "password_policy": policy.map(|p| json!({
            "applies_to": "local_only",
            "min_length": p.min_length,
            "max_age_days": p.max_age_days,
            "lockout_threshold": p.lockout_threshold,
        })),
    });
    if !notes.is_empty() {
        fields["note"] = Value::from(notes.join("; "));
    }
    section(status, summary, fields)
}

/// Warn when an enabled account may sign in without a password, or the guest account
/// is on (the server's own rule says the same, and crit for an admin without one).
fn judged(count: usize, admins: usize, passwordless: &[String], guests_enabled: &[String]) -> (Status, String) {
    let mut summary = format!(
        "{}, {}",
        noun(count, "account", "accounts"),
        noun(admins, "admin", "admins")
    );
    let mut status = Status::Ok;
    if !passwordless.is_empty() {
        summary += &format!("; no password required for {}", some_names(passwordless));
        status = Status::Warn;
    }
    if !guests_enabled.is_empty() {
        summary += &format!("; the guest account {} is enabled", some_names(guests_enabled));
        status = Status::Warn;
    }
    (status, summary)
}

/// The first few names, so a PC with many accounts keeps a one-line summary.
fn some_names(names: &[String]) -> String {
    const SHOWN: usize = 3;
    match names.len() {
        n if n <= SHOWN => names.join(", "),
        n => format!("{} and {} more", names[..SHOWN].join(", "), n - SHOWN),
    }
}

fn time_of(value: Option<&Value>) -> Option<String> {
    value
        .and_then(psjson::date)
        .and_then(|at| rfc3339_from_unix(at.unix_timestamp()))
}

/// The lines `net accounts` printed, when it succeeded.
fn net_accounts_lines(root: &Map<String, Value>) -> Option<Vec<String>> {
    if psjson::number(root, "NetAccountsExit").is_some_and(|code| code != 0) {
        return None;
    }
    match root.get("NetAccounts")? {
        Value::Array(items) => Some(items.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
        Value::String(one) => Some(vec![one.clone()]),
        _ => None,
    }
}

/// The policy from `net accounts`, read by line position: force logoff, minimum age,
/// maximum age, minimum length, history, lockout threshold, lockout duration,
/// observation window, role. Labels are localised and may be garbled by the console
/// code page; the order is not.
fn password_policy(lines: &[String]) -> Option<PasswordPolicy> {
    let values: Vec<&str> = lines
        .iter()
        .filter_map(|line| line.rsplit_once(':'))
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
        .collect();
    if values.len() < 8 {
        return None;
    }
    // The minimum age and length are always numbers; if they are not, the lines are
    // not what this parser knows.
    number(values[1])?;
    Some(PasswordPolicy {
        min_length: number(values[3])?,
        max_age_days: limit(values[2])?,
        lockout_threshold: limit(values[5])?,
    })
}

fn number(value: &str) -> Option<u64> {
    value.parse().ok()
}

/// A number, or one word for "no limit" in any language: 0.
fn limit(value: &str) -> Option<u64> {
    if let Some(n) = number(value) {
        return Some(n);
    }
    let one_word = !value.contains(char::is_whitespace) && value.chars().all(char::is_alphabetic);
    one_word.then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_not_required_flag_means_no_password_only_when_none_was_ever_set() {
        let users = serde_json::json!([
            {"Name": "papa", "Sid": "S-1-5-21-1-1001", "Enabled": true, "PasswordRequired": false,
             "PasswordLastSet": "/Date(1768467600000)/"},
            {"Name": "kid", "Sid": "S-1-5-21-1-1002", "Enabled": true, "PasswordRequired": false,
             "PasswordLastSet": null},
        ]);
        let root = serde_json::json!({"Users": users, "Admins": []}).to_string();
        let out = Output::printed(&root, "", true);
        let section = parse(&out, recorded_now()).unwrap();
        let accounts = section["accounts"].as_array().unwrap();
        let flag = |name: &str| accounts.iter().find(|a| a["name"] == name).unwrap()["password_required"].clone();
        assert_eq!(
            flag("papa"),
            Value::Null,
            "a password was set: the flag alone says nothing"
        );
        assert_eq!(flag("kid"), Value::Bool(false));
        assert!(section["summary"].as_str().unwrap().contains("kid"), "{section:?}");
    }

    fn recorded_now() -> OffsetDateTime {
        time::macros::datetime!(2026-06-05 00:00:00 UTC)
    }

    #[test]
    fn the_query_reads_local_users_administrators_by_sid_and_net_accounts() {
        let query = super::super::windows_query().expect("local_accounts has a Windows query");
        assert!(std::ptr::eq(query, &QUERY));
        for needle in [
            "Get-LocalUser",
            "Get-LocalGroupMember -SID $adminSid",
            "'S-1-5-32-544'",
            "[ADSI]\"WinNT://./$groupName,group\"",
            "Translate([System.Security.Principal.NTAccount])",
            "System32\\net.exe\" accounts",
            "[string]$_.PrincipalSource",
            "ConvertTo-Json -Compress -Depth 4",
        ] {
            assert!(SCRIPT.contains(needle), "the script lacks {needle}");
        }
        assert!(
            !SCRIPT.contains("Administrators,group"),
            "the group's name is localised; it is found by SID"
        );
    }

    #[test]
    fn net_accounts_is_read_by_position_in_any_language() {
        let english = lines(
            "Force user logoff how long after time expires?:       Never\n\
             Minimum password age (days):                          0\n\
             Maximum password age (days):                          Unlimited\n\
             Minimum password length:                              12\n\
             Length of password history maintained:                None\n\
             Lockout threshold:                                    10\n\
             Lockout duration (minutes):                           10\n\
             Lockout observation window (minutes):                 10\n\
             Computer role:                                        WORKSTATION\n\
             The command completed successfully.\n",
        );
        assert_eq!(
            password_policy(&english),
            Some(PasswordPolicy {
                min_length: 12,
                max_age_days: 0,
                lockout_threshold: 10
            })
        );
        let french = lines(
            "Fermeture forcée de la session après expiration ? :   Jamais\n\
             Durée de vie minimale du mot de passe (jours) :       0\n\
             Durée de vie maximale du mot de passe (jours) :       42\n\
             Longueur minimale du mot de passe :                   0\n\
             Longueur de l'historique des mots de passe :          Aucune\n\
             Seuil de verrouillage :                               Jamais\n\
             Durée du verrouillage (minutes) :                     30\n\
             Fenêtre d'observation du verrouillage (minutes) :     30\n\
             Rôle de l'ordinateur :                                STATION DE TRAVAIL\n\
             La commande s'est terminée correctement.\n",
        );
        assert_eq!(
            password_policy(&french),
            Some(PasswordPolicy {
                min_length: 0,
                max_age_days: 42,
                lockout_threshold: 0
            })
        );
        assert_eq!(password_policy(&english[..5]), None, "too few lines");
        let mut shifted = english.clone();
        shifted.remove(1);
        assert_eq!(password_policy(&shifted), None, "a word where a number must be");
        assert_eq!(limit("12 Tage"), None);
        assert_eq!(limit("Illimité"), Some(0));
    }

    #[test]
    fn the_summary_names_a_few_accounts_and_counts_the_rest() {
        let names: Vec<String> = (1..=5).map(|i| format!("user{i}")).collect();
        let (status, summary) = judged(7, 1, &names, &[]);
        assert_eq!(status, Status::Warn);
        assert_eq!(
            summary,
            "7 accounts, 1 admin; no password required for user1, user2, user3 and 2 more"
        );
        assert_eq!(judged(1, 0, &[], &[]), (Status::Ok, "1 account, 0 admins".to_owned()));
    }

    #[test]
    fn member_classes_in_several_languages() {
        assert_eq!(MemberClass::of("User"), MemberClass::User);
        assert_eq!(MemberClass::of("Benutzer"), MemberClass::User);
        assert_eq!(MemberClass::of("Groupe"), MemberClass::Group);
        assert_eq!(MemberClass::of("Computer"), MemberClass::Unknown);
        assert_eq!(kind(Some("MicrosoftAccount")), "microsoft");
        assert_eq!(kind(Some("AzureAD")), "azure_ad");
        assert_eq!(kind(Some("Local")), "local");
        assert_eq!(kind(Some("Unknown")), "unknown");
    }
}
