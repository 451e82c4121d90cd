//! Agent updates, server side: which build an agent gets, the signed order that carries
//! it, and how the agent's report of the outcome reaches the caller.
//!
//! The caller of `agent_update` names at most a version (and, a superuser only, that an
//! older one is wanted). Everything the agent acts on is built here: the release file,
//! its size and SHA-256, bound to the one agent in a manifest signed with the server key
//! the agent pins. After the agent answers that the build is staged it restarts into it
//! on trial; it reports the outcome (kept, or rolled back and why) in a `log` frame that
//! echoes the signed manifest, so only orders this server really issued are recorded.

pub(crate) mod download;
pub(crate) mod releases;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use kenny_proto::error::ErrorCode;
use kenny_proto::frame::{AgentMeta, Log};
use kenny_proto::update::{MANIFEST_PURPOSE, Manifest, UpdateOrder, verify_manifest};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use crate::call_failure::CallFailure;
use crate::clock::Clock;
use crate::principal::{Principal, Role};
use crate::store::{Store, UpdateRecord};

/// The `event` field of the agent's report.
pub(crate) const REPORT_EVENT: &str = "agent_update";
/// How long the agent's trial may last by default, if its answer does not say.
const DEFAULT_TRIAL: Duration = Duration::from_secs(90);
/// The longest trial the server waits for.
const MAX_TRIAL: Duration = Duration::from_secs(600);
/// Beyond the trial: restarting, reconnecting and sending the report.
const REPORT_GRACE: Duration = Duration::from_secs(60);

/// How an update ended, as the agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub outcome: Outcome,
    pub reason: String,
    /// The version the agent says it ran before.
    pub from: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded,
    RolledBack,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::RolledBack => "rolled_back",
        }
    }

    fn parse(s: &str) -> Option<Outcome> {
        match s {
            "succeeded" => Some(Outcome::Succeeded),
            "rolled_back" => Some(Outcome::RolledBack),
            _ => None,
        }
    }
}

struct Waiting {
    agent_id: String,
    requested_by: String,
    tx: oneshot::Sender<Report>,
}

type WaitList = Arc<Mutex<HashMap<String, Waiting>>>;

pub struct Updates {
    releases_dir: PathBuf,
    base_url: String,
    server_key: SigningKey,
    store: Arc<Store>,
    /// Dates orders and the outcomes recorded for them.
    clock: Clock,
    waiting: WaitList,
    hashes: Arc<releases::HashCache>,
    /// Each agent's latest report, numbered: how a rollout tells a rollback from any
    /// other failure without reading an error's text.
    reported: Mutex<(u64, HashMap<String, Reported>)>,
}

/// An agent's latest update report, as [`Updates::last_report`] gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reported {
    /// Grows with every report this server took, from any agent.
    pub seq: u64,
    /// The version the report is about.
    pub version: String,
    pub report: Report,
}

/// An order on its way to one agent: the wire arguments, and where its report arrives.
pub struct Order {
    pub args: Map<String, Value>,
    manifest: Manifest,
    from: String,
    requested_by: String,
    report: oneshot::Receiver<Report>,
    waiting: WaitList,
}

impl Drop for Order {
    fn drop(&mut self) {
        // The caller went away (or the call ended): a late report is still recorded,
        // through `observe`, just not waited for.
        lock(&self.waiting).remove(&self.manifest.order_id);
    }
}

fn lock(w: &WaitList) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

fn refuse(code: ErrorCode, message: impl Into<String>) -> CallFailure {
    CallFailure::refusal(code, message)
}

impl Updates {
    pub fn new(
        releases_dir: PathBuf,
        base_url: String,
        server_key: SigningKey,
        store: Arc<Store>,
        clock: Clock,
    ) -> Self {
        Updates {
            releases_dir,
            base_url,
            server_key,
            store,
            clock,
            waiting: Arc::default(),
            hashes: Arc::default(),
            reported: Mutex::default(),
        }
    }

    /// Builds the signed order for `agent_id` from what the caller asked (`version`,
    /// `allow_downgrade`, both optional) and what the agent said it runs.
    pub async fn order(
        &self,
        who: &Principal,
        agent_id: &str,
        meta: Option<&AgentMeta>,
        args: &Map<String, Value>,
    ) -> Result<Order, CallFailure> {
        let Some(meta) = meta else {
            return Err(refuse(
                ErrorCode::Unsupported,
                format!(
                    "agent {agent_id} did not say which OS, architecture and version it runs, so no build can be picked for it; update it by hand"
                ),
            ));
        };
        let arch = meta.arch.clone().unwrap_or_default();
        let wanted = args.get("version").and_then(Value::as_str).map(str::trim);
        let downgrade = args.get("allow_downgrade").and_then(Value::as_bool).unwrap_or(false);
        let choice = choose(who, &meta.version, wanted, downgrade)?;
        let (dir, os, arch2) = (self.releases_dir.clone(), meta.os.clone(), arch.clone());
        let running = meta.version.clone();
        let hashes = self.hashes.clone();
        let found = tokio::task::spawn_blocking(move || {
            let release = match choice {
                Choice::Newest => releases::newest_for(&dir, &os, &arch2, &running),
                Choice::Exact(v) => releases::exact(&dir, &os, &arch2, v),
            }?;
            Some(
                hashes
                    .size_and_sha256(&release.path)
                    .map(|(size, sha)| (release, size, sha)),
            )
        })
        .await
        .map_err(|e| CallFailure::new(ErrorCode::Internal, format!("looking for agent builds failed: {e}")))?;
        let (release, size, sha256) = match found {
            Some(Ok(found)) => found,
            Some(Err(e)) => {
                return Err(CallFailure::new(
                    ErrorCode::Internal,
                    format!("cannot read the agent build: {e}"),
                ));
            }
            None => {
                let what = match wanted {
                    Some(v) => format!("no kenny-agent {v}"),
                    None => format!("no kenny-agent newer than {}", meta.version),
                };
                return Err(refuse(
                    ErrorCode::NotFound,
                    format!(
                        "{what} for {os}/{arch} on this server: put kenny-agent-<version>-{os}-{arch}{exe} in {dir}",
                        os = meta.os,
                        exe = if meta.os == "windows" { ".exe" } else { "" },
                        dir = self.releases_dir.display()
                    ),
                ));
            }
        };
        if size > kenny_proto::update::MAX_BUILD_BYTES {
            return Err(refuse(
                ErrorCode::BadArgs,
                format!(
                    "{} is {size} bytes, larger than any agent build may be",
                    release.file_name
                ),
            ));
        }
        let manifest = Manifest {
            purpose: MANIFEST_PURPOSE.into(),
            order_id: uuid::Uuid::new_v4().to_string(),
            agent_id: agent_id.to_owned(),
            version: release.version_text.clone(),
            os: meta.os.clone(),
            arch,
            file: release.file_name.clone(),
            size,
            sha256: sha256.clone(),
            // The agent judges downgrades by its own version: with one that cannot be
            // read, choose() let this through only as a superuser's named downgrade.
            allow_downgrade: kenny_proto::results::parse_version(&meta.version)
                .map_or(downgrade, |running| release.version < running),
            issued_at: self.clock.now(),
        };
        let (text, signature) = manifest.sign(&self.server_key);
        let wire = UpdateOrder {
            version: manifest.version.clone(),
            url: format!("{}/d/agent/{}", self.base_url, manifest.file),
            sha256,
            manifest: text,
            signature,
        };
        let (tx, report) = oneshot::channel();
        lock(&self.waiting).insert(
            manifest.order_id.clone(),
            Waiting {
                agent_id: agent_id.to_owned(),
                requested_by: who.username.clone(),
                tx,
            },
        );
        Ok(Order {
            args: wire.into_args(),
            manifest,
            from: meta.version.clone(),
            requested_by: who.username.clone(),
            report,
            waiting: self.waiting.clone(),
        })
    }

    /// After the agent answered that the build is staged: waits for its report and
    /// turns it into the call's final outcome.
    pub async fn settle(&self, mut order: Order, staged: Value) -> Result<Value, CallFailure> {
        let trial = staged
            .get("trial_secs")
            .and_then(Value::as_u64)
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_TRIAL)
            .min(MAX_TRIAL);
        let (manifest, from, requested_by) = (order.manifest.clone(), order.from.clone(), order.requested_by.clone());
        let limit = trial + REPORT_GRACE;
        let waited = tokio::time::timeout(limit, &mut order.report).await;
        match waited {
            Ok(Ok(report)) => match report.outcome {
                Outcome::Succeeded => {
                    let mut result = staged.as_object().cloned().unwrap_or_default();
                    result.insert("outcome".into(), json!("succeeded"));
                    result.insert("running_version".into(), json!(manifest.version));
                    Ok(Value::Object(result))
                }
                Outcome::RolledBack => Err(CallFailure::new(
                    ErrorCode::ExecFailed,
                    format!(
                        "kenny-agent {} was rolled back on {}: {}; the agent restored {} and runs it again",
                        manifest.version, manifest.agent_id, report.reason, report.from
                    ),
                )),
            },
            _ => {
                let record = UpdateRecord {
                    order_id: manifest.order_id.clone(),
                    agent_id: manifest.agent_id.clone(),
                    requested_by,
                    from_version: from,
                    to_version: manifest.version.clone(),
                    outcome: "no_report".into(),
                    detail: format!("no report within {}s of staging", limit.as_secs()),
                    at: self.clock.now(),
                };
                if let Err(e) = self.store.blocking(move |s| s.record_update(&record)).await {
                    tracing::warn!(error = %e, "could not record an update without report");
                }
                Err(CallFailure::new(
                    ErrorCode::Timeout,
                    format!(
                        "agent {} took kenny-agent {} and restarted, but has not reported within {}s whether it kept it; it may be offline: check list_agents or its page on the dashboard",
                        manifest.agent_id,
                        manifest.version,
                        limit.as_secs()
                    ),
                ))
            }
        }
    }

    /// A `log` frame from an authenticated agent: if it reports an update outcome for an
    /// order this server signed for that same agent, record it and wake the caller.
    pub fn observe(&self, agent_id: &str, log: &Log) {
        let Some(fields) = &log.fields else { return };
        if fields.get("event").and_then(Value::as_str) != Some(REPORT_EVENT) {
            return;
        }
        let Some(manifest) = self.genuine_manifest(agent_id, fields) else {
            tracing::warn!(agent = %agent_id, "update report dropped: it does not echo an order this server signed for this agent");
            return;
        };
        let text = |k: &str| {
            fields
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .chars()
                .take(crate::store::MAX_UPDATE_DETAIL)
                .collect::<String>()
        };
        let Some(outcome) = Outcome::parse(&text("outcome")) else {
            tracing::warn!(agent = %agent_id, "update report dropped: unknown outcome");
            return;
        };
        let report = Report {
            outcome,
            reason: text("reason"),
            from: text("from"),
        };
        {
            let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
            reported.0 += 1;
            let entry = Reported {
                seq: reported.0,
                version: manifest.version.clone(),
                report: report.clone(),
            };
            reported.1.insert(agent_id.to_owned(), entry);
        }
        let waiting = lock(&self.waiting).remove(&manifest.order_id);
        let requested_by = waiting.as_ref().map(|w| w.requested_by.clone()).unwrap_or_default();
        tracing::info!(agent = %agent_id, to = %manifest.version, outcome = outcome.as_str(), reason = %report.reason, "agent update finished");
        let record = UpdateRecord {
            order_id: manifest.order_id.clone(),
            agent_id: agent_id.to_owned(),
            requested_by,
            from_version: report.from.clone(),
            to_version: manifest.version.clone(),
            outcome: outcome.as_str().into(),
            detail: report.reason.clone(),
            at: self.clock.now(),
        };
        if let Some(w) = waiting
            && w.agent_id == agent_id
        {
            let _ = w.tx.send(report);
        }
        let store = self.store.clone();
        // Off the connection's read loop: nothing there writes to SQLite synchronously.
        tokio::spawn(async move {
            if let Err(e) = store.blocking(move |s| s.record_update(&record)).await {
                tracing::warn!(error = %e, "could not record an agent update report");
            }
        });
    }

    /// The latest report `agent_id` sent since this server started.
    pub(crate) fn last_report(&self, agent_id: &str) -> Option<Reported> {
        let reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        reported.1.get(agent_id).cloned()
    }

    fn genuine_manifest(&self, agent_id: &str, fields: &Map<String, Value>) -> Option<Manifest> {
        let text = fields.get("manifest")?.as_str()?;
        let signature = fields.get("signature")?.as_str()?;
        let manifest = verify_manifest(&self.server_key.verifying_key(), text, signature).ok()?;
        (manifest.agent_id == agent_id).then_some(manifest)
    }
}

/// Which build the caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    Newest,
    Exact((u64, u64, u64)),
}

/// The rules on versions: the newest newer build by default; an exact newer version on
/// request; an older one only for a superuser who names it and says so. When the agent
/// reports a version that is not one (a hostile or broken agent), no build can be told
/// newer than it, so every build is treated as a possible downgrade.
fn choose(who: &Principal, running: &str, wanted: Option<&str>, downgrade: bool) -> Result<Choice, CallFailure> {
    let parse = kenny_proto::results::parse_version;
    let Some(wanted) = wanted.filter(|w| !w.is_empty()) else {
        if parse(running).is_none() {
            return Err(refuse(
                ErrorCode::BadArgs,
                format!(
                    "the agent reports version {running:?}, which is not a version like 1.2.3, so no build can be told newer than it; a superuser may name the exact version in `version` with allow_downgrade: true"
                ),
            ));
        }
        if downgrade {
            return Err(refuse(
                ErrorCode::BadArgs,
                "allow_downgrade needs the exact older version to install in `version`",
            ));
        }
        return Ok(Choice::Newest);
    };
    let Some(version) = parse(wanted) else {
        return Err(refuse(
            ErrorCode::BadArgs,
            format!("version must look like 1.2.3, got {wanted:?}"),
        ));
    };
    let current = parse(running);
    if current == Some(version) {
        return Err(refuse(ErrorCode::BadArgs, format!("the agent already runs {running}")));
    }
    // `None < Some(_)`: a version nobody can read counts as newer than any build.
    if Some(version) < current || current.is_none() {
        if who.role != Role::Superuser {
            return Err(refuse(
                ErrorCode::Forbidden,
                format!("{wanted} is older than the running {running}; only a superuser may install an older agent"),
            ));
        }
        if !downgrade {
            return Err(refuse(
                ErrorCode::BadArgs,
                format!(
                    "{wanted} is older than the running {running}; to install it anyway pass allow_downgrade: true with this exact version"
                ),
            ));
        }
    }
    Ok(Choice::Exact(version))
}

#[cfg(test)]
mod tests;
