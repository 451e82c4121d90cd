//! The rules for one resolved command (program name and arguments) on Linux and
//! macOS: wrappers that run another command, shells and interpreters, and the programs
//! that can destroy disks, erase logs, stop the agent or reveal credentials.

use super::Blocked;
use super::paths::{Use, refusal};
use super::pattern::Pattern;
use super::posix::Shell;
use super::words::{Arg, Stdin, blocked, fetched_and_run, program_name};

/// The names the agent runs as; a signal or service command aimed at one of them
/// would stop it.
const AGENT_NAMES: &[&str] = &["kenny-agent", "kenny-agent.exe", "kenny", "kenny.exe"];

/// Checks one path use, on the pattern and, when it names a file that exists, on what
/// it resolves to (so a symlink to a disk or to a key is seen for what it is).
pub(super) fn check_path(_sh: &Shell, path: &Pattern, usage: Use, shown: &str) -> Result<(), Blocked> {
    if let Some(why) = refusal(path, usage) {
        if path.has_unknown() {
            return Err(blocked(format!(
                "`{shown}` is only known at run time and could be a path that {why}; write the path out"
            )));
        }
        return Err(blocked(format!("`{shown}` {why}")));
    }
    if let Some(text) = path.as_literal()
        && text.starts_with('/')
        && let Ok(real) = std::fs::canonicalize(&text)
    {
        let real_pat = Pattern::literal(&real.to_string_lossy());
        if let Some(why) = refusal(&real_pat, usage) {
            return Err(blocked(format!("`{shown}` (which is {}) {why}", real.display())));
        }
        if usage != Use::Read && is_device(&real) {
            return Err(blocked(format!(
                "`{shown}` is a disk device; writing to it would destroy what is on it"
            )));
        }
    }
    Ok(())
}

#[cfg(unix)]
fn is_device(path: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

#[cfg(not(unix))]
fn is_device(_path: &std::path::Path) -> bool {
    false
}

/// Whether `arg` could be a path: it has a `/`, starts with `~` or `.`, or is unknown.
fn looks_like_path(arg: &Arg) -> bool {
    let text = arg.shown.as_str();
    text.contains('/') || text.starts_with('~') || text.starts_with('.') || arg.pat.starts_with_slash()
}

/// Programs whose plain operands are files they read.
const FILE_READERS: &[&str] = &[
    "cat",
    "tac",
    "less",
    "more",
    "head",
    "tail",
    "cp",
    "scp",
    "rsync",
    "tar",
    "zip",
    "gzip",
    "bzip2",
    "xz",
    "zstd",
    "base64",
    "base32",
    "xxd",
    "od",
    "hexdump",
    "strings",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "sed",
    "awk",
    "sort",
    "uniq",
    "wc",
    "diff",
    "cmp",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "file",
    "nl",
    "cut",
    "paste",
    "vi",
    "vim",
    "nano",
    "view",
    "openssl",
    "gpg",
    "install",
    "mv",
    "ln",
    "dd",
    "curl",
    "nc",
    "ncat",
    "socat",
    "python",
    "python3",
    "perl",
    "ruby",
    "node",
    "php",
    "bash",
    "sh",
    "source",
    ".",
    "tee",
    "split",
    "sqlite3",
];

/// Every argument is checked for credentials and the agent's own secrets, whatever
/// the program: `cat`, `cp`, `tar`, `curl -F @file` and `base64` all leak a file.
fn check_mentions(sh: &Shell, name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let reads_operands = FILE_READERS.contains(&name);
    for arg in args {
        let mut candidates = vec![arg.clone()];
        // `--opt=/path`, `if=/path`, `file=@/path`, `@/path`.
        if let Some(text) = arg.text() {
            for sep in ['=', '@', ':'] {
                if let Some((_, rest)) = text.split_once(sep)
                    && !rest.is_empty()
                {
                    candidates.push(Arg::literal(rest));
                }
            }
        }
        for c in candidates {
            if looks_like_path(&c) || (reads_operands && !c.shown.starts_with('-')) {
                check_path(sh, &sh.path(&c), Use::Read, &c.shown)?;
            }
        }
    }
    Ok(())
}

/// The operands of a command: arguments that are not options. `with_value` lists
/// options that take the next argument as their value.
fn operands<'a>(args: &'a [Arg], with_value: &[&str]) -> Vec<&'a Arg> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut only_operands = false;
    while i < args.len() {
        let a = &args[i];
        let text = a.shown.as_str();
        if only_operands || !text.starts_with('-') || text == "-" {
            out.push(a);
        } else if text == "--" {
            only_operands = true;
        } else if with_value.contains(&text) {
            i += 1;
        }
        i += 1;
    }
    out
}

/// The arguments as the program receives them: rules match the expanded text, because
/// `"-rf"`, `'-c'` and `F=-rf; rm $F` all reach the program as options.
fn as_received(argv: &[Arg]) -> Vec<Arg> {
    argv.iter()
        .map(|a| match &a.literal {
            Some(text) if *text != a.shown => Arg {
                shown: text.clone(),
                ..a.clone()
            },
            _ => a.clone(),
        })
        .collect()
}

/// Whether a word only known at run time could turn out to be an option: its value is
/// not known and nothing known at its start rules out a leading `-`.
fn may_be_option(arg: &Arg) -> bool {
    use super::pattern::Tok;
    arg.literal.is_none() && !matches!(arg.pat.0.first(), Some(Tok::Lit(c)) if *c != '-')
}

/// Whether any option in `short`/`long` is given, or may be: a word only known at run
/// time counts as every option. For rules that refuse when an option is there.
fn has_flag(args: &[Arg], short: char, long: &[&str]) -> bool {
    args.iter().any(may_be_option) || surely_has_flag(args, short, long)
}

/// Whether an option in `short`/`long` is certainly given. For rules that allow
/// something only when an option is there (`at -l`, `command -v`).
fn surely_has_flag(args: &[Arg], short: char, long: &[&str]) -> bool {
    args.iter().filter(|a| a.literal.is_some()).any(|a| {
        let t = a.shown.as_str();
        if let Some(l) = t.strip_prefix("--") {
            long.iter().any(|x| l == *x || l.starts_with(&format!("{x}=")))
        } else if let Some(s) = t.strip_prefix('-') {
            !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()) && s.contains(short)
        } else {
            false
        }
    })
}

/// Index of the first argument after the wrapper's own options.
fn skip_options(args: &[Arg], with_value: &[&str]) -> usize {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].shown.as_str();
        if t == "--" {
            return i + 1;
        }
        if !t.starts_with('-') || t == "-" {
            return i;
        }
        if with_value.contains(&t) {
            i += 1;
        }
        i += 1;
    }
    i
}

fn refuse(name: &str, why: &str) -> Result<(), Blocked> {
    Err(blocked(format!("`{name}` {why}")))
}

/// Windows programs with rules of their own in `windows.rs`.
const WINDOWS_PROGRAMS: &[&str] = &[
    "reg",
    "vssadmin",
    "wmic",
    "wbadmin",
    "wevtutil",
    "bcdedit",
    "bootrec",
    "bootsect",
    "reagentc",
    "diskpart",
    "cipher",
    "fsutil",
    "manage-bde",
    "taskkill",
    "ntdsutil",
    "mimikatz",
    "procdump",
    "procdump64",
    "rundll32",
    "esentutl",
    "certutil",
    "mshta",
    "regsvr32",
    "schtasks",
];

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh", "rbash", "posh", "lksh", "ksh93",
];

fn is_interpreter(name: &str) -> bool {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    matches!(
        base,
        "python"
            | "perl"
            | "ruby"
            | "node"
            | "nodejs"
            | "php"
            | "lua"
            | "luajit"
            | "tclsh"
            | "rscript"
            | "jshell"
            | "deno"
            | "bun"
            | "irb"
            | "wish"
            | "expect"
            | "guile"
            | "racket"
    )
}

/// Judges `name args...` (argv[0] is the program).
pub(super) fn judge(sh: &mut Shell, name: &str, argv: &[Arg], stdin: &Stdin) -> Result<(), Blocked> {
    let argv = as_received(argv);
    let args = &argv[1..];
    check_mentions(sh, name, args)?;
    let name = name.strip_suffix(".exe").unwrap_or(name);
    // Builtins that set variables the guard does not follow.
    match name {
        "read" | "getopts" | "mapfile" | "readarray" | "printf" | "declare" | "typeset" | "local" | "let" => {
            for a in operands(
                args,
                &["-v", "-d", "-n", "-N", "-p", "-t", "-u", "-C", "-c", "-O", "-s"],
            ) {
                sh.forget(&a.shown);
            }
            if let Some(p) = args.iter().position(|a| a.shown == "-v")
                && let Some(v) = args.get(p + 1)
            {
                sh.forget(&v.shown);
            }
        }
        "source" | "." => sh.sourced_something(),
        _ => {}
    }
    // Wrappers: judge the command they run.
    let wrapped = |with_value: &[&str]| skip_options(args, with_value);
    match name {
        "sudo" | "doas" => {
            let i = wrapped(&[
                "-u",
                "-g",
                "-C",
                "-D",
                "-h",
                "-p",
                "-r",
                "-t",
                "-T",
                "-U",
                "--user",
                "--group",
                "--chdir",
                "--prompt",
                "--role",
                "--type",
                "--close-from",
                "--host",
                "--other-user",
            ]);
            return sh.invoke(&args[i..], stdin);
        }
        "nice" | "nohup" | "stdbuf" | "setsid" | "unbuffer" | "ionice" | "time" | "builtin" | "exec" | "command"
        | "catchsegv" | "faketime" | "torsocks" | "proxychains" | "proxychains4" | "firejail" | "strace" | "ltrace"
        | "valgrind" | "gdb" | "eatmydata" | "caffeinate" | "systemd-inhibit" => {
            if name == "command" && (surely_has_flag(args, 'v', &[]) || surely_has_flag(args, 'V', &[])) {
                return Ok(());
            }
            if name == "ionice" && surely_has_flag(args, 'p', &["pid"]) {
                return Ok(());
            }
            // Each wrapper's own options that take a value.
            let with_value: &[&str] = match name {
                "nice" => &["-n", "--adjustment"],
                "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
                "ionice" => &["-c", "-n", "--class", "--classdata"],
                "time" => &["-f", "-o", "--format", "--output"],
                "exec" => &["-a"],
                "torsocks" | "proxychains" | "proxychains4" => &["-f", "-u", "-p", "-a", "-P"],
                "strace" | "ltrace" => &[
                    "-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-b", "-I", "-O", "-S", "-X",
                ],
                "systemd-inhibit" => &["--what", "--who", "--why", "--mode"],
                "gdb" => &["-x", "-ex", "-p", "-ix", "-iex", "-cd", "-d", "-s", "-e", "-se", "-c"],
                _ => &[],
            };
            let mut i = wrapped(with_value);
            if name == "gdb" {
                // `gdb --args PROGRAM ARGS...` runs the program.
                return match args.iter().position(|a| a.shown == "--args") {
                    Some(p) => sh.invoke(&args[p + 1..], stdin),
                    None => Ok(()),
                };
            }
            if name == "faketime" {
                // `faketime TIME PROGRAM ARGS...`
                i += 1;
            }
            return sh.invoke(args.get(i..).unwrap_or(&[]), stdin);
        }
        "ssh" => {
            // The remote command is judged as if it ran here: it may well (ssh localhost).
            let i = wrapped(&[
                "-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E", "-e", "-m", "-O", "-Q", "-S",
                "-W", "-w", "-B", "-I",
            ]);
            let remote: Option<Vec<&str>> = args.get(i + 1..).unwrap_or(&[]).iter().map(Arg::text).collect();
            return match remote {
                Some(words) if words.is_empty() => Ok(()),
                Some(words) => sh.nested(&words.join(" ")).map(drop),
                None => refuse(name, "runs a remote command only known at run time"),
            };
        }
        "crontab" => {
            if args.iter().any(|a| matches!(a.shown.as_str(), "-l" | "-r" | "-i")) {
                return Ok(());
            }
            return refuse(
                name,
                "installs a crontab, handing commands to cron where the agent's guard and sandbox do not reach",
            );
        }
        "timeout" => {
            let i = wrapped(&["-s", "-k", "--signal", "--kill-after"]);
            return sh.invoke(args.get(i + 1..).unwrap_or(&[]), stdin);
        }
        "taskset" | "chrt" | "numactl" | "cpulimit" => {
            if surely_has_flag(args, 'p', &["pid"]) {
                return Ok(());
            }
            let i = wrapped(&["-c", "-l", "-p", "-m", "-N", "-C"]);
            let skip = usize::from(name != "numactl" && name != "cpulimit");
            return sh.invoke(args.get(i + skip..).unwrap_or(&[]), stdin);
        }
        "chroot" => {
            let i = wrapped(&["--userspec", "--groups"]);
            if args.len() <= i + 1 {
                return refuse(
                    name,
                    "starts an interactive shell inside another root; give the command to run",
                );
            }
            return sh.invoke(&args[i + 1..], stdin);
        }
        "env" => return env(sh, args, stdin),
        "xargs" | "parallel" => return xargs(sh, name, args),
        "flock" => {
            if let Some(p) = args.iter().position(|a| matches!(a.shown.as_str(), "-c" | "--command")) {
                return shell_text(sh, name, args.get(p + 1));
            }
            let i = wrapped(&["-w", "-E", "--timeout", "--conflict-exit-code"]);
            return sh.invoke(args.get(i + 1..).unwrap_or(&[]), stdin);
        }
        "su" | "runuser" | "script" | "sg" => {
            if let Some(p) = args.iter().position(|a| matches!(a.shown.as_str(), "-c" | "--command")) {
                return shell_text(sh, name, args.get(p + 1));
            }
            if *stdin == Stdin::Pipe {
                return refuse(name, "runs text piped into a shell");
            }
            return Ok(());
        }
        "watch" => {
            let i = wrapped(&["-n", "--interval", "-d", "-g", "-q"]);
            if has_flag(args, 'x', &["exec"]) {
                return sh.invoke(&args[i..], stdin);
            }
            let text: Option<Vec<&str>> = args[i..].iter().map(Arg::text).collect();
            return match text {
                Some(parts) => sh.nested(&parts.join(" ")).map(drop),
                None => refuse(name, "repeats a command that is only known at run time"),
            };
        }
        "busybox" | "toybox" => {
            return match args.first().and_then(Arg::text) {
                Some(applet) => {
                    let applet = program_name(applet);
                    judge(sh, &applet, args, stdin)
                }
                None if args.is_empty() => Ok(()),
                None => refuse(name, "runs an applet whose name is only known at run time"),
            };
        }
        "eval" => {
            let text: Option<Vec<&str>> = args.iter().map(|a| a.text().filter(|_| !a.from_env)).collect();
            return match text {
                Some(parts) => sh.nested(&parts.join(" ")).map(drop),
                None => refuse(name, "evaluates text that is only known at run time"),
            };
        }
        "source" | "." => {
            return match args.first() {
                None => Ok(()),
                Some(a) if a.proc_subst => refuse(name, "runs the output of another command as a script"),
                Some(a) if matches!(a.text(), Some("/dev/stdin" | "-" | "/proc/self/fd/0" | "/dev/fd/0")) => {
                    refuse(name, "runs text from standard input as a script")
                }
                Some(a) if !a.is_known() => refuse(name, "runs a script whose path is only known at run time"),
                Some(a) if sh.is_fetched(&sh.path(a)) => Err(fetched_and_run(&a.shown)),
                Some(_) => Ok(()),
            };
        }
        "alias" => {
            for a in args {
                if let Some((_, body)) = a.shown.split_once('=') {
                    match a.text().and_then(|t| t.split_once('=')).map(|(_, b)| b.to_owned()) {
                        Some(body) => {
                            sh.nested(&body)?;
                        }
                        None if !body.is_empty() => return refuse(name, "defines an alias only known at run time"),
                        None => {}
                    }
                }
            }
            return Ok(());
        }
        "trap" => {
            return match args.first() {
                Some(a) if a.shown.starts_with('-') => Ok(()),
                Some(a) => match a.text() {
                    Some(text) => sh.nested(text).map(drop),
                    None => refuse(name, "sets a trap whose command is only known at run time"),
                },
                None => Ok(()),
            };
        }
        "cd" | "pushd" | "popd" | "chdir" => {
            let target = operands(args, &[]).into_iter().next();
            sh.cwd = match (name, target) {
                ("popd", _) => None,
                (_, None) => {
                    let mut home = Pattern::literal("/");
                    home.push_deep();
                    Some(home)
                }
                (_, Some(t)) if t.shown == "-" => None,
                (_, Some(t)) => {
                    let p = sh.path(t);
                    if p.is_literal() { Some(p) } else { None }
                }
            };
            return Ok(());
        }
        "find" => return find(sh, args),
        "nsenter" => {
            return refuse(
                name,
                "runs a command in another process's namespaces, outside the agent's sandbox",
            );
        }
        "systemd-run" | "at" | "batch" => {
            if name == "at" && surely_has_flag(args, 'l', &[]) {
                return Ok(());
            }
            return refuse(
                name,
                "hands a command to another service to run later, where the agent's guard and sandbox do not reach",
            );
        }
        // The same hand-over as `systemd-run`, spelled as a D-Bus call to systemd.
        "busctl" | "dbus-send" | "gdbus" | "qdbus" | "dbus-run-session"
            if args
                .iter()
                .any(|a| !a.is_known() || a.shown.to_lowercase().contains("systemd1")) =>
        {
            return refuse(
                name,
                "asks systemd over D-Bus to start, stop or change units, where the agent's guard and sandbox do not reach; use `systemctl` for units other than the agent's",
            );
        }
        "docker" | "podman" | "nerdctl" => return containers(name, args),
        "pwsh" | "powershell" => return super::powershell::judge_command_line(name, args),
        _ => {}
    }
    if SHELLS.contains(&name) {
        return shell(sh, name, args, stdin);
    }
    if is_interpreter(name) {
        // Then judged like any program too (`perl -i` edits files in place).
        interpreter(sh, name, args, stdin)?;
    }
    if matches!(name, "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk") {
        let program = operands(args, &["-f", "-v", "-F", "--file", "--assign", "--field-separator"])
            .into_iter()
            .next()
            .filter(|_| !args.iter().any(|a| matches!(a.shown.as_str(), "-f" | "--file")));
        if let Some(code) = program {
            inline_shell(sh, name, code, true)?;
        }
    }
    if WINDOWS_PROGRAMS.contains(&name) {
        // The same rules as from PowerShell: a Windows tool named on any PC is judged.
        let words: Vec<Option<String>> = args.iter().map(|a| a.text().map(str::to_owned)).collect();
        super::windows::native(name, &words, *stdin == Stdin::Pipe)?;
    }
    disks(name, args)?;
    writes(sh, name, args)?;
    agent(name, args)?;
    record_downloads(sh, name, args);
    Ok(())
}

/// `sh -c TEXT`, `sh FILE`, `sh` reading standard input.
fn shell(sh: &mut Shell, name: &str, args: &[Arg], stdin: &Stdin) -> Result<(), Blocked> {
    let mut i = 0;
    let mut command = false;
    let mut reads_stdin = false;
    while i < args.len() {
        let t = args[i].shown.as_str();
        if t == "--" || t == "-" {
            i += 1;
            reads_stdin |= t == "-";
            break;
        }
        if let Some(flags) = t.strip_prefix('-').or_else(|| t.strip_prefix('+')) {
            if matches!(flags, "o" | "O") || matches!(t, "--rcfile" | "--init-file") {
                i += 2;
                continue;
            }
            if !t.starts_with("--") {
                command |= flags.contains('c');
                reads_stdin |= flags.contains('s');
            }
            i += 1;
            continue;
        }
        break;
    }
    if command {
        return shell_text(sh, name, args.get(i));
    }
    match args.get(i) {
        Some(script) if !reads_stdin => {
            if script.proc_subst {
                return refuse(name, "runs the output of another command as a script");
            }
            if matches!(script.text(), Some("/dev/stdin" | "/proc/self/fd/0" | "/dev/fd/0")) {
                return from_stdin(sh, name, stdin);
            }
            if !script.is_known() {
                return refuse(name, "runs a script whose path is only known at run time");
            }
            if sh.is_fetched(&sh.path(script)) {
                return Err(fetched_and_run(&script.shown));
            }
            Ok(())
        }
        _ => from_stdin(sh, name, stdin),
    }
}

fn from_stdin(sh: &mut Shell, name: &str, stdin: &Stdin) -> Result<(), Blocked> {
    match stdin {
        Stdin::Nothing | Stdin::File => Ok(()),
        Stdin::Text(text) => sh.nested(text).map(drop),
        Stdin::Pipe => refuse(
            name,
            "runs text piped into a shell (how fetched or decoded code is run); run the commands directly",
        ),
        Stdin::Unknown => refuse(name, "runs a here-document that is only known at run time"),
    }
}

fn shell_text(sh: &mut Shell, name: &str, text: Option<&Arg>) -> Result<(), Blocked> {
    match text {
        None => Ok(()),
        Some(a) => match a.text().filter(|_| !a.from_env) {
            Some(t) => sh.nested(t).map(drop),
            None => refuse(
                name,
                &format!(
                    "runs shell code built at run time (`{}`); a state-changing command must spell out what it runs",
                    a.shown
                ),
            ),
        },
    }
}

fn interpreter(sh: &mut Shell, name: &str, args: &[Arg], stdin: &Stdin) -> Result<(), Blocked> {
    let inline = args.iter().any(|a| {
        matches!(
            a.shown.as_str(),
            "-c" | "-e" | "-E" | "-m" | "-r" | "--eval" | "-p" | "--print" | "-i"
        )
    });
    // `python3 -c "$(... | base64 -d)"`: code decoded or fetched at run time.
    if let Some(p) = args.iter().position(|a| {
        matches!(
            a.shown.as_str(),
            "-c" | "-e" | "-E" | "--eval" | "-p" | "--print" | "-r"
        )
    }) && let Some(code) = args.get(p + 1)
        && (!code.is_known() || code.from_env)
    {
        return refuse(
            name,
            "runs code built at run time (decoded or fetched); a state-changing command must spell out its code",
        );
    }
    if let Some(p) = args.iter().position(|a| {
        matches!(
            a.shown.as_str(),
            "-c" | "-e" | "-E" | "--eval" | "-p" | "--print" | "-r"
        )
    }) && let Some(code) = args.get(p + 1)
    {
        inline_shell(sh, name, code, false)?;
    }
    let script = args.iter().find(|a| !a.shown.starts_with('-'));
    if let Some(s) = script
        && !inline
    {
        if s.proc_subst {
            return refuse(name, "runs the output of another command as a program");
        }
        if sh.is_fetched(&sh.path(s)) {
            return Err(fetched_and_run(&s.shown));
        }
        return Ok(());
    }
    if !inline && *stdin == Stdin::Pipe {
        return refuse(name, "runs code piped into an interpreter (how fetched code is run)");
    }
    Ok(())
}

/// Judges the shell commands inline code runs (see [`super::inline`]).
fn inline_shell(sh: &mut Shell, name: &str, code: &Arg, awk: bool) -> Result<(), Blocked> {
    let Some(text) = code.text() else {
        return refuse(name, "runs code only known at run time");
    };
    for command in super::inline::shell_commands(text, awk) {
        match command {
            Some(c) => {
                sh.nested(&c)?;
            }
            None => {
                return refuse(
                    name,
                    "runs a shell command built at run time inside its code; spell the command out as one string",
                );
            }
        }
    }
    Ok(())
}

fn env(sh: &mut Shell, args: &[Arg], stdin: &Stdin) -> Result<(), Blocked> {
    let mut i = 0;
    let mut child = sh.clone();
    while i < args.len() {
        let t = args[i].shown.as_str();
        match t {
            "-u" | "--unset" | "-P" => i += 2,
            "-C" | "--chdir" => {
                child.cwd = args.get(i + 1).map(|a| sh.path(a)).filter(Pattern::is_literal);
                i += 2;
            }
            "-S" | "--split-string" => {
                return match args.get(i + 1).and_then(Arg::text) {
                    Some(text) => child.nested(text).map(drop),
                    None => refuse("env", "runs a command line only known at run time"),
                };
            }
            "--" => {
                i += 1;
                break;
            }
            _ if t.starts_with('-') => i += 1,
            _ if t.contains('=') && !t.starts_with('=') => i += 1,
            _ => break,
        }
    }
    child.invoke(&args[i.min(args.len())..], stdin)
}

fn xargs(sh: &mut Shell, name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let mut i = 0;
    let mut replace: Option<String> = None;
    while i < args.len() {
        let t = args[i].shown.as_str();
        match t {
            "-I" | "--replace" => {
                replace = args.get(i + 1).and_then(Arg::text).map(str::to_owned);
                i += 2;
            }
            "-i" => {
                replace = Some("{}".into());
                i += 1;
            }
            "-L" | "-l" | "-n" | "-P" | "-s" | "-d" | "-a" | "-E" | "-e" | "--max-args" | "--max-procs"
            | "--delimiter" | "--arg-file" | "--eof" | "--max-lines" | "-j" | "--jobs" => i += 2,
            "--" => {
                i += 1;
                break;
            }
            _ if t.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let mut command: Vec<Arg> = args[i.min(args.len())..].to_vec();
    if command.is_empty() {
        return Ok(());
    }
    let from_input = Arg::unknown(&format!("(input to {name})"));
    match &replace {
        Some(r) => {
            for a in &mut command[1..] {
                if a.shown.contains(r.as_str()) {
                    *a = from_input.clone();
                }
            }
        }
        None => command.push(from_input),
    }
    sh.invoke(&command, &Stdin::Nothing)
}

/// A container started with the host's root, devices or namespaces is a root shell
/// outside the agent's sandbox.
fn containers(name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let starts = args
        .iter()
        .any(|a| matches!(a.shown.as_str(), "run" | "create" | "exec") || !a.is_known());
    if !starts {
        return Ok(());
    }
    for (i, a) in args.iter().enumerate() {
        let t = a.shown.as_str();
        let value = |flag: &str| -> Option<String> {
            t.strip_prefix(flag)
                .and_then(|v| v.strip_prefix('='))
                .map(str::to_owned)
                .or_else(|| (t == flag).then(|| args.get(i + 1).map_or(String::new(), |v| v.shown.clone())))
        };
        if t == "--privileged" || t.starts_with("--privileged=t") || t.starts_with("--cap-add") {
            return refuse(
                name,
                "starts a privileged container: a root shell outside the agent's sandbox",
            );
        }
        for ns in ["--pid", "--ipc", "--uts", "--userns", "--cgroupns"] {
            if value(ns).is_some_and(|v| v == "host") {
                return refuse(
                    name,
                    "shares the host's namespaces with a container, outside the agent's sandbox",
                );
            }
        }
        if t.starts_with("--device") {
            return refuse(
                name,
                "gives a container the host's devices, outside the agent's sandbox",
            );
        }
        for flag in ["-v", "--volume", "--mount"] {
            if let Some(v) = value(flag) {
                let source = v.split([':', ',']).find_map(|p| {
                    let p = p
                        .strip_prefix("source=")
                        .or_else(|| p.strip_prefix("src="))
                        .unwrap_or(p);
                    p.starts_with('/').then_some(p)
                });
                if let Some(src) = source
                    && matches!(
                        src.trim_end_matches('/'),
                        "" | "/dev" | "/etc" | "/boot" | "/proc" | "/sys" | "/root" | "/var" | "/usr" | "/run"
                    )
                {
                    return refuse(
                        name,
                        &format!("mounts the host's `{src}` into a container, a way around the agent's sandbox"),
                    );
                }
            }
        }
    }
    Ok(())
}

/// `find ROOTS... EXPRESSION`: `-delete` deletes under every root; `-exec CMD {} ;`
/// runs CMD on anything under them.
fn find(sh: &mut Shell, args: &[Arg]) -> Result<(), Blocked> {
    let starts_expr = |t: &str| t.starts_with('-') || t == "(" || t == "!" || t == "\\(";
    let mut roots: Vec<Pattern> = args
        .iter()
        .take_while(|a| !starts_expr(&a.shown))
        .map(|a| sh.path(a))
        .collect();
    if roots.is_empty() {
        roots.push(sh.path(&Arg::literal(".")));
    }
    let mut i = 0;
    while i < args.len() {
        match args[i].shown.as_str() {
            // A word only known at run time may be `-delete`.
            t if t == "-delete" || may_be_option(&args[i]) => {
                for root in &roots {
                    check_path(sh, root, Use::Tree, &root.to_string())?;
                }
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = args[i + 1..]
                    .iter()
                    .position(|a| matches!(a.shown.as_str(), ";" | "\\;" | "+"))
                    .map_or(args.len(), |p| i + 1 + p);
                for root in &roots {
                    let mut under = root.clone();
                    under.push_str("/");
                    under.push_deep();
                    let found = Arg {
                        pat: under.clone(),
                        shown: format!("{root}/…"),
                        ..Arg::default()
                    };
                    let command: Vec<Arg> = args[i + 1..end]
                        .iter()
                        .map(|a| {
                            if a.shown.contains("{}") {
                                found.clone()
                            } else {
                                a.clone()
                            }
                        })
                        .collect();
                    // The root itself is among what find yields.
                    let root_arg = Arg {
                        pat: root.clone(),
                        literal: root.as_literal(),
                        shown: root.to_string(),
                        ..Arg::default()
                    };
                    let on_root: Vec<Arg> = args[i + 1..end]
                        .iter()
                        .map(|a| {
                            if a.shown.contains("{}") {
                                root_arg.clone()
                            } else {
                                a.clone()
                            }
                        })
                        .collect();
                    sh.invoke(&command, &Stdin::Nothing)?;
                    sh.invoke(&on_root, &Stdin::Nothing)?;
                }
                i = end;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                if let Some(a) = args.get(i + 1) {
                    check_path(sh, &sh.path(a), Use::Replace, &a.shown)?;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Formatting, wiping and repartitioning disks, and firmware.
fn disks(name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let words: Vec<&str> = args.iter().map(|a| a.shown.as_str()).collect();
    let any = |list: &[&str]| {
        words
            .iter()
            .any(|w| list.iter().any(|l| w == l || w.starts_with(&format!("{l}="))))
    };
    let device_operand = || {
        operands(
            args,
            &["-t", "-L", "-O", "-b", "-E", "-N", "-m", "-c", "-l", "-U", "-o", "-n"],
        )
        .iter()
        .any(|a| !a.is_known() || a.shown.starts_with("/dev/") || is_device(std::path::Path::new(&a.shown)))
    };
    let formats = name.starts_with("mkfs")
        || name.starts_with("mke2fs")
        || matches!(
            name,
            "mkswap"
                | "mkntfs"
                | "mkdosfs"
                | "mkexfatfs"
                | "mkreiserfs"
                | "mkudffs"
                | "mkfs_msdos"
                | "newfs"
                | "zerofree"
        );
    if formats && (device_operand() || operands(args, &["-t", "-L"]).is_empty()) {
        return refuse(name, "formats a disk, destroying what is on it");
    }
    match name {
        "wipefs" | "blkdiscard" | "sg_format" | "sg_sanitize" | "sg_unmap" | "sg_write_same" | "diskutil"
            if name != "diskutil" || any(&["eraseDisk", "eraseVolume", "zeroDisk", "randomDisk", "secureErase"]) =>
        {
            refuse(name, "wipes a disk")
        }
        "shred" | "scrub" if device_operand() => refuse(name, "wipes a disk"),
        "badblocks" if has_flag(args, 'w', &[]) || has_flag(args, 'n', &[]) => {
            refuse(name, "overwrites a disk while testing it")
        }
        "hdparm"
            if words.iter().any(|w| {
                w.starts_with("--security")
                    || w.starts_with("--trim")
                    || w.starts_with("--write")
                    || w.starts_with("--fwdownload")
                    || w.starts_with("--make-bad")
                    || w.starts_with("--dco")
            }) =>
        {
            refuse(name, "erases or rewrites a disk")
        }
        "nvme"
            if any(&[
                "format",
                "sanitize",
                "delete-ns",
                "detach-ns",
                "write",
                "write-zeroes",
                "write-uncor",
                "fw-download",
                "fw-commit",
                "dsm",
            ]) =>
        {
            refuse(name, "erases or rewrites a disk")
        }
        "cryptsetup" if any(&["luksFormat", "erase", "luksErase", "luksKillSlot", "reencrypt"]) => {
            refuse(name, "destroys an encrypted disk's keys")
        }
        "mdadm" if any(&["--zero-superblock", "--create", "-C"]) => refuse(name, "wipes or rebuilds a disk array"),
        "pvremove" | "vgremove" | "lvremove" => refuse(name, "deletes a disk volume"),
        "zpool" if any(&["destroy", "labelclear"]) => refuse(name, "destroys a storage pool"),
        "zfs" if any(&["destroy"]) => refuse(name, "destroys a file system"),
        "debugfs" if has_flag(args, 'w', &["writable"]) => refuse(name, "edits a file system's raw structures"),
        "flashrom" if has_flag(args, 'w', &["write"]) || has_flag(args, 'E', &["erase"]) => {
            refuse(name, "rewrites the firmware")
        }
        "efibootmgr" if has_flag(args, 'B', &["delete-bootnum"]) => refuse(name, "deletes boot entries"),
        "bootctl" if any(&["remove"]) => refuse(name, "removes the boot loader"),
        "fdisk" | "sfdisk" | "cfdisk" | "gdisk" | "sgdisk" | "parted" | "partprobe" | "growpart" => {
            let reading = any(&[
                "-l",
                "--list",
                "-d",
                "--dump",
                "-J",
                "--json",
                "-V",
                "--verify",
                "-p",
                "--print",
                "-i",
                "--info",
                "-s",
                "print",
                "-v",
                "--version",
                "-h",
                "--help",
                "-x",
                "--show-pt-geometry",
                "-g",
                "--show-geometry",
            ]) && !any(&[
                "-Z",
                "--zap-all",
                "-z",
                "--zap",
                "-o",
                "--clear",
                "-d",
                "--delete",
                "-n",
                "--new",
                "mklabel",
                "rm",
                "mkpart",
                "resizepart",
            ]);
            let reading = reading || (name == "parted" && any(&["print"]));
            if reading || name == "partprobe" {
                Ok(())
            } else {
                refuse(name, "changes a disk's partitions")
            }
        }
        "dd" => {
            for w in &words {
                if let Some(target) = w.strip_prefix("of=")
                    && (target.starts_with("/dev/") && !matches!(target, "/dev/null" | "/dev/stdout" | "/dev/stderr")
                        || is_device(std::path::Path::new(target)))
                {
                    return refuse(name, "writes raw data onto a disk device");
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Files a program writes, truncates or deletes.
fn writes(sh: &mut Shell, name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let check = |sh: &Shell, a: &Arg, usage: Use| check_path(sh, &sh.path(a), usage, &a.shown);
    let recursive = has_flag(args, 'r', &["recursive"]) || has_flag(args, 'R', &["recursive"]);
    // Archivers and copiers told to delete what they archive or copy (on top of their
    // own rules below).
    if matches!(name, "tar" | "bsdtar") && args.iter().any(|a| a.shown == "--remove-files") {
        let with_value = [
            "-f",
            "--file",
            "-C",
            "--directory",
            "-T",
            "--files-from",
            "-X",
            "--exclude-from",
        ];
        for a in operands(args, &with_value) {
            check(sh, a, Use::Tree)?;
        }
    }
    if name == "rsync" && args.iter().any(|a| a.shown == "--remove-source-files") {
        let ops = operands(args, &["-e", "--rsh", "--exclude", "--include", "--filter", "-f"]);
        for a in ops.iter().take(ops.len().saturating_sub(1)) {
            check(sh, a, Use::Replace)?;
        }
    }
    match name {
        "rm" | "unlink" | "rmdir" | "srm" | "trash" | "trash-put" | "gio" => {
            if args.iter().any(|a| a.shown == "--no-preserve-root") {
                return refuse(name, "is told to delete the whole file system (--no-preserve-root)");
            }
            for a in operands(args, &[]) {
                if name == "gio" && a.shown == "trash" {
                    continue;
                }
                if recursive && !a.is_known() {
                    return refuse(
                        name,
                        &format!(
                            "deletes recursively a path only known at run time (`{}`); write the path out",
                            a.shown
                        ),
                    );
                }
                // A glob deletes everything it matches: judged like a whole tree.
                let globbed = a.pat.0.iter().any(Pattern::is_glob_token);
                check(sh, a, if recursive || globbed { Use::Tree } else { Use::Replace })?;
            }
        }
        "shred" | "truncate" | "scrub" | "wipe" => {
            for a in operands(args, &["-s", "--size", "-n", "--iterations", "-r", "--reference"]) {
                check(sh, a, Use::Replace)?;
            }
        }
        "chmod" | "chown" | "chgrp" | "chattr" | "setfacl" | "chcon" | "setfattr" => {
            // `chmod -x FILE`: a mode, not an option.
            let is_mode = |t: &str| {
                name == "chmod" && t.len() > 1 && t[1..].chars().all(|c| "rwxXstugoa=+-,01234567".contains(c))
            };
            let as_operands: Vec<Arg> = args
                .iter()
                .map(|a| {
                    if is_mode(&a.shown) {
                        Arg::literal(&format!("mode:{}", a.shown))
                    } else {
                        a.clone()
                    }
                })
                .collect();
            let ops = operands(
                &as_operands,
                &[
                    "--reference",
                    "-m",
                    "-M",
                    "-x",
                    "-X",
                    "-n",
                    "-v",
                    "-t",
                    "-u",
                    "-r",
                    "-l",
                ],
            );
            let reference = args.iter().any(|a| a.shown.starts_with("--reference"));
            let skip = usize::from(!reference && !matches!(name, "setfacl" | "setfattr"));
            for a in ops.into_iter().skip(skip) {
                check(sh, a, Use::Tree)?;
            }
        }
        "mv" => {
            let ops = operands(args, &["-t", "--target-directory", "-S", "--suffix"]);
            if let Some((dest, sources)) = ops.split_last() {
                for s in sources {
                    check(sh, s, Use::Tree)?;
                }
                check(sh, dest, Use::Replace)?;
                into_dir(sh, dest, sources)?;
            }
        }
        "cp" | "install" | "ln" | "rsync" | "scp" | "link" => {
            let ops = operands(
                args,
                &[
                    "-t",
                    "--target-directory",
                    "-S",
                    "--suffix",
                    "-m",
                    "--mode",
                    "-o",
                    "-g",
                    "-e",
                    "--rsh",
                    "-i",
                    "-P",
                ],
            );
            if let Some((dest, sources)) = ops.split_last() {
                let delete = args.iter().any(|a| a.shown.starts_with("--delete"));
                check(sh, dest, if delete { Use::Tree } else { Use::Replace })?;
                into_dir(sh, dest, sources)?;
            }
        }
        "tar" | "bsdtar" | "cpio" | "zip" | "7z" => {
            let creates = args.iter().any(|a| {
                let t = a.shown.as_str();
                matches!(t, "-c" | "--create" | "-r" | "--append" | "-u" | "--update" | "a" | "u")
                    || (!t.starts_with("--")
                        && t.trim_start_matches('-').chars().all(|c| c.is_ascii_alphabetic())
                        && t.trim_start_matches('-').contains(['c', 'r', 'u'])
                        && !t.contains('x'))
            });
            for (n, a) in args.iter().enumerate() {
                let target = match a.shown.as_str() {
                    "-f" | "--file" | "-F" => args.get(n + 1).cloned(),
                    t if t.starts_with("--file=") => Some(Arg::literal(&t["--file=".len()..])),
                    t if !t.starts_with("--") && t.starts_with('-') && t.ends_with('f') => args.get(n + 1).cloned(),
                    // `tar cf FILE ...`: old-style bundled options in the first word.
                    t if n == 0 && t.chars().all(|c| c.is_ascii_alphabetic()) && t.contains('f') => {
                        args.get(1).cloned()
                    }
                    _ => None,
                };
                if let Some(t) = target
                    && creates
                {
                    check(sh, &t, Use::Replace)?;
                }
            }
        }
        "tee" | "sponge" => {
            let append = surely_has_flag(args, 'a', &["append"]);
            for a in operands(args, &[]) {
                check(sh, a, if append { Use::Write } else { Use::Replace })?;
            }
        }
        "touch" => {
            for a in operands(args, &["-r", "-d", "-t", "--reference", "--date"]) {
                check(sh, a, Use::Write)?;
            }
        }
        "sed" | "perl"
            if args
                .iter()
                .any(|a| a.shown.starts_with("-i") || a.shown.starts_with("--in-place")) =>
        {
            let ops = operands(args, &["-e", "-f", "--expression", "--file", "-l"]);
            let script_given = args
                .iter()
                .any(|a| matches!(a.shown.as_str(), "-e" | "-f" | "--expression" | "--file"));
            for a in ops.into_iter().skip(usize::from(!script_given)) {
                check(sh, a, Use::Replace)?;
            }
        }
        "sort" | "shuf" => {
            let mut words = args.iter();
            while let Some(a) = words.next() {
                let target = match a.shown.as_str() {
                    "-o" | "--output" => words.next(),
                    t if t.starts_with("--output=") || (t.starts_with("-o") && t.len() > 2) => Some(a),
                    _ => None,
                };
                if let Some(t) = target {
                    let text = t.shown.trim_start_matches("--output=");
                    let text = text.strip_prefix("-o").unwrap_or(text);
                    check(sh, &Arg::literal(text), Use::Replace)?;
                }
            }
        }
        // Editors given commands to run: they can rewrite the files they open.
        "vi" | "vim" | "nvim" | "ex" | "view" | "vim.basic" | "vim.tiny"
            if args.iter().any(|a| {
                a.shown.starts_with('+')
                    || a.shown.starts_with("-c")
                    || a.shown.contains('s') && a.shown.starts_with('-') && !a.shown.starts_with("--")
            }) =>
        {
            for a in operands(args, &["-c", "-S", "-s", "-u", "-i", "-T", "--cmd", "-w", "-W"]) {
                if !a.shown.starts_with('+') {
                    check(sh, a, Use::Replace)?;
                }
            }
        }
        "dd" => {
            for a in args {
                if let Some(target) = a.shown.strip_prefix("of=") {
                    let usage = if a.shown.contains("conv=notrunc") {
                        Use::Write
                    } else {
                        Use::Replace
                    };
                    let mut sub = sh.clone();
                    let target = sub.expand_text(target)?;
                    check(sh, &target, usage)?;
                }
            }
        }
        "curl" | "wget" => {
            for (n, a) in args.iter().enumerate() {
                let t = a.shown.as_str();
                let value =
                    if matches!(t, "-o" | "--output" | "-O" | "--output-document") && !(name == "curl" && t == "-O") {
                        args.get(n + 1)
                    } else {
                        None
                    };
                if let Some(v) = value {
                    check(sh, v, Use::Replace)?;
                }
            }
        }
        "journalctl"
            if args.iter().any(|a| a.shown.starts_with("--vacuum") || may_be_option(a))
                && !journal_trim_keeps_enough(args) =>
        {
            return refuse(
                name,
                "erases the system journal; trimming that keeps at least 100M or 7 days (`--vacuum-size=500M`, `--vacuum-time=2weeks`) is allowed",
            );
        }
        "logrotate" | "rotatelogs" => {}
        "getent" if args.iter().any(|a| matches!(a.shown.as_str(), "shadow" | "gshadow")) => {
            return refuse(name, "reads the system password hashes");
        }
        "unshadow" | "pwdump" | "mimipenguin" | "lazagne" | "laZagne" => {
            return refuse(name, "collects stored passwords");
        }
        _ => {}
    }
    Ok(())
}

/// `cp x DIR/` where `DIR/x` is protected.
fn into_dir(sh: &Shell, dest: &Arg, sources: &[&Arg]) -> Result<(), Blocked> {
    let dir = sh.path(dest);
    for s in sources {
        let target = dir.join(&sh.path(s).file_name());
        if let Some(why) = refusal(&target, Use::Replace) {
            return Err(blocked(format!("`{}` into `{}` {why}", s.shown, dest.shown)));
        }
    }
    Ok(())
}

/// Programs that could stop, disable or remove this agent.
fn agent(name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let names_agent = |a: &Arg| {
        !a.is_known()
            || AGENT_NAMES
                .iter()
                .chain(["kenny-agent.service"].iter())
                .any(|n| a.pat.intersects(&Pattern::literal(n)))
            || a.pat.intersects(&Pattern::glob("kenny*"))
    };
    match name {
        "kill" | "skill" | "snice" => kill(name, args),
        "pkill" | "killall" | "pgrep" | "pidof" if name == "pkill" || name == "killall" => signal_by_name(name, args),
        "killall5" => refuse(name, "signals every process, this agent included"),
        "fuser" if has_flag(args, 'k', &["kill"]) => refuse(name, "kills every process using a file"),
        "systemctl" => {
            let units = operands(
                args,
                &[
                    "-t",
                    "--type",
                    "-s",
                    "--signal",
                    "-p",
                    "--property",
                    "-H",
                    "--host",
                    "-M",
                    "--machine",
                    "--root",
                    "-n",
                    "--lines",
                    "-o",
                    "--output",
                    "--state",
                    "--kill-whom",
                    "--job-mode",
                ],
            );
            let Some((verb, units)) = units.split_first() else {
                return Ok(());
            };
            let verb = verb.shown.to_lowercase();
            if matches!(
                verb.as_str(),
                "isolate" | "rescue" | "emergency" | "default" | "switch-root" | "kexec"
            ) {
                return refuse(name, &format!("{verb} would stop every service, this agent included"));
            }
            let harmless = matches!(
                verb.as_str(),
                "status"
                    | "show"
                    | "cat"
                    | "is-active"
                    | "is-enabled"
                    | "is-failed"
                    | "list-units"
                    | "list-unit-files"
                    | "list-dependencies"
                    | "list-timers"
                    | "list-sockets"
                    | "list-jobs"
                    | "help"
                    | "start"
                    | "restart"
                    | "try-restart"
                    | "reload-or-restart"
                    | "try-reload-or-restart"
                    | "reload"
                    | "enable"
                    | "reenable"
                    | "condrestart"
                    | "daemon-reload"
                    | "log-level"
                    | "show-environment"
                    | "is-system-running"
                    | "get-default"
                    | "poweroff"
                    | "reboot"
                    | "halt"
                    | "suspend"
                    | "hibernate"
            );
            if !harmless && units.iter().any(|u| names_agent(u)) {
                return refuse(name, &format!("{verb} would stop or disable the kenny agent"));
            }
            // Units the agent's service runs inside: stopping or killing them stops it.
            let contains_agent = |u: &Arg| {
                [
                    "system.slice",
                    "-.slice",
                    "multi-user.target",
                    "default.target",
                    "basic.target",
                    "sysinit.target",
                ]
                .iter()
                .any(|n| u.pat.intersects(&Pattern::literal(n)))
            };
            if !harmless
                && !matches!(verb.as_str(), "start" | "enable" | "reenable")
                && units.iter().any(|u| contains_agent(u))
            {
                return refuse(
                    name,
                    &format!("{verb} on a unit the kenny agent runs inside would stop the agent too"),
                );
            }
            Ok(())
        }
        "service" | "rc-service" | "sv" | "initctl" | "update-rc.d" | "chkconfig" | "rc-update" | "launchctl"
        | "invoke-rc.d" => {
            let words: Vec<String> = args.iter().map(|a| a.shown.to_lowercase()).collect();
            let stops = words.iter().any(|w| {
                matches!(
                    w.as_str(),
                    "stop"
                        | "disable"
                        | "remove"
                        | "del"
                        | "delete"
                        | "off"
                        | "kill"
                        | "unload"
                        | "bootout"
                        | "down"
                        | "mask"
                        | "force-stop"
                )
            });
            if stops && args.iter().any(names_agent) {
                return refuse(name, "would stop or disable the kenny agent");
            }
            Ok(())
        }
        "init" | "telinit" => {
            if args.iter().any(|a| {
                matches!(
                    a.shown.to_lowercase().as_str(),
                    "1" | "s" | "single" | "emergency" | "rescue"
                )
            }) {
                return refuse(name, "switches to single-user mode, which stops this agent");
            }
            Ok(())
        }
        "kenny-agent" | "kenny"
            if args
                .iter()
                .any(|a| matches!(a.shown.as_str(), "uninstall" | "remote-control" | "install")) =>
        {
            refuse(name, "reconfigures or removes the kenny agent itself")
        }
        _ => Ok(()),
    }
}

/// Whether every `--vacuum-*` option of a `journalctl` keeps a reasonable journal: at
/// least 100 MB (`--vacuum-size`) or 7 days (`--vacuum-time`); `--vacuum-files` always
/// erases whole files and is refused. An option only known at run time is refused.
fn journal_trim_keeps_enough(args: &[Arg]) -> bool {
    const MIN_BYTES: f64 = 100.0 * 1024.0 * 1024.0;
    const MIN_SECS: f64 = 7.0 * 86_400.0;
    let mut words = args.iter();
    while let Some(a) = words.next() {
        if may_be_option(a) {
            return false;
        }
        let t = a.shown.as_str();
        let Some(rest) = t.strip_prefix("--vacuum-") else {
            continue;
        };
        let (option, value) = match rest.split_once('=') {
            Some((o, v)) => (o, Some(v.to_owned())),
            None => (rest, words.next().and_then(|v| v.text().map(str::to_owned))),
        };
        let Some(value) = value else { return false };
        let enough = match option {
            "size" => amount(
                &value,
                &[
                    ("", 1.0),
                    ("k", 1024.0),
                    ("m", 1048576.0),
                    ("g", 1073741824.0),
                    ("t", 1099511627776.0),
                ],
            )
            .is_some_and(|b| b >= MIN_BYTES),
            "time" => amount(
                &value,
                &[
                    ("s", 1.0),
                    ("sec", 1.0),
                    ("m", 60.0),
                    ("min", 60.0),
                    ("h", 3600.0),
                    ("d", 86400.0),
                    ("day", 86400.0),
                    ("days", 86400.0),
                    ("w", 604800.0),
                    ("week", 604800.0),
                    ("weeks", 604800.0),
                    ("month", 2629800.0),
                    ("months", 2629800.0),
                    ("y", 31557600.0),
                    ("year", 31557600.0),
                    ("years", 31557600.0),
                ],
            )
            .is_some_and(|s| s >= MIN_SECS),
            _ => false,
        };
        if !enough {
            return false;
        }
    }
    true
}

/// A number with one of the given (lower-case) suffixes, times the suffix's factor.
fn amount(value: &str, units: &[(&str, f64)]) -> Option<f64> {
    let value = value.trim().to_lowercase();
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = units.iter().find(|(u, _)| *u == unit.trim())?.1;
    Some(number * factor)
}

fn kill(name: &str, args: &[Arg]) -> Result<(), Blocked> {
    if args
        .iter()
        .any(|a| matches!(a.shown.as_str(), "-l" | "-L" | "--list" | "--table"))
    {
        return Ok(());
    }
    let me = std::process::id().to_string();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let t = a.shown.as_str();
        if matches!(t, "-s" | "-n" | "--signal" | "-q" | "--queue") {
            i += 2;
            continue;
        }
        i += 1;
        if t == "--" {
            continue;
        }
        if let Some(words) = a.subst.as_deref().filter(|_| a.text().is_none())
            && let Some((finder, selection)) = words.split_first()
            && matches!(finder.as_str(), "pidof" | "pgrep")
        {
            // `kill $(pgrep X)` signals what `pkill X` would; `kill $(pidof X)` what
            // `killall X` would: judged the same way.
            let selection: Vec<Arg> = selection.iter().map(|w| Arg::literal(w)).collect();
            signal_by_name(if finder == "pgrep" { "pkill" } else { "killall" }, &selection)?;
            continue;
        }
        let Some(text) = a.text() else {
            return refuse(
                name,
                &format!(
                    "signals a process whose id is only known at run time (`{}`), which could be this agent; name it instead (`systemctl reload nginx`, `pkill -HUP -x nginx`)",
                    a.shown
                ),
            );
        };
        if text.starts_with('%') {
            continue;
        }
        let target = text.trim_start_matches('-');
        if text.starts_with('-') && !target.chars().all(|c| c.is_ascii_digit()) {
            // A signal name or number.
            continue;
        }
        if text.starts_with('-') && (target == "1" || target == me) {
            return refuse(name, "signals every process (or this agent's group)");
        }
        if text.starts_with('-') && i == 1 && target.len() <= 2 && args.len() > 1 {
            // `kill -9 PID`: the signal number.
            continue;
        }
        if target == "1" || target == me {
            return refuse(name, "signals this agent or the init process");
        }
    }
    Ok(())
}

fn signal_by_name(name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let with_value = [
        "-u",
        "-U",
        "-g",
        "-G",
        "-P",
        "-s",
        "-t",
        "-F",
        "--signal",
        "-o",
        "-y",
        "-n",
        "--older-than",
        "--younger-than",
        "-e",
        "--euid",
        "--uid",
        "--pgroup",
        "--group",
        "--parent",
        "--session",
        "--terminal",
        "--pidfile",
        "--ns",
        "--nslist",
    ];
    let full = has_flag(args, 'f', &["full"]);
    let regex_mode = name == "pkill" || has_flag(args, 'r', &["regexp"]);
    let patterns: Vec<&Arg> = operands(args, &with_value)
        .into_iter()
        .filter(|a| !(a.shown.starts_with('-') && a.shown[1..].chars().all(|c| c.is_ascii_alphanumeric())))
        .collect();
    // Children of init are every service, this agent included; of the agent's parent,
    // the agent itself.
    #[cfg(unix)]
    let parent = std::os::unix::process::parent_id().to_string();
    #[cfg(not(unix))]
    let parent = String::from("1");
    let mut selections = args.iter().zip(args.iter().skip(1));
    if selections.any(|(opt, value)| {
        matches!(opt.shown.as_str(), "-P" | "--parent")
            && (!value.is_known() || value.shown.split(',').any(|p| p == "1" || p == parent))
    }) {
        return refuse(
            name,
            "signals the children of init (or of this agent's parent), this agent included",
        );
    }
    if patterns.is_empty() {
        if args.iter().any(|a| {
            matches!(
                a.shown.as_str(),
                "-u" | "-U" | "-g" | "-G" | "-s" | "-t" | "--uid" | "--euid"
            )
        }) {
            return refuse(name, "signals every process of a user or group, this agent included");
        }
        return Ok(());
    }
    let me: Vec<String> = agent_process_texts();
    for p in patterns {
        let Some(text) = p.text() else {
            return refuse(
                name,
                &format!("matches processes by a name only known at run time (`{}`)", p.shown),
            );
        };
        let hits = if regex_mode {
            match regex::RegexBuilder::new(text)
                .case_insensitive(has_flag(args, 'i', &["ignore-case"]))
                .size_limit(1 << 20)
                .build()
            {
                Ok(re) => me.iter().any(|m| re.is_match(m)),
                Err(_) => false,
            }
        } else {
            me.iter()
                .any(|m| m.eq_ignore_ascii_case(text) || (full && m.contains(text)))
        };
        if hits {
            return refuse(name, &format!("would signal this kenny agent (`{text}` matches it)"));
        }
    }
    Ok(())
}

/// The names and command lines this agent's process can be found by.
fn agent_process_texts() -> Vec<String> {
    let mut out: Vec<String> = AGENT_NAMES.iter().map(|s| (*s).to_owned()).collect();
    if let Ok(exe) = std::env::current_exe() {
        let base = exe
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The kernel's process name is the first 15 bytes.
        out.push(base.chars().take(15).collect());
        out.push(base);
        out.push(exe.to_string_lossy().into_owned());
    }
    let cmdline: Vec<String> = std::env::args().collect();
    out.push(cmdline.join(" "));
    out
}

/// Remembers files a download writes, so running them later is fetch-and-run.
fn record_downloads(sh: &mut Shell, name: &str, args: &[Arg]) {
    let downloader = matches!(
        name,
        "curl" | "wget" | "fetch" | "aria2c" | "http" | "lwp-download" | "ftp" | "tftp" | "scp" | "rsync"
    );
    if !downloader {
        return;
    }
    let mut named = false;
    for (n, a) in args.iter().enumerate() {
        let t = a.shown.as_str();
        let output = match (name, t) {
            ("curl", "-o" | "--output") | ("wget", "-O" | "--output-document") | ("aria2c", "-o" | "--out") => {
                args.get(n + 1)
            }
            _ => None,
        };
        if let Some(o) = output {
            named = true;
            sh.fetched.push(sh.path(o));
        }
    }
    if let Some(dest) = operands(args, &[])
        .last()
        .filter(|_| matches!(name, "scp" | "rsync" | "lwp-download"))
    {
        named = true;
        let mut p = sh.path(dest);
        p.push_deep();
        sh.fetched.push(p);
    }
    if !named {
        // `curl -O URL`, `wget URL`: a file named after the URL, in the working directory.
        let mut anything_here = sh.path(&Arg::literal("."));
        anything_here.push_str("/");
        anything_here.push_deep();
        sh.fetched.push(anything_here);
    }
}
