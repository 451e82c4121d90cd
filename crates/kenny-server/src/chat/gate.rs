//! Which chat calls run at once and which wait for the operator.
//!
//! Tool output is written by the PC, and a PC can be made to say anything (one line in
//! a log file is enough), so the model must be assumed steerable by what it reads. The
//! gate therefore lets through, unasked, only what such a model could not turn against
//! the operator: reading, on the PC the conversation is about, things that are not
//! personal, without sending anything anywhere. Everything else waits for a human.

use kenny_proto::args::PERSONAL_TELEMETRY_SECTIONS;
use kenny_proto::catalog::{Tool, ToolSpec};
use serde_json::Value;

/// Why a call waits for approval, or `None` if it may run at once. `args` are the
/// call's arguments as the model wrote them.
pub fn hold_reason(spec: &ToolSpec, args: &Value, target: &str, selected: Option<&str>) -> Option<String> {
    if !spec.read_only() {
        return Some("it changes the PC".into());
    }
    if selected != Some(target) {
        return Some(match selected {
            Some(s) => format!("it runs on {target}, not on this conversation's PC ({s})"),
            None => format!("it runs on {target} and this conversation has no PC selected"),
        });
    }
    if spec.reaches_out {
        return Some("it contacts a host named in the call, which could carry data off the PC".into());
    }
    let path = spec
        .takes(PATH_ARG)
        .then(|| args.get(PATH_ARG))
        .flatten()
        .filter(|p| !p.is_null());
    if let Some(path) = path.and_then(Value::as_str).filter(|p| is_network_path(p)) {
        return Some(format!(
            "it names the network path {path:?}: opening it makes the PC contact that host (and send its Windows credentials there)"
        ));
    }
    if spec.privacy_sensitive {
        return Some("it reads personal data (files, the screen or command lines)".into());
    }
    if let Some(personal) = personal_sections(spec, args) {
        return Some(format!(
            "it reads personal data ({personal}: what the PC's users do on it)"
        ));
    }
    // A path the model picked can be one the operator never mentioned, and the names
    // under it (file and folder names) are personal too.
    if path.is_some() {
        return Some("it reads a path on the PC (file and folder names are personal data)".into());
    }
    None
}

/// The personal telemetry sections a `telemetry_collect` call names, if any.
fn personal_sections(spec: &ToolSpec, args: &Value) -> Option<String> {
    if spec.tool != Tool::TelemetryCollect {
        return None;
    }
    let named: Vec<&str> = args
        .get("sections")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_str)
        .filter(|name| PERSONAL_TELEMETRY_SECTIONS.contains(name))
        .collect();
    (!named.is_empty()).then(|| named.join(", "))
}

/// The argument every file tool takes its path in.
const PATH_ARG: &str = "path";

/// A UNC or other network path (`\\server\share`, `//server/share`, `\\?\UNC\...`),
/// or a device or NT-namespace path (`\\.\pipe\...`, `\??\...`) that can lead to one. Any
/// path starting with two separators counts, whichever way they lean, since Windows
/// reads both as separators.
fn is_network_path(path: &str) -> bool {
    let mut leading = path.trim_start().chars().map(|c| c == '\\' || c == '/');
    let two_separators = leading.next() == Some(true) && leading.next() == Some(true);
    two_separators || path.trim_start().starts_with("\\??\\")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::catalog::{TOOLS, find};
    use serde_json::json;

    fn gate(tool: &str, target: &str, selected: Option<&str>) -> Option<String> {
        gate_args(tool, json!({}), target, selected)
    }

    fn gate_args(tool: &str, args: Value, target: &str, selected: Option<&str>) -> Option<String> {
        hold_reason(find(tool).unwrap(), &args, target, selected)
    }

    #[test]
    fn only_plain_reads_on_the_selected_pc_run_unasked() {
        assert_eq!(gate("telemetry_collect", "pc-a", Some("pc-a")), None);
        assert_eq!(gate("diag_eventlog", "pc-a", Some("pc-a")), None);
        assert_eq!(gate("fs_disk_usage", "pc-a", Some("pc-a")), None, "the volume list");
        assert_eq!(
            gate_args("fs_disk_usage", json!({"path": null}), "pc-a", Some("pc-a")),
            None
        );
        let held = [
            (
                "telemetry_collect",
                "pc-b",
                Some("pc-a"),
                "not on this conversation's PC",
            ),
            ("telemetry_collect", "pc-b", None, "no PC selected"),
            ("shell_exec", "pc-a", Some("pc-a"), "changes the PC"),
            ("net_dns_lookup", "pc-a", Some("pc-a"), "contacts a host"),
            ("net_ping", "pc-a", Some("pc-a"), "contacts a host"),
            ("net_port_check", "pc-a", Some("pc-a"), "contacts a host"),
            ("fs_read", "pc-a", Some("pc-a"), "personal data"),
            ("screen_capture", "pc-a", Some("pc-a"), "personal data"),
            ("diag_processes", "pc-a", Some("pc-a"), "command lines"),
        ];
        for (tool, target, selected, why) in held {
            let reason = gate(tool, target, selected).unwrap_or_default();
            assert!(reason.contains(why), "{tool} on {target}: {reason:?}");
        }
    }

    #[test]
    fn naming_a_personal_telemetry_section_waits() {
        let plain = json!({"sections": ["disk", "browser_extensions"]});
        assert_eq!(gate_args("telemetry_collect", plain, "pc-a", Some("pc-a")), None);
        let personal = json!({"sections": ["disk", "web_activity", "screen_time"]});
        let reason = gate_args("telemetry_collect", personal, "pc-a", Some("pc-a")).unwrap_or_default();
        assert!(
            reason.contains("personal data (web_activity, screen_time"),
            "{reason:?}"
        );
    }

    #[test]
    fn sizing_a_path_nobody_asked_about_waits() {
        for path in ["/home/kim", "C:\\Users\\kim\\Documents", ""] {
            let reason = gate_args("fs_disk_usage", json!({ "path": path }), "pc-a", Some("pc-a"));
            assert!(
                reason.as_deref().unwrap_or_default().contains("reads a path"),
                "{path}: {reason:?}"
            );
        }
    }

    #[test]
    fn a_network_path_waits_saying_the_pc_would_contact_a_host() {
        let network = [
            "\\\\evil.example\\share\\x",
            "//evil.example/share",
            "\\/evil.example/share",
            "  \\\\evil\\share",
            "\\\\?\\UNC\\evil\\share",
            "\\\\.\\pipe\\evil",
            "\\??\\UNC\\evil\\share",
        ];
        for tool in ["fs_list", "fs_read", "fs_search", "fs_disk_usage"] {
            for path in network {
                let reason = gate_args(tool, json!({ "path": path, "pattern": "x" }), "pc-a", Some("pc-a"));
                assert!(
                    reason.as_deref().unwrap_or_default().contains("network path"),
                    "{tool} {path}: {reason:?}"
                );
            }
            let local = gate_args(
                tool,
                json!({ "path": "C:\\Users\\kim", "pattern": "x" }),
                "pc-a",
                Some("pc-a"),
            );
            assert!(
                !local.unwrap_or_default().contains("network"),
                "{tool}: a local path is no network path"
            );
        }
        assert!(!is_network_path("/srv/share"));
        assert!(!is_network_path("\\srv"));
    }

    #[test]
    fn every_state_changing_or_outbound_tool_is_held_everywhere() {
        for spec in TOOLS {
            if !spec.read_only() || spec.reaches_out || spec.privacy_sensitive {
                assert!(
                    hold_reason(spec, &json!({}), "pc-a", Some("pc-a")).is_some(),
                    "{}",
                    spec.name()
                );
            }
            assert!(
                hold_reason(spec, &json!({}), "pc-b", Some("pc-a")).is_some(),
                "{}",
                spec.name()
            );
        }
    }

    #[test]
    fn every_tool_that_takes_a_path_waits_when_given_one() {
        for spec in TOOLS.iter().filter(|s| s.takes(PATH_ARG)) {
            let reason = hold_reason(spec, &json!({"path": "/etc"}), "pc-a", Some("pc-a"));
            assert!(reason.is_some(), "{}", spec.name());
        }
    }
}
