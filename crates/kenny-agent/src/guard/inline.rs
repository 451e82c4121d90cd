//! Shell commands inside inline interpreter code (`perl -e`, `python3 -c`, an `awk`
//! program): `system("...")`, `os.system('...')`, `subprocess.run([...])`, backticks,
//! `qx{...}`, awk's `print | "cmd"`. The command text is judged like any other; a
//! command built at run time inside the code is refused, since the guard cannot know it.

use std::sync::LazyLock;

use regex::Regex;

/// A call that hands its argument to a shell (or runs it as a program).
#[expect(clippy::expect_used, reason = "a fixed pattern, checked by the unit tests")]
static CALL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?x)
        \b(?: (?:os\.)?system | (?:os\.)?popen | subprocess\.[a-z_]+ | (?:child_process\.)?exec(?:Sync)?
            | spawnSync | shell_exec | passthru | proc_open | IO\.popen | Open3\.[a-z0-9_]+ ) \b
        \s* (?: \( \s* )? "#,
    )
    .expect("valid regex")
});

/// A string literal at the start of the text: `"..."` or `'...'` without escapes or
/// interpolation, or a list of them (`["rm", "-rf", "/"]`).
fn leading_literal(text: &str) -> Option<String> {
    let text = text.trim_start();
    if let Some(list) = text.strip_prefix('[') {
        let end = list.find(']')?;
        let words: Option<Vec<String>> = list[..end]
            .split(',')
            .map(|w| w.trim())
            .filter(|w| !w.is_empty())
            .map(|w| leading_literal(w).filter(|s| s.len() + 2 == w.len()))
            .collect();
        return words.map(|w| w.join(" "));
    }
    let quote = text.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = &text[1..];
    let end = body.find(quote)?;
    let literal = &body[..end];
    let plain = !literal.contains('\\')
        && !(quote == '"' && (literal.contains('$') || literal.contains('@') || literal.contains('{')));
    plain.then(|| literal.to_owned())
}

/// Backticks, `qx{...}`/`qx(...)`, `%x(...)`: the whole text between the delimiters.
#[expect(clippy::expect_used, reason = "a fixed pattern, checked by the unit tests")]
static QUOTED_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"`([^`]*)`|\bqx\s*\{([^}]*)\}|\bqx\s*\(([^)]*)\)|%x\(([^)]*)\)").expect("valid regex")
});

/// awk: `print ... | "cmd"`, `"cmd" | getline`, `system("cmd")`.
#[expect(clippy::expect_used, reason = "a fixed pattern, checked by the unit tests")]
static AWK_PIPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|[^|])\|\s*("[^"]*"|[a-zA-Z_$])|("[^"]*"|[a-zA-Z_]\w*)\s*\|\s*getline"#).expect("valid regex")
});

/// The shell commands `code` runs: `Some(text)` when spelled out, `None` when built at
/// run time.
pub(super) fn shell_commands(code: &str, awk: bool) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for m in CALL.find_iter(code) {
        out.push(leading_literal(&code[m.end()..]));
    }
    for c in QUOTED_COMMAND.captures_iter(code) {
        let text = c.iter().skip(1).flatten().next().map_or("", |m| m.as_str());
        let interpolates = text.contains('$') || text.contains('@') || text.contains('#');
        out.push((!interpolates).then(|| text.to_owned()));
    }
    if awk {
        for c in AWK_PIPE.captures_iter(code) {
            let target = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
            out.push(
                target
                    .strip_prefix('"')
                    .and_then(|t| t.strip_suffix('"'))
                    .map(str::to_owned),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_spelled_out_and_run_time_commands() {
        assert_eq!(
            shell_commands(r#"system("rm -rf /")"#, false),
            vec![Some("rm -rf /".into())]
        );
        assert_eq!(
            shell_commands("import os; os.system('ls /tmp')", false),
            vec![Some("ls /tmp".into())]
        );
        assert_eq!(
            shell_commands(r#"import subprocess; subprocess.run(["rm", "-rf", "/usr"])"#, false),
            vec![Some("rm -rf /usr".into())]
        );
        assert_eq!(shell_commands("system($cmd)", false), vec![None]);
        assert_eq!(shell_commands(r#"system("rm $x")"#, false), vec![None]);
        assert_eq!(shell_commands("print `id`", false), vec![Some("id".into())]);
        assert_eq!(
            shell_commands("qx{rm -rf /boot}", false),
            vec![Some("rm -rf /boot".into())]
        );
        assert_eq!(
            shell_commands(r#"BEGIN { print "x" | "sh" }"#, true),
            vec![Some("sh".into())]
        );
        assert_eq!(shell_commands(r#"{ print $1 | cmd }"#, true), vec![None]);
        assert!(shell_commands("print(sum(range(10)))", false).is_empty());
        assert_eq!(
            shell_commands(r#"system("systemctl restart nginx")"#, false),
            vec![Some("systemctl restart nginx".into())]
        );
        assert!(shell_commands("{ print $1, $3 }", true).is_empty());
        assert!(shell_commands("$3 > 10 || $4 == \"x\" { print }", true).is_empty());
    }
}
