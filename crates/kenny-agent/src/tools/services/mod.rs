//! System services: systemd units on Linux (SysV init scripts where systemd does not
//! run), services on Windows.

mod systemd;
mod sysv;
mod windows;

use std::time::Duration;

use kenny_proto::args::DiagServicesArgs;
use serde_json::{Value, json};

use super::bounded::blocking;
use super::{ToolError, ToolResult};

#[allow(
    unused_imports,
    reason = "the telemetry collector will report failed units through it"
)]
pub(crate) use systemd::failed_units_blocking;
pub(crate) use systemd::{Unit, parse_json as parse_units_json, parse_text as parse_units_text};
pub(crate) use windows::parse as parse_win32_services;

const DEFAULT_LIMIT: usize = 300;
const COMMAND_LIMIT: Duration = Duration::from_secs(20);
/// systemctl's JSON for a thousand units is ~200 KiB; this leaves room for big fleets.
const OUTPUT_CAP: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateFilter {
    All,
    Running,
    Failed,
    Stopped,
}

impl StateFilter {
    fn parse(state: Option<&str>) -> Result<Self, ToolError> {
        match state.map(str::trim) {
            None | Some("all") => Ok(Self::All),
            Some("running") => Ok(Self::Running),
            Some("failed") => Ok(Self::Failed),
            Some("stopped") => Ok(Self::Stopped),
            Some(other) => Err(ToolError::bad_args(format!(
                "state must be `all`, `running`, `failed` or `stopped`, got `{other}`"
            ))),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Running => "running",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

/// Where a service stands, as far as its source can tell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Standing {
    pub(crate) running: bool,
    pub(crate) failed: bool,
    pub(crate) stopped: bool,
    /// The source cannot tell (SysV scripts without a pid file).
    pub(crate) unknown: bool,
}

impl Standing {
    fn matches(self, filter: StateFilter) -> bool {
        match filter {
            StateFilter::All => true,
            StateFilter::Running => self.running,
            StateFilter::Failed => self.failed,
            StateFilter::Stopped => self.stopped,
        }
    }
}

/// One service as listed, with what the filters look at.
#[derive(Debug, Clone)]
pub(crate) struct Service {
    /// Also matched by the name filter (Windows display names are what people know).
    pub(crate) names: Vec<String>,
    pub(crate) standing: Standing,
    pub(crate) entry: Value,
}

pub(super) async fn list(args: DiagServicesArgs) -> ToolResult {
    let filter = StateFilter::parse(args.state.as_deref())?;
    let name = args.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let (source, services, mut notes) = if cfg!(windows) {
        ("windows", windows::services().await?, Vec::new())
    } else if super::systemd::is_running() {
        ("systemd", systemd::units().await?, Vec::new())
    } else {
        let services = blocking("diag_services", COMMAND_LIMIT, sysv::scan_system)
            .await?
            .map_err(ToolError::exec_failed)?;
        let notes = vec![format!(
            "{}: listed the SysV init scripts in /etc/init.d instead; `active` is `running` when the script's pid file in /run names a live process, `unknown` otherwise",
            super::systemd::not_running_reason()
        )];
        ("sysvinit", services, notes)
    };
    let mut result = render(source, services, filter, name, limit);
    let unknown = result["unknown_state"].as_u64().unwrap_or(0);
    if filter != StateFilter::All && unknown > 0 {
        notes.push(format!(
            "{unknown} service(s) whose state is unknown were left out of `state: {}`",
            filter.as_str()
        ));
    }
    if let Some(object) = result.as_object_mut() {
        object.remove("unknown_state");
        if !notes.is_empty() {
            object.insert("note".into(), Value::from(notes.join("; ")));
        }
    }
    Ok(result)
}

fn render(source: &str, mut services: Vec<Service>, filter: StateFilter, name: Option<&str>, limit: usize) -> Value {
    let needle = name.map(str::to_lowercase);
    let wanted = |s: &Service| {
        needle
            .as_deref()
            .is_none_or(|n| s.names.iter().any(|name| name.to_lowercase().contains(n)))
    };
    services.retain(wanted);
    let unknown = services.iter().filter(|s| s.standing.unknown).count();
    services.retain(|s| s.standing.matches(filter));
    services.sort_by_cached_key(|s| s.names.first().map(|n| n.to_lowercase()));
    let matched = services.len();
    let listed: Vec<Value> = services.into_iter().take(limit).map(|s| s.entry).collect();
    json!({
        "source": source,
        "state": filter.as_str(),
        "count": listed.len(),
        "truncated": matched > listed.len(),
        "services": listed,
        "unknown_state": unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    use crate::tools::typed;

    fn service(name: &str, standing: Standing) -> Service {
        Service {
            names: vec![name.to_owned()],
            standing,
            entry: json!({ "name": name }),
        }
    }

    fn names(out: &Value) -> Vec<&str> {
        out["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect()
    }

    fn sample() -> Vec<Service> {
        let running = Standing {
            running: true,
            ..Standing::default()
        };
        let failed = Standing {
            failed: true,
            ..Standing::default()
        };
        let stopped = Standing {
            stopped: true,
            ..Standing::default()
        };
        vec![
            service("ssh.service", running),
            service("Cron.service", running),
            service("broken.service", failed),
            service("apt-daily.service", stopped),
            service("sshd-keygen.service", stopped),
        ]
    }

    #[test]
    fn filters_by_state_and_name_and_sorts_by_name() {
        let all = render("systemd", sample(), StateFilter::All, None, 300);
        assert_eq!(
            names(&all),
            [
                "apt-daily.service",
                "broken.service",
                "Cron.service",
                "ssh.service",
                "sshd-keygen.service"
            ]
        );
        assert_eq!(all["count"], 5);
        assert_eq!(all["truncated"], false);
        assert_eq!(all["source"], "systemd");

        let running = render("systemd", sample(), StateFilter::Running, None, 300);
        assert_eq!(names(&running), ["Cron.service", "ssh.service"]);
        let failed = render("systemd", sample(), StateFilter::Failed, None, 300);
        assert_eq!(names(&failed), ["broken.service"]);
        let stopped_ssh = render("systemd", sample(), StateFilter::Stopped, Some("SSH"), 300);
        assert_eq!(names(&stopped_ssh), ["sshd-keygen.service"]);
        let none = render("systemd", sample(), StateFilter::All, Some("nothing-like-it"), 300);
        assert_eq!(none["count"], 0);
        assert_eq!(none["truncated"], false);
    }

    #[test]
    fn the_limit_cuts_and_says_so() {
        let out = render("systemd", sample(), StateFilter::All, None, 2);
        assert_eq!(names(&out), ["apt-daily.service", "broken.service"]);
        assert_eq!(out["count"], 2);
        assert_eq!(out["truncated"], true);
    }

    #[tokio::test]
    async fn a_bogus_state_is_refused() {
        let err = list(typed(json!({"state": "bogus"}))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        assert!(
            err.message.contains("`all`, `running`, `failed` or `stopped`"),
            "{}",
            err.message
        );
        assert!(err.message.contains("bogus"), "{}", err.message);
    }

    /// On this machine's Linux: the real listing, whichever source it has.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn lists_this_pcs_services() {
        let out = list(typed(json!({}))).await.unwrap();
        if crate::tools::systemd::is_running() {
            assert_eq!(out["source"], "systemd");
            assert!(out["count"].as_u64().unwrap() > 0, "{out}");
        } else {
            assert_eq!(out["source"], "sysvinit");
            let note = out["note"].as_str().unwrap();
            assert!(note.contains("systemd is not running on this PC (PID 1 is `"), "{note}");
            let scripts = std::fs::read_dir("/etc/init.d").map(|d| d.count()).unwrap_or(0);
            assert!(out["count"].as_u64().unwrap() <= scripts as u64);
        }
    }
}
