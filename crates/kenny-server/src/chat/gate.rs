//! Which chat calls run at once and which wait for the operator.
//!
//! Tool output is written by the PC, and a PC can be made to say anything (one line in
//! a log file is enough), so the model must be assumed steerable by what it reads. The
//! gate therefore lets through, unasked, only what such a model could not turn against
//! the operator: reading, on the PC the conversation is about, things that are not
//! personal, without sending anything anywhere. Everything else waits for a human.

use kenny_proto::catalog::ToolSpec;

/// Why a call waits for approval, or `None` if it may run at once.
pub fn hold_reason(spec: &ToolSpec, target: &str, selected: Option<&str>) -> Option<String> {
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
    if spec.privacy_sensitive {
        return Some("it reads personal data (files or the screen)".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::catalog::{TOOLS, find};

    fn gate(tool: &str, target: &str, selected: Option<&str>) -> Option<String> {
        hold_reason(find(tool).unwrap(), target, selected)
    }

    #[test]
    fn only_plain_reads_on_the_selected_pc_run_unasked() {
        assert_eq!(gate("telemetry_collect", "pc-a", Some("pc-a")), None);
        assert_eq!(gate("diag_eventlog", "pc-a", Some("pc-a")), None);
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
        ];
        for (tool, target, selected, why) in held {
            let reason = gate(tool, target, selected).unwrap_or_default();
            assert!(reason.contains(why), "{tool} on {target}: {reason:?}");
        }
    }

    #[test]
    fn every_state_changing_or_outbound_tool_is_held_everywhere() {
        for spec in TOOLS {
            if !spec.read_only() || spec.reaches_out || spec.privacy_sensitive {
                assert!(hold_reason(spec, "pc-a", Some("pc-a")).is_some(), "{}", spec.name);
            }
            assert!(hold_reason(spec, "pc-b", Some("pc-a")).is_some(), "{}", spec.name);
        }
    }
}
