//! `agent_update`: replace this agent's binary with a newer build from the kenny
//! server it reports to, verified by SHA-256, then restart into it.
//!
//! Only the server this agent is configured for may serve the file, and only a newer
//! version is taken. The swap keeps the previous binary beside the new one
//! (`kenny-agent.old`); the restart happens after the answer has gone out.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{ToolError, ToolResult, arg_str};

const MAX_BINARY_BYTES: u64 = 256 * 1024 * 1024;
const DOWNLOAD_LIMIT: Duration = Duration::from_secs(300);
/// Time for the answer to reach the server before the process is replaced.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// The server URL this agent reports to (set when it starts).
static SERVER_URL: Mutex<Option<String>> = Mutex::new(None);
/// Set once a new binary is in place; the tunnel restarts after answering.
static PENDING_RESTART: Mutex<Option<PathBuf>> = Mutex::new(None);

pub fn set_server_url(url: &str) {
    *SERVER_URL.lock().unwrap_or_else(|e| e.into_inner()) = Some(url.trim_end_matches('/').to_owned());
}

/// The binary to restart into, if an update was just installed.
pub fn take_pending_restart() -> Option<PathBuf> {
    PENDING_RESTART.lock().unwrap_or_else(|e| e.into_inner()).take()
}

pub async fn update(args: &Map<String, Value>) -> ToolResult {
    let version = arg_str(args, "version").unwrap_or_default().trim().to_owned();
    let url = arg_str(args, "url").unwrap_or_default().trim().to_owned();
    let sha = arg_str(args, "sha256").unwrap_or_default().trim().to_ascii_lowercase();
    let current = env!("CARGO_PKG_VERSION");
    check_version(&version, current)?;
    let server = SERVER_URL.lock().unwrap_or_else(|e| e.into_inner()).clone();
    check_url(&url, server.as_deref())?;
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ToolError::bad_args("sha256 must be 64 hex digits"));
    }
    let exe = std::env::current_exe()
        .map_err(|e| ToolError::exec_failed(format!("cannot find this agent's own binary: {e}")))?;
    if !is_standalone_agent(&exe) {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "this agent runs inside {} (kenny up), not as kenny-agent; update that program instead",
                exe.display()
            ),
        ));
    }
    let bytes = download(&url).await?;
    let got = hex(&Sha256::digest(&bytes));
    if got != sha {
        return Err(ToolError::exec_failed(format!(
            "the download does not match its sha256 (expected {sha}, got {got}); nothing was changed"
        )));
    }
    let exe_for_swap = exe.clone();
    tokio::task::spawn_blocking(move || swap(&exe_for_swap, &bytes))
        .await
        .map_err(|e| ToolError::exec_failed(format!("installing the update failed: {e}")))??;
    *PENDING_RESTART.lock().unwrap_or_else(|e| e.into_inner()) = Some(exe.clone());
    Ok(json!({
        "ok": true,
        "staged_version": version,
        "previous_version": current,
        "binary": exe.display().to_string(),
        "note": "the agent restarts into the new version now; the old binary is kept as kenny-agent.old",
    }))
}

/// `version` must be a plain x.y.z newer than the running one.
fn check_version(version: &str, current: &str) -> Result<(), ToolError> {
    let parse = kenny_proto::results::parse_version;
    let Some(new) = parse(version) else {
        return Err(ToolError::bad_args(format!(
            "version must look like 1.2.3, got {version:?}"
        )));
    };
    match parse(current) {
        Some(running) if new <= running => Err(ToolError::bad_args(format!(
            "this agent already runs {current}; {version} is not newer"
        ))),
        _ => Ok(()),
    }
}

/// Updates come only from the server this agent reports to.
fn check_url(url: &str, server: Option<&str>) -> Result<(), ToolError> {
    let Some(server) = server else {
        return Err(ToolError::exec_failed("this agent does not know its server URL yet"));
    };
    if url.starts_with(&format!("{server}/")) && !url.contains("..") {
        Ok(())
    } else {
        Err(ToolError::bad_args(format!(
            "updates are only taken from this agent's own server ({server}/...), not {url}"
        )))
    }
}

fn is_standalone_agent(exe: &Path) -> bool {
    exe.file_stem().is_some_and(|s| s == "kenny-agent")
}

async fn download(url: &str) -> Result<Vec<u8>, ToolError> {
    let client = reqwest::Client::builder()
        .timeout(DOWNLOAD_LIMIT)
        .build()
        .map_err(|e| ToolError::exec_failed(format!("cannot start a download: {e}")))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| ToolError::exec_failed(format!("cannot download {url}: {e}")))?;
    if !response.status().is_success() {
        return Err(ToolError::exec_failed(format!(
            "the server answered {} for {url}",
            response.status()
        )));
    }
    let mut bytes = Vec::new();
    let mut response = response;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ToolError::exec_failed(format!("the download of {url} broke: {e}")))?
    {
        if (bytes.len() + chunk.len()) as u64 > MAX_BINARY_BYTES {
            return Err(ToolError::exec_failed(format!(
                "{url} is larger than {} MiB; refused",
                MAX_BINARY_BYTES / 1024 / 1024
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Puts the new binary in place: written beside the old one, the old one renamed to
/// `.old`, the new one renamed in (a running binary may be renamed on Linux and
/// Windows). If the last step fails, the old binary is put back.
fn swap(exe: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    let new = exe.with_extension("new");
    let old = exe.with_extension("old");
    let io =
        |what: &str, e: std::io::Error| ToolError::exec_failed(format!("{what}: {e}; the running agent is unchanged"));
    std::fs::write(&new, bytes).map_err(|e| io(&format!("writing {}", new.display()), e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| io("making the new binary executable", e))?;
    }
    let _ = std::fs::remove_file(&old);
    std::fs::rename(exe, &old).map_err(|e| io(&format!("moving {} aside", exe.display()), e))?;
    if let Err(e) = std::fs::rename(&new, exe) {
        let _ = std::fs::rename(&old, exe);
        return Err(io("putting the new binary in place", e));
    }
    Ok(())
}

/// Replaces the process with the new binary after the answer went out. Under a
/// service manager (systemd sets INVOCATION_ID; a Windows service) the agent exits and
/// is started again by it; run by hand on Unix it re-executes itself with its arguments.
pub async fn restart_into(exe: PathBuf) {
    tokio::time::sleep(RESTART_DELAY).await;
    tracing::info!(binary = %exe.display(), "restarting into the updated agent");
    let managed = std::env::var_os("INVOCATION_ID").is_some() || cfg!(windows);
    if !managed {
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            let err = std::process::Command::new(&exe)
                .args(std::env::args_os().skip(1))
                .exec();
            tracing::error!(error = %err, "could not re-execute the updated agent; exiting so it can be started again");
        }
    }
    // A failure code: systemd's Restart=always and the Windows service's failure
    // actions both start the agent again.
    std::process::exit(75);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_newer_plain_versions() {
        assert!(check_version("0.2.0", "0.1.0").is_ok());
        assert!(check_version("0.1.1", "0.1.0").is_ok());
        assert!(
            check_version("0.1.0", "0.1.0")
                .unwrap_err()
                .message
                .contains("not newer")
        );
        assert!(check_version("0.0.9", "0.1.0").is_err());
        for bad in ["1.2", "1.2.3.4", "v1.2.3", "1.2.x", ""] {
            assert!(
                check_version(bad, "0.1.0").unwrap_err().message.contains("1.2.3"),
                "{bad}"
            );
        }
    }

    #[test]
    fn only_the_agents_own_server_serves_updates() {
        let server = Some("https://kenny.example.com");
        assert!(
            check_url(
                "https://kenny.example.com/d/agent/kenny-agent-0.2.0-linux-x86_64",
                server
            )
            .is_ok()
        );
        for bad in [
            "https://kenny.example.com.evil.test/d/x",
            "https://evil.test/https://kenny.example.com/x",
            "http://kenny.example.com/d/x",
            "https://kenny.example.com/d/../../etc",
        ] {
            assert!(check_url(bad, server).is_err(), "{bad}");
        }
        assert!(check_url("https://kenny.example.com/x", None).is_err());
    }

    #[test]
    fn the_swap_keeps_the_old_binary() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("kenny-agent");
        std::fs::write(&exe, b"old build").unwrap();
        swap(&exe, b"new build").unwrap();
        assert_eq!(std::fs::read(&exe).unwrap(), b"new build");
        assert_eq!(std::fs::read(exe.with_extension("old")).unwrap(), b"old build");
        assert!(!exe.with_extension("new").exists());
        assert!(is_standalone_agent(&exe) && is_standalone_agent(Path::new("C:/x/kenny-agent.exe")));
        assert!(!is_standalone_agent(Path::new("/usr/bin/kenny")));
    }
}
