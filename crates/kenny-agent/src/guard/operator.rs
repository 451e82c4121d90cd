//! Rules an operator pushes in a `policy` frame: regular expressions that only add refusals.

use regex::Regex;
use serde_json::{Map, Value};

use super::Blocked;

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
    pub(super) fn check(&self, tool: &str, args: &Map<String, Value>) -> Result<(), Blocked> {
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
