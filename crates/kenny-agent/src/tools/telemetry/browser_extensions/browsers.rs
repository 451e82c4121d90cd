//! Where browser profiles are on this PC: every user's Chromium-family (Chrome, Chromium, Edge, Brave) and Firefox profiles, for `browser_extensions` and `web_activity`.
//!
//! Users are the folders of the home root: `/home` (plus `/root`) on Linux, `C:\Users`
//! on Windows, where the agent runs as SYSTEM and reads every user's `AppData`.
//! `KENNY_HOME_ROOT` stands in for that root (then `/root` is not added), so tests build
//! a fake tree. The walk is bounded: at most [`MAX_USERS`] users and [`MAX_PROFILES`]
//! profiles, and only the few fixed places each browser uses.

use std::fs;
use std::path::{Path, PathBuf};

use crate::tools::telemetry::files::{read_user_text as read_text, root_from_env};

const MAX_USERS: usize = 100;
pub(in crate::tools::telemetry) const MAX_PROFILES: usize = 60;
/// `profiles.ini` is a few hundred bytes; anything far larger is not one.
const INI_CAP: u64 = 256 * 1024;
/// What a name read from a PC may be, in characters, before it reaches the dashboard.
pub(in crate::tools::telemetry) const MAX_TEXT: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::tools::telemetry) enum Family {
    Chromium,
    Firefox,
}

/// One browser profile of one user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::tools::telemetry) struct Profile {
    pub browser: &'static str,
    pub family: Family,
    pub user: String,
    /// The profile's folder name (`Default`, `Profile 2`, `abcd1234.default-release`).
    pub name: String,
    pub dir: PathBuf,
}

/// Where each Chromium-family browser keeps its `User Data`, below a user's home.
const CHROMIUM_LINUX: &[(&str, &str)] = &[
    ("chrome", ".config/google-chrome"),
    ("chromium", ".config/chromium"),
    ("chromium", "snap/chromium/common/chromium"),
    ("edge", ".config/microsoft-edge"),
    ("brave", ".config/BraveSoftware/Brave-Browser"),
];
const CHROMIUM_WINDOWS: &[(&str, &str)] = &[
    ("chrome", "AppData/Local/Google/Chrome/User Data"),
    ("chromium", "AppData/Local/Chromium/User Data"),
    ("edge", "AppData/Local/Microsoft/Edge/User Data"),
    ("brave", "AppData/Local/BraveSoftware/Brave-Browser/User Data"),
];
/// Folders holding Firefox's `profiles.ini`, below a user's home.
const FIREFOX_LINUX: &[&str] = &[
    ".mozilla/firefox",
    "snap/firefox/common/.mozilla/firefox",
    ".var/app/org.mozilla.firefox/.mozilla/firefox",
];
const FIREFOX_WINDOWS: &[&str] = &["AppData/Roaming/Mozilla/Firefox"];

/// Folders of `C:\Users` that are not people.
const NOT_USERS: &[&str] = &["public", "default", "default user", "all users", "defaultapppool"];

/// Every profile of every user on this PC, and what could not be read.
pub(in crate::tools::telemetry) fn profiles() -> (Vec<Profile>, Vec<String>) {
    let windows = cfg!(windows);
    let default = if windows {
        let drive = std::env::var("SystemDrive").unwrap_or_else(|_| "C:".to_owned());
        format!(r"{drive}\Users")
    } else {
        "/home".to_owned()
    };
    let overridden = std::env::var_os("KENNY_HOME_ROOT").is_some_and(|v| !v.is_empty());
    let root = root_from_env("KENNY_HOME_ROOT", &default);
    let mut homes = user_homes(&root);
    if !windows && !overridden && Path::new("/root").is_dir() {
        homes.push(("root".to_owned(), PathBuf::from("/root")));
    }
    profiles_of(&homes, windows)
}

/// The user folders below `root`, by name, skipping the shared ones of Windows.
pub(in crate::tools::telemetry) fn user_homes(root: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut homes: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .filter(|(name, _)| !NOT_USERS.contains(&name.to_ascii_lowercase().as_str()))
        .collect();
    homes.sort();
    homes.truncate(MAX_USERS);
    homes
}

/// The profiles in these homes, laid out as on Windows (`AppData`) or Linux.
pub(in crate::tools::telemetry) fn profiles_of(
    homes: &[(String, PathBuf)],
    windows: bool,
) -> (Vec<Profile>, Vec<String>) {
    let (chromium, firefox) = if windows {
        (CHROMIUM_WINDOWS, FIREFOX_WINDOWS)
    } else {
        (CHROMIUM_LINUX, FIREFOX_LINUX)
    };
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for (user, home) in homes {
        for (browser, place) in chromium {
            found.extend(chromium_profiles(browser, user, &home.join(place)));
        }
        for place in firefox {
            match firefox_profiles(user, &home.join(place)) {
                Ok(list) => found.extend(list),
                Err(why) => errors.push(why),
            }
        }
    }
    if found.len() > MAX_PROFILES {
        errors.push(format!(
            "{} browser profiles; only the first {MAX_PROFILES} are read",
            found.len()
        ));
        found.truncate(MAX_PROFILES);
    }
    (found, errors)
}

/// `Default` and `Profile N` in a Chromium `User Data` folder (not `Guest Profile` or
/// `System Profile`, which keep no extensions or history of a person).
fn chromium_profiles(browser: &'static str, user: &str, user_data: &Path) -> Vec<Profile> {
    let Ok(entries) = fs::read_dir(user_data) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name == "Default" || name.starts_with("Profile "))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| Profile {
            browser,
            family: Family::Chromium,
            user: user.to_owned(),
            dir: user_data.join(&name),
            name,
        })
        .collect()
}

/// The profiles `profiles.ini` lists, relative paths resolved against its folder.
fn firefox_profiles(user: &str, base: &Path) -> Result<Vec<Profile>, String> {
    let ini = base.join("profiles.ini");
    let text = match read_text(&ini, INI_CAP) {
        Ok((text, _)) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("firefox of {user}: cannot read profiles.ini ({e})")),
    };
    Ok(parse_profiles_ini(&text)
        .into_iter()
        .filter_map(|(path, relative)| {
            let dir = if relative {
                base.join(&path)
            } else {
                PathBuf::from(&path)
            };
            let name = dir.file_name()?.to_string_lossy().into_owned();
            dir.is_dir().then(|| Profile {
                browser: "firefox",
                family: Family::Firefox,
                user: user.to_owned(),
                name,
                dir,
            })
        })
        .collect())
}

/// `(Path, IsRelative)` of every `[ProfileN]` section; Firefox writes relative paths
/// with `/` on every OS.
pub(in crate::tools::telemetry) fn parse_profiles_ini(text: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let mut in_profile = false;
    let mut path: Option<String> = None;
    let mut relative = true;
    let mut flush = |path: &mut Option<String>, relative: bool| {
        if let Some(p) = path.take() {
            found.push((p, relative));
        }
    };
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            flush(&mut path, relative);
            in_profile = line.starts_with("[Profile");
            relative = true;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !in_profile {
            continue;
        }
        match key.trim() {
            "Path" => path = Some(value.trim().to_owned()),
            "IsRelative" => relative = value.trim() != "0",
            _ => {}
        }
    }
    flush(&mut path, relative);
    found
}

/// `text` cut to [`MAX_TEXT`] characters: names and ids come from files any user or
/// extension author writes.
pub(in crate::tools::telemetry) fn capped(text: &str) -> String {
    super::super::format::clip(text, MAX_TEXT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::telemetry::files::put;

    #[test]
    fn profiles_ini_lists_relative_and_absolute_profiles() {
        let ini = "[Install4F96D1932A9F858E]\nDefault=Profiles/x.default-release\nLocked=1\n\n\
                   [Profile1]\nName=default\nIsRelative=1\nPath=Profiles/abcd1234.default\nDefault=1\n\n\
                   [Profile0]\nName=default-release\nIsRelative=0\nPath=/data/ff/efgh5678.default-release\n\n\
                   [General]\nStartWithLastProfile=1\nVersion=2\n";
        assert_eq!(
            parse_profiles_ini(ini),
            vec![
                ("Profiles/abcd1234.default".to_owned(), true),
                ("/data/ff/efgh5678.default-release".to_owned(), false)
            ]
        );
    }

    #[test]
    fn finds_chromium_and_firefox_profiles_per_user() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path();
        put(home, "alice/.config/google-chrome/Default/Preferences", b"{}").unwrap();
        put(home, "alice/.config/google-chrome/Profile 1/Preferences", b"{}").unwrap();
        put(home, "alice/.config/google-chrome/Guest Profile/Preferences", b"{}").unwrap();
        put(home, "alice/.config/google-chrome/Crashpad/settings.dat", b"").unwrap();
        put(
            home,
            "bob/.mozilla/firefox/profiles.ini",
            b"[Profile0]\nName=default\nIsRelative=1\nPath=k2x9.default-release\n[Profile1]\nIsRelative=1\nPath=gone.old\n",
        ).unwrap();
        put(home, "bob/.mozilla/firefox/k2x9.default-release/prefs.js", b"").unwrap();
        put(
            home,
            "Public/AppData/Local/Google/Chrome/User Data/Default/Preferences",
            b"{}",
        )
        .unwrap();
        let homes = user_homes(home);
        assert_eq!(
            homes.iter().map(|(u, _)| u.as_str()).collect::<Vec<_>>(),
            ["alice", "bob"]
        );
        let (found, errors) = profiles_of(&homes, false);
        assert!(errors.is_empty(), "{errors:?}");
        let listed: Vec<_> = found
            .iter()
            .map(|p| (p.browser, p.user.as_str(), p.name.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                ("chrome", "alice", "Default"),
                ("chrome", "alice", "Profile 1"),
                ("firefox", "bob", "k2x9.default-release")
            ]
        );
        assert_eq!(found[2].dir, home.join("bob/.mozilla/firefox/k2x9.default-release"));
    }

    #[test]
    fn profiles_past_the_cap_are_left_and_said() {
        let root = tempfile::tempdir().unwrap();
        for n in 0..=MAX_PROFILES {
            put(
                root.path(),
                &format!("erin/.config/chromium/Profile {n}/Preferences"),
                b"{}",
            )
            .unwrap();
        }
        let (found, errors) = profiles_of(&user_homes(root.path()), false);
        assert_eq!(found.len(), MAX_PROFILES);
        assert_eq!(
            errors,
            [format!(
                "{} browser profiles; only the first {MAX_PROFILES} are read",
                MAX_PROFILES + 1
            )]
        );
    }

    #[test]
    fn windows_layout_is_read_below_appdata() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path();
        put(
            home,
            "carol/AppData/Local/Microsoft/Edge/User Data/Default/Preferences",
            b"{}",
        )
        .unwrap();
        put(
            home,
            "carol/AppData/Roaming/Mozilla/Firefox/profiles.ini",
            b"[Profile0]\r\nName=default-release\r\nIsRelative=1\r\nPath=Profiles/zz.default-release\r\n",
        )
        .unwrap();
        put(
            home,
            "carol/AppData/Roaming/Mozilla/Firefox/Profiles/zz.default-release/times.json",
            b"{}",
        )
        .unwrap();
        let (found, _) = profiles_of(&user_homes(home), true);
        let listed: Vec<_> = found.iter().map(|p| (p.browser, p.name.as_str())).collect();
        assert_eq!(listed, [("edge", "Default"), ("firefox", "zz.default-release")]);
    }
}
