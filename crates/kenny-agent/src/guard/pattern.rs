//! Path patterns the guard compares: what a command's word may expand to, and what a
//! protected path looks like, both as globs; two patterns are compared by whether any
//! one path matches both.
//!
//! A word the guard cannot know in full (a variable, a command substitution, a home
//! directory) becomes [`Tok::Deep`], which matches anything, `/` included. So `cat
//! /etc/sha*`, `cat $D/shadow` and `rm -rf "$X/"*` are judged against every path they
//! could name, without touching the file system.

use std::collections::HashSet;

/// One element of a pattern. Patterns are lower case: on Windows case never matters,
/// and on Linux refusing `/ETC/SHADOW` as well costs nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Lit(char),
    /// `?`: one character other than `/`.
    One,
    /// `*`: any run of characters other than `/`.
    Star,
    /// Text unknown at check time: any run of characters, `/` included.
    Deep,
    /// `[...]`: one character (never `/`) in (or, negated, not in) the ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Tok {
    fn repeats(&self) -> bool {
        matches!(self, Tok::Star | Tok::Deep)
    }

    /// A shell glob character (an unknown value is not one).
    fn is_glob(&self) -> bool {
        matches!(self, Tok::One | Tok::Star | Tok::Class { .. })
    }

    fn accepts(&self, c: char) -> bool {
        match self {
            Tok::Lit(l) => *l == c,
            Tok::One | Tok::Star => c != '/',
            Tok::Deep => true,
            Tok::Class { negated, ranges } => {
                c != '/' && (ranges.iter().any(|(a, b)| (*a..=*b).contains(&c)) != *negated)
            }
        }
    }

    /// Characters worth trying when looking for one both tokens accept.
    fn witnesses(&self) -> Vec<char> {
        match self {
            Tok::Lit(c) => vec![*c],
            Tok::Class { ranges, .. } => ranges
                .iter()
                .flat_map(|(a, b)| [*a, *b])
                .chain(['a', '0', '.', '-'])
                .collect(),
            _ => vec!['a', '/', '0', '.', '-', '_'],
        }
    }
}

/// Whether some character is accepted by both tokens; `*_first` says the token is a
/// glob character at the start of a component, which does not accept a leading dot.
fn common_char(a: &Tok, a_first: bool, b: &Tok, b_first: bool) -> bool {
    let ok = |t: &Tok, first: bool, c: char| t.accepts(c) && !(first && c == '.' && t.is_glob());
    a.witnesses()
        .into_iter()
        .chain(b.witnesses())
        .any(|c| ok(a, a_first, c) && ok(b, b_first, c))
}

fn at_component_start(toks: &[Tok], i: usize) -> bool {
    i == 0 || toks[i - 1] == Tok::Lit('/')
}

/// A path pattern.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Pattern(pub Vec<Tok>);

impl Pattern {
    /// A pattern matching exactly `text` (lower-cased).
    pub(super) fn literal(text: &str) -> Pattern {
        Pattern(text.chars().flat_map(char::to_lowercase).map(Tok::Lit).collect())
    }

    /// A glob: `*`, `?`, `[...]`, `**` (any depth) and `\` escaping the next character.
    pub(super) fn glob(text: &str) -> Pattern {
        let mut out = Pattern::default();
        out.push_glob(text);
        out
    }

    /// A Windows path glob: `\\` separates, it never escapes. Spelled the way Windows
    /// resolves it (see [`windows_spelling`]).
    pub(super) fn windows_glob(text: &str) -> Pattern {
        Pattern::glob(&windows_spelling(text))
    }

    /// Appends glob text (see [`Pattern::glob`]).
    pub(super) fn push_glob(&mut self, text: &str) {
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' if i + 1 < chars.len() => {
                    self.push_lit(chars[i + 1]);
                    i += 2;
                    continue;
                }
                '*' if chars.get(i + 1) == Some(&'*') => {
                    self.0.push(Tok::Deep);
                    i += 2;
                    continue;
                }
                '*' => self.0.push(Tok::Star),
                '?' => self.0.push(Tok::One),
                '[' => {
                    if let Some((tok, used)) = parse_class(&chars[i..]) {
                        self.0.push(tok);
                        i += used;
                        continue;
                    }
                    self.push_lit('[');
                }
                c => self.push_lit(c),
            }
            i += 1;
        }
    }

    pub(super) fn push_lit(&mut self, c: char) {
        self.0.extend(c.to_lowercase().map(Tok::Lit));
    }

    pub(super) fn push_str(&mut self, s: &str) {
        for c in s.chars() {
            self.push_lit(c);
        }
    }

    pub(super) fn push_deep(&mut self) {
        if self.0.last() != Some(&Tok::Deep) {
            self.0.push(Tok::Deep);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The text, when the pattern is a plain string.
    pub(super) fn as_literal(&self) -> Option<String> {
        self.0
            .iter()
            .map(|t| match t {
                Tok::Lit(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    pub(super) fn is_literal(&self) -> bool {
        self.0.iter().all(|t| matches!(t, Tok::Lit(_)))
    }

    /// Whether anything in it is unknown at check time (a variable or substitution).
    pub(super) fn has_unknown(&self) -> bool {
        self.0.contains(&Tok::Deep)
    }

    pub(super) fn starts_with_slash(&self) -> bool {
        self.0.first() == Some(&Tok::Lit('/'))
    }

    /// Whether some string matches both patterns. As in the shell, a glob character at
    /// the start of a component never matches a leading `.` (so `/var/*` does not
    /// reach `/var/.secret`); an unknown part can be anything.
    pub(super) fn intersects(&self, other: &Pattern) -> bool {
        let (a, b) = (&self.0, &other.0);
        // State: positions, and whether each side's repeating token has consumed a
        // character yet (the dot rule only applies to the first one).
        let mut seen = HashSet::new();
        let mut stack = vec![(0usize, 0usize, false, false)];
        while let Some(state) = stack.pop() {
            if !seen.insert(state) {
                continue;
            }
            let (i, j, ia, jb) = state;
            if i == a.len() && j == b.len() {
                return true;
            }
            if i < a.len() && a[i].repeats() {
                stack.push((i + 1, j, false, jb));
            }
            if j < b.len() && b[j].repeats() {
                stack.push((i, j + 1, ia, false));
            }
            if i < a.len() && j < b.len() {
                let a_first = !ia && at_component_start(a, i);
                let b_first = !jb && at_component_start(b, j);
                if common_char(&a[i], a_first, &b[j], b_first) {
                    let (ni, na) = if a[i].repeats() { (i, true) } else { (i + 1, false) };
                    let (nj, nb) = if b[j].repeats() { (j, true) } else { (j + 1, false) };
                    stack.push((ni, nj, na, nb));
                }
            }
        }
        false
    }

    /// Whether a token is a shell glob character (`*`, `?`, `[...]`).
    pub(super) fn is_glob_token(t: &Tok) -> bool {
        t.is_glob()
    }

    /// The runs of literal characters, in order: any string it matches contains each.
    pub(super) fn literal_runs(&self) -> Vec<String> {
        let mut runs = Vec::new();
        let mut cur = String::new();
        for t in &self.0 {
            match t {
                Tok::Lit(c) => cur.push(*c),
                _ => {
                    if !cur.is_empty() {
                        runs.push(std::mem::take(&mut cur));
                    }
                }
            }
        }
        if !cur.is_empty() {
            runs.push(cur);
        }
        runs
    }

    /// Splits on `/`, keeping the tokens of each component.
    pub(super) fn components(&self) -> Vec<Pattern> {
        let mut parts = vec![Pattern::default()];
        for t in &self.0 {
            if *t == Tok::Lit('/') {
                parts.push(Pattern::default());
            } else if let Some(last) = parts.last_mut() {
                last.0.push(t.clone());
            }
        }
        parts
    }

    fn from_components(absolute: bool, parts: &[Pattern]) -> Pattern {
        let mut out = Pattern::default();
        for (n, part) in parts.iter().enumerate() {
            if n > 0 || absolute {
                out.0.push(Tok::Lit('/'));
            }
            out.0.extend(part.0.iter().cloned());
        }
        if out.is_empty() && absolute {
            out.0.push(Tok::Lit('/'));
        }
        out
    }

    /// `\` as `/`, repeated `/` collapsed, `.` dropped and `..` applied where the
    /// component before it is known; `..` after an unknown component stays unknown.
    /// A leading `\\?\` or `//?/` (Windows long-path prefix) is dropped.
    pub(super) fn normalized_path(&self) -> Pattern {
        let mut toks: Vec<Tok> = self
            .0
            .iter()
            .map(|t| if *t == Tok::Lit('\\') { Tok::Lit('/') } else { t.clone() })
            .collect();
        let prefix: Vec<Tok> = "//?/".chars().map(Tok::Lit).collect();
        if toks.starts_with(&prefix) {
            toks.drain(..4);
        }
        let unified = Pattern(toks);
        let mut absolute = unified.starts_with_slash();
        let mut kept: Vec<Pattern> = Vec::new();
        let mut parts = unified.components();
        // `/proc/PID/root/...` is `/...` seen through another process's root.
        if absolute
            && parts.len() > 3
            && parts[1].as_literal().as_deref() == Some("proc")
            && parts[3].as_literal().as_deref() == Some("root")
        {
            parts.drain(1..4);
        }
        // `/proc/PID/cwd/...` is under some process's working directory: anywhere.
        if absolute
            && parts.len() > 3
            && parts[1].as_literal().as_deref() == Some("proc")
            && parts[3].as_literal().as_deref() == Some("cwd")
        {
            parts.splice(1..4, [Pattern(vec![Tok::Deep])]);
        }
        for part in parts {
            if part.has_unknown() {
                // An unknown value may itself hold `../..`: what came before it no
                // longer says where the path is. Keep only what follows its last
                // unknown token.
                let last = part.0.iter().rposition(|t| *t == Tok::Deep).unwrap_or(0);
                let mut tail = Pattern(vec![Tok::Deep]);
                tail.0.extend(part.0[last + 1..].iter().cloned());
                kept.clear();
                kept.push(tail);
                absolute = false;
                continue;
            }
            match part.as_literal().as_deref() {
                Some("") | Some(".") => {}
                Some("..") => match kept.last() {
                    Some(prev) if prev.has_unknown() => {}
                    Some(_) => {
                        kept.pop();
                    }
                    None if absolute => {}
                    None => kept.push(part),
                },
                _ => kept.push(part),
            }
        }
        let mut out = Pattern::from_components(absolute, &kept);
        // `c:` alone is the drive root, like `/`.
        if let Some(text) = out.as_literal()
            && text.len() == 2
            && text.ends_with(':')
        {
            out.0.push(Tok::Lit('/'));
        }
        out
    }

    /// This path and every directory above it, `/` first.
    pub(super) fn ancestors_and_self(&self) -> Vec<Pattern> {
        let parts = self.components();
        let absolute = self.starts_with_slash();
        let skip = usize::from(absolute);
        (skip..=parts.len())
            .map(|n| Pattern::from_components(absolute, &parts[skip..n]))
            .collect()
    }

    /// The last component.
    pub(super) fn file_name(&self) -> Pattern {
        self.components().pop().unwrap_or_default()
    }

    /// `self/child`.
    pub(super) fn join(&self, child: &Pattern) -> Pattern {
        let mut out = self.clone();
        if out.0.last() != Some(&Tok::Lit('/')) {
            out.0.push(Tok::Lit('/'));
        }
        out.0.extend(child.0.iter().cloned());
        out
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for t in &self.0 {
            match t {
                Tok::Lit(c) => write!(f, "{c}")?,
                Tok::One => write!(f, "?")?,
                Tok::Star => write!(f, "*")?,
                Tok::Deep => write!(f, "…")?,
                Tok::Class { .. } => write!(f, "[…]")?,
            }
        }
        Ok(())
    }
}

/// A Windows path as Windows resolves it, with `/` separators: the provider prefix
/// (`FileSystem::`), the `\\?\` and `\\.\` namespaces and administrative shares
/// (`\\host\C$\x` is `C:\x`) removed, trailing dots and spaces of each component
/// dropped, a stream suffix (`SAM::$DATA`) cut, and an 8.3 short name (`PROGRA~1`)
/// widened to every long name it could stand for (`progra*`).
pub(super) fn windows_spelling(text: &str) -> String {
    let mut t = text.replace('\\', "/");
    let lower = t.to_lowercase();
    for prefix in ["microsoft.powershell.core/filesystem::", "filesystem::"] {
        if lower.starts_with(prefix) {
            t = t[prefix.len()..].to_owned();
            break;
        }
    }
    let lower = t.to_lowercase();
    if lower.starts_with("//?/unc/") {
        t = format!("//{}", &t["//?/unc/".len()..]);
    } else if lower.starts_with("//?/") || lower.starts_with("//./") {
        t = t[4..].to_owned();
    }
    if let Some(unc) = t.strip_prefix("//") {
        let mut parts = unc.splitn(3, '/');
        let (_host, share, rest) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let share = share.to_lowercase();
        let drive = share
            .strip_suffix('$')
            .filter(|d| d.len() == 1 && d.chars().all(|c| c.is_ascii_alphabetic()));
        if let Some(d) = drive {
            t = format!("{d}:/{rest}");
        } else if share == "admin$" {
            t = format!("c:/windows/{rest}");
        }
    }
    let components: Vec<String> = t
        .split('/')
        .enumerate()
        .map(|(i, c)| {
            // A drive (`C:`) keeps its colon; elsewhere a colon starts a stream name.
            let c = if i == 0 && c.len() == 2 && c.ends_with(':') {
                c
            } else {
                c.split(':').next().unwrap_or(c)
            };
            let c = if c == "." || c == ".." {
                c
            } else {
                c.trim_end_matches(['.', ' '])
            };
            short_name_glob(c).unwrap_or_else(|| c.to_owned())
        })
        .collect();
    components.join("/")
}

/// `PROGRA~1` (or `SYSTEM~2.DLL`): the glob of long names that short name may stand for.
fn short_name_glob(component: &str) -> Option<String> {
    let (stem, ext) = component.split_once('.').unwrap_or((component, ""));
    let (prefix, number) = stem.split_once('~')?;
    let short = !prefix.is_empty()
        && prefix.len() <= 6
        && !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit())
        && ext.len() <= 3;
    short.then(|| format!("{prefix}*"))
}

/// [`Pattern::normalized_path`] for a plain string, without building a pattern: the
/// file tools' fast path.
pub(super) fn normalized_text(path: &str) -> String {
    let lower = path.to_lowercase().replace('\\', "/");
    let unified = lower.strip_prefix("//?/").unwrap_or(&lower);
    let absolute = unified.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in unified.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push(part);
                }
            }
            p => parts.push(p),
        }
    }
    if absolute && parts.len() > 2 && parts[0] == "proc" && parts[2] == "root" {
        parts.drain(..3);
    }
    let mut out = if absolute {
        format!("/{}", parts.join("/"))
    } else {
        parts.join("/")
    };
    if out.len() == 2 && out.ends_with(':') {
        out.push('/');
    }
    out
}

/// `[...]` at the start of `chars`: the token and how many characters it used.
fn parse_class(chars: &[char]) -> Option<(Tok, usize)> {
    let mut i = 1;
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    while let Some(&c) = chars.get(i) {
        if c == ']' && !first {
            return Some((Tok::Class { negated, ranges }, i + 1));
        }
        first = false;
        let lo = c.to_ascii_lowercase();
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&h| h != ']') {
            let hi = chars[i + 2].to_ascii_lowercase();
            ranges.push((lo.min(hi), lo.max(hi)));
            // Upper-case ranges match the lower-cased text too.
            i += 3;
        } else {
            ranges.push((lo, lo));
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meets(a: &str, b: &str) -> bool {
        let user = if a.contains(':') {
            Pattern::windows_glob(a)
        } else {
            Pattern::glob(a)
        };
        user.normalized_path().intersects(&Pattern::glob(b))
    }

    #[test]
    fn globs_meet_when_some_path_matches_both() {
        for (a, b, expected) in [
            ("/etc/sha*", "/etc/shadow", true),
            ("/etc/s?adow", "/etc/shadow", true),
            ("/e[a-t]c/[r-t]hadow", "/etc/shadow", true),
            ("/etc/[!s]hadow", "/etc/shadow", false),
            ("/etc/*", "/etc/shadow", true),
            ("/*/shadow", "/etc/shadow", true),
            ("/*", "/etc/shadow", false),
            ("/etc/passwd", "/etc/shadow", false),
            ("/home/sam/.ssh/id_*", "/home/*/.ssh/id_*", true),
            ("/tmp/*", "/", false),
            ("/us*", "/usr", true),
            ("/tmp/x/../../etc/./shadow", "/etc/shadow", true),
            ("/../../etc//shadow", "/etc/shadow", true),
            (
                "C:\\Windows\\System32\\config\\SAM",
                "?:/windows/system32/config/sam",
                true,
            ),
            (
                "\\\\?\\C:\\Windows\\System32\\config\\SAM",
                "?:/windows/system32/config/sam",
                true,
            ),
            ("/**", "/etc/shadow", true),
            ("**/.ssh/id_rsa", "/home/*/.ssh/id_*", true),
            ("/var/*", "/var/.password-store", false),
            ("/var/.*", "/var/.password-store", true),
            ("/proc/self/root/etc/shadow", "/etc/shadow", true),
            ("/proc/1/root/etc/sha*", "/etc/shadow", true),
            ("/tmp/*.log", "**/.password-store**", false),
        ] {
            assert_eq!(meets(a, b), expected, "{a} vs {b}");
        }
    }

    #[test]
    fn unknown_parts_match_anything_and_dot_dot_after_them_stays_unknown() {
        let mut p = Pattern::literal("/tmp/");
        p.push_deep();
        p.push_str("/../../etc/shadow");
        assert!(p.normalized_path().intersects(&Pattern::literal("/etc/shadow")));
        let mut q = Pattern::default();
        q.push_deep();
        q.push_str("/");
        assert!(q.intersects(&Pattern::literal("/")), "`$X/` may be `/`");
    }

    #[test]
    fn text_normalisation_agrees_with_patterns() {
        for p in [
            "/etc/../etc/./shadow",
            "//etc//shadow",
            "C:\\Windows\\..\\Windows\\System32",
            "\\\\?\\C:\\x",
            "C:",
            "/proc/self/root/etc/shadow",
            "/../..",
            "relative/../x",
            "/",
        ] {
            let via_pattern = Pattern::literal(p).normalized_path().as_literal().unwrap();
            assert_eq!(normalized_text(p), via_pattern, "{p}");
        }
    }

    #[test]
    fn ancestors() {
        let p = Pattern::literal("/usr/local/bin/kenny-agent");
        let shown: Vec<String> = p.ancestors_and_self().iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "/",
                "/usr",
                "/usr/local",
                "/usr/local/bin",
                "/usr/local/bin/kenny-agent"
            ]
        );
        assert_eq!(Pattern::literal("C:").normalized_path().to_string(), "c:/");
    }
}
