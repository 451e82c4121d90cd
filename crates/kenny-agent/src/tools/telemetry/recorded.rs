//! Every Windows query against its recorded outputs, on any platform.
//!
//! `testdata/windows/<section>/` holds cases: `<case>.stdout` is what PowerShell
//! printed (`<case>.stderr` and `<case>.exit` when it failed), `<case>.expected.json` the
//! section the parser must make of it, collected at [`NOW`]. A failing parse is expected
//! as the `crit` section the runner would send. Each section needs a `typical` case, an
//! `empty…` or `missing…` one (the feature absent or off) and an `error…` one.
//!
//! `KENNY_BLESS=1 cargo test -p kenny-agent --lib recorded` writes the expected files
//! from what the parsers make now; read every one before committing it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use time::OffsetDateTime;
use time::macros::datetime;

use super::command::Output;
use super::{SECTIONS, failed_section, windows};

/// When every recording is taken to have been collected.
pub(super) const NOW: OffsetDateTime = datetime!(2026-06-05 00:00:00 UTC);

/// Cmdlets and types that reach the network or start other programs: no section but
/// `net_quality` (not a PowerShell query) may send traffic.
const FORBIDDEN: &[&str] = &[
    "invoke-webrequest",
    "invoke-restmethod",
    "test-connection",
    "test-netconnection",
    "net.webclient",
    "net.sockets",
    "start-process",
    "invoke-expression",
    "downloadstring",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/windows")
}

struct Case {
    name: String,
    output: Output,
    expected: Option<Value>,
    expected_path: PathBuf,
}

fn cases(section: &str) -> Vec<Case> {
    let dir = root().join(section);
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{section}: no recordings in {} ({e})", dir.display()))
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".stdout").map(str::to_owned))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let read = |ext: &str| fs::read_to_string(dir.join(format!("{name}.{ext}"))).ok();
            let exit: i32 = read("exit").map_or(0, |e| e.trim().parse().expect("an exit code"));
            let expected_path = dir.join(format!("{name}.expected.json"));
            let expected = read("expected.json")
                .map(|text| serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display())));
            Case {
                output: Output {
                    stdout: read("stdout").unwrap_or_default(),
                    stderr: read("stderr").unwrap_or_default(),
                    success: exit == 0,
                    truncated: false,
                },
                name,
                expected,
                expected_path,
            }
        })
        .collect()
}

fn parsed(query: &windows::Query, output: &Output) -> Value {
    let section = (query.parse)(output, NOW).unwrap_or_else(|reason| failed_section(&reason));
    Value::Object(section)
}

#[test]
fn every_windows_query_matches_its_recordings() {
    let bless = std::env::var_os("KENNY_BLESS").is_some();
    let mut problems = BTreeMap::new();
    for &section in SECTIONS {
        let Some(query) = windows::query(section) else { continue };
        let cases = cases(section);
        let has = |prefixes: &[&str]| cases.iter().any(|c| prefixes.iter().any(|p| c.name.starts_with(p)));
        assert!(
            cases.len() >= 3 && has(&["typical"]) && has(&["empty", "missing"]) && has(&["error"]),
            "{section}: needs recordings named typical…, empty…/missing… and error…; has {:?}",
            cases.iter().map(|c| &c.name).collect::<Vec<_>>()
        );
        for case in cases {
            let got = parsed(query, &case.output);
            if bless {
                let text = serde_json::to_string_pretty(&got).unwrap() + "\n";
                fs::write(&case.expected_path, text).unwrap();
                continue;
            }
            match case.expected {
                Some(expected) if expected == got => {}
                Some(expected) => {
                    problems.insert(
                        format!("{section}/{}", case.name),
                        format!("expected {expected}\n   got {got}"),
                    );
                }
                None => {
                    problems.insert(
                        format!("{section}/{}", case.name),
                        format!("no expected file; got {got}"),
                    );
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_recordings_folder_belongs_to_a_windows_query() {
    for entry in fs::read_dir(root()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            SECTIONS.contains(&name.as_str()) && windows::query(&name).is_some(),
            "testdata/windows/{name} is not the recordings of a section read through PowerShell"
        );
    }
}

#[test]
fn every_windows_query_is_bounded_local_and_prints_json() {
    for &section in SECTIONS {
        let Some(query) = windows::query(section) else { continue };
        let script = query.script.to_ascii_lowercase();
        assert!(
            script.contains("$erroractionpreference"),
            "{section}: the script must say how errors stop it"
        );
        assert!(
            script.contains("convertto-json") && script.contains("-compress"),
            "{section}: the script must print compressed JSON"
        );
        if let Some(at) = script.rfind("convertto-json") {
            assert!(
                script[at..].contains("-depth"),
                "{section}: ConvertTo-Json needs -Depth (its default is 2)"
            );
        }
        for word in FORBIDDEN {
            assert!(!script.contains(word), "{section}: the script uses {word}");
        }
        assert!(
            query.limit.as_secs() >= 1 && query.limit.as_secs() <= 30,
            "{section}: a limit of {:?}",
            query.limit
        );
    }
}
