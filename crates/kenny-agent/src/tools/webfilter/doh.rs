//! Browsers' DNS-over-HTTPS goes around the hosts file, so `doh_policy: disable` turns it
//! off through the browsers' managed policies: registry policies on Windows, policy
//! files on Linux. Only what kenny set is undone on clear.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::tools::ToolError;
use crate::tools::shell::{powershell_json, powershell_literal};

const SCRIPT_LIMIT: Duration = Duration::from_secs(30);

/// Each browser's DoH state as its policy says: `off`, another mode name, or `not_set`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DohState {
    pub chrome: String,
    pub edge: String,
    pub firefox: String,
}

impl DohState {
    pub(super) fn to_json(&self) -> Value {
        json!({"chrome": self.chrome, "edge": self.edge, "firefox": self.firefox})
    }
}

const NOT_SET: &str = "not_set";

// ---- Linux: policy files -------------------------------------------------------------

/// Chromium-family browsers read every JSON file in their managed policy directory, so
/// kenny's own file can be added and removed without touching anyone else's.
const CHROMIUM_DIRS: &[(&str, &str)] = &[
    ("chrome", "etc/opt/chrome/policies/managed"),
    ("chromium", "etc/chromium/policies/managed"),
    ("edge", "etc/opt/edge/policies/managed"),
];
const OUR_FILE: &str = "kenny-webfilter.json";
/// Firefox reads a single shared file; kenny writes it only when there is none.
const FIREFOX_FILE: &str = "etc/firefox/policies/policies.json";

pub(super) fn chromium_policy() -> Value {
    json!({"DnsOverHttpsMode": "off"})
}

pub(super) fn firefox_policy() -> Value {
    json!({"policies": {"DNSOverHTTPS": {"Enabled": false, "Locked": true}}})
}

fn pretty(value: &Value) -> Vec<u8> {
    let mut text = serde_json::to_vec_pretty(value).unwrap_or_default();
    text.push(b'\n');
    text
}

fn write_policy(path: &Path, value: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    }
    if !path.exists() {
        // A new file readable by every browser user, whatever the agent's umask.
        std::fs::write(path, b"").map_err(|e| format!("could not create {}: {e}", path.display()))?;
        set_world_readable(path);
    }
    super::hosts::write_atomic(path, &pretty(value))
}

#[cfg(unix)]
fn set_world_readable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644));
}

#[cfg(not(unix))]
fn set_world_readable(_path: &Path) {}

/// Writes the policies; the note (if any) says what was left alone and why.
pub(super) fn linux_apply(root: &Path) -> Result<Option<String>, String> {
    for (_, dir) in CHROMIUM_DIRS {
        write_policy(&root.join(dir).join(OUR_FILE), &chromium_policy())?;
    }
    let firefox = root.join(FIREFOX_FILE);
    match std::fs::read(&firefox) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            write_policy(&firefox, &firefox_policy())?;
            Ok(None)
        }
        Err(e) => Err(format!("could not read {}: {e}", firefox.display())),
        Ok(bytes) if serde_json::from_slice::<Value>(&bytes).ok() == Some(firefox_policy()) => Ok(None),
        Ok(_) => Ok(Some(format!(
            "{} already exists with other policies, so kenny left it alone; add \"DNSOverHTTPS\": {{\"Enabled\": false, \"Locked\": true}} to its \"policies\" to cover Firefox",
            firefox.display()
        ))),
    }
}

/// Removes kenny's policy files; true when there was something to remove.
pub(super) fn linux_clear(root: &Path) -> Result<bool, String> {
    let mut removed = false;
    for (_, dir) in CHROMIUM_DIRS {
        let path = root.join(dir).join(OUR_FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("could not remove {}: {e}", path.display())),
        }
    }
    let firefox = root.join(FIREFOX_FILE);
    if let Ok(bytes) = std::fs::read(&firefox)
        && serde_json::from_slice::<Value>(&bytes).ok() == Some(firefox_policy())
    {
        std::fs::remove_file(&firefox).map_err(|e| format!("could not remove {}: {e}", firefox.display()))?;
        removed = true;
    }
    Ok(removed)
}

/// What the browsers' policies say now, whoever set them.
pub(super) fn linux_status(root: &Path) -> DohState {
    let chromium_mode = |dir: &str| -> String {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            return NOT_SET.to_owned();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .filter_map(|p| serde_json::from_slice::<Value>(&std::fs::read(p).ok()?).ok())
            .filter_map(|v| v.get("DnsOverHttpsMode")?.as_str().map(str::to_owned))
            .next_back()
            .unwrap_or_else(|| NOT_SET.to_owned())
    };
    let firefox = std::fs::read(root.join(FIREFOX_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|v| v.pointer("/policies/DNSOverHTTPS/Enabled").and_then(Value::as_bool))
        .map_or(NOT_SET, |enabled| if enabled { "on" } else { "off" });
    let chrome = chromium_mode(CHROMIUM_DIRS[0].1);
    let chrome = if chrome == NOT_SET {
        chromium_mode(CHROMIUM_DIRS[1].1)
    } else {
        chrome
    };
    DohState {
        chrome,
        edge: chromium_mode(CHROMIUM_DIRS[2].1),
        firefox: firefox.to_owned(),
    }
}

// ---- Windows: registry policies --------------------------------------------------------

const CHROME_KEY: &str = r"HKLM:\SOFTWARE\Policies\Google\Chrome";
const EDGE_KEY: &str = r"HKLM:\SOFTWARE\Policies\Microsoft\Edge";
const FIREFOX_KEY: &str = r"HKLM:\SOFTWARE\Policies\Mozilla\Firefox\DNSOverHTTPS";

/// (key, value name, data as text, registry type): what `disable` sets.
const REGISTRY_VALUES: &[(&str, &str, &str, &str)] = &[
    (CHROME_KEY, "DnsOverHttpsMode", "off", "String"),
    (EDGE_KEY, "DnsOverHttpsMode", "off", "String"),
    (FIREFOX_KEY, "Enabled", "0", "DWord"),
    (FIREFOX_KEY, "Locked", "1", "DWord"),
];

/// Creating a key only when missing: `New-Item -Force` on an existing registry key
/// would replace it and drop the other policies in it.
pub(super) fn windows_apply_script() -> String {
    let mut script = String::from(
        "$ErrorActionPreference = 'Stop'\n\
         function Set-KennyPolicy($Key, $Name, $Value, $Type) {\n\
         \x20   if (-not (Test-Path -LiteralPath $Key)) { New-Item -Path $Key -Force | Out-Null }\n\
         \x20   New-ItemProperty -LiteralPath $Key -Name $Name -Value $Value -PropertyType $Type -Force | Out-Null\n\
         }\n",
    );
    for (key, name, value, kind) in REGISTRY_VALUES {
        let value = if *kind == "DWord" {
            (*value).to_owned()
        } else {
            powershell_literal(value)
        };
        script.push_str(&format!(
            "Set-KennyPolicy {} {} {value} {}\n",
            powershell_literal(key),
            powershell_literal(name),
            powershell_literal(kind)
        ));
    }
    script.push_str("'{\"ok\":true}'\n");
    script
}

pub(super) fn windows_status_script() -> String {
    let mut script = String::from(
        "$ErrorActionPreference = 'Stop'\n\
         function Get-KennyPolicy($Key, $Name) {\n\
         \x20   $item = Get-ItemProperty -LiteralPath $Key -Name $Name -ErrorAction SilentlyContinue\n\
         \x20   if ($null -eq $item) { return $null }\n\
         \x20   return $item.$Name\n\
         }\n\
         [pscustomobject]@{\n",
    );
    for (field, key, name) in [
        ("chrome", CHROME_KEY, "DnsOverHttpsMode"),
        ("edge", EDGE_KEY, "DnsOverHttpsMode"),
        ("firefox_enabled", FIREFOX_KEY, "Enabled"),
    ] {
        script.push_str(&format!(
            "    {field} = Get-KennyPolicy {} {}\n",
            powershell_literal(key),
            powershell_literal(name)
        ));
    }
    script.push_str("} | ConvertTo-Json -Compress\n");
    script
}

/// Removes only values that still hold what kenny set.
pub(super) fn windows_clear_script() -> String {
    let mut script = String::from(
        "$ErrorActionPreference = 'Stop'\n\
         function Remove-KennyPolicy($Key, $Name, $Expected) {\n\
         \x20   $item = Get-ItemProperty -LiteralPath $Key -Name $Name -ErrorAction SilentlyContinue\n\
         \x20   if ($null -ne $item -and \"$($item.$Name)\" -eq $Expected) {\n\
         \x20       Remove-ItemProperty -LiteralPath $Key -Name $Name\n\
         \x20       return 1\n\
         \x20   }\n\
         \x20   return 0\n\
         }\n\
         $removed = 0\n",
    );
    for (key, name, value, _) in REGISTRY_VALUES {
        script.push_str(&format!(
            "$removed += Remove-KennyPolicy {} {} {}\n",
            powershell_literal(key),
            powershell_literal(name),
            powershell_literal(value)
        ));
    }
    script.push_str("[pscustomobject]@{ removed = $removed } | ConvertTo-Json -Compress\n");
    script
}

pub(super) fn parse_windows_status(value: &Value) -> DohState {
    let mode = |field: &str| match value.get(field) {
        Some(Value::String(s)) if !s.is_empty() => s.to_lowercase(),
        _ => NOT_SET.to_owned(),
    };
    let firefox = match value.get("firefox_enabled").and_then(Value::as_i64) {
        Some(0) => "off",
        Some(_) => "on",
        None => NOT_SET,
    };
    DohState {
        chrome: mode("chrome"),
        edge: mode("edge"),
        firefox: firefox.to_owned(),
    }
}

// ---- per OS ------------------------------------------------------------------------------

pub(super) async fn apply(ctx: &crate::tools::ToolContext) -> Result<Option<String>, ToolError> {
    if cfg!(windows) {
        powershell_json(
            "setting the DNS-over-HTTPS policies",
            &windows_apply_script(),
            SCRIPT_LIMIT,
        )
        .await?;
        return Ok(None);
    }
    let root = ctx.policy_root();
    super::run_blocking("writing the DNS-over-HTTPS policies", move || linux_apply(&root)).await
}

pub(super) async fn clear(ctx: &crate::tools::ToolContext) -> Result<bool, ToolError> {
    if cfg!(windows) {
        let out = powershell_json(
            "removing the DNS-over-HTTPS policies",
            &windows_clear_script(),
            SCRIPT_LIMIT,
        )
        .await?;
        return Ok(out.get("removed").and_then(Value::as_u64).unwrap_or(0) > 0);
    }
    let root = ctx.policy_root();
    super::run_blocking("removing the DNS-over-HTTPS policies", move || linux_clear(&root)).await
}

pub(super) async fn status(ctx: &crate::tools::ToolContext) -> Result<DohState, ToolError> {
    if cfg!(windows) {
        let out = powershell_json(
            "reading the DNS-over-HTTPS policies",
            &windows_status_script(),
            SCRIPT_LIMIT,
        )
        .await?;
        return Ok(parse_windows_status(&out));
    }
    let root = ctx.policy_root();
    super::run_blocking("reading the DNS-over-HTTPS policies", move || Ok(linux_status(&root))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_policies_are_written_read_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        assert_eq!(
            linux_status(root),
            DohState {
                chrome: "not_set".into(),
                edge: "not_set".into(),
                firefox: "not_set".into()
            }
        );
        assert_eq!(linux_apply(root), Ok(None));
        assert_eq!(
            linux_status(root),
            DohState {
                chrome: "off".into(),
                edge: "off".into(),
                firefox: "off".into()
            }
        );
        let chrome: Value = serde_json::from_slice(
            &std::fs::read(root.join("etc/opt/chrome/policies/managed/kenny-webfilter.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(chrome, json!({"DnsOverHttpsMode": "off"}));
        assert!(
            root.join("etc/chromium/policies/managed/kenny-webfilter.json")
                .is_file()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(root.join(FIREFOX_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644);
        }
        assert_eq!(linux_apply(root), Ok(None), "applying twice is fine");

        // Someone else's managed policy next to kenny's survives a clear.
        let other = root.join("etc/opt/chrome/policies/managed/corp.json");
        std::fs::write(&other, br#"{"HomepageLocation": "https://intranet.example"}"#).unwrap();
        assert_eq!(linux_clear(root), Ok(true));
        assert!(other.is_file());
        assert!(!root.join(FIREFOX_FILE).exists());
        assert_eq!(linux_status(root).chrome, "not_set");
        assert_eq!(linux_clear(root), Ok(false), "nothing left to clear");
    }

    #[test]
    fn an_existing_firefox_policy_file_is_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let firefox = root.join(FIREFOX_FILE);
        std::fs::create_dir_all(firefox.parent().unwrap()).unwrap();
        let theirs = b"{\"policies\": {\"DisableTelemetry\": true}}\n";
        std::fs::write(&firefox, theirs).unwrap();
        let note = linux_apply(root).unwrap().expect("a note about Firefox");
        assert!(note.contains("left it alone"), "{note}");
        assert_eq!(std::fs::read(&firefox).unwrap(), theirs);
        assert_eq!(linux_status(root).firefox, "not_set");
        assert_eq!(linux_clear(root), Ok(true));
        assert_eq!(
            std::fs::read(&firefox).unwrap(),
            theirs,
            "clear does not remove it either"
        );
    }

    #[test]
    fn windows_scripts_set_read_and_remove_exactly_the_policies() {
        let apply = windows_apply_script();
        assert!(
            apply
                .contains(r"Set-KennyPolicy 'HKLM:\SOFTWARE\Policies\Google\Chrome' 'DnsOverHttpsMode' 'off' 'String'"),
            "{apply}"
        );
        assert!(
            apply.contains(
                r"Set-KennyPolicy 'HKLM:\SOFTWARE\Policies\Microsoft\Edge' 'DnsOverHttpsMode' 'off' 'String'"
            )
        );
        assert!(
            apply.contains(
                r"Set-KennyPolicy 'HKLM:\SOFTWARE\Policies\Mozilla\Firefox\DNSOverHTTPS' 'Enabled' 0 'DWord'"
            )
        );
        assert!(
            apply
                .contains(r"Set-KennyPolicy 'HKLM:\SOFTWARE\Policies\Mozilla\Firefox\DNSOverHTTPS' 'Locked' 1 'DWord'")
        );
        assert!(
            apply.contains("if (-not (Test-Path -LiteralPath $Key)) { New-Item"),
            "keys are created only when missing"
        );
        assert!(apply.starts_with("$ErrorActionPreference = 'Stop'"));
        assert!(apply.trim_end().ends_with("'{\"ok\":true}'"));

        let status = windows_status_script();
        assert!(
            status.contains(r"chrome = Get-KennyPolicy 'HKLM:\SOFTWARE\Policies\Google\Chrome' 'DnsOverHttpsMode'")
        );
        assert!(status.contains(
            r"firefox_enabled = Get-KennyPolicy 'HKLM:\SOFTWARE\Policies\Mozilla\Firefox\DNSOverHTTPS' 'Enabled'"
        ));
        assert!(status.contains("ConvertTo-Json -Compress"));

        let clear = windows_clear_script();
        assert!(clear.contains(
            r"$removed += Remove-KennyPolicy 'HKLM:\SOFTWARE\Policies\Microsoft\Edge' 'DnsOverHttpsMode' 'off'"
        ));
        assert!(clear.contains(
            r"$removed += Remove-KennyPolicy 'HKLM:\SOFTWARE\Policies\Mozilla\Firefox\DNSOverHTTPS' 'Locked' '1'"
        ));
        assert!(clear.contains("-eq $Expected"), "only kenny's values are removed");
        for script in [&apply, &status, &clear] {
            assert!(!script.contains("Remove-Item "), "no key is ever deleted wholesale");
        }
    }

    #[test]
    fn windows_status_output_is_read() {
        // ConvertTo-Json -Compress of the status object, as recorded.
        let set: Value = serde_json::from_str(r#"{"chrome":"off","edge":"off","firefox_enabled":0}"#).unwrap();
        assert_eq!(
            parse_windows_status(&set),
            DohState {
                chrome: "off".into(),
                edge: "off".into(),
                firefox: "off".into()
            }
        );
        let unset: Value = serde_json::from_str(r#"{"chrome":null,"edge":"automatic","firefox_enabled":1}"#).unwrap();
        assert_eq!(
            parse_windows_status(&unset),
            DohState {
                chrome: "not_set".into(),
                edge: "automatic".into(),
                firefox: "on".into()
            }
        );
    }
}
