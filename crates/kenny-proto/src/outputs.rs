//! What each forwarded tool returns on success, as the JSON Schema the MCP layer
//! declares for it (`outputSchema`).
//!
//! A client such as the official MCP SDK checks every successful result against this
//! schema and refuses one that does not match, so a schema here is a promise the agent
//! must keep on every OS: the top-level fields marked required are the ones every
//! implementation writes, nested fields are described with the types they can take
//! (`null` included where a platform may not know), and extra fields are allowed so an
//! agent can add one without breaking older clients. The e2e suite calls every tool
//! through that SDK, which is what checks these against real results.

use serde_json::{Map, Value, json};

use crate::catalog::Tool;

/// The schema of `tool`'s successful result, as MCP `outputSchema`.
pub fn output_schema(tool: Tool) -> Value {
    // One arm per tool and no wildcard: a new tool cannot be listed without saying
    // what it returns.
    match tool {
        Tool::ShellExec | Tool::PowershellExec => object(
            &[
                ("stdout", string("Standard output, cut at the agent's limit.")),
                ("stderr", string("Standard error, cut at the agent's limit.")),
                (
                    "exit_code",
                    nullable(integer("Exit status; null when the process was killed by a signal.")),
                ),
                ("truncated", boolean("Whether output was cut.")),
            ],
            &[("duration_ms", integer("How long the command ran."))],
        ),
        Tool::FsList => object(
            &[
                ("path", string("The directory listed.")),
                (
                    "entries",
                    array(item(&[
                        ("name", string("File name.")),
                        ("kind", string("file, dir, symlink or other.")),
                        ("size", nullable(integer("Size in bytes; null for directories."))),
                        ("modified", nullable(string("Last modification time, RFC 3339."))),
                    ])),
                ),
                ("truncated", boolean("Whether more entries exist than were returned.")),
            ],
            &[
                ("count", integer("Entries returned.")),
                ("total", integer("Entries in the directory.")),
            ],
        ),
        Tool::FsRead => object(
            &[
                ("path", string("The file read.")),
                ("content", string("The bytes read: text, or base64 when `binary`.")),
                ("truncated", boolean("Whether the file goes on past what was read.")),
            ],
            &[
                ("binary", boolean("Whether `content` is base64.")),
                ("bytes_read", integer("Bytes read.")),
                ("offset", integer("Where reading started.")),
                ("size", integer("The file's size.")),
            ],
        ),
        Tool::FsSearch => object(
            &[
                ("path", string("Where the search started.")),
                (
                    "matches",
                    array(item(&[
                        ("path", string("A matching path.")),
                        ("kind", string("file, dir, symlink or other.")),
                        ("size", nullable(integer("Size in bytes."))),
                    ])),
                ),
                ("truncated", boolean("Whether the search stopped at its limit.")),
            ],
            &[
                ("visited", integer("Entries looked at.")),
                ("errors", integer("Directories that could not be read.")),
            ],
        ),
        // Without `path` the volumes; with one, the sizes under it.
        Tool::FsDiskUsage => {
            let mut schema = object(
                &[],
                &[
                    (
                        "volumes",
                        array(item(&[
                            ("mount", string("Mount point or drive.")),
                            ("total_bytes", integer("Capacity.")),
                            ("free_bytes", integer("Free space.")),
                            ("percent_used", integer("Share used, 0 to 100.")),
                        ])),
                    ),
                    ("path", string("The directory measured.")),
                    ("total_bytes", integer("Bytes under it.")),
                    ("files", integer("Files counted.")),
                    ("dirs", integer("Directories counted.")),
                    ("errors", integer("Entries that could not be read.")),
                    ("truncated", boolean("Whether the walk stopped at its limit.")),
                    (
                        "top",
                        array(item(&[
                            ("name", string("Entry name.")),
                            ("kind", string("file or dir.")),
                            ("bytes", integer("Bytes under it.")),
                        ])),
                    ),
                ],
            );
            schema["anyOf"] = json!([{"required": ["volumes"]}, {"required": ["path", "total_bytes", "top"]}]);
            schema
        }
        Tool::DiagProcesses => object(
            &[
                (
                    "processes",
                    array(item(&[
                        ("pid", integer("Process id.")),
                        ("name", string("Process name.")),
                        ("cpu_percent", number("CPU use.")),
                        ("memory_bytes", integer("Resident memory.")),
                    ])),
                ),
                ("truncated", boolean("Whether more processes exist.")),
            ],
            &[
                ("total", integer("Processes running.")),
                ("sort_by", string("The order used.")),
            ],
        ),
        Tool::DiagServices => object(
            &[
                ("source", string("Where the list came from (systemd, sysv, windows).")),
                ("count", integer("Services returned.")),
                ("truncated", boolean("Whether more services matched.")),
                ("services", array(item(&[("name", string("Service name."))]))),
            ],
            &[
                ("state", string("The state filter used.")),
                ("note", string("What the agent could not see, if anything.")),
            ],
        ),
        Tool::DiagEventlog => object(
            &[
                (
                    "source",
                    string("Where entries came from (journal, syslog file, Windows event log)."),
                ),
                ("count", integer("Entries returned.")),
                ("truncated", boolean("Whether more entries matched.")),
                ("entries", array(item(&[("message", string("The entry's text."))]))),
            ],
            &[
                ("notes", array(string("A limit or a gap in what was read."))),
                ("file", string("The log file read, when one was.")),
            ],
        ),
        Tool::DiagAutostart => object(
            &[
                ("count", integer("Entries returned.")),
                ("truncated", boolean("Whether more entries exist.")),
                (
                    "entries",
                    array(item(&[
                        ("name", string("Entry name.")),
                        ("kind", string("Where it is registered.")),
                    ])),
                ),
                ("notes", array(string("A place that could not be read."))),
            ],
            &[],
        ),
        Tool::NetConfig => object(
            &[(
                "interfaces",
                array(item(&[
                    ("name", string("Interface name.")),
                    ("addresses", array(string("An address with prefix length."))),
                ])),
            )],
            &[
                ("hostname", nullable(string("The PC's host name."))),
                ("dns_servers", array(string("A resolver address."))),
                ("default_gateway", nullable(string("The default IPv4 gateway."))),
                ("default_routes", array(item(&[]))),
            ],
        ),
        Tool::NetDnsFlush => object(
            &[("flushed", boolean("Whether a cache was flushed."))],
            &[
                ("cache", nullable(string("The cache flushed, if the PC has one."))),
                ("note", string("What happened, in words.")),
            ],
        ),
        Tool::NetAdapterReset => object(
            &[
                ("adapter", string("The adapter reset.")),
                ("reset", boolean("Whether it was taken down and up.")),
            ],
            &[
                ("method", string("How it was reset.")),
                ("was_up", boolean("Link state before.")),
                ("is_up", boolean("Link state after.")),
                ("state_before", string("Operational state before.")),
                ("state_after", string("Operational state after.")),
            ],
        ),
        Tool::NetPing => object(
            &[
                ("host", string("The host named.")),
                ("reachable", boolean("Whether any reply came back.")),
                ("sent", integer("Probes sent.")),
                ("received", integer("Replies received.")),
            ],
            &[
                ("address", nullable(string("The address probed."))),
                ("loss_percent", number("Share of probes lost.")),
                ("method", string("ICMP or TCP.")),
                ("rtt_ms", nullable(item(&[]))),
            ],
        ),
        Tool::NetDnsLookup => object(
            &[
                ("host", string("The name looked up.")),
                ("resolved", boolean("Whether it resolved.")),
                ("addresses", array(string("An address it resolved to."))),
            ],
            &[("elapsed_ms", number("How long the lookup took."))],
        ),
        Tool::NetPortCheck => object(
            &[
                ("host", string("The host named.")),
                ("port", integer("The TCP port.")),
                ("status", string("open, closed, timeout or unresolved.")),
            ],
            &[
                ("address", nullable(string("The address tried."))),
                ("connect_ms", nullable(number("Time to connect."))),
            ],
        ),
        // The picture itself travels as an MCP image block; these are its facts.
        Tool::ScreenCapture => object(
            &[
                ("mime_type", string("The image type, e.g. image/png.")),
                ("width", integer("Width sent, in pixels.")),
                ("height", integer("Height sent, in pixels.")),
            ],
            &[
                ("bytes", integer("Size of the encoded image.")),
                ("source_width", integer("Width of the screen.")),
                ("source_height", integer("Height of the screen.")),
                ("grayscale", boolean("Whether colour was dropped.")),
            ],
        ),
        Tool::WingetList => object(
            &[
                ("manager", string("The package manager asked (winget, apt, dnf).")),
                (
                    "packages",
                    array(item(&[
                        ("id", string("Package id.")),
                        ("name", string("Display name.")),
                    ])),
                ),
                ("count", integer("Packages returned.")),
                ("truncated", boolean("Whether more matched.")),
            ],
            &[
                ("total", integer("Packages that matched.")),
                ("note", string("A limit of the listing.")),
            ],
        ),
        Tool::WingetInstall | Tool::WingetUninstall | Tool::WingetUpdate => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("manager", string("The package manager used.")),
                (
                    "changed",
                    boolean("Whether anything was installed, removed or upgraded."),
                ),
                ("output", string("What the manager printed, cut at the agent's limit.")),
            ],
            &[
                (
                    "id",
                    nullable(string("The package acted on; null when all were updated.")),
                ),
                ("all", boolean("Every package with an update was upgraded.")),
                ("exit_code", nullable(integer("The manager's exit status."))),
                ("truncated", boolean("Whether output was cut.")),
                ("version", string("The installed version afterwards.")),
                ("note", string("Anything the caller should know.")),
            ],
        ),
        Tool::WebfilterStatus => object(
            &[
                ("supported", boolean("Whether this PC can filter.")),
                ("active", boolean("Whether a block list is in force.")),
            ],
            &[
                ("entry_count", integer("Domains blocked.")),
                ("hosts_file", string("The hosts file used.")),
                (
                    "list_hash",
                    nullable(string("Hash of the list in force, as given when it was applied.")),
                ),
                (
                    "content_hash",
                    nullable(string(
                        "Hash of the domains the block holds now; differs from list_hash when the file was edited.",
                    )),
                ),
                ("applied_at", nullable(string("When it was applied."))),
                ("doh_policy", item(&[])),
            ],
        ),
        Tool::WebfilterApply => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("applied", integer("Domains now blocked.")),
            ],
            &[
                ("applied_at", string("When it was applied.")),
                ("list_hash", string("Hash of the list in force.")),
                ("hosts_file", string("The hosts file written.")),
                ("dns_cache_flushed", boolean("Whether the DNS cache was flushed.")),
                (
                    "doh_policy_applied",
                    boolean("Whether browsers were told not to bypass it."),
                ),
            ],
        ),
        Tool::WebfilterClear => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("removed_entries", integer("Domains no longer blocked.")),
            ],
            &[
                ("hosts_file", string("The hosts file written.")),
                ("doh_policy_cleared", boolean("Whether the browser policy was removed.")),
            ],
        ),
        Tool::RemotehelpStatus => object(
            &[
                ("installed", boolean("Whether Quick Assist is installed.")),
                (
                    "interactive_session",
                    boolean("Whether someone is signed in at the screen."),
                ),
            ],
            &[
                ("version", nullable(string("Quick Assist's version."))),
                ("internet_ok", boolean("Whether Microsoft's service is reachable.")),
                ("user", nullable(string("The account signed in at the screen."))),
            ],
        ),
        Tool::RemotehelpStart => object(
            &[("launched", boolean("Whether Quick Assist was started."))],
            &[
                ("pid", nullable(integer("Its process id."))),
                ("user", string("The account it was started for.")),
                ("note", nullable(string("What the person at the PC should do next."))),
            ],
        ),
        Tool::RemotehelpStop => object(
            &[("stopped", boolean("Whether any Quick Assist process was stopped."))],
            &[
                ("processes", integer("Processes stopped.")),
                ("note", string("Why nothing was stopped.")),
            ],
        ),
        Tool::TelemetryCollect => object(
            &[
                ("collected_at", string("When the snapshot was taken, RFC 3339.")),
                (
                    "snapshot",
                    json!({
                        "type": "object",
                        "description": "Section name -> its findings; every section has a status (ok, warn, crit, unknown) and a one-line summary.",
                        "additionalProperties": item(&[
                            ("status", string("ok, warn, crit or unknown.")),
                            ("summary", string("The finding in one line.")),
                        ]),
                    }),
                ),
            ],
            &[],
        ),
        Tool::AgentUpdate => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("staged_version", string("The version now on trial.")),
            ],
            &[
                ("previous_version", string("The version it replaces.")),
                ("binary", string("Where the new build was put.")),
                (
                    "trial_secs",
                    integer("How long the new build is on trial before it is kept."),
                ),
                ("note", string("What happens next.")),
            ],
        ),
        Tool::AccountCreate => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("principal", string("The account's name.")),
                ("kind", string("`local`.")),
            ],
            &[
                ("admin", boolean("Whether it is a local administrator.")),
                ("sid", string("Windows: its SID.")),
                ("uid", integer("Linux: its user id.")),
                ("home", string("Linux: its home directory.")),
                ("note", string("Anything the caller should know.")),
            ],
        ),
        Tool::AccountDelete => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("principal", string("The account deleted.")),
                (
                    "profile_removed",
                    boolean("Whether its home directory or profile was deleted too."),
                ),
            ],
            &[("note", string("Anything the caller should know."))],
        ),
        Tool::AccountSetEnabled => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("principal", string("The account.")),
                ("kind", string("local, microsoft, azure_ad or domain.")),
                ("enabled", boolean("Whether it may sign in now.")),
            ],
            &[
                ("changed", boolean("Whether anything had to change.")),
                ("note", string("Anything the caller should know.")),
            ],
        ),
        Tool::AccountSetAdmin => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("principal", string("The account.")),
                ("kind", string("local, microsoft, azure_ad or domain.")),
                ("admin", boolean("Whether it is a local administrator now.")),
            ],
            &[
                ("changed", boolean("Whether anything had to change.")),
                (
                    "groups",
                    array(string("The administrators' groups it was added to or removed from.")),
                ),
            ],
        ),
        Tool::AccountSetLogonRights => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("principal", string("The account.")),
                ("kind", string("local, microsoft, azure_ad or domain.")),
                (
                    "deny",
                    array(string("The ways in now refused: network, remote_interactive.")),
                ),
            ],
            &[
                (
                    "mechanism",
                    string("How it is enforced: `sshd DenyUsers` or `user rights`."),
                ),
                ("config_file", string("Linux: kenny's sshd drop-in.")),
                (
                    "sshd_reloaded",
                    boolean("Linux: whether a running sshd was told to reload."),
                ),
                ("note", string("Anything the caller should know.")),
            ],
        ),
        Tool::AccountSessionAction => object(
            &[
                ("ok", boolean("Always true on success.")),
                ("principal", string("The account.")),
                ("action", string("lock or logoff.")),
                (
                    "sessions",
                    array(item(&[
                        ("session_id", integer("The session's number.")),
                        (
                            "state",
                            string("Its state before the action (active, online, closing, disc...)."),
                        ),
                        ("acted", boolean("Whether the action was carried out on it.")),
                    ])),
                ),
            ],
            &[
                ("warned_seconds", integer("How long the person was warned before.")),
                ("note", string("Anything the caller should know.")),
            ],
        ),
        Tool::PasswordPolicySet => object(
            &[
                ("ok", boolean("Always true on success.")),
                (
                    "applies_to",
                    string("`local_only`: local accounts, not a domain's or Microsoft's."),
                ),
                (
                    "policy",
                    item(&[
                        ("min_length", integer("Shortest password allowed.")),
                        ("max_age_days", integer("Days before a change is due; 0 never.")),
                        (
                            "lockout_threshold",
                            integer("Wrong passwords before a lockout; 0 never."),
                        ),
                    ]),
                ),
            ],
            &[
                ("files", array(string("Linux: the configuration files changed."))),
                (
                    "accounts_updated",
                    array(string("Linux: accounts whose maximum password age was set.")),
                ),
                ("note", string("Anything the caller should know.")),
            ],
        ),
    }
}

/// An object with these fields; `required` ones always present, others sometimes.
pub fn object(required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let mut properties = Map::new();
    for (name, schema) in required.iter().chain(optional) {
        properties.insert((*name).to_owned(), schema.clone());
    }
    let names: Vec<&str> = required.iter().map(|(name, _)| *name).collect();
    json!({"type": "object", "properties": properties, "required": names})
}

/// A nested object: fields described, none promised.
fn item(fields: &[(&str, Value)]) -> Value {
    let mut schema = object(&[], fields);
    if let Some(map) = schema.as_object_mut() {
        map.remove("required");
    }
    schema
}

pub fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

pub fn integer(description: &str) -> Value {
    json!({"type": "integer", "description": description})
}

pub fn number(description: &str) -> Value {
    json!({"type": "number", "description": description})
}

pub fn boolean(description: &str) -> Value {
    json!({"type": "boolean", "description": description})
}

pub fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// The same schema, or `null`.
pub fn nullable(mut schema: Value) -> Value {
    if let Some(kind) = schema.get("type").cloned() {
        schema["type"] = json!([kind, "null"]);
    }
    schema
}

/// Whether `value` fits `schema`, for the parts of JSON Schema this module writes
/// (`type`, `properties`, `required`, `items`, `additionalProperties`, `anyOf` of
/// `required`). Tests use it to hold translated answers to the schemas; a client checks
/// with a full validator.
pub fn conforms(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "$")
}

fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    if let Some(kind) = schema.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            other => other.as_str().into_iter().collect(),
        };
        if !kinds.iter().any(|k| is_type(k, value)) {
            return Err(format!("{at} is {value}, not {}", kinds.join(" or ")));
        }
    }
    let Some(map) = value.as_object() else {
        if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
            for (i, item) in list.iter().enumerate() {
                check(items, item, &format!("{at}[{i}]"))?;
            }
        }
        return Ok(());
    };
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        let name = name.as_str().unwrap_or_default();
        if !map.contains_key(name) {
            return Err(format!("{at}.{name} is required"));
        }
    }
    if let Some(alternatives) = schema.get("anyOf").and_then(Value::as_array)
        && !alternatives.iter().any(|alt| check(alt, value, at).is_ok())
    {
        return Err(format!("{at} matches none of its alternatives"));
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for (name, v) in map {
        let sub = props
            .and_then(|p| p.get(name))
            .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
        if let Some(sub) = sub {
            check(sub, v, &format!("{at}.{name}"))?;
        }
    }
    Ok(())
}

fn is_type(kind: &str, value: &Value) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_declares_an_object_whose_required_fields_are_described() {
        for tool in Tool::ALL {
            let schema = output_schema(*tool);
            assert_eq!(schema["type"], "object", "{tool}");
            let props = schema["properties"].as_object().unwrap();
            let required = schema["required"].as_array().unwrap();
            let alternatives = schema["anyOf"].as_array().map_or(0, Vec::len);
            assert!(!required.is_empty() || alternatives > 1, "{tool} promises nothing");
            for name in required {
                assert!(props.contains_key(name.as_str().unwrap()), "{tool}: {name}");
            }
        }
    }

    #[test]
    fn the_checker_finds_what_a_validator_would() {
        let shell = output_schema(Tool::ShellExec);
        assert_eq!(
            conforms(
                &shell,
                &json!({"stdout": "", "stderr": "", "exit_code": null, "truncated": false})
            ),
            Ok(())
        );
        assert!(
            conforms(
                &shell,
                &json!({"stdout": 1, "stderr": "", "exit_code": 0, "truncated": false})
            )
            .is_err()
        );
        assert!(conforms(&shell, &json!({"stdout": ""})).is_err());
        let usage = output_schema(Tool::FsDiskUsage);
        assert_eq!(conforms(&usage, &json!({"volumes": []})), Ok(()));
        assert!(conforms(&usage, &json!({"files": 1})).is_err());
    }

    #[test]
    fn nullable_widens_the_type() {
        assert_eq!(nullable(integer("x"))["type"], json!(["integer", "null"]));
    }
}
