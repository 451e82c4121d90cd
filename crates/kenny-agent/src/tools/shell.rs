//! Runs shell commands and PowerShell scripts with bounded output and a timeout, leaving no processes behind when killed or cancelled.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use super::bounded::BoundedBuf;
use super::{ToolError, ToolResult, arg_str, arg_u64};

/// Per stream; more would not fit in a reply an operator (or a model) can read anyway.
const OUTPUT_CAP: usize = 256 * 1024;
const DEFAULT_TIMEOUT_S: u64 = 60;
/// After the command exits, how long to keep reading output still in flight. Background
/// processes it started may hold our pipes open for hours; they must not hold the call.
const PIPE_GRACE: Duration = Duration::from_millis(500);
/// How long to wait for a killed child to be reaped before giving up on it.
const REAP_WAIT: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 16 * 1024;

pub async fn shell_exec(args: &Map<String, Value>) -> ToolResult {
    let command = required_str(args, "command")?;
    let limit = timeout_arg(args);
    #[cfg(unix)]
    {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(command);
        #[cfg(target_os = "linux")]
        crate::sandbox::apply(&mut cmd).map_err(|e| {
            ToolError::exec_failed(format!(
                "the command was not run: its sandbox could not be set up ({e})"
            ))
        })?;
        run(cmd, None, limit).await
    }
    #[cfg(not(unix))]
    {
        let _ = (command, limit);
        Err(ToolError::new(
            ErrorCode::Unsupported,
            "shell_exec runs on Linux and macOS only; use powershell_exec on Windows",
        ))
    }
}

pub async fn powershell_exec(args: &Map<String, Value>) -> ToolResult {
    let script = required_str(args, "script")?;
    let limit = timeout_arg(args);
    #[cfg(windows)]
    {
        let invocation = powershell_invocation(script);
        let mut cmd = Command::new(windows::powershell_program());
        cmd.args(&invocation.args);
        run(cmd, Some(invocation.stdin), limit).await
    }
    #[cfg(not(windows))]
    {
        let _ = (script, limit);
        Err(ToolError::new(
            ErrorCode::Unsupported,
            "powershell_exec runs on Windows only; use shell_exec on Linux and macOS",
        ))
    }
}

fn required_str<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ToolError> {
    arg_str(args, name).ok_or_else(|| ToolError::bad_args(format!("missing required argument `{name}`")))
}

fn timeout_arg(args: &Map<String, Value>) -> Duration {
    Duration::from_secs(arg_u64(args, "timeout_s", DEFAULT_TIMEOUT_S))
}

/// How powershell.exe is started for a script.
///
/// The script travels on stdin, never on the command line: that avoids every Windows
/// quoting rule and the 32767-character command-line limit (a 64 KiB script is ~175k
/// characters as -EncodedCommand). The fixed bootstrap that reads it is passed as
/// -EncodedCommand, so it needs no quoting either.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) struct PowerShellInvocation {
    pub args: Vec<String>,
    pub stdin: Vec<u8>,
}

/// Reads the whole script as UTF-8 (the console code page would mangle non-ASCII) and
/// runs it in the top scope, so `exit N` sets powershell.exe's exit code as usual.
/// Setting the output encoding throws when there is no console; output then stays in
/// the OEM code page, which is still readable for ASCII.
#[cfg_attr(not(windows), allow(dead_code))]
const POWERSHELL_BOOTSTRAP: &str = "\
$ProgressPreference = 'SilentlyContinue'
try { [Console]::OutputEncoding = New-Object System.Text.UTF8Encoding $false } catch { }
$kennyInput = New-Object System.IO.MemoryStream
[Console]::OpenStandardInput().CopyTo($kennyInput)
$kennyScript = [System.Text.Encoding]::UTF8.GetString($kennyInput.ToArray())
Remove-Variable kennyInput
. ([scriptblock]::Create($kennyScript))
";

#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn powershell_invocation(script: &str) -> PowerShellInvocation {
    PowerShellInvocation {
        args: powershell_encoded_args(POWERSHELL_BOOTSTRAP),
        stdin: script.as_bytes().to_vec(),
    }
}

/// powershell.exe's arguments (after the program name) that run `script` with no
/// profile, no prompt and no execution policy in the way, passed as -EncodedCommand so
/// no quoting rule of the Windows command line can change what it says.
pub(crate) fn powershell_encoded_args(script: &str) -> Vec<String> {
    [
        "-NoLogo",
        "-NoProfile",
        "-NonInteractive",
        "-ExecutionPolicy",
        "Bypass",
        "-EncodedCommand",
    ]
    .into_iter()
    .map(String::from)
    .chain([encode_powershell_command(script)])
    .collect()
}

/// The form -EncodedCommand expects: base64 of the UTF-16LE text.
fn encode_powershell_command(text: &str) -> String {
    let utf16le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    BASE64.encode(utf16le)
}

/// `text` as a PowerShell single-quoted string literal: nothing inside is expanded, and a
/// quote is escaped by doubling it. PowerShell also ends such a string at the typographic
/// single quotes (U+2018..U+201B), so those are doubled too.
pub(crate) fn powershell_literal(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('\'');
    for c in text.chars() {
        if is_powershell_single_quote(c) {
            quoted.push(c);
        }
        quoted.push(c);
    }
    quoted.push('\'');
    quoted
}

fn is_powershell_single_quote(c: char) -> bool {
    matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}')
}

/// Runs one of the agent's own PowerShell queries (built by kenny, not an operator's
/// script) and captures its output; see [`run_captured`].
pub(crate) async fn run_powershell(script: &str, limit: Duration, cap: usize) -> Result<Captured, ToolError> {
    #[cfg(windows)]
    {
        let invocation = powershell_invocation(script);
        let mut cmd = Command::new(windows::powershell_program());
        cmd.args(&invocation.args);
        run_captured(cmd, Some(invocation.stdin), limit, cap).await
    }
    #[cfg(not(windows))]
    {
        let _ = (script, limit, cap);
        Err(ToolError::new(
            ErrorCode::Unsupported,
            "this query uses PowerShell, which the agent only runs on Windows",
        ))
    }
}

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

/// [`run_powershell`] with the standard output cap, as text.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) async fn powershell_output(script: &str, limit: Duration) -> Result<ProgramOutput, ToolError> {
    Ok(run_powershell(script, limit, OUTPUT_CAP).await?.into())
}

/// A program under `%SystemRoot%\\System32`, by full path so a PATH entry cannot shadow
/// it; the bare file name when that is unknown (or off Windows, where it is never run).
pub(super) fn system32_tool(relative: &str) -> PathBuf {
    std::env::var_os("SystemRoot")
        .map(|root| PathBuf::from(root).join("System32").join(relative))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from(relative.rsplit('\\').next().unwrap_or(relative)))
}

/// Runs a PowerShell script whose last output line is JSON (`ConvertTo-Json -Compress`)
/// and returns that value; a failed script is `exec_failed` with its own error text.
#[cfg_attr(not(windows), allow(dead_code))]
pub(super) async fn powershell_json(what: &str, script: &str, limit: Duration) -> Result<Value, ToolError> {
    let out = powershell_output(script, limit)
        .await
        .map_err(|e| ToolError::new(e.code, format!("{what}: {}", e.message)))?;
    let last = out.stdout.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("");
    match serde_json::from_str(last) {
        Ok(value) if out.success() => Ok(value),
        _ => {
            let said = out.complaint();
            Err(ToolError::exec_failed(format!(
                "{what} failed (PowerShell exit code {}): {}",
                out.exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string()),
                if said.is_empty() { "(no output)" } else { &said }
            )))
        }
    }
}

/// Everything a finished command produced.
pub(crate) struct Captured {
    pub stdout: BoundedBuf,
    pub stderr: BoundedBuf,
    pub status: ExitStatus,
}

/// Spawns `cmd`, feeds it `stdin` if given, and collects its output until it exits or
/// `limit` passes. The whole process tree is killed on timeout and if this future is
/// dropped before the command finished.
async fn run(cmd: Command, stdin: Option<Vec<u8>>, limit: Duration) -> ToolResult {
    let started = Instant::now();
    let captured = run_captured(cmd, stdin, limit, OUTPUT_CAP).await?;
    Ok(result_json(captured, started.elapsed()))
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

fn result_json(captured: Captured, elapsed: Duration) -> Value {
    let truncated = captured.stdout.truncated() || captured.stderr.truncated();
    let mut result = json!({
        "stdout": captured.stdout.into_text(),
        "stderr": captured.stderr.into_text(),
        "exit_code": captured.status.code(),
        "truncated": truncated,
        "duration_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
    });
    if let Some(signal) = killing_signal(&captured.status) {
        result["signal"] = Value::from(signal);
    }
    result
}

#[cfg(unix)]
fn killing_signal(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn killing_signal(_status: &ExitStatus) -> Option<i32> {
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

    /// The inbox Windows PowerShell, by full path so a PATH entry cannot shadow it.
    pub(super) fn powershell_program() -> PathBuf {
        super::system32_tool(r"WindowsPowerShell\v1.0\powershell.exe")
    }

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
mod tests {
    use super::*;

    #[tokio::test]
    #[cfg(unix)]
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

    #[cfg_attr(windows, allow(unused_imports))] // every caller is a Unix-only test
    use crate::tools::test_args as args;

    fn decode_powershell_command(encoded: &str) -> String {
        let bytes = BASE64.decode(encoded).expect("valid base64");
        assert_eq!(bytes.len() % 2, 0, "UTF-16LE has an even length");
        let units: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
            .collect();
        String::from_utf16(&units).expect("valid UTF-16")
    }

    const HOSTILE_SCRIPTS: &[&str] = &[
        "",
        "Write-Output 'single' \"double\" `backtick`",
        "$(Remove-Item C:\\ -Recurse) ; & calc.exe | Out-Null",
        "line one\r\nline two\nline three\n",
        "\"; exit 1; \" -EncodedCommand AAAA ^& %PATH% !x!",
        "Ünïcødé ✓ 😀 日本語 \u{202e}rtl\u{0}nul",
        "\\\\\" \\\" \\\\",
    ];

    #[test]
    fn system_tools_fall_back_to_their_file_name() {
        if std::env::var_os("SystemRoot").is_none() {
            assert_eq!(
                system32_tool(r"WindowsPowerShell\v1.0\powershell.exe"),
                PathBuf::from("powershell.exe")
            );
            assert_eq!(system32_tool("ipconfig.exe"), PathBuf::from("ipconfig.exe"));
        }
    }

    #[test]
    fn powershell_encoding_round_trips_hostile_text() {
        for script in HOSTILE_SCRIPTS {
            let encoded = encode_powershell_command(script);
            assert!(
                encoded.chars().all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c)),
                "only base64 characters reach the command line: {encoded}"
            );
            assert_eq!(&decode_powershell_command(&encoded), script);
        }
    }

    #[test]
    fn powershell_script_travels_on_stdin_not_the_command_line() {
        let baseline = powershell_invocation("Get-Date");
        let encoded = baseline.args.last().expect("an -EncodedCommand value");
        assert_eq!(decode_powershell_command(encoded), POWERSHELL_BOOTSTRAP);
        assert_eq!(
            &baseline.args[..baseline.args.len() - 1],
            [
                "-NoLogo",
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-EncodedCommand"
            ]
        );
        for script in HOSTILE_SCRIPTS {
            let invocation = powershell_invocation(script);
            assert_eq!(
                invocation.args, baseline.args,
                "the command line never depends on the script"
            );
            assert_eq!(String::from_utf8(invocation.stdin).as_deref(), Ok(*script));
        }
        // A maximal script would not fit on a Windows command line (32767 chars).
        let huge = "x".repeat(65536);
        assert!(encode_powershell_command(&huge).len() > 32767);
        assert_eq!(powershell_invocation(&huge).args, baseline.args);
    }

    #[test]
    fn powershell_literals_double_every_kind_of_single_quote() {
        assert_eq!(powershell_literal(""), "''");
        assert_eq!(
            powershell_literal("Service Control Manager"),
            "'Service Control Manager'"
        );
        assert_eq!(
            powershell_literal("x'; Remove-Item C:\\ -Recurse; '"),
            "'x''; Remove-Item C:\\ -Recurse; '''"
        );
        // Expansion characters stay literal inside single quotes: nothing to escape.
        assert_eq!(powershell_literal("$(calc) `n \"@"), "'$(calc) `n \"@'");
        assert_eq!(
            powershell_literal("a\u{2019}b\u{2018}"),
            "'a\u{2019}\u{2019}b\u{2018}\u{2018}'"
        );
        assert_eq!(
            powershell_literal("\u{201A}\u{201B}"),
            "'\u{201A}\u{201A}\u{201B}\u{201B}'"
        );
    }

    /// Reads a literal back the way PowerShell's tokenizer does: the string ends at the
    /// first single quote (of any kind) that is not doubled.
    fn read_powershell_literal(source: &str) -> (String, &str) {
        let mut chars = source.char_indices().peekable();
        assert!(chars.next().is_some_and(|(_, c)| is_powershell_single_quote(c)));
        let mut value = String::new();
        while let Some((at, c)) = chars.next() {
            if !is_powershell_single_quote(c) {
                value.push(c);
                continue;
            }
            match chars.peek() {
                Some(&(_, next)) if is_powershell_single_quote(next) => {
                    value.push(c);
                    chars.next();
                }
                _ => return (value, &source[at + c.len_utf8()..]),
            }
        }
        panic!("unterminated literal: {source}");
    }

    #[test]
    fn powershell_literals_cannot_be_broken_out_of() {
        let extra = [
            "x'; Remove-Item C:\\ -Recurse; '",
            "'",
            "''",
            "\u{2019}; calc; \u{2018}",
            "end'",
        ];
        for text in HOSTILE_SCRIPTS.iter().copied().chain(extra) {
            let quoted = powershell_literal(text);
            let (value, rest) = read_powershell_literal(&quoted);
            assert_eq!(value, text);
            assert_eq!(rest, "", "the literal ends exactly where the quoting put its end");
        }
    }

    #[cfg(not(windows))]
    #[tokio::test]
    async fn powershell_is_unsupported_off_windows() {
        let err = powershell_exec(&args(json!({"script": "Get-Date"}))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Unsupported);
    }

    #[cfg(unix)]
    mod unix {
        use super::*;

        async fn sh(command: &str, timeout_s: u64) -> ToolResult {
            shell_exec(&args(json!({"command": command, "timeout_s": timeout_s}))).await
        }

        /// Alive and not a zombie: an orphan killed by us may wait a moment for its
        /// new parent to reap it.
        fn alive(pid: libc::pid_t) -> bool {
            // SAFETY: signal 0 only checks that the process exists.
            if unsafe { libc::kill(pid, 0) } != 0 {
                return false;
            }
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Ok(stat) => stat
                    .rsplit(')')
                    .next()
                    .map(str::trim_start)
                    .is_some_and(|rest| !rest.starts_with('Z')),
                Err(_) => !cfg!(target_os = "linux"),
            }
        }

        async fn gone_within(pid: libc::pid_t, limit: Duration) -> bool {
            let until = Instant::now() + limit;
            while Instant::now() < until {
                if !alive(pid) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            !alive(pid)
        }

        fn read_pid(path: &std::path::Path) -> libc::pid_t {
            let text = std::fs::read_to_string(path).expect("the command wrote its child's pid");
            text.trim().parse().expect("a pid")
        }

        #[tokio::test]
        async fn captures_stdout_stderr_and_exit_code() {
            let out = sh("echo hello; echo oops >&2; exit 3", 10).await.unwrap();
            assert_eq!(out["stdout"], "hello\n");
            assert_eq!(out["stderr"], "oops\n");
            assert_eq!(out["exit_code"], 3);
            assert_eq!(out["truncated"], false);
            assert!(out.get("signal").is_none());
            assert!(out["duration_ms"].is_u64());

            let ok = sh("true", 10).await.unwrap();
            assert_eq!(ok["exit_code"], 0);
            assert_eq!(ok["stdout"], "");
        }

        #[tokio::test]
        async fn stdin_is_empty_not_inherited() {
            let out = sh("cat; echo done", 5).await.unwrap();
            assert_eq!(out["stdout"], "done\n");
        }

        #[tokio::test]
        async fn a_signal_death_has_no_exit_code() {
            let out = sh("kill -9 $$", 10).await.unwrap();
            assert_eq!(out["exit_code"], Value::Null);
            assert_eq!(out["signal"], libc::SIGKILL);
        }

        #[tokio::test]
        async fn output_is_cut_at_the_cap_but_the_child_is_drained() {
            // 2 MB on each stream: far more than a pipe buffer, so a reader that stopped
            // at the cap (or read one stream at a time) would hang until the timeout.
            let out = sh(
                "head -c 2000000 /dev/zero | tr '\\0' e >&2; head -c 2000000 /dev/zero | tr '\\0' o; exit 7",
                20,
            )
            .await
            .unwrap();
            assert_eq!(out["exit_code"], 7);
            assert_eq!(out["truncated"], true);
            let stdout = out["stdout"].as_str().unwrap();
            let stderr = out["stderr"].as_str().unwrap();
            assert_eq!(stdout.len(), OUTPUT_CAP);
            assert_eq!(stderr.len(), OUTPUT_CAP);
            assert!(stdout.bytes().all(|b| b == b'o'));
            assert!(stderr.bytes().all(|b| b == b'e'));

            let exact = sh(&format!("head -c {OUTPUT_CAP} /dev/zero | tr '\\0' x"), 20)
                .await
                .unwrap();
            assert_eq!(exact["truncated"], false);
        }

        #[tokio::test]
        async fn timeout_kills_the_whole_process_group() {
            let dir = tempfile::tempdir().unwrap();
            let pid_file = dir.path().join("bg.pid");
            let command = format!("sleep 30 & echo $! > '{}'; sleep 30", pid_file.display());
            let started = Instant::now();
            let err = sh(&command, 1).await.unwrap_err();
            assert_eq!(err.code, ErrorCode::Timeout);
            assert!(
                err.message
                    .starts_with("command exceeded 1s and was killed (process group "),
                "{}",
                err.message
            );
            assert!(started.elapsed() < Duration::from_secs(10));
            let background = read_pid(&pid_file);
            assert!(
                gone_within(background, Duration::from_secs(5)).await,
                "background child {background} survived"
            );
        }

        #[tokio::test]
        async fn cancelling_the_call_kills_the_whole_process_group() {
            let dir = tempfile::tempdir().unwrap();
            let pid_file = dir.path().join("bg.pid");
            let command = format!("sleep 30 & echo $! > '{}'; sleep 30", pid_file.display());
            let call = sh(&command, 60);
            let cancelled = tokio::time::timeout(Duration::from_millis(1500), call).await;
            assert!(cancelled.is_err(), "the command should still have been running");
            let background = read_pid(&pid_file);
            assert!(
                gone_within(background, Duration::from_secs(5)).await,
                "background child {background} survived"
            );
        }

        #[tokio::test]
        async fn a_background_child_holding_the_pipes_does_not_hold_the_call() {
            let started = Instant::now();
            let out = sh("sleep 30 & echo $!", 60).await.unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "returned after the shell exited"
            );
            assert_eq!(out["exit_code"], 0);
            let pid: libc::pid_t = out["stdout"].as_str().unwrap().trim().parse().unwrap();
            assert!(alive(pid), "deliberate background work is left running");
            // SAFETY: plain kill(2) of the test's own stray child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }

        #[tokio::test]
        async fn a_missing_command_is_reported_by_the_shell() {
            let out = sh("definitely-not-a-command-kenny", 10).await.unwrap();
            assert_eq!(out["exit_code"], 127);
            assert!(out["stderr"].as_str().unwrap().contains("not found"));
        }
    }
}
