//! What a channel sends: one message per alert, recovery, test or digest, the same on
//! every channel (ntfy shows title and text, a webhook gets all of it as JSON, e-mail
//! has it as subject and body).

use serde::{Deserialize, Serialize};

use crate::store::AlertRow;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Message {
    /// alert, recovery, test or digest.
    pub event: String,
    pub title: String,
    pub text: String,
    /// 1 (least) to 5 (most urgent), as ntfy counts.
    pub priority: u8,
    pub agent_id: Option<String>,
    /// The section, `offline`, or `change:<section>`.
    pub key: Option<String>,
    pub status: Option<String>,
    pub reason: Option<String>,
    pub attention: Option<String>,
    pub at: String,
}

/// An alert opened (or got worse).
pub(crate) fn alert(a: &AlertRow, hostname: Option<&str>, worse: bool) -> Message {
    let pc = pc_name(&a.agent_id, hostname);
    let what = subject_of(&a.key);
    let mut text = format!("{pc}: {}", a.reason);
    if let Some(todo) = &a.attention {
        text.push_str(&format!("\nWhat to do: {todo}"));
    }
    text.push_str(&format!("\nSince {}.", a.opened_at));
    Message {
        event: "alert".into(),
        title: format!(
            "{} {}: {what}{}",
            a.status.to_uppercase(),
            a.agent_id,
            if worse { " (worse)" } else { "" }
        ),
        text,
        priority: if a.status == "crit" { 5 } else { 4 },
        agent_id: Some(a.agent_id.clone()),
        key: Some(a.key.clone()),
        status: Some(a.status.clone()),
        reason: Some(a.reason.clone()),
        attention: a.attention.clone(),
        at: a.updated_at.clone(),
    }
}

/// An alert cleared.
pub(crate) fn recovery(a: &AlertRow, hostname: Option<&str>) -> Message {
    let pc = pc_name(&a.agent_id, hostname);
    let what = subject_of(&a.key);
    let closed = a.closed_at.clone().unwrap_or_default();
    Message {
        event: "recovery".into(),
        title: format!("OK {}: {what}", a.agent_id),
        text: format!(
            "{pc}: {what} is fine again (was {}: {}).\nOpen from {} to {closed}.",
            a.status, a.reason, a.opened_at
        ),
        priority: 3,
        agent_id: Some(a.agent_id.clone()),
        key: Some(a.key.clone()),
        status: Some("ok".into()),
        reason: None,
        attention: None,
        at: closed,
    }
}

pub(crate) fn test(channel: &str, at: &str) -> Message {
    Message {
        event: "test".into(),
        title: "kenny test message".into(),
        text: format!(
            "This is a test from kenny to the channel \"{channel}\". If you read this, alerts will reach you here."
        ),
        priority: 3,
        agent_id: None,
        key: None,
        status: None,
        reason: None,
        attention: None,
        at: at.into(),
    }
}

/// The PC as a message names it; its host name is the PC's own words, so one short line.
fn pc_name(agent_id: &str, hostname: Option<&str>) -> String {
    match hostname.map(|h| crate::health::clean(h, 64)) {
        Some(h) if h != agent_id && !h.is_empty() => format!("{agent_id} ({h})"),
        _ => agent_id.to_owned(),
    }
}

fn subject_of(key: &str) -> String {
    match key {
        "offline" => "offline".into(),
        k => match k.strip_prefix("change:") {
            Some(section) => format!("change in {section}"),
            None => k.to_owned(),
        },
    }
}
