//! Handing the agent over to a newly staged build, on trial: the running agent swaps
//! the binaries, starts the new one as a child that only has to authenticate with the
//! server, and keeps it only if that happens within the trial window; otherwise it
//! kills the child, puts its own binary back and carries on. Either way the outcome is
//! written to a marker in the state directory and reported to the server (a `log`
//! frame echoing the signed manifest) after the next successful login.
//!
//! The supervisor is the old, known-good build: a new build that crashes at start,
//! hangs, or cannot log in can never leave the PC without a working agent.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kenny_proto::frame::Log;
use serde::{Deserialize, Serialize};
use serde_json::{Map, json};

use crate::tools::update::Staged;

/// The environment variable that puts a child agent in trial mode.
pub const TRIAL_ENV: &str = "KENNY_UPDATE_TRIAL";
const MARKER_FILE: &str = "update-handover.json";
/// How often the supervisor looks at the marker and the child.
const POLL: Duration = Duration::from_millis(200);
/// After confirming, the trial child closes its connection and exits by itself.
const CHILD_EXIT_WAIT: Duration = Duration::from_secs(10);
/// Time for an answer to reach the server before the process is replaced.
const RESTART_DELAY: Duration = Duration::from_millis(500);

/// Where a handover stands, as the marker file records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// The new build is in place and on trial.
    Trial,
    /// The new build logged in during its trial; it stays.
    Confirmed,
    /// The previous build was put back.
    RolledBack,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    pub state: State,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub manifest: String,
    pub signature: String,
}

/// How a trial ended, for the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrialOutcome {
    /// Restart into the new build now.
    Kept,
    /// The previous build is back in place; carry on running.
    RolledBack(String),
}

fn marker_path(state_dir: &Path) -> PathBuf {
    state_dir.join(MARKER_FILE)
}

pub fn read_marker(state_dir: &Path) -> Option<Marker> {
    let text = std::fs::read_to_string(marker_path(state_dir)).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_marker(state_dir: &Path, marker: &Marker) -> std::io::Result<()> {
    let path = marker_path(state_dir);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(marker).unwrap_or_default())?;
    std::fs::rename(&tmp, &path)
}

/// Whether this process is a trial child.
pub fn in_trial() -> bool {
    std::env::var_os(TRIAL_ENV).is_some_and(|v| v == "1")
}

/// Called by a trial child once it has logged in: the supervisor keeps the new build.
pub fn confirm_trial(state_dir: &Path) -> std::io::Result<()> {
    match read_marker(state_dir) {
        Some(marker) if marker.state == State::Trial => write_marker(
            state_dir,
            &Marker {
                state: State::Confirmed,
                ..marker
            },
        ),
        _ => Err(std::io::Error::other("no handover is on trial")),
    }
}

/// The outcome report to send after logging in, if a handover ended since the last one.
/// A marker still `trial` on a normal start means the supervisor was interrupted (a
/// reboot mid-trial): whichever build runs now has just logged in, so it stays.
pub fn pending_report(state_dir: &Path, agent_id: &str, at: String) -> Option<Log> {
    let marker = read_marker(state_dir)?;
    let (outcome, level, reason) = match marker.state {
        State::Confirmed => (
            "succeeded",
            "info",
            "the new build logged in during its trial".to_owned(),
        ),
        State::Trial => (
            "succeeded",
            "warn",
            "the handover was interrupted; the build in place logged in".to_owned(),
        ),
        State::RolledBack => ("rolled_back", "error", marker.reason.clone()),
    };
    let mut fields = Map::new();
    for (k, v) in [
        ("event", json!("agent_update")),
        ("outcome", json!(outcome)),
        ("from", json!(marker.from)),
        ("to", json!(marker.to)),
        ("reason", json!(reason)),
        ("manifest", json!(marker.manifest)),
        ("signature", json!(marker.signature)),
    ] {
        fields.insert(k.into(), v);
    }
    Some(Log {
        agent_id: agent_id.to_owned(),
        at,
        level: level.into(),
        target: "kenny_agent::handover".into(),
        message: format!("agent update {} -> {}: {outcome} ({reason})", marker.from, marker.to),
        fields: Some(fields),
    })
}

/// Forgets the marker once its report reached the server.
pub fn clear(state_dir: &Path) {
    let _ = std::fs::remove_file(marker_path(state_dir));
}

fn sibling(exe: &Path, extension: &str) -> PathBuf {
    exe.with_extension(extension)
}

/// Puts the staged build in place, runs it on trial for at most `window`, and keeps it
/// or restores the previous build. `argv` is this process's arguments (without the
/// program name); the child gets the same, as a foreground `run`.
pub async fn trial(staged: &Staged, state_dir: &Path, window: Duration, argv: Vec<OsString>) -> TrialOutcome {
    let marker = Marker {
        state: State::Trial,
        from: staged.from.clone(),
        to: staged.to.clone(),
        reason: String::new(),
        manifest: staged.manifest.clone(),
        signature: staged.signature.clone(),
    };
    if let Err(e) = write_marker(state_dir, &marker) {
        return give_up(
            staged,
            state_dir,
            &marker,
            format!("cannot write the handover marker: {e}"),
        );
    }
    if let Err(e) = swap_in(staged) {
        return give_up(staged, state_dir, &marker, e);
    }
    // Checked once more where it now runs from: something could have written to the
    // file between the check before the swap and the rename.
    match file_sha256(&staged.exe) {
        Ok(hash) if hash == staged.sha256 => {}
        Ok(hash) => {
            return roll_back(
                staged,
                state_dir,
                &marker,
                format!(
                    "the new build changed after it was checked (sha256 {hash}, signed {})",
                    staged.sha256
                ),
            );
        }
        Err(e) => {
            return roll_back(
                staged,
                state_dir,
                &marker,
                format!("cannot read the new build back: {e}"),
            );
        }
    }
    tracing::info!(from = %staged.from, to = %staged.to, window_s = window.as_secs(), "starting the new agent build on trial");
    let mut child = match tokio::process::Command::new(&staged.exe)
        .args(trial_args(argv))
        .env(TRIAL_ENV, "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return roll_back(staged, state_dir, &marker, format!("the new build did not start: {e}")),
    };
    let started = Instant::now();
    loop {
        tokio::time::sleep(POLL).await;
        let confirmed = read_marker(state_dir).is_some_and(|m| m.state == State::Confirmed);
        if confirmed {
            if tokio::time::timeout(CHILD_EXIT_WAIT, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
            tracing::info!(to = %staged.to, "the new agent build logged in; keeping it");
            return TrialOutcome::Kept;
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                return roll_back(
                    staged,
                    state_dir,
                    &marker,
                    format!("the new build exited ({status}) before it logged in"),
                );
            }
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill().await;
                return roll_back(staged, state_dir, &marker, format!("cannot watch the new build: {e}"));
            }
        }
        if started.elapsed() >= window {
            let _ = child.kill().await;
            return roll_back(
                staged,
                state_dir,
                &marker,
                format!("the new build did not log in within {}s", window.as_secs()),
            );
        }
    }
}

/// The child runs in the foreground whatever started this one (a Windows service runs
/// `service`; its trial child must not try to talk to the service manager).
fn trial_args(mut argv: Vec<OsString>) -> Vec<OsString> {
    if argv.first().is_some_and(|a| a == "service") {
        argv[0] = OsString::from("run");
    }
    argv
}

/// The SHA-256 (lower-case hex) of a regular file, not following a symlink at `path`.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let mut file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Running binary to `.old`, staged build into its place, once the staged file still
/// has the signed hash. A running binary may be renamed on Linux and on Windows.
fn swap_in(staged: &Staged) -> Result<(), String> {
    let exe = &staged.exe;
    match file_sha256(&staged.staged) {
        Ok(hash) if hash == staged.sha256 => {}
        Ok(hash) => {
            return Err(format!(
                "the staged build changed after it was checked (sha256 {hash}, signed {}); nothing was swapped",
                staged.sha256
            ));
        }
        Err(e) => return Err(format!("cannot read the staged build back: {e}; nothing was swapped")),
    }
    let staged = &staged.staged;
    let old = sibling(exe, "old");
    let _ = std::fs::remove_file(&old);
    std::fs::rename(exe, &old).map_err(|e| format!("moving {} aside failed: {e}", exe.display()))?;
    if let Err(e) = std::fs::rename(staged, exe) {
        let _ = std::fs::rename(&old, exe);
        return Err(format!("putting the new build in place failed: {e}"));
    }
    Ok(())
}

/// Nothing was swapped: drop the staged file and record why.
fn give_up(staged: &Staged, state_dir: &Path, marker: &Marker, reason: String) -> TrialOutcome {
    let _ = std::fs::remove_file(&staged.staged);
    record_rollback(state_dir, marker, &reason);
    TrialOutcome::RolledBack(reason)
}

/// Puts `.old` back in place of `exe`, keeping the replaced build aside as `.failed`
/// when that can be done. Restoring does not depend on that: renaming `.old` over
/// `exe` replaces it in one step, whatever sits at `.failed`.
fn restore_previous(exe: &Path) -> std::io::Result<()> {
    let failed = sibling(exe, "failed");
    let _ = std::fs::remove_file(&failed);
    if let Err(e) = std::fs::copy(exe, &failed) {
        tracing::warn!(error = %e, "could not keep the failed build aside");
    }
    let old = sibling(exe, "old");
    std::fs::rename(&old, exe).or_else(|first| {
        // Windows does not replace a running image, but does rename it.
        let aside = sibling(exe, "replaced");
        let _ = std::fs::remove_file(&aside);
        std::fs::rename(exe, &aside).map_err(|_| first)?;
        std::fs::rename(&old, exe)
    })
}

/// The new build failed its trial: restore `.old` (the failed one kept as `.failed`).
fn roll_back(staged: &Staged, state_dir: &Path, marker: &Marker, reason: String) -> TrialOutcome {
    let restored = restore_previous(&staged.exe);
    let reason = match restored {
        Ok(()) => reason,
        Err(e) => {
            tracing::error!(error = %e, "could not restore the previous agent binary");
            format!(
                "{reason}; restoring the previous binary failed too ({e}): this process still runs the previous build from memory"
            )
        }
    };
    tracing::error!(%reason, to = %staged.to, "agent update rolled back");
    record_rollback(state_dir, marker, &reason);
    TrialOutcome::RolledBack(reason)
}

fn record_rollback(state_dir: &Path, marker: &Marker, reason: &str) {
    let rolled = Marker {
        state: State::RolledBack,
        reason: reason.to_owned(),
        ..marker.clone()
    };
    if let Err(e) = write_marker(state_dir, &rolled) {
        tracing::error!(error = %e, "could not record the rollback");
    }
}

/// At start-up, outside a trial: a marker still on `trial` with the previous build
/// beside this one means the supervising agent stopped mid-trial (a reboot, a kill), so
/// the build now running never proved itself. Puts the previous build back and
/// restarts into it; the rollback is reported after its next login. Returns whether it
/// restored (the caller then restarts).
pub fn recover_interrupted(state_dir: &Path, exe: &Path) -> bool {
    let Some(marker) = read_marker(state_dir) else {
        return false;
    };
    if marker.state != State::Trial || !sibling(exe, "old").is_file() {
        return false;
    }
    let reason = "the update was interrupted before the new build logged in on trial (the supervising agent stopped); the previous build was put back";
    match restore_previous(exe) {
        Ok(()) => {
            tracing::warn!(to = %marker.to, "{reason}");
            record_rollback(state_dir, &marker, reason);
            true
        }
        Err(e) => {
            tracing::error!(error = %e, "could not put the previous build back after an interrupted update");
            false
        }
    }
}

/// Replaces this process with the kept build. Under a service manager (systemd sets
/// INVOCATION_ID; a Windows service) the agent exits and the manager starts it again;
/// run by hand on Unix it re-executes itself with its arguments, keeping its PID.
pub async fn restart_into(exe: &Path) -> ! {
    tokio::time::sleep(RESTART_DELAY).await;
    tracing::info!(binary = %exe.display(), "restarting into the updated agent");
    let managed = std::env::var_os("INVOCATION_ID").is_some() || cfg!(windows);
    if !managed {
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            let err = std::process::Command::new(exe).args(std::env::args_os().skip(1)).exec();
            tracing::error!(error = %err, "could not re-execute the updated agent; exiting so it can be started again");
        }
    }
    // A failure code: systemd's Restart=always and the Windows service's failure
    // actions both start the agent again.
    std::process::exit(75);
}

#[cfg(test)]
mod tests;
