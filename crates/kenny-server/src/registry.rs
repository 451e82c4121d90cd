//! Live agent connections: which agent is online on which connection, and the calls
//! waiting for an answer on each.
//!
//! Each connection has a unique `conn_id`. A reconnect replaces the entry; the old
//! connection can only remove the entry that is still its own, so a late close of a
//! replaced socket never marks the new one offline.
//!
//! In a cluster ([`crate::cluster`]) it also knows which agents other replicas hold, as
//! presence announced cluster-wide, each with the presence revision that orders
//! connections of the same agent across replicas; and which replicas are alive. A
//! call goes to the newest connection of its agent, wherever that is ([`Registry::route`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ed25519_dalek::VerifyingKey;
use kenny_proto::AgentId;
use kenny_proto::frame::{AgentMeta, Frame, Request, Response, encode};
use kenny_proto::proof::{self, ResultProof};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Frames queued for one connection before a sender waits.
pub const OUTBOX_CAPACITY: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the agent disconnected while the call was running ({0})")]
    Disconnected(String),
    #[error("no answer from the agent within {}s", .0.as_secs())]
    Timeout(Duration),
    /// The agent answered with an error of its own.
    #[error("{code}: {message}")]
    Agent { code: String, message: String },
    /// In a cluster: the replica a call was sent to no longer holds the agent's
    /// connection, so nothing was sent to the agent.
    #[error("{0}")]
    NotHeld(String),
    /// The agent's answer did not carry a valid signature from its enrolled key
    /// ([`crate::proofs`]); it was discarded.
    #[error("{0}")]
    BadProof(String),
}

type Reply = oneshot::Sender<Result<Box<Response>, LinkError>>;

/// What a call came back with: the outcome, and the agent's signed proof of its answer
/// when the connection signs results. For a refused signature (`BadProof`) the proof
/// is the one that failed, kept for the audit trail.
#[derive(Debug)]
pub struct Answered {
    pub outcome: Result<Value, LinkError>,
    pub proof: Option<ResultProof>,
}

impl Answered {
    pub fn unproved(outcome: Result<Value, LinkError>) -> Self {
        Answered { outcome, proof: None }
    }
}

/// One authenticated agent connection, as the rest of the server sees it.
pub struct AgentLink {
    pub agent_id: AgentId,
    pub conn_id: u64,
    pub meta: Option<AgentMeta>,
    pub connected_at: String,
    outbox: mpsc::Sender<String>,
    pending: Mutex<HashMap<String, Reply>>,
    closed: AtomicBool,
    last_frame_unix: AtomicI64,
    /// Fires when the link is closed from outside (replaced, server shutdown).
    shutdown: CancellationToken,
    /// In a cluster: the presence revision this connection was announced under (0 alone).
    presence_rev: AtomicU64,
    /// The agent's enrolled key, when it speaks the protocol that signs every result:
    /// each answer is checked against it.
    result_key: Option<VerifyingKey>,
}

impl AgentLink {
    /// A link; with `result_key` (an agent of protocol 0.18 or later) its answers must be
    /// signed by that key.
    pub fn new(
        agent_id: AgentId,
        conn_id: u64,
        meta: Option<AgentMeta>,
        connected_at: String,
        result_key: Option<VerifyingKey>,
    ) -> (Arc<AgentLink>, mpsc::Receiver<String>) {
        let (outbox, rx) = mpsc::channel(OUTBOX_CAPACITY);
        let link = AgentLink {
            agent_id,
            conn_id,
            meta,
            connected_at,
            outbox,
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            last_frame_unix: AtomicI64::new(unix_now()),
            shutdown: CancellationToken::new(),
            presence_rev: AtomicU64::new(0),
            result_key,
        };
        (Arc::new(link), rx)
    }

    /// Whether this connection's answers are signed.
    pub fn signs_results(&self) -> bool {
        self.result_key.is_some()
    }

    pub fn presence_rev(&self) -> u64 {
        self.presence_rev.load(Ordering::Acquire)
    }

    /// Set once, before the link is in the registry.
    pub fn set_presence_rev(&self, revision: u64) {
        self.presence_rev.store(revision, Ordering::Release);
    }

    pub fn last_frame_unix(&self) -> i64 {
        self.last_frame_unix.load(Ordering::Relaxed)
    }

    pub fn saw_frame(&self) {
        self.last_frame_unix.store(unix_now(), Ordering::Relaxed);
    }

    pub fn in_flight(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Sends request `id` down this connection and waits for its response.
    pub async fn call(&self, id: String, tool: &str, args: Map<String, Value>, timeout: Duration) -> Answered {
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            if self.closed.load(Ordering::Acquire) {
                return Answered::unproved(Err(LinkError::Disconnected("connection closed".into())));
            }
            pending.insert(id.clone(), tx);
        }
        // Whatever happens next (answer, timeout, or the caller giving up), the entry
        // must not outlive this call.
        let _forget = ForgetOnDrop { link: self, id: &id };
        let args_sha256 = self.result_key.map(|_| proof::args_digest(&args));
        let frame = encode(&Frame::Request(Request {
            id: id.clone(),
            tool: tool.to_owned(),
            args,
        }));
        // One deadline for the whole call: a connection whose queue is full (its agent
        // stopped reading) must not hold the caller past its timeout.
        let exchange = async {
            if self.outbox.send(frame).await.is_err() {
                return Err(LinkError::Disconnected("connection closed".into()));
            }
            rx.await
                .unwrap_or_else(|_| Err(LinkError::Disconnected("connection closed".into())))
        };
        let response = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Answered::unproved(Err(e)),
            Err(_) => return Answered::unproved(Err(LinkError::Timeout(timeout))),
        };
        self.answered(&id, tool, args_sha256, *response)
    }

    /// The outcome of `response`, checked against the agent's key when it signs.
    fn answered(&self, id: &str, tool: &str, args_sha256: Option<String>, mut response: Response) -> Answered {
        crate::proofs::tamper_for_tests(&mut response);
        let proof = match (&self.result_key, args_sha256) {
            (Some(key), Some(args_sha256)) => {
                let sent = crate::proofs::Sent {
                    agent_id: self.agent_id.as_str(),
                    tool,
                    args_sha256,
                };
                match crate::proofs::check(key, sent, &response) {
                    Ok(proof) => Some(proof),
                    Err(refused) => {
                        tracing::warn!(agent = %self.agent_id, tool, id, "an answer with a bad signature was refused");
                        return Answered {
                            outcome: Err(LinkError::BadProof(refused.why)),
                            proof: refused.proof.map(|p| *p),
                        };
                    }
                }
            }
            _ => None,
        };
        let outcome = if response.ok {
            Ok(response.result.unwrap_or(Value::Null))
        } else {
            let err = response.error.unwrap_or_else(|| kenny_proto::frame::WireError {
                code: "internal".into(),
                message: "the agent reported a failure without details".into(),
            });
            Err(LinkError::Agent {
                code: err.code,
                message: err.message,
            })
        };
        Answered { outcome, proof }
    }

    /// Queues a frame that expects no answer (ping, pong, policy).
    pub fn try_send(&self, frame: &Frame) -> bool {
        self.outbox.try_send(encode(frame)).is_ok()
    }

    /// Delivers a response to the call waiting for it. Returns false for an id no
    /// call is waiting on (late, duplicate or invented).
    pub fn complete(&self, response: Response) -> bool {
        let waiter = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&response.id);
        let Some(waiter) = waiter else { return false };
        let _ = waiter.send(Ok(Box::new(response)));
        true
    }

    /// Fails one waiting call, e.g. when its response arrived malformed.
    pub fn fail(&self, id: &str, error: LinkError) -> bool {
        let waiter = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        waiter.map(|w| w.send(Err(error))).is_some()
    }

    /// Marks the link closed and fails every call still waiting on it, at once.
    pub fn close(&self, reason: &str) {
        let drained: Vec<Reply> = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            self.closed.store(true, Ordering::Release);
            pending.drain().map(|(_, w)| w).collect()
        };
        for waiter in drained {
            let _ = waiter.send(Err(LinkError::Disconnected(reason.to_owned())));
        }
        self.shutdown.cancel();
    }

    /// Resolves once `close` has been called.
    pub async fn closed(&self) {
        self.shutdown.cancelled().await
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

struct ForgetOnDrop<'a> {
    link: &'a AgentLink,
    id: &'a str,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.link
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(self.id);
    }
}

/// An agent connected to another replica of the cluster, as its presence says.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Remote {
    pub agent_id: AgentId,
    /// The replica holding the connection.
    pub replica: String,
    /// The connection on that replica.
    pub conn_id: u64,
    pub meta: Option<AgentMeta>,
    pub connected_at: String,
    /// The presence revision: a newer connection of the same agent has a larger one.
    #[serde(skip)]
    pub revision: u64,
}

/// Where a call for an agent goes: down a connection held here, or to the replica
/// holding it.
pub enum Route {
    Local(Arc<AgentLink>),
    Remote(Arc<Remote>),
}

impl Route {
    pub fn meta(&self) -> Option<&AgentMeta> {
        match self {
            Route::Local(link) => link.meta.as_ref(),
            Route::Remote(remote) => remote.meta.as_ref(),
        }
    }
}

/// A replica counts as dead once nothing has been heard from it for this long; its
/// agents count as offline and calls waiting on it fail.
pub const REPLICA_DEAD_AFTER: Duration = Duration::from_millis(1500);

#[derive(Default)]
pub struct Registry {
    links: RwLock<HashMap<AgentId, Arc<AgentLink>>>,
    next_conn_id: AtomicU64,
    /// Agents other replicas hold (empty without a cluster).
    remote: RwLock<HashMap<AgentId, Arc<Remote>>>,
    /// When each other replica was last heard from.
    replicas: RwLock<HashMap<String, Instant>>,
}

impl Registry {
    pub fn next_conn_id(&self) -> u64 {
        self.next_conn_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Makes `link` the agent's live connection; returns the one it replaced.
    pub fn insert(&self, link: Arc<AgentLink>) -> Option<Arc<AgentLink>> {
        self.links
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(link.agent_id.clone(), link)
    }

    /// Removes the agent's entry only if it is still connection `conn_id`.
    pub fn remove_if_current(&self, agent_id: &str, conn_id: u64) -> bool {
        let mut links = self.links.write().unwrap_or_else(|p| p.into_inner());
        if links.get(agent_id).is_some_and(|l| l.conn_id == conn_id) {
            links.remove(agent_id);
            true
        } else {
            false
        }
    }

    pub fn get(&self, agent_id: &str) -> Option<Arc<AgentLink>> {
        self.links
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(agent_id)
            .cloned()
    }

    pub fn online_count(&self) -> usize {
        self.links.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Where a call for `agent_id` goes: the newest connection of the agent that is
    /// alive, here or on another replica.
    pub fn route(&self, agent_id: &str) -> Option<Route> {
        let local = self.get(agent_id);
        let remote = self.remote_alive(agent_id);
        match (local, remote) {
            (Some(local), Some(remote)) if remote.revision > local.presence_rev() => Some(Route::Remote(remote)),
            (Some(local), _) => Some(Route::Local(local)),
            (None, Some(remote)) => Some(Route::Remote(remote)),
            (None, None) => None,
        }
    }

    /// Whether the agent is connected anywhere in the cluster.
    pub fn is_online(&self, agent_id: &str) -> bool {
        self.route(agent_id).is_some()
    }

    /// What the agent's connection said about it, if it is online anywhere.
    pub fn online_meta(&self, agent_id: &str) -> Option<Option<AgentMeta>> {
        self.route(agent_id).map(|r| r.meta().cloned())
    }

    fn remote_alive(&self, agent_id: &str) -> Option<Arc<Remote>> {
        let remote = self
            .remote
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(agent_id)
            .cloned()?;
        self.replica_alive(&remote.replica).then_some(remote)
    }

    /// The agents other replicas hold that are alive, for listings.
    pub fn remote_snapshot(&self) -> HashMap<AgentId, Arc<Remote>> {
        let remote = self.remote.read().unwrap_or_else(|p| p.into_inner());
        if remote.is_empty() {
            return HashMap::new();
        }
        let replicas = self.replicas.read().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        remote
            .iter()
            .filter(|(_, r)| {
                replicas
                    .get(&r.replica)
                    .is_some_and(|t| now.duration_since(*t) < REPLICA_DEAD_AFTER)
            })
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect()
    }

    /// Records presence announced by another replica; an older announcement than the
    /// one known is ignored (they may arrive out of order).
    pub fn set_remote(&self, remote: Remote) {
        let mut map = self.remote.write().unwrap_or_else(|p| p.into_inner());
        if map
            .get(&remote.agent_id)
            .is_some_and(|known| known.revision >= remote.revision)
        {
            return;
        }
        map.insert(remote.agent_id.clone(), Arc::new(remote));
    }

    /// Forgets another replica's presence of `agent_id` up to `revision` (it ended, or
    /// this replica took the agent over).
    pub fn clear_remote(&self, agent_id: &str, revision: u64) {
        let mut map = self.remote.write().unwrap_or_else(|p| p.into_inner());
        if map.get(agent_id).is_some_and(|known| known.revision <= revision) {
            map.remove(agent_id);
        }
    }

    /// A heartbeat from `replica`.
    pub fn replica_seen(&self, replica: &str) {
        let mut replicas = self.replicas.write().unwrap_or_else(|p| p.into_inner());
        match replicas.get_mut(replica) {
            Some(at) => *at = Instant::now(),
            None => {
                replicas.insert(replica.to_owned(), Instant::now());
            }
        }
    }

    pub fn replica_alive(&self, replica: &str) -> bool {
        self.replicas
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(replica)
            .is_some_and(|t| t.elapsed() < REPLICA_DEAD_AFTER)
    }

    /// Runs `f` over the live links without copying them (listings of a whole fleet).
    pub fn with_links<T>(&self, f: impl FnOnce(&HashMap<AgentId, Arc<AgentLink>>) -> T) -> T {
        f(&self.links.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// A copy of the live links, for listings.
    pub fn snapshot(&self) -> HashMap<AgentId, Arc<AgentLink>> {
        self.links.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

pub fn unix_now() -> i64 {
    crate::clock::Clock::system().unix_secs() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn link(agent: &str, conn_id: u64) -> (Arc<AgentLink>, mpsc::Receiver<String>) {
        AgentLink::new(AgentId::parse(agent).unwrap(), conn_id, None, "t".into(), None)
    }

    #[test]
    fn a_replaced_connection_cannot_remove_its_successor() {
        let reg = Registry::default();
        let (old, _rx1) = link("pc", 1);
        let (new, _rx2) = link("pc", 2);
        assert!(reg.insert(old).is_none());
        assert_eq!(reg.insert(new).map(|l| l.conn_id), Some(1));
        assert!(!reg.remove_if_current("pc", 1), "late close of the old socket");
        assert_eq!(reg.get("pc").map(|l| l.conn_id), Some(2));
        assert!(reg.remove_if_current("pc", 2));
        assert!(reg.get("pc").is_none());
    }

    #[tokio::test]
    async fn closing_fails_only_this_links_calls_at_once() {
        let (a, mut rx_a) = link("a", 1);
        let (b, mut rx_b) = link("b", 2);
        let call_a = tokio::spawn({
            let a = a.clone();
            async move {
                a.call("c1".into(), "shell_exec", Map::new(), Duration::from_secs(60))
                    .await
                    .outcome
            }
        });
        let call_b = tokio::spawn({
            let b = b.clone();
            async move {
                b.call("c2".into(), "shell_exec", Map::new(), Duration::from_secs(60))
                    .await
                    .outcome
            }
        });
        let _ = rx_a.recv().await.unwrap();
        let sent_b = rx_b.recv().await.unwrap();
        a.close("socket closed");
        let err = call_a.await.unwrap().unwrap_err();
        assert_eq!(err, LinkError::Disconnected("socket closed".into()));
        assert!(!b.is_closed());
        let Frame::Request(req) =
            kenny_proto::frame::decode(&sent_b, kenny_proto::frame::Limits::AUTHENTICATED).unwrap()
        else {
            panic!("expected a request frame")
        };
        assert!(b.complete(Response::success(req.id.clone(), json!({"ok": 1}))));
        assert_eq!(call_b.await.unwrap().unwrap(), json!({"ok": 1}));
        assert!(
            !b.complete(Response::success(req.id, json!(null))),
            "duplicate responses are ignored"
        );
        assert_eq!(b.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_call_on_a_stalled_connection_still_times_out() {
        // Regression: the deadline once covered only the answer, so a connection whose
        // agent stopped reading (queue full) held callers forever.
        let (a, _rx) = link("a", 1);
        for _ in 0..OUTBOX_CAPACITY {
            assert!(a.try_send(&Frame::Ping));
        }
        let err = a
            .call("c3".into(), "t", Map::new(), Duration::from_millis(50))
            .await
            .outcome
            .unwrap_err();
        assert!(matches!(err, LinkError::Timeout(_)), "{err:?}");
        assert_eq!(a.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_timed_out_call_leaves_nothing_pending() {
        let (a, _rx) = link("a", 1);
        let err = a
            .call("c4".into(), "t", Map::new(), Duration::from_millis(20))
            .await
            .outcome
            .unwrap_err();
        assert!(matches!(err, LinkError::Timeout(_)));
        assert_eq!(a.in_flight(), 0);
        a.close("bye");
        let err = a
            .call("c5".into(), "t", Map::new(), Duration::from_secs(1))
            .await
            .outcome
            .unwrap_err();
        assert!(matches!(err, LinkError::Disconnected(_)));
    }
}
