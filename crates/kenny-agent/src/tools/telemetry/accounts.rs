//! The local_accounts section: the people who can log in to this PC, and which of them are admins.
//!
//! From `<etc>/passwd`, `<etc>/shadow` and `<etc>/group` (`KENNY_ETC_ROOT` stands in
//! for `/etc`). Listed: root and the uid range `login.defs` gives to people
//! (`UID_MIN`..=`UID_MAX`, 1000..=60000 by default), so daemons' accounts and `nobody`
//! stay out while a person's account that was switched off (shell `nologin`) stays in
//! as `enabled: false`, as in the 0.17 reference.
//!
//! shadow is read only to derive states (password set, empty, locked; expiry; last
//! change); a hash is never kept past parsing its line, let alone reported.
//!
//! - `enabled`: a login shell and an account that has not expired. A locked password
//!   alone does not disable an account (SSH keys still work), so it is reported
//!   separately as `password_locked`.
//! - `is_admin`: uid 0, or in the `sudo`, `wheel` or `admin` group.
//! - `last_logon`: from lastlog when it has a record (glibc's 292-byte x86_64/aarch64
//!   layout); else null.
//! - Status: warn when an enabled account needs no password at all.
//!
//! On Windows the section comes from a PowerShell query instead: see [`win`].

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Value, json};
use time::Date;

use super::files::{CONFIG_CAP, etc_root, read_text};
use super::format::{rfc3339_from_unix, today};
use super::{Outcome, Status, not_collected_here, section};

mod win;

/// The groups whose members may become root with sudo on the common distributions.
pub(in crate::tools) const ADMIN_GROUPS: &[&str] = &["sudo", "wheel", "admin"];
const NO_LOGIN_SHELLS: &[&str] = &["nologin", "false"];
const DEFAULT_UID_MIN: u32 = 1000;
const DEFAULT_UID_MAX: u32 = 60000;
const LASTLOG: &str = "/var/log/lastlog";
/// glibc's `struct lastlog` where `ll_time` is 32-bit (x86_64, aarch64): time, line[32], host[256].
const LASTLOG_RECORD: u64 = 4 + 32 + 256;
const MAX_LISTED: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::tools) struct PasswdEntry {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub gecos: String,
    pub shell: String,
}

/// What a shadow password field says, without the hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::tools) enum Password {
    /// A password hash: logging in needs the password.
    Set,
    /// Empty field: logging in needs no password at all.
    Empty,
    /// `!`-prefixed (locked with `passwd -l`) or `*` (no password ever): password
    /// login is impossible; other ways in (keys) may still work.
    Locked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::tools) struct ShadowEntry {
    pub password: Password,
    /// Days since 1970-01-01; 0 means "must change at next login".
    pub last_change_days: Option<i64>,
    /// Days since 1970-01-01 after which the account is expired.
    pub expire_days: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::tools) struct Group {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// The account files as read from one `/etc`: what this section reports and what the
/// account tools judge their rails by, read the same way.
#[derive(Debug, Clone, Default)]
pub(in crate::tools) struct AccountFiles {
    pub users: Vec<PasswdEntry>,
    /// None when shadow is not readable by the agent's account.
    pub shadow: Option<HashMap<String, ShadowEntry>>,
    pub groups: Vec<Group>,
    pub uid_min: u32,
    pub uid_max: u32,
}

impl AccountFiles {
    /// Reads passwd (required), shadow, group and login.defs under `etc`.
    pub(in crate::tools) fn read(etc: &Path) -> Result<AccountFiles, String> {
        let passwd = read_text(&etc.join("passwd"), CONFIG_CAP)
            .map_err(|e| format!("{}: {e}", etc.join("passwd").display()))?
            .0;
        let (uid_min, uid_max) = read_text(&etc.join("login.defs"), CONFIG_CAP)
            .map(|(t, _)| uid_range(&t))
            .unwrap_or((DEFAULT_UID_MIN, DEFAULT_UID_MAX));
        Ok(AccountFiles {
            users: parse_passwd(&passwd),
            // shadow is root-only; without it the password fields are unknown, not guessed.
            shadow: read_text(&etc.join("shadow"), CONFIG_CAP)
                .ok()
                .map(|(t, _)| parse_shadow(&t)),
            groups: read_text(&etc.join("group"), CONFIG_CAP)
                .map(|(t, _)| parse_group(&t))
                .unwrap_or_default(),
            uid_min,
            uid_max,
        })
    }

    /// A person's account (the uid range login.defs gives to people), not a daemon's.
    pub(in crate::tools) fn is_person(&self, user: &PasswdEntry) -> bool {
        (self.uid_min..=self.uid_max).contains(&user.uid)
    }

    /// The admin groups that exist here, by name and gid.
    pub(in crate::tools) fn admin_groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.iter().filter(|g| ADMIN_GROUPS.contains(&g.name.as_str()))
    }

    /// uid 0, or a member (listed, or by primary group) of an admin group.
    pub(in crate::tools) fn is_admin(&self, user: &PasswdEntry) -> bool {
        user.uid == 0
            || self
                .admin_groups()
                .any(|g| g.gid == user.gid || g.members.contains(&user.name))
    }

    pub(in crate::tools) fn shadow_of(&self, name: &str) -> Option<&ShadowEntry> {
        self.shadow.as_ref().and_then(|s| s.get(name))
    }

    /// A login shell and an account that has not expired by `today_days` (days since
    /// 1970). A locked password alone does not disable: SSH keys still work.
    pub(in crate::tools) fn is_enabled(&self, user: &PasswdEntry, today_days: i64) -> bool {
        let expired = self
            .shadow_of(&user.name)
            .and_then(|e| e.expire_days)
            .is_some_and(|d| d <= today_days);
        has_login_shell(&user.shell) && !expired
    }
}

pub(super) fn local_accounts_section() -> Outcome {
    if !cfg!(target_os = "linux") {
        return Ok(not_collected_here());
    }
    let etc = etc_root();
    // Last logons are only meaningful for the real /etc.
    let lastlog = (etc == Path::new("/etc")).then_some(Path::new(LASTLOG));
    accounts_at(&etc, lastlog, today())
}

fn accounts_at(etc: &Path, lastlog: Option<&Path>, today: Date) -> Outcome {
    let files = AccountFiles::read(etc)?;
    let mut people: Vec<&PasswdEntry> = files
        .users
        .iter()
        .filter(|u| u.uid == 0 || files.is_person(u))
        .collect();
    people.sort_by(|a, b| a.name.cmp(&b.name));
    let today_days = (today - time::OffsetDateTime::UNIX_EPOCH.date()).whole_days();

    let mut accounts = Vec::new();
    let mut admins = Vec::new();
    let mut passwordless = Vec::new();
    for user in &people {
        let entry = files.shadow_of(&user.name);
        let enabled = files.is_enabled(user, today_days);
        let is_admin = files.is_admin(user);
        if is_admin {
            admins.push(user.name.clone());
        }
        if enabled && entry.is_some_and(|e| e.password == Password::Empty) {
            passwordless.push(user.name.clone());
        }
        let display = user.gecos.split(',').next().unwrap_or_default().trim();
        accounts.push(json!({
            "name": user.name,
            "display": super::format::clip(if display.is_empty() { &user.name } else { display }, 200),
            "kind": "local",
            "enabled": enabled,
            "is_admin": is_admin,
            "password_required": entry.map(|e| e.password != Password::Empty),
            "password_locked": entry.map(|e| e.password == Password::Locked),
            "password_last_set": entry
                .and_then(|e| e.last_change_days)
                .filter(|d| *d > 0)
                .and_then(|d| rfc3339_from_unix(d * 86_400)),
            "last_logon": lastlog.and_then(|path| last_logon(path, user.uid)),
            "builtin_admin": user.uid == 0,
            "builtin_guest": false,
        }));
    }
    let count = accounts.len();
    accounts.truncate(MAX_LISTED);
    let mut summary = format!(
        "{}, {}",
        noun(count, "account", "accounts"),
        noun(admins.len(), "admin", "admins")
    );
    let status = if passwordless.is_empty() {
        Status::Ok
    } else {
        summary += &format!("; no password needed for {}", passwordless.join(", "));
        Status::Warn
    };
    let mut fields = json!({
        "accounts": accounts,
        "admins": admins,
        "count": count,
        "truncated": count > MAX_LISTED,
    });
    if files.shadow.is_none() {
        fields["note"] = Value::from("shadow is not readable by the agent's account: password fields are unknown");
    }
    Ok(section(status, summary, fields))
}

fn has_login_shell(shell: &str) -> bool {
    let base = shell.rsplit('/').next().unwrap_or(shell);
    !shell.is_empty() && !NO_LOGIN_SHELLS.contains(&base)
}

/// `name:x:uid:gid:gecos:home:shell` lines; malformed ones and NIS `+`/`-` entries skipped.
pub(in crate::tools) fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let [name, _password, uid, gid, gecos, _home, shell] = fields[..] else {
                return None;
            };
            if name.is_empty() || name.starts_with(['+', '-', '#']) {
                return None;
            }
            Some(PasswdEntry {
                name: name.to_owned(),
                uid: uid.parse().ok()?,
                gid: gid.parse().ok()?,
                gecos: gecos.to_owned(),
                shell: shell.to_owned(),
            })
        })
        .collect()
}

/// `name:password:lastchg:min:max:warn:inactive:expire:reserved` lines, reduced at
/// once to what the section reports.
fn parse_shadow(text: &str) -> HashMap<String, ShadowEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() < 8 || fields[0].is_empty() {
                return None;
            }
            let password = match fields[1] {
                "" => Password::Empty,
                p if p.starts_with(['!', '*']) => Password::Locked,
                _ => Password::Set,
            };
            let days = |i: usize| fields.get(i).and_then(|f| f.parse::<i64>().ok());
            Some((
                fields[0].to_owned(),
                ShadowEntry {
                    password,
                    last_change_days: days(2),
                    expire_days: days(7),
                },
            ))
        })
        .collect()
}

/// `name:x:gid:member,member` lines.
fn parse_group(text: &str) -> Vec<Group> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let [name, _password, gid, members] = fields[..] else {
                return None;
            };
            Some(Group {
                name: name.to_owned(),
                gid: gid.parse().ok()?,
                members: members
                    .split(',')
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .collect(),
            })
        })
        .collect()
}

/// `UID_MIN` and `UID_MAX` from login.defs, defaults where absent.
fn uid_range(text: &str) -> (u32, u32) {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(key)).then(|| words.next()?.parse().ok())?
        })
    };
    (
        value("UID_MIN").unwrap_or(DEFAULT_UID_MIN),
        value("UID_MAX").unwrap_or(DEFAULT_UID_MAX),
    )
}

/// The last login time recorded in lastlog for `uid`, if any. The file is sparse and
/// indexed by uid; one seek and a 4-byte read.
fn last_logon(path: &Path, uid: u32) -> Option<String> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return None;
    }
    let mut file = File::open(path).ok()?;
    file.seek(SeekFrom::Start(u64::from(uid) * LASTLOG_RECORD)).ok()?;
    let mut time = [0u8; 4];
    file.read_exact(&mut time).ok()?;
    let secs = i32::from_ne_bytes(time);
    (secs > 0).then(|| rfc3339_from_unix(i64::from(secs)))?
}

pub(super) fn windows_query() -> Option<&'static super::windows::Query> {
    Some(&win::QUERY)
}

/// "1 account", "3 accounts".
fn noun(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use time::macros::date;

    const PASSWD: &str = "\
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
papa:x:1000:1000:Papa,,,:/home/papa:/bin/bash
kid:x:1001:1001:Kid:/home/kid:/usr/bin/zsh
svc-backup:x:1002:1002:Backup service:/home/svc-backup:/usr/sbin/nologin
guest:x:1003:1003::/home/guest:/bin/bash
old:x:1004:1004:Old Account:/home/old:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
+nisuser::::::
broken line
";

    // Hashes shortened; the section must never carry them anyway.
    const SHADOW: &str = "\
root:$y$j9T$secretroothash:19800:0:99999:7:::
daemon:*:19700:0:99999:7:::
www-data:*:19700:0:99999:7:::
papa:$6$saltsalt$secretpapahash:20468:0:99999:7:::
kid:!$6$saltsalt$secretkidhash:20504:0:99999:7:::
svc-backup:!:19700:0:99999:7:::
guest::19700:0:99999:7:::
old:$6$saltsalt$secretoldhash:19000:0:99999:7::19500:
nobody:*:19700:0:99999:7:::
";

    const GROUP: &str = "\
root:x:0:
sudo:x:27:papa
wheel:x:10:
adm:x:4:syslog,kid
papa:x:1000:
kid:x:1001:
admin:x:1004:
";

    fn etc_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn by_name(section: &super::super::Section) -> HashMap<String, Value> {
        section["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["name"].as_str().unwrap().to_owned(), a.clone()))
            .collect()
    }

    #[test]
    fn people_are_listed_with_their_states_and_no_hashes() {
        let etc = etc_with(&[("passwd", PASSWD), ("shadow", SHADOW), ("group", GROUP)]);
        let section = accounts_at(etc.path(), None, date!(2026 - 11 - 30)).unwrap();
        let text = serde_json::to_string(&section).unwrap();
        assert!(
            !text.contains("secret") && !text.contains("$6$") && !text.contains("saltsalt"),
            "{text}"
        );

        let names: Vec<&str> = section["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["guest", "kid", "old", "papa", "root", "svc-backup"]);
        assert_eq!(section["count"], 6);
        assert_eq!(
            section["admins"],
            json!(["old", "papa", "root"]),
            "sudo member, primary group admin, uid 0"
        );

        let accounts = by_name(&section);
        assert_eq!(
            accounts["papa"],
            json!({
                "name": "papa", "display": "Papa", "kind": "local", "enabled": true, "is_admin": true,
                "password_required": true, "password_locked": false,
                "password_last_set": "2026-01-15T00:00:00Z", "last_logon": null,
                "builtin_admin": false, "builtin_guest": false,
            })
        );
        assert_eq!(accounts["kid"]["password_locked"], true);
        assert_eq!(
            accounts["kid"]["enabled"], true,
            "a locked password alone does not disable"
        );
        assert_eq!(accounts["kid"]["is_admin"], false, "adm is not an admin group");
        assert_eq!(accounts["svc-backup"]["enabled"], false, "nologin shell");
        assert_eq!(accounts["svc-backup"]["display"], "Backup service");
        assert_eq!(accounts["old"]["enabled"], false, "expired in 2023");
        assert_eq!(accounts["guest"]["password_required"], false);
        assert_eq!(accounts["guest"]["display"], "guest");
        assert_eq!(accounts["root"]["builtin_admin"], true);

        assert_eq!(section["status"], "warn");
        assert_eq!(section["summary"], "6 accounts, 3 admins; no password needed for guest");
    }

    #[test]
    fn without_shadow_password_fields_are_unknown() {
        let etc = etc_with(&[("passwd", "root:x:0:0:root:/root:/bin/bash\n")]);
        let section = accounts_at(etc.path(), None, date!(2026 - 11 - 30)).unwrap();
        assert_eq!(section["status"], "ok");
        assert_eq!(section["summary"], "1 account, 1 admin");
        assert_eq!(section["accounts"][0]["password_required"], Value::Null);
        assert_eq!(section["accounts"][0]["enabled"], true);
        assert!(section["note"].as_str().unwrap().contains("shadow"));
        assert!(accounts_at(&etc.path().join("missing"), None, date!(2026 - 11 - 30)).is_err());
    }

    #[test]
    fn login_defs_sets_the_people_range() {
        assert_eq!(
            uid_range("# comment\nUID_MIN\t\t 500\nUID_MAX   29999\nSYS_UID_MIN 100\n"),
            (500, 29999)
        );
        assert_eq!(uid_range(""), (DEFAULT_UID_MIN, DEFAULT_UID_MAX));
        let etc = etc_with(&[("passwd", PASSWD), ("login.defs", "UID_MIN 1002\nUID_MAX 1002\n")]);
        let section = accounts_at(etc.path(), None, date!(2026 - 11 - 30)).unwrap();
        assert_eq!(section["count"], 2, "{section:?}");
    }

    #[test]
    fn parsers_skip_what_they_cannot_read() {
        assert_eq!(parse_passwd(PASSWD).len(), 9);
        assert!(parse_passwd("a:x:notanumber:1::/:/bin/sh\n").is_empty());
        let shadow = parse_shadow(SHADOW);
        assert_eq!(shadow["papa"].password, Password::Set);
        assert_eq!(shadow["daemon"].password, Password::Locked);
        assert_eq!(shadow["guest"].password, Password::Empty);
        assert_eq!(shadow["old"].expire_days, Some(19500));
        assert!(parse_shadow("short:line\n").is_empty());
        let groups = parse_group(GROUP);
        assert_eq!(groups[3].members, ["syslog", "kid"]);
        assert!(has_login_shell("/bin/bash") && !has_login_shell("/bin/false") && !has_login_shell(""));
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn last_logon_is_read_from_lastlog_records() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let mut record = vec![0u8; LASTLOG_RECORD as usize * 1001];
        let at = 1_785_000_000_i32;
        record[1000 * LASTLOG_RECORD as usize..][..4].copy_from_slice(&at.to_ne_bytes());
        file.write_all(&record).unwrap();
        assert_eq!(last_logon(file.path(), 1000).as_deref(), Some("2026-07-25T17:20:00Z"));
        assert_eq!(last_logon(file.path(), 0), None, "no record");
        assert_eq!(last_logon(file.path(), 5000), None, "past the end");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machine_lists_root() {
        let section = accounts_at(Path::new("/etc"), Some(Path::new(LASTLOG)), today()).unwrap();
        let root = by_name(&section).remove("root").expect("root is listed");
        assert_eq!(root["is_admin"], true);
        assert!(section["admins"].as_array().unwrap().contains(&json!("root")));
    }
}
