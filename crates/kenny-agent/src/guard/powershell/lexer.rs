//! Splits PowerShell text into tokens the way PowerShell does where it matters to the
//! guard: every quote style (typographic ones too), backtick escapes, here-strings,
//! comments, variables, `$(...)`, and parameters written with any dash PowerShell
//! accepts (`-`, en dash, em dash, horizontal bar).

/// The characters PowerShell reads as a dash.
pub(super) fn is_dash(c: char) -> bool {
    matches!(c, '-' | '\u{2013}' | '\u{2014}' | '\u{2015}')
}

fn is_single_quote(c: char) -> bool {
    matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}')
}

fn is_double_quote(c: char) -> bool {
    matches!(c, '"' | '\u{201C}' | '\u{201D}' | '\u{201E}')
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    /// `;` or a line break.
    Sep,
    /// `|`
    Pipe,
    /// `&&` or `||`
    Chain,
    /// `&`
    Amp,
    /// A word in command position or an argument: text with escapes removed, and
    /// whether part of it is only known at run time (`$x` inside it).
    /// Each `\0` in `text` stands for the next entry of `vars` (a variable name, or
    /// `$(` for a subexpression).
    Bare {
        text: String,
        vars: Vec<String>,
    },
    /// `-Name` (or `-Name:`), dash variants folded to `-`; the name without the dash.
    Param {
        name: String,
        colon: bool,
    },
    /// A string: its text (with `$(...)` bodies listed separately) and whether it
    /// expands variables or subexpressions.
    Str {
        text: String,
        vars: Vec<String>,
        subs: Vec<String>,
    },
    /// `$name`, `${name}`, `$env:NAME`, `@splat`.
    Var(String),
    /// `$(`, `@(`, `(`: opening of a nested statement list.
    Open(char),
    Close(char),
    /// `{`
    BlockOpen,
    BlockClose,
    /// `@{`
    HashOpen,
    /// `[Type]`
    Type(String),
    /// `.` or `::` between parts of an expression.
    Member(String),
    /// `,`, `=`, `+`, `>`, other operators.
    Op(String),
}

pub(super) struct Lexer<'a> {
    chars: Vec<char>,
    i: usize,
    _src: &'a str,
}

#[derive(Debug)]
pub(super) struct LexError(pub String);

impl<'a> Lexer<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Lexer {
            chars: src.chars().collect(),
            i: 0,
            _src: src,
        }
    }

    fn peek(&self, n: usize) -> Option<char> {
        self.chars.get(self.i + n).copied()
    }

    pub(super) fn tokens(mut self) -> Result<Vec<Tok>, LexError> {
        let mut out: Vec<Tok> = Vec::new();
        while let Some(c) = self.peek(0) {
            // What came right before decides whether `.` is member access.
            let glued = self.i > 0 && !self.chars[self.i - 1].is_whitespace();
            match c {
                '\n' | ';' => {
                    self.i += 1;
                    out.push(Tok::Sep);
                }
                '`' if self.peek(1) == Some('\n') || (self.peek(1) == Some('\r') && self.peek(2) == Some('\n')) => {
                    self.i += if self.peek(1) == Some('\r') { 3 } else { 2 };
                }
                c if c.is_whitespace() => self.i += 1,
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                '<' if self.peek(1) == Some('#') => {
                    self.i += 2;
                    while self.i < self.chars.len() && !(self.peek(0) == Some('#') && self.peek(1) == Some('>')) {
                        self.i += 1;
                    }
                    if self.i >= self.chars.len() {
                        return Err(LexError("a `<#` comment is never closed".into()));
                    }
                    self.i += 2;
                }
                '|' if self.peek(1) == Some('|') => {
                    self.i += 2;
                    out.push(Tok::Chain);
                }
                '|' => {
                    self.i += 1;
                    out.push(Tok::Pipe);
                }
                '&' if self.peek(1) == Some('&') => {
                    self.i += 2;
                    out.push(Tok::Chain);
                }
                '&' => {
                    self.i += 1;
                    out.push(Tok::Amp);
                }
                '(' => {
                    self.i += 1;
                    out.push(Tok::Open('('));
                }
                ')' => {
                    self.i += 1;
                    out.push(Tok::Close(')'));
                }
                '{' => {
                    self.i += 1;
                    out.push(Tok::BlockOpen);
                }
                '}' => {
                    self.i += 1;
                    out.push(Tok::BlockClose);
                }
                ']' => {
                    self.i += 1;
                    out.push(Tok::Op("]".into()));
                }
                ',' => {
                    self.i += 1;
                    out.push(Tok::Op(",".into()));
                }
                '@' if matches!(self.peek(1), Some(q) if is_single_quote(q) || is_double_quote(q))
                    && matches!(self.peek(2), Some('\n' | '\r')) =>
                {
                    out.push(self.here_string()?);
                }
                '@' if self.peek(1) == Some('(') => {
                    self.i += 2;
                    out.push(Tok::Open('@'));
                }
                '@' if self.peek(1) == Some('{') => {
                    self.i += 2;
                    out.push(Tok::HashOpen);
                }
                '@' if self.peek(1).is_some_and(|c| c.is_alphanumeric() || c == '_') => {
                    self.i += 1;
                    let name = self.ident();
                    out.push(Tok::Var(format!("@{name}")));
                }
                '$' if self.peek(1) == Some('(') => {
                    self.i += 2;
                    out.push(Tok::Open('$'));
                }
                '$' => {
                    let start = self.i;
                    self.i += 1;
                    let name = self.variable()?;
                    match self.peek(0) {
                        Some(n) if !n.is_whitespace() && !"|;&(){},.[=)+".contains(n) => {
                            // `$env:TEMP\x`: one expandable word.
                            self.i = start;
                            out.push(self.bare());
                        }
                        _ => out.push(Tok::Var(name)),
                    }
                }
                '[' if !glued || matches!(out.last(), Some(Tok::Op(_)) | Some(Tok::Open(_)) | None) => {
                    out.push(self.type_literal());
                }
                '[' => {
                    self.i += 1;
                    out.push(Tok::Op("[".into()));
                }
                ':' if self.peek(1) == Some(':') => {
                    self.i += 2;
                    out.push(Tok::Member("::".into()));
                }
                '.' if glued
                    && (matches!(
                        out.last(),
                        Some(Tok::Var(_) | Tok::Close(_) | Tok::Str { .. } | Tok::Type(_))
                    ) || matches!(out.last(), Some(Tok::Op(o)) if o == "]")) =>
                {
                    self.i += 1;
                    out.push(Tok::Member(".".into()));
                }
                '.' if self.peek(1).is_some_and(|n| {
                    n.is_whitespace() || n == '$' || n == '{' || n == '(' || is_single_quote(n) || is_double_quote(n)
                }) && matches!(
                    out.last(),
                    None | Some(Tok::Sep | Tok::Pipe | Tok::Chain | Tok::BlockOpen | Tok::Open(_))
                ) =>
                {
                    // Dot-sourcing: runs its operand in the current scope, like `&`.
                    self.i += 1;
                    out.push(Tok::Amp);
                }
                q if is_single_quote(q) => out.push(self.single()?),
                q if is_double_quote(q) => out.push(self.double()?),
                d if is_dash(d) && self.peek(1).is_some_and(|c| c.is_alphabetic() || c == '?') => {
                    out.push(self.param());
                }
                '=' | '+' | '*' | '/' | '%' | '!' | '>' | '<' if !self.starts_word(c) => {
                    let mut op = String::new();
                    while let Some(c) = self.peek(0).filter(|c| "=+*/%!><&12".contains(*c)) {
                        if op.is_empty() || "=>&12".contains(c) {
                            op.push(c);
                            self.i += 1;
                        } else {
                            break;
                        }
                    }
                    out.push(Tok::Op(op));
                }
                _ => out.push(self.bare()),
            }
        }
        Ok(out)
    }

    /// An operator character that starts or continues a word instead: `a=b`, `C:\x*`,
    /// `/c` (a native program's switch), `%0`.
    fn starts_word(&self, c: char) -> bool {
        self.bare_continues(c)
            || (matches!(c, '/' | '%' | '*')
                && self
                    .peek(1)
                    .is_some_and(|n| n.is_alphanumeric() || n == '\\' || n == ':'))
    }

    /// `>`-like characters that are part of a word (`a=b`, `C:\x*`).
    fn bare_continues(&self, c: char) -> bool {
        self.i > 0 && !self.chars[self.i - 1].is_whitespace() && matches!(c, '=' | '*' | '/' | '%' | '+')
    }

    fn ident(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek(0).filter(|c| c.is_alphanumeric() || matches!(c, '_' | '?')) {
            s.push(c);
            self.i += 1;
        }
        s
    }

    fn variable(&mut self) -> Result<String, LexError> {
        if self.peek(0) == Some('{') {
            let start = self.i + 1;
            while self.peek(0).is_some_and(|c| c != '}') {
                self.i += 1;
            }
            if self.peek(0).is_none() {
                return Err(LexError("a `${` variable is never closed".into()));
            }
            let name: String = self.chars[start..self.i].iter().collect();
            self.i += 1;
            return Ok(name);
        }
        if let Some(c) = self.peek(0).filter(|c| matches!(c, '$' | '?' | '^' | '_')) {
            self.i += 1;
            if c != '_' || !self.peek(0).is_some_and(char::is_alphanumeric) {
                return Ok(c.to_string());
            }
            self.i -= 1;
        }
        let mut name = String::new();
        while let Some(c) = self
            .peek(0)
            .filter(|c| c.is_alphanumeric() || *c == '_' || (*c == ':' && self_colon(self)))
        {
            name.push(c);
            self.i += 1;
        }
        Ok(name)
    }

    fn type_literal(&mut self) -> Tok {
        self.i += 1;
        let mut depth = 1;
        let mut text = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                '`' => continue,
                _ => {}
            }
            if !c.is_whitespace() {
                text.push(c);
            }
        }
        Tok::Type(text.to_lowercase())
    }

    fn param(&mut self) -> Tok {
        self.i += 1;
        let mut name = String::new();
        while let Some(c) = self.peek(0) {
            if c == '`' {
                self.i += 1;
                if let Some(n) = self.peek(0) {
                    name.push(n);
                    self.i += 1;
                }
                continue;
            }
            if c.is_alphanumeric() || matches!(c, '_' | '-' | '?') {
                name.push(c);
                self.i += 1;
            } else {
                break;
            }
        }
        let colon = self.peek(0) == Some(':');
        if colon {
            self.i += 1;
        }
        Tok::Param {
            name: name.to_lowercase(),
            colon,
        }
    }

    fn single(&mut self) -> Result<Tok, LexError> {
        self.i += 1;
        let mut text = String::new();
        loop {
            match self.peek(0) {
                None => return Err(LexError("a single-quoted string is never closed".into())),
                Some(q) if is_single_quote(q) => {
                    if self.peek(1).is_some_and(is_single_quote) {
                        text.push(q);
                        self.i += 2;
                    } else {
                        self.i += 1;
                        break;
                    }
                }
                Some(c) => {
                    text.push(c);
                    self.i += 1;
                }
            }
        }
        Ok(Tok::Str {
            text,
            vars: Vec::new(),
            subs: Vec::new(),
        })
    }

    /// A double-quoted string: backtick escapes, `$var` and `$(...)` inside.
    fn double(&mut self) -> Result<Tok, LexError> {
        self.i += 1;
        let mut text = String::new();
        let mut vars = Vec::new();
        let mut subs = Vec::new();
        loop {
            match self.peek(0) {
                None => return Err(LexError("a double-quoted string is never closed".into())),
                Some(q) if is_double_quote(q) => {
                    if self.peek(1).is_some_and(is_double_quote) {
                        text.push(q);
                        self.i += 2;
                    } else {
                        self.i += 1;
                        break;
                    }
                }
                Some('`') => {
                    self.i += 1;
                    if let Some(e) = self.peek(0) {
                        text.push(escape(e));
                        self.i += 1;
                    }
                }
                Some('$') if self.peek(1) == Some('(') => {
                    self.i += 2;
                    subs.push(self.balanced()?);
                    vars.push("$(".to_owned());
                    text.push('\u{0}');
                }
                Some('$')
                    if self
                        .peek(1)
                        .is_some_and(|c| c.is_alphanumeric() || "_{?$^:".contains(c)) =>
                {
                    self.i += 1;
                    vars.push(self.variable()?);
                    text.push('\u{0}');
                }
                Some(c) => {
                    text.push(c);
                    self.i += 1;
                }
            }
        }
        Ok(Tok::Str { text, vars, subs })
    }

    /// The text up to the `)` that closes a `$(` (quotes and nesting respected).
    fn balanced(&mut self) -> Result<String, LexError> {
        let start = self.i;
        let mut depth = 1;
        while let Some(c) = self.peek(0) {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        let body: String = self.chars[start..self.i].iter().collect();
                        self.i += 1;
                        return Ok(body);
                    }
                }
                q if is_single_quote(q) => {
                    self.single()?;
                    continue;
                }
                q if is_double_quote(q) => {
                    self.double()?;
                    continue;
                }
                '`' => self.i += 1,
                _ => {}
            }
            self.i += 1;
        }
        Err(LexError("a `$(` is never closed".into()))
    }

    fn here_string(&mut self) -> Result<Tok, LexError> {
        let quote = self.chars[self.i + 1];
        let expandable = is_double_quote(quote);
        self.i += 2;
        while matches!(self.peek(0), Some('\r' | '\n')) {
            self.i += 1;
        }
        let start = self.i;
        loop {
            match self.peek(0) {
                None => return Err(LexError("a here-string is never closed".into())),
                Some('\n') if self.peek(1) == Some(quote) && self.peek(2) == Some('@') => {
                    let body: String = self.chars[start..self.i].iter().collect();
                    self.i += 3;
                    let body = body.trim_end_matches('\r').to_owned();
                    if !expandable {
                        return Ok(Tok::Str {
                            text: body,
                            vars: Vec::new(),
                            subs: Vec::new(),
                        });
                    }
                    let mut inner = Lexer::new("");
                    inner.chars = std::iter::once('"')
                        .chain(body.chars().map(|c| if c == '"' { '\u{201C}' } else { c }))
                        .chain(std::iter::once('"'))
                        .collect();
                    return inner.double();
                }
                Some(_) => self.i += 1,
            }
        }
    }

    /// A generic word: runs until whitespace or a character that ends an argument.
    fn bare(&mut self) -> Tok {
        let mut text = String::new();
        let mut vars = Vec::new();
        while let Some(c) = self.peek(0) {
            match c {
                c if c.is_whitespace() => break,
                '|' | ';' | '&' | '(' | ')' | '{' | '}' | ',' => break,
                '`' => {
                    // Outside double quotes a backtick only makes the next character
                    // literal (`i`e`x` is `iex`).
                    self.i += 1;
                    if let Some(e) = self.peek(0) {
                        text.push(e);
                        self.i += 1;
                    }
                }
                '$' if self.peek(1) == Some('(') => {
                    self.i += 2;
                    let _ = self.balanced();
                    vars.push("$(".to_owned());
                    text.push('\u{0}');
                }
                // A `$` that starts no variable is a plain character (`\\host\ADMIN$\x`).
                '$' if self
                    .peek(1)
                    .is_some_and(|c| c.is_alphanumeric() || "_{?$^:".contains(c)) =>
                {
                    self.i += 1;
                    vars.push(self.variable().unwrap_or_default());
                    text.push('\u{0}');
                }
                q if is_single_quote(q) => {
                    if let Ok(Tok::Str { text: t, .. }) = self.single() {
                        text.push_str(&t);
                    }
                }
                q if is_double_quote(q) => {
                    if let Ok(Tok::Str { text: t, vars: v, .. }) = self.double() {
                        text.push_str(&t);
                        vars.extend(v);
                    }
                }
                c => {
                    text.push(c);
                    self.i += 1;
                }
            }
        }
        if text.is_empty() {
            // A character no rule takes: move on.
            self.i += 1;
            return Tok::Op(self.chars[self.i - 1].to_string());
        }
        Tok::Bare { text, vars }
    }
}

/// `$env:Name`, `$script:x`: a colon inside a variable name is a drive or scope.
fn self_colon(lexer: &Lexer<'_>) -> bool {
    lexer.peek(1).is_some_and(|c| c.is_alphanumeric() || c == '_')
}

fn escape(c: char) -> char {
    match c {
        'n' => '\n',
        't' => '\t',
        'r' => '\r',
        '0' => '\0',
        'a' => '\x07',
        'b' => '\x08',
        'e' => '\x1b',
        'f' => '\x0c',
        'v' => '\x0b',
        other => other,
    }
}
