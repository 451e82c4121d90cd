//! The two tool dialects an agent may speak over the same 0.17 wire, and the
//! translation that lets the existing kenny's agents serve kenny's tool surface.
//!
//! The frames are the same; what differs is inside `request.args` and
//! `response.result`. kenny's agent says which dialect it speaks with
//! `meta.dialect` in its `register` frame (the existing server keeps unknown `meta`
//! fields, so that agent still works there); an agent that says nothing is the
//! existing kenny's, which names some arguments differently (`fs_search.root`,
//! `diag_services.filter`, `diag_eventlog.count`, `net_adapter_reset.name`), answers
//! in its own shapes (`screen_capture` as `image_b64`, `telemetry_collect` as a bare
//! snapshot) and ignores arguments it does not know.
//!
//! Because it ignores them silently, an argument it does not have is never just
//! dropped: a limit the server can apply itself (`limit`, `max_results`, `max_bytes`)
//! is applied to the answer, and one that would change what the call does (`offset`,
//! a `state` filter, a glob) is refused with `unsupported`, saying to update the agent.
//! Every translated answer fits the tool's `outputSchema` (`crate::outputs`).

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::catalog::{Tool, ToolSpec};

/// The `meta.dialect` value of kenny's agent.
pub const CURRENT: &str = "2";

/// Which tool dialect an agent speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// kenny's own: the catalog's names and result shapes.
    Current,
    /// The existing kenny's agent (protocol 0.8 to 0.17).
    Kenny017,
}

impl Dialect {
    /// From the `meta.dialect` an agent sent (or did not).
    pub fn from_meta(dialect: Option<&str>) -> Dialect {
        match dialect {
            Some(_) => Dialect::Current,
            None => Dialect::Kenny017,
        }
    }
}

/// A call the existing kenny's agent cannot serve as asked; the message says why and
/// what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untranslatable(pub String);

/// What the existing kenny's agent does not have at all.
fn missing_tool(tool: Tool) -> Option<&'static str> {
    match tool {
        Tool::NetPing | Tool::NetDnsLookup | Tool::NetPortCheck => Some("has no network probes"),
        // It would download from a URL the caller names; kenny only sends signed orders.
        Tool::AgentUpdate => Some("cannot verify kenny's signed update orders"),
        _ => None,
    }
}

/// Arguments it would ignore although they change what the call does.
fn refused_args(tool: Tool) -> &'static [&'static str] {
    match tool {
        Tool::FsRead => &["offset"],
        Tool::FsSearch => &["max_depth"],
        Tool::FsDiskUsage => &["path", "top"],
        Tool::DiagServices => &["state"],
        Tool::DiagEventlog => &["unit", "priority", "since"],
        Tool::ScreenCapture => &["display"],
        _ => &[],
    }
}

fn update_hint(what: String) -> Untranslatable {
    Untranslatable(format!(
        "{what}; this PC runs the existing kenny's agent (protocol 0.17): install kenny-agent on it to use this"
    ))
}

/// Our (checked, normalized) arguments as the existing kenny's agent reads them.
pub fn legacy_args(spec: &ToolSpec, mut args: Map<String, Value>) -> Result<Map<String, Value>, Untranslatable> {
    let tool = spec.tool;
    if let Some(why) = missing_tool(tool) {
        return Err(update_hint(format!("{tool} is not available: that agent {why}")));
    }
    for name in refused_args(tool) {
        if args.get(*name).is_some_and(|v| !v.is_null()) {
            return Err(update_hint(format!("{tool} cannot honour `{name}` on this PC")));
        }
    }
    let rename = |args: &mut Map<String, Value>, ours: &str, theirs: &str| {
        if let Some(value) = args.remove(ours) {
            args.insert(theirs.to_owned(), value);
        }
    };
    match tool {
        // Without a timeout of its own it would wait forever; ours is the catalog's.
        Tool::ShellExec | Tool::PowershellExec => {
            args.entry("timeout_s").or_insert(json!(spec.default_timeout_s));
        }
        Tool::FsSearch => {
            let pattern = args.get("pattern").and_then(Value::as_str).unwrap_or_default();
            args.insert("pattern".into(), Value::from(name_fragment(pattern)?));
            rename(&mut args, "path", "root");
        }
        Tool::DiagServices => rename(&mut args, "name", "filter"),
        Tool::DiagEventlog => {
            args.entry("log").or_insert(json!("System"));
            let count = args.remove("limit").unwrap_or(json!(100));
            args.insert("count".into(), count);
        }
        Tool::NetAdapterReset => rename(&mut args, "adapter", "name"),
        // Its bare call is "upgrade everything", which ours spells `all: true`.
        Tool::WingetUpdate => {
            args.remove("all");
        }
        Tool::WebfilterApply => {
            args.entry("doh_policy").or_insert(json!("leave"));
            if !args.contains_key("list_hash") {
                let domains = args.get("domains").cloned().unwrap_or_default();
                args.insert("list_hash".into(), Value::from(list_hash(&domains)));
            }
        }
        _ => {}
    }
    Ok(args)
}

/// It matches a fragment of the name; a glob that is only a fragment between stars
/// says the same, anything richer cannot be asked of it.
fn name_fragment(pattern: &str) -> Result<String, Untranslatable> {
    let fragment = pattern.trim_matches('*');
    if fragment.is_empty() || fragment.contains(['*', '?', '[', ']']) {
        return Err(update_hint(format!(
            "fs_search cannot match the pattern `{pattern}` on this PC: that agent matches a fragment of a name, e.g. `report` or `.log`"
        )));
    }
    Ok(fragment.to_owned())
}

/// Its list hash: the first 16 hex digits of the SHA-256 of the sorted, distinct,
/// lower-cased names, one per line (it recomputes it; the field must be present).
fn list_hash(domains: &Value) -> String {
    let mut names: Vec<String> = domains
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_lowercase).collect())
        .unwrap_or_default();
    names.sort();
    names.dedup();
    crate::results::webfilter_list_hash(&names)
}

/// The existing kenny's answer to `tool` (called with our `args`) in our shape; `now`
/// (RFC 3339) dates a snapshot it returned without a time.
pub fn current_result(tool: Tool, args: &Map<String, Value>, result: Value, now: &str) -> Value {
    let Value::Object(mut r) = result else {
        return result;
    };
    let arg_str = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
    let limit = |name: &str, default: usize| {
        args.get(name)
            .and_then(Value::as_u64)
            .map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
    };
    match tool {
        Tool::ShellExec | Tool::PowershellExec => {
            r.entry("truncated").or_insert(json!(false));
        }
        Tool::FsList => {
            let entries = take_list(&mut r, "entries")
                .into_iter()
                .map(|e| {
                    let is_dir = e.get("is_dir").and_then(Value::as_bool).unwrap_or(false);
                    json!({
                        "name": e.get("name").cloned().unwrap_or(json!("")),
                        "kind": if is_dir { "dir" } else { "file" },
                        "size": if is_dir { Value::Null } else { e.get("bytes").cloned().unwrap_or(Value::Null) },
                    })
                })
                .collect();
            put_limited(&mut r, "entries", entries, limit("limit", 500));
            r.entry("path").or_insert(json!(arg_str("path")));
        }
        Tool::FsRead => {
            r.entry("path").or_insert(json!(arg_str("path")));
            if let (Some(max), Some(Value::String(content))) =
                (args.get("max_bytes").and_then(Value::as_u64), r.get_mut("content"))
                && content.len() as u64 > max
            {
                let mut cut = usize::try_from(max).unwrap_or(usize::MAX);
                while !content.is_char_boundary(cut) {
                    cut -= 1;
                }
                content.truncate(cut);
                r.insert("truncated".into(), json!(true));
            }
            r.entry("truncated").or_insert(json!(false));
        }
        Tool::FsSearch => {
            let matches = take_list(&mut r, "matches")
                .into_iter()
                .map(|m| match m {
                    Value::String(path) => json!({ "path": path }),
                    other => other,
                })
                .collect();
            put_limited(&mut r, "matches", matches, limit("max_results", 100));
            r.entry("path").or_insert(json!(arg_str("path")));
        }
        Tool::DiagProcesses => {
            let mut processes: Vec<Value> = take_list(&mut r, "processes")
                .into_iter()
                .map(|mut p| {
                    rename_key(&mut p, "cpu", "cpu_percent");
                    rename_key(&mut p, "mem_bytes", "memory_bytes");
                    p
                })
                .collect();
            let key = if arg_str("sort_by") == "cpu" {
                "cpu_percent"
            } else {
                "memory_bytes"
            };
            processes.sort_by(|a, b| {
                let n = |v: &Value| v.get(key).and_then(Value::as_f64).unwrap_or(0.0);
                n(b).total_cmp(&n(a))
            });
            r.insert("total".into(), json!(processes.len()));
            put_limited(&mut r, "processes", processes, limit("limit", 25));
        }
        Tool::DiagServices => {
            let services = take_list(&mut r, "services");
            r.entry("source").or_insert(json!("windows"));
            put_limited(&mut r, "services", services, limit("limit", 300));
        }
        Tool::DiagEventlog => {
            let entries = take_list(&mut r, "events");
            let entries = if entries.is_empty() {
                take_list(&mut r, "entries")
            } else {
                entries
            };
            r.entry("source").or_insert(json!("windows"));
            put_limited(&mut r, "entries", entries, usize::MAX);
        }
        Tool::DiagAutostart => {
            let entries = take_list(&mut r, "entries");
            r.entry("notes").or_insert(json!([]));
            put_limited(&mut r, "entries", entries, usize::MAX);
        }
        Tool::NetConfig => {
            let interfaces = take_list(&mut r, "interfaces")
                .into_iter()
                .map(|mut i| {
                    rename_key(&mut i, "ips", "addresses");
                    i
                })
                .collect();
            r.insert("interfaces".into(), Value::Array(interfaces));
            if let Some(dns) = r.remove("dns") {
                r.entry("dns_servers").or_insert(dns);
            }
        }
        Tool::NetDnsFlush => {
            let ok = r.get("ok").and_then(Value::as_bool).unwrap_or(false);
            r.entry("flushed").or_insert(json!(ok));
        }
        Tool::NetAdapterReset => {
            let ok = r.get("ok").and_then(Value::as_bool).unwrap_or(false);
            r.entry("reset").or_insert(json!(ok));
            r.entry("adapter").or_insert(json!(arg_str("adapter")));
        }
        Tool::ScreenCapture => {
            if let Some(Value::String(data)) = r.remove("image_b64") {
                let format = r.remove("format").and_then(|f| f.as_str().map(str::to_owned));
                let (width, height) = png_size(&data).unwrap_or((0, 0));
                r.insert(
                    "mime_type".into(),
                    json!(format!("image/{}", format.as_deref().unwrap_or("png"))),
                );
                r.insert("width".into(), json!(width));
                r.insert("height".into(), json!(height));
                r.insert("source_width".into(), json!(width));
                r.insert("source_height".into(), json!(height));
                r.insert("data_base64".into(), Value::String(data));
            }
        }
        Tool::WingetList => {
            let needle = arg_str("query").to_lowercase();
            let packages: Vec<Value> = take_list(&mut r, "packages")
                .into_iter()
                .filter(|p| {
                    needle.is_empty()
                        || ["id", "name"].iter().any(|k| {
                            p.get(*k)
                                .and_then(Value::as_str)
                                .is_some_and(|s| s.to_lowercase().contains(&needle))
                        })
                })
                .collect();
            r.entry("manager").or_insert(json!("winget"));
            r.insert("total".into(), json!(packages.len()));
            put_limited(&mut r, "packages", packages, limit("limit", 500));
        }
        Tool::WingetInstall | Tool::WingetUninstall | Tool::WingetUpdate => {
            let ok = r.get("ok").and_then(Value::as_bool).unwrap_or(false);
            r.entry("manager").or_insert(json!("winget"));
            r.entry("changed").or_insert(json!(ok));
            if let Some(log) = r.remove("log") {
                r.entry("output").or_insert(log);
            }
            r.entry("output").or_insert(json!(""));
            match args.get("id") {
                Some(id) => r.entry("id").or_insert(id.clone()),
                None => r.entry("all").or_insert(json!(true)),
            };
        }
        Tool::TelemetryCollect => {
            if !r.contains_key("snapshot") {
                let snapshot = std::mem::take(&mut r);
                r.insert("collected_at".into(), json!(now));
                r.insert("snapshot".into(), Value::Object(snapshot));
            }
        }
        Tool::FsDiskUsage
        | Tool::NetPing
        | Tool::NetDnsLookup
        | Tool::NetPortCheck
        | Tool::WebfilterStatus
        | Tool::WebfilterApply
        | Tool::WebfilterClear
        | Tool::RemotehelpStatus
        | Tool::RemotehelpStart
        | Tool::RemotehelpStop
        | Tool::AgentUpdate
        // Its agents have the account tools with these names, arguments and result
        // shapes (our results only add fields), so they pass as they are.
        | Tool::AccountCreate
        | Tool::AccountDelete
        | Tool::AccountSetEnabled
        | Tool::AccountSetAdmin
        | Tool::AccountSetLogonRights
        | Tool::AccountSessionAction
        | Tool::PasswordPolicySet => {}
    }
    Value::Object(r)
}

fn take_list(r: &mut Map<String, Value>, key: &str) -> Vec<Value> {
    match r.remove(key) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// Puts at most `max` items under `key`, with `count` and `truncated` saying so.
fn put_limited(r: &mut Map<String, Value>, key: &str, mut items: Vec<Value>, max: usize) {
    let cut = items.len() > max;
    items.truncate(max);
    r.insert("count".into(), json!(items.len()));
    let was_cut = r.get("truncated").and_then(Value::as_bool).unwrap_or(false);
    r.insert("truncated".into(), json!(cut || was_cut));
    r.insert(key.into(), Value::Array(items));
}

fn rename_key(v: &mut Value, from: &str, to: &str) {
    if let Some(map) = v.as_object_mut()
        && let Some(value) = map.remove(from)
    {
        map.entry(to).or_insert(value);
    }
}

/// Width and height from a PNG's header (the IHDR chunk comes first).
fn png_size(b64: &str) -> Option<(u32, u32)> {
    // 24 header bytes are in the first 32 base64 characters.
    let head = base64::engine::general_purpose::STANDARD.decode(b64.get(..32)?).ok()?;
    if head.get(..8)? != b"\x89PNG\r\n\x1a\n" || head.get(12..16)? != b"IHDR" {
        return None;
    }
    let word = |at: usize| Some(u32::from_be_bytes(head.get(at..at + 4)?.try_into().ok()?));
    Some((word(16)?, word(20)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outputs::{conforms, output_schema};

    const NOW: &str = "2026-12-01T00:00:00Z";

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn wire(tool: Tool, args: Value) -> Result<Value, Untranslatable> {
        legacy_args(tool.spec(), obj(args)).map(Value::Object)
    }

    #[test]
    fn our_names_become_theirs() {
        assert_eq!(
            wire(Tool::FsSearch, json!({"path": "C:\\Users", "pattern": "*.pdf"})),
            Ok(json!({"root": "C:\\Users", "pattern": ".pdf"}))
        );
        assert_eq!(
            wire(Tool::DiagServices, json!({"name": "Spooler"})),
            Ok(json!({"filter": "Spooler"}))
        );
        assert_eq!(
            wire(Tool::DiagEventlog, json!({"limit": 5})),
            Ok(json!({"log": "System", "count": 5}))
        );
        assert_eq!(
            wire(Tool::NetAdapterReset, json!({"adapter": "Wi-Fi"})),
            Ok(json!({"name": "Wi-Fi"}))
        );
        assert_eq!(wire(Tool::WingetUpdate, json!({"all": true})), Ok(json!({})));
        assert_eq!(
            wire(Tool::PowershellExec, json!({"script": "Get-Date"})),
            Ok(json!({"script": "Get-Date", "timeout_s": 60}))
        );
        let apply = wire(Tool::WebfilterApply, json!({"domains": ["B.example", "a.example"]})).unwrap();
        assert_eq!(apply["doh_policy"], "leave");
        assert_eq!(apply["list_hash"].as_str().map(str::len), Some(16));
    }

    #[test]
    fn what_it_would_silently_ignore_is_refused() {
        for (tool, args) in [
            (Tool::FsRead, json!({"path": "/x", "offset": 10})),
            (Tool::DiagServices, json!({"state": "failed"})),
            (Tool::FsSearch, json!({"path": "/", "pattern": "a*b"})),
            (Tool::NetPing, json!({"host": "example.com"})),
            (Tool::AgentUpdate, json!({})),
        ] {
            let Err(Untranslatable(message)) = wire(tool, args) else {
                panic!("{tool} should be refused");
            };
            assert!(message.contains("install kenny-agent"), "{message}");
        }
    }

    #[test]
    fn their_answers_take_our_shapes() {
        let cases = [
            (
                Tool::ShellExec,
                json!({"command": "x"}),
                json!({"stdout": "a", "stderr": "", "exit_code": -1}),
            ),
            (
                Tool::FsList,
                json!({"path": "C:\\", "limit": 1}),
                json!({"entries": [{"name": "Users", "is_dir": true, "bytes": 0}, {"name": "x.txt", "is_dir": false, "bytes": 3}]}),
            ),
            (
                Tool::FsRead,
                json!({"path": "C:\\a.txt", "max_bytes": 2}),
                json!({"content": "héllo", "truncated": false}),
            ),
            (
                Tool::FsSearch,
                json!({"path": "C:\\", "pattern": "x"}),
                json!({"matches": ["C:\\x.txt"]}),
            ),
            (
                Tool::DiagProcesses,
                json!({"limit": 1}),
                json!({"processes": [{"pid": 4, "name": "System", "cpu": 0.0, "mem_bytes": 10}, {"pid": 9, "name": "big", "cpu": 1.5, "mem_bytes": 99}]}),
            ),
            (
                Tool::DiagServices,
                json!({}),
                json!({"services": [{"name": "Spooler", "display": "Print Spooler", "status": "Running", "start": "Auto"}]}),
            ),
            (
                Tool::DiagEventlog,
                json!({}),
                json!({"events": [{"time": "2026-06-01T00:00:00Z", "level": "Error", "source": "Disk", "message": "bad block"}]}),
            ),
            (
                Tool::DiagAutostart,
                json!({}),
                json!({"entries": [{"name": "OneDrive", "command": "x.exe", "location": "HKCU Run"}]}),
            ),
            (
                Tool::NetConfig,
                json!({}),
                json!({"interfaces": [{"name": "Ethernet", "mac": "00:11", "ips": ["10.0.0.2/24"]}], "dns": []}),
            ),
            (Tool::NetDnsFlush, json!({}), json!({"ok": true})),
            (Tool::NetAdapterReset, json!({"adapter": "Wi-Fi"}), json!({"ok": false})),
            (
                Tool::WingetList,
                json!({"query": "git"}),
                json!({"packages": [{"id": "Git.Git", "name": "Git", "version": "2.45", "available": ""}, {"id": "7zip.7zip", "name": "7-Zip", "version": "23", "available": "24"}]}),
            ),
            (
                Tool::WingetUpdate,
                json!({"all": true}),
                json!({"ok": true, "log": "done"}),
            ),
            (
                Tool::TelemetryCollect,
                json!({}),
                json!({"memory": {"status": "ok", "summary": "fine", "percent_used": 40}}),
            ),
            (Tool::RemotehelpStop, json!({}), json!({"stopped": true})),
            (
                Tool::RemotehelpStatus,
                json!({}),
                json!({"installed": true, "version": "2.0", "internet_ok": true, "interactive_session": false}),
            ),
        ];
        for (tool, args, theirs) in cases {
            let ours = current_result(tool, &obj(args), theirs, NOW);
            conforms(&output_schema(tool), &ours).unwrap_or_else(|e| panic!("{tool}: {e}: {ours}"));
        }
        let listed = current_result(
            Tool::FsList,
            &obj(json!({"path": "C:\\", "limit": 1})),
            json!({"entries": [{"name": "Users", "is_dir": true, "bytes": 0}, {"name": "x", "is_dir": false, "bytes": 3}]}),
            NOW,
        );
        assert_eq!(
            listed["entries"],
            json!([{"name": "Users", "kind": "dir", "size": null}])
        );
        assert_eq!(
            (listed["count"].clone(), listed["truncated"].clone()),
            (json!(1), json!(true))
        );
        let read = current_result(
            Tool::FsRead,
            &obj(json!({"path": "a", "max_bytes": 2})),
            json!({"content": "héllo", "truncated": false}),
            NOW,
        );
        assert_eq!(
            (read["content"].clone(), read["truncated"].clone()),
            (json!("h"), json!(true))
        );
        let procs = current_result(
            Tool::DiagProcesses,
            &obj(json!({"limit": 1})),
            json!({"processes": [{"pid": 4, "name": "System", "cpu": 0.0, "mem_bytes": 10}, {"pid": 9, "name": "big", "cpu": 1.5, "mem_bytes": 99}]}),
            NOW,
        );
        assert_eq!(procs["processes"][0]["name"], "big", "sorted by memory, largest first");
        let found = current_result(
            Tool::WingetList,
            &obj(json!({"query": "GIT"})),
            json!({"packages": [{"id": "Git.Git", "name": "Git"}, {"id": "7zip.7zip", "name": "7-Zip"}]}),
            NOW,
        );
        assert_eq!(found["count"], 1);
    }

    #[test]
    fn account_tools_pass_to_its_agents_as_they_are() {
        let cases = [
            (
                Tool::AccountCreate,
                json!({"name": "visitor", "password": "not a real one", "display_name": "A visitor", "admin": false}),
                json!({"ok": true, "principal": "visitor", "kind": "local"}),
            ),
            (
                Tool::AccountDelete,
                json!({"principal": "visitor", "remove_profile": false}),
                json!({"ok": true, "principal": "visitor", "profile_removed": false}),
            ),
            (
                Tool::AccountSetEnabled,
                json!({"principal": "teen", "enabled": true}),
                json!({"ok": true, "principal": "teen", "kind": "microsoft", "enabled": true}),
            ),
            (
                Tool::AccountSetAdmin,
                json!({"principal": "teen", "admin": true}),
                json!({"ok": true, "principal": "teen", "kind": "local", "admin": true}),
            ),
            (
                Tool::AccountSetLogonRights,
                json!({"principal": "teen", "deny": []}),
                json!({"ok": true, "principal": "teen", "kind": "local", "deny": []}),
            ),
            (
                Tool::AccountSessionAction,
                json!({"principal": "teen", "action": "logoff"}),
                json!({"ok": true, "principal": "teen", "action": "logoff", "sessions": [{"session_id": 3, "state": "disc", "acted": true}]}),
            ),
            (
                Tool::PasswordPolicySet,
                json!({"lockout_threshold": 5}),
                json!({"ok": true, "applies_to": "local_only", "policy": {"lockout_threshold": 5}}),
            ),
        ];
        for (tool, args, theirs) in cases {
            assert_eq!(wire(tool, args.clone()), Ok(args.clone()), "{tool}");
            let ours = current_result(tool, &obj(args), theirs.clone(), NOW);
            assert_eq!(ours, theirs, "{tool}");
            conforms(&output_schema(tool), &ours).unwrap_or_else(|e| panic!("{tool}: {e}: {ours}"));
        }
    }

    #[test]
    fn a_screenshot_becomes_an_image_with_its_size() {
        // A 1×1 PNG, as its agent sends it.
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
        let ours = current_result(
            Tool::ScreenCapture,
            &Map::new(),
            json!({"image_b64": png, "format": "png"}),
            NOW,
        );
        assert_eq!(ours["mime_type"], "image/png");
        assert_eq!((ours["width"].clone(), ours["height"].clone()), (json!(1), json!(1)));
        assert_eq!(ours["data_base64"], png);
        assert!(ours.get("image_b64").is_none());
    }

    #[test]
    fn our_own_answers_pass_unchanged() {
        let ours = json!({"collected_at": "2026-01-01T00:00:00Z", "snapshot": {}});
        assert_eq!(
            current_result(Tool::TelemetryCollect, &Map::new(), ours.clone(), NOW),
            ours
        );
        let shot = json!({"mime_type": "image/png", "width": 2, "height": 2, "data_base64": "x"});
        assert_eq!(
            current_result(Tool::ScreenCapture, &Map::new(), shot.clone(), NOW),
            shot
        );
    }
}
