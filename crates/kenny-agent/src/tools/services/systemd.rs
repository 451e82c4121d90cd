//! systemd units, from `systemctl list-units`.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio::process::Command;

use super::{COMMAND_LIMIT, OUTPUT_CAP, Service, Standing};
use crate::tools::ToolError;
use crate::tools::process::run_captured;

/// One row of `systemctl list-units`, in either output format.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Unit {
    #[serde(rename = "unit")]
    pub name: String,
    pub load: String,
    pub active: String,
    pub sub: String,
    #[serde(default)]
    pub description: String,
}

impl Unit {
    fn standing(&self) -> Standing {
        Standing {
            running: self.sub == "running",
            failed: self.active == "failed",
            stopped: self.active == "inactive",
            unknown: false,
        }
    }

    fn into_service(self) -> Service {
        Service {
            names: vec![self.name.clone()],
            standing: self.standing(),
            entry: json!({
                "name": self.name,
                "description": self.description,
                "load": self.load,
                "active": self.active,
                "sub": self.sub,
            }),
        }
    }
}

const LIST_SERVICES: [&str; 5] = ["list-units", "--type=service", "--all", "--no-pager", "--full"];

/// Every service unit systemd knows about, loaded or not.
pub(super) async fn units() -> Result<Vec<Service>, ToolError> {
    // JSON needs systemd 246+; older versions ignore --output and print the table, so a
    // reply that is not a JSON array means "ask again for the plain table".
    let json_reply = systemctl(&[&LIST_SERVICES[..], &["--output=json"]].concat()).await?;
    let units = match parse_json(&json_reply) {
        Some(units) => units,
        None => parse_text(&systemctl(&[&LIST_SERVICES[..], &["--plain", "--no-legend"]].concat()).await?),
    };
    Ok(units.into_iter().map(Unit::into_service).collect())
}

async fn systemctl(args: &[&str]) -> Result<String, ToolError> {
    let mut cmd = Command::new("systemctl");
    cmd.args(args).env("SYSTEMD_COLORS", "0");
    let out = run_captured(cmd, None, COMMAND_LIMIT, OUTPUT_CAP).await?;
    if !out.status.success() {
        return Err(ToolError::exec_failed(format!(
            "`systemctl {}` failed ({}): {}",
            args.join(" "),
            out.status,
            out.stderr.into_text().trim()
        )));
    }
    if out.stdout.truncated() {
        return Err(ToolError::exec_failed(format!(
            "`systemctl {}` printed more than {} MiB; narrow the query",
            args.join(" "),
            OUTPUT_CAP / (1024 * 1024)
        )));
    }
    Ok(out.stdout.into_text())
}

/// `--output=json`: an array of `{unit, load, active, sub, description}`. `None` when the
/// text is not such an array (an older systemctl printed its table instead).
pub(crate) fn parse_json(text: &str) -> Option<Vec<Unit>> {
    let text = text.trim();
    if !text.starts_with('[') {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// `--plain --no-legend`: `UNIT LOAD ACTIVE SUB DESCRIPTION...`, one unit a line. Some
/// versions still put a status mark (`●`, `*`) before units that are not loaded or failed.
pub(crate) fn parse_text(text: &str) -> Vec<Unit> {
    text.lines().filter_map(parse_text_line).collect()
}

fn parse_text_line(line: &str) -> Option<Unit> {
    let line = line.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '●' | '○' | '*' | '×'));
    let mut rest = line;
    let mut fields = Vec::with_capacity(4);
    for _ in 0..4 {
        let (field, after) = next_field(rest)?;
        fields.push(field);
        rest = after;
    }
    Some(Unit {
        name: fields[0].to_owned(),
        load: fields[1].to_owned(),
        active: fields[2].to_owned(),
        sub: fields[3].to_owned(),
        description: rest.trim().to_owned(),
    })
}

fn next_field(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    if text.is_empty() {
        return None;
    }
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    Some((&text[..end], &text[end..]))
}

/// Names of the units (of any type) systemd reports as failed, for the telemetry
/// collector. Blocking; `Err` says why there is no answer (systemd not running, ...).
#[allow(dead_code, reason = "called by the telemetry collector")]
pub(crate) fn failed_units_blocking() -> Result<Vec<String>, String> {
    if !crate::tools::systemd::is_running() {
        return Err(crate::tools::systemd::not_running_reason());
    }
    let args = [
        "list-units",
        "--state=failed",
        "--all",
        "--no-pager",
        "--full",
        "--plain",
        "--no-legend",
    ];
    let stdout = run_blocking("systemctl", &args, Duration::from_secs(10))?;
    Ok(failed_names(&stdout))
}

fn failed_names(table: &str) -> Vec<String> {
    parse_text(table)
        .into_iter()
        .filter(|u| u.active == "failed")
        .map(|u| u.name)
        .collect()
}

/// Runs a short query to completion, killed if it outlives `limit`.
#[allow(dead_code, reason = "called by the telemetry collector")]
fn run_blocking(program: &str, args: &[&str], limit: Duration) -> Result<String, String> {
    use std::process::{Command, Stdio};
    let child = Command::new(program)
        .args(args)
        .env("SYSTEMD_COLORS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start `{program}`: {e}"))?;
    let pid = child.id();
    // The child is waited for on another thread (which also drains its pipes), so it
    // stays unreaped, and its pid ours, until that thread is done: killing it is safe.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(limit) {
        Ok(result) => result.map_err(|e| format!("waiting for `{program}` failed: {e}"))?,
        Err(_) => {
            kill(pid);
            return Err(format!("`{program}` did not answer within {}s", limit.as_secs()));
        }
    };
    if !output.status.success() {
        return Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(unix)]
fn kill(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid)
        && pid > 1
    {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

#[cfg(not(unix))]
fn kill(_pid: u32) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::services::{StateFilter, render};

    /// Recorded from systemd 252 (Debian 12), `--output=json`, trimmed to a few units.
    const JSON: &str = r#"[{"unit":"cron.service","load":"loaded","active":"active","sub":"running","description":"Regular background program processing daemon"},{"unit":"e2scrub_reap.service","load":"loaded","active":"inactive","sub":"dead","description":"Remove Stale Online ext4 Metadata Check Snapshots"},{"unit":"networking.service","load":"loaded","active":"active","sub":"exited","description":"Raise network interfaces"},{"unit":"nginx.service","load":"loaded","active":"failed","sub":"failed","description":"A high performance web server and a reverse proxy server"},{"unit":"plymouth-quit-wait.service","load":"not-found","active":"inactive","sub":"dead","description":"plymouth-quit-wait.service"},{"unit":"ssh.service","load":"loaded","active":"active","sub":"running","description":"OpenBSD Secure Shell server"}]
"#;

    /// The same units as `--plain --no-legend` prints them (systemd 245 and 252).
    const TEXT: &str = "\
cron.service                   loaded    active   running Regular background program processing daemon
e2scrub_reap.service           loaded    inactive dead    Remove Stale Online ext4 Metadata Check Snapshots
networking.service             loaded    active   exited  Raise network interfaces
● nginx.service                loaded    failed   failed  A high performance web server and a reverse proxy server
plymouth-quit-wait.service     not-found inactive dead    plymouth-quit-wait.service
ssh.service                    loaded    active   running OpenBSD Secure Shell server
";

    #[test]
    fn json_and_text_give_the_same_units() {
        let from_json = parse_json(JSON).expect("a JSON array");
        let from_text = parse_text(TEXT);
        assert_eq!(from_json.len(), 6);
        assert_eq!(from_json, from_text);
        let nginx = &from_json[3];
        assert_eq!(nginx.name, "nginx.service");
        assert_eq!(
            (nginx.load.as_str(), nginx.active.as_str(), nginx.sub.as_str()),
            ("loaded", "failed", "failed")
        );
        assert_eq!(
            nginx.description,
            "A high performance web server and a reverse proxy server"
        );
    }

    #[test]
    fn a_table_where_json_was_asked_for_is_not_json() {
        assert_eq!(parse_json(TEXT), None);
        assert_eq!(parse_json(""), None);
        assert_eq!(parse_json("[]"), Some(Vec::new()));
        assert_eq!(parse_json("[{\"unit\": 1}]"), None);
    }

    #[test]
    fn text_lines_without_all_columns_are_skipped() {
        let units = parse_text("\n  \nfoo.service loaded active\nbar.service loaded active running\n");
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].name, "bar.service");
        assert_eq!(units[0].description, "");
    }

    #[test]
    fn states_map_to_the_filters() {
        let services: Vec<Service> = parse_json(JSON).unwrap().into_iter().map(Unit::into_service).collect();
        let names = |filter| {
            render("systemd", services.clone(), filter, None, 100)["services"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(StateFilter::Running), ["cron.service", "ssh.service"]);
        assert_eq!(names(StateFilter::Failed), ["nginx.service"]);
        assert_eq!(
            names(StateFilter::Stopped),
            ["e2scrub_reap.service", "plymouth-quit-wait.service"]
        );
        let all = render("systemd", services, StateFilter::All, Some("ssh"), 100);
        assert_eq!(
            all["services"][0],
            json!({"name": "ssh.service", "description": "OpenBSD Secure Shell server", "load": "loaded", "active": "active", "sub": "running"})
        );
    }

    #[test]
    fn failed_units_of_any_type() {
        let table = "\
● nginx.service       loaded failed failed A high performance web server
● srv-backup.mount    loaded failed failed /srv/backup
  weird.service       loaded active running Not failed, should not be listed
";
        assert_eq!(failed_names(table), ["nginx.service", "srv-backup.mount"]);
        assert_eq!(failed_names(""), Vec::<String>::new());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn failed_units_say_why_without_systemd() {
        if crate::tools::systemd::is_running() {
            assert!(failed_units_blocking().is_ok());
        } else {
            let err = failed_units_blocking().unwrap_err();
            assert!(err.contains("systemd is not running on this PC (PID 1 is `"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn blocking_runs_are_bounded() {
        assert_eq!(
            run_blocking("sh", &["-c", "echo hi"], Duration::from_secs(5)).unwrap(),
            "hi\n"
        );
        let failed = run_blocking("sh", &["-c", "echo no >&2; exit 3"], Duration::from_secs(5)).unwrap_err();
        assert!(failed.contains("no"), "{failed}");
        let started = std::time::Instant::now();
        let slow = run_blocking("sleep", &["30"], Duration::from_millis(200)).unwrap_err();
        assert!(slow.contains("did not answer"), "{slow}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(run_blocking("kenny-no-such-program", &[], Duration::from_secs(1)).is_err());
    }
}
