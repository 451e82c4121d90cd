//! Builds PowerShell statements from tokens: pipelines of commands (name, parameters,
//! arguments) and expressions, with every nested `(...)`, `$(...)`, `@(...)`, `{...}`
//! and string subexpression parsed too, so the judge can walk all of it.

use super::lexer::{Lexer, Tok};

/// One pipeline: `a | b | c`.
#[derive(Debug, Clone)]
pub(super) struct Pipeline(pub Vec<Element>);

#[derive(Debug, Clone)]
pub(super) enum Element {
    Command(Command),
    /// Anything that is not a command: assignments, `if`, method calls, values.
    Expr(Vec<Part>),
}

#[derive(Debug, Clone)]
pub(super) struct Command {
    /// Started with `&` or `.`: the name is whatever the next value evaluates to.
    pub invoked: bool,
    pub name: Vec<Part>,
    pub args: Vec<CmdArg>,
    /// Targets of `>`/`>>`.
    pub redirects: Vec<Vec<Part>>,
}

#[derive(Debug, Clone)]
pub(super) enum CmdArg {
    /// `-Name` or `-Name:value`; the name lower case, without its dash.
    Param {
        name: String,
        value: Option<Vec<Part>>,
    },
    Value(Vec<Part>),
}

#[derive(Debug, Clone)]
pub(super) enum Part {
    Bare {
        text: String,
        vars: Vec<String>,
    },
    Str {
        text: String,
        vars: Vec<String>,
        subs: Vec<Vec<Pipeline>>,
    },
    Var(String),
    /// `(...)`, `$(...)` or `@(...)` (the opening character).
    Group(char, Vec<Pipeline>),
    Block(Vec<Pipeline>),
    Hash(Vec<Pipeline>),
    Type(String),
    /// `.` or `::`
    Member,
    Op(String),
}

#[derive(Debug)]
pub(super) struct ParseError(pub String);

/// Parses a whole script.
pub(super) fn parse(text: &str) -> Result<Vec<Pipeline>, ParseError> {
    let tokens = Lexer::new(text).tokens().map_err(|e| ParseError(e.0))?;
    let mut p = Parser { toks: tokens, i: 0 };
    let out = p.block(None)?;
    if p.i < p.toks.len() {
        return Err(ParseError(format!("unexpected {:?}", p.toks[p.i])));
    }
    Ok(out)
}

const KEYWORDS: &[&str] = &[
    "if",
    "elseif",
    "else",
    "while",
    "for",
    "foreach",
    "do",
    "until",
    "switch",
    "try",
    "catch",
    "finally",
    "function",
    "filter",
    "workflow",
    "return",
    "throw",
    "exit",
    "break",
    "continue",
    "param",
    "begin",
    "process",
    "end",
    "trap",
    "data",
    "class",
    "enum",
    "using",
    "dynamicparam",
];

struct Parser {
    toks: Vec<Tok>,
    i: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Closer {
    Paren,
    Brace,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i)
    }

    fn at_end_of(&self, closer: Option<Closer>) -> bool {
        matches!(
            (self.peek(), closer),
            (None, _) | (Some(Tok::Close(')')), Some(Closer::Paren)) | (Some(Tok::BlockClose), Some(Closer::Brace))
        )
    }

    fn block(&mut self, closer: Option<Closer>) -> Result<Vec<Pipeline>, ParseError> {
        let mut out = Vec::new();
        loop {
            while matches!(self.peek(), Some(Tok::Sep | Tok::Chain)) {
                self.i += 1;
            }
            if self.at_end_of(closer) {
                break;
            }
            if matches!(self.peek(), Some(Tok::Close(_) | Tok::BlockClose)) {
                return Err(ParseError("a closing bracket has no opening one".into()));
            }
            let before = self.i;
            out.push(self.pipeline(closer)?);
            if self.i == before {
                return Err(ParseError(format!("unexpected {:?}", self.peek())));
            }
        }
        if let Some(c) = closer {
            match self.peek() {
                Some(Tok::Close(')')) if c == Closer::Paren => self.i += 1,
                Some(Tok::BlockClose) if c == Closer::Brace => self.i += 1,
                _ => return Err(ParseError("a bracket is never closed".into())),
            }
        }
        Ok(out)
    }

    fn ends_element(&self, closer: Option<Closer>) -> bool {
        self.at_end_of(closer)
            || matches!(
                self.peek(),
                Some(Tok::Sep | Tok::Pipe | Tok::Chain | Tok::Close(_) | Tok::BlockClose)
            )
    }

    fn pipeline(&mut self, closer: Option<Closer>) -> Result<Pipeline, ParseError> {
        let mut elements = Vec::new();
        loop {
            let first = elements.is_empty();
            elements.push(self.element(closer, first)?);
            if matches!(self.peek(), Some(Tok::Pipe)) {
                self.i += 1;
                while matches!(self.peek(), Some(Tok::Sep)) {
                    self.i += 1;
                }
                continue;
            }
            break;
        }
        Ok(Pipeline(elements))
    }

    fn element(&mut self, closer: Option<Closer>, first: bool) -> Result<Element, ParseError> {
        match self.peek() {
            Some(Tok::Amp) => {
                self.i += 1;
                let name = self.chain()?;
                let (args, redirects) = self.args(closer)?;
                Ok(Element::Command(Command {
                    invoked: true,
                    name,
                    args,
                    redirects,
                }))
            }
            Some(Tok::Bare { text, .. })
                if !(text.starts_with(|c: char| c.is_ascii_digit())
                    || first && KEYWORDS.contains(&text.to_lowercase().as_str())) =>
            {
                let name = vec![self.primary()?];
                let (args, redirects) = self.args(closer)?;
                Ok(Element::Command(Command {
                    invoked: false,
                    name,
                    args,
                    redirects,
                }))
            }
            _ => {
                let mut parts = Vec::new();
                while !self.ends_element(closer) {
                    let part = self.primary()?;
                    let assigns = matches!(&part, Part::Op(o) if o.ends_with('=') && !matches!(o.as_str(), "==" | "!=" | ">=" | "<="));
                    parts.push(part);
                    if assigns && !self.ends_element(closer) {
                        // `$x = Get-Service ...`: the right side is a pipeline.
                        let rhs = self.pipeline(closer)?;
                        parts.push(Part::Group('=', vec![rhs]));
                    }
                }
                Ok(Element::Expr(parts))
            }
        }
    }

    /// A value and the member accesses and calls glued to it: `(x).Kill()`.
    fn chain(&mut self) -> Result<Vec<Part>, ParseError> {
        let mut parts = vec![self.primary()?];
        while matches!(self.peek(), Some(Tok::Member(_))) {
            parts.push(self.primary()?);
            if matches!(self.peek(), Some(Tok::Bare { .. })) {
                parts.push(self.primary()?);
            }
            if matches!(self.peek(), Some(Tok::Open('('))) {
                parts.push(self.primary()?);
            }
        }
        Ok(parts)
    }

    fn args(&mut self, closer: Option<Closer>) -> Result<(Vec<CmdArg>, Vec<Vec<Part>>), ParseError> {
        let mut args = Vec::new();
        let mut redirects = Vec::new();
        while !self.ends_element(closer) {
            match self.peek().cloned() {
                Some(Tok::Param { name, colon }) => {
                    self.i += 1;
                    let value = if colon && !self.ends_element(closer) {
                        Some(self.chain()?)
                    } else {
                        None
                    };
                    args.push(CmdArg::Param { name, value });
                }
                Some(Tok::Op(op)) if op.contains('>') => {
                    self.i += 1;
                    if !op.contains('&') && !self.ends_element(closer) {
                        redirects.push(self.chain()?);
                    }
                }
                Some(Tok::Op(op)) if op == "," => self.i += 1,
                Some(Tok::Amp) => {
                    // A trailing `&` runs the pipeline in the background.
                    self.i += 1;
                }
                _ => args.push(CmdArg::Value(self.chain()?)),
            }
        }
        Ok((args, redirects))
    }

    fn primary(&mut self) -> Result<Part, ParseError> {
        let Some(tok) = self.peek().cloned() else {
            return Err(ParseError("the script ends in the middle of a statement".into()));
        };
        self.i += 1;
        Ok(match tok {
            Tok::Bare { text, vars } => Part::Bare { text, vars },
            Tok::Str { text, vars, subs } => {
                let subs = subs.iter().map(|s| parse(s)).collect::<Result<Vec<_>, _>>()?;
                Part::Str { text, vars, subs }
            }
            Tok::Var(v) => Part::Var(v.to_lowercase()),
            Tok::Open(c) => Part::Group(c, self.block(Some(Closer::Paren))?),
            Tok::BlockOpen => Part::Block(self.block(Some(Closer::Brace))?),
            Tok::HashOpen => Part::Hash(self.block(Some(Closer::Brace))?),
            Tok::Type(t) => Part::Type(t),
            Tok::Member(_) => Part::Member,
            Tok::Op(o) => Part::Op(o),
            Tok::Param { name, .. } => Part::Op(format!("-{name}")),
            Tok::Amp => Part::Op("&".into()),
            Tok::Pipe | Tok::Chain | Tok::Sep => Part::Op(";".into()),
            Tok::Close(_) | Tok::BlockClose => return Err(ParseError("a closing bracket has no opening one".into())),
        })
    }
}
