//! The browser_extensions section: the extensions installed in every user's Chrome, Chromium, Edge, Brave and Firefox profiles.
//!
//! Pure file reads, the same on Windows and Linux (see [`browsers`] for where profiles
//! are). Chromium family: the profile's `Preferences` and `Secure Preferences` JSON
//! (`extensions.settings`: id → location, state/disable_reasons, and on older versions
//! the manifest), names and versions from `Extensions/<id>/<version>/manifest.json`,
//! with `__MSG_name__` resolved through `_locales/<default_locale>/messages.json`.
//! Firefox: the profile's `extensions.json` (`addons` of type `extension`).
//! Built-in extensions (Chromium's component extensions, Firefox's `app-builtin` and
//! `app-system-*` add-ons) are left out: they ship with the browser.
//!
//! Informational: always `ok`; the server and the admin judge what is installed.

pub(in crate::tools::telemetry) mod browsers;

use std::fs;
use std::path::Path;

use serde_json::{Map, Value, json};

use self::browsers::{Family, Profile, capped};
use super::files::read_user_text as read_text;
use super::{Outcome, Section, Status};

const MAX_LISTED: usize = 200;
const MAX_ERRORS: usize = 20;
/// Preferences of a heavily used profile are a few MB.
const PREFS_CAP: u64 = 16 * 1024 * 1024;
const MANIFEST_CAP: u64 = 1024 * 1024;
/// Chromium's `Manifest::Location` values of extensions that are part of the browser.
const COMPONENT_LOCATIONS: &[i64] = &[5, 10];
/// Firefox add-on locations of add-ons that ship with the browser.
const FIREFOX_BUILTIN: &[&str] = &[
    "app-builtin",
    "app-system-defaults",
    "app-system-addons",
    "app-system-share",
];

#[derive(Debug, Clone, PartialEq)]
struct Extension {
    id: String,
    name: Option<String>,
    version: Option<String>,
    enabled: Option<bool>,
}

pub(super) async fn section() -> Outcome {
    super::off_thread("browser_extensions", collect)
        .await
        .map_err(|e| format!("reading browser profiles failed: {e}"))
}

/// Reading every profile may take this long; the profiles left are named in `errors`.
const READ_TIME: std::time::Duration = std::time::Duration::from_secs(5);

fn collect() -> Section {
    let (profiles, errors) = browsers::profiles();
    build(&profiles, errors, std::time::Instant::now() + READ_TIME)
}

fn build(profiles: &[Profile], mut errors: Vec<String>, deadline: std::time::Instant) -> Section {
    let mut listed = Vec::new();
    let mut read = 0;
    for (at, profile) in profiles.iter().enumerate() {
        if std::time::Instant::now() > deadline {
            errors.push(format!(
                "stopped after {}s; {} profiles not read",
                READ_TIME.as_secs(),
                profiles.len() - at
            ));
            break;
        }
        let found = match profile.family {
            Family::Chromium => chromium_extensions(&profile.dir),
            Family::Firefox => firefox_extensions(&profile.dir),
        };
        match found {
            Ok(extensions) => {
                read += 1;
                listed.extend(extensions.into_iter().map(|ext| (profile, ext)));
            }
            Err(why) => errors.push(format!(
                "{} profile {} of {}: {why}",
                profile.browser, profile.name, profile.user
            )),
        }
    }
    let count = listed.len();
    let mut browsers: Vec<&str> = listed.iter().map(|(p, _)| p.browser).collect();
    browsers.sort_unstable();
    browsers.dedup();
    let summary = match (count, profiles.len()) {
        (_, 0) => "no browser profiles found".to_owned(),
        (0, n) => format!("no extensions in {n} browser profile{}", plural(n)),
        (n, _) => format!(
            "{n} extension{} across {} browser{}",
            plural(n),
            browsers.len(),
            plural(browsers.len())
        ),
    };
    let summary = if errors.is_empty() {
        summary
    } else {
        format!("{summary}; {} profile{} unreadable", errors.len(), plural(errors.len()))
    };
    let extensions: Vec<Value> = listed
        .iter()
        .take(MAX_LISTED)
        .map(|(p, ext)| {
            json!({
                "browser": p.browser,
                "user": capped(&p.user),
                "profile": capped(&p.name),
                "id": capped(&ext.id),
                "name": ext.name.as_deref().map(capped),
                "version": ext.version.as_deref().map(capped),
                "enabled": ext.enabled,
            })
        })
        .collect();
    errors.truncate(MAX_ERRORS);
    let errors: Vec<String> = errors.iter().map(|e| capped(e)).collect();
    super::section(
        Status::Ok,
        summary,
        json!({
            "extensions": extensions,
            "count": count,
            "truncated": count > MAX_LISTED,
            "profiles_read": read,
            "errors": errors,
        }),
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A profile's extensions from its preference files, or from its `Extensions` folder
/// when neither file has the list (then whether each is enabled is unknown).
fn chromium_extensions(profile: &Path) -> Result<Vec<Extension>, String> {
    let mut settings = Map::new();
    let mut any_file = false;
    for file in ["Preferences", "Secure Preferences"] {
        let text = match read_text(&profile.join(file), PREFS_CAP) {
            Ok((_, true)) => return Err(format!("{file} is larger than {PREFS_CAP} bytes")),
            Ok((text, false)) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {file} ({e})")),
        };
        any_file = true;
        let prefs: Value = serde_json::from_str(&text).map_err(|e| format!("{file} is not JSON ({e})"))?;
        if let Some(Value::Object(found)) = prefs.pointer("/extensions/settings") {
            merge_settings(&mut settings, found);
        }
    }
    let extensions_dir = profile.join("Extensions");
    if settings.is_empty() {
        if !any_file && !extensions_dir.is_dir() {
            return Err("no Preferences file".to_owned());
        }
        return Ok(installed_ids(&extensions_dir)
            .into_iter()
            .map(|id| {
                let (name, version) = from_manifest(&extensions_dir, &id, None);
                Extension {
                    id,
                    name,
                    version,
                    enabled: None,
                }
            })
            .collect());
    }
    Ok(settings
        .iter()
        .filter_map(|(id, entry)| chromium_entry(&extensions_dir, id, entry))
        .collect())
}

/// Newer Chromium keeps some keys of an extension in `Secure Preferences` and the rest
/// in `Preferences`: one entry is the union of both.
fn merge_settings(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (id, entry) in from {
        match (into.get_mut(id), entry) {
            (Some(Value::Object(have)), Value::Object(more)) => {
                for (key, value) in more {
                    have.insert(key.clone(), value.clone());
                }
            }
            _ => {
                into.insert(id.clone(), entry.clone());
            }
        }
    }
}

fn chromium_entry(extensions_dir: &Path, id: &str, entry: &Value) -> Option<Extension> {
    let location = entry.get("location").and_then(Value::as_i64);
    if location.is_some_and(|l| COMPONENT_LOCATIONS.contains(&l)) {
        return None;
    }
    // Themes and hosted apps are not extensions; their manifests say so when stored.
    let manifest = entry.get("manifest");
    if manifest.and_then(|m| m.get("theme")).is_some() {
        return None;
    }
    let stored_path = entry.get("path").and_then(Value::as_str);
    let (mut name, mut version) = from_manifest(extensions_dir, id, stored_path);
    if let Some(manifest) = manifest {
        let text_of = |key: &str| manifest.get(key).and_then(Value::as_str).map(str::to_owned);
        name = name.or_else(|| text_of("name").filter(|n| !n.starts_with("__MSG_")));
        version = version.or_else(|| text_of("version"));
    }
    if name.is_none() && version.is_none() && location.is_none() {
        // A settings entry for an extension never installed here (a synced
        // preference of a removed one).
        return None;
    }
    Some(Extension {
        id: id.to_owned(),
        name,
        version,
        enabled: Some(chromium_enabled(entry)),
    })
}

/// `state` (1 enabled, 0 disabled) on older versions; newer ones drop it and list
/// `disable_reasons` only for a disabled extension.
fn chromium_enabled(entry: &Value) -> bool {
    if let Some(state) = entry.get("state").and_then(Value::as_i64) {
        return state == 1;
    }
    match entry.get("disable_reasons") {
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        Some(Value::Array(reasons)) => reasons.is_empty(),
        _ => true,
    }
}

/// A Chromium extension id: 32 letters a to p.
fn is_chromium_id(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

fn installed_ids(extensions_dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(extensions_dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| is_chromium_id(name))
        .collect();
    ids.sort();
    ids
}

/// Name and version from the installed manifest: the version folder the preferences
/// name (`<id>/<version>`), else the highest one present.
fn from_manifest(extensions_dir: &Path, id: &str, stored_path: Option<&str>) -> (Option<String>, Option<String>) {
    // The id and the version come from the user's preferences file: only a real
    // extension id and a plain folder name may become part of a path.
    if !is_chromium_id(id) {
        return (None, None);
    }
    let id_dir = extensions_dir.join(id);
    let version_dir = stored_path
        .and_then(|p| p.rsplit(['/', '\\']).next())
        .filter(|v| !v.is_empty() && v != &".." && v != &"." && !v.contains(':'))
        .map(|v| id_dir.join(v))
        .filter(|d| d.is_dir())
        .or_else(|| newest_version_dir(&id_dir));
    let Some(dir) = version_dir else {
        return (None, None);
    };
    let Ok((text, false)) = read_text(&dir.join("manifest.json"), MANIFEST_CAP) else {
        return (None, None);
    };
    let Ok(manifest) = serde_json::from_str::<Value>(text.trim_start_matches('\u{feff}')) else {
        return (None, None);
    };
    let raw_name = manifest.get("name").and_then(Value::as_str);
    let name = raw_name.and_then(|n| localised(&dir, &manifest, n));
    let version = manifest.get("version").and_then(Value::as_str).map(str::to_owned);
    (name, version)
}

fn newest_version_dir(id_dir: &Path) -> Option<std::path::PathBuf> {
    let entries = fs::read_dir(id_dir).ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .max_by_key(|p| version_key(p.file_name().and_then(|n| n.to_str()).unwrap_or("")))
}

/// `1.58.0_0` → [1, 58, 0, 0], so 1.10 sorts after 1.9.
fn version_key(folder: &str) -> Vec<u64> {
    folder.split(['.', '_']).map(|part| part.parse().unwrap_or(0)).collect()
}

/// A manifest name as people see it: `__MSG_appName__` looked up (case-insensitively,
/// as Chromium does) in the default locale's messages.
fn localised(dir: &Path, manifest: &Value, name: &str) -> Option<String> {
    let Some(key) = name.strip_prefix("__MSG_").and_then(|k| k.strip_suffix("__")) else {
        return Some(name.to_owned());
    };
    let locale = manifest.get("default_locale").and_then(Value::as_str)?;
    let path = dir.join("_locales").join(locale).join("messages.json");
    let (text, _) = read_text(&path, MANIFEST_CAP).ok()?;
    let messages: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok()?;
    messages
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .and_then(|(_, v)| v.get("message")?.as_str())
        .map(str::to_owned)
}

/// A Firefox profile's extensions; a profile that never installed one has no
/// `extensions.json`.
fn firefox_extensions(profile: &Path) -> Result<Vec<Extension>, String> {
    let text = match read_text(&profile.join("extensions.json"), PREFS_CAP) {
        Ok((_, true)) => return Err(format!("extensions.json is larger than {PREFS_CAP} bytes")),
        Ok((text, false)) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read extensions.json ({e})")),
    };
    let parsed: Value = serde_json::from_str(&text).map_err(|e| format!("extensions.json is not JSON ({e})"))?;
    let addons = parsed
        .get("addons")
        .and_then(Value::as_array)
        .ok_or("extensions.json has no `addons` list")?;
    Ok(addons.iter().filter_map(firefox_addon).collect())
}

fn firefox_addon(addon: &Value) -> Option<Extension> {
    let text_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    if addon.get("type").and_then(Value::as_str) != Some("extension") {
        return None;
    }
    let location = addon.get("location").and_then(Value::as_str).unwrap_or_default();
    if FIREFOX_BUILTIN.contains(&location) {
        return None;
    }
    let name = addon
        .get("defaultLocale")
        .and_then(|l| text_of(l, "name"))
        .or_else(|| text_of(addon, "name"));
    Some(Extension {
        id: text_of(addon, "id")?,
        name,
        version: text_of(addon, "version"),
        enabled: addon.get("active").and_then(Value::as_bool),
    })
}

#[cfg(test)]
mod tests {
    use super::browsers::{profiles_of, user_homes};
    use super::*;
    use crate::tools::telemetry::files::put;

    fn later() -> std::time::Instant {
        std::time::Instant::now() + std::time::Duration::from_secs(60)
    }

    fn testdata() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/browsers")
    }

    #[test]
    fn recorded_linux_profiles_give_every_installed_extension() {
        let homes = user_homes(&testdata().join("linux"));
        let (profiles, errors) = profiles_of(&homes, false);
        let got = Value::Object(build(&profiles, errors, later()));
        let expected = json!({
            "status": "ok",
            "summary": "5 extensions across 3 browsers",
            "extensions": [
                {"browser": "chrome", "user": "alice", "profile": "Default", "id": "cjpalhdlnbpafiamejdnhcphjbkeiagm",
                 "name": "uBlock Origin", "version": "1.58.0", "enabled": true},
                {"browser": "chrome", "user": "alice", "profile": "Default", "id": "nngceckbapebfimnlniiiahkandclblb",
                 "name": "Bitwarden Password Manager", "version": "2024.6.3", "enabled": false},
                {"browser": "brave", "user": "alice", "profile": "Profile 1", "id": "aapbdbdomjkkjkaonfhkkikfgjllcleb",
                 "name": "Google Translate", "version": "2.0.13", "enabled": true},
                {"browser": "firefox", "user": "bob", "profile": "k2x9mq7a.default-release", "id": "uBlock0@raymondhill.net",
                 "name": "uBlock Origin", "version": "1.58.0", "enabled": true},
                {"browser": "firefox", "user": "bob", "profile": "k2x9mq7a.default-release", "id": "{446900e4-71c2-419f-a6a7-df9c091e268b}",
                 "name": "Bitwarden Password Manager", "version": "2024.6.2", "enabled": false}
            ],
            "count": 5,
            "truncated": false,
            // bob's second Firefox profile never installed an add-on: read, none.
            "profiles_read": 4,
            "errors": []
        });
        assert_eq!(got, expected, "{got:#}");
    }

    #[test]
    fn recorded_windows_profiles_read_secure_preferences_and_the_extensions_folder() {
        let homes = user_homes(&testdata().join("windows"));
        let (profiles, errors) = profiles_of(&homes, true);
        let got = Value::Object(build(&profiles, errors, later()));
        assert_eq!(
            got["summary"], "2 extensions across 1 browser; 1 profile unreadable",
            "{got:#}"
        );
        assert_eq!(
            got["extensions"],
            json!([
                {"browser": "edge", "user": "Carol", "profile": "Default", "id": "odfafepnkmbhccpbejgmiehpchacaeak",
                 "name": "uBlock Origin", "version": "1.58.0", "enabled": true},
                {"browser": "edge", "user": "Carol", "profile": "Profile 2", "id": "ghbmnnjooekpmoecnnnilnnbdlolhkhi",
                 "name": "Google Docs Offline", "version": "1.81.1", "enabled": null}
            ]),
            "{got:#}"
        );
        assert_eq!(got["profiles_read"], 2);
        let errors = got["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .as_str()
                .unwrap()
                .starts_with("chrome profile Default of Carol: Preferences is not JSON"),
            "{errors:?}"
        );
    }

    #[test]
    fn lists_are_capped_and_text_from_the_pc_is_cut() {
        let root = tempfile::tempdir().unwrap();
        let mut settings = Map::new();
        for n in 0..(MAX_LISTED + 5) {
            let id = format!("{:a>32}", n.to_string().replace(|c: char| c.is_ascii_digit(), "b"));
            let id = format!("{id}{n}");
            settings.insert(
                id,
                json!({"location": 1, "state": 1, "manifest": {"name": "x".repeat(500), "version": "1"}}),
            );
        }
        let prefs = json!({"extensions": {"settings": settings}});
        put(
            root.path(),
            "dave/.config/chromium/Default/Preferences",
            prefs.to_string().as_bytes(),
        )
        .unwrap();
        let (profiles, errors) = profiles_of(&user_homes(root.path()), false);
        let late = build(&profiles, errors.clone(), std::time::Instant::now());
        assert_eq!(late["count"], 0, "past the deadline nothing more is read");
        assert!(late["errors"].to_string().contains("1 profiles not read"), "{late:?}");
        let got = build(&profiles, errors, later());
        assert_eq!(got["count"], MAX_LISTED + 5);
        assert_eq!(got["truncated"], true);
        let listed = got["extensions"].as_array().unwrap();
        assert_eq!(listed.len(), MAX_LISTED);
        assert_eq!(listed[0]["name"].as_str().unwrap().chars().count(), browsers::MAX_TEXT);
    }

    #[test]
    fn no_profiles_is_said_plainly() {
        let got = build(&[], Vec::new(), later());
        assert_eq!(got["summary"], "no browser profiles found");
        assert_eq!(got["status"], "ok");
        assert_eq!(got["count"], 0);
    }

    #[test]
    fn enabled_follows_state_or_disable_reasons() {
        assert!(chromium_enabled(&json!({"state": 1})));
        assert!(!chromium_enabled(&json!({"state": 0, "disable_reasons": 1})));
        assert!(!chromium_enabled(&json!({"disable_reasons": [1]})));
        assert!(!chromium_enabled(&json!({"disable_reasons": 8192})));
        assert!(chromium_enabled(&json!({"disable_reasons": []})));
        assert!(chromium_enabled(&json!({"location": 1})));
        assert!(version_key("1.10.0_0") > version_key("1.9.3_0"));
    }

    #[test]
    fn the_real_collector_reads_this_pc() {
        let got = collect();
        assert_eq!(got["status"], "ok");
        assert!(got["extensions"].is_array() && got["count"].is_u64(), "{got:?}");
        assert!(got["profiles_read"].is_u64() && got["errors"].is_array(), "{got:?}");
    }
}
