//! Several replicas serving one fleet: which replica holds which agent (presence, in a
//! NATS key-value bucket), whether each replica is alive (heartbeats), and calls
//! carried to the replica holding their agent (NATS requests to that replica's own
//! subject).
//!
//! A subject per replica, not per agent: a replica subscribes to its own subject
//! only, and a call names the exact connection presence gave it (agent, connection,
//! presence revision). The holder builds the wire frame only for that connection and
//! answers `offline` otherwise, so a reconnect racing its old socket on another
//! replica can never have one request delivered twice. A subject per agent would have
//! both the old and the new holder subscribed for a moment.
//!
//! Presence revisions are the bucket's, so "newest connection wins" means the same on
//! every replica: a replica that sees a newer revision for an agent it holds closes
//! its own connection.

pub mod changes;
pub(crate) mod presence;
pub(crate) mod relay;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::kv;
use futures_util::StreamExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::registry::{AgentLink, REPLICA_DEAD_AFTER, Registry};

/// How often a replica says it is alive: a few times within [`REPLICA_DEAD_AFTER`].
const HEARTBEAT_EVERY: Duration = Duration::from_millis(400);
/// How often the liveness of the replicas calls wait on is checked.
const DEATH_CHECK_EVERY: Duration = Duration::from_millis(100);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The presence bucket (one key per agent).
const PRESENCE_BUCKET: &str = "kenny_presence";
/// Every key of a bucket.
const ALL_KEYS: &str = ">";

/// This replica's place in the cluster.
pub struct Cluster {
    client: async_nats::Client,
    presence: kv::Store,
    /// This replica's id: random per process, so a restarted replica is a new one.
    replica: String,
    registry: Arc<Registry>,
    /// Replicas found dead, for the calls waiting on them.
    deaths: broadcast::Sender<String>,
}

/// The presence bucket, made on first use. Its stream is made here as the client
/// library would make it, without its account query, whose answer from NATS 2.9
/// (Debian's) the library cannot read.
async fn presence_bucket(jetstream: async_nats::jetstream::Context) -> anyhow::Result<kv::Store> {
    use async_nats::jetstream::stream;
    if let Ok(bucket) = jetstream.get_key_value(PRESENCE_BUCKET).await {
        return Ok(bucket);
    }
    let made = jetstream
        .create_stream(stream::Config {
            name: format!("KV_{PRESENCE_BUCKET}"),
            description: Some("kenny: which replica holds each agent's connection".into()),
            subjects: vec![format!("$KV.{PRESENCE_BUCKET}.>")],
            // One value per agent: the newest connection.
            max_messages_per_subject: 1,
            // On disk, so a NATS restart does not forget who holds whom: replicas do not
            // announce connections they already hold again.
            storage: stream::StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            num_replicas: 1,
            ..Default::default()
        })
        .await;
    if let Err(e) = made {
        // Another replica may have made it meanwhile.
        tracing::debug!(error = %e, "creating the presence stream");
    }
    Ok(jetstream.get_key_value(PRESENCE_BUCKET).await?)
}

impl Cluster {
    /// Connects to NATS at `url`, makes sure the presence bucket exists, and starts
    /// the heartbeat, the watchers and the service of calls relayed to this replica.
    pub async fn join(url: &str, registry: Arc<Registry>, shutdown: CancellationToken) -> anyhow::Result<Arc<Cluster>> {
        let replica = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let client = async_nats::ConnectOptions::new()
            .name(format!("kenny-server {replica}"))
            .connection_timeout(CONNECT_TIMEOUT)
            .request_timeout(None)
            .connect(url)
            .await
            .with_context(|| {
                "connecting to NATS (--nats-url); check the address, and that the server runs with JetStream (-js)"
                    .to_string()
            })?;
        let presence = presence_bucket(async_nats::jetstream::new(client.clone()))
            .await
            .context("opening the presence bucket in NATS (JetStream must be enabled: nats-server -js)")?;
        let (deaths, _) = broadcast::channel(64);
        let cluster = Arc::new(Cluster {
            client,
            presence,
            replica,
            registry,
            deaths,
        });
        let calls = cluster
            .client
            .subscribe(relay::subject(&cluster.replica))
            .await
            .context("subscribing to this replica's calls")?;
        let beats = cluster
            .client
            .subscribe(relay::HEARTBEAT_SUBJECTS)
            .await
            .context("subscribing to the replicas' heartbeats")?;
        // From each agent's current entry on, so a replica that starts later knows who
        // is where already.
        let watch = cluster
            .presence
            .watch_with_history(ALL_KEYS)
            .await
            .context("watching the presence bucket")?;
        tokio::spawn(relay::serve(cluster.clone(), calls, shutdown.clone()));
        tokio::spawn(cluster.clone().heartbeat(shutdown.clone()));
        tokio::spawn(cluster.clone().listen_to_heartbeats(beats, shutdown.clone()));
        tokio::spawn(cluster.clone().follow_presence(watch, shutdown));
        tracing::info!(replica = %cluster.replica, "joined the cluster");
        Ok(cluster)
    }

    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Announces `link` as its agent's newest connection, cluster-wide; the revision it
    /// gets orders it after every earlier connection of the agent, on any replica.
    pub async fn announce(&self, link: &AgentLink) -> anyhow::Result<u64> {
        let (key, value) = presence::entry(&self.replica, link)?;
        let revision = self
            .presence
            .put(key, value)
            .await
            .context("announcing the agent's connection to the cluster")?;
        link.set_presence_rev(revision);
        Ok(revision)
    }

    /// Withdraws `link`'s presence, unless a newer connection of the agent replaced it.
    pub async fn withdraw(&self, link: &AgentLink) {
        let revision = link.presence_rev();
        if revision == 0 {
            return;
        }
        // Fails when a newer connection was announced since: that one stays.
        let _ = self
            .presence
            .delete_expect_revision(presence::key(&link.agent_id), Some(revision))
            .await;
    }

    async fn heartbeat(self: Arc<Self>, shutdown: CancellationToken) {
        let subject = relay::heartbeat_subject(&self.replica);
        let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {
                    if let Err(e) = self.client.publish(subject.clone(), bytes::Bytes::new()).await {
                        tracing::warn!(error = %e, "could not send this replica's heartbeat");
                    }
                }
            }
        }
    }

    /// Keeps the registry's view of which replicas are alive, and tells the calls
    /// waiting on a replica when it is found dead.
    async fn listen_to_heartbeats(self: Arc<Self>, mut beats: async_nats::Subscriber, shutdown: CancellationToken) {
        let mut alive: std::collections::HashSet<String> = Default::default();
        let mut check = tokio::time::interval(DEATH_CHECK_EVERY);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                beat = beats.next() => {
                    let Some(beat) = beat else { return };
                    if let Some(replica) = relay::replica_of_heartbeat(&beat.subject)
                        && replica != self.replica
                    {
                        self.registry.replica_seen(replica);
                        alive.insert(replica.to_owned());
                    }
                }
                _ = check.tick() => {
                    let dead: Vec<String> = alive.iter().filter(|r| !self.registry.replica_alive(r)).cloned().collect();
                    for replica in dead {
                        alive.remove(&replica);
                        tracing::warn!(%replica, silent_for = ?REPLICA_DEAD_AFTER, "a replica stopped answering; its agents count as offline until they reconnect");
                        let _ = self.deaths.send(replica);
                    }
                }
            }
        }
    }

    /// Follows the presence bucket: other replicas' agents into the registry, and this
    /// replica's connections closed when a newer one of the same agent appears elsewhere.
    async fn follow_presence(self: Arc<Self>, mut watch: kv::Watch, shutdown: CancellationToken) {
        loop {
            let entry = tokio::select! {
                _ = shutdown.cancelled() => return,
                entry = watch.next() => entry,
            };
            match entry {
                Some(Ok(entry)) => presence::apply(&self.registry, &self.replica, &entry),
                Some(Err(e)) => tracing::warn!(error = %e, "reading the presence bucket failed"),
                None => {
                    tracing::error!("the presence watch ended; restarting it");
                    match self.presence.watch_with_history(ALL_KEYS).await {
                        Ok(w) => watch = w,
                        Err(e) => {
                            tracing::error!(error = %e, "could not watch the presence bucket again; retrying in 1s");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
        }
    }
}
