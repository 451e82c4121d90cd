//! Changes one replica makes that others must act on at once, because they hold state
//! or connections it does not: the operator policy (every replica's agents get it), a
//! PC's web filter (the replica holding the PC enforces it), a PC removed or re-keyed
//! (the replica holding its connection ends it), a credential revoked (every
//! replica's token cache forgets), and the failures the throttles count (every
//! replica counts each one). The change itself is already
//! in the database; the message only says what to read again.

use std::sync::Arc;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::ratelimit::Counted;
use crate::state::AppState;

const SUBJECT: &str = "kenny.cluster.changes";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// The operator policy was replaced.
    Policy,
    /// A PC's web filter settings changed.
    WebFilter { agent_id: String },
    /// A PC's connection must end (it was removed or its key forgotten).
    CutOff { agent_id: String, reason: String },
    /// A credential was revoked, or a user's role, hosts or state changed: cached
    /// token lookups are dropped.
    Credentials,
    /// A throttle counted failures or a success: every replica counts the same.
    Throttle { limiter: Limiter, counted: Counted },
}

/// The throttles replicas share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    /// Password checks ([`crate::ratelimit::SignInThrottle`]).
    SignIn,
    /// OAuth client registrations per address.
    Registration,
}

/// Has every throttle of `state` tell the other replicas what it counts, and its token
/// cache tell them when it forgets.
pub fn share(cluster: &Arc<Cluster>, state: &AppState) {
    let publisher = |limiter: Limiter| {
        let cluster = cluster.clone();
        move |counted: Counted| {
            let cluster = cluster.clone();
            tokio::spawn(async move { cluster.publish_change(Change::Throttle { limiter, counted }).await });
        }
    };
    state.accounts.login_limiter.mirror_to(publisher(Limiter::SignIn));
    state
        .oauth
        .registration_limiter
        .mirror_to(publisher(Limiter::Registration));
    let cluster = cluster.clone();
    state.accounts.auth.on_forget(move || {
        let cluster = cluster.clone();
        tokio::spawn(async move { cluster.publish_change(Change::Credentials).await });
    });
}

#[derive(Serialize, Deserialize)]
struct Message {
    from: String,
    #[serde(flatten)]
    change: Change,
}

impl Cluster {
    /// Tells the other replicas about `change`; a replica that misses it (NATS down)
    /// reads the state again when it restarts, and agents get it when they reconnect.
    pub async fn publish_change(&self, change: Change) {
        let message = Message {
            from: self.replica.clone(),
            change,
        };
        let Ok(body) = serde_json::to_vec(&message) else { return };
        if let Err(e) = self.client.publish(SUBJECT, body.into()).await {
            tracing::warn!(error = %e, change = ?message.change, "other replicas could not be told of a change");
        }
    }
}

/// Applies the other replicas' changes to this one until `shutdown`.
pub async fn follow(cluster: Arc<Cluster>, state: Arc<AppState>, shutdown: CancellationToken) {
    let mut changes = match cluster.client.subscribe(SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot follow the other replicas' changes; policy and web filter changes made elsewhere reach this replica's agents when they reconnect");
            return;
        }
    };
    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => return,
            m = changes.next() => match m {
                Some(m) => m,
                None => return,
            },
        };
        match serde_json::from_slice::<Message>(&message.payload) {
            Ok(m) if m.from == cluster.replica => {}
            Ok(m) => apply(&state, m.change).await,
            Err(e) => tracing::warn!(error = %e, "an unreadable change message from another replica; ignored"),
        }
    }
}

async fn apply(state: &AppState, change: Change) {
    let fleet = &state.fleet;
    match change {
        Change::Policy => match fleet.store.blocking(|s| s.operator_policy()).await {
            Ok(stored) => match crate::policy::PolicyBook::load(stored) {
                Ok(book) => {
                    let current = (*book.current()).clone();
                    fleet.policy.set(current.clone());
                    let (pushed, missed) = crate::policy::push_to_all(&fleet.registry, &current.policy);
                    tracing::info!(agents = pushed, not_reached = ?missed, "operator policy changed on another replica; pushed here");
                }
                Err(e) => tracing::error!(
                    error = format!("{e:#}"),
                    "the operator policy another replica saved cannot be used here"
                ),
            },
            Err(e) => tracing::error!(error = %e, "cannot read the operator policy another replica changed"),
        },
        Change::WebFilter { agent_id } => {
            if let Err(e) = fleet.webfilter.reload_config(&agent_id).await {
                tracing::error!(error = %e, agent = %agent_id, "cannot read the web filter another replica changed");
            }
        }
        Change::Credentials => state.accounts.auth.forget_cached_here(),
        Change::Throttle { limiter, counted } => {
            let now = std::time::Instant::now();
            match limiter {
                Limiter::SignIn => state.accounts.login_limiter.apply(counted, now),
                Limiter::Registration => state.oauth.registration_limiter.apply(counted, now),
            }
        }
        Change::CutOff { agent_id, reason } => {
            if let Some(link) = fleet.registry.get(&agent_id) {
                fleet.registry.remove_if_current(&agent_id, link.conn_id);
                link.close(&reason);
            }
        }
    }
}
