//! The web filter run by the server. Each PC's configuration lives here (`config`);
//! `effective` turns it, the schedule (`schedule`) and the categories' lists (`lists`,
//! refreshed by `fetch`) into what the PC should block; `enforce` keeps every online
//! PC at that state (pushing at each schedule edge, when a PC comes online, when the
//! configuration or a list changes) through the same forwarder as any call, audited
//! under the server's own principal with the rule that made it act; `activity` keeps
//! the web activity of PCs that record it and flags what matches.

mod activity;
pub(crate) mod config;
pub(crate) mod effective;
mod enforce;
pub(crate) mod fetch;
pub(crate) mod lists;
pub(crate) mod schedule;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use jiff::Timestamp;
use kenny_proto::AgentId;
use kenny_proto::error::ErrorCode;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::forward::{CallFailure, Forwarder};
use crate::principal::Principal;
use crate::registry::Registry;
use crate::store::{FilterConfigRow, FilterStateRow, SourceFetch, SourceRow, Store, StoreError};
use config::FilterConfig;
use effective::{Desired, Phase};
use lists::{Catalog, SourceList};

/// What the agents' `webfilter_apply` takes at most (its argument schema).
pub(crate) const MAX_DOMAINS_ON_THE_WIRE: usize = 10_000;

/// Where the server runs, as the filter needs it.
pub(crate) struct Site<'a> {
    /// The URL agents reach the server at: its host is never blocked.
    pub public_url: &'a str,
    /// The data directory, holding `webfilter-lists/`.
    pub data_dir: &'a std::path::Path,
    /// Most names one PC's filter may block.
    pub cap: usize,
}

/// One PC's filter in memory.
#[derive(Debug, Clone, Default)]
struct PcFilter {
    config: FilterConfig,
    /// Bumped by every change to the configuration, to know a computed list is stale.
    version: u64,
    updated_at: String,
    updated_by: String,
    state: FilterStateRow,
    /// The last computed list and what it was computed from.
    computed: Option<(Key, Desired)>,
    /// The phase the enforcer last saw, to tell a schedule edge.
    seen_phase: Option<Phase>,
    /// The connection the enforcer last acted for, to tell a PC that came online.
    seen_conn: Option<u64>,
    /// Not before then: a push failed.
    retry_at: Option<OffsetDateTime>,
    retries: u32,
    /// When the PC's web activity was last asked for.
    activity_at: Option<OffsetDateTime>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    version: u64,
    phase: Phase,
    generation: u64,
}

/// The web filter's part of the state: shared, cheap to clone.
#[derive(Clone)]
pub struct WebFilter {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<Store>,
    clock: Clock,
    registry: Arc<Registry>,
    forwarder: Arc<Forwarder>,
    /// Names never blocked: the kenny server's own host.
    protected: Vec<String>,
    cap: usize,
    lists_dir: PathBuf,
    http: reqwest::Client,
    catalog: RwLock<Arc<Catalog>>,
    pcs: Mutex<HashMap<String, PcFilter>>,
    /// One push per PC at a time, so the enforcer and a caller never interleave.
    push_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    activity: activity::Queue,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pushed {
    Applied {
        count: usize,
        hash: String,
        doh_lockdown: bool,
    },
    Cleared {
        why: String,
    },
}

impl WebFilter {
    /// Loads every PC's configuration and state and the sources' last good lists.
    pub(crate) fn load(
        store: Arc<Store>,
        clock: Clock,
        registry: Arc<Registry>,
        forwarder: Arc<Forwarder>,
        alerts: crate::alerts::Alerts,
        site: Site<'_>,
    ) -> Result<WebFilter, StoreError> {
        let mut pcs = HashMap::new();
        for row in store.filter_configs()? {
            let config: FilterConfig = serde_json::from_str(&row.config)
                .map_err(|e| StoreError::Internal(format!("the web filter of {} cannot be read: {e}", row.agent_id)))?;
            pcs.insert(
                row.agent_id.clone(),
                PcFilter {
                    config,
                    version: 1,
                    updated_at: row.updated_at,
                    updated_by: row.updated_by,
                    state: FilterStateRow {
                        agent_id: row.agent_id,
                        ..Default::default()
                    },
                    ..Default::default()
                },
            );
        }
        for state in store.filter_states()? {
            if let Some(pc) = pcs.get_mut(&state.agent_id) {
                pc.state = state;
            }
        }
        let Site {
            public_url,
            data_dir,
            cap,
        } = site;
        let protected = reqwest::Url::parse(public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .and_then(|h| kenny_proto::domains::normalize(&h).ok())
            .into_iter()
            .collect();
        let lists_dir = data_dir.join(fetch::LISTS_DIR);
        if let Err(e) = std::fs::create_dir_all(&lists_dir) {
            tracing::warn!(dir = %lists_dir.display(), "cannot create the web filter lists directory: {e}");
        }
        let filter = WebFilter {
            inner: Arc::new(Inner {
                activity: activity::Queue::new(store.clone(), clock.clone(), alerts),
                store,
                clock,
                registry,
                forwarder,
                protected,
                cap: cap.clamp(1, MAX_DOMAINS_ON_THE_WIRE),
                lists_dir,
                http: fetch::client(),
                catalog: RwLock::new(Arc::new(Catalog::default())),
                pcs: Mutex::new(pcs),
                push_locks: Mutex::default(),
            }),
        };
        filter.rebuild_catalog()?;
        Ok(filter)
    }

    /// Starts the enforcer and the list refresher.
    pub(crate) fn start(&self, leader: crate::leader::Leader, shutdown: tokio_util::sync::CancellationToken) {
        tokio::spawn(enforce::run(self.clone(), shutdown.clone()));
        tokio::spawn(enforce::refresh_sources(self.clone(), leader, shutdown));
    }

    fn pcs(&self) -> std::sync::MutexGuard<'_, HashMap<String, PcFilter>> {
        self.inner.pcs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.inner.catalog.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn rebuild_catalog(&self) -> Result<(), StoreError> {
        let sources: Vec<SourceList> = self
            .inner
            .store
            .source_lists()?
            .into_iter()
            .map(|(category, url, domains)| SourceList { category, url, domains })
            .collect();
        let mut slot = self.inner.catalog.write().unwrap_or_else(|p| p.into_inner());
        *slot = Arc::new(Catalog::build(&sources, slot.generation + 1));
        Ok(())
    }

    fn now(&self) -> (OffsetDateTime, Timestamp) {
        let now = self.inner.clock.now_utc();
        (
            now,
            Timestamp::from_second(now.unix_timestamp()).unwrap_or(Timestamp::UNIX_EPOCH),
        )
    }

    /// What `agent` should hold now, computed again only when its inputs changed.
    fn desired(&self, agent: &str, t: Timestamp) -> Option<(Phase, Desired)> {
        let catalog = self.catalog();
        let mut pcs = self.pcs();
        let pc = pcs.get_mut(agent)?;
        let phase = effective::phase(&pc.config, t);
        let key = Key {
            version: pc.version,
            phase: phase.clone(),
            generation: catalog.generation,
        };
        if let Some((k, d)) = &pc.computed
            && *k == key
        {
            return Some((phase, d.clone()));
        }
        let desired = effective::compute(&pc.config, &phase, &catalog, &self.inner.protected, self.inner.cap);
        pc.computed = Some((key, desired.clone()));
        Some((phase, desired))
    }

    fn push_lock(&self, agent: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.inner.push_locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(agent.to_owned()).or_default().clone()
    }

    fn save_state(&self, agent: &str, f: impl FnOnce(&mut FilterStateRow)) -> Option<FilterStateRow> {
        let mut pcs = self.pcs();
        let pc = pcs.get_mut(agent)?;
        pc.state.agent_id = agent.to_owned();
        f(&mut pc.state);
        Some(pc.state.clone())
    }

    async fn store_state(&self, state: Option<FilterStateRow>) {
        if let Some(state) = state {
            let agent = state.agent_id.clone();
            if let Err(e) = self.inner.store.blocking(move |s| s.put_filter_state(&state)).await {
                tracing::warn!(agent = %agent, "could not store the web filter state: {e}");
            }
        }
    }

    /// Sends `agent` what it should hold now, on behalf of `who`; `rule` says why (the
    /// call, or what made the server act).
    pub(crate) async fn push(&self, who: &Principal, agent: &AgentId, rule: &str) -> Result<Pushed, CallFailure> {
        let lock = self.push_lock(agent.as_str());
        let _one_at_a_time = lock.lock().await;
        let (_, t) = self.now();
        let Some((_, desired)) = self.desired(agent.as_str(), t) else {
            return Err(CallFailure::refusal(
                ErrorCode::NotFound,
                format!("{agent} has no web filter yet; set one up with webfilter_set first"),
            ));
        };
        let outcome = match &desired {
            Desired::OverCap { count, cap } => Err(CallFailure::refusal(
                ErrorCode::Blocked,
                format!(
                    "the filter for {agent} would block {count} names, over the cap of {cap}; nothing was sent and the PC keeps its current list. Turn a category off or use smaller list sources"
                ),
            )),
            Desired::Apply {
                domains,
                hash,
                doh_lockdown,
            } => {
                let mut args = Map::new();
                args.insert("domains".into(), json!(domains.as_slice()));
                args.insert("list_hash".into(), json!(hash));
                args.insert(
                    "doh_policy".into(),
                    json!(if *doh_lockdown { "disable" } else { "leave" }),
                );
                // `leave` keeps a DNS-over-HTTPS policy set before; only a clear takes
                // it out, so a lockdown turned off is cleared first.
                let lifted = !*doh_lockdown && self.pcs().get(agent.as_str()).is_some_and(|pc| pc.state.applied_doh);
                let forwarder = &self.inner.forwarder;
                let sent = async {
                    if lifted {
                        forwarder.forward(who, agent, "webfilter_clear", Map::new()).await?;
                    }
                    forwarder.forward(who, agent, "webfilter_apply", args).await
                };
                sent.await.map(|_| Pushed::Applied {
                    count: domains.len(),
                    hash: hash.clone(),
                    doh_lockdown: *doh_lockdown,
                })
            }
            Desired::Clear { why } => self
                .inner
                .forwarder
                .forward(who, agent, "webfilter_clear", Map::new())
                .await
                .map(|_| Pushed::Cleared { why: why.clone() }),
        };
        let now = self.inner.clock.now();
        let state = self.save_state(agent.as_str(), |s| match &outcome {
            Ok(pushed) => {
                let (hash, count, doh) = match pushed {
                    Pushed::Applied {
                        count,
                        hash,
                        doh_lockdown,
                    } => (Some(hash.clone()), *count as i64, *doh_lockdown),
                    Pushed::Cleared { .. } => (None, 0, false),
                };
                s.applied_doh = doh;
                s.applied_hash = hash.clone();
                s.applied_count = count;
                s.applied_at = Some(now.clone());
                s.applied_by = Some(who.username.clone());
                s.applied_rule = Some(rule.to_owned());
                // The agent just wrote it: that is what it holds.
                s.observed_hash = hash.clone();
                s.observed_active = Some(hash.is_some());
                s.observed_at = Some(now.clone());
                s.problem = None;
                s.problem_at = None;
            }
            Err(f) => {
                s.problem = Some(format!("{}: {}", f.code, f.message));
                s.problem_at = Some(now.clone());
            }
        });
        self.store_state(state).await;
        outcome
    }

    /// Asks the PC what its hosts file holds and records it (for drift).
    pub(crate) async fn check(&self, who: &Principal, agent: &AgentId) -> Result<(), CallFailure> {
        let status = self
            .inner
            .forwarder
            .forward(who, agent, "webfilter_status", Map::new())
            .await?;
        let active = status.get("active").and_then(Value::as_bool).unwrap_or(false);
        // Our agents hash what the block holds; the existing kenny's only echo the hash
        // they were given.
        let hash = status
            .get("content_hash")
            .or_else(|| status.get("list_hash"))
            .and_then(Value::as_str)
            .filter(|_| active)
            .map(str::to_owned);
        let now = self.inner.clock.now();
        let state = self.save_state(agent.as_str(), |s| {
            s.observed_active = Some(active);
            s.observed_hash = hash;
            s.observed_at = Some(now);
        });
        self.store_state(state).await;
        Ok(())
    }

    /// How many PCs have a filter set up.
    pub(crate) fn configured(&self) -> usize {
        self.pcs().len()
    }

    /// Whether `agent` has a filter configured here.
    pub(crate) fn has(&self, agent: &str) -> bool {
        self.pcs().contains_key(agent)
    }

    /// The configuration and state of `agent`, as `webfilter_get` and the panel show it.
    pub(crate) fn describe(&self, agent: &str) -> Value {
        let (now, t) = self.now();
        let desired = self.desired(agent, t);
        let categories = self.catalog().shown();
        let pcs = self.pcs();
        let Some(pc) = pcs.get(agent) else {
            return json!({
                "agent_id": agent,
                "configured": false,
                "config": FilterConfig::default().shown(),
                "categories_available": categories,
                "state": {"summary": "no web filter is set up for this PC"},
            });
        };
        let (phase, desired) =
            desired.unwrap_or_else(|| (effective::phase(&pc.config, t), Desired::Clear { why: String::new() }));
        let s = &pc.state;
        let applied_known = s.applied_at.is_some();
        let drift = drifted(s);
        let pending = applied_known && desired.differs_from(s.applied_hash.as_deref(), s.applied_doh);
        let next = effective::next_edge(&pc.config, t).map(|(at, window)| {
            json!({"at": crate::clock::format(OffsetDateTime::from_unix_timestamp(at.as_second()).unwrap_or(now)), "window": window})
        });
        let (want, count, over_cap) = match &desired {
            Desired::Apply { domains, hash, .. } => (
                json!({"action": "apply", "list_hash": hash}),
                domains.len(),
                Value::Null,
            ),
            Desired::Clear { why } => (json!({"action": "clear", "why": why}), 0, Value::Null),
            Desired::OverCap { count, cap } => (
                json!({"action": "refused"}),
                *count,
                json!(format!(
                    "{count} names, over the cap of {cap}: refused, the PC keeps its current list"
                )),
            ),
        };
        let summary = summary(&desired, s, drift, pending, &phase);
        json!({
            "agent_id": agent,
            "configured": true,
            "config": pc.config.shown(),
            "updated_at": pc.updated_at,
            "updated_by": pc.updated_by,
            "categories_available": categories,
            "state": {
                "summary": summary,
                "effective": want,
                "effective_count": count,
                "over_cap": over_cap,
                "enabled_now": phase.enabled,
                "categories_now": phase.categories,
                "open_windows": phase.open_windows,
                "next_change": next,
                "applied": s.applied_at.as_ref().map(|at| json!({
                    "list_hash": s.applied_hash, "count": s.applied_count, "at": at,
                    "by": s.applied_by, "rule": s.applied_rule,
                })),
                "observed": s.observed_at.as_ref().map(|at| json!({
                    "active": s.observed_active, "hash": s.observed_hash, "at": at,
                })),
                "drift": drift,
                "pending": pending,
                "problem": s.problem.as_ref().map(|p| json!({"message": p, "at": s.problem_at})),
                "cap": self.inner.cap,
            },
        })
    }

    /// Stores `config` for `agent` as changed by `who`.
    pub(crate) async fn store_config(
        &self,
        who: &Principal,
        agent: &str,
        config: FilterConfig,
    ) -> Result<(), StoreError> {
        let row = FilterConfigRow {
            agent_id: agent.to_owned(),
            config: serde_json::to_string(&config).map_err(|e| StoreError::Internal(e.to_string()))?,
            updated_at: self.inner.clock.now(),
            updated_by: who.username.clone(),
        };
        let stored = row.clone();
        self.inner.store.blocking(move |s| s.put_filter_config(&stored)).await?;
        self.adopt(row, config);
        Ok(())
    }

    /// Reads `agent`'s settings again, as another replica stored them.
    pub(crate) async fn reload_config(&self, agent: &str) -> Result<(), StoreError> {
        let id = agent.to_owned();
        let rows = self.inner.store.blocking(move |s| s.filter_configs()).await?;
        let Some(row) = rows.into_iter().find(|r| r.agent_id == id) else {
            return Ok(());
        };
        let config: FilterConfig = serde_json::from_str(&row.config)
            .map_err(|e| StoreError::Internal(format!("the web filter of {agent} cannot be read: {e}")))?;
        self.adopt(row, config);
        Ok(())
    }

    /// Makes `config` (stored as `row`) the one the enforcer applies.
    fn adopt(&self, row: FilterConfigRow, config: FilterConfig) {
        let agent = row.agent_id.as_str();
        let mut pcs = self.pcs();
        let pc = pcs.entry(agent.to_owned()).or_insert_with(|| PcFilter {
            state: FilterStateRow {
                agent_id: agent.to_owned(),
                ..Default::default()
            },
            ..Default::default()
        });
        pc.config = config;
        pc.version += 1;
        pc.updated_at = row.updated_at;
        pc.updated_by = row.updated_by;
        // A new configuration is worth trying at once, whatever failed before.
        pc.retry_at = None;
        pc.retries = 0;
    }

    pub(crate) fn config_of(&self, agent: &str) -> FilterConfig {
        self.pcs().get(agent).map(|pc| pc.config.clone()).unwrap_or_default()
    }

    pub(crate) fn sources(&self) -> Result<Vec<SourceRow>, StoreError> {
        self.inner.store.list_sources()
    }

    /// Adds a list source and fetches it at once; the source is kept even when that
    /// first fetch fails (it says why and is tried again on its schedule).
    pub(crate) async fn add_source(
        &self,
        who: &Principal,
        category: &str,
        url: &str,
        refresh_minutes: i64,
    ) -> Result<SourceRow, String> {
        lists::check_category_name(category)?;
        fetch::origin(url, &self.inner.lists_dir)?;
        if !(15..=10_080).contains(&refresh_minutes) {
            return Err(format!(
                "refresh_minutes must be 15 to 10080 (a week), not {refresh_minutes}"
            ));
        }
        let (category, url, by, at) = (
            category.to_owned(),
            url.trim().to_owned(),
            who.username.clone(),
            self.inner.clock.now(),
        );
        let row = self
            .inner
            .store
            .blocking(move |s| s.add_source(&category, &url, refresh_minutes, &by, &at))
            .await
            .map_err(|e| e.to_string())?;
        self.refresh_source(&row).await;
        let id = row.id;
        Ok(self
            .inner
            .store
            .blocking(move |s| s.source(id))
            .await
            .ok()
            .flatten()
            .unwrap_or(row))
    }

    pub(crate) async fn remove_source(&self, id: i64) -> Result<bool, StoreError> {
        let removed = self.inner.store.blocking(move |s| s.remove_source(id)).await?;
        if removed {
            self.rebuild_catalog()?;
        }
        Ok(removed)
    }

    /// Fetches one source now and records how it went.
    pub(crate) async fn refresh_source(&self, source: &SourceRow) -> SourceFetch {
        let outcome = fetch::fetch(&self.inner.http, source, &self.inner.lists_dir).await;
        let (id, at, recorded) = (source.id, self.inner.clock.now(), outcome.clone());
        if let Err(e) = self
            .inner
            .store
            .blocking(move |s| s.record_fetch(id, &at, &recorded))
            .await
        {
            tracing::warn!(source = %source.url, "could not record a list fetch: {e}");
        }
        match &outcome {
            SourceFetch::Fresh { domains, .. } => {
                tracing::info!(source = %source.url, names = domains.len(), "web filter list fetched");
                if let Err(e) = self.rebuild_catalog() {
                    tracing::warn!("could not rebuild the web filter categories: {e}");
                }
            }
            SourceFetch::Failed(why) => {
                tracing::warn!(source = %source.url, "web filter list not updated, the last good copy stays: {why}")
            }
            SourceFetch::Unchanged => {}
        }
        outcome
    }

    /// Takes a `web_activity` section from a snapshot (never waits: the section is
    /// queued and recorded in the background).
    pub(crate) fn take_activity(&self, agent: &str, section: &Value) {
        let flags = self.flagger(agent);
        self.inner.activity.offer(agent, section, flags);
    }

    fn flagger(&self, agent: &str) -> activity::Flagger {
        let config = self.config_of(agent);
        let mut categories: std::collections::BTreeSet<String> = config.categories.clone();
        for w in &config.schedules {
            categories.extend(w.categories.iter().flatten().cloned());
        }
        activity::Flagger {
            catalog: self.catalog(),
            categories,
            entries: config.entries,
        }
    }

    /// Drops web activity last seen more than [`activity::KEPT_DAYS`] ago.
    async fn prune_activity(&self, now: OffsetDateTime) {
        let before = crate::clock::format(now - time::Duration::days(activity::KEPT_DAYS));
        match self.inner.store.blocking(move |s| s.prune_activity(&before)).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(rows = n, "old web activity deleted"),
            Err(e) => tracing::warn!("could not delete old web activity: {e}"),
        }
    }

    pub(crate) async fn activity(
        &self,
        agent: &str,
        hours: u32,
        flagged_only: bool,
        limit: u32,
    ) -> Result<Vec<crate::store::ActivityRow>, StoreError> {
        let (now, _) = self.now();
        let since = crate::clock::format(now - time::Duration::hours(i64::from(hours)));
        let agent = agent.to_owned();
        self.inner
            .store
            .blocking(move |s| s.activity(&agent, &since, flagged_only, limit))
            .await
    }
}

impl FilterConfig {
    /// The configuration as callers see it (entries as a list).
    pub(crate) fn shown(&self) -> Value {
        json!({
            "enabled": self.enabled,
            "mode": self.mode,
            "categories": self.categories,
            "entries": self.entries.iter().map(|(d, k)| json!({"domain": d, "kind": k})).collect::<Vec<_>>(),
            "doh_lockdown": self.doh_lockdown,
            "record_activity": self.record_activity,
            "schedules": self.schedules,
        })
    }
}

/// Whether the PC was last seen holding something other than what kenny applied there.
fn drifted(s: &FilterStateRow) -> bool {
    s.observed_at.is_some()
        && s.applied_at.is_some()
        && (s.observed_hash != s.applied_hash || s.observed_active != Some(s.applied_hash.is_some()))
}

/// One line for people: what the PC holds and what comes next.
fn summary(desired: &Desired, s: &FilterStateRow, drift: bool, pending: bool, phase: &Phase) -> String {
    if let Desired::OverCap { count, cap } = desired {
        return format!("over the cap: {count} names to block, at most {cap}; the PC keeps its current list");
    }
    if drift {
        return "drifted: the PC's hosts file no longer holds what kenny applied".to_owned();
    }
    if let Some(p) = &s.problem {
        return format!("not applied: {p}");
    }
    if s.applied_at.is_none() {
        return "not applied yet".to_owned();
    }
    if pending {
        return "waiting to be applied (the PC is offline or a push is due)".to_owned();
    }
    match desired {
        Desired::Apply { domains, .. } => {
            let windows = if phase.open_windows.is_empty() {
                String::new()
            } else {
                format!(" (schedule: {})", phase.open_windows.join(", "))
            };
            format!("applied: {} names blocked{windows}", domains.len())
        }
        Desired::Clear { why } => format!("nothing blocked: {why}"),
        Desired::OverCap { .. } => String::new(),
    }
}
