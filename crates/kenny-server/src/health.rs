//! Health at a glance from a telemetry snapshot: the worst section and what it says.
//!
//! A snapshot is `{section: {status: ok|warn|crit, summary, ...}}`; anything else in it
//! (an unknown status, a section that is not an object) counts as `unknown` rather than
//! being guessed healthy.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Ok,
    Unknown,
    Warn,
    Crit,
}

impl Status {
    pub(crate) fn parse(s: &str) -> Status {
        match s {
            "ok" => Status::Ok,
            "warn" => Status::Warn,
            "crit" => Status::Crit,
            _ => Status::Unknown,
        }
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Health {
    /// The worst status of any section.
    pub status: Status,
    /// The section that has it (the first such by name); `None` when all are ok.
    pub section: Option<String>,
    /// That section's summary, or a line saying everything is fine.
    pub summary: String,
    /// How many sections are not ok.
    pub problems: usize,
    pub sections: usize,
}

/// One section's status and summary.
pub(crate) fn section(value: &Value) -> (Status, String) {
    let verdict = kenny_proto::results::SectionVerdict::of(value);
    let status = verdict.status.as_deref().map_or(Status::Unknown, Status::parse);
    (status, verdict.summary)
}

/// The health of a snapshot; `None` when it holds no sections.
pub(crate) fn of_snapshot(snapshot: &Value) -> Option<Health> {
    let sections = snapshot.as_object()?;
    if sections.is_empty() {
        return None;
    }
    let mut worst: Option<(Status, &str, String)> = None;
    let mut problems = 0;
    for (name, value) in sections {
        let (status, summary) = section(value);
        if status != Status::Ok {
            problems += 1;
        }
        if worst.as_ref().is_none_or(|(w, _, _)| status > *w) {
            worst = Some((status, name, summary));
        }
    }
    let (status, name, summary) = worst?;
    Some(if status == Status::Ok {
        Health {
            status,
            section: None,
            summary: format!("all {} sections ok", sections.len()),
            problems,
            sections: sections.len(),
        }
    } else {
        Health {
            status,
            section: Some(name.to_owned()),
            summary: if summary.is_empty() {
                format!("{name}: {}", status.as_str())
            } else {
                format!("{name}: {summary}")
            },
            problems,
            sections: sections.len(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(snapshot: Value, expected: Option<(Status, Option<&str>, &str, usize)>) {
        let got = of_snapshot(&snapshot).map(|h| (h.status, h.section, h.summary, h.problems));
        let expected = expected.map(|(s, n, m, p)| (s, n.map(str::to_owned), m.to_owned(), p));
        assert_eq!(got, expected, "{snapshot}");
    }

    #[test]
    fn the_worst_section_speaks_for_the_host() {
        check(
            json!({"disk": {"status": "ok", "summary": "fine"}, "memory": {"status": "ok"}}),
            Some((Status::Ok, None, "all 2 sections ok", 0)),
        );
        check(
            json!({
                "disk": {"status": "warn", "summary": "/ is 91% full"},
                "cpu": {"status": "crit", "summary": "load 40"},
                "memory": {"status": "crit", "summary": "swap full"},
            }),
            Some((Status::Crit, Some("cpu"), "cpu: load 40", 3)),
        );
        // Not a known status: not assumed healthy, but below a real warning.
        check(
            json!({"os": {"status": "n/a"}, "disk": {"status": "ok"}}),
            Some((Status::Unknown, Some("os"), "os: unknown", 1)),
        );
        check(
            json!({"os": "garbage", "disk": {"status": "warn", "summary": "low"}}),
            Some((Status::Warn, Some("disk"), "disk: low", 2)),
        );
        check(json!({}), None);
        check(json!([1, 2]), None);
    }
}
