//! `agent_update`: take a build the server signed for this agent, download it from this
//! agent's own server, check it, and stage it beside the running binary. The handover
//! to it (on trial, with rollback) happens after the answer has gone out; see
//! [`crate::handover`].
//!
//! Nothing the caller typed reaches this code: the server builds the order. What the
//! agent trusts is only the manifest signed with the server key it pinned for the
//! handshake: the agent, OS, architecture, version, file name, size and SHA-256. The
//! file is fetched from `<own server>/d/agent/<file>`, whatever URL came beside it,
//! with redirects refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ed25519_dalek::VerifyingKey;
use kenny_proto::error::ErrorCode;
use kenny_proto::update::{Manifest, OrderError, UpdateOrder};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{ToolContext, ToolError, ToolResult};

const DOWNLOAD_LIMIT: Duration = Duration::from_secs(300);

/// What this agent is, for checking orders: set once when the tunnel starts.
#[derive(Debug, Clone)]
pub struct UpdateContext {
    /// The server URL this agent reports to, without a trailing `/`.
    pub server_url: String,
    pub agent_id: String,
    /// The server key pinned for the handshake; `None` on the legacy token path.
    pub pinned: Option<VerifyingKey>,
    /// How long a new build has to reconnect before it is rolled back.
    pub trial: Duration,
}

/// A checked build written beside the running binary, waiting for the handover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The running binary, which the new one replaces.
    pub exe: PathBuf,
    /// Where the new build was written.
    pub staged: PathBuf,
    /// Its signed SHA-256 (hex), checked again at the swap: the file sits in a directory
    /// other programs can write to between download and handover.
    pub sha256: String,
    pub from: String,
    pub to: String,
    /// The signed manifest, echoed in the outcome report so the server knows the order.
    pub manifest: String,
    pub signature: String,
}

pub(super) async fn update(order: UpdateOrder, ctx: &ToolContext) -> ToolResult {
    let context = ctx
        .update
        .as_ref()
        .ok_or_else(|| ToolError::exec_failed("this agent is not connected to a server yet"))?;
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
    let current = env!("CARGO_PKG_VERSION");
    let manifest = check_order(&order, context, current, std::env::consts::OS, std::env::consts::ARCH)?;
    let url = format!("{}/d/agent/{}", context.server_url, manifest.file);
    let bytes = download(&url, manifest.size).await?;
    let got = hex::encode(Sha256::digest(&bytes));
    if !got.eq_ignore_ascii_case(&manifest.sha256) {
        return Err(ToolError::new(
            ErrorCode::Blocked,
            format!(
                "the download does not match the signed sha256 (expected {}, got {got}); nothing was changed",
                manifest.sha256
            ),
        ));
    }
    let staged_path = staged_path(&exe);
    let to_write = staged_path.clone();
    tokio::task::spawn_blocking(move || write_executable(&to_write, &bytes))
        .await
        .map_err(|e| ToolError::exec_failed(format!("staging the update failed: {e}")))??;
    ctx.stage(Staged {
        exe: exe.clone(),
        staged: staged_path,
        sha256: manifest.sha256.to_lowercase(),
        from: current.to_owned(),
        to: manifest.version.clone(),
        manifest: order.manifest.clone(),
        signature: order.signature.clone(),
    });
    Ok(json!({
        "ok": true,
        "staged_version": manifest.version,
        "previous_version": current,
        "binary": exe.display().to_string(),
        "trial_secs": context.trial.as_secs(),
        "note": format!(
            "the agent now restarts into {} on trial: if it has not reconnected within {}s the previous build is restored and the failure reported",
            manifest.version,
            context.trial.as_secs()
        ),
    }))
}

/// Arguments that do not decode as an order were not built by a server that signs them.
pub(super) fn malformed_order(e: &serde_json::Error) -> ToolError {
    order_error(OrderError::Malformed(e.to_string()))
}

fn order_error(e: OrderError) -> ToolError {
    match e {
        OrderError::Malformed(_) => ToolError::bad_args(e.to_string()),
        OrderError::BadSignature | OrderError::BadManifest(_) => ToolError::new(ErrorCode::Blocked, e.to_string()),
    }
}

/// Everything about an order that can be checked before downloading: who signed it,
/// which agent, OS and architecture it is for, and that it does not go backwards
/// unless the signed manifest says a superuser asked for exactly that.
fn check_order(
    order: &UpdateOrder,
    context: &UpdateContext,
    current: &str,
    os: &str,
    arch: &str,
) -> Result<Manifest, ToolError> {
    let Some(pinned) = &context.pinned else {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            "this agent logs in with a token, not a pinned server key, so it cannot tell who signed an update; reinstall it with --server-pubkey to take updates",
        ));
    };
    let manifest = order.verify(pinned).map_err(order_error)?;
    let refuse = |what: String| ToolError::new(ErrorCode::Blocked, format!("{what}; nothing was downloaded"));
    if manifest.agent_id != context.agent_id {
        return Err(refuse(format!(
            "the update was signed for agent {:?}, not this one ({})",
            manifest.agent_id, context.agent_id
        )));
    }
    if manifest.os != os || manifest.arch != arch {
        return Err(refuse(format!(
            "the build is for {}/{}, this PC is {os}/{arch}",
            manifest.os, manifest.arch
        )));
    }
    if manifest.allow_downgrade && !recently_issued(&manifest.issued_at, time::OffsetDateTime::now_utc()) {
        // A downgrade order seen on the wire must not be replayable later, to put an
        // old build back after the PC moved on.
        return Err(refuse(format!(
            "the signed downgrade order was issued at {}, more than {} hours from this PC's clock; ask for it again (and check the PC's clock)",
            manifest.issued_at,
            DOWNGRADE_ORDER_LIFETIME.whole_hours()
        )));
    }
    let parse = kenny_proto::results::parse_version;
    let Some(new) = parse(&manifest.version) else {
        return Err(refuse(format!(
            "the signed version {:?} is not a release version",
            manifest.version
        )));
    };
    match parse(current) {
        Some(running) if new == running => Err(ToolError::bad_args(format!("this agent already runs {current}"))),
        Some(running) if new < running && !manifest.allow_downgrade => Err(ToolError::bad_args(format!(
            "this agent runs {current}; {} is older and the server did not allow a downgrade",
            manifest.version
        ))),
        _ => Ok(manifest),
    }
}

/// How long a signed downgrade order stays good, either side of this PC's clock.
const DOWNGRADE_ORDER_LIFETIME: time::Duration = time::Duration::hours(6);

fn recently_issued(issued_at: &str, now: time::OffsetDateTime) -> bool {
    let format = time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(issued_at, &format).is_ok_and(|at| (now - at).abs() <= DOWNGRADE_ORDER_LIFETIME)
}

fn is_standalone_agent(exe: &Path) -> bool {
    exe.file_stem().is_some_and(|s| s == "kenny-agent")
}

/// Where the new build waits for the handover: beside the running one.
fn staged_path(exe: &Path) -> PathBuf {
    exe.with_extension("new")
}

/// Fetches exactly `size` bytes from `url`: no redirects, a 200 answer only, and the
/// download stops as soon as it exceeds the signed size.
async fn download(url: &str, size: u64) -> Result<Vec<u8>, ToolError> {
    let client = reqwest::Client::builder()
        .timeout(DOWNLOAD_LIMIT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ToolError::exec_failed(format!("cannot start a download: {e}")))?;
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|e| ToolError::exec_failed(format!("cannot download {url}: {e}")))?;
    let status = response.status();
    if status.is_redirection() {
        return Err(ToolError::new(
            ErrorCode::Blocked,
            format!("the server answered {status} for {url}; updates never follow redirects, nothing was changed"),
        ));
    }
    if status != reqwest::StatusCode::OK {
        return Err(ToolError::exec_failed(format!(
            "the server answered {status} for {url}; nothing was changed"
        )));
    }
    if let Some(announced) = response.content_length()
        && announced != size
    {
        return Err(ToolError::new(
            ErrorCode::Blocked,
            format!("{url} is {announced} bytes, the signed manifest says {size}; nothing was changed"),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ToolError::exec_failed(format!("the download of {url} broke: {e}")))?
    {
        if (bytes.len() + chunk.len()) as u64 > size {
            return Err(ToolError::new(
                ErrorCode::Blocked,
                format!("{url} is larger than the signed {size} bytes; nothing was changed"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    if bytes.len() as u64 != size {
        return Err(ToolError::exec_failed(format!(
            "{url} ended after {} of the signed {size} bytes; nothing was changed",
            bytes.len()
        )));
    }
    Ok(bytes)
}

fn write_executable(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    let io = |e: std::io::Error| {
        ToolError::exec_failed(format!(
            "writing {}: {e}; the running agent is unchanged",
            path.display()
        ))
    };
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    // A new file, never one planted there (or a symlink to elsewhere): create_new
    // fails on anything already at the path.
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o700);
    }
    let mut file = options.open(path).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o755))
            .map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
