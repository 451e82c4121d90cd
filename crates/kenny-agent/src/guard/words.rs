//! The words every judge of the guard shares: a word as the shell will see it after
//! expansion ([`Arg`]), where a command's input comes from ([`Stdin`]), and how a
//! refusal is worded. The POSIX walker, the program rules, PowerShell and the Windows
//! tools all speak it, so it sits below them.

use super::Blocked;
use super::pattern::Pattern;

pub(super) fn blocked(reason: impl Into<String>) -> Blocked {
    Blocked { reason: reason.into() }
}

/// One word as the shell will see it after expansion, as far as that is known now.
#[derive(Debug, Clone, Default)]
pub(super) struct Arg {
    /// The text with quoting removed; unquoted glob characters stay globs, unknown
    /// parts are [`super::pattern::Tok::Deep`].
    pub pat: Pattern,
    /// The text, when it is fully known and has no glob.
    pub literal: Option<String>,
    /// The text after expansion, when it is fully known (globs included): what field
    /// splitting splits.
    pub expanded: Option<String>,
    /// The word was a process substitution (`<(...)`): a path to another command's output.
    pub proc_subst: bool,
    /// Variables it read.
    pub vars: Vec<String>,
    /// It has an unquoted expansion: the shell splits its value into words and globs it.
    pub split: bool,
    /// Part of it comes from the agent's environment (or a home directory): known to
    /// the guard, but not spelled out by the caller.
    pub from_env: bool,
    /// The word as written, for messages.
    pub shown: String,
    /// When the whole word is one command substitution of a plain command (`$(pidof
    /// nginx)`), that command's words.
    pub subst: Option<Vec<String>>,
}

impl Arg {
    pub(super) fn literal(text: &str) -> Arg {
        Arg {
            pat: Pattern::literal(text),
            literal: Some(text.to_owned()),
            expanded: Some(text.to_owned()),
            shown: text.to_owned(),
            ..Arg::default()
        }
    }

    pub(super) fn unknown(shown: &str) -> Arg {
        let mut pat = Pattern::default();
        pat.push_deep();
        Arg {
            pat,
            shown: shown.to_owned(),
            ..Arg::default()
        }
    }

    pub(super) fn text(&self) -> Option<&str> {
        self.literal.as_deref()
    }

    pub(super) fn is_known(&self) -> bool {
        !self.pat.has_unknown() && !self.proc_subst
    }
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stdin {
    /// The agent's (empty).
    Nothing,
    /// Another command's output.
    Pipe,
    /// A here-document or here-string whose text is known.
    Text(String),
    /// Text only known at run time.
    Unknown,
    /// A file.
    File,
}

pub(super) fn fetched_and_run(shown: &str) -> Blocked {
    blocked(format!(
        "runs `{shown}`, which this same command downloads: fetch-and-run is refused"
    ))
}

/// The name a program is known by: its file name, lower case.
pub(super) fn program_name(program: &str) -> String {
    program.rsplit(['/', '\\']).next().unwrap_or(program).to_lowercase()
}
