//! The one path every forwarded call takes: check scope for the call's typed target,
//! send it down that agent's connection, audit the outcome.
//!
//! The target arrives as an [`AgentId`] the caller already holds: the MCP edge took it
//! out of the call's own `agent_id` (`mcp::target`), a dashboard route from its URL, the
//! chat from the call it froze. Nothing here reads state that another session could
//! have written.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kenny_proto::AgentId;
use kenny_proto::catalog::{self, AGENT_ID_ARG, Tool};
use kenny_proto::dialect::{self, Dialect};
use kenny_proto::error::ErrorCode;
use kenny_proto::frame::AgentMeta;
use kenny_proto::proof::ResultProof;
use serde_json::{Map, Value};

use crate::audit::{ArgsDigest, AuditLog};
pub(crate) use crate::call_failure::CallFailure;
use crate::clock::Clock;
use crate::principal::Principal;
use crate::registry::{Answered, LinkError, Registry, Route};
use crate::store::{AuditFinish, AuditRow, OUTCOME_SENT, Store};
use crate::updates::{Order, Updates};

/// Extra time the server waits beyond how long the agent may work on a call, so the
/// agent's own `timeout` answer (which names the cause) arrives before ours.
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);
/// Longest tool name written to the audit trail; anything longer is not a tool.
const MAX_AUDITED_TOOL_NAME: usize = 64;

pub struct Forwarder {
    registry: Arc<Registry>,
    store: Arc<Store>,
    audit: AuditLog,
    digest: ArgsDigest,
    /// Overrides each tool's default wait for calls that set no `timeout_s`.
    timeout_override: Option<Duration>,
    /// Builds and follows up `agent_update` orders.
    updates: Arc<Updates>,
    /// When audit rows say a call happened, and the date a translated answer carries.
    clock: Clock,
    /// Where each call's end is counted.
    metrics: Arc<crate::metrics::Metrics>,
    /// In a cluster: carries calls to the replica holding their agent.
    cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// A forwarded call's outcome and where its answer came from.
pub struct Forwarded {
    pub outcome: Result<Value, CallFailure>,
    pub provenance: Provenance,
    /// The server replaced the agent's answer with its own account (an update's
    /// outcome): a proof covers the agent's answer, kept with the audit row.
    pub rewritten: bool,
}

/// Who vouches for a call's answer.
#[derive(Debug, Clone)]
pub enum Provenance {
    /// The agent signed it; the proof verified against its enrolled key.
    Signed(ResultProof),
    /// The agent answered but speaks a protocol older than 0.18, which does not sign.
    Unsigned,
    /// No answer from the agent to vouch for: refused, offline, timed out, or a
    /// signature that failed.
    NotAnswered,
}

/// A call ready to send: where the agent's live connection is, how long to wait, the
/// wire arguments, and for an update the order whose outcome the call waits for.
struct Prepared {
    route: Route,
    timeout: Duration,
    args: Map<String, Value>,
    update: Option<Order>,
    /// For an agent of the existing kenny, the call as the caller made it, to put its
    /// answer back into our shape.
    translate_back: Option<(Tool, Map<String, Value>)>,
}

impl Forwarder {
    pub fn new(
        registry: Arc<Registry>,
        store: Arc<Store>,
        audit: AuditLog,
        digest: ArgsDigest,
        timeout_override: Option<Duration>,
        updates: Arc<Updates>,
        clock: Clock,
    ) -> Self {
        Forwarder {
            registry,
            store,
            audit,
            digest,
            timeout_override,
            updates,
            clock,
            metrics: Default::default(),
            cluster: None,
        }
    }

    /// Sends calls for agents other replicas hold through `cluster`.
    pub fn clustered(mut self, cluster: Option<Arc<crate::cluster::Cluster>>) -> Self {
        self.cluster = cluster;
        self
    }

    /// Counts every call's end in `metrics`.
    pub fn counting(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn updates(&self) -> &Updates {
        &self.updates
    }

    /// Runs `tool` on the agent `target`, on behalf of `who`: [`Forwarder::forward_proved`]
    /// without the proof.
    pub async fn forward(
        &self,
        who: &Principal,
        target: &AgentId,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<Value, CallFailure> {
        self.forward_proved(who, target, tool, args).await.outcome
    }

    /// Runs `tool` on the agent `target`, on behalf of `who`; the outcome and where the
    /// answer came from (the agent's signed proof, or that it does not sign).
    ///
    /// The audit trail gets a row before the call is sent (outcome `sent`), completed
    /// when it ends, so even a call cut short by a crash leaves its trace; a refusal
    /// gets one row with its final outcome. A signed answer's proof is kept with its row.
    pub async fn forward_proved(
        &self,
        who: &Principal,
        target: &AgentId,
        tool: &str,
        args: Map<String, Value>,
    ) -> Forwarded {
        self.forward_by(who, target, tool, args, None).await
    }

    /// [`Forwarder::forward_proved`], waiting for the agent no later than `deadline`
    /// (a fan-out's overall deadline): past it the call ends `timeout`, audited so.
    pub async fn forward_by(
        &self,
        who: &Principal,
        target: &AgentId,
        tool: &str,
        args: Map<String, Value>,
        deadline: Option<Instant>,
    ) -> Forwarded {
        let started = Instant::now();
        let digest = self.digest.of(&args);
        let prepared = self.prepare(who, target, tool, args).await;
        let Prepared {
            route,
            timeout,
            args,
            update,
            translate_back,
        } = match prepared {
            Ok(ready) => ready,
            Err(refusal) => {
                let row = AuditRow {
                    agent_id: Some(target.to_string()),
                    args_digest: digest,
                    duration_ms: millis(started.elapsed()),
                    ..audit_row(&self.clock, who, tool, Some(&refusal))
                };
                self.audit.record(row).await;
                self.metrics.call(tool, "refused", started.elapsed());
                return Forwarded {
                    outcome: Err(refusal),
                    provenance: Provenance::NotAnswered,
                    rewritten: false,
                };
            }
        };
        let timeout = match deadline {
            Some(deadline) => timeout.min(deadline.saturating_duration_since(Instant::now())),
            None => timeout,
        };
        let agent_id = target;
        let call_id = uuid::Uuid::new_v4().to_string();
        let sent = AuditRow {
            call_id: Some(call_id.clone()),
            agent_id: Some(agent_id.to_string()),
            args_digest: digest,
            ..audit_row(&self.clock, who, tool, None)
        };
        self.audit
            .record(AuditRow {
                outcome: OUTCOME_SENT,
                ..sent
            })
            .await;

        let Answered {
            outcome: sent_to,
            proof,
        } = match &route {
            Route::Local(link) => link.call(call_id.clone(), tool, args, timeout).await,
            Route::Remote(remote) => match &self.cluster {
                Some(cluster) => cluster.relay(remote, call_id.clone(), tool, args, timeout).await,
                None => Answered::unproved(Err(LinkError::NotHeld("this server is not part of a cluster".into()))),
            },
        };
        let provenance = match (&sent_to, &proof) {
            (Ok(_) | Err(LinkError::Agent { .. }), Some(proof)) => Provenance::Signed(proof.clone()),
            (Ok(_) | Err(LinkError::Agent { .. }), None) => Provenance::Unsigned,
            _ => Provenance::NotAnswered,
        };
        let outcome = sent_to.map_err(|e| match e {
            LinkError::Agent { code, message } => CallFailure {
                code,
                message,
                refused: false,
            },
            LinkError::Disconnected(why) => CallFailure::new(
                ErrorCode::Offline,
                format!("agent {agent_id} disconnected while running {tool} ({why}); the outcome on the PC is unknown"),
            ),
            LinkError::NotHeld(why) => CallFailure::new(
                ErrorCode::Offline,
                format!(
                    "agent {agent_id} went offline as {tool} was sent ({why}); nothing ran, try again once it is back"
                ),
            ),
            LinkError::Timeout(t) => CallFailure::new(
                ErrorCode::Timeout,
                format!(
                    "agent {agent_id} did not answer {tool} within {}s; it may still be running on the PC",
                    t.as_secs()
                ),
            ),
            LinkError::BadProof(why) => CallFailure::new(
                ErrorCode::BadSignature,
                format!(
                    "{why}. The answer was discarded; what ran on the PC is unknown. Check the PC, and remove and re-enroll it if its key may be in other hands"
                ),
            ),
        });
        // An update is over when the agent says whether it kept the new build.
        let rewritten = update.is_some() || translate_back.is_some();
        let outcome = match (outcome, update) {
            (Ok(staged), Some(order)) => self.updates.settle(order, staged).await,
            (outcome, _) => outcome,
        };
        let outcome = match (outcome, translate_back) {
            (Ok(theirs), Some((tool, asked))) => Ok(dialect::current_result(tool, &asked, theirs, &self.clock.now())),
            (outcome, _) => outcome,
        };
        let failure = outcome.as_ref().err();
        self.metrics.call(tool, outcome_name(failure), started.elapsed());
        self.audit
            .finish(AuditFinish {
                call_id,
                outcome: outcome_name(failure),
                error_code: failure.map(|f| f.code.clone()),
                duration_ms: millis(started.elapsed()),
                proof: proof.as_ref().and_then(|p| serde_json::to_string(p).ok()),
            })
            .await;
        Forwarded {
            outcome,
            provenance,
            rewritten,
        }
    }

    /// The checks a call meets before anything about its PC's connection: scope, the
    /// tool, the role it needs, its arguments (normalized in place). A call held for
    /// approval meets them when it is held, so nobody is asked about one that could not run.
    pub fn check_call(
        &self,
        who: &Principal,
        target: &AgentId,
        tool: &str,
        args: &mut Map<String, Value>,
    ) -> Result<&'static catalog::ToolSpec, CallFailure> {
        let agent_id = target.as_str();
        self.check_reach(who, agent_id)?;
        // The target is a parameter; an `agent_id` left in the arguments must agree with
        // it, and never reaches the wire.
        if let Some(named) = args.remove(AGENT_ID_ARG)
            && named.as_str() != Some(agent_id)
        {
            return Err(CallFailure::refusal(
                ErrorCode::BadArgs,
                format!("the arguments name agent {named} but the call is for {agent_id}; pass one target"),
            ));
        }
        let Some(spec) = catalog::find(tool) else {
            return Err(CallFailure::refusal(
                ErrorCode::Unsupported,
                "there is no tool by that name; tools/list shows them",
            ));
        };
        if spec.needs_operator() {
            operator_floor(who, tool)?;
        }
        spec.normalize_args(args)
            .map_err(|m| CallFailure::refusal(ErrorCode::BadArgs, m))?;
        spec.validate_args(args)
            .map_err(|m| CallFailure::refusal(ErrorCode::BadArgs, m))?;
        Ok(spec)
    }

    /// Everything that may refuse a call before it is sent: scope, tool, arguments,
    /// connection. For a tool whose wire arguments the server builds (an update), the
    /// caller's arguments are replaced here by the ones the agent gets.
    async fn prepare(
        &self,
        who: &Principal,
        target: &AgentId,
        tool: &str,
        mut args: Map<String, Value>,
    ) -> Result<Prepared, CallFailure> {
        let agent_id = target.as_str();
        let spec = self.check_call(who, target, tool, &mut args)?;
        let Some(route) = self.registry.route(agent_id) else {
            return Err(self.not_connected(agent_id).await);
        };
        let timeout = match (args.get("timeout_s").is_some(), self.timeout_override) {
            (false, Some(forced)) => forced,
            _ => spec.work_limit(&args) + TIMEOUT_GRACE,
        };
        // The existing kenny's agents read other names and answer in other shapes.
        if route.meta().map(AgentMeta::dialect) != Some(Dialect::Current) {
            let asked = args.clone();
            let args =
                dialect::legacy_args(spec, args).map_err(|why| CallFailure::refusal(ErrorCode::Unsupported, why.0))?;
            return Ok(Prepared {
                route,
                timeout,
                args,
                update: None,
                translate_back: Some((spec.tool, asked)),
            });
        }
        if !spec.args_built_by_server() {
            return Ok(Prepared {
                route,
                timeout,
                args,
                update: None,
                translate_back: None,
            });
        }
        let order = self.updates.order(who, agent_id, route.meta(), &args).await?;
        Ok(Prepared {
            route,
            timeout,
            args: order.args.clone(),
            update: Some(order),
            translate_back: None,
        })
    }

    /// Scope first, so a scoped user learns nothing about hosts outside its reach.
    pub fn check_reach(&self, who: &Principal, agent_id: &str) -> Result<(), CallFailure> {
        if who.may_reach(agent_id) {
            Ok(())
        } else {
            Err(CallFailure::refusal(
                ErrorCode::Forbidden,
                format!(
                    "{} may not reach agent {agent_id}; ask a superuser to assign it",
                    who.username
                ),
            ))
        }
    }

    /// Why an agent has no live connection: never enrolled here, or just not online.
    pub async fn not_connected(&self, agent_id: &str) -> CallFailure {
        let id = agent_id.to_owned();
        match self.store.blocking(move |s| s.agent(&id)).await {
            Ok(Some(rec)) => CallFailure::refusal(
                ErrorCode::Offline,
                format!(
                    "agent {agent_id} is not connected (last seen {}); check that kenny-agent is running on that PC",
                    rec.last_seen.as_deref().unwrap_or("never")
                ),
            ),
            Ok(None) => CallFailure::refusal(
                ErrorCode::UnknownAgent,
                format!("no agent with id {agent_id:?}; list_agents shows the ids you can use"),
            ),
            Err(e) => CallFailure::new(ErrorCode::Internal, format!("could not look up agent {agent_id}: {e}")),
        }
    }

    /// Audits a server-side call that reached no agent and succeeded (a dashboard read
    /// of what the server knows about one host), so it leaves the same trace as a
    /// forwarded call: who, from where, which host.
    pub async fn audit_served(&self, who: &Principal, agent_id: &str, tool: &str) {
        let row = AuditRow {
            agent_id: Some(agent_id.to_owned()),
            args_digest: self.digest.of(&Map::new()),
            ..audit_row(&self.clock, who, tool, None)
        };
        self.audit.record(row).await;
    }

    /// Audits a call held for approval (outcome `held`, the approval id as its
    /// target); when it runs, its own row follows like any call's.
    pub async fn audit_held(
        &self,
        who: &Principal,
        agent_id: &str,
        tool: &str,
        args: &Map<String, Value>,
        approval: &str,
    ) {
        let row = AuditRow {
            agent_id: Some(agent_id.to_owned()),
            target: Some(approval.to_owned()),
            args_digest: self.digest.of(args),
            outcome: OUTCOME_HELD,
            ..audit_row(&self.clock, who, tool, None)
        };
        self.audit.record(row).await;
    }

    /// Audits a decision on a held call made outside `/api` (the caller's answer to an
    /// elicitation: `action` is `accept` or `decline`), the approval id as its target.
    pub async fn audit_decision(&self, who: &Principal, agent_id: &str, action: &str, approval: &str) {
        let row = AuditRow {
            agent_id: Some(agent_id.to_owned()),
            target: Some(approval.to_owned()),
            args_digest: self.digest.of(&Map::new()),
            ..audit_row(&self.clock, who, &format!("approval {action} (MCP elicitation)"), None)
        };
        self.audit.record(row).await;
    }

    /// Audits a call refused before it reached the forwarder: one without a usable
    /// target (`agent_id` = `None`), or a server-only tool refused (`select_agent` out of
    /// scope, a dashboard action on an unknown host). `args` are digested like any call's.
    pub async fn audit_refusal(
        &self,
        who: &Principal,
        agent_id: Option<String>,
        tool: &str,
        args: &Map<String, Value>,
        failure: &CallFailure,
    ) {
        let row = AuditRow {
            agent_id,
            args_digest: self.digest.of(args),
            ..audit_row(&self.clock, who, tool, Some(failure))
        };
        self.audit.record(row).await;
    }
}

/// Refuses `tool` to a principal below the operator role, whatever hosts it reaches
/// (a `user`, say a child's account, must not lift its own filter or make itself admin).
pub(crate) fn operator_floor(who: &Principal, tool: &str) -> Result<(), CallFailure> {
    if who.role >= crate::principal::Role::Operator {
        return Ok(());
    }
    Err(CallFailure::refusal(
        ErrorCode::Forbidden,
        format!(
            "{tool} needs the operator role and {} is a {}; ask an operator or a superuser to make this change",
            who.username,
            who.role.as_str()
        ),
    ))
}

/// The audit outcome of a call held for approval.
pub(crate) const OUTCOME_HELD: &str = "held";

fn outcome_name(failure: Option<&CallFailure>) -> &'static str {
    match failure {
        None => "ok",
        Some(f) if f.refused => "refused",
        Some(_) => "error",
    }
}

/// An audit row for `who` (user, credential, client address) calling `tool` now on
/// `clock`, with its outcome; the caller fills in the call id, the PC, the arguments'
/// digest and the time taken where it has them.
pub(crate) fn audit_row(clock: &Clock, who: &Principal, tool: &str, failure: Option<&CallFailure>) -> AuditRow {
    AuditRow {
        call_id: None,
        at: clock.now(),
        // The server's own actions belong to no user.
        user_id: (who.credential_kind != crate::principal::CredentialKind::Server).then_some(who.user_id),
        username: Some(who.username.clone()),
        credential_kind: Some(who.credential_kind.as_str().to_owned()),
        credential_id: Some(who.credential_id.clone()),
        client_addr: who.client_addr.clone(),
        target: None,
        agent_id: None,
        tool: if tool.len() <= MAX_AUDITED_TOOL_NAME {
            tool.to_owned()
        } else {
            "<over-long tool name>".to_owned()
        },
        args_digest: String::new(),
        outcome: outcome_name(failure),
        error_code: failure.map(|f| f.code.clone()),
        duration_ms: 0,
    }
}

/// A duration as an audit row's `duration_ms`.
pub(crate) fn millis(took: Duration) -> i64 {
    i64::try_from(took.as_millis()).unwrap_or(i64::MAX)
}
