//! kenny's edits of Linux configuration files: one setting's lines in a `key = value`
//! or `KEY value` file (pwquality.conf, faillock.conf, login.defs) rewritten in place
//! with every other byte kept, and the sshd drop-in kenny owns whole. Pure text in, text
//! out; writing is the caller's (atomically, through the web filter's writer).

/// The comment kenny puts above a setting it wrote, so a person reading the file
/// knows where the value came from.
pub(super) const MARKER: &str = "# set by kenny (password_policy_set)";

/// How a file spells a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    /// `key = value` (pwquality.conf, faillock.conf).
    Equals,
    /// `KEY<tab>value` (login.defs).
    Space,
}

impl Style {
    fn line(self, key: &str, value: &str) -> String {
        match self {
            Style::Equals => format!("{key} = {value}"),
            Style::Space => format!("{key}\t{value}"),
        }
    }
}

/// Whether `line` (without its ending) sets `key`: not a comment, and `key` is its
/// first word, followed by blanks, `=` or nothing.
fn sets(line: &str, key: &str) -> bool {
    let body = line.trim_start();
    let Some(rest) = body.strip_prefix(key) else {
        return false;
    };
    rest.is_empty() || rest.starts_with([' ', '\t', '='])
}

/// `text` with every active line for `key` replaced by `key`'s new line (each keeping
/// its own line ending), or the setting appended when no line sets it; `MARKER` above
/// the first. Other lines, comments and blank lines stay byte for byte.
pub(super) fn set_value(text: &str, key: &str, value: &str, style: Style) -> String {
    let new_line = style.line(key, value);
    let mut out = String::with_capacity(text.len() + new_line.len() + MARKER.len() + 2);
    let mut found = false;
    let mut previous: Option<&str> = None;
    for piece in text.split_inclusive('\n') {
        let (line, ending) = split_ending(piece);
        if sets(line, key) {
            if !found && previous.map(|p| split_ending(p).0) != Some(MARKER) {
                out.push_str(MARKER);
                out.push_str(if ending.is_empty() { "\n" } else { ending });
            }
            found = true;
            out.push_str(&new_line);
            out.push_str(ending);
        } else {
            out.push_str(piece);
        }
        previous = Some(piece);
    }
    if !found {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(MARKER);
        out.push('\n');
        out.push_str(&new_line);
        out.push('\n');
    }
    out
}

/// The value `key` has in `text` (the last active line wins, as the readers of these
/// files do).
#[cfg(test)]
fn value_of<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .filter(|l| sets(l, key))
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix(key)?;
            Some(rest.trim_start_matches([' ', '\t', '=']).trim())
        })
        .next_back()
}

fn split_ending(piece: &str) -> (&str, &str) {
    if let Some(line) = piece.strip_suffix("\r\n") {
        (line, "\r\n")
    } else if let Some(line) = piece.strip_suffix('\n') {
        (line, "\n")
    } else {
        (piece, "")
    }
}

/// The first lines of kenny's sshd drop-in, which it owns whole.
const SSHD_HEADER: &str = "\
# Managed by kenny (account_set_logon_rights): the accounts below may not sign in over SSH.
# kenny rewrites this file whole; change it with account_set_logon_rights, not by hand.
";

/// The accounts the drop-in refuses.
pub(super) fn denied_users(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words
                .next()
                .filter(|w| w.eq_ignore_ascii_case("DenyUsers"))
                .map(|_| words.map(str::to_owned).collect::<Vec<_>>())
        })
        .flatten()
        .collect()
}

/// The drop-in with `name` refused (or no longer), or None when nobody is left and
/// the file should go.
pub(super) fn sshd_drop_in(current: &str, name: &str, deny: bool) -> Option<String> {
    let mut users = denied_users(current);
    users.retain(|u| u != name);
    if deny {
        users.push(name.to_owned());
    }
    users.sort();
    users.dedup();
    (!users.is_empty()).then(|| format!("{SSHD_HEADER}DenyUsers {}\n", users.join(" ")))
}

/// Whether sshd_config reads the drop-in directory (Debian's and Fedora's do; an old or
/// hand-made one may not).
pub(super) fn sshd_reads_drop_ins(main_config: &str) -> bool {
    main_config.lines().any(|l| {
        let mut words = l.split_whitespace();
        words.next().is_some_and(|w| w.eq_ignore_ascii_case("Include")) && words.any(|w| w.contains("sshd_config.d"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PWQUALITY: &str = "# Configuration for systemwide password quality limits\n\
# Minimum acceptable size for the new password\n\
# minlen = 8\n\
#\n\
  dcredit = 0 \n\
enforcing=1";

    #[test]
    fn a_missing_setting_is_appended_under_the_marker_and_the_rest_kept() {
        let out = set_value(PWQUALITY, "minlen", "12", Style::Equals);
        assert!(out.starts_with(PWQUALITY), "every original byte, in order:\n{out}");
        assert_eq!(&out[PWQUALITY.len()..], format!("\n{MARKER}\nminlen = 12\n"));
        assert_eq!(value_of(&out, "minlen"), Some("12"));
        // The commented example stays a comment.
        assert!(out.contains("# minlen = 8\n"));
        // Again: nothing moves.
        assert_eq!(set_value(&out, "minlen", "12", Style::Equals), out);
        let changed = set_value(&out, "minlen", "9", Style::Equals);
        assert_eq!(changed, out.replace("minlen = 12", "minlen = 9"));
    }

    #[test]
    fn an_existing_setting_is_replaced_where_it_is_with_its_line_ending() {
        let text = "a=1\r\nenforcing = 1\r\nb = 2\r\nenforcing=0\nlast";
        let out = set_value(text, "enforcing", "0", Style::Equals);
        assert_eq!(
            out,
            format!("a=1\r\n{MARKER}\r\nenforcing = 0\r\nb = 2\r\nenforcing = 0\nlast")
        );
        // `enforcingx` is another key.
        assert_eq!(
            set_value("enforcingx = 1\n", "enforcing", "0", Style::Equals),
            format!("enforcingx = 1\n{MARKER}\nenforcing = 0\n")
        );
    }

    #[test]
    fn login_defs_keeps_its_own_spelling() {
        let defs = "#\n# PASS_MAX_DAYS\tMaximum number of days a password may be used.\nPASS_MAX_DAYS\t99999\nPASS_MIN_DAYS\t0\nPASS_WARN_AGE\t7\n";
        let out = set_value(defs, "PASS_MAX_DAYS", "90", Style::Space);
        assert_eq!(
            out,
            defs.replace("PASS_MAX_DAYS\t99999\n", &format!("{MARKER}\nPASS_MAX_DAYS\t90\n"))
        );
        assert_eq!(value_of(&out, "PASS_MAX_DAYS"), Some("90"));
        assert_eq!(value_of(&out, "PASS_MIN_DAYS"), Some("0"));
        assert_eq!(
            set_value("", "deny", "5", Style::Equals),
            format!("{MARKER}\ndeny = 5\n")
        );
    }

    #[test]
    fn the_sshd_drop_in_lists_each_account_once_and_goes_when_empty() {
        let one = sshd_drop_in("", "kid", true).unwrap();
        assert!(one.starts_with("# Managed by kenny"), "{one}");
        assert!(one.ends_with("\nDenyUsers kid\n"), "{one}");
        let two = sshd_drop_in(&one, "guest", true).unwrap();
        assert_eq!(denied_users(&two), ["guest", "kid"]);
        assert_eq!(sshd_drop_in(&two, "guest", true), Some(two.clone()));
        let back = sshd_drop_in(&two, "guest", false).unwrap();
        assert_eq!(back, one);
        assert_eq!(sshd_drop_in(&one, "kid", false), None);
        assert!(sshd_reads_drop_ins(
            "# x\nInclude /etc/ssh/sshd_config.d/*.conf\nPort 22\n"
        ));
        assert!(!sshd_reads_drop_ins("#Include /etc/ssh/sshd_config.d/*.conf\n"));
    }
}
