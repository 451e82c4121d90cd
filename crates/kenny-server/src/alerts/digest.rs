//! The weekly digest, for channels that opted in: the fleet's health mix, the open
//! problems worst first, what changed over the week (high priority first) and the PCs
//! not seen for a week. Sent on the settings' day; a superuser can send it any time.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::message::Message;
use super::settings::{AlertSettings, DAYS};
use crate::clock::Clock;
use crate::registry::Registry;
use crate::store::{Result, Store};

/// How often the day and the channels are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(3600);
/// Lines of each list in the digest.
const LISTED: usize = 10;

/// `online` says whether a PC is connected now (its stored last_seen is when it
/// connected, however long ago that was).
pub(crate) fn build(store: &Store, clock: &Clock, online: &dyn Fn(&str) -> bool) -> Result<Message> {
    let now = clock.now_utc();
    let week_ago = crate::clock::format(now - time::Duration::days(7));
    let agents = store.agents()?;
    let counts = store.health_counts()?;
    let count = |status: &str| counts.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
    let judged: i64 = counts.iter().map(|(_, n)| n).sum();
    let mut problems = store.open_alerts()?;
    problems.sort_by(|a, b| (a.status != "crit", &a.agent_id).cmp(&(b.status != "crit", &b.agent_id)));
    let changes = store.changes_since(&week_ago, 5000, None)?;
    let high: Vec<_> = changes.iter().filter(|c| c.priority == "high").collect();
    let not_seen: Vec<String> = agents
        .iter()
        .filter(|a| !online(a.agent_id.as_str()))
        .filter(|a| a.last_seen.as_deref().is_none_or(|s| s < week_ago.as_str()))
        .map(|a| {
            format!(
                "{} (last seen {})",
                a.agent_id,
                a.last_seen.as_deref().unwrap_or("never")
            )
        })
        .collect();

    let mut text = format!(
        "{} PCs: {} ok, {} warn, {} crit, {} unknown, {} without a report.\n",
        agents.len(),
        count("ok"),
        count("warn"),
        count("crit"),
        count("unknown"),
        i64::try_from(agents.len()).unwrap_or(0) - judged
    );
    text.push_str(&format!("\nOpen problems ({}):\n", problems.len()));
    for p in problems.iter().take(LISTED) {
        text.push_str(&format!(
            "- {} {}: {} ({})\n",
            p.status.to_uppercase(),
            p.agent_id,
            p.reason,
            p.key
        ));
    }
    text.push_str(&format!(
        "\nChanges this week: {} ({} high priority)\n",
        changes.len(),
        high.len()
    ));
    for c in high
        .iter()
        .chain(
            changes
                .iter()
                .filter(|c| c.priority != "high")
                .collect::<Vec<_>>()
                .iter(),
        )
        .take(LISTED)
    {
        text.push_str(&format!("- {}: {}\n", c.agent_id, c.detail));
    }
    text.push_str(&format!("\nNot seen for a week ({}):\n", not_seen.len()));
    for line in not_seen.iter().take(LISTED) {
        text.push_str(&format!("- {line}\n"));
    }
    Ok(Message {
        event: "digest".into(),
        title: format!(
            "weekly digest: {} open problems, {} changes",
            problems.len(),
            changes.len()
        ),
        text,
        priority: 2,
        agent_id: None,
        key: None,
        status: None,
        reason: None,
        attention: None,
        at: clock.now(),
    })
}

/// Queues the digest for every channel that wants it, once a week on the set day.
pub(crate) async fn run(
    store: Arc<Store>,
    clock: Clock,
    registry: Arc<Registry>,
    wake: Arc<Notify>,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) {
    loop {
        let (s, c, r) = (store.clone(), clock.clone(), registry.clone());
        let queued = match leader.is_leading() {
            true => {
                store
                    .blocking(move |_| queue_if_due(&s, &c, &|id: &str| r.is_online(id)))
                    .await
            }
            false => Ok(0),
        };
        match queued {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(channels = n, "weekly digest queued");
                wake.notify_one();
            }
            Err(e) => tracing::warn!(error = %e, "weekly digest not queued; trying again in an hour"),
        }
        tokio::select! {
            _ = tokio::time::sleep(CHECK_EVERY) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

fn queue_if_due(store: &Store, clock: &Clock, online: &dyn Fn(&str) -> bool) -> Result<usize> {
    let settings = AlertSettings::load(store)?;
    let now = clock.now_utc();
    let today = DAYS[usize::from(now.weekday().number_days_from_monday())];
    if today != settings.digest_day {
        return Ok(0);
    }
    let six_days_ago = crate::clock::format(now - time::Duration::days(6));
    let due: Vec<_> = store
        .channels()?
        .into_iter()
        .filter(|c| c.enabled && c.digest && c.digest_sent_at.as_deref().is_none_or(|at| at < six_days_ago.as_str()))
        .collect();
    if due.is_empty() {
        return Ok(0);
    }
    let message = serde_json::to_string(&build(store, clock, online)?).unwrap_or_default();
    let stamp = clock.now();
    for channel in &due {
        store.queue_delivery(channel.id, "digest", &message, &stamp)?;
        store.set_digest_sent(channel.id, &stamp)?;
    }
    Ok(due.len())
}
