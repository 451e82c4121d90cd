//! Every example frame in `docs/wire/` decodes, re-encodes to the same JSON, and the
//! documented mutual-auth vector reproduces: the docs cannot drift from the code.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a step that fails should stop the test"
)]

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

/// The signed-result vector (made with Python's `cryptography`, not with this crate)
/// verifies here: canonical JSON, both digests, the message and the signature, and a
/// changed answer does not.
#[test]
fn documented_signed_result_vector_verifies() {
    use kenny_proto::frame::Frame;
    use kenny_proto::proof::{self, ResultProof};
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(docs_wire().join("vectors/signed_result.json")).unwrap())
            .unwrap();
    let Frame::Request(request) = decode(&v["request"].to_string(), Limits::AUTHENTICATED).unwrap() else {
        panic!("the vector's request is not a request frame")
    };
    let Frame::Response(response) = decode(&v["response"].to_string(), Limits::AUTHENTICATED).unwrap() else {
        panic!("the vector's response is not a response frame")
    };
    let args = Value::Object(request.args.clone());
    assert_eq!(
        String::from_utf8(proof::canonical_json(&args)).unwrap(),
        v["args_canonical"]
    );
    assert_eq!(proof::args_digest(&request.args), v["args_sha256"]);
    assert_eq!(response.outcome_digest(), v["outcome_sha256"]);
    let wire = response.proof.clone().unwrap();
    let rebuilt = ResultProof {
        request_id: request.id,
        agent_id: v["agent_id"].as_str().unwrap().to_owned(),
        tool: request.tool,
        args_sha256: proof::args_digest(&request.args),
        outcome_sha256: response.outcome_digest(),
        at_ms: wire.at_ms,
        sig: wire.sig,
    };
    let hex: String = rebuilt.message().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, v["message_hex"]);
    let key = kenny_proto::auth::parse_public_key(v["agent_public_key_b64"].as_str().unwrap()).unwrap();
    rebuilt.verify(&key).unwrap();
    let mut changed = response;
    changed.result.as_mut().unwrap()["stdout"] = Value::from("elsewhere\n");
    let forged = ResultProof {
        outcome_sha256: changed.outcome_digest(),
        ..rebuilt
    };
    assert!(forged.verify(&key).is_err());
}

/// docs/agent.md lists every tool of the catalog, so the page cannot fall behind it.
#[test]
fn the_agent_page_names_every_tool() {
    let page_path = docs_wire().parent().expect("docs/").join("agent.md");
    let page = std::fs::read_to_string(&page_path).expect("docs/agent.md");
    let missing: Vec<_> = kenny_proto::catalog::TOOLS
        .iter()
        .map(|t| t.name())
        .filter(|name| !page.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "docs/agent.md does not mention {missing:?}");
}

/// The documented update order verifies against the documented server key (the same
/// throwaway seed as the mutual-auth vector), and any edit to it breaks the signature.
#[test]
fn documented_update_order_verifies() {
    use kenny_proto::frame::Frame;
    use kenny_proto::update::{OrderError, UpdateOrder};
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(docs_wire().join("vectors/mutual_auth.json")).unwrap()).unwrap();
    let server_key = kenny_proto::auth::parse_public_key(v["server_public_key_b64"].as_str().unwrap()).unwrap();
    let text = std::fs::read_to_string(docs_wire().join("request_agent_update.json")).unwrap();
    let Frame::Request(request) = decode(&text, Limits::AUTHENTICATED).unwrap() else {
        panic!("request_agent_update.json is not a request");
    };
    let order = UpdateOrder::from_args(&request.args).unwrap();
    let manifest = order.verify(&server_key).unwrap();
    assert_eq!(
        (manifest.agent_id.as_str(), manifest.version.as_str(), manifest.size),
        (v["agent_id"].as_str().unwrap(), "0.2.0", 35)
    );
    let tampered = UpdateOrder {
        manifest: order.manifest.replace("\"size\":35", "\"size\":36"),
        ..order
    };
    assert_eq!(tampered.verify(&server_key), Err(OrderError::BadSignature));
}

fn repo_file(name: &str) -> String {
    let path = docs_wire().join("../..").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README's tool list names every tool of the catalog.
#[test]
fn the_readme_names_every_tool() {
    let readme = repo_file("README.md");
    let missing: Vec<_> = kenny_proto::catalog::TOOLS
        .iter()
        .map(|t| t.name())
        .filter(|name| !readme.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "README.md does not list {missing:?}");
}

/// Every word inside a `code span` of `text`.
fn code_words(text: &str) -> std::collections::HashSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// ARCHITECTURE.md names every module of every crate (as a word in a code span), so a
/// new module cannot go unmapped.
#[test]
fn the_architecture_map_names_every_module() {
    let words = code_words(&repo_file("ARCHITECTURE.md"));
    let crates = docs_wire().join("../../crates");
    let mut missing = Vec::new();
    let mut seen = 0;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // Test-only directories (`tests/`) are not modules of the map.
                if path.file_name().is_some_and(|n| n != "tests") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let module = match stem.as_str() {
                "lib" | "main" | "tests" => continue,
                "mod" => dir.file_name().unwrap().to_string_lossy().into_owned(),
                _ => stem,
            };
            seen += 1;
            if !words.contains(&module) {
                missing.push(path.strip_prefix(&crates).unwrap_or(&path).display().to_string());
            }
        }
    }
    assert!(seen > 100, "expected the workspace's modules, found {seen}");
    missing.sort();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name these modules: {missing:?}"
    );
}

/// The e2e README's table lists every test file.
#[test]
fn the_e2e_readme_lists_every_test_file() {
    let readme = repo_file("tests/e2e/README.md");
    let dir = docs_wire().join("../../tests/e2e");
    let mut missing: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("test_") && n.ends_with(".py"))
        .filter(|n| !readme.contains(&format!("| `{n}` |")))
        .collect();
    missing.sort();
    assert!(missing.is_empty(), "tests/e2e/README.md does not list {missing:?}");
}
