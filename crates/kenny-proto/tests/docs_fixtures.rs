//! Every example frame in `docs/wire/` decodes, re-encodes to the same JSON, and the
//! documented mutual-auth vector reproduces: the docs cannot drift from the code.

use std::path::PathBuf;

mod common;

use kenny_proto::frame::{Limits, decode, encode};
use serde_json::Value;

fn docs_wire() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/wire")
}

#[test]
fn documented_frames_round_trip() {
    let mut seen = 0;
    for entry in std::fs::read_dir(docs_wire()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let frame = decode(&text, Limits::AUTHENTICATED).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let original: Value = serde_json::from_str(&text).unwrap();
        let again: Value = serde_json::from_str(&encode(&frame)).unwrap();
        assert_eq!(original, again, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 12, "expected the documented frames, found {seen}");
}

#[test]
fn documented_mutual_auth_vector_reproduces() {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(docs_wire().join("vectors/mutual_auth.json")).unwrap()).unwrap();
    common::check_mutual_auth_vector(&v);
}

/// docs/agent.md lists every tool of the catalog, so the page cannot fall behind it.
#[test]
fn the_agent_page_names_every_tool() {
    let page_path = docs_wire().parent().expect("docs/").join("agent.md");
    let page = std::fs::read_to_string(&page_path).expect("docs/agent.md");
    let missing: Vec<_> = kenny_proto::catalog::TOOLS
        .iter()
        .map(|t| t.name)
        .filter(|name| !page.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "docs/agent.md does not mention {missing:?}");
}
