//! The kernel layer under `shell_exec`: on Linux every command runs in a sandbox the
//! guard's text checks cannot be talked around, because the kernel enforces it.
//!
//! Two mechanisms, each where it fits (see `docs/agent.md`):
//! - **Landlock** (`landlock.rs`): no access at all to disk and memory devices, `/boot`
//!   read-only, no new device nodes anywhere, and (ABI 6+) no signals to processes
//!   outside the command, this agent included. Landlock only grants, so denying a
//!   path means granting every sibling at each level above it: it is used where the
//!   levels above are quiet (`/`, `/dev`).
//! - **Mount isolation** (`mounts.rs`, when the agent may mount): the command gets its
//!   own mount namespace where the agent's state directory and private directories
//!   are empty and read-only, the settings file and the credential stores
//!   (`/etc/shadow`, SSH private keys) read as empty and cannot be written, and the
//!   agent's binary is read-only. Landlock forbids mounting and unmounting, and
//!   scopes ptrace, so the command cannot undo this or reach another namespace.
//!
//! Where the kernel lacks Landlock (or the agent lacks privileges) the agent says so in
//! its `sandbox` telemetry section and keeps the text guard.

#[cfg(target_os = "linux")]
mod child;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod mounts;

#[cfg(not(target_os = "linux"))]
use serde_json::Value;

#[cfg(target_os = "linux")]
pub use child::{apply, prepare, status};

/// Prepares the sandbox for this agent's paths (no-op off Linux).
#[cfg(not(target_os = "linux"))]
pub fn prepare() {}

/// What the kernel layer does on this PC, for telemetry.
#[cfg(not(target_os = "linux"))]
pub fn status() -> Value {
    serde_json::json!({
        "status": "ok",
        "summary": "n/a on this platform: commands are checked by the text guard only",
        "landlock_abi": Value::Null,
    })
}

/// Environment variable naming extra directories whose device nodes are protected
/// like those in `/dev` (`:`-separated). It can only add protection; tests use it for
/// a block device made in a temporary directory.
pub const EXTRA_DEVICE_DIRS: &str = "KENNY_GUARD_DEVICE_DIRS";
