//! Operator guard rules: validated here, stored, and pushed to every agent as a
//! `policy` frame when they change and when an agent connects. They only add
//! refusals on the agent; its built-in guard is checked first and cannot be relaxed.

use std::sync::{Arc, RwLock};

use kenny_proto::frame::{Frame, Policy, PolicyRule};

use crate::registry::Registry;
use crate::store::StoredPolicy;

/// What a rule may look at; the agent knows the same names.
pub(crate) const SCOPES: &[&str] = &["shell", "powershell", "command", "path", "any"];
pub(crate) const MAX_RULES: usize = 200;
const MAX_ID: usize = 64;
const MAX_PATTERN: usize = 1024;
const MAX_REASON: usize = 500;
/// The agent compiles with this size limit too, so a pattern accepted here compiles there.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The policy in force, shared by the API (which changes it) and the tunnel (which
/// sends it to agents as they connect).
#[derive(Default)]
pub struct PolicyBook {
    current: RwLock<Arc<Current>>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Current {
    pub policy: Policy,
    pub updated_by: Option<String>,
    pub updated_at: Option<String>,
}

impl PolicyBook {
    /// Loads the saved policy; a stored list that no longer validates is an error
    /// rather than silently dropped, since it is a safety setting.
    pub fn load(stored: Option<StoredPolicy>) -> anyhow::Result<PolicyBook> {
        let book = PolicyBook::default();
        if let Some(stored) = stored {
            let rules: Vec<PolicyRule> = serde_json::from_str(&stored.rules_json).map_err(|e| {
                anyhow::anyhow!("the stored operator policy is unreadable ({e}); fix it with PUT /api/policy")
            })?;
            let policy = validate(rules).map_err(|e| anyhow::anyhow!("the stored operator policy is invalid: {e}"))?;
            book.set(Current {
                policy,
                updated_by: Some(stored.updated_by),
                updated_at: Some(stored.updated_at),
            });
        }
        Ok(book)
    }

    pub fn current(&self) -> Arc<Current> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set(&self, current: Current) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(current);
    }
}

/// Sends the policy to every connected agent: how many it was queued for, and the
/// agents whose outbox was full (they keep their old rules until they reconnect).
pub(crate) fn push_to_all(registry: &Registry, policy: &Policy) -> (usize, Vec<String>) {
    let frame = Frame::Policy(policy.clone());
    let mut pushed = 0;
    let mut missed = Vec::new();
    for (agent_id, link) in registry.snapshot() {
        if link.try_send(&frame) {
            pushed += 1;
        } else {
            missed.push(agent_id.to_string());
        }
    }
    missed.sort();
    (pushed, missed)
}

/// Checks every rule and reports all problems at once, so an operator fixes a list in
/// one go. Nothing of an invalid list is applied.
pub(crate) fn validate(rules: Vec<PolicyRule>) -> Result<Policy, String> {
    if rules.len() > MAX_RULES {
        return Err(format!("{} rules; at most {MAX_RULES} are allowed", rules.len()));
    }
    let mut problems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, rule) in rules.iter().enumerate() {
        let name = if rule.id.is_empty() {
            format!("rule #{}", i + 1)
        } else {
            format!("rule {:?}", rule.id)
        };
        if rule.id.is_empty()
            || rule.id.len() > MAX_ID
            || !rule.id.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            problems.push(format!(
                "{name}: id must be 1-{MAX_ID} characters of letters, digits, _ - ."
            ));
        } else if !seen.insert(rule.id.as_str()) {
            problems.push(format!("{name}: id is used twice"));
        }
        if !SCOPES.contains(&rule.applies_to.as_str()) {
            problems.push(format!(
                "{name}: applies_to {:?} is unknown; use one of {}",
                rule.applies_to,
                SCOPES.join(", ")
            ));
        }
        if rule.pattern.is_empty() || rule.pattern.len() > MAX_PATTERN {
            problems.push(format!("{name}: pattern must be 1-{MAX_PATTERN} bytes"));
        } else if let Err(e) = regex::RegexBuilder::new(&rule.pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
        {
            problems.push(format!("{name}: pattern is not a valid regular expression: {e}"));
        }
        if rule.reason.trim().is_empty() || rule.reason.len() > MAX_REASON {
            problems.push(format!(
                "{name}: reason must be 1-{MAX_REASON} bytes; it is what the caller is told"
            ));
        }
    }
    if problems.is_empty() {
        Ok(Policy { rules })
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, applies_to: &str, pattern: &str) -> PolicyRule {
        PolicyRule {
            id: id.into(),
            applies_to: applies_to.into(),
            pattern: pattern.into(),
            reason: "operator: no".into(),
        }
    }

    #[test]
    fn accepts_good_rules() {
        let p = validate(vec![rule("a", "shell", r"(?i)\bchoco\b"), rule("b", "path", "secret")]).unwrap();
        assert_eq!(p.rules.len(), 2);
        assert_eq!(validate(vec![]).unwrap().rules.len(), 0);
    }

    #[test]
    fn reports_every_problem_at_once() {
        let err = validate(vec![
            rule("", "shell", "x"),
            rule("dup", "bogus", "x"),
            rule("dup", "shell", "(unclosed"),
        ])
        .unwrap_err();
        assert!(err.contains("rule #1: id must be"), "{err}");
        assert!(err.contains("applies_to \"bogus\" is unknown"), "{err}");
        assert!(err.contains("id is used twice"), "{err}");
        assert!(err.contains("not a valid regular expression"), "{err}");
    }

    #[test]
    fn refuses_oversized_lists_and_patterns() {
        let many: Vec<_> = (0..=MAX_RULES).map(|i| rule(&format!("r{i}"), "any", "x")).collect();
        assert!(validate(many).unwrap_err().contains("at most"));
        let huge = rule("big", "any", &"a".repeat(MAX_PATTERN + 1));
        assert!(validate(vec![huge]).unwrap_err().contains("1-1024 bytes"));
    }

    #[test]
    fn a_stored_invalid_policy_is_an_error_not_silence() {
        let stored = StoredPolicy {
            rules_json: r#"[{"id":"a","applies_to":"nope","pattern":"x","reason":"r"}]"#.into(),
            updated_by: "admin".into(),
            updated_at: "now".into(),
        };
        assert!(PolicyBook::load(Some(stored)).is_err());
        assert!(PolicyBook::load(None).unwrap().current().policy.rules.is_empty());
    }
}
