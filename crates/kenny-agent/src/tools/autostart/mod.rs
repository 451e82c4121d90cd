//! What starts by itself at boot or login.

mod linux;
mod windows;

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::ToolResult;
use super::bounded::blocking;

const MAX_ENTRIES: usize = 2000;
const BACKSTOP: Duration = Duration::from_secs(50);

pub(crate) use linux::{file_name, visible_files_in};
pub(crate) use windows::{SCRIPT as WINDOWS_SCRIPT, parse as parse_windows};

/// One thing that starts by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: &'static str,
    pub name: String,
    pub command: Option<String>,
    pub location: String,
    /// `None` where the source cannot tell.
    pub enabled: Option<bool>,
    pub user: Option<String>,
    /// Source-specific details (a task's triggers, a unit's file state).
    pub extra: Map<String, Value>,
}

impl Entry {
    fn into_json(self) -> Value {
        let mut entry = json!({
            "kind": self.kind,
            "name": self.name,
            "command": self.command,
            "location": self.location,
            "enabled": self.enabled,
            "user": self.user,
        });
        if let Some(object) = entry.as_object_mut() {
            object.extend(self.extra);
        }
        entry
    }
}

pub(super) async fn list(ctx: &crate::tools::ToolContext) -> ToolResult {
    let (entries, notes) = if cfg!(windows) {
        windows::list().await?
    } else {
        linux_entries(ctx.autostart_root()).await?
    };
    Ok(render(entries, notes))
}

/// Linux: enabled systemd units (when systemd runs), then XDG autostart files and cron
/// `@reboot` lines under `root` (`/` normally). What could not be read becomes a note.
pub(crate) async fn linux_entries(root: std::path::PathBuf) -> Result<(Vec<Entry>, Vec<String>), super::ToolError> {
    let mut notes = Vec::new();
    let mut entries = if super::systemd::is_running() {
        linux::systemd_units(&mut notes).await
    } else {
        notes.push(format!(
            "{}: enabled systemd units were not listed, since nothing starts them",
            super::systemd::not_running_reason()
        ));
        Vec::new()
    };
    let (files, file_notes) = blocking("diag_autostart", BACKSTOP, move || linux::scan_files(&root)).await?;
    entries.extend(files);
    notes.extend(file_notes);
    Ok((entries, notes))
}

fn render(entries: Vec<Entry>, notes: Vec<String>) -> Value {
    let truncated = entries.len() > MAX_ENTRIES;
    let listed: Vec<Value> = entries.into_iter().take(MAX_ENTRIES).map(Entry::into_json).collect();
    json!({
        "count": listed.len(),
        "truncated": truncated,
        "entries": listed,
        "notes": notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_entries_with_their_extras_and_bounds_them() {
        let mut extra = Map::new();
        extra.insert("triggers".into(), "Logon".into());
        let entry = Entry {
            kind: "scheduled_task",
            name: "\\Updater".into(),
            command: Some("C:\\u.exe /quiet".into()),
            location: "Task Scheduler \\".into(),
            enabled: Some(true),
            user: None,
            extra,
        };
        let out = render(vec![entry.clone()], vec!["a note".into()]);
        assert_eq!(
            out,
            json!({"count": 1, "truncated": false, "notes": ["a note"], "entries": [{
                "kind": "scheduled_task", "name": "\\Updater", "command": "C:\\u.exe /quiet",
                "location": "Task Scheduler \\", "enabled": true, "user": null, "triggers": "Logon"
            }]})
        );
        let many = render(vec![entry; MAX_ENTRIES + 1], Vec::new());
        assert_eq!(many["count"], MAX_ENTRIES);
        assert_eq!(many["truncated"], true);
    }
}
