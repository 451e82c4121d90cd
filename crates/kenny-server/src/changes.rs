//! What changed on a PC between two snapshots: accounts and administrators, installed
//! software, listening ports, autostart entries, services and scheduled tasks, item by
//! item. A new local administrator is always high priority (it is how an attacker, or
//! a child, keeps control of a PC).
//!
//! Lists from the agent are untrusted and may be cut short (`truncated`); a cut list is
//! compared only as far as both snapshots are complete, so the cut never reads as
//! software removed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::health::clean;
use crate::store::{ChangeRow, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Priority {
    Normal,
    High,
}

impl Priority {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Priority::Normal => "normal",
            Priority::High => "high",
        }
    }
}

/// One difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Change {
    pub section: String,
    /// added, removed or changed.
    pub kind: String,
    /// What it is about: an account, a package, `tcp 0.0.0.0:22`, ...
    pub item: String,
    /// In words, for people and for the model.
    pub detail: String,
    pub priority: Priority,
}

/// Most changes kept from one pair of snapshots (a reinstalled PC differs in
/// everything; the first two hundred say enough).
const MAX_CHANGES: usize = 200;
/// Most items of one list compared (agents list at most a few hundred): a hostile PC's
/// list of a million names costs no more than this.
const MAX_ITEMS: usize = 5000;

/// How an inventory section lists its items.
struct Inventory {
    section: &'static str,
    list: &'static str,
    /// Fields that name an item.
    key: fn(&Map<String, Value>) -> Option<String>,
    /// Fields whose change is worth saying.
    watched: &'static [&'static str],
    /// The list is sorted by its key, so a cut list is complete up to its last key.
    sorted_by_key: bool,
}

const INVENTORIES: &[Inventory] = &[
    Inventory {
        section: "local_accounts",
        list: "accounts",
        key: |m| name(m, "name"),
        watched: &["enabled", "is_admin", "password_required"],
        sorted_by_key: false,
    },
    Inventory {
        section: "installed_software",
        list: "apps",
        key: |m| name(m, "name"),
        watched: &["version"],
        sorted_by_key: true,
    },
    Inventory {
        section: "listening_ports",
        list: "ports",
        key: |m| {
            let port = m.get("port")?.as_u64()?;
            let proto = m.get("proto").and_then(Value::as_str).unwrap_or("?");
            let address = m.get("address").and_then(Value::as_str).unwrap_or("?");
            Some(clean(&format!("{proto} {address}:{port}"), 80))
        },
        watched: &["process"],
        sorted_by_key: false,
    },
    Inventory {
        section: "autostart",
        list: "entries",
        key: |m| name(m, "name"),
        watched: &["command", "location"],
        sorted_by_key: false,
    },
    Inventory {
        section: "services",
        list: "services",
        key: |m| name(m, "name"),
        watched: &["start_type", "account", "path"],
        sorted_by_key: false,
    },
    Inventory {
        section: "scheduled_tasks",
        list: "tasks",
        key: |m| name(m, "name"),
        watched: &["command", "enabled"],
        sorted_by_key: false,
    },
];

fn name(m: &Map<String, Value>, field: &str) -> Option<String> {
    m.get(field).and_then(Value::as_str).map(|n| clean(n, 120))
}

/// What changed on `agent_id` between its stored latest snapshot and `snapshot_json`
/// (received at `at`, by this server's clock: a PC's own could date its changes out of
/// every list), as rows to store with it. The first snapshot of a PC is its baseline:
/// nothing changed.
pub(crate) fn since_stored(store: &Store, agent_id: &str, at: &str, snapshot_json: &str) -> Vec<ChangeRow> {
    let previous = match store.latest_telemetry(agent_id) {
        Ok(Some((_, _, json))) => json,
        Ok(None) => return Vec::new(),
        Err(e) => {
            tracing::warn!(agent = %agent_id, error = %e, "previous snapshot unreadable; changes not compared");
            return Vec::new();
        }
    };
    let object = |json: &str| match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    };
    let (Some(before), Some(after)) = (object(&previous), object(snapshot_json)) else {
        return Vec::new();
    };
    diff(&before, &after)
        .into_iter()
        .map(|c| ChangeRow {
            id: 0,
            agent_id: agent_id.to_owned(),
            at: at.to_owned(),
            section: c.section,
            kind: c.kind,
            item: c.item,
            detail: c.detail,
            priority: c.priority.as_str().to_owned(),
        })
        .collect()
}

/// The changes from `before` to `after`, high priority first.
pub(crate) fn diff(before: &Map<String, Value>, after: &Map<String, Value>) -> Vec<Change> {
    let mut changes = Vec::new();
    for inventory in INVENTORIES {
        let (Some(old), Some(new)) = (
            before.get(inventory.section).and_then(Value::as_object),
            after.get(inventory.section).and_then(Value::as_object),
        ) else {
            continue;
        };
        items(inventory, old, new, &mut changes);
    }
    admins(before, after, &mut changes);
    changes.sort_by_key(|c| std::cmp::Reverse(c.priority));
    changes.truncate(MAX_CHANGES);
    changes
}

fn items(inv: &Inventory, old: &Map<String, Value>, new: &Map<String, Value>, out: &mut Vec<Change>) {
    let truncated = |m: &Map<String, Value>| m.get("truncated") == Some(&Value::Bool(true));
    if (truncated(old) || truncated(new)) && !inv.sorted_by_key {
        return;
    }
    let keyed = |m: &Map<String, Value>| -> BTreeMap<String, Map<String, Value>> {
        m.get(inv.list)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .take(MAX_ITEMS)
                    .filter_map(Value::as_object)
                    .filter_map(|item| Some(((inv.key)(item)?, item.clone())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (old_items, new_items) = (keyed(old), keyed(new));
    // A cut list is complete up to its last item; past the shorter of the two, say
    // nothing rather than call the cut a removal.
    let bound = [(old, &old_items), (new, &new_items)]
        .iter()
        .filter(|(m, _)| truncated(m))
        .filter_map(|(_, items)| items.keys().next_back().cloned())
        .min();
    let within = |k: &String| bound.as_ref().is_none_or(|b| k <= b);
    for (key, item) in new_items.iter().filter(|(k, _)| within(k)) {
        match old_items.get(key) {
            None => out.push(change(inv.section, "added", key, added_detail(inv.section, key, item))),
            Some(before) => {
                let moved: Vec<String> = inv
                    .watched
                    .iter()
                    .filter(|f| before.get(**f) != item.get(**f))
                    .map(|f| format!("{f} {} → {}", shown(before.get(*f)), shown(item.get(*f))))
                    .collect();
                if !moved.is_empty() {
                    out.push(change(
                        inv.section,
                        "changed",
                        key,
                        format!("{key}: {}", moved.join(", ")),
                    ));
                }
            }
        }
    }
    for key in old_items.keys().filter(|k| within(k) && !new_items.contains_key(*k)) {
        out.push(change(inv.section, "removed", key, format!("{key} removed")));
    }
}

/// Administrators come as a list of names beside the accounts.
fn admins(before: &Map<String, Value>, after: &Map<String, Value>, out: &mut Vec<Change>) {
    let names = |m: &Map<String, Value>| -> Option<std::collections::BTreeSet<String>> {
        let list = m.get("local_accounts")?.get("admins")?.as_array()?;
        Some(
            list.iter()
                .take(MAX_ITEMS)
                .filter_map(Value::as_str)
                .map(|n| clean(n, 120))
                .collect(),
        )
    };
    let (Some(old), Some(new)) = (names(before), names(after)) else {
        return;
    };
    for admin in new.difference(&old) {
        out.push(Change {
            section: "local_accounts".into(),
            kind: "admin_added".into(),
            item: admin.clone(),
            detail: format!("new local administrator: {admin}"),
            priority: Priority::High,
        });
    }
    for admin in old.difference(&new) {
        out.push(change(
            "local_accounts",
            "admin_removed",
            admin,
            format!("{admin} is no longer an administrator"),
        ));
    }
}

fn change(section: &str, kind: &str, item: &str, detail: String) -> Change {
    Change {
        section: section.into(),
        kind: kind.into(),
        item: item.into(),
        detail,
        priority: Priority::Normal,
    }
}

fn added_detail(section: &str, key: &str, item: &Map<String, Value>) -> String {
    match section {
        "installed_software" => format!("{key} {} installed", shown(item.get("version"))),
        "local_accounts" => format!("new account: {key}"),
        "listening_ports" => match item.get("process").and_then(Value::as_str) {
            Some(p) => format!("now listening: {key} ({})", clean(p, 60)),
            None => format!("now listening: {key}"),
        },
        _ => format!("{key} added"),
    }
}

fn shown(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "none".into(),
        Some(Value::String(s)) => clean(s, 80),
        Some(other) => clean(&other.to_string(), 80),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_new_administrator_is_high_priority_and_first() {
        let before = map(json!({"local_accounts": {
            "accounts": [{"name": "root", "is_admin": true}, {"name": "kid", "is_admin": false, "enabled": true}],
            "admins": ["root"],
        }}));
        let after = map(json!({"local_accounts": {
            "accounts": [
                {"name": "root", "is_admin": true},
                {"name": "kid", "is_admin": false, "enabled": false},
                {"name": "helpdesk", "is_admin": true},
            ],
            "admins": ["root", "helpdesk"],
        }}));
        let changes = diff(&before, &after);
        assert_eq!(changes[0].kind, "admin_added");
        assert_eq!(changes[0].detail, "new local administrator: helpdesk");
        assert_eq!(changes[0].priority, Priority::High);
        let details: Vec<&str> = changes.iter().map(|c| c.detail.as_str()).collect();
        assert!(details.contains(&"new account: helpdesk"), "{details:?}");
        assert!(details.contains(&"kid: enabled true → false"), "{details:?}");
        assert_eq!(changes.len(), 3, "{details:?}");
        assert!(diff(&after, &after).is_empty());
    }

    #[test]
    fn software_cut_short_is_compared_only_as_far_as_both_lists_go() {
        let before = map(json!({"installed_software": {"truncated": true, "apps": [
            {"name": "a", "version": "1"}, {"name": "b", "version": "1"}, {"name": "c", "version": "1"},
        ]}}));
        let after = map(json!({"installed_software": {"truncated": true, "apps": [
            {"name": "a", "version": "2"}, {"name": "aa", "version": "1"}, {"name": "b", "version": "1"},
        ]}}));
        let changes = diff(&before, &after);
        let details: Vec<&str> = changes.iter().map(|c| c.detail.as_str()).collect();
        // `c` fell off the end of the cut list: not a removal.
        assert_eq!(details, ["a: version 1 → 2", "aa 1 installed"]);
    }

    #[test]
    fn ports_are_keyed_by_protocol_address_and_port() {
        let before = map(
            json!({"listening_ports": {"ports": [{"proto": "tcp", "address": "0.0.0.0", "port": 22, "process": "sshd"}]}}),
        );
        let after = map(json!({"listening_ports": {"ports": [
            {"proto": "tcp", "address": "0.0.0.0", "port": 22, "process": "sshd"},
            {"proto": "tcp", "address": "0.0.0.0", "port": 5900, "process": "x11vnc"},
        ]}}));
        let changes = diff(&before, &after);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].item, "tcp 0.0.0.0:5900");
        assert_eq!(changes[0].detail, "now listening: tcp 0.0.0.0:5900 (x11vnc)");
    }

    #[test]
    fn a_section_missing_on_either_side_says_nothing() {
        let before = map(json!({"memory": {}}));
        let after = map(json!({"local_accounts": {"accounts": [{"name": "x"}], "admins": ["x"]}}));
        assert!(diff(&before, &after).is_empty());
    }
}
