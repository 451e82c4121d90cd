//! What a PC's filter should block at an instant: its configuration, the schedule
//! windows open then, and the categories' lists, with allow entries taken out. The
//! result is either a list to apply, nothing (clear), or a refusal when the list is
//! over the cap; never a list cut short.

use std::collections::BTreeSet;
use std::sync::Arc;

use jiff::Timestamp;
use kenny_proto::results::webfilter_list_hash;
use kenny_proto::server_args::{EntryKind, FilterMode, Switch};

use super::config::FilterConfig;
use super::lists::{Catalog, suffixes};
use super::schedule::Timed;

/// The configuration as the schedule has it at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Phase {
    pub enabled: bool,
    pub categories: BTreeSet<String>,
    /// The windows open, by name, in the configuration's order.
    pub open_windows: Vec<String>,
}

/// Windows apply in the order they are listed, so a later one has the last word.
pub(crate) fn phase(cfg: &FilterConfig, t: Timestamp) -> Phase {
    let mut p = Phase {
        enabled: cfg.enabled,
        categories: cfg.categories.clone(),
        open_windows: Vec::new(),
    };
    for w in &cfg.schedules {
        // A stored window was checked when it was set; one that no longer parses (a
        // time zone gone from the database) is treated as closed.
        let Ok(timed) = Timed::new(w) else { continue };
        if !timed.is_open(t) {
            continue;
        }
        p.open_windows.push(w.name.clone());
        match (&w.categories, w.set) {
            (None, set) => p.enabled = set == Switch::On,
            (Some(names), Switch::On) => p.categories.extend(names.iter().cloned()),
            (Some(names), Switch::Off) => {
                for n in names {
                    p.categories.remove(n);
                }
            }
        }
    }
    p
}

/// When the phase may next change: the earliest edge of any window after `t`.
pub(crate) fn next_edge(cfg: &FilterConfig, t: Timestamp) -> Option<(Timestamp, String)> {
    cfg.schedules
        .iter()
        .filter_map(|w| Some((Timed::new(w).ok()?.next_edge(t)?, w.name.clone())))
        .min_by_key(|(at, _)| *at)
}

/// What the PC should hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Desired {
    /// No block at all, and why.
    Clear { why: String },
    Apply {
        domains: Arc<Vec<String>>,
        hash: String,
        doh_lockdown: bool,
    },
    /// More names than the cap: refused, and the PC keeps what it has.
    OverCap { count: usize, cap: usize },
}

impl Desired {
    /// Whether a PC that was last given (`applied_hash`, `applied_doh`) needs this
    /// pushed; a refusal over the cap is never pushed.
    pub(crate) fn differs_from(&self, applied_hash: Option<&str>, applied_doh: bool) -> bool {
        match self {
            Desired::OverCap { .. } => false,
            Desired::Clear { .. } => applied_hash.is_some(),
            Desired::Apply { hash, doh_lockdown, .. } => {
                applied_hash != Some(hash.as_str()) || applied_doh != *doh_lockdown
            }
        }
    }
}

/// The list for `phase`, minus what must never be blocked (`protected`: the kenny
/// server's own host name).
pub(crate) fn compute(
    cfg: &FilterConfig,
    phase: &Phase,
    catalog: &Catalog,
    protected: &[String],
    cap: usize,
) -> Desired {
    if !phase.enabled {
        return Desired::Clear {
            why: if phase.open_windows.is_empty() || cfg.enabled == phase.enabled {
                "the filter is off".to_owned()
            } else {
                format!("the schedule turns it off ({})", phase.open_windows.join(", "))
            },
        };
    }
    if cfg.mode == FilterMode::Monitor {
        return Desired::Clear {
            why: "monitor mode blocks nothing".to_owned(),
        };
    }
    let allowed: BTreeSet<&str> = cfg
        .entries
        .iter()
        .filter(|(_, kind)| **kind == EntryKind::Allow)
        .map(|(d, _)| d.as_str())
        .collect();
    let is_allowed = |d: &str| suffixes(d).any(|s| allowed.contains(s));
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for c in &phase.categories {
        if let Some(category) = catalog.categories.get(c) {
            names.extend(category.domains.iter().map(String::as_str));
        }
    }
    // A hosts file matches whole names: an entry blocks its `www.` form as well.
    let www: Vec<String> = cfg
        .entries
        .iter()
        .filter(|(d, kind)| **kind == EntryKind::Block && !d.starts_with("www."))
        .map(|(d, _)| format!("www.{d}"))
        .filter(|d| d.len() <= 253)
        .collect();
    for (d, kind) in &cfg.entries {
        if *kind == EntryKind::Block {
            names.insert(d);
        }
    }
    names.extend(www.iter().map(String::as_str));
    let list: Vec<String> = names
        .into_iter()
        .filter(|d| !is_allowed(d) && !protected.iter().any(|p| p == d))
        .map(str::to_owned)
        .collect();
    if list.is_empty() {
        return Desired::Clear {
            why: "nothing to block: no category is on and there is no block entry".to_owned(),
        };
    }
    if list.len() > cap {
        return Desired::OverCap { count: list.len(), cap };
    }
    let hash = webfilter_list_hash(&list);
    Desired::Apply {
        domains: Arc::new(list),
        hash,
        doh_lockdown: cfg.doh_lockdown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::server_args::{ScheduleWindow, Weekday};

    fn cfg() -> FilterConfig {
        let mut c = FilterConfig {
            enabled: true,
            ..Default::default()
        };
        c.categories.insert("gambling".into());
        c.entries.insert("bad.example".into(), EntryKind::Block);
        c.entries.insert("www.worse.example".into(), EntryKind::Block);
        c.entries.insert("bet365.com".into(), EntryKind::Allow);
        c.entries.insert("watched.example".into(), EntryKind::Watch);
        c
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn allow_takes_out_names_under_it_and_block_adds_the_www_form() {
        let c = cfg();
        let catalog = Catalog::build(&[], 1);
        let p = phase(&c, at("2026-12-01T12:00:00Z"));
        let Desired::Apply { domains, hash, .. } = compute(&c, &p, &catalog, &[], 10_000) else {
            panic!("expected a list")
        };
        assert!(domains.contains(&"bad.example".to_owned()) && domains.contains(&"www.bad.example".to_owned()));
        assert!(domains.contains(&"www.worse.example".to_owned()));
        assert!(!domains.contains(&"www.www.worse.example".to_owned()));
        assert!(
            !domains.iter().any(|d| d.ends_with("bet365.com")),
            "allow wins over the category"
        );
        assert!(domains.contains(&"pokerstars.com".to_owned()));
        assert!(!domains.contains(&"watched.example".to_owned()));
        assert!(domains.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
        assert_eq!(hash, webfilter_list_hash(&domains));
    }

    #[test]
    fn over_the_cap_is_refused_whole() {
        let c = cfg();
        let p = phase(&c, at("2026-12-01T12:00:00Z"));
        assert!(matches!(
            compute(&c, &p, &Catalog::build(&[], 1), &[], 5),
            Desired::OverCap { cap: 5, count } if count > 5
        ));
    }

    #[test]
    fn the_server_itself_is_never_blocked() {
        let mut c = cfg();
        c.entries.insert("kenny.example.org".into(), EntryKind::Block);
        let p = phase(&c, at("2026-12-01T12:00:00Z"));
        let d = compute(
            &c,
            &p,
            &Catalog::build(&[], 1),
            &["kenny.example.org".to_owned()],
            10_000,
        );
        let Desired::Apply { domains, .. } = d else { panic!() };
        assert!(!domains.contains(&"kenny.example.org".to_owned()));
        assert!(domains.contains(&"www.kenny.example.org".to_owned()));
    }

    #[test]
    fn windows_switch_categories_and_the_whole_filter_in_order() {
        let mut c = cfg();
        c.schedules = vec![
            ScheduleWindow {
                name: "school nights".into(),
                days: vec![Weekday::Tue],
                start: "20:00".into(),
                end: "07:00".into(),
                time_zone: "UTC".into(),
                categories: Some(vec!["games".into()]),
                set: Switch::On,
            },
            ScheduleWindow {
                name: "free saturday".into(),
                days: vec![Weekday::Sat],
                start: "10:00".into(),
                end: "12:00".into(),
                time_zone: "UTC".into(),
                categories: None,
                set: Switch::Off,
            },
        ];
        // 2026-12-01 is a Tuesday.
        let day = phase(&c, at("2026-12-01T12:00:00Z"));
        assert_eq!(day.categories.iter().collect::<Vec<_>>(), ["gambling"]);
        let night = phase(&c, at("2026-12-01T22:00:00Z"));
        assert_eq!(night.categories.iter().collect::<Vec<_>>(), ["gambling", "games"]);
        assert_eq!(night.open_windows, ["school nights"]);
        let saturday = phase(&c, at("2026-12-05T11:00:00Z"));
        assert!(!saturday.enabled);
        let Desired::Clear { why } = compute(&c, &saturday, &Catalog::build(&[], 1), &[], 10) else {
            panic!()
        };
        assert!(why.contains("free saturday"), "{why}");
        assert_eq!(
            next_edge(&c, at("2026-12-01T12:00:00Z")),
            Some((at("2026-12-01T20:00:00Z"), "school nights".to_owned()))
        );
    }

    #[test]
    fn off_and_monitor_clear() {
        let mut c = cfg();
        c.mode = FilterMode::Monitor;
        let p = phase(&c, at("2026-12-01T12:00:00Z"));
        assert!(matches!(
            compute(&c, &p, &Catalog::build(&[], 1), &[], 10),
            Desired::Clear { .. }
        ));
        c.mode = FilterMode::Block;
        c.enabled = false;
        let p = phase(&c, at("2026-12-01T12:00:00Z"));
        assert_eq!(
            compute(&c, &p, &Catalog::build(&[], 1), &[], 10),
            Desired::Clear {
                why: "the filter is off".into()
            }
        );
    }
}
