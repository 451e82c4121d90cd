//! Each tool's arguments as a Rust type. The catalog derives every argument schema
//! from these types (MCP `inputSchema`, the chat's tool list, the checks on both
//! sides), and the agent decodes a call into them once, so a handler reads fields the
//! compiler knows instead of looking names up in a JSON map.
//!
//! A field's doc comment is its description in the schema; `#[schemars(...)]` bounds
//! are checked by the catalog's `ToolSpec::validate_args` before decoding, with a
//! message that names the argument.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, forward_to_deserialize_any};
use serde_json::{Map, Value};

/// A tool that takes no arguments: anything passed is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellExecArgs {
    /// The command line, run by /bin/sh -c.
    #[schemars(length(max = 65536))]
    pub command: String,
    /// Seconds before the command and its whole process group are killed (default 60).
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PowershellExecArgs {
    /// The PowerShell script text.
    #[schemars(length(max = 65536))]
    pub script: String,
    /// Seconds before the command and its whole process group are killed (default 60).
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsListArgs {
    /// Absolute path of the directory.
    #[schemars(length(max = 4096))]
    pub path: String,
    /// Most entries to return (default 500).
    #[schemars(range(min = 1, max = 5000))]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsReadArgs {
    /// Absolute path of the file.
    #[schemars(length(max = 4096))]
    pub path: String,
    /// Byte offset to start at (default 0).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// Most bytes to return (default 65536).
    #[schemars(range(min = 1, max = 1_048_576))]
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsSearchArgs {
    /// Directory to search under.
    #[schemars(length(max = 4096))]
    pub path: String,
    /// Name fragment or glob, e.g. `report` or `*.log`.
    #[schemars(length(max = 256))]
    pub pattern: String,
    /// Most matches to return (default 100).
    #[schemars(range(min = 1, max = 1000))]
    pub max_results: Option<usize>,
    /// Deepest level to descend (default 12).
    #[schemars(range(min = 1, max = 64))]
    pub max_depth: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsDiskUsageArgs {
    /// Directory to size; omit for volumes.
    #[schemars(length(max = 4096))]
    pub path: Option<String>,
    /// How many of the largest children to list (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub top: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagProcessesArgs {
    /// `cpu` or `memory`.
    #[schemars(length(max = 16))]
    pub sort_by: Option<String>,
    /// How many processes (default 25).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagServicesArgs {
    /// `all` (default), `running`, `failed` or `stopped`.
    #[schemars(length(max = 16))]
    pub state: Option<String>,
    /// Only services whose name contains this (case-insensitive).
    #[schemars(length(max = 256))]
    pub name: Option<String>,
    /// Most services to return (default 300).
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagEventlogArgs {
    /// Windows: `System` (default), `Application` or `Security`. Linux: ignored.
    #[schemars(length(max = 64))]
    pub log: Option<String>,
    /// Linux: systemd unit (e.g. `ssh.service`). Windows: event source/provider name.
    #[schemars(length(max = 256))]
    pub unit: Option<String>,
    /// Most verbose level to include: `critical`, `error`, `warning` (default) or `info`.
    #[schemars(length(max = 16))]
    pub priority: Option<String>,
    /// Only entries after this: RFC 3339 time or a span back from now (`30m`, `6h`, `2d`). Default 24h.
    #[schemars(length(max = 64))]
    pub since: Option<String>,
    /// Most entries to return (default 100).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetAdapterResetArgs {
    /// Adapter name exactly as net_config lists it (e.g. `eth0`, `Wi-Fi`).
    #[schemars(length(max = 256))]
    pub adapter: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetPingArgs {
    /// Host name or IP address, e.g. `example.com` or `192.168.1.1`.
    #[schemars(length(max = 253))]
    pub host: String,
    /// Echo requests to send (default 4).
    #[schemars(range(min = 1, max = 10))]
    pub count: Option<u64>,
    /// Seconds to wait for each reply (default 2).
    #[schemars(range(min = 1, max = 10))]
    pub wait_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetDnsLookupArgs {
    /// Host name or IP address, e.g. `example.com` or `192.168.1.1`.
    #[schemars(length(max = 253))]
    pub host: String,
    /// Seconds before giving up (default 5).
    #[schemars(range(min = 1, max = 30))]
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetPortCheckArgs {
    /// Host name or IP address, e.g. `example.com` or `192.168.1.1`.
    #[schemars(length(max = 253))]
    pub host: String,
    /// TCP port number.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// Seconds before giving up (default 5).
    #[schemars(range(min = 1, max = 30))]
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenCaptureArgs {
    /// Widest the image may be, in pixels (default 1280); the result always stays under 150,000 characters.
    #[schemars(range(min = 160, max = 1920))]
    pub max_width: Option<u32>,
    /// Linux: X display to capture (default the agent's DISPLAY, else :0).
    #[schemars(length(max = 64))]
    pub display: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageListArgs {
    /// Only packages whose id or name contains this (case-insensitive).
    #[schemars(length(max = 256))]
    pub query: Option<String>,
    /// Most packages to return (default 500).
    #[schemars(range(min = 1, max = 5000))]
    pub limit: Option<usize>,
}

/// One package to install or remove.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageArgs {
    /// Package id: winget id on Windows, apt/dnf package name on Linux.
    #[schemars(length(max = 256))]
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageUpdateArgs {
    /// Package to upgrade; omit only together with `all`.
    #[schemars(length(max = 256))]
    pub id: Option<String>,
    /// Upgrade every package that has an update.
    pub all: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebfilterApplyArgs {
    /// Domain names to block, e.g. `example.com`, `www.example.com`.
    #[schemars(length(max = 10_000))]
    pub domains: Vec<String>,
    /// `disable` to turn browsers' DNS-over-HTTPS off, `leave` (default) to keep it.
    #[schemars(length(max = 16))]
    pub doh_policy: Option<String>,
    /// The caller's hash of this list, echoed back by webfilter_status; computed here when omitted.
    #[schemars(length(max = 128))]
    pub list_hash: Option<String>,
}

#[derive(Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountCreateArgs {
    /// Name of the new local account: letters, digits, `.`, `_` and `-` (not first); at most 32 characters on Linux, 20 on Windows.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// Its first password, 1 to 256 characters without line breaks (and without `:` on Linux). Handed to the PC's account tools on standard input; never logged, echoed or returned.
    #[schemars(length(min = 1, max = 256))]
    pub password: String,
    /// The person's full name, shown at sign-in (Linux: the GECOS field; Windows: FullName).
    #[schemars(length(max = 256))]
    pub display_name: Option<String>,
    /// Make the account a local administrator (Linux: the sudo, wheel or admin group; Windows: Administrators). Default false.
    pub admin: Option<bool>,
}

/// The password stays out of every `Debug` rendering (a `ToolCall` may be logged).
impl std::fmt::Debug for AccountCreateArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountCreateArgs")
            .field("name", &self.name)
            .field("password", &"<redacted>")
            .field("display_name", &self.display_name)
            .field("admin", &self.admin)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountDeleteArgs {
    /// The local account to delete, by name (Windows also takes its SID).
    #[schemars(length(min = 1, max = 256))]
    pub principal: String,
    /// Also delete its home directory and files (Linux: the home directory and mail spool; Windows: its user profile). Default false.
    pub remove_profile: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountSetEnabledArgs {
    /// The local account, by name (Windows also takes its SID).
    #[schemars(length(min = 1, max = 256))]
    pub principal: String,
    /// true to let it sign in again, false to stop every sign-in.
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountSetAdminArgs {
    /// The local account, by name (Windows also takes its SID).
    #[schemars(length(min = 1, max = 256))]
    pub principal: String,
    /// true to make it a local administrator, false to take that away.
    pub admin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountSetLogonRightsArgs {
    /// The local account, by name (Windows also takes its SID).
    #[schemars(length(min = 1, max = 256))]
    pub principal: String,
    /// The ways in to refuse it: `network` and/or `remote_interactive`; an empty list allows both again. On Linux both mean SSH.
    #[schemars(length(max = 8))]
    pub deny: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountSessionActionArgs {
    /// The local account whose sessions to act on, by name.
    #[schemars(length(min = 1, max = 256))]
    pub principal: String,
    /// `lock` (the screen locks, work stays open) or `logoff` (the session ends; unsaved work is lost).
    #[schemars(length(max = 16))]
    pub action: String,
    /// Seconds between a warning on the person's screen and the action (0 to 300; default 0, no warning).
    #[schemars(range(min = 0, max = 300))]
    pub warn_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordPolicySetArgs {
    /// Shortest password allowed for local accounts (Windows 0 to 14; Linux 6 to 64, pwquality's `minlen`).
    #[schemars(range(min = 0, max = 64))]
    pub min_length: Option<u64>,
    /// Days before a password must be changed; 0 means never (1 to 999 otherwise).
    #[schemars(range(min = 0, max = 999))]
    pub max_age_days: Option<u64>,
    /// Wrong passwords in a row before the account is locked for a while; 0 means never (at most 999).
    #[schemars(range(min = 0, max = 999))]
    pub lockout_threshold: Option<u64>,
}

/// What a caller may ask of `agent_update`. The agent never sees these: the server
/// turns them into a signed [`crate::update::UpdateOrder`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentUpdateArgs {
    /// The version to install, e.g. `0.2.0`; omit for the newest build the server has for this PC.
    #[schemars(length(max = 32))]
    pub version: Option<String>,
    /// Install the named `version` even though it is older than the running one (superusers only).
    pub allow_downgrade: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryCollectArgs {
    /// Names of the sections to collect; omit for all but the personal ones (web_activity, screen_time), which are collected only when named.
    #[schemars(length(max = 64))]
    pub sections: Option<Vec<String>>,
}

/// Arguments whose values are secrets (a new account's password): kept only as long as
/// a call needs them, and never shown back.
pub const SECRET_ARGS: &[&str] = &["password"];

/// What stands in for a secret argument's value wherever arguments are shown.
pub const SECRET_SHOWN: &str = "(secret, not shown)";

/// `args` with every secret argument's value replaced by [`SECRET_SHOWN`].
pub fn without_secrets(args: &Map<String, Value>) -> Map<String, Value> {
    args.iter()
        .map(|(k, v)| {
            let v = if SECRET_ARGS.contains(&k.as_str()) {
                Value::String(SECRET_SHOWN.into())
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// Telemetry sections about what people do on the PC (the sites they visit, how long
/// they use it). An agent collects them only when a call names them, never in its
/// periodic snapshot, and the chat asks the operator before naming them.
pub const PERSONAL_TELEMETRY_SECTIONS: &[&str] = &["web_activity", "screen_time"];

/// The argument schema of `T` as callers see it: an object of the fields' own
/// schemas, each with its description and bounds. A missing optional argument and
/// `null` mean the same, so the schema offers the type alone; generator annotations
/// (`$schema`, the Rust type's title and doc, integer formats) are left out.
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.meta_schema = None)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
        object.remove("description");
        object.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        object.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Some(Value::Object(props)) = object.get_mut("properties") {
            props.values_mut().for_each(tidy_property);
        }
    }
    schema
}

fn tidy_property(prop: &mut Value) {
    let Some(prop) = prop.as_object_mut() else { return };
    prop.remove("format");
    // An optional enum: `anyOf: [<the enum>, {"type": "null"}]` becomes the enum.
    if let Some(Value::Array(any_of)) = prop.get("anyOf") {
        let named: Vec<&Value> = any_of
            .iter()
            .filter(|s| s.get("type") != Some(&Value::from("null")))
            .collect();
        if let [Value::Object(only)] = named.as_slice() {
            let only = only.clone();
            prop.remove("anyOf");
            for (k, v) in only {
                prop.entry(k).or_insert(v);
            }
        }
    }
    if let Some(Value::Array(values)) = prop.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(types)) = prop.get("type") {
        let named: Vec<&Value> = types.iter().filter(|t| t.as_str() != Some("null")).collect();
        if let [only] = named.as_slice() {
            let only = (*only).clone();
            prop.insert("type".into(), only);
        }
    }
    if let Some(items) = prop.get_mut("items") {
        tidy_property(items);
    }
}

/// The field names of an argument struct in declaration order, as serde spells them:
/// the order a caller reads in "it takes: …" messages. (The schema's properties are
/// sorted by name.) Asks serde's derived `Deserialize` for the fields it expects.
pub(crate) fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    // The probe always ends in an error once it has the names; nothing is decoded.
    let _ = T::deserialize(FieldProbe { names: &mut names });
    names
}

struct FieldProbe<'a> {
    names: &'a mut &'static [&'static str],
}

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not an argument struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.names = fields;
        Err(de::Error::custom("field names read"))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_are_plain_objects_with_bounds_and_descriptions() {
        assert_eq!(
            schema_of::<ShellExecArgs>(),
            json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "maxLength": 65536,
                        "description": "The command line, run by /bin/sh -c.",
                    },
                    "timeout_s": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 3600,
                        "description": "Seconds before the command and its whole process group are killed (default 60).",
                    },
                },
                "required": ["command"],
                "additionalProperties": false,
            })
        );
        assert_eq!(
            schema_of::<NoArgs>(),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
        assert_eq!(
            schema_of::<TelemetryCollectArgs>()["properties"]["sections"],
            json!({
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 64,
                "description": "Names of the sections to collect; omit for all but the personal ones (web_activity, screen_time), which are collected only when named.",
            })
        );
    }

    #[test]
    fn field_names_keep_declaration_order() {
        assert_eq!(field_names::<AgentUpdateArgs>(), ["version", "allow_downgrade"]);
        assert_eq!(field_names::<FsReadArgs>(), ["path", "offset", "max_bytes"]);
        assert!(field_names::<NoArgs>().is_empty());
    }
}
