//! Keeping every PC's filter in force without anyone asking: once a second the
//! enforcer looks at each configured PC that is online and pushes when what it should
//! hold differs from what was applied (a schedule edge, a changed configuration or
//! list) or when it has just come online; hourly, and when it comes online, it asks
//! the PC what its hosts file holds and puts back a block that was edited away. Each
//! push is audited under the server's principal, naming the rule.

use std::time::Duration;

use kenny_proto::AgentId;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::effective::{Desired, Phase};
use super::{PcFilter, Pushed, WebFilter};
use crate::principal::Principal;

const TICK: Duration = Duration::from_secs(1);
/// How often an online PC's hosts file is checked for drift.
const CHECK_EVERY: time::Duration = time::Duration::hours(1);
/// How often a PC that records activity is asked for it (each report covers a day).
const ACTIVITY_EVERY: time::Duration = time::Duration::minutes(30);
/// How often list sources are looked at (each is fetched on its own schedule).
const SOURCES_TICK: Duration = Duration::from_secs(30);
/// The longest wait before pushing again after a failure.
const MAX_BACKOFF_SECS: i64 = 30 * 60;

/// What the enforcer will do for one PC this tick.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Act {
    Push(String),
    Check,
    /// Collect the PC's `web_activity` (its filter records activity).
    Activity,
}

pub(super) async fn run(filter: WebFilter, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        for (agent, act) in filter.due() {
            let filter = filter.clone();
            tokio::spawn(async move { filter.act(agent, act).await });
        }
    }
}

/// Fetches list sources when due, and drops web activity older than it is kept.
pub(super) async fn refresh_sources(filter: WebFilter, leader: crate::leader::Leader, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(SOURCES_TICK);
    let mut pruned_at: Option<OffsetDateTime> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        if !leader.is_leading() {
            continue;
        }
        let now = filter.inner.clock.now_utc();
        if pruned_at.is_none_or(|at| at + time::Duration::hours(1) <= now) {
            pruned_at = Some(now);
            filter.prune_activity(now).await;
        }
        let sources = match filter.sources() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot read the web filter list sources: {e}");
                continue;
            }
        };
        for source in sources {
            let due = source
                .checked_at
                .as_deref()
                .and_then(crate::clock::parse)
                .is_none_or(|at| at + time::Duration::minutes(source.refresh_minutes) <= now);
            if due {
                filter.refresh_source(&source).await;
            }
        }
    }
}

/// The rule behind a push at a phase change: which windows opened or closed.
fn edge_rule(before: &Phase, after: &Phase) -> String {
    let opened: Vec<&str> = after
        .open_windows
        .iter()
        .filter(|w| !before.open_windows.contains(w))
        .map(String::as_str)
        .collect();
    let closed: Vec<&str> = before
        .open_windows
        .iter()
        .filter(|w| !after.open_windows.contains(w))
        .map(String::as_str)
        .collect();
    let mut parts = Vec::new();
    if !opened.is_empty() {
        parts.push(format!("{} started", opened.join(", ")));
    }
    if !closed.is_empty() {
        parts.push(format!("{} ended", closed.join(", ")));
    }
    format!("web filter schedule: {}", parts.join("; "))
}

impl WebFilter {
    /// Asks the PC for its web activity, as its filter's configuration says to.
    async fn collect_activity(&self, agent: &AgentId) -> Result<(), crate::forward::CallFailure> {
        let who = Principal::server("web filter: recording web activity");
        let mut args = serde_json::Map::new();
        args.insert("sections".into(), serde_json::json!(["web_activity"]));
        let result = self
            .inner
            .forwarder
            .forward(&who, agent, "telemetry_collect", args)
            .await?;
        if let Some(section) = result.get("snapshot").and_then(|s| s.get("web_activity")) {
            self.take_activity(agent.as_str(), section);
        }
        Ok(())
    }

    /// Every PC the enforcer acts for this tick, and what it does.
    fn due(&self) -> Vec<(AgentId, Act)> {
        let (now, t) = self.now();
        let agents: Vec<String> = self.pcs().keys().cloned().collect();
        let mut acts = Vec::new();
        for agent in agents {
            let Ok(id) = AgentId::parse(&agent) else { continue };
            let conn = self.inner.registry.get(&agent).map(|l| l.conn_id);
            let Some((phase, desired)) = self.desired(&agent, t) else {
                continue;
            };
            let busy = self.push_lock(&agent).try_lock().is_err();
            let mut pcs = self.pcs();
            let Some(pc) = pcs.get_mut(&agent) else { continue };
            if let Some(act) = decide(pc, conn, &phase, &desired, now, busy) {
                acts.push((id, act));
            }
        }
        acts
    }

    async fn act(&self, agent: AgentId, act: Act) {
        let outcome = match &act {
            Act::Push(rule) => self
                .push(&Principal::server(rule.clone()), &agent, rule)
                .await
                .map(|p| {
                    if let Pushed::Applied { count, .. } = p {
                        tracing::info!(agent = %agent, names = count, rule = %rule, "web filter pushed");
                    } else {
                        tracing::info!(agent = %agent, rule = %rule, "web filter cleared");
                    }
                }),
            Act::Check => self.check(&Principal::server("web filter drift check"), &agent).await,
            Act::Activity => self.collect_activity(&agent).await,
        };
        let now = self.inner.clock.now_utc();
        let mut pcs = self.pcs();
        let Some(pc) = pcs.get_mut(agent.as_str()) else { return };
        match outcome {
            Ok(()) => {
                pc.retries = 0;
                pc.retry_at = None;
            }
            Err(f) => {
                pc.retries = pc.retries.saturating_add(1);
                let wait = (30i64 << pc.retries.min(10)).min(MAX_BACKOFF_SECS);
                pc.retry_at = Some(now + time::Duration::seconds(wait));
                tracing::warn!(agent = %agent, "web filter {act:?} failed, trying again in {wait} s: {}: {}", f.code, f.message);
            }
        }
    }
}

/// The enforcer's decision for one PC; it records what it saw.
fn decide(
    pc: &mut PcFilter,
    conn: Option<u64>,
    phase: &Phase,
    desired: &Desired,
    now: OffsetDateTime,
    busy: bool,
) -> Option<Act> {
    let Some(conn) = conn else {
        pc.seen_conn = None;
        return None;
    };
    if busy || pc.retry_at.is_some_and(|at| at > now) {
        return None;
    }
    let came_online = pc.seen_conn != Some(conn);
    let edge = pc
        .seen_phase
        .as_ref()
        .filter(|seen| *seen != phase)
        .map(|seen| edge_rule(seen, phase));
    pc.seen_conn = Some(conn);
    pc.seen_phase = Some(phase.clone());
    let s = &pc.state;
    let differs = desired.differs_from(s.applied_hash.as_deref(), s.applied_doh);
    if let Desired::OverCap { count, cap } = desired
        && s.problem.is_none()
    {
        return Some(Act::Push(format!(
            "web filter: the list grew to {count} names, over the cap of {cap}"
        )));
    }
    if differs {
        let rule = edge.unwrap_or_else(|| {
            if came_online {
                "web filter: the PC came online".to_owned()
            } else {
                format!(
                    "web filter: keeping the configuration in force (changed by {})",
                    pc.updated_by
                )
            }
        });
        return Some(Act::Push(rule));
    }
    if super::drifted(s) && !came_online {
        return Some(Act::Push(
            "web filter: the PC's hosts file was changed; putting kenny's block back".to_owned(),
        ));
    }
    let check_due = s.applied_at.is_some()
        && (came_online
            || s.observed_at
                .as_deref()
                .and_then(crate::clock::parse)
                .is_none_or(|at| at + CHECK_EVERY <= now));
    if check_due {
        return Some(Act::Check);
    }
    let activity_due = pc.config.record_activity && pc.activity_at.is_none_or(|at| at + ACTIVITY_EVERY <= now);
    if activity_due {
        // Counted from the attempt, so a PC that cannot answer is not asked every second.
        pc.activity_at = Some(now);
        return Some(Act::Activity);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn phase(windows: &[&str]) -> Phase {
        Phase {
            enabled: true,
            categories: BTreeSet::new(),
            open_windows: windows.iter().map(|w| w.to_string()).collect(),
        }
    }

    fn apply(hash: &str) -> Desired {
        Desired::Apply {
            domains: std::sync::Arc::new(vec!["a.example".into()]),
            hash: hash.into(),
            doh_lockdown: false,
        }
    }

    fn now() -> OffsetDateTime {
        crate::clock::parse("2026-12-01T12:00:00Z").unwrap()
    }

    #[test]
    fn an_edge_pushes_naming_the_window_and_then_rests() {
        let mut pc = PcFilter::default();
        pc.state.applied_hash = Some("old".into());
        pc.state.applied_at = Some("2026-12-01T11:00:00Z".into());
        pc.state.observed_at = Some("2026-12-01T11:59:00Z".into());
        pc.state.observed_hash = Some("old".into());
        pc.state.observed_active = Some(true);
        assert_eq!(
            decide(&mut pc, Some(1), &phase(&[]), &apply("old"), now(), false),
            Some(Act::Check)
        );
        pc.state.observed_at = Some("2026-12-01T12:00:00Z".into());
        assert_eq!(decide(&mut pc, Some(1), &phase(&[]), &apply("old"), now(), false), None);
        let act = decide(
            &mut pc,
            Some(1),
            &phase(&["school nights"]),
            &apply("new"),
            now(),
            false,
        );
        assert_eq!(
            act,
            Some(Act::Push("web filter schedule: school nights started".into()))
        );
        pc.state.applied_hash = Some("new".into());
        pc.state.observed_hash = Some("new".into());
        assert_eq!(
            decide(
                &mut pc,
                Some(1),
                &phase(&["school nights"]),
                &apply("new"),
                now(),
                false
            ),
            None
        );
    }

    #[test]
    fn offline_busy_and_backing_off_pcs_are_left_alone() {
        let mut pc = PcFilter::default();
        assert_eq!(decide(&mut pc, None, &phase(&[]), &apply("h"), now(), false), None);
        assert_eq!(decide(&mut pc, Some(2), &phase(&[]), &apply("h"), now(), true), None);
        pc.retry_at = Some(now() + time::Duration::seconds(5));
        assert_eq!(decide(&mut pc, Some(2), &phase(&[]), &apply("h"), now(), false), None);
        pc.retry_at = None;
        let act = decide(&mut pc, Some(3), &phase(&[]), &apply("h"), now(), false);
        assert_eq!(act, Some(Act::Push("web filter: the PC came online".into())));
    }

    #[test]
    fn a_drifted_block_is_put_back_and_over_cap_is_recorded_once() {
        let mut pc = PcFilter {
            seen_conn: Some(1),
            ..Default::default()
        };
        pc.state.applied_hash = Some("h".into());
        pc.state.applied_at = Some("2026-12-01T11:00:00Z".into());
        pc.state.observed_at = Some("2026-12-01T11:59:00Z".into());
        pc.state.observed_hash = Some("edited".into());
        pc.state.observed_active = Some(true);
        let act = decide(&mut pc, Some(1), &phase(&[]), &apply("h"), now(), false);
        assert!(matches!(act, Some(Act::Push(rule)) if rule.contains("hosts file was changed")));
        let over = Desired::OverCap { count: 20, cap: 10 };
        assert!(matches!(
            decide(&mut pc, Some(1), &phase(&[]), &over, now(), false),
            Some(Act::Push(_))
        ));
        pc.state.problem = Some("blocked: over the cap".into());
        pc.state.observed_hash = Some("h".into());
        assert_eq!(decide(&mut pc, Some(1), &phase(&[]), &over, now(), false), None);
    }
}
