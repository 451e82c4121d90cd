//! Alerts: the server tells people what went wrong before they ask. [`Alerts`] is the
//! handle the rest of the server reports to (a PC judged, high-priority changes,
//! settings changed); [`start`] runs the engine that opens and closes alerts
//! ([`engine`]), the sender that delivers them with retries ([`deliver`]) and the
//! weekly digest ([`digest`]).

pub(crate) mod channels;
mod deliver;
pub(crate) mod digest;
mod engine;
pub(crate) mod message;
pub(crate) mod settings;
pub(crate) mod silences;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::health::Assessment;
use crate::registry::Registry;
use crate::store::{ChangeRow, Store};

pub(crate) use deliver::send_now;

pub(crate) enum Event {
    Judged {
        agent_id: String,
        assessment: Arc<Assessment>,
    },
    Changes {
        agent_id: String,
        rows: Vec<ChangeRow>,
    },
    SettingsChanged,
}

/// Where the server reports what alerts are made of. Cheap to clone; reporting never
/// blocks.
#[derive(Clone)]
pub struct Alerts {
    events: mpsc::Sender<Event>,
    /// Wakes the sender when deliveries are queued.
    pub(crate) wake: Arc<Notify>,
}

impl Alerts {
    pub(crate) fn new() -> (Alerts, mpsc::Receiver<Event>) {
        let (events, rx) = mpsc::channel();
        (
            Alerts {
                events,
                wake: Arc::new(Notify::new()),
            },
            rx,
        )
    }

    pub(crate) fn judged(&self, agent_id: &str, assessment: Arc<Assessment>) {
        self.report(Event::Judged {
            agent_id: agent_id.to_owned(),
            assessment,
        });
    }

    /// Changes found in a new snapshot; only high-priority ones make alerts.
    pub(crate) fn changes(&self, agent_id: &str, rows: &[ChangeRow]) {
        let high: Vec<ChangeRow> = rows.iter().filter(|c| c.priority == "high").cloned().collect();
        if !high.is_empty() {
            self.report(Event::Changes {
                agent_id: agent_id.to_owned(),
                rows: high,
            });
        }
    }

    pub(crate) fn settings_changed(&self) {
        self.report(Event::SettingsChanged);
    }

    fn report(&self, event: Event) {
        if self.events.send(event).is_err() {
            tracing::warn!("the alert engine has stopped; an event was not handled");
        }
    }
}

/// Starts the engine (a thread of its own) on `events`, and the sender and the digest
/// as tasks that end with `shutdown`.
pub(crate) fn start(
    events: mpsc::Receiver<Event>,
    alerts: &Alerts,
    store: Arc<Store>,
    clock: Clock,
    registry: Arc<Registry>,
    leader: crate::leader::Leader,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let open: HashMap<(String, String), crate::store::AlertRow> = store
        .open_alerts()?
        .into_iter()
        .map(|a| ((a.agent_id.clone(), a.key.clone()), a))
        .collect();
    let engine = engine::Engine {
        store: store.clone(),
        clock: clock.clone(),
        registry: registry.clone(),
        wake: alerts.wake.clone(),
        settings: settings::AlertSettings::load(&store)?,
        open,
        started: clock.now_utc(),
        directory: Default::default(),
        leader: leader.clone(),
    };
    std::thread::Builder::new()
        .name("kenny-alerts".into())
        .spawn(move || engine.run(events))?;
    tokio::spawn(deliver::run(
        store.clone(),
        clock.clone(),
        alerts.wake.clone(),
        leader.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(digest::run(
        store,
        clock,
        registry,
        alerts.wake.clone(),
        leader,
        shutdown,
    ));
    Ok(())
}
