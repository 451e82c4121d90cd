//! The one way the agent starts a program: argv only (never a shell), output read
//! concurrently and kept within a cap, a time limit, and the whole process tree killed
//! on timeout or when the call is dropped. `shell_exec`, `powershell_exec` and every
//! helper program (systemctl, ip, winget, PowerShell queries) go through here.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use kenny_proto::error::ErrorCode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use super::ToolError;
use super::bounded::BoundedBuf;

/// Per stream; more would not fit in a reply an operator (or a model) can read anyway.
pub(crate) const OUTPUT_CAP: usize = 256 * 1024;
/// After the command exits, how long to keep reading output still in flight. Background
/// processes it started may hold our pipes open for hours; they must not hold the call.
const PIPE_GRACE: Duration = Duration::from_millis(500);
/// How long to wait for a killed child to be reaped before giving up on it.
const REAP_WAIT: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 * 1024;

/// What a helper program printed, for tools that run one (ip, resolvectl, ping...) and
/// parse its output rather than hand it back raw. Output past the cap is cut with the
/// usual marker; parsers only need what fits.
#[derive(Debug, Clone)]
pub(crate) struct ProgramOutput {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: Option<i32>,
}

impl ProgramOutput {
    pub(crate) fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The end of stderr (or stdout when stderr is empty): where programs say what failed.
    pub(crate) fn complaint(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        let text = text.trim();
        let start = text.char_indices().rev().nth(599).map_or(0, |(i, _)| i);
        text[start..].to_owned()
    }
}

impl From<Captured> for ProgramOutput {
    fn from(captured: Captured) -> Self {
        ProgramOutput {
            exit_code: captured.status.code(),
            stdout: captured.stdout.into_text(),
            stderr: captured.stderr.into_text(),
        }
    }
}

/// Runs `program` with `args` as argv (never through a shell), bounded like shell_exec.
pub(crate) async fn run_program(program: &str, args: &[&str], limit: Duration) -> Result<ProgramOutput, ToolError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    Ok(run_captured(cmd, None, limit, OUTPUT_CAP).await?.into())
}

/// Everything a finished command produced.
pub(crate) struct Captured {
    pub stdout: BoundedBuf,
    pub stderr: BoundedBuf,
    pub status: ExitStatus,
}

/// [`run_captured_into`] with `cap` bytes kept from the start of each stream.
pub(crate) async fn run_captured(
    cmd: Command,
    stdin: Option<Vec<u8>>,
    limit: Duration,
    cap: usize,
) -> Result<Captured, ToolError> {
    run_captured_into(cmd, stdin, limit, BoundedBuf::new(cap), BoundedBuf::new(cap)).await
}

/// [`run`] for the agent's own helper commands (systemctl, journalctl, apt, PowerShell
/// queries): the same process-tree handling, output kept in the given buffers (the
/// start or the tail of each stream), and the raw capture returned for the caller to
/// parse. Argv only, never a shell.
pub(crate) async fn run_captured_into(
    mut cmd: Command,
    stdin: Option<Vec<u8>>,
    limit: Duration,
    stdout: BoundedBuf,
    stderr: BoundedBuf,
) -> Result<Captured, ToolError> {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    isolate(&mut cmd);

    let program = cmd.as_std().get_program().to_string_lossy().into_owned();
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ToolError::new(
                ErrorCode::Unsupported,
                format!("`{program}` is not installed on this PC (or not on the agent's PATH)"),
            )
        } else {
            ToolError::exec_failed(format!("could not start `{program}`: {e}"))
        }
    })?;
    let Some(pid) = child.id() else {
        return Err(ToolError::exec_failed(format!(
            "`{program}` vanished before it could be tracked"
        )));
    };
    let mut tree = TreeGuard::new(pid);
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A separate task so a child that reads slowly (or never) cannot stall the
        // output loop; dropping the pipe afterwards is what signals end of input.
        tokio::spawn(async move {
            let _ = pipe.write_all(&bytes).await;
        });
    }

    match tokio::time::timeout(limit, capture(&mut child, stdout, stderr)).await {
        Ok(Ok(captured)) => {
            // Processes deliberately left in the background (`nohup x &`) stay alive.
            tree.disarm();
            Ok(captured)
        }
        Ok(Err(e)) => Err(ToolError::exec_failed(format!("waiting for `{program}` failed: {e}"))),
        Err(_) => {
            let what = tree.describe();
            tree.kill();
            let _ = tokio::time::timeout(REAP_WAIT, child.wait()).await;
            Err(ToolError::new(
                ErrorCode::Timeout,
                format!("command exceeded {}s and was killed ({what})", limit.as_secs()),
            ))
        }
    }
}

/// Reads stdout and stderr concurrently until the child exits and both pipes close (or
/// the grace period after exit ends). Reading never stops at the cap, so a chatty child
/// never blocks on a full pipe.
async fn capture(child: &mut Child, mut stdout: BoundedBuf, mut stderr: BoundedBuf) -> std::io::Result<Captured> {
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let mut out_chunk = vec![0u8; READ_CHUNK];
    let mut err_chunk = vec![0u8; READ_CHUNK];
    let mut status = None;
    let mut grace_until = None;
    loop {
        if status.is_some() && out_pipe.is_none() && err_pipe.is_none() {
            break;
        }
        tokio::select! {
            n = read_chunk(&mut out_pipe, &mut out_chunk) => take_chunk(n, &mut out_pipe, &mut stdout, &out_chunk),
            n = read_chunk(&mut err_pipe, &mut err_chunk) => take_chunk(n, &mut err_pipe, &mut stderr, &err_chunk),
            exited = child.wait(), if status.is_none() => {
                status = Some(exited?);
                grace_until = Some(tokio::time::Instant::now() + PIPE_GRACE);
            }
            () = sleep_until(grace_until) => break,
        }
    }
    let status = status.ok_or_else(|| std::io::Error::other("no exit status"))?;
    Ok(Captured { stdout, stderr, status })
}

/// Reads from an open pipe, or waits forever on a closed one so `select!` ignores it.
/// A read error ends the stream like EOF: there is nothing better to do with it.
async fn read_chunk<R: AsyncRead + Unpin>(pipe: &mut Option<R>, chunk: &mut [u8]) -> usize {
    match pipe {
        Some(reader) => reader.read(chunk).await.unwrap_or(0),
        None => std::future::pending().await,
    }
}

fn take_chunk<R>(n: usize, pipe: &mut Option<R>, buf: &mut BoundedBuf, chunk: &[u8]) {
    if n == 0 {
        *pipe = None;
    } else {
        buf.push(&chunk[..n]);
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(unix)]
pub(crate) fn killing_signal(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
pub(crate) fn killing_signal(_status: &ExitStatus) -> Option<i32> {
    None
}

/// Puts the child where its whole tree can be killed at once.
#[cfg(unix)]
fn isolate(cmd: &mut Command) {
    // Its own process group (pgid = its pid), which its children inherit.
    cmd.process_group(0);
}

#[cfg(windows)]
fn isolate(cmd: &mut Command) {
    cmd.creation_flags(windows::CREATE_NO_WINDOW);
}

#[cfg(not(any(unix, windows)))]
fn isolate(_cmd: &mut Command) {}

/// Kills the command's whole process tree when dropped while armed.
///
/// `kill_on_drop` only reaches the direct child; the shell's own children would survive
/// a cancelled call without this.
struct TreeGuard {
    pid: u32,
    armed: bool,
}

impl TreeGuard {
    fn new(pid: u32) -> Self {
        TreeGuard { pid, armed: true }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }

    /// Kills the tree once; later calls do nothing, so a recycled id is never hit.
    fn kill(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            kill_tree(self.pid);
        }
    }

    fn describe(&self) -> String {
        if cfg!(unix) {
            format!("process group {}", self.pid)
        } else {
            format!("process tree of pid {}", self.pid)
        }
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(unix)]
fn kill_tree(pgid: u32) {
    // Never 0 or 1: kill(0) and kill(-1) would hit our own group or every process.
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid > 1 {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

#[cfg(windows)]
fn kill_tree(pid: u32) {
    windows::kill_tree(pid);
}

#[cfg(not(any(unix, windows)))]
fn kill_tree(_pid: u32) {}

#[cfg(windows)]
mod windows {
    use std::path::PathBuf;
    use std::process::Stdio;

    /// No console window flashes up on the user's desktop.
    pub(super) const CREATE_NO_WINDOW: u32 = 0x0800_0000;

    /// Waits for taskkill so the tree is gone before the direct child's handle is
    /// dropped: /T finds children through their parent, which must still exist.
    pub(super) fn kill_tree(pid: u32) {
        let program = system32()
            .map(|dir| dir.join("taskkill.exe"))
            .filter(|path| path.is_file())
            .unwrap_or_else(|| PathBuf::from("taskkill.exe"));
        let mut cmd = std::process::Command::new(program);
        cmd.args(["/T", "/F", "/PID", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::windows::process::CommandExt::creation_flags(&mut cmd, CREATE_NO_WINDOW);
        if let Err(e) = cmd.status() {
            tracing::warn!(pid, "could not run taskkill to end a command's process tree: {e}");
        }
    }

    fn system32() -> Option<PathBuf> {
        std::env::var_os("SystemRoot").map(|root| PathBuf::from(root).join("System32"))
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn run_program_passes_argv_verbatim() {
        let out = run_program("printf", &["%s|", "a b", "$(id)", ";x"], Duration::from_secs(10))
            .await
            .unwrap();
        assert!(out.success());
        assert_eq!(out.stdout, "a b|$(id)|;x|");
        let missing = run_program("kenny-no-such-program", &[], Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(missing.code, ErrorCode::Unsupported, "{missing:?}");
        assert!(
            missing.message.contains("`kenny-no-such-program` is not installed"),
            "{missing:?}"
        );
        let failing = run_program("sh", &["-c", "echo oops >&2; exit 3"], Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!((failing.exit_code, failing.complaint().as_str()), (Some(3), "oops"));
    }
}
