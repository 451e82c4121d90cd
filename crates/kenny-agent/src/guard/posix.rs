//! Judges a `shell_exec` command the way `/bin/sh` will read it: parsed with a real
//! POSIX/bash parser (brush-parser), every simple command resolved to its program and
//! arguments, recursively into `sh -c '...'`, `eval`, substitutions, pipelines, lists,
//! functions, here-documents and wrappers (`sudo`, `env`, `xargs`, `find -exec`...).
//!
//! What it cannot know it assumes the worst of: a program name computed at run time is
//! refused; an unknown part of a path may be anything (see [`super::pattern`]).

use std::collections::{HashMap, HashSet};

use brush_parser::ast;
use brush_parser::word::{ParameterExpr, TildeExpr, WordPiece, WordPieceWithSource};

use super::Blocked;
use super::pattern::Pattern;
use super::programs;
use super::words::{Arg, Stdin, blocked, fetched_and_run, program_name};

/// How deep `sh -c`, `eval` and substitutions may nest before the guard gives up.
const MAX_DEPTH: usize = 12;

fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        // Extended globs would read `!(x)` as a pattern; sh does not have them.
        enable_extended_globbing: false,
        ..Default::default()
    }
}

/// The state of one shell while its command is judged.
#[derive(Clone)]
pub(super) struct Shell {
    /// Where relative paths point; `None` once a `cd` went somewhere unknown.
    pub cwd: Option<Pattern>,
    /// Variables assigned in this command: a value, or `None` when only known at run
    /// time. Others come from the agent's environment, which the child inherits.
    pub vars: HashMap<String, Option<String>>,
    /// A script was sourced: any variable may have changed.
    sourced: bool,
    pub functions: HashSet<String>,
    /// Functions being defined (a call to one of them from its own body is a loop).
    defining: Vec<String>,
    /// Files this command downloads or decodes: running one of them is fetch-and-run.
    pub fetched: Vec<Pattern>,
    /// The command being judged writes fetched or decoded data (it is, or is fed by, a
    /// download or a decoder): files it writes count as fetched.
    pub decoding: bool,
    depth: usize,
}

impl Shell {
    pub(super) fn new(cwd: Option<&str>) -> Shell {
        Shell {
            cwd: cwd.map(|c| Pattern::literal(c).normalized_path()),
            vars: HashMap::new(),
            sourced: false,
            functions: HashSet::new(),
            defining: Vec::new(),
            fetched: Vec::new(),
            decoding: false,
            depth: 0,
        }
    }

    /// A child shell (`sh -c`, a subshell): same directory, its own variables.
    fn child(&self) -> Result<Shell, Blocked> {
        if self.depth >= MAX_DEPTH {
            return Err(blocked(
                "nests shells, substitutions or eval deeper than the guard follows; write it more plainly",
            ));
        }
        let mut child = self.clone();
        child.depth += 1;
        Ok(child)
    }

    /// Judges a whole script (the text of `sh -c`).
    pub(super) fn script(&mut self, text: &str) -> Result<(), Blocked> {
        let mut parser = brush_parser::Parser::new(std::io::BufReader::new(text.as_bytes()), &options());
        let program = parser.parse_program().map_err(|e| {
            blocked(format!(
                "could not be read as a shell command ({e}); the guard refuses what it cannot parse: write it in plain sh syntax"
            ))
        })?;
        for complete in &program.complete_commands {
            self.compound_list(complete)?;
        }
        Ok(())
    }

    /// Judges a nested script in a child shell.
    pub(super) fn nested(&self, text: &str) -> Result<Shell, Blocked> {
        let mut child = self.child()?;
        child.script(text)?;
        Ok(child)
    }

    fn compound_list(&mut self, list: &ast::CompoundList) -> Result<(), Blocked> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p)?,
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<(), Blocked> {
        let piped = pipeline.seq.len() > 1;
        let outer = self.decoding;
        for (n, command) in pipeline.seq.iter().enumerate() {
            // Downstream of a download or decoder, everything written is that data.
            self.decoding |= fetches_or_decodes(command);
            let stdin = if n > 0 { Stdin::Pipe } else { Stdin::Nothing };
            if piped {
                // Every part of a pipeline runs in its own subshell (bash); `cd` there
                // changes nothing for what follows. Fetched files still count.
                let mut sub = self.child()?;
                sub.command(command, stdin)?;
                self.fetched = sub.fetched;
            } else {
                self.command(command, stdin)?;
            }
        }
        self.decoding = outer;
        Ok(())
    }

    fn command(&mut self, command: &ast::Command, stdin: Stdin) -> Result<(), Blocked> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, stdin),
            ast::Command::Compound(compound, redirects) => {
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r)?;
                    }
                }
                self.compound(compound)
            }
            ast::Command::Function(def) => self.function(def),
            ast::Command::ExtendedTest(test, redirects) => {
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r)?;
                    }
                }
                self.extended_test(&test.expr)
            }
        }
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr) -> Result<(), Blocked> {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a)?;
                self.extended_test(b)
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a),
            E::UnaryTest(_, w) => self.word(w).map(drop),
            E::BinaryTest(_, a, b) => {
                self.word(a)?;
                self.word(b).map(drop)
            }
        }
    }

    /// Runs `f` for a body that may or may not run (or run many times): a `cd` inside
    /// leaves the directory unknown afterwards.
    fn maybe<F: FnOnce(&mut Shell) -> Result<(), Blocked>>(&mut self, f: F) -> Result<(), Blocked> {
        let before = self.cwd.clone();
        f(self)?;
        if self.cwd != before {
            self.cwd = None;
        }
        Ok(())
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) -> Result<(), Blocked> {
        use ast::CompoundCommand as C;
        match compound {
            C::BraceGroup(g) => self.compound_list(&g.list),
            C::Subshell(s) => {
                let mut sub = self.child()?;
                sub.compound_list(&s.list)?;
                self.fetched = sub.fetched;
                Ok(())
            }
            C::Arithmetic(a) => arithmetic(&a.expr.value),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater].into_iter().flatten() {
                    arithmetic(&e.value)?;
                }
                self.maybe(|s| s.compound_list(&f.body.list))
            }
            C::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(w)?;
                }
                self.vars.insert(f.variable_name.clone(), None);
                self.maybe(|s| s.compound_list(&f.body.list))
            }
            C::CaseClause(c) => {
                self.word(&c.value)?;
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(p)?;
                    }
                    if let Some(list) = &item.cmd {
                        self.maybe(|s| s.compound_list(list))?;
                    }
                }
                Ok(())
            }
            C::IfClause(i) => {
                self.compound_list(&i.condition)?;
                self.maybe(|s| s.compound_list(&i.then))?;
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.maybe(|s| s.compound_list(cond))?;
                    }
                    self.maybe(|s| s.compound_list(&e.body))?;
                }
                Ok(())
            }
            C::WhileClause(w) | C::UntilClause(w) => self.maybe(|s| {
                s.compound_list(&w.0)?;
                s.compound_list(&w.1.list)
            }),
            C::Coprocess(c) => {
                let mut sub = self.child()?;
                sub.command(&c.body, Stdin::Pipe)
            }
        }
    }

    fn function(&mut self, def: &ast::FunctionDefinition) -> Result<(), Blocked> {
        let name = self.word(&def.fname)?;
        let Some(name) = name.literal else {
            return Err(blocked("defines a function whose name is computed at run time"));
        };
        // The body is judged now, as if it ran: whatever calls the function runs it.
        let mut body = self.child()?;
        body.defining.push(name.clone());
        body.functions.insert(name.clone());
        if let Some(list) = &def.body.1 {
            for r in &list.0 {
                body.redirect(r)?;
            }
        }
        body.compound(&def.body.0)?;
        self.functions.insert(name);
        Ok(())
    }

    fn simple(&mut self, cmd: &ast::SimpleCommand, stdin: Stdin) -> Result<(), Blocked> {
        let mut argv = Vec::new();
        let mut stdin = stdin;
        let mut assignments = Vec::new();
        for item in cmd.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, true, &mut argv, &mut assignments, &mut stdin)?;
        }
        if let Some(w) = &cmd.word_or_name {
            argv.push(self.word(w)?);
        }
        for item in cmd.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, false, &mut argv, &mut assignments, &mut stdin)?;
        }
        if let Some(first) = argv.first().filter(|a| a.from_env && a.split) {
            // Its value depends on the agent's environment, which may differ from the
            // child's; unset, it vanishes and the next word becomes the program.
            return Err(blocked(format!(
                "runs a program whose name is only known at run time (`{}`); a state-changing command must name its program literally",
                first.shown
            )));
        }
        let argv = split_words(argv);
        if argv.is_empty() {
            // Plain assignments: they stay for the rest of the script.
            for (name, value) in assignments {
                self.learn(&name, value);
            }
            return Ok(());
        }
        self.invoke(&argv, &stdin)
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        in_prefix: bool,
        argv: &mut Vec<Arg>,
        assignments: &mut Vec<(ast::AssignmentName, Option<String>)>,
        stdin: &mut Stdin,
    ) -> Result<(), Blocked> {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::Word(w) => argv.push(self.word(w)?),
            I::AssignmentWord(a, w) => {
                if in_prefix {
                    let value = self.assignment(a)?;
                    assignments.push((a.name.clone(), value));
                } else {
                    // After the command name it is an argument (`dd of=...`, `alias
                    // x=...`); declaration builtins also set it.
                    let arg = self.word(w)?;
                    let declares = argv
                        .first()
                        .and_then(Arg::text)
                        .is_some_and(|p| matches!(p, "export" | "local" | "declare" | "typeset" | "readonly"));
                    if declares {
                        let value = self.assignment(a)?;
                        self.learn(&a.name, value);
                    }
                    argv.push(arg);
                }
            }
            I::IoRedirect(r) => {
                if let Some(input) = self.redirect(r)? {
                    *stdin = input;
                }
            }
            I::ProcessSubstitution(_, sub) => {
                self.child()?.compound_list(&sub.list)?;
                argv.push(Arg {
                    proc_subst: true,
                    ..Arg::unknown("<(...)")
                });
            }
        }
        Ok(())
    }

    fn learn(&mut self, name: &ast::AssignmentName, value: Option<String>) {
        let ast::AssignmentName::VariableName(name) = name else {
            return;
        };
        self.vars.insert(name.clone(), value);
    }

    /// A variable's value, when it is known now.
    pub(super) fn lookup(&self, name: &str) -> Option<String> {
        const SHELL_SET: &[&str] = &[
            "PPID",
            "RANDOM",
            "SRANDOM",
            "SECONDS",
            "LINENO",
            "BASHPID",
            "EPOCHSECONDS",
            "EPOCHREALTIME",
            "OLDPWD",
            "REPLY",
            "PIPESTATUS",
            "BASH_COMMAND",
            "FUNCNAME",
            "OPTARG",
            "OPTIND",
            "IFS",
            "PWD",
        ];
        if SHELL_SET.contains(&name) {
            return None;
        }
        if let Some(v) = self.vars.get(name) {
            return v.clone();
        }
        if self.sourced {
            return None;
        }
        Some(std::env::var(name).unwrap_or_default())
    }

    /// Names a builtin sets in ways the guard does not follow (`read X`, `export X`).
    pub(super) fn forget(&mut self, name: &str) {
        let name: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            self.vars.insert(name, None);
        }
    }

    pub(super) fn sourced_something(&mut self) {
        self.sourced = true;
    }

    /// Expands a piece of text as one word.
    pub(super) fn expand_text(&mut self, text: &str) -> Result<Arg, Blocked> {
        self.expand(text, false, false)
    }

    fn assignment(&mut self, a: &ast::Assignment) -> Result<Option<String>, Blocked> {
        match &a.value {
            ast::AssignmentValue::Scalar(w) => Ok(self.word(w)?.literal),
            ast::AssignmentValue::Array(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        self.word(k)?;
                    }
                    self.word(v)?;
                }
                Ok(None)
            }
        }
    }

    /// Judges a command given as argv: wrappers, shells and builtins here, everything
    /// else by its program's rules.
    pub(super) fn invoke(&mut self, argv: &[Arg], stdin: &Stdin) -> Result<(), Blocked> {
        let Some(first) = argv.first() else { return Ok(()) };
        let program = first.text().filter(|_| !first.from_env);
        let Some(program) = program else {
            return Err(blocked(format!(
                "runs a program whose name is only known at run time (`{}`); a state-changing command must name its program literally",
                first.shown
            )));
        };
        if program.is_empty() {
            return Ok(());
        }
        if program.contains('/') && self.is_fetched(&self.path(first)) {
            return Err(fetched_and_run(&first.shown));
        }
        let name = program_name(program);
        if self.defining.contains(&name) {
            return Err(blocked(format!(
                "defines a function `{name}` that calls itself (a fork bomb)"
            )));
        }
        if self.functions.contains(&name) {
            // Its body was judged where it was defined.
            return Ok(());
        }
        programs::judge(self, &name, argv, stdin)
    }

    pub(super) fn is_fetched(&self, path: &Pattern) -> bool {
        self.fetched.iter().any(|f| f.intersects(path))
    }

    /// An argument as a path: relative ones against the working directory.
    pub(super) fn path(&self, arg: &Arg) -> Pattern {
        let pat = &arg.pat;
        let absolute = pat.starts_with_slash() || pat.0.first() == Some(&super::pattern::Tok::Deep);
        let full = if absolute {
            pat.clone()
        } else {
            match &self.cwd {
                Some(cwd) => cwd.join(pat),
                None => {
                    let mut p = Pattern::default();
                    p.push_deep();
                    p.push_str("/");
                    p.0.extend(pat.0.iter().cloned());
                    p
                }
            }
        };
        full.normalized_path()
    }

    /// Checks a redirection; returns the standard input it sets, if it does.
    fn redirect(&mut self, r: &ast::IoRedirect) -> Result<Option<Stdin>, Blocked> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        match r {
            R::File(fd, kind, target) => {
                let reads_stdin = matches!(kind, K::Read | K::ReadAndWrite) && fd.is_none_or(|f| f == 0);
                match target {
                    T::Filename(w) => {
                        let arg = self.word(w)?;
                        let path = self.path(&arg);
                        let usage = match kind {
                            K::Read | K::DuplicateInput => super::paths::Use::Read,
                            K::Append | K::ReadAndWrite => super::paths::Use::Write,
                            K::Write | K::Clobber | K::DuplicateOutput => super::paths::Use::Replace,
                        };
                        programs::check_path(self, &path, usage, &arg.shown)?;
                        if usage != super::paths::Use::Read {
                            programs::check_path(self, &path, super::paths::Use::Read, &arg.shown)?;
                            if self.decoding {
                                self.fetched.push(path);
                            }
                        }
                        Ok(reads_stdin.then_some(Stdin::File))
                    }
                    T::Fd(_) => Ok(None),
                    T::Duplicate(w) => {
                        let arg = self.word(w)?;
                        if !arg.is_known() {
                            return Err(blocked("redirects to a target only known at run time"));
                        }
                        Ok(None)
                    }
                    T::ProcessSubstitution(_, sub) => {
                        self.child()?.compound_list(&sub.list)?;
                        Ok(reads_stdin.then_some(Stdin::Pipe))
                    }
                }
            }
            R::HereDocument(fd, doc) => {
                let text = if doc.requires_expansion {
                    self.expand(&doc.doc.value, true, true)?.literal
                } else {
                    Some(doc.doc.value.clone())
                };
                Ok(fd
                    .is_none_or(|f| f == 0)
                    .then(|| text.map_or(Stdin::Unknown, Stdin::Text)))
            }
            R::HereString(fd, w) => {
                let arg = self.word(w)?;
                Ok(fd
                    .is_none_or(|f| f == 0)
                    .then(|| arg.literal.map_or(Stdin::Unknown, Stdin::Text)))
            }
            R::OutputAndError(w, append) => {
                let arg = self.word(w)?;
                let path = self.path(&arg);
                let usage = if *append {
                    super::paths::Use::Write
                } else {
                    super::paths::Use::Replace
                };
                programs::check_path(self, &path, usage, &arg.shown)?;
                Ok(None)
            }
        }
    }

    /// Expands one word as far as it is known, judging every substitution inside it.
    pub(super) fn word(&mut self, word: &ast::Word) -> Result<Arg, Blocked> {
        self.expand(&word.value, false, false)
    }

    fn expand(&mut self, text: &str, quoted: bool, heredoc: bool) -> Result<Arg, Blocked> {
        let pieces = if heredoc {
            brush_parser::word::parse_heredoc(text, &options())
        } else {
            brush_parser::word::parse(text, &options())
        }
        .map_err(|e| {
            blocked(format!(
                "has a word the guard could not read ({e}); write it more plainly"
            ))
        })?;
        let mut arg = Arg {
            shown: text.to_owned(),
            ..Arg::default()
        };
        let mut known = String::new();
        let mut all_known = true;
        let mut glob = false;
        self.pieces(text, &pieces, quoted, &mut arg, &mut known, &mut all_known, &mut glob)?;
        if arg.pat.0.len() != 1 {
            // Not the whole word: `$(pidof x)y` is no longer a list of ids.
            arg.subst = None;
        }
        if all_known {
            if !glob {
                arg.literal = Some(known.clone());
            }
            arg.expanded = Some(known);
        }
        Ok(arg)
    }

    #[allow(clippy::too_many_arguments)]
    fn pieces(
        &mut self,
        source: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        arg: &mut Arg,
        known: &mut String,
        all_known: &mut bool,
        glob: &mut bool,
    ) -> Result<(), Blocked> {
        let unknown = |arg: &mut Arg, all_known: &mut bool| {
            arg.pat.push_deep();
            *all_known = false;
        };
        for piece in pieces {
            let raw = source.get(piece.start_index..piece.end_index).unwrap_or("");
            match &piece.piece {
                WordPiece::Text(t) => {
                    if !quoted && is_glob(t) {
                        *glob = true;
                        arg.pat.push_glob(&t.replace('\\', "\\\\"));
                    } else if !quoted && t.contains('{') && (t.contains(',') || t.contains("..")) {
                        // Brace expansion: any of the alternatives.
                        unknown(arg, all_known);
                    } else {
                        arg.pat.push_str(t);
                    }
                    known.push_str(t);
                }
                WordPiece::SingleQuotedText(t) => {
                    arg.pat.push_str(t);
                    known.push_str(t);
                }
                WordPiece::AnsiCQuotedText(t) => {
                    let t = ansi_c(t);
                    arg.pat.push_str(&t);
                    known.push_str(&t);
                }
                WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(source, inner, true, arg, known, all_known, glob)?;
                }
                WordPiece::EscapeSequence(e) => {
                    let rest = e.strip_prefix('\\').unwrap_or(e);
                    let text = if rest == "\n" {
                        String::new()
                    } else if quoted && !matches!(rest, "$" | "`" | "\"" | "\\") {
                        e.clone()
                    } else {
                        rest.to_owned()
                    };
                    arg.pat.push_str(&text);
                    known.push_str(&text);
                }
                WordPiece::TildeExpansion(t) => match t {
                    TildeExpr::UserHome(user) if user == "root" => {
                        arg.pat.push_str("/root");
                        known.push_str("/root");
                    }
                    TildeExpr::UserHome(user) => {
                        let home = format!("/home/{user}");
                        arg.pat.push_str(&home);
                        known.push_str(&home);
                    }
                    TildeExpr::WorkingDir if self.cwd.as_ref().is_some_and(Pattern::is_literal) => {
                        let cwd = self.cwd.as_ref().and_then(Pattern::as_literal).unwrap_or_default();
                        arg.pat.push_str(&cwd);
                        known.push_str(&cwd);
                    }
                    _ => match self.lookup("HOME").filter(|h| h.starts_with('/')) {
                        Some(home) => {
                            arg.from_env = true;
                            arg.pat.push_str(&home);
                            known.push_str(&home);
                        }
                        None => {
                            arg.pat.push_str("/");
                            unknown(arg, all_known);
                        }
                    },
                },
                WordPiece::ParameterExpansion(expr) => {
                    if raw.contains("$(") || raw.contains('`') {
                        return Err(blocked(format!(
                            "hides a command substitution inside `{raw}`; write the command on its own"
                        )));
                    }
                    let value = match expr {
                        ParameterExpr::Parameter {
                            parameter: brush_parser::word::Parameter::Named(name),
                            indirect: false,
                        } => {
                            arg.from_env |= !matches!(self.vars.get(name), Some(Some(_)));
                            self.lookup(name)
                        }
                        _ => None,
                    };
                    arg.split |= !quoted;
                    match value {
                        Some(value) if quoted => {
                            arg.pat.push_str(&value);
                            known.push_str(&value);
                        }
                        Some(value) => {
                            // Unquoted: globbed after splitting (see `split_words`).
                            arg.pat.push_glob(&value.replace('\\', "\\\\"));
                            known.push_str(&value);
                            *glob |= is_glob(&value);
                        }
                        None => {
                            arg.vars.push(parameter_name(raw));
                            unknown(arg, all_known);
                        }
                    }
                }
                WordPiece::CommandSubstitution(inner) => {
                    arg.split |= !quoted;
                    self.nested(inner)?;
                    substituted(arg, inner, all_known);
                }
                WordPiece::BackquotedCommandSubstitution(inner) => {
                    arg.split |= !quoted;
                    let inner = inner.replace("\\`", "`").replace("\\$", "$").replace("\\\\", "\\");
                    self.nested(&inner)?;
                    substituted(arg, &inner, all_known);
                }
                WordPiece::ArithmeticExpression(expr) => {
                    arithmetic(&expr.value)?;
                    unknown(arg, all_known);
                }
            }
        }
        Ok(())
    }
}

/// A command substitution's output in a word. It is unknown, but some programs can
/// only print text without a `/` (a date, a host name, process ids): that output
/// cannot turn the word into another path, so it stands for any text within one path
/// component rather than anything at all.
fn substituted(arg: &mut Arg, inner: &str, all_known: &mut bool) {
    *all_known = false;
    let words = plain_words(inner);
    let one_component = words.as_deref().is_some_and(prints_no_slash);
    let whole_word = arg.pat.is_empty();
    if one_component {
        arg.pat.push_glob("*");
    } else {
        arg.pat.push_deep();
    }
    arg.subst = if whole_word { words } else { None };
}

/// The words of a substituted command that is one plain simple command: no quoting,
/// expansion, redirection or operators.
fn plain_words(inner: &str) -> Option<Vec<String>> {
    let plain = inner.chars().all(|c| {
        c.is_ascii_alphanumeric() || matches!(c, ' ' | '\t' | '-' | '_' | '.' | '+' | '%' | ':' | ',' | '=' | '/')
    });
    let words: Vec<String> = inner.split_whitespace().map(str::to_owned).collect();
    (plain && !words.is_empty()).then_some(words)
}

/// Whether a plain command can only print text without a `/`.
fn prints_no_slash(words: &[String]) -> bool {
    let (program, args) = (words[0].as_str(), &words[1..]);
    let only = |allowed: &[&str]| args.iter().all(|a| allowed.contains(&a.as_str()));
    match program {
        "hostname" => only(&["-s", "--short", "-f", "--fqdn"]),
        "whoami" | "nproc" | "arch" => args.is_empty(),
        "uname" => only(&["-r", "-m", "-n", "-s", "-p"]),
        "id" => only(&["-u", "-g", "-G", "-n", "-un", "-gn", "-ur", "-gr"]),
        "pidof" => args.iter().all(|a| !a.contains('/')),
        "pgrep" => args
            .iter()
            .all(|a| !a.contains('/') && !(a.starts_with('-') && (a.contains(['a', 'l']) || a.starts_with("--list")))),
        // The format is printed as written: no `/`, and none of the formats that print one.
        // The format is printed as written: no `/`, no `..`, and none of the formats
        // that print a `/` or a line break.
        "date" => args.iter().all(|a| {
            let prints_slash_or_break =
                a.starts_with('+') && ["%D", "%x", "%c", "%+", "%n", "%t"].iter().any(|f| a.contains(f));
            !(a.contains('/') || a.contains("..") || a.starts_with("+.") || prints_slash_or_break)
        }),
        _ => false,
    }
}

fn parameter_name(raw: &str) -> String {
    raw.trim_start_matches('$')
        .trim_start_matches('{')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || "$#?!@*-".contains(*c))
        .collect()
}

/// Whether unquoted text is a glob: `*`, `?`, or a `[` closed by a later `]` (a lone
/// `[`, the test command, is literal).
fn is_glob(text: &str) -> bool {
    text.contains(['*', '?']) || text.find('[').is_some_and(|at| text[at + 1..].contains(']'))
}

/// Whether a command downloads or decodes data (`curl`, `wget`, `base64 -d`, `xxd -r`,
/// `openssl ... -d`), judged on its words as written.
fn fetches_or_decodes(command: &ast::Command) -> bool {
    let ast::Command::Simple(simple) = command else {
        return false;
    };
    let Some(name) = &simple.word_or_name else { return false };
    let words: Vec<&str> = simple
        .suffix
        .iter()
        .flat_map(|s| s.0.iter())
        .filter_map(|i| match i {
            ast::CommandPrefixOrSuffixItem::Word(w) => Some(w.value.as_str()),
            _ => None,
        })
        .collect();
    let has = |flags: &[&str]| words.iter().any(|w| flags.contains(w));
    match program_name(&name.value).as_str() {
        "curl" | "wget" | "fetch" | "aria2c" | "nc" | "ncat" | "socat" => true,
        "base64" | "base32" | "basenc" => has(&["-d", "--decode", "-D"]),
        "xxd" => has(&["-r", "-revert"]),
        "openssl" => has(&["-d"]),
        "uudecode" | "gpg" => true,
        _ => false,
    }
}

/// Field splitting: an unquoted expansion whose value is known becomes as many words as
/// it has (none when empty), each globbed, exactly as the shell will run it: `X="rm -rf
/// /"; $X` runs `rm`.
fn split_words(argv: Vec<Arg>) -> Vec<Arg> {
    let mut out = Vec::with_capacity(argv.len());
    for arg in argv {
        let text = match (&arg.expanded, arg.split) {
            (Some(t), true) => t.clone(),
            _ => {
                out.push(arg);
                continue;
            }
        };
        if !arg.split || (text.split_whitespace().count() == 1 && !is_glob(&text)) {
            out.push(arg);
            continue;
        }
        for part in text.split_whitespace() {
            let pat = Pattern::glob(part);
            out.push(Arg {
                literal: pat.is_literal().then(|| part.to_owned()),
                expanded: Some(part.to_owned()),
                pat,
                shown: part.to_owned(),
                from_env: arg.from_env,
                vars: arg.vars.clone(),
                ..Arg::default()
            });
        }
    }
    out
}

/// Arithmetic runs commands only through substitutions inside it.
fn arithmetic(expr: &str) -> Result<(), Blocked> {
    if expr.contains("$(") || expr.contains('`') {
        return Err(blocked(
            "hides a command substitution inside arithmetic; write the command on its own",
        ));
    }
    Ok(())
}

/// Decodes the body of `$'...'`.
fn ansi_c(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let mut number = |radix: u32, max: usize, first: Option<char>| {
            let mut digits: String = first.into_iter().collect();
            while digits.len() < max && chars.peek().is_some_and(|d| d.is_digit(radix)) {
                digits.extend(chars.next());
            }
            u32::from_str_radix(&digits, radix).ok().and_then(char::from_u32)
        };
        let decoded = match e {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(e),
            'x' => number(16, 2, None),
            'u' => number(16, 4, None),
            'U' => number(16, 8, None),
            '0'..='7' => number(8, 3, Some(e)),
            other => {
                out.push('\\');
                Some(other)
            }
        };
        out.extend(decoded);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_quotes_decode() {
        assert_eq!(ansi_c(r"\x72m"), "rm");
        assert_eq!(ansi_c(r"\162\155"), "rm");
        assert_eq!(ansi_c(r"\u0072m"), "rm");
        assert_eq!(ansi_c(r"a\'b"), "a'b");
    }
}
