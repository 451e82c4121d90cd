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
