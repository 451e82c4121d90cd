//! The agent's own safety guard, checked before any tool runs; no server message can
//! switch it off. It reads commands the way their shell will (`posix` for `sh`,
//! `powershell` for PowerShell and `cmd.exe`) and refuses what would wipe a disk, erase
//! the logs of what was done, fetch-and-run or decode-and-run code, stop or remove this
//! agent, or read the PC's credential stores; `paths` says what is protected on disk.
//!
//! It is a seatbelt, not a sandbox: a deny list over a root shell cannot see through
//! everything (a script file the command writes and then runs, a program that does the
//! damage itself). On Linux the kernel layer (`crate::sandbox`) is the stronger floor.

mod inline;
mod operator;
mod paths;
mod pattern;
mod posix;
mod powershell;
mod programs;
mod windows;
mod words;

use serde_json::{Map, Value};

pub use operator::OperatorRules;
pub use paths::{AgentPaths, agent_paths, is_raw_device_path, register};

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub reason: String,
}

impl Blocked {
    /// The message the caller sees.
    pub fn message(&self) -> String {
        format!("refused by agent safety policy: {}", self.reason)
    }
}

/// Checks one call before it runs: the built-in rules, then the operator's.
pub fn check_all(tool: &str, args: &Map<String, Value>, operator: &OperatorRules) -> Result<(), Blocked> {
    check(tool, args)?;
    operator.check(tool, args)
}

/// The directory a `shell_exec` command starts in: the agent's own (under systemd, `/`).
fn start_dir() -> Option<String> {
    std::env::current_dir().ok().map(|d| d.to_string_lossy().into_owned())
}

/// Checks one call against the built-in rules.
pub fn check(tool: &str, args: &Map<String, Value>) -> Result<(), Blocked> {
    let text = |k: &str| args.get(k).and_then(Value::as_str);
    match tool {
        "shell_exec" => check_shell(text("command").unwrap_or(""), start_dir().as_deref()),
        "powershell_exec" => {
            let script = text("script").unwrap_or("");
            nesting_ok(script)?;
            powershell::check_script(script)
        }
        _ => match text("path") {
            Some(path) => check_file_path(path),
            None => Ok(()),
        },
    }
}

/// Brackets nested deeper than this are refused before parsing: the parsers recurse,
/// and a hostile command must not be able to exhaust the agent's stack.
const MAX_NESTING: usize = 64;

fn nesting_ok(text: &str) -> Result<(), Blocked> {
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' | '{' | '[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(Blocked {
                        reason: format!(
                            "nests brackets more than {MAX_NESTING} deep; the guard does not read that far, so it refuses it"
                        ),
                    });
                }
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Compound commands nest like brackets (`if ... fi`, `while ... done`, `case ...
/// esac`) and the parser recurses on them too: counted together with brackets. A
/// keyword inside quotes counts as well; that can only refuse a strange command, never
/// pass a deep one.
fn shell_nesting_ok(text: &str) -> Result<(), Blocked> {
    // Counted apart: a case pattern's `)` closes no bracket.
    let (mut brackets, mut compounds) = (0usize, 0usize);
    let words = text.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|'));
    for word in words {
        let keyword = word.trim_matches(|c| matches!(c, '(' | ')' | '{' | '}'));
        brackets += word.chars().filter(|c| matches!(c, '(' | '{' | '[')).count();
        if matches!(keyword, "if" | "case" | "while" | "until" | "for" | "select") {
            compounds += 1;
        }
        if brackets + compounds > MAX_NESTING {
            return Err(Blocked {
                reason: format!(
                    "nests brackets or compound commands more than {MAX_NESTING} deep; the guard does not read that far, so it refuses it"
                ),
            });
        }
        let closes = word.chars().filter(|c| matches!(c, ')' | '}' | ']')).count();
        brackets = brackets.saturating_sub(closes);
        if matches!(keyword, "fi" | "esac" | "done") {
            compounds = compounds.saturating_sub(1);
        }
    }
    Ok(())
}

/// A POSIX shell command, as `/bin/sh -c` will run it from `cwd`.
pub fn check_shell(command: &str, cwd: Option<&str>) -> Result<(), Blocked> {
    nesting_ok(command)?;
    shell_nesting_ok(command)?;
    posix::Shell::new(cwd).script(command)
}

/// A path a file tool was given, as written (before it is resolved on disk; the file
/// tools check the resolved path again with [`check_resolved_path`]).
pub fn check_file_path(path: &str) -> Result<(), Blocked> {
    if is_raw_device_path(path) {
        return Err(Blocked {
            reason: format!("`{path}` is a raw disk or volume device, not a file"),
        });
    }
    match paths::refusal_text(&pattern::normalized_text(path), paths::Use::Read) {
        Some(why) => Err(Blocked {
            reason: format!("`{path}` {why}"),
        }),
        None => Ok(()),
    }
}

/// A path after the file tools resolved it (symlinks and `..` followed): the same
/// protected paths, plus the disk and memory devices. Checked whatever was checked
/// before: the handlers never rely on their caller.
pub fn check_resolved_path(path: &std::path::Path) -> Result<(), Blocked> {
    let shown = path.display().to_string();
    check_file_path(&shown)?;
    match paths::device_text(&pattern::normalized_text(&shown)) {
        Some(what) => Err(Blocked {
            reason: format!("`{shown}` is a device ({what})"),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
