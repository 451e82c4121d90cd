//! Package ids are checked against each manager's naming rules before they reach a
//! command line: they travel as argv (never through a shell), and these rules also keep
//! them from being read as options, globs or file paths.

use super::Manager;
use crate::tools::ToolError;

/// The id as it will be passed on, or a `bad_args` error saying what is wrong with it.
pub(super) fn validate(manager: Manager, raw: &str) -> Result<String, ToolError> {
    let id = raw.trim();
    common(id)?;
    match manager {
        Manager::Apt => debian(id)?,
        Manager::Dnf => rpm(id)?,
        Manager::Winget => winget(id)?,
    }
    Ok(id.to_owned())
}

fn refuse(id: &str, why: impl std::fmt::Display) -> ToolError {
    ToolError::bad_args(format!("package id {id:?} refused: {why}"))
}

fn common(id: &str) -> Result<(), ToolError> {
    if id.is_empty() {
        return Err(ToolError::bad_args("package id is empty"));
    }
    if id.starts_with('-') {
        return Err(refuse(
            id,
            "it starts with `-`, so the package manager would read it as an option",
        ));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(refuse(id, format_args!("it contains the control character {c:?}")));
    }
    Ok(())
}

fn describe(c: char) -> String {
    if c.is_whitespace() {
        "whitespace".to_owned()
    } else if c == '/' {
        "`/` (a path, not a package name)".to_owned()
    } else if ";&|$`<>(){}[]*?!'\"\\~#%^=,".contains(c) {
        format!("the shell or pattern character `{c}`")
    } else {
        format!("the character `{c}`")
    }
}

/// Debian policy: lower-case letters, digits, `+`, `-` and `.`, at least two characters,
/// starting with a letter or digit; optionally `:arch` for a multi-arch package.
fn debian(id: &str) -> Result<(), ToolError> {
    let (name, arch) = match id.split_once(':') {
        Some((name, arch)) => (name, Some(arch)),
        None => (id, None),
    };
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '-' | '.')))
    {
        let hint = if c.is_ascii_uppercase() {
            " (Debian package names are lower case)".to_owned()
        } else {
            String::new()
        };
        return Err(refuse(
            id,
            format_args!("a Debian package name may not contain {}{hint}", describe(c)),
        ));
    }
    if name.len() < 2 || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(refuse(
            id,
            "a Debian package name has at least two characters and starts with a letter or digit",
        ));
    }
    if let Some(arch) = arch
        && (arch.is_empty()
            || !arch
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    {
        return Err(refuse(id, "after `:` comes an architecture such as `amd64` or `i386`"));
    }
    Ok(())
}

/// RPM names: letters, digits, `-`, `.`, `_`, `+`, starting with a letter, digit or `_`.
/// dnf would treat `*?[]` as globs and `(`/`/` as capabilities or files, so they are refused.
fn rpm(id: &str) -> Result<(), ToolError> {
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '+')))
    {
        return Err(refuse(
            id,
            format_args!("an RPM package name may not contain {}", describe(c)),
        ));
    }
    if !id.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        return Err(refuse(id, "an RPM package name starts with a letter, digit or `_`"));
    }
    Ok(())
}

/// winget ids: `Publisher.Package` style (letters, digits, `.`, `-`, `_`, `+`), or the
/// ids `winget list` shows for programs it did not install (`ARP\Machine\X64\...`,
/// `MSIX\...`), which may hold spaces, braces and parentheses.
fn winget(id: &str) -> Result<(), ToolError> {
    if id.ends_with('\u{2026}') {
        return Err(refuse(
            id,
            "it ends with `…`: winget cut it short in a table; look the full id up",
        ));
    }
    let lower = id.to_ascii_lowercase();
    let local = lower.starts_with(r"arp\") || lower.starts_with(r"msix\");
    let allowed = |c: char| {
        c.is_alphanumeric()
            || matches!(c, '.' | '-' | '_' | '+')
            || (local && matches!(c, ' ' | '\\' | '{' | '}' | '(' | ')' | '~' | '#' | ',' | '&' | '\''))
    };
    if let Some(c) = id.chars().find(|&c| !allowed(c)) {
        return Err(refuse(id, format_args!("a winget id may not contain {}", describe(c))));
    }
    if !id.starts_with(|c: char| c.is_alphanumeric()) {
        return Err(refuse(id, "a winget id starts with a letter or digit"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    fn ok(manager: Manager, id: &str) {
        assert_eq!(validate(manager, id).as_deref(), Ok(id.trim()), "{manager:?} {id:?}");
    }

    fn bad(manager: Manager, id: &str, says: &str) {
        let err = validate(manager, id).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgs, "{manager:?} {id:?}");
        assert!(err.message.contains(says), "{manager:?} {id:?}: {}", err.message);
    }

    const HOSTILE: &[(&str, &str)] = &[
        ("--reinstall", "starts with `-`"),
        ("-y", "starts with `-`"),
        ("foo;rm", "`;`"),
        ("foo rm", "whitespace"),
        ("foo\trm", "control character"),
        ("foo\nrm", "control character"),
        ("foo/../bar", "`/`"),
        ("/etc/passwd", "`/`"),
        ("$(reboot)", "`$`"),
        ("`id`", "character ```"),
        ("foo|bar", "`|`"),
        ("foo&&bar", "`&`"),
        ("foo>x", "`>`"),
        ("foo*", "`*`"),
        ("fo?", "`?`"),
        ("f[o]o", "`[`"),
        ("\"quoted\"", "`\"`"),
        ("", "empty"),
        ("   ", "empty"),
    ];

    #[test]
    fn hostile_ids_are_refused_by_every_manager() {
        for manager in [Manager::Apt, Manager::Dnf, Manager::Winget] {
            for (id, says) in HOSTILE {
                bad(manager, id, says);
            }
        }
    }

    #[test]
    fn debian_names() {
        for id in [
            "hello",
            "bash",
            "g++",
            "libstdc++6",
            "python3.11",
            "0ad",
            "firefox-esr",
            "libc6:i386",
            " hello ",
        ] {
            ok(Manager::Apt, id);
        }
        bad(Manager::Apt, "Hello", "lower case");
        bad(Manager::Apt, "x", "at least two characters");
        bad(Manager::Apt, ".hidden", "starts with a letter or digit");
        bad(Manager::Apt, "foo_bar", "`_`");
        bad(Manager::Apt, "libc6:", "architecture");
        bad(Manager::Apt, "libc6:AMD64", "architecture");
        bad(Manager::Apt, "héllo", "`é`");
    }

    #[test]
    fn rpm_names() {
        for id in [
            "bash",
            "gcc-c++",
            "python3.12",
            "perl-Data-Dumper",
            "NetworkManager",
            "_internal",
            "kernel.x86_64",
        ] {
            ok(Manager::Dnf, id);
        }
        bad(Manager::Dnf, "perl(Data::Dumper)", "`(`");
        bad(Manager::Dnf, "+x", "starts with a letter");
        bad(Manager::Dnf, "@development-tools", "`@`");
    }

    #[test]
    fn winget_ids() {
        for id in [
            "Mozilla.Firefox",
            "7zip.7zip",
            "Microsoft.VisualStudioCode",
            "Python.Python.3.12",
            "9NBLGGH4NNS1",
            "Notepad++.Notepad++",
            "ARP\\Machine\\X64\\{5FCE6D76-F5DC-37AB-B2B8-22AB8CEDB1D4}",
            "ARP\\Machine\\X86\\Microsoft Edge Update",
            "MSIX\\Microsoft.WindowsCalculator_11.2405.2.0_x64__8wekyb3d8bbwe",
            "Bücher.App",
        ] {
            ok(Manager::Winget, id);
        }
        bad(Manager::Winget, "Mozilla Firefox", "whitespace");
        bad(Manager::Winget, "Microsoft.VisualStudio…", "cut it short");
        bad(Manager::Winget, "ARP\\Machine\\X64\\x\"y", "`\"`");
        bad(Manager::Winget, "ARP\\Machine\\X64\\a|b", "`|`");
        bad(Manager::Winget, ".NET", "starts with a letter or digit");
        bad(Manager::Winget, "Foo\\Bar", "`\\`");
    }
}
