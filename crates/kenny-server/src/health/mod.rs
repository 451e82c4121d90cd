//! Fleet health, judged by the server: every section of a PC's latest snapshot goes
//! through its rule ([`rules`]) with the operator's [`Thresholds`], giving a verdict
//! `{status, summary, reason, attention}`; a PC is as healthy as its worst verdict.
//! [`HealthBook`] keeps every PC's assessment in memory and in the store, redoes it
//! when a snapshot arrives and when the thresholds change.

mod book;
mod rules;
mod thresholds;

pub(crate) use book::{FleetHealth, HealthBook};
pub(crate) use thresholds::Thresholds;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use kenny_proto::catalog::Os;
pub(crate) use rules::clean;
use rules::{Applies, Context, Judgement};

/// How a section, a PC or a fleet is doing, from best to worst. `Unknown` (could not
/// be judged: the collector failed, the agent cannot tell) ranks between ok and warn:
/// not assumed healthy, but not an alarm either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Ok,
    Unknown,
    Warn,
    Crit,
}

impl Status {
    pub(crate) const ALL: [Status; 4] = [Status::Ok, Status::Unknown, Status::Warn, Status::Crit];

    pub(crate) fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unknown => "unknown",
            Status::Warn => "warn",
            Status::Crit => "crit",
        }
    }
}

/// The server's verdict on one section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Verdict {
    pub section: String,
    pub status: Status,
    /// What the section shows, in the agent's words (cleaned, one line).
    pub summary: String,
    /// Why it is not ok, in the server's words; `null` when it is.
    pub reason: Option<String>,
    /// What to do about it; `null` when nothing needs doing.
    pub attention: Option<String>,
}

/// A PC's health as of one snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Assessment {
    /// The worst verdict.
    pub status: Status,
    /// `"<section>: <reason>"` for every section not ok, worst first.
    pub reasons: Vec<String>,
    /// Every judged section, worst first, then by name.
    pub sections: Vec<Verdict>,
    /// Sections in the snapshot that do not concern this PC's OS.
    pub skipped: Vec<String>,
    pub collected_at: String,
    /// When the server judged it (a snapshot is judged again when thresholds change).
    pub assessed_at: String,
}

impl Assessment {
    pub(crate) fn top_reason(&self) -> Option<&str> {
        self.reasons.first().map(String::as_str)
    }
}

/// Whether the server judges `section` by a rule of its own (only those alert).
pub(crate) fn has_rule(section: &str) -> bool {
    rules::find(section).is_some()
}

/// Longest reason kept: every list in one is cut well before this anyway.
const REASON_MAX: usize = 300;

/// Agents say at most this much about one section; the rest is cut.
const SUMMARY_MAX: usize = 200;

/// Judges a snapshot taken on a PC running `os` (`None`: not known, so every section
/// is judged).
pub(crate) fn assess(
    snapshot: &Map<String, Value>,
    os: Option<&str>,
    thresholds: &Thresholds,
    collected_at: &str,
    assessed_at: &str,
) -> Assessment {
    let os = os.and_then(os_of);
    let ctx = Context {
        thresholds,
        collected_at: crate::clock::parse(collected_at),
        os,
    };
    let mut sections = Vec::new();
    let mut skipped = Vec::new();
    for (name, value) in snapshot {
        let name = clean(name, 40);
        let rule = rules::find(&name);
        if let (Some(rule), Some(os)) = (rule, os)
            && let Applies::Only(only) = rule.applies
            && only != os
        {
            skipped.push(name);
            continue;
        }
        let Some(section) = value.as_object() else {
            sections.push(verdict(
                name,
                String::new(),
                Judgement {
                    status: Status::Unknown,
                    reason: Some("the agent sent something that is not a section".into()),
                    attention: None,
                },
            ));
            continue;
        };
        let summary = clean(
            section.get("summary").and_then(Value::as_str).unwrap_or(""),
            SUMMARY_MAX,
        );
        let judgement = if let Some(failure) = summary.strip_prefix("collector failed:") {
            Judgement {
                status: Status::Unknown,
                reason: Some(format!("the agent could not collect it:{failure}")),
                attention: Some("see the agent's log on that PC".into()),
            }
        } else if let Some(rule) = rule {
            (rule.judge)(section, &ctx)
        } else {
            agents_word(section, &summary)
        };
        sections.push(verdict(name, summary, judgement));
    }
    sections.sort_by(|a, b| b.status.cmp(&a.status).then_with(|| a.section.cmp(&b.section)));
    let status = sections.iter().map(|v| v.status).max().unwrap_or(Status::Unknown);
    let reasons = sections
        .iter()
        .filter(|v| v.status != Status::Ok)
        .map(|v| format!("{}: {}", v.section, v.reason.as_deref().unwrap_or(v.status.as_str())))
        .collect();
    Assessment {
        status,
        reasons,
        sections,
        skipped,
        collected_at: collected_at.to_owned(),
        assessed_at: assessed_at.to_owned(),
    }
}

fn verdict(section: String, summary: String, j: Judgement) -> Verdict {
    Verdict {
        section,
        status: j.status,
        summary,
        reason: j.reason.map(|r| clean(&r, REASON_MAX)),
        attention: j.attention,
    }
}

/// A section no rule knows (a newer agent's): its own status, its summary as the reason.
fn agents_word(section: &Map<String, Value>, summary: &str) -> Judgement {
    let status = section
        .get("status")
        .and_then(Value::as_str)
        .and_then(Status::parse)
        .unwrap_or(Status::Unknown);
    Judgement {
        status,
        reason: (status != Status::Ok).then(|| {
            if summary.is_empty() {
                format!("the agent says {}", status.as_str())
            } else {
                format!("the agent says: {summary}")
            }
        }),
        attention: None,
    }
}

fn os_of(name: &str) -> Option<Os> {
    [Os::Linux, Os::Windows, Os::Macos]
        .into_iter()
        .find(|os| name.eq_ignore_ascii_case(os.as_str()))
}

#[cfg(test)]
mod tests;
