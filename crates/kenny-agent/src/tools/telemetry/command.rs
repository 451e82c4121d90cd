//! Runs a fixed system tool (systemctl, timedatectl, chronyc, rpm, journalctl) for a section: argv only, bounded output, killed on timeout.

use std::time::Duration;

use kenny_proto::error::ErrorCode;
use tokio::process::Command;

use crate::tools::bounded::BoundedBuf;
use crate::tools::process::{Captured, run_captured_into};

/// Per stream; the biggest caller is `rpm -qa` on a large install (~2 MB).
const OUTPUT_CAP: usize = 8 * 1024 * 1024;

#[derive(Debug)]
pub(super) struct Output {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
    pub truncated: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum RunError {
    /// The program is not installed on this PC.
    Missing,
    Failed(String),
}

impl RunError {
    pub(super) fn describe(&self, program: &str) -> String {
        match self {
            RunError::Missing => format!("`{program}` is not installed"),
            RunError::Failed(why) => why.clone(),
        }
    }
}

/// Runs `program args..` with a C locale (stable output to parse) and no stdin, through
/// the agent's one command runner: on timeout, or when the section is cancelled, the
/// child and its process group are killed.
pub(super) async fn run(program: &str, args: &[&str], limit: Duration) -> Result<Output, RunError> {
    let mut cmd = Command::new(program);
    cmd.args(args).env("LC_ALL", "C").env("SYSTEMD_PAGER", "");
    let captured = run_captured_into(
        cmd,
        None,
        limit,
        BoundedBuf::new(OUTPUT_CAP),
        BoundedBuf::new(OUTPUT_CAP),
    )
    .await
    .map_err(|e| match e.code {
        ErrorCode::Unsupported => RunError::Missing,
        ErrorCode::Timeout => RunError::Failed(format!(
            "`{program}` gave no answer within {}s and was killed",
            limit.as_secs_f32()
        )),
        _ => RunError::Failed(e.message),
    })?;
    Ok(Output::from(captured))
}

impl From<Captured> for Output {
    fn from(captured: Captured) -> Output {
        let truncated = captured.stdout.truncated() || captured.stderr.truncated();
        Output {
            success: captured.status.success(),
            stdout: captured.stdout.into_text(),
            stderr: captured.stderr.into_text(),
            truncated,
        }
    }
}

#[cfg(test)]
impl Output {
    /// What a program or query printed, as tests record it.
    pub(super) fn printed(stdout: &str, stderr: &str, success: bool) -> Output {
        Output {
            stdout: stdout.into(),
            stderr: stderr.into(),
            success,
            truncated: false,
        }
    }
}

/// First line of a failed command's stderr (or stdout), for a section's reason.
pub(super) fn first_line(output: &Output) -> String {
    let text = if output.stderr.trim().is_empty() {
        &output.stdout
    } else {
        &output.stderr
    };
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output")
        .to_owned()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn captures_output_and_exit_status() {
        let out = run("sh", &["-c", "echo hi; echo oops >&2; exit 3"], Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(out.stderr, "oops\n");
        assert!(!out.success);
        assert!(!out.truncated);
        assert_eq!(first_line(&out), "oops");
    }

    #[tokio::test]
    async fn a_missing_program_is_told_apart() {
        let err = run("kenny-no-such-tool", &[], Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err, RunError::Missing);
        assert_eq!(
            err.describe("kenny-no-such-tool"),
            "`kenny-no-such-tool` is not installed"
        );
    }

    #[tokio::test]
    async fn a_hanging_program_is_killed_at_the_timeout() {
        let started = Instant::now();
        let err = run("sleep", &["30"], Duration::from_millis(200)).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            matches!(&err, RunError::Failed(m) if m.contains("no answer within 0.2s and was killed")),
            "{err:?}"
        );
    }
}
