//! Packages: winget on Windows, apt or dnf on Linux, with one result shape.
//!
//! Each manager module builds its command lines and parses its output in plain
//! functions (unit-tested on recorded output on any OS); this module picks the manager,
//! runs the commands and shapes the results.

mod apt;
mod dnf;
mod ids;
mod winget;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kenny_proto::args::{PackageArgs, PackageListArgs, PackageUpdateArgs};
use kenny_proto::error::ErrorCode;
use serde_json::{Value, json};
use tokio::process::Command;

use super::bounded::BoundedBuf;
use super::process::run_captured_into;
use super::{ToolError, ToolResult};

const DEFAULT_LIMIT: usize = 500;
/// Listings are parsed whole, so they get a generous cap; past it the list is cut and
/// says so.
const LIST_OUTPUT_CAP: usize = 16 * 1024 * 1024;
/// The reply carries the end of an install's output, where the outcome is.
const CHANGE_OUTPUT_TAIL: usize = 12 * 1024;
/// Each limit sits below the catalog's timeout for the tool, so the agent kills the
/// package manager's process group itself and answers before the server gives up.
const LIST_LIMIT: Duration = Duration::from_secs(100);
const CHANGE_LIMIT: Duration = Duration::from_secs(840);
const UPDATE_LIMIT: Duration = Duration::from_secs(1740);
const QUERY_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Manager {
    Apt,
    Dnf,
    Winget,
}

impl Manager {
    fn as_str(self) -> &'static str {
        match self {
            Manager::Apt => "apt",
            Manager::Dnf => "dnf",
            Manager::Winget => "winget",
        }
    }
}

/// One installed package as every manager reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Package {
    pub id: String,
    pub name: String,
    pub version: String,
    /// The newer version on offer, empty when up to date (or unknown).
    pub available: String,
    /// apt/dnf: the one-line description.
    pub summary: Option<String>,
    /// winget: where the package came from (`winget`, `msstore`), empty when not from a source.
    pub source: Option<String>,
}

impl Package {
    fn to_json(&self) -> Value {
        let mut row = json!({
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "available": self.available,
        });
        if let Some(summary) = &self.summary {
            row["summary"] = Value::from(summary.as_str());
        }
        if let Some(source) = &self.source {
            row["source"] = Value::from(source.as_str());
        }
        row
    }

    fn matches(&self, needle: &str) -> bool {
        self.id.to_lowercase().contains(needle) || self.name.to_lowercase().contains(needle)
    }
}

/// A listing plus anything the caller should know about how complete it is.
#[derive(Debug, Default)]
pub(super) struct Listing {
    pub packages: Vec<Package>,
    pub cut: bool,
    pub note: Option<String>,
}

/// What a change (install, uninstall, update) did.
#[derive(Debug)]
pub(super) struct Change {
    pub id: Option<String>,
    pub exit_code: Option<i32>,
    pub output: Output,
    pub changed: bool,
    /// The installed version afterwards, when the manager tells it cheaply.
    pub version: Option<String>,
    pub note: Option<String>,
}

impl Change {
    fn to_json(&self, manager: Manager) -> Value {
        let mut result = json!({
            "ok": true,
            "id": self.id,
            "manager": manager.as_str(),
            "exit_code": self.exit_code,
            "output": self.output.text,
            "truncated": self.output.truncated,
            "changed": self.changed,
        });
        if self.id.is_none() {
            result["all"] = Value::Bool(true);
        }
        if let Some(version) = &self.version {
            result["version"] = Value::from(version.as_str());
        }
        if let Some(note) = &self.note {
            result["note"] = Value::from(note.as_str());
        }
        result
    }
}

pub(super) async fn list(args: PackageListArgs) -> ToolResult {
    let query = args
        .query
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .map(str::to_lowercase);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let manager = detect()?;
    let listing = match manager {
        Manager::Apt => apt::list().await?,
        Manager::Dnf => dnf::list().await?,
        Manager::Winget => winget::list().await?,
    };
    Ok(render_listing(manager, listing, query.as_deref(), limit))
}

fn render_listing(manager: Manager, listing: Listing, query: Option<&str>, limit: usize) -> Value {
    let mut packages: Vec<Package> = listing
        .packages
        .into_iter()
        .filter(|p| query.is_none_or(|q| p.matches(q)))
        .collect();
    packages.sort_by(|a, b| {
        a.id.to_lowercase()
            .cmp(&b.id.to_lowercase())
            .then_with(|| a.id.cmp(&b.id))
    });
    let total = packages.len();
    packages.truncate(limit);
    let mut result = json!({
        "packages": packages.iter().map(Package::to_json).collect::<Vec<_>>(),
        "count": packages.len(),
        "total": total,
        "truncated": listing.cut || total > packages.len(),
        "manager": manager.as_str(),
    });
    if let Some(note) = listing.note {
        result["note"] = Value::from(note);
    }
    result
}

pub(super) async fn install(args: PackageArgs) -> ToolResult {
    let manager = detect()?;
    let id = ids::validate(manager, required_id(&args)?)?;
    let change = match manager {
        Manager::Apt => apt::install(&id).await?,
        Manager::Dnf => dnf::install(&id).await?,
        Manager::Winget => winget::install(&id).await?,
    };
    Ok(change.to_json(manager))
}

pub(super) async fn uninstall(args: PackageArgs) -> ToolResult {
    let manager = detect()?;
    let id = ids::validate(manager, required_id(&args)?)?;
    let change = match manager {
        Manager::Apt => apt::uninstall(&id).await?,
        Manager::Dnf => dnf::uninstall(&id).await?,
        Manager::Winget => winget::uninstall(&id).await?,
    };
    Ok(change.to_json(manager))
}

pub(super) async fn update(args: PackageUpdateArgs) -> ToolResult {
    let all = args.all.unwrap_or(false);
    let id = args.id.as_deref().map(str::trim).filter(|id| !id.is_empty());
    let target = match (id, all) {
        (Some(_), true) => {
            return Err(ToolError::bad_args(
                "give either `id` (one package) or `all: true` (every package with an update), not both",
            ));
        }
        (None, false) => {
            return Err(ToolError::bad_args(
                "say what to update: `id` for one package, or `all: true` for every package with an update",
            ));
        }
        (Some(id), false) => Some(id),
        (None, true) => None,
    };
    let manager = detect()?;
    let id = target.map(|id| ids::validate(manager, id)).transpose()?;
    let change = match (manager, id) {
        (Manager::Apt, Some(id)) => apt::update_one(&id).await?,
        (Manager::Apt, None) => apt::update_all().await?,
        (Manager::Dnf, Some(id)) => dnf::update_one(&id).await?,
        (Manager::Dnf, None) => dnf::update_all().await?,
        (Manager::Winget, Some(id)) => winget::update_one(&id).await?,
        (Manager::Winget, None) => winget::update_all().await?,
    };
    Ok(change.to_json(manager))
}

/// The package id, which the type makes present but a caller can still leave blank.
fn required_id(args: &PackageArgs) -> Result<&str, ToolError> {
    match args.id.trim() {
        "" => Err(ToolError::bad_args(
            "missing required argument `id`: the package to act on",
        )),
        id => Ok(id),
    }
}

/// The package manager of this PC.
fn detect() -> Result<Manager, ToolError> {
    if cfg!(windows) {
        return winget::locate().map(|_| Manager::Winget);
    }
    detect_linux(|name| which(name).is_some())
}

fn detect_linux(has: impl Fn(&str) -> bool) -> Result<Manager, ToolError> {
    if has("dpkg-query") && has("apt-get") {
        Ok(Manager::Apt)
    } else if has("rpm") && has("dnf") {
        Ok(Manager::Dnf)
    } else {
        Err(ToolError::new(
            ErrorCode::Unsupported,
            "no supported package manager on this PC: looked for apt (dpkg-query and apt-get) and dnf (rpm and dnf) on the agent's PATH; use shell_exec with this system's own tool",
        ))
    }
}

/// A program on the agent's PATH (or the usual system directories when PATH is unset,
/// as it can be for a service).
pub(super) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// A program the detected manager needs, by full path.
pub(super) fn program(name: &str) -> Result<PathBuf, ToolError> {
    which(name).ok_or_else(|| {
        ToolError::exec_failed(format!(
            "`{name}` is not on the agent's PATH, though the package manager it belongs to was detected; check the installation"
        ))
    })
}

/// One finished package-manager run.
#[derive(Debug)]
pub(super) struct Ran {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub cut: bool,
}

impl Ran {
    pub(super) fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// The end of a change's output as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Output {
    pub text: String,
    pub truncated: bool,
}

/// How a command is run: its output is parsed whole (a listing) or only its end matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    All,
    Tail,
}

/// Runs `program args` with `env` added (argv only, no shell), bounded in time and
/// output; the process group is killed on timeout.
pub(super) async fn run<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    env: &[(&str, &str)],
    limit: Duration,
    keep: Keep,
) -> Result<Ran, ToolError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let (stdout, stderr) = match keep {
        Keep::All => (BoundedBuf::new(LIST_OUTPUT_CAP), BoundedBuf::new(64 * 1024)),
        Keep::Tail => (
            BoundedBuf::tail(CHANGE_OUTPUT_TAIL),
            BoundedBuf::tail(CHANGE_OUTPUT_TAIL),
        ),
    };
    let captured = run_captured_into(cmd, None, limit, stdout, stderr).await.map_err(|e| {
        let what = Path::new(program.file_name().unwrap_or(program.as_os_str()))
            .display()
            .to_string();
        let verb = args
            .first()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default();
        ToolError::new(e.code, format!("{what} {verb}: {}", e.message))
    })?;
    let cut = captured.stdout.truncated() || captured.stderr.truncated();
    let dropped = captured.stdout.dropped() + captured.stderr.dropped();
    let mut stdout = captured.stdout.into_text();
    if keep == Keep::Tail && dropped > 0 {
        stdout = format!("{}{stdout}", cut_marker(dropped));
    }
    Ok(Ran {
        exit_code: captured.status.code(),
        stdout,
        stderr: captured.stderr.into_text(),
        cut,
    })
}

fn cut_marker(dropped: u64) -> String {
    format!("[... {dropped} earlier bytes of output cut ...]\n")
}

/// stdout then stderr, as one bounded text for the reply.
pub(super) fn output_of(ran: &Ran) -> Output {
    let mut text = ran.stdout.clone();
    if !ran.stderr.trim().is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&ran.stderr);
    }
    Output {
        text,
        truncated: ran.cut,
    }
}

/// The last few non-empty lines of a failed run, for an error message.
pub(super) fn message_tail(ran: &Ran) -> String {
    const LINES: usize = 8;
    const CHARS: usize = 1500;
    let prefer = if ran.stderr.trim().is_empty() {
        &ran.stdout
    } else {
        &ran.stderr
    };
    let lines: Vec<&str> = prefer
        .lines()
        .map(|line| line.rsplit('\r').next().unwrap_or(line).trim_end())
        .filter(|line| !line.trim().is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(LINES)..].join("\n");
    let chars: Vec<char> = tail.chars().collect();
    if chars.len() > CHARS {
        format!("...{}", chars[chars.len() - CHARS..].iter().collect::<String>())
    } else if tail.is_empty() {
        "(no output)".to_owned()
    } else {
        tail
    }
}

pub(super) fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit code {c}"))
}

/// Removing a package would take others along: refused, naming them, nothing removed.
pub(super) fn refuse_dependents(manager: &str, name: &str, others: &[String]) -> ToolError {
    let shown: Vec<&str> = others.iter().take(20).map(String::as_str).collect();
    ToolError::exec_failed(format!(
        "removing `{name}` would also remove {} package(s) that depend on it: {}{}; nothing was removed. Remove those first, or run {manager} remove yourself with shell_exec if that is intended",
        others.len(),
        shown.join(", "),
        if others.len() > shown.len() { ", ..." } else { "" }
    ))
}

/// Fills in `available` from a manager's list of newer versions by package id.
pub(super) fn merge_available(packages: &mut [Package], available: &std::collections::HashMap<String, String>) {
    for package in packages {
        if let Some(version) = available.get(&package.id) {
            package.available.clone_from(version);
        }
    }
}

/// The installed-package query itself failed: nothing can be listed.
pub(super) fn listing_failed(what: &str, ran: &Ran) -> ToolError {
    ToolError::exec_failed(format!(
        "{what} failed ({}): {}",
        exit_text(ran.exit_code),
        message_tail(ran)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(id: &str, name: &str) -> Package {
        Package {
            id: id.into(),
            name: name.into(),
            version: "1.0".into(),
            available: String::new(),
            summary: None,
            source: None,
        }
    }

    #[test]
    fn detects_apt_before_dnf_and_names_what_it_looked_for() {
        assert_eq!(detect_linux(|_| true), Ok(Manager::Apt));
        assert_eq!(detect_linux(|n| n == "rpm" || n == "dnf"), Ok(Manager::Dnf));
        assert_eq!(
            detect_linux(|n| n == "apt-get" || n == "dnf"),
            Err(detect_linux(|_| false).unwrap_err())
        );
        let err = detect_linux(|_| false).unwrap_err();
        assert_eq!(err.code, ErrorCode::Unsupported);
        for looked_for in ["apt", "dpkg-query", "apt-get", "dnf", "rpm"] {
            assert!(err.message.contains(looked_for), "{}", err.message);
        }
    }

    #[test]
    fn listing_filters_sorts_and_bounds() {
        let listing = Listing {
            packages: vec![
                pkg("zlib1g", "zlib1g"),
                pkg("Bash", "bash"),
                pkg("7zip.7zip", "7-Zip"),
                pkg("bash-completion", "x"),
            ],
            cut: false,
            note: None,
        };
        let all = render_listing(Manager::Apt, listing, None, 500);
        let ids: Vec<&str> = all["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["7zip.7zip", "Bash", "bash-completion", "zlib1g"]);
        assert_eq!(all["count"], 4);
        assert_eq!(all["total"], 4);
        assert_eq!(all["truncated"], false);
        assert_eq!(all["manager"], "apt");
        assert_eq!(
            all["packages"][0],
            json!({"id": "7zip.7zip", "name": "7-Zip", "version": "1.0", "available": ""})
        );

        let listing = Listing {
            packages: vec![
                pkg("zlib1g", "zlib1g"),
                pkg("Bash", "bash"),
                pkg("bash-completion", "x"),
                pkg("x", "BASHFUL"),
            ],
            cut: false,
            note: Some("n".into()),
        };
        let some = render_listing(Manager::Winget, listing, Some("bash"), 2);
        let ids: Vec<&str> = some["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["Bash", "bash-completion"]);
        assert_eq!(some["count"], 2);
        assert_eq!(some["total"], 3);
        assert_eq!(some["truncated"], true);
        assert_eq!(some["note"], "n");

        let cut = render_listing(
            Manager::Dnf,
            Listing {
                packages: vec![],
                cut: true,
                note: None,
            },
            None,
            5,
        );
        assert_eq!(cut["truncated"], true, "a cut listing says so even when short");
    }

    #[test]
    fn change_results_have_the_documented_shape() {
        let change = Change {
            id: Some("hello".into()),
            exit_code: Some(0),
            output: Output {
                text: "done\n".into(),
                truncated: false,
            },
            changed: true,
            version: Some("2.10-3".into()),
            note: None,
        };
        assert_eq!(
            change.to_json(Manager::Apt),
            json!({"ok": true, "id": "hello", "manager": "apt", "exit_code": 0, "output": "done\n",
                   "truncated": false, "changed": true, "version": "2.10-3"})
        );
        let all = Change {
            id: None,
            version: None,
            note: Some("n".into()),
            ..change
        };
        let all = all.to_json(Manager::Winget);
        assert_eq!(all["all"], true);
        assert_eq!(all["id"], Value::Null);
        assert_eq!(all["note"], "n");
    }

    #[test]
    fn failure_messages_carry_the_managers_own_last_lines() {
        let ran = Ran {
            exit_code: Some(100),
            stdout: "Reading package lists...\n".into(),
            stderr: "W: something\r\nE: Unable to locate package nope\n\n".into(),
            cut: false,
        };
        assert_eq!(message_tail(&ran), "W: something\nE: Unable to locate package nope");
        let quiet = Ran {
            stderr: String::new(),
            stdout: String::new(),
            ..ran
        };
        assert_eq!(message_tail(&quiet), "(no output)");
        let long = Ran {
            stdout: (0..50).map(|i| format!("line {i}\n")).collect(),
            ..quiet
        };
        assert_eq!(message_tail(&long).lines().count(), 8);
        assert!(message_tail(&long).ends_with("line 49"));
    }

    #[test]
    fn output_joins_streams_and_marks_cuts() {
        let ran = Ran {
            exit_code: Some(0),
            stdout: "out".into(),
            stderr: "err\n".into(),
            cut: true,
        };
        assert_eq!(
            output_of(&ran),
            Output {
                text: "out\nerr\n".into(),
                truncated: true
            }
        );
        assert!(cut_marker(42).contains("42 earlier bytes"));
    }

    /// The real package database of this PC, where it has one of the managers.
    #[tokio::test]
    async fn lists_this_pcs_packages() {
        let Ok(manager) = detect() else {
            return;
        };
        let out = list(crate::tools::typed(json!({"query": "bash", "limit": 5000})))
            .await
            .unwrap();
        assert_eq!(out["manager"], manager.as_str());
        let bash = out["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == "bash")
            .expect("bash is installed");
        assert!(!bash["version"].as_str().unwrap().is_empty());
        assert!(
            out["packages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["id"].as_str().unwrap().contains("bash")
                    || p["name"].as_str().unwrap().to_lowercase().contains("bash"))
        );

        let err = install(crate::tools::typed(json!({"id": "--reinstall"})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        let err = update(crate::tools::typed(json!({}))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        let err = update(crate::tools::typed(json!({"id": "bash", "all": true})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs);
        let err = uninstall(crate::tools::typed(json!({"id": "kenny-no-such-package-xyz"})))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound, "{}", err.message);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn run_keeps_the_tail_of_long_output_with_a_marker() {
        let sh = which("sh").expect("sh on PATH");
        let ran = run(
            &sh,
            &[
                "-c",
                "i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); done; echo E: the end >&2; exit 3",
            ],
            &[("LC_ALL", "C")],
            Duration::from_secs(20),
            Keep::Tail,
        )
        .await
        .unwrap();
        assert_eq!(ran.exit_code, Some(3));
        assert!(ran.cut);
        assert!(ran.stdout.starts_with("[... "), "{}", &ran.stdout[..60]);
        assert!(ran.stdout.ends_with("line 2999\n"));
        assert!(ran.stdout.len() < CHANGE_OUTPUT_TAIL + 100);
        assert_eq!(message_tail(&ran), "E: the end");
    }
}
