//! `shell_exec` and `powershell_exec`, and how kenny hands PowerShell a script: the
//! encoded command line, literals, scripts whose last line is JSON. Starting and
//! bounding the processes themselves is `process`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use kenny_proto::args::{PowershellExecArgs, ShellExecArgs};
use kenny_proto::error::ErrorCode;
use serde_json::{Value, json};
use tokio::process::Command;

use super::process::{Captured, OUTPUT_CAP, ProgramOutput, run_captured};
use super::{ToolError, ToolResult};

const DEFAULT_TIMEOUT_S: u64 = 60;

pub(super) async fn shell_exec(args: ShellExecArgs) -> ToolResult {
    let command = args.command;
    let limit = timeout_arg(args.timeout_s);
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

pub(super) async fn powershell_exec(args: PowershellExecArgs) -> ToolResult {
    let script = args.script;
    let limit = timeout_arg(args.timeout_s);
    #[cfg(windows)]
    {
        let invocation = powershell_invocation(&script);
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

fn timeout_arg(timeout_s: Option<u64>) -> Duration {
    Duration::from_secs(timeout_s.unwrap_or(DEFAULT_TIMEOUT_S))
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
const POWERSHELL_BOOTSTRAP: &str = concat!(
    read_stdin_as_text!("$kennyScript"),
    ". ([scriptblock]::Create($kennyScript))\n"
);

/// The start of both bootstraps: PowerShell quiet and in UTF-8, and all of standard
/// input read into `$var` as UTF-8 text.
macro_rules! read_stdin_as_text {
    ($var:literal) => {
        concat!(
            "$ProgressPreference = 'SilentlyContinue'\n",
            "try { [Console]::OutputEncoding = New-Object System.Text.UTF8Encoding $false } catch { }\n",
            "$kennyInput = New-Object System.IO.MemoryStream\n",
            "[Console]::OpenStandardInput().CopyTo($kennyInput)\n",
            $var,
            " = [System.Text.Encoding]::UTF8.GetString($kennyInput.ToArray())\n",
            "Remove-Variable kennyInput\n",
        )
    };
}
use read_stdin_as_text;

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
    run_invocation(powershell_invocation(script), limit, cap).await
}

/// How a script that needs a secret (a new account's password) reads it: standard
/// input carries the secret, a NUL, then the script. The secret becomes `$kennySecret`,
/// a read-only SecureString, so it is never part of any script's text, the command
/// line or the environment.
#[cfg_attr(not(windows), allow(dead_code))]
const POWERSHELL_SECRET_BOOTSTRAP: &str = concat!(
    read_stdin_as_text!("$kennyText"),
    "$kennyCut = $kennyText.IndexOf([char]0)
if ($kennyCut -lt 1) { throw 'kenny: no secret before the script on standard input' }
$kennySecret = New-Object System.Security.SecureString
foreach ($kennyChar in $kennyText.Substring(0, $kennyCut).ToCharArray()) { $kennySecret.AppendChar($kennyChar) }
$kennySecret.MakeReadOnly()
$kennyScript = $kennyText.Substring($kennyCut + 1)
Remove-Variable kennyText, kennyCut, kennyChar
. ([scriptblock]::Create($kennyScript))
"
);
/// The invocation of a script that reads `secret` as `$kennySecret` (see
/// [`POWERSHELL_SECRET_BOOTSTRAP`]); the secret must hold no NUL.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn powershell_secret_invocation(script: &str, secret: &str) -> PowerShellInvocation {
    let mut stdin = Vec::with_capacity(secret.len() + 1 + script.len());
    stdin.extend_from_slice(secret.as_bytes());
    stdin.push(0);
    stdin.extend_from_slice(script.as_bytes());
    PowerShellInvocation {
        args: powershell_encoded_args(POWERSHELL_SECRET_BOOTSTRAP),
        stdin,
    }
}

/// Runs a script of kenny's that reads `secret` as `$kennySecret`, with the standard
/// output cap, as text.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) async fn powershell_output_with_secret(
    script: &str,
    secret: &str,
    limit: Duration,
) -> Result<ProgramOutput, ToolError> {
    Ok(
        run_invocation(powershell_secret_invocation(script, secret), limit, OUTPUT_CAP)
            .await?
            .into(),
    )
}

async fn run_invocation(invocation: PowerShellInvocation, limit: Duration, cap: usize) -> Result<Captured, ToolError> {
    #[cfg(windows)]
    {
        let mut cmd = Command::new(windows::powershell_program());
        cmd.args(&invocation.args);
        run_captured(cmd, Some(invocation.stdin), limit, cap).await
    }
    #[cfg(not(windows))]
    {
        let _ = (invocation, limit, cap);
        Err(ToolError::new(
            ErrorCode::Unsupported,
            "this query uses PowerShell, which the agent only runs on Windows",
        ))
    }
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

/// Spawns `cmd`, feeds it `stdin` if given, and collects its output until it exits or
/// `limit` passes. The whole process tree is killed on timeout and if this future is
/// dropped before the command finished.
async fn run(cmd: Command, stdin: Option<Vec<u8>>, limit: Duration) -> ToolResult {
    let started = Instant::now();
    let captured = run_captured(cmd, stdin, limit, OUTPUT_CAP).await?;
    Ok(result_json(captured, started.elapsed()))
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
    if let Some(signal) = super::process::killing_signal(&captured.status) {
        result["signal"] = Value::from(signal);
    }
    result
}

#[cfg(windows)]
mod windows {
    use std::path::PathBuf;

    /// The inbox Windows PowerShell, by full path so a PATH entry cannot shadow it.
    pub(super) fn powershell_program() -> PathBuf {
        super::system32_tool(r"WindowsPowerShell\v1.0\powershell.exe")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(windows, allow(unused_imports))] // every caller is a Unix-only test
    use crate::tools::typed;

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
    fn a_secret_travels_on_stdin_before_the_script_never_in_its_text() {
        let secret = "p@ss 'word' $(calc)";
        let script = "New-LocalUser -Name 'x' -Password $kennySecret";
        let invocation = powershell_secret_invocation(script, secret);
        assert!(
            invocation.args.iter().all(|a| !a.contains("p@ss")),
            "{:?}",
            invocation.args
        );
        let bootstrap = decode_powershell_command(invocation.args.last().unwrap());
        assert_eq!(bootstrap, POWERSHELL_SECRET_BOOTSTRAP);
        assert!(!bootstrap.contains("p@ss"));
        let mut expected = secret.as_bytes().to_vec();
        expected.push(0);
        expected.extend_from_slice(script.as_bytes());
        assert_eq!(invocation.stdin, expected);
        // Only the bootstrap turns it into a SecureString; the script names the variable.
        assert!(bootstrap.contains("SecureString") && bootstrap.contains("MakeReadOnly"));
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
        let err = powershell_exec(typed(json!({"script": "Get-Date"}))).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Unsupported);
    }

    #[cfg(unix)]
    mod unix {
        use super::*;

        async fn sh(command: &str, timeout_s: u64) -> ToolResult {
            shell_exec(typed(json!({"command": command, "timeout_s": timeout_s}))).await
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
