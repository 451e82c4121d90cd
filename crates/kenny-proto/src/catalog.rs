//! The tool catalog: every forwarded tool's name, description, class, supported OSes
//! and argument schema. The agent dispatches from it, the server validates and builds
//! its MCP tool list from it, so the two can never drift apart.

use serde_json::{Map, Value, json};

/// The argument the server consumes for routing; it never reaches an agent.
pub const AGENT_ID_ARG: &str = "agent_id";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    ReadOnly,
    /// Small and reversible (flush DNS, start remote help).
    StandardChange,
    /// Anything else that changes state.
    NormalChange,
}

impl ToolClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::StandardChange => "standard_change",
            Self::NormalChange => "normal_change",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    Windows,
    Macos,
}

impl Os {
    pub fn as_str(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Windows => "windows",
            Os::Macos => "macos",
        }
    }

    /// The OS this binary was built for, if kenny supports it.
    pub fn current() -> Option<Os> {
        match std::env::consts::OS {
            "linux" => Some(Os::Linux),
            "windows" => Some(Os::Windows),
            "macos" => Some(Os::Macos),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum ParamKind {
    String { max_len: usize },
    Integer { min: i64, max: i64 },
    Boolean,
    StringList { max_items: usize },
}

#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub kind: ParamKind,
    pub required: bool,
    pub description: &'static str,
}

#[derive(Debug)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub class: ToolClass,
    /// Reads something personal (screen, files, browsing history).
    pub privacy_sensitive: bool,
    pub platforms: &'static [Os],
    pub params: &'static [Param],
    /// Longest the agent works on a call that sets no `timeout_s` of its own; the
    /// server waits this long (plus a grace) before answering `timeout` itself.
    pub default_timeout_s: u64,
}

const ALL_OS: &[Os] = &[Os::Linux, Os::Windows, Os::Macos];
const UNIX: &[Os] = &[Os::Linux, Os::Macos];
const WINDOWS: &[Os] = &[Os::Windows];

const fn p(name: &'static str, kind: ParamKind, required: bool, description: &'static str) -> Param {
    Param {
        name,
        kind,
        required,
        description,
    }
}

const PATH: ParamKind = ParamKind::String { max_len: 4096 };
const TIMEOUT: Param = p(
    "timeout_s",
    ParamKind::Integer { min: 1, max: 3600 },
    false,
    "Seconds before the command and its whole process group are killed (default 60).",
);

pub const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "shell_exec",
        title: "Run a shell command",
        description: "Run a command with `sh -c` on a Linux or macOS PC. Returns stdout, stderr, exit_code and whether output was truncated. On Windows PCs use powershell_exec instead.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        platforms: UNIX,
        params: &[
            p(
                "command",
                ParamKind::String { max_len: 65536 },
                true,
                "The command line, run by /bin/sh -c.",
            ),
            TIMEOUT,
        ],
        default_timeout_s: 60,
    },
    ToolSpec {
        name: "powershell_exec",
        title: "Run a PowerShell script",
        description: "Run a PowerShell script on a Windows PC. Returns stdout, stderr, exit_code and whether output was truncated. On Linux or macOS PCs use shell_exec instead.",
        class: ToolClass::NormalChange,
        privacy_sensitive: false,
        platforms: WINDOWS,
        params: &[
            p(
                "script",
                ParamKind::String { max_len: 65536 },
                true,
                "The PowerShell script text.",
            ),
            TIMEOUT,
        ],
        default_timeout_s: 60,
    },
    ToolSpec {
        name: "fs_list",
        title: "List a directory",
        description: "List the entries of a directory: name, kind (file, dir, symlink, other), size in bytes and modification time. Bounded; `truncated` says when entries were left out.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: true,
        platforms: ALL_OS,
        params: &[
            p("path", PATH, true, "Absolute path of the directory."),
            p(
                "limit",
                ParamKind::Integer { min: 1, max: 5000 },
                false,
                "Most entries to return (default 500).",
            ),
        ],
        default_timeout_s: 90,
    },
    ToolSpec {
        name: "fs_read",
        title: "Read a file",
        description: "Read a text file, at most max_bytes from offset (default 65536, cap 1048576). Non-UTF-8 bytes are replaced. Returns content, size, offset, bytes_read and truncated.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: true,
        platforms: ALL_OS,
        params: &[
            p("path", PATH, true, "Absolute path of the file."),
            p(
                "offset",
                ParamKind::Integer { min: 0, max: i64::MAX },
                false,
                "Byte offset to start at (default 0).",
            ),
            p(
                "max_bytes",
                ParamKind::Integer { min: 1, max: 1_048_576 },
                false,
                "Most bytes to return (default 65536).",
            ),
        ],
        default_timeout_s: 90,
    },
    ToolSpec {
        name: "fs_search",
        title: "Find files by name",
        description: "Search a directory tree for files whose name contains `pattern` (case-insensitive) or matches it as a glob with * and ?. Bounded in results, depth and entries visited.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: true,
        platforms: ALL_OS,
        params: &[
            p("path", PATH, true, "Directory to search under."),
            p(
                "pattern",
                ParamKind::String { max_len: 256 },
                true,
                "Name fragment or glob, e.g. `report` or `*.log`.",
            ),
            p(
                "max_results",
                ParamKind::Integer { min: 1, max: 1000 },
                false,
                "Most matches to return (default 100).",
            ),
            p(
                "max_depth",
                ParamKind::Integer { min: 1, max: 64 },
                false,
                "Deepest level to descend (default 12).",
            ),
        ],
        default_timeout_s: 90,
    },
    ToolSpec {
        name: "fs_disk_usage",
        title: "Disk usage",
        description: "Without a path: every mounted volume with total, free and percent used. With a path: the total size of that directory and its largest children.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        platforms: ALL_OS,
        params: &[
            p("path", PATH, false, "Directory to size; omit for volumes."),
            p(
                "top",
                ParamKind::Integer { min: 1, max: 100 },
                false,
                "How many of the largest children to list (default 10).",
            ),
        ],
        default_timeout_s: 90,
    },
    ToolSpec {
        name: "diag_processes",
        title: "Running processes",
        description: "Running processes with pid, name, CPU percent and memory, sorted by cpu or memory (default memory), top `limit` (default 25).",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        platforms: ALL_OS,
        params: &[
            p(
                "sort_by",
                ParamKind::String { max_len: 16 },
                false,
                "`cpu` or `memory`.",
            ),
            p(
                "limit",
                ParamKind::Integer { min: 1, max: 500 },
                false,
                "How many processes (default 25).",
            ),
        ],
        default_timeout_s: 30,
    },
    ToolSpec {
        name: "net_config",
        title: "Network configuration",
        description: "Network interfaces with their addresses, MAC and traffic counters, plus the hostname.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        platforms: ALL_OS,
        params: &[],
        default_timeout_s: 30,
    },
    ToolSpec {
        name: "telemetry_collect",
        title: "Collect health telemetry",
        description: "Collect a health snapshot now: sections disk, memory, uptime, os, each with status (ok, warn, crit) and a summary. `sections` limits which are collected.",
        class: ToolClass::ReadOnly,
        privacy_sensitive: false,
        platforms: ALL_OS,
        params: &[p(
            "sections",
            ParamKind::StringList { max_items: 32 },
            false,
            "Names of the sections to collect; omit for all.",
        )],
        default_timeout_s: 30,
    },
];

pub fn find(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|t| t.name == name)
}

impl ToolSpec {
    pub fn supports(&self, os: Os) -> bool {
        self.platforms.contains(&os)
    }

    pub fn read_only(&self) -> bool {
        self.class == ToolClass::ReadOnly
    }

    /// JSON schema of the arguments the agent receives.
    pub fn args_schema(&self) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for param in self.params {
            props.insert(param.name.into(), param_schema(param));
            if param.required {
                required.push(Value::from(param.name));
            }
        }
        json!({
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// JSON schema of the arguments an MCP client passes: the agent's plus the
    /// required routing argument.
    pub fn mcp_input_schema(&self) -> Value {
        let mut schema = self.args_schema();
        schema["properties"][AGENT_ID_ARG] = json!({
            "type": "string",
            "minLength": 1,
            "description": "Id of the PC to run on (see list_agents). Required on every call; nothing is remembered between calls.",
        });
        schema["required"]
            .as_array_mut()
            .expect("required is an array")
            .insert(0, Value::from(AGENT_ID_ARG));
        schema
    }

    /// Checks agent-side arguments (without `agent_id`) against the parameters.
    pub fn validate_args(&self, args: &Map<String, Value>) -> Result<(), String> {
        for key in args.keys() {
            if !self.params.iter().any(|p| p.name == key) {
                let known: Vec<_> = self.params.iter().map(|p| p.name).collect();
                return Err(format!(
                    "unknown argument `{key}` for {}; it takes: {}",
                    self.name,
                    if known.is_empty() {
                        "no arguments".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        for param in self.params {
            match args.get(param.name) {
                None | Some(Value::Null) if param.required => {
                    return Err(format!(
                        "missing required argument `{}` ({})",
                        param.name, param.description
                    ));
                }
                None | Some(Value::Null) => {}
                Some(v) => check_value(param, v)?,
            }
        }
        Ok(())
    }
}

fn param_schema(param: &Param) -> Value {
    let mut s = match param.kind {
        ParamKind::String { max_len } => json!({"type": "string", "maxLength": max_len}),
        ParamKind::Integer { min, max } => {
            json!({"type": "integer", "minimum": min, "maximum": max})
        }
        ParamKind::Boolean => json!({"type": "boolean"}),
        ParamKind::StringList { max_items } => {
            json!({"type": "array", "items": {"type": "string"}, "maxItems": max_items})
        }
    };
    s["description"] = Value::from(param.description);
    s
}

fn check_value(param: &Param, v: &Value) -> Result<(), String> {
    let name = param.name;
    match param.kind {
        ParamKind::String { max_len } => match v.as_str() {
            Some(s) if s.len() <= max_len => Ok(()),
            Some(s) => Err(format!("`{name}` is {} bytes; at most {max_len} allowed", s.len())),
            None => Err(format!("`{name}` must be a string")),
        },
        ParamKind::Integer { min, max } => match v.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(()),
            Some(n) => Err(format!("`{name}` is {n}; it must be between {min} and {max}")),
            None => Err(format!("`{name}` must be an integer")),
        },
        ParamKind::Boolean => v
            .is_boolean()
            .then_some(())
            .ok_or_else(|| format!("`{name}` must be true or false")),
        ParamKind::StringList { max_items } => match v.as_array() {
            Some(items) if items.len() > max_items => Err(format!(
                "`{name}` has {} items; at most {max_items} allowed",
                items.len()
            )),
            Some(items) if items.iter().all(Value::is_string) => Ok(()),
            _ => Err(format!("`{name}` must be a list of strings")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_schemas_require_agent_id() {
        let mut names: Vec<_> = TOOLS.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len());
        for tool in TOOLS {
            let schema = tool.mcp_input_schema();
            assert_eq!(schema["required"][0], AGENT_ID_ARG, "{}", tool.name);
            assert!(tool.args_schema()["properties"].get(AGENT_ID_ARG).is_none());
            assert!(!tool.platforms.is_empty());
        }
    }

    #[test]
    fn validation_names_the_problem() {
        let shell = find("shell_exec").unwrap();
        let check = |args: Value, expect: Option<&str>| {
            let got = shell.validate_args(args.as_object().unwrap());
            match expect {
                None => assert_eq!(got, Ok(()), "{args}"),
                Some(needle) => {
                    let err = got.unwrap_err();
                    assert!(err.contains(needle), "{args}: {err}");
                }
            }
        };
        check(json!({"command": "true"}), None);
        check(json!({"command": "true", "timeout_s": 5}), None);
        check(json!({}), Some("missing required argument `command`"));
        check(json!({"command": 5}), Some("must be a string"));
        check(json!({"command": "x", "timeout_s": 0}), Some("between 1 and 3600"));
        check(json!({"command": "x", "cwd": "/"}), Some("unknown argument `cwd`"));
        let tel = find("telemetry_collect").unwrap();
        assert!(
            tel.validate_args(json!({"sections": ["disk", 1]}).as_object().unwrap())
                .is_err()
        );
    }
}
