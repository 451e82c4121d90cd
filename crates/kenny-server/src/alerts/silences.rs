//! Silencing: an operator quiets one PC's alerts (one section, or all) for a while,
//! saying why. Alerts are still recorded while silenced; nothing is sent. Shared by the
//! MCP tools and the HTTP API, so both check the same things.

use serde_json::{Value, json};

use crate::forward::CallFailure;
use crate::health::clean;
use crate::principal::{Principal, Role};
use crate::state::Fleet;
use crate::store::SilenceRow;
use kenny_proto::error::ErrorCode;

/// The longest silence.
const MAX_DAYS: i64 = 90;

pub(crate) struct SilenceRequest<'a> {
    pub agent_id: &'a str,
    /// A section (`disk`, `offline`, ...); `None` silences every alert of the PC.
    pub section: Option<&'a str>,
    /// How long: `30m`, `2h`, `7d` (up to 90 days).
    pub duration: &'a str,
    pub reason: &'a str,
}

pub(crate) async fn set(fleet: &Fleet, who: &Principal, req: SilenceRequest<'_>) -> Result<SilenceRow, CallFailure> {
    may_change(who)?;
    fleet.reachable(who, req.agent_id).await?;
    let section = match req.section {
        None | Some("*") => "*".to_owned(),
        Some(s) if is_section_name(s) => s.to_owned(),
        Some(s) => {
            return Err(bad(format!(
                "section `{}` is not a section name (letters, digits, _ and :, up to 64), or * for all",
                clean(s, 64)
            )));
        }
    };
    let span = duration(req.duration)?;
    let reason = clean(req.reason, 500);
    if reason.is_empty() {
        return Err(bad("reason is required: say why, so the next person knows".into()));
    }
    let now = fleet.clock.now_utc();
    let mut row = SilenceRow {
        id: 0,
        agent_id: req.agent_id.to_owned(),
        section,
        until: crate::clock::format(now + span),
        reason,
        created_by: who.username.clone(),
        created_at: crate::clock::format(now),
    };
    let stored = row.clone();
    row.id = fleet
        .store
        .blocking(move |s| s.insert_silence(&stored))
        .await
        .map_err(internal)?;
    tracing::info!(by = %who.username, agent = %row.agent_id, section = %row.section, until = %row.until, "alerts silenced");
    Ok(row)
}

/// Silences in force, of one PC or of every PC the caller may reach.
pub(crate) async fn list(
    fleet: &Fleet,
    who: &Principal,
    agent_id: Option<&str>,
) -> Result<Vec<SilenceRow>, CallFailure> {
    if let Some(id) = agent_id {
        fleet.reachable(who, id).await?;
    }
    let (id, now) = (agent_id.map(str::to_owned), fleet.clock.now());
    let rows = fleet
        .store
        .blocking(move |s| s.active_silences(id.as_deref(), &now))
        .await
        .map_err(internal)?;
    Ok(rows.into_iter().filter(|r| who.may_reach(&r.agent_id)).collect())
}

/// Ends one PC's silences now: those of `section`, or all of them.
pub(crate) async fn clear(
    fleet: &Fleet,
    who: &Principal,
    agent_id: &str,
    section: Option<&str>,
) -> Result<Vec<SilenceRow>, CallFailure> {
    may_change(who)?;
    let active = list(fleet, who, Some(agent_id)).await?;
    let ended: Vec<SilenceRow> = active
        .into_iter()
        .filter(|s| section.is_none_or(|want| s.section == want))
        .collect();
    if ended.is_empty() {
        return Err(CallFailure::refusal(
            ErrorCode::NotFound,
            format!(
                "{agent_id} has no silence in force{}; alert_silence_list shows them",
                section.map(|s| format!(" for `{}`", clean(s, 64))).unwrap_or_default()
            ),
        ));
    }
    let (ids, now) = (ended.iter().map(|s| s.id).collect::<Vec<_>>(), fleet.clock.now());
    fleet
        .store
        .blocking(move |s| ids.iter().try_for_each(|id| s.end_silence(*id, &now)))
        .await
        .map_err(internal)?;
    tracing::info!(by = %who.username, agent = %agent_id, count = ended.len(), "silences ended");
    Ok(ended)
}

pub(crate) fn shown(s: &SilenceRow) -> Value {
    json!({
        "id": s.id,
        "agent_id": s.agent_id,
        "section": s.section,
        "until": s.until,
        "reason": s.reason,
        "created_by": s.created_by,
        "created_at": s.created_at,
    })
}

fn may_change(who: &Principal) -> Result<(), CallFailure> {
    if who.role == Role::User {
        return Err(CallFailure::refusal(
            ErrorCode::Forbidden,
            format!(
                "{} is a user; silencing alerts needs an operator or a superuser",
                who.username
            ),
        ));
    }
    Ok(())
}

fn duration(text: &str) -> Result<time::Duration, CallFailure> {
    let now = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(MAX_DAYS * 2);
    let start = crate::clock::since(text, now)
        .ok()
        .filter(|_| crate::clock::parse(text).is_none())
        .ok_or_else(|| {
            bad(format!(
                "duration `{}` is not a length of time like 30m, 2h or 7d",
                clean(text, 40)
            ))
        })?;
    let span = now - start;
    if span <= time::Duration::ZERO || span > time::Duration::days(MAX_DAYS) {
        return Err(bad(format!("duration must be more than 0 and at most {MAX_DAYS}d")));
    }
    Ok(span)
}

fn is_section_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn bad(message: String) -> CallFailure {
    CallFailure::refusal(ErrorCode::BadArgs, message)
}

fn internal(e: crate::store::StoreError) -> CallFailure {
    CallFailure::new(
        ErrorCode::Internal,
        format!("cannot read or store silences: {e}; see the server log"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_lengths_of_time_within_bounds() {
        assert_eq!(duration("2h").unwrap(), time::Duration::hours(2));
        assert_eq!(duration("90d").unwrap(), time::Duration::days(90));
        for bad in ["91d", "0m", "soon", "2026-01-01T00:00:00Z", "-1h"] {
            assert_eq!(duration(bad).unwrap_err().code, "bad_args", "{bad}");
        }
        assert!(is_section_name("disk") && is_section_name("change:local_accounts"));
        assert!(!is_section_name("disk; drop") && !is_section_name(""));
    }
}
