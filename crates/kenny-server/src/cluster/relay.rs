//! Calls carried between replicas. The replica a call arrives at has checked the
//! caller's scope, the tool and its arguments, and audits the call; it sends the
//! holder of the agent's connection what the agent is to receive, naming the exact
//! connection presence gave it. The holder builds the wire frame only for that
//! connection, and answers with the agent's result or why there was none.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kenny_proto::AgentId;
use kenny_proto::proof::ResultProof;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::registry::{Answered, LinkError, Remote};

/// Heartbeats of every replica.
pub(crate) const HEARTBEAT_SUBJECTS: &str = "kenny.replica.*.alive";
/// Extra time a relayed call is given over the agent's own deadline, for the hop.
const RELAY_GRACE: Duration = Duration::from_secs(2);

pub(crate) fn subject(replica: &str) -> String {
    format!("kenny.replica.{replica}.call")
}

pub(crate) fn heartbeat_subject(replica: &str) -> String {
    format!("kenny.replica.{replica}.alive")
}

pub(crate) fn replica_of_heartbeat(subject: &str) -> Option<&str> {
    subject.strip_prefix("kenny.replica.")?.strip_suffix(".alive")
}

/// A call for the holder of one connection.
#[derive(Serialize, Deserialize)]
struct Relayed {
    agent_id: AgentId,
    conn_id: u64,
    revision: u64,
    call_id: String,
    tool: String,
    args: Map<String, Value>,
    timeout_ms: u64,
}

/// The holder's answer, with the agent's proof the holder checked (a replica of an
/// earlier version sends none; one that does not know `proof` ignores it).
#[derive(Serialize, Deserialize)]
struct Reply {
    #[serde(flatten)]
    answer: Answer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    proof: Option<ResultProof>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Answer {
    Ok { result: Value },
    Agent { code: String, message: String },
    Timeout { timeout_ms: u64 },
    Disconnected { reason: String },
    NotHeld { reason: String },
    BadProof { reason: String },
}

impl From<Answered> for Reply {
    fn from(answered: Answered) -> Self {
        Reply {
            answer: answered.outcome.into(),
            proof: answered.proof,
        }
    }
}

impl From<Reply> for Answered {
    fn from(reply: Reply) -> Self {
        Answered {
            outcome: reply.answer.into(),
            proof: reply.proof,
        }
    }
}

impl From<Answer> for Reply {
    fn from(answer: Answer) -> Self {
        Reply { answer, proof: None }
    }
}

impl From<Result<Value, LinkError>> for Answer {
    fn from(outcome: Result<Value, LinkError>) -> Self {
        match outcome {
            Ok(result) => Answer::Ok { result },
            Err(LinkError::Agent { code, message }) => Answer::Agent { code, message },
            Err(LinkError::Timeout(t)) => Answer::Timeout {
                timeout_ms: t.as_millis() as u64,
            },
            Err(LinkError::Disconnected(reason)) => Answer::Disconnected { reason },
            Err(LinkError::NotHeld(reason)) => Answer::NotHeld { reason },
            Err(LinkError::BadProof(reason)) => Answer::BadProof { reason },
        }
    }
}

impl From<Answer> for Result<Value, LinkError> {
    fn from(answer: Answer) -> Self {
        match answer {
            Answer::Ok { result } => Ok(result),
            Answer::Agent { code, message } => Err(LinkError::Agent { code, message }),
            Answer::Timeout { timeout_ms } => Err(LinkError::Timeout(Duration::from_millis(timeout_ms))),
            Answer::Disconnected { reason } => Err(LinkError::Disconnected(reason)),
            Answer::NotHeld { reason } => Err(LinkError::NotHeld(reason)),
            Answer::BadProof { reason } => Err(LinkError::BadProof(reason)),
        }
    }
}

impl Cluster {
    /// Runs a call on the connection `remote` names, through the replica holding it.
    /// Fails `NotHeld` when that replica is gone or no longer holds the connection,
    /// and `Disconnected` within [`crate::registry::REPLICA_DEAD_AFTER`] when the
    /// replica dies while the call runs.
    pub async fn relay(
        &self,
        remote: &Remote,
        call_id: String,
        tool: &str,
        args: Map<String, Value>,
        timeout: Duration,
    ) -> Answered {
        let mut deaths = self.deaths.subscribe();
        // Found dead between routing and now: the death was told before we listened.
        if !self.registry.replica_alive(&remote.replica) {
            return Answered::unproved(Err(LinkError::NotHeld(format!(
                "replica {}, which held the agent's connection, stopped answering",
                remote.replica
            ))));
        }
        let relayed = Relayed {
            agent_id: remote.agent_id.clone(),
            conn_id: remote.conn_id,
            revision: remote.revision,
            call_id,
            tool: tool.to_owned(),
            args,
            timeout_ms: timeout.as_millis() as u64,
        };
        let payload = match serde_json::to_vec(&relayed) {
            Ok(payload) => payload,
            Err(e) => {
                let why = format!("the call could not be encoded for its replica: {e}");
                return Answered::unproved(Err(LinkError::NotHeld(why)));
            }
        };
        let request = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(timeout + RELAY_GRACE));
        let replica = remote.replica.as_str();
        let exchange = self.client.send_request(subject(replica), request);
        let died = async {
            loop {
                match deaths.recv().await {
                    Ok(dead) if dead == replica => return,
                    Ok(_) => continue,
                    // Missed some: look for ourselves.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_))
                        if !self.registry.replica_alive(replica) =>
                    {
                        return;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        };
        tokio::select! {
            reply = exchange => match reply {
                Ok(message) => serde_json::from_slice::<Reply>(&message.payload)
                    .map(Into::into)
                    .unwrap_or_else(|e| Answered::unproved(Err(LinkError::Disconnected(format!("replica {replica} answered something unreadable: {e}"))))),
                Err(e) => Answered::unproved(Err(request_failed(replica, timeout, e))),
            },
            _ = died => Answered::unproved(Err(LinkError::Disconnected(format!(
                "replica {replica}, which holds the agent's connection, stopped answering"
            )))),
        }
    }
}

fn request_failed(replica: &str, timeout: Duration, e: async_nats::RequestError) -> LinkError {
    use async_nats::RequestErrorKind;
    match e.kind() {
        RequestErrorKind::NoResponders => {
            LinkError::NotHeld(format!("replica {replica}, which held the agent's connection, is gone"))
        }
        RequestErrorKind::TimedOut => LinkError::Timeout(timeout),
        _ => LinkError::Disconnected(format!("the call could not reach replica {replica}: {e}")),
    }
}

/// Serves the calls other replicas relay to this one, each in its own task.
pub(crate) async fn serve(cluster: Arc<Cluster>, mut calls: async_nats::Subscriber, shutdown: CancellationToken) {
    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => return,
            message = calls.next() => match message {
                Some(m) => m,
                None => return,
            },
        };
        let Some(reply_to) = message.reply.clone() else {
            continue;
        };
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let answer: Reply = match serde_json::from_slice::<Relayed>(&message.payload) {
                Ok(relayed) => run_here(&cluster, relayed).await.into(),
                Err(e) => Answer::NotHeld {
                    reason: format!("the relayed call was unreadable: {e}"),
                }
                .into(),
            };
            let body = match serde_json::to_vec(&answer) {
                Ok(body) => body,
                Err(e) => serde_json::to_vec(&Answer::Disconnected {
                    reason: format!("the result could not be encoded: {e}"),
                })
                .unwrap_or_default(),
            };
            if let Err(e) = cluster.client.publish(reply_to.clone(), body.into()).await {
                tracing::warn!(error = %e, "a relayed call's answer could not be sent back");
                let too_big = Answer::Disconnected {
                    reason: format!("the agent's answer could not be carried back between replicas: {e}"),
                };
                if let Ok(body) = serde_json::to_vec(&too_big) {
                    let _ = cluster.client.publish(reply_to, body.into()).await;
                }
            }
        });
    }
}

/// Sends a relayed call down the connection it names, if this replica holds exactly
/// that connection and it is still the agent's newest.
async fn run_here(cluster: &Cluster, relayed: Relayed) -> Answered {
    let agent_id = relayed.agent_id.as_str();
    let link = cluster
        .registry
        .get(agent_id)
        .filter(|l| l.conn_id == relayed.conn_id && l.presence_rev() == relayed.revision && !l.is_closed());
    let Some(link) = link else {
        return Answered::unproved(Err(LinkError::NotHeld(format!(
            "agent {agent_id} is no longer connected to replica {}",
            cluster.replica
        ))));
    };
    if !matches!(cluster.registry.route(agent_id), Some(crate::registry::Route::Local(ref l)) if Arc::ptr_eq(l, &link))
    {
        return Answered::unproved(Err(LinkError::NotHeld(format!(
            "agent {agent_id} has a newer connection on another replica"
        ))));
    }
    link.call(
        relayed.call_id,
        &relayed.tool,
        relayed.args,
        Duration::from_millis(relayed.timeout_ms),
    )
    .await
}
