//! `docs/agent.md` against the section registry: every section has its entry, in the
//! registry's order, and every field a section sends (from a collection on this machine
//! and from every recorded Windows output) is named in that entry.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use serde_json::Value;

use super::{SECTIONS, collect};

const DOC: &str = "docs/agent.md";
/// Where the per-section entries start in the doc, and how each begins.
const CHAPTER: &str = "### Sections";
const ENTRY: &str = "#### `";

/// Fields every section has, documented once for all.
const COMMON: &[&str] = &["status", "summary", "applicable", "reason", "collected"];

/// Section name → its entry's text.
fn entries() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(DOC);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = text
        .find(CHAPTER)
        .unwrap_or_else(|| panic!("{DOC} has no `{CHAPTER}` heading"));
    let chapter = &text[start..];
    // The chapter ends at the next heading of its level or above.
    let end = chapter[CHAPTER.len()..]
        .find("\n## ")
        .into_iter()
        .chain(chapter[CHAPTER.len()..].find("\n### "))
        .min()
        .map_or(chapter.len(), |at| at + CHAPTER.len());
    chapter[..end]
        .split(ENTRY)
        .skip(1)
        .map(|entry| {
            let (name, body) = entry.split_once('`').unwrap_or((entry, ""));
            (name.to_owned(), body.to_owned())
        })
        .collect()
}

/// Top-level fields of each section in the Windows recordings' expected outputs.
fn recorded_fields() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/windows");
    let mut fields: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for dir in fs::read_dir(&root).into_iter().flatten().filter_map(Result::ok) {
        let section = dir.file_name().to_string_lossy().into_owned();
        for file in fs::read_dir(dir.path()).into_iter().flatten().filter_map(Result::ok) {
            if !file.file_name().to_string_lossy().ends_with(".expected.json") {
                continue;
            }
            let value: Value = serde_json::from_str(&fs::read_to_string(file.path()).unwrap()).unwrap();
            let keys = value.as_object().into_iter().flat_map(|o| o.keys().cloned());
            fields.entry(section.clone()).or_default().extend(keys);
        }
    }
    fields
}

#[test]
fn every_section_has_its_entry_in_order() {
    let documented: Vec<String> = entries().into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        documented, SECTIONS,
        "{DOC}: the `{ENTRY}name`` entries under `{CHAPTER}`"
    );
}

#[tokio::test]
async fn every_field_a_section_sends_is_documented() {
    let entries: BTreeMap<String, String> = entries().into_iter().collect();
    let mut sent: BTreeMap<String, BTreeSet<String>> = recorded_fields();
    let all: Vec<String> = SECTIONS.iter().map(|s| (*s).to_owned()).collect();
    for (name, section) in collect(Some(&all)).await {
        let keys = section.as_object().into_iter().flat_map(|o| o.keys().cloned());
        sent.entry(name).or_default().extend(keys);
    }
    let mut missing = Vec::new();
    for (section, fields) in &sent {
        let entry = entries.get(section).map_or("", String::as_str);
        for field in fields.iter().filter(|f| !COMMON.contains(&f.as_str())) {
            if !entry.contains(&format!("`{field}`")) {
                missing.push(format!("{section}.{field}"));
            }
        }
    }
    assert!(missing.is_empty(), "fields sent but not named in {DOC}: {missing:?}");
}
