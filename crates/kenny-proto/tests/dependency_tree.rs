//! The dependency tree holds one version of each crate, except the pairs listed here
//! with the reason (two majors pulled by different upstream crates, none of ours to
//! unify). A new duplicate fails, so does an entry that no longer is one, and the crates
//! that carry our traffic or our keys may never come twice.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a step that fails should stop the test"
)]

use std::collections::BTreeMap;

/// Crate -> why more than one version is in the tree.
const ALLOWED: &[(&str, &str)] = &[
    ("base64", "axum on 0.22, hyper-util on 0.23"),
    ("bitflags", "png 0.17 on 1.x, everything else on 2.x"),
    ("block-buffer", "digest 0.10 and 0.11"),
    ("const-oid", "digest 0.10 and 0.11"),
    ("cpufeatures", "sha2 0.10 and 0.11"),
    ("crypto-common", "digest 0.10 and 0.11"),
    (
        "darling",
        "proc macros of brush-parser's dependencies (cached, bon) at two majors",
    ),
    ("darling_core", "as darling"),
    ("darling_macro", "as darling"),
    (
        "digest",
        "argon2's blake2 and ed25519-dalek on 0.10, rmcp's sha2 on 0.11",
    ),
    (
        "fallible-iterator",
        "rusqlite on 0.3, the PostgreSQL client (the store's second backend) on 0.2",
    ),
    ("foldhash", "as hashbrown"),
    (
        "getrandom",
        "ed25519-dalek's rand_core 0.6, totp-rs's rand 0.9, rmcp's rand 0.10",
    ),
    (
        "hashbrown",
        "rusqlite's hashlink, brush-parser's cached and rmcp's indexmap at three majors",
    ),
    (
        "hmac",
        "ours (TOTP, signed links) on 0.12, the PostgreSQL client's SCRAM on 0.13",
    ),
    ("miniz_oxide", "png on 0.8, flate2 (under png) on 0.9"),
    (
        "nom",
        "eventsource-stream (the chat's model stream) on 7, lettre (alert e-mail) on 8",
    ),
    ("r-efi", "as getrandom"),
    (
        "rand",
        "ed25519-dalek 2 needs rand_core 0.6 (rand 0.8, ours); totp-rs on 0.9; rmcp on 0.10",
    ),
    ("rand_chacha", "as rand"),
    ("rand_core", "as rand"),
    ("sha2", "ed25519-dalek and ours on 0.10, rmcp on 0.11"),
    ("syn", "rmcp's async-trait on syn 3, the other proc macros on syn 2"),
    (
        "winnow",
        "toml 0.9 (the server's settings file) on 0.7, its own toml_parser on 1.0",
    ),
    (
        "wasi",
        "only for wasm targets (never built here): getrandom 0.2 on 0.11, whoami (the PostgreSQL client's default user) on 0.14",
    ),
    (
        "windows-sys",
        "ring on 0.52, windows-service on 0.59, clap's anstream on 0.61",
    ),
];

/// Never more than one version: what speaks to agents and clients, and what holds keys.
const SINGLE: &[&str] = &[
    "tungstenite",
    "tokio-tungstenite",
    "tokio",
    "hyper",
    "axum",
    "rustls",
    "ring",
    "ed25519-dalek",
    "argon2",
    "rusqlite",
    "rmcp",
];

fn lock_versions() -> BTreeMap<String, Vec<String>> {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock")).unwrap();
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
                .map(|v| v.trim_end_matches('"').to_owned())
        };
        if let (Some(name), Some(version)) = (field("name"), field("version")) {
            versions.entry(name).or_default().push(version);
        }
    }
    versions
}

#[test]
fn one_version_of_each_crate_but_the_listed_pairs() {
    let versions = lock_versions();
    assert!(versions.len() > 100, "Cargo.lock read: {} crates", versions.len());
    let duplicated: Vec<&String> = versions.iter().filter(|(_, v)| v.len() > 1).map(|(n, _)| n).collect();
    for name in SINGLE {
        assert!(
            versions.get(*name).is_none_or(|v| v.len() == 1),
            "{name} is in the tree twice: {:?}",
            versions[*name]
        );
    }
    let unexplained: Vec<_> = duplicated
        .iter()
        .filter(|n| !ALLOWED.iter().any(|(a, _)| n.as_str() == *a))
        .map(|n| format!("{n} {:?}", versions[*n]))
        .collect();
    assert!(
        unexplained.is_empty(),
        "new duplicate versions (unify them, or add them to ALLOWED with the reason): {unexplained:?}"
    );
    let stale: Vec<_> = ALLOWED
        .iter()
        .filter(|(a, _)| !duplicated.iter().any(|n| n.as_str() == *a))
        .map(|(a, _)| *a)
        .collect();
    assert!(stale.is_empty(), "no longer duplicated, remove from ALLOWED: {stale:?}");
}
