//! The modules of each of our crates form no import cycle: a module that names
//! `crate::x` (or `super::x`) depends on `x`, and no chain of those leads back to where
//! it started. A cycle is where layers blur (a handler reaching into what its caller
//! holds); this test names the modules of any cycle so it is broken where it appears.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a step that fails should stop the test"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`oauth::register`) -> code without comments or the test module, for the crate
/// in `crates/<krate>`.
fn modules(krate: &str) -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src");
    let mut found = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap().with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            let name = parts.join("::");
            if matches!(name.as_str(), "lib" | "main") || parts.last().is_some_and(|p| p.starts_with("tests")) {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            // Code only: a doc comment that links to a module is not an import.
            let code = source
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            found.insert(name, code);
        }
    }
    found
}

/// The deepest existing module a path names (`oauth::register::problem` -> `oauth::register`).
fn resolve(modules: &BTreeMap<String, String>, parts: &[&str]) -> Option<String> {
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|candidate| modules.contains_key(candidate))
}

fn edges(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let path = regex::Regex::new(r"\b(crate|super)::((?:[a-z_]+::)*[a-z_]+)").unwrap();
    let group = regex::Regex::new(r"use crate::\{([^;]*)\};").unwrap();
    let mut graph = BTreeMap::new();
    for (name, code) in modules {
        let mut targets = BTreeSet::new();
        let mut named: Vec<(bool, String)> = path
            .captures_iter(code)
            .map(|c| (&c[1] == "super", c[2].to_owned()))
            .collect();
        for c in group.captures_iter(code) {
            for item in c[1].split(',') {
                let head: String = item
                    .trim()
                    .chars()
                    .take_while(|ch| ch.is_ascii_lowercase() || *ch == '_' || *ch == ':')
                    .collect();
                if !head.is_empty() {
                    named.push((false, head.trim_end_matches(':').to_owned()));
                }
            }
        }
        for (relative, target) in named {
            let mut parts: Vec<&str> = if relative {
                name.split("::").collect::<Vec<_>>()[..name.split("::").count() - 1].to_vec()
            } else {
                Vec::new()
            };
            parts.extend(target.split("::"));
            if let Some(to) = resolve(modules, &parts)
                && to != *name
            {
                targets.insert(to);
            }
        }
        graph.insert(name.clone(), targets);
    }
    graph
}

/// A cycle through `start`, if there is one.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((at, trail)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == start {
                return Some([trail.clone(), vec![start.to_owned()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [trail.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

/// Every cycle among `krate`'s modules, each as `a -> b -> a`.
fn cycles(krate: &str, at_least: usize) -> Vec<String> {
    let modules = modules(krate);
    assert!(
        modules.len() >= at_least,
        "expected {krate}'s modules, found {}",
        modules.len()
    );
    let graph = edges(&modules);
    graph
        .keys()
        .filter_map(|m| cycle_from(&graph, m))
        .map(|c| c.join(" -> "))
        .collect()
}

#[test]
fn the_servers_modules_import_each_other_without_a_cycle() {
    let graph = edges(&modules("kenny-server"));
    assert!(
        graph["forward"].contains("registry") && graph["guard"].contains("session"),
        "the graph must see imports: {:?}",
        graph["forward"]
    );
    let found = cycles("kenny-server", 60);
    assert!(
        found.is_empty(),
        "import cycles among the server's modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_agents_modules_import_each_other_without_a_cycle() {
    let graph = edges(&modules("kenny-agent"));
    assert!(
        graph["tools::fs"].contains("tools::bounded"),
        "the graph must see imports: {:?}",
        graph["tools::fs"]
    );
    // The one cycle kept on purpose: the POSIX walker hands each simple command to the
    // program rules, and those hand `sh -c '...'`, `env`, `xargs` or `find -exec`
    // arguments back to the walker. It is one recursive judge of a command line in
    // two files (the shell's grammar, the programs' rules); a trait between them would
    // hide the recursion, not remove it.
    let allowed = [
        "guard::posix -> guard::programs -> guard::posix",
        "guard::programs -> guard::posix -> guard::programs",
    ];
    let found: Vec<String> = cycles("kenny-agent", 60)
        .into_iter()
        .filter(|c| !allowed.contains(&c.as_str()))
        .collect();
    assert!(
        found.is_empty(),
        "import cycles among the agent's modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_protocol_crates_modules_import_each_other_without_a_cycle() {
    let found = cycles("kenny-proto", 8);
    assert!(
        found.is_empty(),
        "import cycles among kenny-proto's modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_cycle_when_there_is_one() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.insert("a".into(), ["b".to_owned()].into());
    graph.insert("b".into(), ["c".to_owned()].into());
    graph.insert("c".into(), ["a".to_owned()].into());
    assert_eq!(
        cycle_from(&graph, "a"),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    graph.insert("c".into(), BTreeSet::new());
    assert_eq!(cycle_from(&graph, "a"), None);
}
