//! Turning what the server learns into alerts: a section that turns warn or crit opens
//! one (and a worse status sends again), ok closes it with a recovery message, a PC
//! silent for longer than the set time is `offline`, and a high-priority change (a new
//! local administrator) is an alert of its own. Silences and the cooldown decide what
//! is sent; everything is stored either way.
//!
//! One thread owns the open alerts, so transitions are handled one at a time, in the
//! order they happened.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::Event;
use super::message::{self, Message};
use super::settings::AlertSettings;
use crate::clock::Clock;
use crate::fleet::AgentDirectory;
use crate::health::{Assessment, Status};
use crate::registry::Registry;
use crate::store::{AlertRow, ChangeRow, Store};

/// How often offline PCs are looked for.
const CHECK_EVERY: Duration = Duration::from_secs(2);
pub(crate) const OFFLINE: &str = "offline";

pub(super) struct Engine {
    pub store: Arc<Store>,
    pub clock: Clock,
    pub registry: Arc<Registry>,
    pub wake: Arc<Notify>,
    pub settings: AlertSettings,
    /// Open alerts by (agent_id, key).
    pub open: HashMap<(String, String), AlertRow>,
    /// When this server started: a PC is not called offline for the time the server
    /// itself was down.
    pub started: time::OffsetDateTime,
    /// The stored agents, read again only when they change.
    pub directory: AgentDirectory,
    /// Only the leading replica watches for PCs gone offline.
    pub leader: crate::leader::Leader,
}

impl Engine {
    pub(super) fn run(mut self, events: Receiver<Event>) {
        let mut checked = Instant::now();
        loop {
            match events.recv_timeout(CHECK_EVERY) {
                Ok(event) => self.handle(event),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if checked.elapsed() >= CHECK_EVERY && self.leader.is_leading() {
                self.check_offline();
                checked = Instant::now();
            }
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Judged { agent_id, assessment } => self.judged(&agent_id, &assessment),
            Event::Changes { agent_id, rows } => self.changed(&agent_id, &rows),
            Event::SettingsChanged => match AlertSettings::load(&self.store) {
                Ok(s) => self.settings = s,
                Err(e) => tracing::warn!(error = %e, "cannot read alert settings; keeping the previous ones"),
            },
        }
    }

    fn judged(&mut self, agent_id: &str, a: &Assessment) {
        let now = self.clock.now();
        // Only sections the server judges itself alert: a section no rule knows carries
        // the agent's own word, and a hostile PC could invent thousands of them.
        let judged: Vec<&crate::health::Verdict> = a
            .sections
            .iter()
            .filter(|v| crate::health::has_rule(&v.section))
            .collect();
        for v in &judged {
            let key = (agent_id.to_owned(), v.section.clone());
            let reason = v.reason.clone().unwrap_or_default();
            match (v.status, self.open.get(&key).map(|o| o.status.clone())) {
                (Status::Warn | Status::Crit, None) => {
                    self.open_alert(
                        agent_id,
                        &v.section,
                        v.status.as_str(),
                        reason,
                        v.attention.clone(),
                        &now,
                    );
                }
                (Status::Warn | Status::Crit, Some(was)) => {
                    let worse = v.status == Status::Crit && was == "warn";
                    self.update(&key, v.status.as_str(), reason, v.attention.clone(), &now, worse);
                }
                (Status::Ok, Some(_)) => self.close(&key, &now),
                // Could not be judged: an open alert stays open until we know.
                (Status::Unknown, _) | (Status::Ok, None) => {}
            }
        }
        // A section no longer reported (or no longer applying) cannot stay alarming.
        let present: std::collections::HashSet<&str> = judged.iter().map(|v| v.section.as_str()).collect();
        let gone: Vec<(String, String)> = self
            .open
            .keys()
            .filter(|(id, k)| id == agent_id && k != OFFLINE && !present.contains(k.as_str()))
            .cloned()
            .collect();
        for key in gone {
            self.close(&key, &now);
        }
    }

    /// High-priority changes from one snapshot: one alert per section, listing them, so
    /// a PC that churns its accounts makes one message a snapshot, not hundreds.
    fn changed(&mut self, agent_id: &str, rows: &[ChangeRow]) {
        let now = self.clock.now();
        let mut by_section: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
        for change in rows {
            by_section
                .entry(change.section.as_str())
                .or_default()
                .push(change.detail.as_str());
        }
        for (section, details) in by_section {
            let key = format!("change:{section}");
            let silenced = self.silenced(agent_id, section, &now);
            let shown: Vec<&str> = details.iter().take(3).copied().collect();
            let more = details.len().saturating_sub(shown.len());
            let mut reason = shown.join("; ");
            if more > 0 {
                reason.push_str(&format!(" (and {more} more)"));
            }
            let mut alert = AlertRow {
                id: 0,
                agent_id: agent_id.to_owned(),
                key,
                status: "crit".into(),
                reason: crate::health::clean(&reason, 400),
                attention: Some(
                    "check that this change was meant; if not, undo it and find out how it happened".into(),
                ),
                opened_at: now.clone(),
                updated_at: now.clone(),
                // A change happened once: it is recorded closed, and never "recovers".
                closed_at: Some(now.clone()),
                silenced,
                notified: !silenced,
            };
            match self.store.insert_alert(&alert) {
                Ok(id) => alert.id = id,
                Err(e) => {
                    tracing::error!(agent = %agent_id, error = %e, "cannot store an alert");
                    continue;
                }
            }
            if !silenced {
                self.send(
                    Some(alert.id),
                    &message::alert(&alert, self.hostname(agent_id).as_deref(), false),
                );
            }
        }
    }

    fn check_offline(&mut self) {
        let agents = match self.directory.agents(&self.store) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read agents to look for offline PCs");
                return;
            }
        };
        let now = self.clock.now_utc();
        let stamp = crate::clock::format(now);
        let after = time::Duration::seconds(i64::try_from(self.settings.offline_after_secs).unwrap_or(i64::MAX));
        for agent in agents.iter() {
            let id = agent.agent_id.to_string();
            let key = (id.clone(), OFFLINE.to_owned());
            if self.registry.is_online(&id) {
                if self.open.contains_key(&key) {
                    self.close(&key, &stamp);
                }
                continue;
            }
            // Never connected: nothing to miss yet.
            let Some(seen) = agent.last_seen.as_deref().and_then(crate::clock::parse) else {
                continue;
            };
            let gone_since = seen.max(self.started);
            if now - gone_since < after || self.open.contains_key(&key) {
                continue;
            }
            let minutes = (now - seen).whole_minutes();
            self.open_alert(
                &id,
                OFFLINE,
                "crit",
                format!(
                    "not connected since {} ({minutes} min)",
                    agent.last_seen.as_deref().unwrap_or("?")
                ),
                Some("check that the PC is on and online, and that the kenny-agent service runs".into()),
                &stamp,
            );
        }
    }

    fn open_alert(
        &mut self,
        agent_id: &str,
        key: &str,
        status: &str,
        reason: String,
        attention: Option<String>,
        now: &str,
    ) {
        let silenced = self.silenced(agent_id, key, now);
        let cooling = !silenced && self.cooling_down(agent_id, key);
        let mut alert = AlertRow {
            id: 0,
            agent_id: agent_id.to_owned(),
            key: key.to_owned(),
            status: status.to_owned(),
            reason,
            attention,
            opened_at: now.to_owned(),
            updated_at: now.to_owned(),
            closed_at: None,
            silenced: silenced || cooling,
            notified: !(silenced || cooling),
        };
        match self.store.insert_alert(&alert) {
            Ok(id) => alert.id = id,
            Err(e) => {
                tracing::error!(agent = %agent_id, key, error = %e, "cannot store an alert");
                return;
            }
        }
        if alert.notified {
            self.send(
                Some(alert.id),
                &message::alert(&alert, self.hostname(agent_id).as_deref(), false),
            );
        }
        self.open.insert((agent_id.to_owned(), key.to_owned()), alert);
    }

    fn update(
        &mut self,
        key: &(String, String),
        status: &str,
        reason: String,
        attention: Option<String>,
        now: &str,
        worse: bool,
    ) {
        let silenced = worse && self.silenced(&key.0, &key.1, now);
        let hostname = if worse { self.hostname(&key.0) } else { None };
        let Some(alert) = self.open.get_mut(key) else { return };
        if alert.status == status && alert.reason == reason {
            return;
        }
        alert.status = status.to_owned();
        alert.reason = reason;
        alert.attention = attention;
        alert.updated_at = now.to_owned();
        let send = worse && !silenced;
        if send {
            alert.notified = true;
        }
        let alert = alert.clone();
        if let Err(e) = self.store.update_alert(&alert) {
            tracing::error!(error = %e, "cannot store an alert's change");
        }
        if send {
            self.send(Some(alert.id), &message::alert(&alert, hostname.as_deref(), true));
        }
    }

    fn close(&mut self, key: &(String, String), now: &str) {
        let Some(mut alert) = self.open.remove(key) else { return };
        alert.closed_at = Some(now.to_owned());
        alert.updated_at = now.to_owned();
        if let Err(e) = self.store.update_alert(&alert) {
            tracing::error!(error = %e, "cannot store an alert's end");
        }
        // Only what was announced is announced as over, and not while silenced.
        if alert.notified && !self.silenced(&key.0, &key.1, now) {
            self.send(
                Some(alert.id),
                &message::recovery(&alert, self.hostname(&key.0).as_deref()),
            );
        }
    }

    fn silenced(&self, agent_id: &str, key: &str, now: &str) -> bool {
        let section = key.strip_prefix("change:").unwrap_or(key);
        match self.store.active_silences(Some(agent_id), now) {
            Ok(silences) => silences
                .iter()
                .any(|s| s.section == "*" || s.section == section || s.section == key),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read silences; sending the alert");
                false
            }
        }
    }

    fn cooling_down(&self, agent_id: &str, key: &str) -> bool {
        let cooldown = time::Duration::seconds(i64::try_from(self.settings.cooldown_secs).unwrap_or(0));
        match self.store.last_notified_alert(agent_id, key) {
            Ok(Some(at)) => crate::clock::parse(&at).is_some_and(|at| self.clock.now_utc() - at < cooldown),
            _ => false,
        }
    }

    fn hostname(&self, agent_id: &str) -> Option<String> {
        self.store.agent(agent_id).ok().flatten().and_then(|a| a.hostname)
    }

    fn send(&self, alert_id: Option<i64>, message: &Message) {
        let Ok(json) = serde_json::to_string(message) else {
            return;
        };
        match self
            .store
            .queue_deliveries(alert_id, &message.event, &json, &self.clock.now())
        {
            Ok(0) => {}
            Ok(_) => self.wake.notify_one(),
            Err(e) => tracing::error!(error = %e, "cannot queue an alert for sending"),
        }
    }
}
