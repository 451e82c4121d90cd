//! Wire compatibility with the existing kenny implementation (contract 0.17): every
//! reference frame decodes and re-encodes to the same JSON, and the mutual-auth vectors
//! reproduce byte for byte. The reference data is read from `../shared/` (or
//! `KENNY_WIRE_REFERENCE`), never copied into this repository. A plain clone has no
//! `../shared/`: then each test says it was skipped and why, and passes; a
//! `KENNY_WIRE_REFERENCE` that names no directory is an error.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a step that fails should stop the test"
)]

use std::path::PathBuf;

mod common;

use kenny_proto::frame::{Frame, Limits, decode, encode};
use serde_json::Value;

fn reference_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KENNY_WIRE_REFERENCE").map(PathBuf::from) {
        assert!(
            dir.is_dir(),
            "KENNY_WIRE_REFERENCE names {}, which is not a directory",
            dir.display()
        );
        return Some(dir);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/kenny-wire-0.17");
    if dir.is_dir() {
        return Some(dir);
    }
    eprintln!(
        "SKIPPED: the kenny 0.17 reference frames are not at {} (a plain clone has no ../shared/); check it out beside the repository or set KENNY_WIRE_REFERENCE to run the interop checks",
        dir.display()
    );
    None
}

/// The reference frames as (file name, text), or `None` when they are not here.
fn frames() -> Option<Vec<(String, String)>> {
    let mut out: Vec<_> = std::fs::read_dir(reference_dir()?)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    Some(out)
}

#[test]
fn every_reference_frame_round_trips() {
    let Some(frames) = frames() else { return };
    assert!(
        frames.len() >= 40,
        "expected the full reference set, found {}",
        frames.len()
    );
    let mut kinds = std::collections::BTreeSet::new();
    for (name, text) in frames {
        let frame = decode(&text, Limits::AUTHENTICATED).unwrap_or_else(|e| panic!("{name}: {e}"));
        kinds.insert(frame.kind());
        let original: Value = serde_json::from_str(&text).unwrap();
        let reencoded: Value = serde_json::from_str(&encode(&frame)).unwrap();
        assert_eq!(original, reencoded, "{name} changed on re-encoding");
    }
    for kind in [
        "register",
        "challenge",
        "auth",
        "request",
        "response",
        "telemetry",
        "log",
        "policy",
        "ping",
        "pong",
    ] {
        assert!(kinds.contains(kind), "no reference frame of type {kind}");
    }
}

#[test]
fn reference_frames_with_an_unknown_field_are_rejected() {
    let Some(frames) = frames() else { return };
    for (name, text) in frames {
        let mut value: Value = serde_json::from_str(&text).unwrap();
        value["surprise"] = Value::from(1);
        let err = decode(&value.to_string(), Limits::AUTHENTICATED).expect_err(&name);
        assert!(err.to_string().contains("unknown field `surprise`"), "{name}: {err}");
    }
}

#[test]
fn reference_frames_over_the_limit_are_rejected() {
    let Some(frames) = frames() else { return };
    let (name, text) = frames.into_iter().max_by_key(|(_, t)| t.len()).unwrap();
    let limits = Limits {
        max_frame_bytes: text.len() - 1,
    };
    assert!(
        decode(&text, limits).is_err(),
        "{name} should exceed a limit one byte smaller"
    );
}

#[test]
fn mutual_auth_vectors_reproduce_byte_for_byte() {
    let Some(dir) = reference_dir() else { return };
    let text = std::fs::read_to_string(dir.join("vectors/mutual_auth.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let s = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("vector field {k}"));
    assert_eq!(s("label"), kenny_proto::auth::TRANSCRIPT_LABEL);

    common::check_mutual_auth_vector(&v);

    // The reference handshake frames carry the same values.
    let read = |f: &str| decode(&std::fs::read_to_string(dir.join(f)).unwrap(), Limits::HANDSHAKE).unwrap();
    let Frame::Register(reg) = read("register.json") else {
        panic!("register.json")
    };
    assert_eq!(reg.client_nonce.as_deref(), Some(s("client_nonce_b64")));
    assert_eq!(reg.protocol.as_deref(), Some(kenny_proto::MUTUAL_AUTH_PROTOCOL));
    let Frame::Challenge(ch) = read("challenge.json") else {
        panic!("challenge.json")
    };
    assert_eq!(ch.server_sig, s("server_sig_b64"));
    let Frame::Auth(a) = read("auth.json") else {
        panic!("auth.json")
    };
    assert_eq!(a.agent_sig, s("agent_sig_b64"));
}

/// The existing agent's recorded answers, put into kenny's shapes, fit the
/// `outputSchema` each tool declares; its telemetry push decodes, and its snapshot is
/// what `telemetry_collect` returns once dated.
#[test]
fn the_existing_agents_recorded_answers_fit_our_schemas() {
    use kenny_proto::catalog::Tool;
    use kenny_proto::dialect::{Dialect, current_result};
    use kenny_proto::outputs::{conforms, output_schema};

    let Some(frames) = frames() else { return };
    let mut checked = 0;
    for (name, text) in &frames {
        let Some(tool) = name
            .strip_prefix("response_")
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(Tool::from_name)
        else {
            continue;
        };
        let Ok(Frame::Response(response)) = decode(text, Limits::AUTHENTICATED) else {
            panic!("{name} is not a response frame")
        };
        let Some(result) = response.result else { continue };
        let ours = current_result(tool, &serde_json::Map::new(), result, "2026-12-01T00:00:00Z");
        conforms(&output_schema(tool), &ours).unwrap_or_else(|e| panic!("{name}: {e}\n{ours}"));
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} recorded answers of catalog tools");

    let (_, text) = frames
        .iter()
        .find(|(n, _)| n == "telemetry_snapshot.json")
        .expect("telemetry_snapshot.json");
    let Frame::Telemetry(push) = decode(text, Limits::AUTHENTICATED).unwrap() else {
        panic!("telemetry_snapshot.json is not a telemetry frame")
    };
    let bare = Value::Object(push.snapshot);
    let collected = current_result(
        Tool::TelemetryCollect,
        &serde_json::Map::new(),
        bare,
        "2026-12-01T00:00:00Z",
    );
    conforms(&output_schema(Tool::TelemetryCollect), &collected).unwrap();

    // The agent that recorded them says nothing of a dialect: it is the existing kenny's.
    let (_, text) = frames
        .iter()
        .find(|(n, _)| n == "register.json")
        .expect("register.json");
    let Frame::Register(reg) = decode(text, Limits::HANDSHAKE).unwrap() else {
        panic!("register.json")
    };
    assert_eq!(reg.meta.map(|m| m.dialect()), Some(Dialect::Kenny017));
}
