//! A PC's web filter as the server keeps it, and how `webfilter_set` changes it. Every
//! change is checked whole before anything is stored: a category that does not exist,
//! a name that is not a domain or a window that is not a time refuses the whole call.

use std::collections::{BTreeMap, BTreeSet};

use kenny_proto::domains::{is_reserved, normalize};
use kenny_proto::server_args::{EntryKind, FILTER_ENTRIES_MAX, FilterMode, ScheduleWindow, WebfilterSetArgs};
use serde::{Deserialize, Serialize};

use super::lists::Catalog;
use super::schedule::Timed;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FilterConfig {
    pub enabled: bool,
    pub mode: FilterMode,
    pub categories: BTreeSet<String>,
    /// Normalised domain → what the entry does.
    pub entries: BTreeMap<String, EntryKind>,
    pub doh_lockdown: bool,
    pub record_activity: bool,
    pub schedules: Vec<ScheduleWindow>,
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            enabled: false,
            mode: FilterMode::Block,
            categories: BTreeSet::new(),
            entries: BTreeMap::new(),
            doh_lockdown: false,
            record_activity: false,
            schedules: Vec::new(),
        }
    }
}

/// One domain a caller gave, normalised as the agent will, or why not.
pub(crate) fn entry_domain(raw: &str) -> Result<String, String> {
    let name = normalize(raw).map_err(|why| format!("{raw:?} is not a domain name ({why})"))?;
    if is_reserved(&name) {
        return Err(format!(
            "{raw:?} is a name every PC resolves locally and cannot be filtered"
        ));
    }
    Ok(name)
}

fn known(catalog: &Catalog, name: &str) -> Result<(), String> {
    if catalog.has(name) {
        Ok(())
    } else {
        let all: Vec<&str> = catalog.categories.keys().map(String::as_str).collect();
        Err(format!(
            "there is no category {name:?}; the categories are {} (a superuser adds more as list sources)",
            all.join(", ")
        ))
    }
}

/// `current` with the call's changes, checked; what the call asked, in words, for
/// the audit's reader and the answer.
pub(crate) fn edit(
    current: &FilterConfig,
    args: &WebfilterSetArgs,
    catalog: &Catalog,
) -> Result<(FilterConfig, Vec<String>), String> {
    let mut next = current.clone();
    let mut said = Vec::new();
    if let Some(on) = args.enabled {
        next.enabled = on;
        said.push(format!("filter {}", if on { "on" } else { "off" }));
    }
    if let Some(mode) = args.mode {
        next.mode = mode;
        said.push(format!(
            "mode {}",
            match mode {
                FilterMode::Block => "block",
                FilterMode::Monitor => "monitor",
            }
        ));
    }
    if let Some(categories) = &args.categories {
        let mut set = BTreeSet::new();
        for name in categories {
            known(catalog, name)?;
            set.insert(name.clone());
        }
        said.push(format!(
            "categories [{}]",
            set.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
        ));
        next.categories = set;
    }
    for raw in args.remove_entries.iter().flatten() {
        let name = entry_domain(raw)?;
        if next.entries.remove(&name).is_none() {
            return Err(format!("there is no custom entry for {name}; webfilter_get lists them"));
        }
        said.push(format!("remove {name}"));
    }
    for entry in args.add_entries.iter().flatten() {
        let name = entry_domain(&entry.domain)?;
        said.push(format!("{} {name}", entry.kind.as_str()));
        next.entries.insert(name, entry.kind);
    }
    if next.entries.len() > FILTER_ENTRIES_MAX {
        return Err(format!(
            "a PC's filter keeps at most {FILTER_ENTRIES_MAX} custom entries and this would make {}; use a list source for long lists",
            next.entries.len()
        ));
    }
    if let Some(on) = args.doh_lockdown {
        next.doh_lockdown = on;
        said.push(format!("DNS-over-HTTPS lockdown {}", if on { "on" } else { "off" }));
    }
    if let Some(on) = args.record_activity {
        next.record_activity = on;
        said.push(format!("activity recording {}", if on { "on" } else { "off" }));
    }
    if let Some(windows) = &args.schedules {
        let mut names = BTreeSet::new();
        for w in windows {
            check_window(w, catalog)?;
            if !names.insert(w.name.trim().to_owned()) {
                return Err(format!(
                    "two schedule windows are called {:?}; give each its own name",
                    w.name
                ));
            }
        }
        said.push(format!("{} schedule window(s)", windows.len()));
        next.schedules = windows.clone();
    }
    Ok((next, said))
}

fn check_window(w: &ScheduleWindow, catalog: &Catalog) -> Result<(), String> {
    let name = w.name.trim();
    if name.is_empty() || name.chars().count() > 60 || name.chars().any(char::is_control) {
        return Err("a schedule window's name is 1 to 60 characters of plain text, such as `school nights`".into());
    }
    if w.days.is_empty() {
        return Err(format!(
            "schedule window {name:?} has no days; list the days it starts on (mon ... sun)"
        ));
    }
    Timed::new(w).map_err(|why| format!("schedule window {name:?}: {why}"))?;
    for c in w.categories.iter().flatten() {
        known(catalog, c).map_err(|why| format!("schedule window {name:?}: {why}"))?;
    }
    if w.categories.as_ref().is_some_and(Vec::is_empty) {
        return Err(format!(
            "schedule window {name:?} names an empty list of categories; omit `categories` to switch the whole filter"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::server_args::{FilterEntry, Switch, Weekday};

    fn catalog() -> Catalog {
        Catalog::build(&[], 1)
    }

    fn set(args: serde_json::Value) -> WebfilterSetArgs {
        let mut args = args;
        args["agent_id"] = "pc".into();
        serde_json::from_value(args).unwrap()
    }

    #[test]
    fn a_change_is_applied_whole_and_said_in_words() {
        let args = set(serde_json::json!({
            "enabled": true,
            "categories": ["games", "social"],
            "add_entries": [{"domain": "Bad.Example.", "kind": "block"}, {"domain": "school.example", "kind": "allow"}],
            "schedules": [{"name": "school nights", "days": ["sun"], "start": "21:00", "end": "07:00",
                           "time_zone": "Europe/London", "categories": ["games"], "set": "on"}],
        }));
        let (next, said) = edit(&FilterConfig::default(), &args, &catalog()).unwrap();
        assert!(next.enabled);
        assert_eq!(next.entries.get("bad.example"), Some(&EntryKind::Block));
        assert_eq!(next.entries.get("school.example"), Some(&EntryKind::Allow));
        assert_eq!(next.schedules.len(), 1);
        assert_eq!(
            said,
            [
                "filter on",
                "categories [games, social]",
                "block bad.example",
                "allow school.example",
                "1 schedule window(s)"
            ]
        );
    }

    #[test]
    fn anything_wrong_refuses_the_whole_call() {
        let current = FilterConfig::default();
        let cases = [
            (serde_json::json!({"categories": ["nope"]}), "no category \"nope\""),
            (
                serde_json::json!({"add_entries": [{"domain": "http://x.example/", "kind": "block"}]}),
                "not a domain",
            ),
            (
                serde_json::json!({"add_entries": [{"domain": "localhost", "kind": "block"}]}),
                "resolves locally",
            ),
            (
                serde_json::json!({"remove_entries": ["absent.example"]}),
                "no custom entry",
            ),
            (
                serde_json::json!({"schedules": [{"name": "x", "days": ["mon"], "start": "25:00", "end": "07:00", "time_zone": "UTC", "set": "on"}]}),
                "HH:MM",
            ),
            (
                serde_json::json!({"schedules": [{"name": "x", "days": ["mon"], "start": "21:00", "end": "07:00", "time_zone": "Nowhere/City", "set": "on"}]}),
                "IANA",
            ),
            (
                serde_json::json!({"schedules": [{"name": "x", "days": [], "start": "21:00", "end": "07:00", "time_zone": "UTC", "set": "on"}]}),
                "no days",
            ),
        ];
        for (args, says) in cases {
            let why = edit(&current, &set(args.clone()), &catalog()).unwrap_err();
            assert!(why.contains(says), "{args}: {why}");
        }
        let twice = WebfilterSetArgs {
            agent_id: "pc".into(),
            schedules: Some(vec![
                ScheduleWindow {
                    name: "a".into(),
                    days: vec![Weekday::Mon],
                    start: "01:00".into(),
                    end: "02:00".into(),
                    time_zone: "UTC".into(),
                    categories: None,
                    set: Switch::Off,
                };
                2
            ]),
            ..Default::default()
        };
        assert!(
            edit(&current, &twice, &catalog())
                .unwrap_err()
                .contains("two schedule windows")
        );
    }

    #[test]
    fn too_many_entries_are_refused_not_cut() {
        let mut current = FilterConfig::default();
        for i in 0..FILTER_ENTRIES_MAX {
            current.entries.insert(format!("n{i}.example"), EntryKind::Block);
        }
        let args = WebfilterSetArgs {
            agent_id: "pc".into(),
            add_entries: Some(vec![FilterEntry {
                domain: "one-more.example".into(),
                kind: EntryKind::Watch,
            }]),
            ..Default::default()
        };
        assert!(edit(&current, &args, &catalog()).unwrap_err().contains("at most 2000"));
    }
}
