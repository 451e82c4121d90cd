//! Judges a `powershell_exec` script (and `powershell`/`pwsh` command lines reached
//! from anywhere) with a PowerShell reader of our own: there is no Rust PowerShell
//! parser, so `lexer` and `parse` cover the syntax that decides what runs, and this
//! module judges every command and expression in it.
//!
//! Refused: a command whose name is computed (`& $x`, `& ("Stop-"+"Service")`),
//! `Invoke-Expression` and script blocks built from anything but literal text,
//! encoded commands in every spelling, stopping or disabling this agent (directly or
//! through a pipeline or a WMI/CIM method), deleting WMI/CIM objects, shadow copies,
//! backups and event logs, disk destruction, registry hive copies, and any literal
//! that names a raw disk or a credential store.

mod lexer;
mod parse;

use parse::{CmdArg, Command, Element, Part, Pipeline};

use super::Blocked;
use super::paths::{Use, is_raw_device_path, refusal};
use super::pattern::Pattern;
use super::windows;
use super::words::{Arg, blocked};

const MAX_DEPTH: usize = 12;

/// Checks a whole PowerShell script.
pub(super) fn check_script(script: &str) -> Result<(), Blocked> {
    Ps::default().script(script)
}

/// `powershell ARGS` or `pwsh ARGS` reached from a shell command.
pub(super) fn judge_command_line(_name: &str, args: &[Arg]) -> Result<(), Blocked> {
    let words: Vec<Option<String>> = args.iter().map(|a| a.text().map(str::to_owned)).collect();
    Ps::default().powershell_exe(&words, false)
}

/// Parameters that take a value; a prefix of one of them is never read as a switch.
const VALUED: &[&str] = &[
    "name",
    "displayname",
    "inputobject",
    "id",
    "path",
    "literalpath",
    "startuptype",
    "status",
    "destination",
    "scriptblock",
    "command",
    "filepath",
    "argumentlist",
    "methodname",
    "classname",
    "class",
    "outfile",
    "typedefinition",
    "memberdefinition",
    "value",
    "processname",
    "filter",
    "query",
    "logname",
    "drive",
];

const SWITCHES: &[&str] = &[
    "recurse",
    "force",
    "whatif",
    "confirm",
    "passthru",
    "verbose",
    "debug",
    "asjob",
    "wait",
    "nonewwindow",
    "noprofile",
    "noninteractive",
    "nologo",
    "list",
    "raw",
    "usebasicparsing",
    "append",
    "noclobber",
    "includeequal",
    "hidden",
    "literal",
    "removedata",
    "removeoempartition",
    "full",
    "asstring",
];

#[derive(Debug, Clone)]
enum Val {
    Lit(String),
    Block(Vec<Pipeline>),
    Unknown(String),
}

impl Val {
    fn text(&self) -> Option<&str> {
        match self {
            Val::Lit(t) => Some(t),
            _ => None,
        }
    }

    fn shown(&self) -> String {
        match self {
            Val::Lit(t) => t.clone(),
            Val::Block(_) => "{...}".into(),
            Val::Unknown(s) => s.clone(),
        }
    }
}

/// A command with its arguments bound to parameter names where the guard knows them.
struct Call {
    name: String,
    named: Vec<(String, Option<Val>)>,
    positional: Vec<Val>,
}

impl Call {
    /// Whether `-full` (or any prefix of it) was given.
    fn has(&self, full: &str) -> bool {
        self.named
            .iter()
            .any(|(n, _)| !n.is_empty() && full.starts_with(n.as_str()))
    }

    /// The values of a parameter, by name (any prefix) or position.
    fn values(&self, full: &[&str], position: Option<usize>) -> Vec<Val> {
        let mut out: Vec<Val> = self
            .named
            .iter()
            .filter(|(n, _)| !n.is_empty() && full.iter().any(|f| f.starts_with(n.as_str())))
            .filter_map(|(_, v)| v.clone())
            .collect();
        if out.is_empty()
            && let Some(p) = position
        {
            out.extend(self.positional.get(p).cloned());
        }
        out
    }
}

#[derive(Default)]
struct Ps {
    fetched: Vec<Pattern>,
    depth: usize,
}

fn env_value(var: &str) -> Option<String> {
    let v = var.to_lowercase();
    Some(
        match v.as_str() {
            "env:temp" | "env:tmp" => r"C:\Users\user\AppData\Local\Temp",
            "env:systemroot" | "env:windir" => r"C:\Windows",
            "env:systemdrive" => "C:",
            "env:programfiles" => r"C:\Program Files",
            "env:programfiles(x86)" => r"C:\Program Files (x86)",
            "env:programdata" | "env:allusersprofile" => r"C:\ProgramData",
            "env:userprofile" | "home" => r"C:\Users\user",
            "env:appdata" => r"C:\Users\user\AppData\Roaming",
            "env:localappdata" => r"C:\Users\user\AppData\Local",
            "env:computername" => "PC",
            "true" => "True",
            "false" => "False",
            "null" => "",
            _ => return None,
        }
        .to_owned(),
    )
}

/// Fills `\0` placeholders with known variable values.
fn fill(text: &str, vars: &[String]) -> Option<String> {
    let mut out = String::new();
    let mut vars = vars.iter();
    for c in text.chars() {
        if c == '\0' {
            out.push_str(&env_value(vars.next()?)?);
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn eval(chain: &[Part]) -> Val {
    match chain {
        [Part::Bare { text, vars }] | [Part::Str { text, vars, .. }] => match fill(text, vars) {
            Some(t) => Val::Lit(t),
            None => Val::Unknown(text.replace('\0', "$…")),
        },
        [Part::Var(v)] => env_value(v).map_or_else(|| Val::Unknown(format!("${v}")), Val::Lit),
        [Part::Block(b)] => Val::Block(b.clone()),
        [Part::Group('(' | '$', inner)] => match inner.as_slice() {
            [Pipeline(elements)] => match elements.as_slice() {
                [Element::Expr(parts)] => concatenation(parts),
                _ => Val::Unknown("(an expression)".into()),
            },
            _ => Val::Unknown("(an expression)".into()),
        },
        _ => Val::Unknown("(an expression)".into()),
    }
}

/// `'C:\Win' + 'dows'`: strings joined with `+`, as PowerShell joins them.
fn concatenation(parts: &[Part]) -> Val {
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 1 {
            if !matches!(part, Part::Op(op) if op == "+") {
                return Val::Unknown("(an expression)".into());
            }
            continue;
        }
        match eval(std::slice::from_ref(part)) {
            Val::Lit(t) => out.push_str(&t),
            _ => return Val::Unknown("(an expression)".into()),
        }
    }
    Val::Lit(out)
}

/// A command or program name as PowerShell resolves it: without module qualifier,
/// directory or `.exe`, aliases expanded.
fn command_name(text: &str) -> String {
    let base = text.rsplit(['\\', '/']).next().unwrap_or(text).to_lowercase();
    let base = base
        .strip_suffix(".exe")
        .or_else(|| base.strip_suffix(".com"))
        .unwrap_or(&base)
        .to_owned();
    let alias = match base.as_str() {
        "iex" => "invoke-expression",
        "icm" => "invoke-command",
        "spps" | "kill" => "stop-process",
        "spsv" => "stop-service",
        "rm" | "del" | "erase" | "rd" | "rmdir" | "ri" => "remove-item",
        "gsv" => "get-service",
        "gps" | "ps" => "get-process",
        "gwmi" => "get-wmiobject",
        "rwmi" => "remove-wmiobject",
        "iwmi" => "invoke-wmimethod",
        "gcim" => "get-ciminstance",
        "rcim" => "remove-ciminstance",
        "icim" => "invoke-cimmethod",
        "iwr" | "curl" | "wget" => "invoke-webrequest",
        "irm" => "invoke-restmethod",
        "saps" | "start" => "start-process",
        "gc" | "cat" | "type" => "get-content",
        "cp" | "copy" | "cpi" => "copy-item",
        "mv" | "move" | "mi" => "move-item",
        "gci" | "ls" | "dir" => "get-childitem",
        "gi" => "get-item",
        "ii" => "invoke-item",
        "ni" => "new-item",
        "rni" | "ren" => "rename-item",
        "clc" => "clear-content",
        "ac" => "add-content",
        "sp" => "set-itemproperty",
        "rp" => "remove-itemproperty",
        "%" | "foreach" => "foreach-object",
        "?" | "where" => "where-object",
        "select" => "select-object",
        "sort" => "sort-object",
        other => other,
    };
    alias.to_owned()
}

/// Names this agent's service and process go by.
fn names_agent(v: &Val) -> bool {
    match v {
        Val::Lit(t) => {
            let p = Pattern::glob(&t.to_lowercase());
            ["kenny-agent", "kenny", "kenny agent", "kenny-agent.exe", "kenny.exe"]
                .iter()
                .any(|n| p.intersects(&Pattern::literal(n)))
                || p.intersects(&Pattern::glob("kenny*"))
        }
        _ => true,
    }
}

/// Cmdlets whose arguments are files they read (and may copy or send elsewhere).
const FILE_READING_CMDLETS: &[&str] = &[
    "get-content",
    "copy-item",
    "move-item",
    "select-string",
    "import-csv",
    "import-clixml",
    "get-filehash",
    "format-hex",
    "compress-archive",
];

/// A Windows path argument as a pattern (PowerShell wildcards kept).
fn win_path(text: &str) -> Pattern {
    Pattern::windows_glob(text).normalized_path()
}

fn looks_like_path(t: &str) -> bool {
    t.contains(['\\', '/']) || t.get(1..2) == Some(":")
}

impl Ps {
    fn script(&mut self, text: &str) -> Result<(), Blocked> {
        if self.depth >= MAX_DEPTH {
            return Err(blocked(
                "nests scripts deeper than the guard follows; write it more plainly",
            ));
        }
        let pipelines = parse::parse(text).map_err(|e| {
            blocked(format!(
                "could not be read as PowerShell ({}); the guard refuses what it cannot parse",
                e.0
            ))
        })?;
        self.depth += 1;
        let result = self.block(&pipelines);
        self.depth -= 1;
        result
    }

    fn block(&mut self, pipelines: &[Pipeline]) -> Result<(), Blocked> {
        for p in pipelines {
            for (n, e) in p.0.iter().enumerate() {
                self.element(e, &p.0[..n])?;
            }
        }
        Ok(())
    }

    fn element(&mut self, e: &Element, upstream: &[Element]) -> Result<(), Blocked> {
        match e {
            Element::Command(c) => self.command(c, upstream),
            Element::Expr(parts) => self.parts(parts),
        }
    }

    /// Walks an expression: nested statements, strings, method calls.
    fn parts(&mut self, parts: &[Part]) -> Result<(), Blocked> {
        for (n, part) in parts.iter().enumerate() {
            match part {
                Part::Group(_, inner) | Part::Block(inner) | Part::Hash(inner) => {
                    self.depth += 1;
                    let r = self.block(inner);
                    self.depth -= 1;
                    r?;
                }
                Part::Str { text, subs, .. } => {
                    literal_checks(text)?;
                    for s in subs {
                        self.block(s)?;
                    }
                }
                Part::Bare { text, .. } => literal_checks(text)?,
                Part::Type(t) => type_checks(t)?,
                Part::Member => {
                    if let (Some(Part::Bare { text, .. }), Some(Part::Group('(', args))) =
                        (parts.get(n + 1), parts.get(n + 2))
                    {
                        // `.A.B(` lexes as one word: the method is the last name.
                        let method = text.rsplit('.').next().unwrap_or(text).to_lowercase();
                        self.method(&method, &parts[..n], args, parts)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `receiver.method(args)`.
    fn method(&mut self, method: &str, receiver: &[Part], args: &[Pipeline], whole: &[Part]) -> Result<(), Blocked> {
        let arg_text = || match args {
            [Pipeline(e)] if e.len() == 1 => match &e[0] {
                Element::Expr(p) => eval(p).text().map(str::to_owned),
                Element::Command(c) if c.args.is_empty() && !c.invoked => eval(&c.name).text().map(str::to_owned),
                _ => None,
            },
            [] => Some(String::new()),
            _ => None,
        };
        let mentions = |needle: &str| format!("{whole:?}").to_lowercase().contains(needle);
        match method {
            "create" | "newscriptblock" | "invokescript" | "invoke" | "invokereturnasis"
                if mentions("scriptblock") || mentions("invokecommand") =>
            {
                match arg_text() {
                    Some(text) if method != "invoke" && method != "invokereturnasis" => self.script(&text),
                    Some(_) => Ok(()),
                    None => Err(blocked(
                        "builds a script block from text only known at run time (fetched or decoded code); send the script itself",
                    )),
                }
            }
            "load" | "loadfrom" | "loadfile" | "unsafeloadfrom" if mentions("assembly") => Err(blocked(
                "loads a .NET assembly into PowerShell, code the guard cannot see; install the program instead",
            )),
            "kill" | "stop" | "terminate" | "stopservice" | "changestartmode" | "delete" | "pause" => {
                if matches!(method, "delete") && !mentions("shadowcopy") && !mentions("wmi") && !mentions("cim") {
                    return self.deleted_item(receiver);
                }
                match receiver {
                    [Part::Group('(', inner)] if method != "delete" && self.names_only_other_services(inner) => Ok(()),
                    _ => Err(blocked(format!(
                        "calls .{method}() on an object the guard cannot tell apart from this agent, a shadow copy or a service; use Stop-Service or Stop-Process with a literal name"
                    ))),
                }
            }
            "clearlog" | "clear" if mentions("eventlog") || mentions("eventing") => Err(blocked("clears an event log")),
            "downloadfile" => {
                // `(url, file)`: the last literal is where it lands.
                if let [Pipeline(e)] = args
                    && let [Element::Expr(p)] = e.as_slice()
                    && let Some(Part::Str { text, .. }) = p.iter().rev().find(|x| matches!(x, Part::Str { .. }))
                {
                    self.fetched.push(win_path(text));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `(Get-Item C:\x).Delete()`: allowed where the item is a literal, unprotected path.
    fn deleted_item(&mut self, receiver: &[Part]) -> Result<(), Blocked> {
        if let [Part::Group('(', inner)] = receiver
            && let [Pipeline(e)] = inner.as_slice()
            && let [Element::Command(c)] = e.as_slice()
            && let Val::Lit(name) = eval(&c.name)
            && matches!(command_name(&name).as_str(), "get-item" | "get-childitem")
        {
            let call = self.bind(&name, c);
            let paths = call.values(&["path", "literalpath"], Some(0));
            if !paths.is_empty() && paths.iter().all(|p| matches!(p, Val::Lit(_))) {
                for p in paths {
                    self.path_use(&p, Use::Tree)?;
                }
                return Ok(());
            }
        }
        Err(blocked(
            "calls .Delete() on an object only known at run time; use Remove-Item with a literal path",
        ))
    }

    /// `(Get-Service Spooler)`: a Get-Service/Get-Process with literal names that are not this agent.
    fn names_only_other_services(&self, inner: &[Pipeline]) -> bool {
        let [Pipeline(e)] = inner else { return false };
        let [Element::Command(c)] = e.as_slice() else {
            return false;
        };
        let Val::Lit(name) = eval(&c.name) else { return false };
        let cmd = command_name(&name);
        if !matches!(cmd.as_str(), "get-service" | "get-process") {
            return false;
        }
        let call = self.bind(&name, c);
        let names = call.values(&["name", "displayname", "id", "processname"], Some(0));
        !names.is_empty() && names.iter().all(|n| matches!(n, Val::Lit(_)) && !names_agent(n))
    }

    fn bind(&self, name: &str, c: &Command) -> Call {
        let mut call = Call {
            name: command_name(name),
            named: Vec::new(),
            positional: Vec::new(),
        };
        let mut i = 0;
        while i < c.args.len() {
            match &c.args[i] {
                CmdArg::Param { name, value } => {
                    let value = match value {
                        Some(v) => Some(eval(v)),
                        None if SWITCHES
                            .iter()
                            .any(|s| !name.is_empty() && s.starts_with(name.as_str()))
                            && !VALUED.iter().any(|v| v.starts_with(name.as_str())) =>
                        {
                            None
                        }
                        None => match c.args.get(i + 1) {
                            Some(CmdArg::Value(v)) => {
                                i += 1;
                                Some(eval(v))
                            }
                            _ => None,
                        },
                    };
                    call.named.push((name.clone(), value));
                }
                CmdArg::Value(v) => call.positional.push(eval(v)),
            }
            i += 1;
        }
        call
    }

    fn command(&mut self, c: &Command, upstream: &[Element]) -> Result<(), Blocked> {
        // Everything nested in the name and the arguments is judged too.
        self.parts(&c.name)?;
        for a in &c.args {
            match a {
                CmdArg::Param { value: Some(v), .. } | CmdArg::Value(v) => self.parts(v)?,
                CmdArg::Param { .. } => {}
            }
        }
        for r in &c.redirects {
            let target = eval(r);
            self.path_use(&target, Use::Replace)?;
        }
        let name = match eval(&c.name) {
            Val::Lit(n) => n,
            Val::Block(b) if c.invoked => {
                self.depth += 1;
                let r = self.block(&b);
                self.depth -= 1;
                return r;
            }
            other => {
                return Err(blocked(format!(
                    "runs a command whose name is only known at run time (`{}`); a state-changing script must name its commands literally",
                    other.shown()
                )));
            }
        };
        if name.contains('%') {
            return Err(blocked(format!(
                "`{name}` is a program name only known at run time (a cmd variable); name the program literally"
            )));
        }
        if self.fetched.iter().any(|f| f.intersects(&win_path(&name))) {
            return Err(blocked(format!(
                "runs `{name}`, which this same script downloads: fetch-and-run is refused"
            )));
        }
        let call = self.bind(&name, c);
        for v in call
            .positional
            .iter()
            .chain(call.named.iter().filter_map(|(_, v)| v.as_ref()))
        {
            match v {
                Val::Lit(t) => {
                    literal_checks(t)?;
                    if looks_like_path(t) && !t.to_lowercase().starts_with("hk") {
                        self.path_use(v, Use::Read)?;
                    }
                }
                // A cmdlet that reads the files it is given, on a path computed by an
                // expression (`[IO.Path]::Combine(...)`): it could be any file.
                Val::Unknown(_) if FILE_READING_CMDLETS.contains(&call.name.as_str()) => {
                    self.path_use(v, Use::Read)?;
                }
                _ => {}
            }
        }
        let piped = !upstream.is_empty();
        self.cmdlet(&call, c, upstream, piped)
    }

    fn path_use(&self, v: &Val, usage: Use) -> Result<(), Blocked> {
        match v {
            Val::Lit(t) if t.is_empty() => Ok(()),
            Val::Lit(t) => {
                if is_raw_device_path(t) {
                    return Err(blocked(format!("`{t}` is a raw disk or volume device")));
                }
                if let Some(why) = windows::registry_refusal(t, usage) {
                    return Err(blocked(format!("`{t}` {why}")));
                }
                match refusal(&win_path(t), usage) {
                    Some(why) => Err(blocked(format!("`{t}` {why}"))),
                    None => Ok(()),
                }
            }
            // A path built by an expression the guard cannot evaluate could be any file.
            Val::Unknown(shown) if shown == "(an expression)" => Err(blocked(
                "reads or changes a path built at run time by an expression; write the path out as one string",
            )),
            // An unknown value read is judged where it comes from, not here.
            _ if usage == Use::Read => Ok(()),
            other => Err(blocked(format!(
                "`{}` is only known at run time and could be a protected path; write the path out",
                other.shown()
            ))),
        }
    }

    fn cmdlet(&mut self, call: &Call, c: &Command, upstream: &[Element], piped: bool) -> Result<(), Blocked> {
        let name = call.name.as_str();
        let refuse = |why: &str| Err(blocked(format!("`{name}` {why}")));
        match name {
            "invoke-expression" => match call.values(&["command"], Some(0)).first() {
                Some(Val::Lit(text)) => self.script(text),
                Some(_) => refuse("runs text only known at run time (fetched or decoded code); send the script itself"),
                None if piped => refuse("runs text piped into it (fetched or decoded code)"),
                None => Ok(()),
            },
            "invoke-command" | "start-job" | "start-threadjob" | "register-scheduledjob" => {
                for v in call.values(&["scriptblock", "command"], Some(0)) {
                    match v {
                        Val::Block(b) => {
                            self.depth += 1;
                            let r = self.block(&b);
                            self.depth -= 1;
                            r?;
                        }
                        Val::Lit(_) => {}
                        Val::Unknown(s) => {
                            return refuse(&format!(
                                "runs a script block only known at run time (`{s}`); send the script itself"
                            ));
                        }
                    }
                }
                for v in call.values(&["filepath"], None) {
                    self.not_fetched(&v)?;
                }
                Ok(())
            }
            "start-process" => {
                let program = call.values(&["filepath"], Some(0));
                let Some(Val::Lit(program)) = program.first() else {
                    return refuse("starts a program whose name is only known at run time");
                };
                self.not_fetched(&Val::Lit(program.clone()))?;
                let mut words: Vec<Option<String>> = Vec::new();
                for v in call
                    .values(&["argumentlist"], Some(1))
                    .iter()
                    .chain(call.positional.iter().skip(2))
                {
                    match v {
                        Val::Lit(t) => words.extend(windows::split_command_line(t).into_iter().map(Some)),
                        _ => words.push(None),
                    }
                }
                self.native(&command_name(program), &words, false)
            }
            "stop-service" | "suspend-service" | "remove-service" | "set-service" => {
                if name == "set-service" {
                    let stops = call.values(&["startuptype", "status"], None).iter().any(|v| {
                        v.text().is_none_or(|t| {
                            matches!(t.to_lowercase().as_str(), "disabled" | "manual" | "stopped" | "paused")
                        })
                    });
                    if !stops {
                        return Ok(());
                    }
                }
                self.stop_targets(
                    call,
                    &["name", "displayname", "inputobject"],
                    upstream,
                    "service",
                    "would stop or disable the kenny agent",
                )
            }
            "stop-process" | "debug-process" => {
                let me = std::process::id().to_string();
                for v in call.values(&["id"], None) {
                    if v.text().is_none_or(|t| t == me || t == "0" || t == "4") {
                        return refuse("stops a process whose id is only known at run time or that is this agent");
                    }
                }
                if call.has("id") {
                    return Ok(());
                }
                self.stop_targets(
                    call,
                    &["name", "processname", "inputobject"],
                    upstream,
                    "process",
                    "would stop the kenny agent",
                )
            }
            "remove-item"
            | "clear-content"
            | "clear-item"
            | "rename-item"
            | "remove-itemproperty"
            | "set-itemproperty"
            | "new-itemproperty"
            | "set-content"
            | "add-content"
            | "out-file"
            | "move-item"
            | "copy-item"
            | "new-item"
            | "set-item"
            | "export-csv"
            | "export-clixml" => self.file_writes(call, upstream),
            "clear-disk"
            | "initialize-disk"
            | "remove-partition"
            | "format-volume"
            | "remove-physicaldisk"
            | "remove-virtualdisk"
            | "remove-storagepool"
            | "reset-physicaldisk"
            | "clear-tpm"
            | "set-disk" => {
                if name == "set-disk" && !call.has("isoffline") && !call.has("isreadonly") {
                    return Ok(());
                }
                refuse("erases, reformats or takes a disk away")
            }
            "remove-wmiobject" | "remove-ciminstance" => {
                refuse("deletes WMI/CIM objects (shadow copies, services, accounts); this is refused outright")
            }
            "invoke-wmimethod" | "invoke-cimmethod" => {
                let methods = call.values(&["name", "methodname"], Some(1));
                for m in methods {
                    match m.text().map(str::to_lowercase).as_deref() {
                        Some("create") => {
                            let args = call.values(&["argumentlist", "arguments"], Some(2));
                            match args.first().and_then(Val::text) {
                                Some(t) => self.native_line(t)?,
                                None => return refuse("starts a process with a command line only known at run time"),
                            }
                        }
                        Some(
                            "delete" | "terminate" | "stopservice" | "changestartmode" | "pauseservice" | "uninstall",
                        )
                        | None => {
                            return refuse(
                                "calls a WMI/CIM method that deletes or stops things; use the matching cmdlet with a literal name",
                            );
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
            "clear-eventlog" | "remove-eventlog" | "limit-eventlog" => refuse("clears or shrinks event logs"),
            "disable-computerrestore" | "remove-computerrestorepoint" => refuse("removes system restore points"),
            "set-mppreference" | "add-mppreference"
                if call.has("disablerealtimemonitoring") || call.has("exclusionpath") =>
            {
                refuse("switches off or blinds Microsoft Defender")
            }
            "invoke-webrequest" | "invoke-restmethod" | "start-bitstransfer" => {
                for v in call.values(&["outfile", "destination"], None) {
                    if let Val::Lit(t) = &v {
                        self.path_use(&v, Use::Replace)?;
                        self.fetched.push(win_path(t));
                    }
                }
                Ok(())
            }
            "invoke-item" => {
                for v in call.values(&["path", "literalpath"], Some(0)) {
                    self.not_fetched(&v)?;
                }
                Ok(())
            }
            "out-minidump" | "invoke-mimikatz" | "get-gpppassword" | "invoke-kerberoast" => refuse("dumps credentials"),
            "add-type" => match call.values(&["typedefinition", "memberdefinition"], Some(0)).first() {
                Some(Val::Unknown(_)) => refuse("compiles code only known at run time"),
                _ => Ok(()),
            },
            _ => {
                let words: Vec<Option<String>> = c
                    .args
                    .iter()
                    .map(|a| match a {
                        CmdArg::Param { name, value: None } => Some(format!("-{name}")),
                        CmdArg::Param { name, value: Some(v) } => eval(v).text().map(|t| format!("-{name}:{t}")),
                        CmdArg::Value(v) => eval(v).text().map(str::to_owned),
                    })
                    .collect();
                self.native(name, &words, piped)
            }
        }
    }

    fn not_fetched(&self, v: &Val) -> Result<(), Blocked> {
        if let Val::Lit(t) = v
            && self.fetched.iter().any(|f| f.intersects(&win_path(t)))
        {
            return Err(blocked(format!(
                "runs `{t}`, which this same script downloads: fetch-and-run is refused"
            )));
        }
        Ok(())
    }

    /// A stopping cmdlet: its targets (named, or handed down the pipeline) must be
    /// literal and must not be this agent.
    fn stop_targets(
        &self,
        call: &Call,
        params: &[&str],
        upstream: &[Element],
        kind: &str,
        why: &str,
    ) -> Result<(), Blocked> {
        let mut targets = call.values(params, Some(0));
        if targets.is_empty() {
            if upstream.is_empty() {
                return Ok(());
            }
            targets = self.upstream_names(upstream, kind);
        }
        if targets.is_empty() || targets.iter().any(names_agent) {
            return Err(blocked(format!(
                "`{}` {why} (its target is this agent, matches it, or is only known at run time)",
                call.name
            )));
        }
        Ok(())
    }

    /// The names a pipeline hands on: those of the `Get-Service`/`Get-Process` at its
    /// head; nothing known otherwise.
    fn upstream_names(&self, upstream: &[Element], kind: &str) -> Vec<Val> {
        for e in upstream.iter().rev() {
            let Element::Command(c) = e else {
                return vec![Val::Unknown("(pipeline)".into())];
            };
            let Val::Lit(name) = eval(&c.name) else {
                return vec![Val::Unknown("(pipeline)".into())];
            };
            let cmd = command_name(&name);
            match cmd.as_str() {
                // Filters and formatters pass on (part of) what comes from further up;
                // what a filter keeps is only known at run time, so the source decides.
                "select-object" | "sort-object" | "where-object" | "tee-object" | "out-host" => continue,
                "get-service" if kind == "service" => {
                    let call = self.bind(&name, c);
                    let names = call.values(&["name", "displayname"], Some(0));
                    return if names.is_empty() {
                        vec![Val::Unknown("(every service)".into())]
                    } else {
                        names
                    };
                }
                "get-process" if kind == "process" => {
                    let call = self.bind(&name, c);
                    if call.has("id") {
                        return call
                            .values(&["id"], None)
                            .into_iter()
                            .map(|v| match v {
                                Val::Lit(t) if t == std::process::id().to_string() => Val::Lit("kenny".into()),
                                other => other,
                            })
                            .collect();
                    }
                    let names = call.values(&["name", "processname"], Some(0));
                    return if names.is_empty() {
                        vec![Val::Unknown("(every process)".into())]
                    } else {
                        names
                    };
                }
                _ => return vec![Val::Unknown("(pipeline)".into())],
            }
        }
        vec![Val::Unknown("(pipeline)".into())]
    }

    fn file_writes(&mut self, call: &Call, upstream: &[Element]) -> Result<(), Blocked> {
        let name = call.name.as_str();
        let recurse = call.has("recurse");
        let mut paths = call.values(&["path", "literalpath"], Some(0));
        if matches!(name, "remove-item" | "clear-content" | "clear-item") {
            paths.extend(call.positional.iter().skip(1).cloned());
        }
        let mut from_tree = false;
        if paths.is_empty() && !upstream.is_empty() {
            (paths, from_tree) = self.upstream_paths(upstream);
        }
        let removes = matches!(
            name,
            "remove-item" | "rename-item" | "move-item" | "remove-itemproperty"
        );
        for p in &paths {
            let globbed = p.text().is_some_and(|t| t.contains(['*', '?', '[']));
            // Remove-Item of a directory without -Recurse fails in a non-interactive
            // session, but judge it as if it went through.
            let usage = if removes && (recurse || globbed || from_tree || name == "remove-item") {
                Use::Tree
            } else if matches!(name, "add-content" | "new-itemproperty" | "set-itemproperty")
                || (name == "out-file" && call.has("append"))
            {
                Use::Write
            } else if matches!(name, "copy-item") {
                Use::Read
            } else {
                Use::Replace
            };
            if let (Val::Unknown(s), true) = (p, removes && (recurse || from_tree)) {
                return Err(blocked(format!(
                    "`{name}` deletes recursively a path only known at run time (`{s}`); write the path out"
                )));
            }
            self.path_use(p, usage)?;
        }
        for d in call.values(&["destination"], Some(1)) {
            if matches!(name, "copy-item" | "move-item") {
                self.path_use(&d, Use::Replace)?;
            }
        }
        Ok(())
    }

    /// Paths handed down a pipeline by `Get-ChildItem`/`Get-Item`, and whether
    /// everything below them comes down too.
    fn upstream_paths(&self, upstream: &[Element]) -> (Vec<Val>, bool) {
        for e in upstream.iter().rev() {
            let Element::Command(c) = e else { break };
            let Val::Lit(name) = eval(&c.name) else { break };
            let cmd = command_name(&name);
            match cmd.as_str() {
                "where-object" | "select-object" | "sort-object" => continue,
                "get-childitem" | "get-item" => {
                    let call = self.bind(&name, c);
                    let paths = call.values(&["path", "literalpath"], Some(0));
                    let paths = if paths.is_empty() {
                        vec![Val::Unknown("(current directory)".into())]
                    } else {
                        paths
                    };
                    return (paths, call.has("recurse") || cmd == "get-childitem");
                }
                _ => break,
            }
        }
        (vec![Val::Unknown("(pipeline input)".into())], true)
    }

    fn native_line(&mut self, line: &str) -> Result<(), Blocked> {
        let words = windows::split_command_line(line);
        let Some((program, rest)) = words.split_first() else {
            return Ok(());
        };
        let rest: Vec<Option<String>> = rest.iter().cloned().map(Some).collect();
        self.native(&command_name(program), &rest, false)
    }

    /// A program run from PowerShell (or `cmd`, or `Start-Process`).
    fn native(&mut self, name: &str, args: &[Option<String>], piped: bool) -> Result<(), Blocked> {
        for a in args.iter().flatten() {
            literal_checks(a)?;
        }
        match name {
            "powershell" | "pwsh" | "powershell_ise" => self.powershell_exe(args, piped),
            "cmd" => {
                let Some(pos) = args.iter().position(|a| {
                    a.as_deref()
                        .is_some_and(|t| matches!(t.to_lowercase().as_str(), "/c" | "/k" | "/r"))
                }) else {
                    return if piped {
                        Err(blocked("`cmd` runs commands piped into it"))
                    } else {
                        Ok(())
                    };
                };
                let rest: Option<Vec<String>> = args[pos + 1..].iter().cloned().collect();
                match rest {
                    Some(words) => self.cmd_text(&words.join(" ")),
                    None => Err(blocked("`cmd /c` runs a command line only known at run time")),
                }
            }
            _ => windows::native(name, args, piped),
        }
    }

    /// A `cmd.exe` command line: `&`, `&&`, `||`, `|`, `^` escapes, redirections.
    fn cmd_text(&mut self, text: &str) -> Result<(), Blocked> {
        if self.depth >= MAX_DEPTH {
            return Err(blocked("nests commands deeper than the guard follows"));
        }
        self.depth += 1;
        let result = (|| {
            for (command, piped) in windows::split_cmd(text) {
                let (words, redirects) = windows::cmd_words(&command);
                for r in redirects {
                    self.path_use(&Val::Lit(r), Use::Replace)?;
                }
                let Some((program, rest)) = words.split_first() else {
                    continue;
                };
                if program.contains('%') || program.contains('!') {
                    return Err(blocked(format!(
                        "`{program}` is a program name only known at run time; name the program literally"
                    )));
                }
                let rest: Vec<Option<String>> = rest
                    .iter()
                    .map(|w| if w.contains('%') { None } else { Some(w.clone()) })
                    .collect();
                // cmd's own commands, not PowerShell's aliases of the same names.
                let name = program.rsplit(['\\', '/']).next().unwrap_or(program).to_lowercase();
                let name = name.strip_suffix(".exe").unwrap_or(&name).to_owned();
                match name.as_str() {
                    "call" | "start" => {
                        let skip = rest
                            .iter()
                            .take_while(|w| w.as_deref().is_some_and(|t| t.starts_with('/') || t.starts_with('"')))
                            .count();
                        let inner: Vec<String> = rest[skip..]
                            .iter()
                            .map(|w| w.clone().unwrap_or_else(|| "%x%".into()))
                            .collect();
                        self.cmd_text(&inner.join(" "))?;
                    }
                    "del" | "erase" | "rd" | "rmdir" | "rm" => {
                        let tree = rest.iter().flatten().any(|w| w.eq_ignore_ascii_case("/s"));
                        for w in &rest {
                            match w {
                                Some(t) if t.starts_with('/') => {}
                                Some(t) => self.path_use(
                                    &Val::Lit(t.clone()),
                                    if tree || t.contains('*') {
                                        Use::Tree
                                    } else {
                                        Use::Replace
                                    },
                                )?,
                                None => {
                                    return Err(blocked("deletes a path only known at run time; write the path out"));
                                }
                            }
                        }
                    }
                    _ => self.native(&name, &rest, piped)?,
                }
            }
            Ok(())
        })();
        self.depth -= 1;
        result
    }

    /// `powershell.exe`/`pwsh` arguments: encoded commands in any spelling are refused;
    /// `-Command` text is judged as a script.
    fn powershell_exe(&mut self, args: &[Option<String>], piped: bool) -> Result<(), Blocked> {
        let mut i = 0;
        while i < args.len() {
            let Some(word) = &args[i] else {
                return Err(blocked("starts PowerShell with arguments only known at run time"));
            };
            let flag = word.strip_prefix(|c: char| lexer::is_dash(c) || c == '/').map(|f| {
                f.trim_start_matches(lexer::is_dash)
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .to_lowercase()
            });
            let Some(flag) = flag else {
                // A bare argument: the command text (Windows PowerShell) or a script.
                return self.command_text(&args[i..], piped);
            };
            if windows::is_encoded_flag(&flag) {
                return Err(blocked(
                    "runs encoded PowerShell (-EncodedCommand in any spelling); send the script itself",
                ));
            }
            if !flag.is_empty()
                && ("command".starts_with(flag.as_str())
                    || flag == "cwa"
                    || "commandwithargs".starts_with(flag.as_str()) && flag.len() > 7)
            {
                return self.command_text(&args[i + 1..], piped);
            }
            if !flag.is_empty() && "file".starts_with(flag.as_str()) {
                if let Some(Some(f)) = args.get(i + 1) {
                    self.not_fetched(&Val::Lit(f.clone()))?;
                    if f == "-" && piped {
                        return Err(blocked("runs a script piped into PowerShell"));
                    }
                }
                return Ok(());
            }
            let takes_value = [
                "executionpolicy",
                "windowstyle",
                "outputformat",
                "inputformat",
                "configurationname",
                "workingdirectory",
                "settingsfile",
                "psconsolefile",
                "version",
                "custompipename",
            ]
            .iter()
            .any(|v| !flag.is_empty() && v.starts_with(flag.as_str()) && flag != "e")
                || matches!(flag.as_str(), "ex" | "ep" | "w" | "wd" | "of" | "if" | "v");
            i += if takes_value && !word.contains(':') { 2 } else { 1 };
        }
        if piped {
            return Err(blocked("`powershell` runs commands piped into it"));
        }
        Ok(())
    }

    fn command_text(&mut self, words: &[Option<String>], piped: bool) -> Result<(), Blocked> {
        let text: Option<Vec<String>> = words.iter().cloned().collect();
        match text {
            None => Err(blocked("runs PowerShell text only known at run time")),
            Some(t) if t.first().is_some_and(|w| w == "-") => {
                if piped {
                    Err(blocked("runs PowerShell text piped into it (fetched or decoded code)"))
                } else {
                    Ok(())
                }
            }
            Some(t) => self.script(&t.join(" ")),
        }
    }
}

/// Checks any literal text in a script: raw disks, credential tools.
fn literal_checks(text: &str) -> Result<(), Blocked> {
    let lower = text.to_lowercase();
    if is_raw_device_path(text) {
        return Err(blocked(format!("`{text}` is a raw disk or volume device")));
    }
    for needle in [
        "sekurlsa::",
        "lsadump::",
        "mimikatz",
        "privilege::debug",
        "token::elevate",
    ] {
        if lower.contains(needle) {
            return Err(blocked("runs a credential-dumping tool"));
        }
    }
    if looks_like_path(text)
        && let Some(why) = refusal(&win_path(text), Use::Read)
    {
        return Err(blocked(format!("`{text}` {why}")));
    }
    if let Some(why) = windows::registry_refusal(text, Use::Read) {
        return Err(blocked(format!("`{text}` {why}")));
    }
    Ok(())
}

fn type_checks(t: &str) -> Result<(), Blocked> {
    if t.contains("passwordvault") || t.contains("protecteddata") || t.contains("credentialmanager") {
        return Err(blocked(format!("uses [{t}], which reads stored credentials")));
    }
    Ok(())
}
