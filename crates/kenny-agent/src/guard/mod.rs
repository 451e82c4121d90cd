//! The agent's own safety guard: a fixed deny list compiled into the binary and checked
//! before any tool runs. No server message can switch it off; whoever holds the server
//! still cannot wipe a disk, erase the logs of what they did, fetch-and-run code,
//! disable this agent, or read the PC's credential stores through it.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub reason: String,
}

impl Blocked {
    /// The message the caller sees.
    pub fn message(&self) -> String {
        format!("refused by agent safety policy: {}", self.reason)
    }
}

struct Rule {
    pattern: Regex,
    reason: &'static str,
}

fn rules(table: &[(&str, &'static str)]) -> Vec<Rule> {
    table
        .iter()
        .map(|(p, reason)| Rule {
            pattern: Regex::new(p).unwrap_or_else(|e| panic!("guard pattern {p:?}: {e}")),
            reason,
        })
        .collect()
}

/// Patterns over a command line after normalisation (lower case, quotes, escapes and
/// PowerShell backticks removed, whitespace collapsed, `\` as `/`).
static COMMAND_RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(&[
        // Destroying disks, partitions and boot records.
        (r"\bmkfs(\.\w+)?\b", "formats a filesystem"),
        (
            r"\b(wipefs|blkdiscard|sgdisk\s+(-z|--zap)|diskpart)\b",
            "wipes or repartitions a disk",
        ),
        (
            r"\bdd\b[^|;&]*\bof=/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk|mapper/)",
            "writes raw data onto a disk device",
        ),
        (
            r">\s*/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk)",
            "writes raw data onto a disk device",
        ),
        (r"\bshred\b[^|;&]*/dev/", "shreds a disk device"),
        (
            r"\b(clear-disk|initialize-disk|remove-partition|format-volume)\b",
            "erases or reformats a disk",
        ),
        (r"\bformat(\.com)?\s+[a-z]:", "formats a drive"),
        (r"\bcipher(\.exe)?\s+/w", "wipes free disk space"),
        (
            r"\bbcdedit(\.exe)?\b.*\s/(delete|deletevalue)\b",
            "removes boot configuration",
        ),
        (
            r"\bbootrec\b|\befibootmgr\b.*\s-b\s.*-b\b|\befibootmgr\b.*--delete-bootnum",
            "changes boot records",
        ),
        // Erasing recovery points and the logs of what was done.
        (
            r"\bvssadmin(\.exe)?\s+(delete\s+shadows|resize\s+shadowstorage)",
            "deletes volume shadow copies",
        ),
        (
            r"\bwmic(\.exe)?\b.*\bshadowcopy\b.*\bdelete\b",
            "deletes volume shadow copies",
        ),
        (r"\bwbadmin(\.exe)?\s+delete\b", "deletes backups"),
        (r"\bwevtutil(\.exe)?\s+(cl|clear-log)\b", "clears event logs"),
        (r"\b(clear-eventlog|remove-eventlog)\b", "clears event logs"),
        (
            r"\bjournalctl\b.*--(vacuum-\w+|rotate\b.*--vacuum)",
            "erases the system journal",
        ),
        (r"\brm\b.*\s/var/log(/|\s|$)", "deletes system logs"),
        // Code fetched or hidden and then run.
        (
            r"\bpowershell(\.exe)?\b.*\s-(e|ec|en|enc|enco|encod|encode|encoded|encodedc\w*)\s",
            "runs encoded PowerShell",
        ),
        (
            r"\bpwsh(\.exe)?\b.*\s-(e|ec|en|enc|encodedcommand)\s",
            "runs encoded PowerShell",
        ),
        (
            r"(downloadstring|downloadfile|invoke-webrequest|\biwr\b|invoke-restmethod|\birm\b|start-bitstransfer|net\.webclient)[^;]*(\|\s*(iex|invoke-expression)\b|\biex\b|invoke-expression)",
            "downloads code and runs it",
        ),
        (
            r"\b(iex|invoke-expression)\b[^;]*(downloadstring|invoke-webrequest|\biwr\b|invoke-restmethod|\birm\b|net\.webclient)",
            "downloads code and runs it",
        ),
        (
            r"\b(curl|wget|fetch)\b[^;]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b",
            "downloads a script and runs it",
        ),
        (
            r"\b(ba|z|da)?sh\s+<\(\s*(curl|wget)\b",
            "downloads a script and runs it",
        ),
        (
            r"\bfrombase64string\b.*\b(iex|invoke-expression)\b",
            "runs hidden (base64) code",
        ),
        (
            r"\bbase64\s+(-d|--decode)\b[^;]*\|\s*(ba|z|da)?sh\b",
            "runs hidden (base64) code",
        ),
        // Deleting everything.
        (
            r"\brm\b(\s+-{1,2}[\w-]+)*\s+-{1,2}[\w-]*[rR][\w-]*(\s+-{1,2}[\w-]+)*\s+(/\*?|/\s|~/?\*?|\$home/?)(\s|$)",
            "deletes the whole filesystem or home",
        ),
        (r"\brm\b.*--no-preserve-root", "deletes the whole filesystem"),
        (r"\b(rd|rmdir)\s+/s\b.*\s[a-z]:/?(\s|$)", "deletes a whole drive"),
        (r"\bdel\s+(/[a-z]\s+)*[a-z]:/(\*|\s|$)", "deletes a whole drive"),
        (
            r"\bremove-item\b.*\s[a-z]:/?\*?(\s|$).*-recurse|\bremove-item\b.*-recurse.*\s[a-z]:/?\*?(\s|$)",
            "deletes a whole drive",
        ),
        (
            r"\bchmod\s+(-r\s+)?0?00\s+/(\s|$)|\bchown\b.*-r\b.*\s/(\s|$)",
            "breaks permissions on the whole filesystem",
        ),
        // Fork bombs.
        (
            r"(\w+|:)\(\)\s*\{\s*(\w+|:)\s*\|\s*(\w+|:)\s*&\s*\}\s*;\s*(\w+|:)",
            "is a fork bomb",
        ),
        (r"%0\s*\|\s*%0", "is a fork bomb"),
        // Disabling this agent.
        (
            r"\b(kill|pkill|killall|taskkill|stop-process|stop-service|set-service|sc(\.exe)?\s+(stop|delete|config)|systemctl\s+(stop|disable|mask|kill)|service\s+kenny|launchctl\s+(unload|remove|bootout))\b.*kenny",
            "would stop or disable the kenny agent",
        ),
        (
            r"\brm\b.*kenny-agent|\b(remove-item|del)\b.*kenny-agent",
            "would remove the kenny agent",
        ),
        // Credential stores.
        (
            r"\b(reg(\.exe)?\s+(save|export)\s+hklm/(sam|security|system)\b)",
            "copies the Windows credential hives",
        ),
        (r"\b(mimikatz|sekurlsa|lsadump)\b", "dumps credentials"),
        (
            r"\b(procdump|comsvcs(\.dll)?)\b.*\blsass\b|\blsass\b.*\bminidump\b",
            "dumps credentials from LSASS",
        ),
        (
            r"\bvssadmin\b.*\bcreate\s+shadow\b.*\bsam\b",
            "copies the Windows credential hives",
        ),
    ])
});

/// Files that hold credentials; checked in commands and in every file tool's path.
static CREDENTIAL_PATHS: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(&[
        (
            r"/\.ssh/(id_[a-z0-9_]+|[^/\s]*_key)(\s|$|[^.\w])|/\.ssh/id_[a-z0-9_]+$",
            "reads SSH private keys",
        ),
        (
            r"/etc/(shadow|gshadow)(-|\s|$)|/etc/(security/)?opasswd",
            "reads system password hashes",
        ),
        (
            r"/login data(\s|$|-journal)|/(logins\.json|key[34]\.db|signons\.sqlite)(\s|$)",
            "reads a browser's saved passwords",
        ),
        (
            r"/config/(sam|security)(\s|$|\.)|/windows/repair/(sam|security)",
            "reads the Windows credential hives",
        ),
        (
            r"/\.(gnupg/private-keys|password-store)|/keyrings?/.*\.keyring(\s|$)|/microsoft/(credentials|protect)/",
            "reads a credential store",
        ),
    ])
});

/// Lower case, without quoting and escape characters that do not change what a shell
/// or PowerShell runs, `\` as `/`, whitespace collapsed.
pub fn normalize(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut last_space = true;
    for c in command.chars() {
        let c = match c {
            '"' | '\'' | '`' | '^' => continue,
            '\\' => '/',
            c if c.is_whitespace() => ' ',
            c => c.to_ascii_lowercase(),
        };
        if c == ' ' {
            if !last_space {
                out.push(' ');
            }
            last_space = true;
        } else {
            out.push(c);
            last_space = false;
        }
    }
    out.trim_end().to_owned()
}

/// A path with `\` as `/`, lower case, and `.` and `..` resolved lexically, so that
/// `~/.ssh/../.ssh/id_rsa` and `C:\Windows\System32\config\..\config\SAM` are seen
/// for what they are.
pub fn normalize_path(path: &str) -> String {
    let unified = path.replace('\\', "/").to_lowercase();
    let mut parts: Vec<&str> = Vec::new();
    for part in unified.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn first_match(rules: &[Rule], text: &str) -> Option<Blocked> {
    rules.iter().find(|r| r.pattern.is_match(text)).map(|r| Blocked {
        reason: format!("this {}", r.reason),
    })
}

/// Checks one call before it runs: the built-in rules, then the operator's.
pub fn check_all(tool: &str, args: &Map<String, Value>, operator: &OperatorRules) -> Result<(), Blocked> {
    check(tool, args)?;
    operator.check(tool, args)
}

/// What an operator rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Shell,
    PowerShell,
    /// Any command, shell or PowerShell.
    Command,
    Path,
    Any,
}

/// Rules an operator pushes in a `policy` frame. They only add refusals: nothing in a
/// policy can allow what the built-in rules refuse, because those are checked first.
#[derive(Debug, Default)]
pub struct OperatorRules {
    rules: Vec<(String, Scope, Regex, String)>,
}

impl OperatorRules {
    /// Compiles a policy; rules that do not compile or name an unknown scope are left
    /// out and reported, the rest apply.
    pub fn from_policy(policy: &kenny_proto::frame::Policy) -> (OperatorRules, Vec<String>) {
        let mut rules = Vec::new();
        let mut problems = Vec::new();
        for r in &policy.rules {
            let scope = match r.applies_to.as_str() {
                "shell" => Scope::Shell,
                "powershell" => Scope::PowerShell,
                "command" => Scope::Command,
                "path" => Scope::Path,
                "any" => Scope::Any,
                other => {
                    problems.push(format!("rule {}: unknown applies_to {other:?}", r.id));
                    continue;
                }
            };
            match regex::RegexBuilder::new(&r.pattern).size_limit(1 << 20).build() {
                Ok(re) => rules.push((r.id.clone(), scope, re, r.reason.clone())),
                Err(e) => problems.push(format!("rule {}: pattern does not compile: {e}", r.id)),
            }
        }
        (OperatorRules { rules }, problems)
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Operator patterns see the text as sent (operators write them against that).
    fn check(&self, tool: &str, args: &Map<String, Value>) -> Result<(), Blocked> {
        let text = |k: &str| args.get(k).and_then(Value::as_str);
        let (command, path) = match tool {
            "shell_exec" => (text("command").map(|c| (c, Scope::Shell)), None),
            "powershell_exec" => (text("script").map(|c| (c, Scope::PowerShell)), None),
            _ => (None, text("path")),
        };
        for (id, scope, re, reason) in &self.rules {
            let hit = match scope {
                Scope::Shell | Scope::PowerShell => command.is_some_and(|(c, s)| s == *scope && re.is_match(c)),
                Scope::Command => command.is_some_and(|(c, _)| re.is_match(c)),
                Scope::Path => path.is_some_and(|p| re.is_match(p)) || command.is_some_and(|(c, _)| re.is_match(c)),
                Scope::Any => args.values().filter_map(Value::as_str).any(|v| re.is_match(v)),
            };
            if hit {
                return Err(Blocked {
                    reason: format!("{reason} (operator rule {id})"),
                });
            }
        }
        Ok(())
    }
}

/// Checks one call against the built-in rules.
pub fn check(tool: &str, args: &Map<String, Value>) -> Result<(), Blocked> {
    let text = |k: &str| args.get(k).and_then(Value::as_str);
    match tool {
        "shell_exec" | "powershell_exec" => {
            let command = text("command").or(text("script")).unwrap_or("");
            let normal = normalize(command);
            if let Some(b) = first_match(&COMMAND_RULES, &normal).or_else(|| first_match(&CREDENTIAL_PATHS, &normal)) {
                return Err(b);
            }
            // Paths inside commands: resolve each word that looks like one.
            for word in normal.split([' ', ';', '|', '&', '<', '>', '(', ')', '=']) {
                if word.contains('/')
                    && let Some(b) = first_match(&CREDENTIAL_PATHS, &normalize_path(word))
                {
                    return Err(b);
                }
            }
            Ok(())
        }
        _ => match text("path") {
            Some(path) => first_match(&CREDENTIAL_PATHS, &normalize_path(path)).map_or(Ok(()), Err),
            None => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests;
