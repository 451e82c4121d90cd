//! `/hosts/{id}`: one PC: facts, latest telemetry by section, recent calls, the last
//! screenshot, and the action buttons (which call `/api/agent/{id}/...`).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;
use std::sync::Arc;

use super::charts;
use super::household;
use super::{Nav, badge, chat_panel, layout, message_page, short_time, state_badge, time_el, viewer};
use crate::fleet::AgentSummary;
use crate::health::{Assessment, Status, assess};
use crate::history::{DiskForecast, forecast};
use crate::principal::Role;
use crate::state::{Accounts, Fleet};
use crate::store::{AuditEntry, AuditFilter, ChangeRow, MetricRow, ScreenshotMeta, UpdateRecord};

const RECENT_CALLS: u32 = 15;
const CHANGES_SHOWN: u32 = 30;

/// What the page shows besides the agent's own record.
struct Extras {
    /// (collected_at, received_at, snapshot)
    telemetry: Option<(String, String, Value)>,
    /// The server's verdict on that snapshot.
    health: Option<Arc<Assessment>>,
    screenshot: Option<ScreenshotMeta>,
    recent: Vec<AuditEntry>,
    /// How the newest agent update ended.
    last_update: Option<UpdateRecord>,
    /// What changed over the last week.
    changes: Vec<ChangeRow>,
    /// History points since the chart's range or a week back, whichever is longer.
    history: Vec<MetricRow>,
    /// The web filter as `webfilter_get` shows it.
    webfilter: Value,
    /// Recent web activity (operators only: it is personal).
    activity: Vec<crate::store::ActivityRow>,
    /// Whether the viewer may change the filter and the accounts.
    can_change: bool,
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct HostQuery {
    range: Option<String>,
}

pub(super) async fn page(
    State(accounts): State<Accounts>,
    State(fleet): State<Fleet>,
    headers: HeaderMap,
    Path(agent_id): Path<String>,
    Query(query): Query<HostQuery>,
) -> Response {
    let range = charts::range_of(query.range.as_deref());
    let path = format!("/hosts/{agent_id}");
    let (who, csrf) = match viewer(&accounts, &headers, &path).await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    let not_found = |who, csrf| {
        message_page(
            who,
            csrf,
            StatusCode::NOT_FOUND,
            "No such PC",
            "There is no PC by that name that you can see.",
        )
    };
    let agent = match fleet.one(&who, &agent_id).await {
        Ok(Some(a)) => a,
        Ok(None) => return not_found(&who, &csrf),
        Err(e) => {
            tracing::error!(error = %e, "reading an agent failed");
            return message_page(
                &who,
                &csrf,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The PC could not be read; see the server log.",
            );
        }
    };
    let (id, own_calls) = (agent_id.clone(), (who.role == Role::User).then_some(who.user_id));
    let now = fleet.clock.now_utc();
    let week_ago = crate::clock::format(now - time::Duration::days(7));
    let history_from = crate::clock::format(now - time::Duration::hours(range.hours.max(24 * 7)));
    let extras = fleet
        .store
        .blocking(move |s| {
            let telemetry = s
                .latest_telemetry(&id)?
                .map(|(c, r, snap)| (c, r, serde_json::from_str(&snap).unwrap_or(Value::Null)));
            let recent = s.audit(&AuditFilter {
                agent_id: Some(id.clone()),
                // A `user` sees its own calls only, as on the audit page.
                user_id: own_calls,
                limit: RECENT_CALLS,
                ..Default::default()
            })?;
            Ok(Extras {
                telemetry,
                health: None,
                screenshot: s.screenshot_meta(&id)?,
                recent,
                last_update: s.agent_updates(&id, 1)?.into_iter().next(),
                changes: s.changes_of(&id, &week_ago, CHANGES_SHOWN)?,
                history: s.metrics(&id, &history_from)?,
                webfilter: Value::Null,
                activity: Vec::new(),
                can_change: false,
            })
        })
        .await;
    let mut extras = match extras {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(error = %e, "reading host details failed");
            Extras {
                telemetry: None,
                health: None,
                screenshot: None,
                recent: Vec::new(),
                last_update: None,
                changes: Vec::new(),
                history: Vec::new(),
                webfilter: Value::Null,
                activity: Vec::new(),
                can_change: false,
            }
        }
    };
    extras.can_change = who.role >= Role::Operator;
    extras.webfilter = fleet.webfilter.describe(&agent_id);
    if extras.can_change {
        extras.activity = fleet
            .webfilter
            .activity(&agent_id, 24 * 7, false, household::ACTIVITY_SHOWN)
            .await
            .unwrap_or_default();
    }
    extras.health = fleet.health.get(&agent_id).or_else(|| {
        // Stored before the server judged health (an older version): judge it now.
        let (collected_at, _, Value::Object(snapshot)) = extras.telemetry.as_ref()? else {
            return None;
        };
        let (thresholds, _, _) = fleet.health.thresholds();
        let now = fleet.clock.now();
        Some(Arc::new(assess(
            snapshot,
            agent.os.as_deref(),
            &thresholds,
            collected_at,
            &now,
        )))
    });
    let title = agent.agent_id.clone();
    let shown = History {
        range,
        now,
        forecasts: history_forecasts(&extras.history, now),
    };
    layout(&who, &csrf, &title, Nav::Fleet, render(&agent, &extras, &shown))
}

/// What the history card shows.
struct History {
    range: &'static charts::Range,
    now: time::OffsetDateTime,
    forecasts: Vec<DiskForecast>,
}

/// Forecasts from the last week of points.
fn history_forecasts(points: &[MetricRow], now: time::OffsetDateTime) -> Vec<DiskForecast> {
    let week_ago = crate::clock::format(now - time::Duration::days(7));
    let recent: Vec<MetricRow> = points.iter().filter(|p| p.at >= week_ago).cloned().collect();
    forecast(&recent)
}

fn render(a: &AgentSummary, x: &Extras, h: &History) -> Markup {
    let from = crate::clock::format(h.now - time::Duration::hours(h.range.hours));
    let in_range: Vec<MetricRow> = x.history.iter().filter(|p| p.at >= from).cloned().collect();
    let id = a.agent_id.as_str();
    html! {
        nav class="crumbs" aria-label="Breadcrumb" { a href="/" { "Fleet" } " / " (id) }
        div class="page-head" { h1 { (id) } (state_badge(a.online)) }
        div class="actions" id="host-actions" data-agent=(id) {
            button type="button" data-action="refresh" { "Refresh telemetry" }
            button type="button" data-action="screenshot" { "Capture screen" }
            button type="button" data-action="remotehelp" class="secondary" { "Start remote help" }
            button type="button" data-action="update" class="secondary" { "Update agent" }
        }
        p id="action-status" class="status" role="status" aria-live="polite" hidden {}
        div class="with-chat" {
            div class="host-grid" {
                (facts(a, x.last_update.as_ref()))
                (telemetry(x.telemetry.as_ref(), x.health.as_deref()))
                (charts::card(id, h.range, &in_range, &h.forecasts, h.now))
                (super::changes::card(&x.changes))
                (household::webfilter_card(id, &x.webfilter, &x.activity, x.can_change))
                (household::accounts_card(
                    id,
                    x.telemetry.as_ref().and_then(|(_, _, snap)| snap.get("local_accounts")),
                    x.can_change,
                ))
                (screen(id, x.screenshot.as_ref()))
                (recent(id, &x.recent))
            }
            (chat_panel(Some(id)))
        }
    }
}

fn facts(a: &AgentSummary, last_update: Option<&UpdateRecord>) -> Markup {
    let dash = "—";
    let text = |v: Option<&str>| html! { (v.unwrap_or(dash)) };
    let yes_no = |b: bool| html! { @if b { "yes" } @else { "no" } };
    let rows = [
        ("Agent id", text(Some(a.agent_id.as_str()))),
        ("Hostname", text(a.hostname.as_deref())),
        ("OS", text(a.os.as_deref())),
        ("Architecture", text(a.arch.as_deref())),
        ("Agent version", text(a.version.as_deref())),
        ("Online", yes_no(a.online)),
        ("Key enrolled", yes_no(a.enrolled)),
        ("Last seen", time_el(a.last_seen.as_deref())),
        ("Last update", last_update.map_or_else(|| text(None), update_line)),
    ];
    html! {
        section class="card" id="facts" {
            h2 { "Facts" }
            dl class="facts" {
                @for (k, v) in rows {
                    dt { (k) }
                    dd { (v) }
                }
            }
        }
    }
}

/// `0.1.1: rolled back (why), <time>`; the reason is the agent's words.
fn update_line(u: &UpdateRecord) -> Markup {
    let outcome = match u.outcome.as_str() {
        "succeeded" => "installed",
        "rolled_back" => "rolled back",
        "no_report" => "no report",
        other => other,
    };
    let why = (u.outcome != "succeeded" && !u.detail.is_empty()).then_some(&u.detail);
    html! {
        span id="last-update" {
            (u.to_version) ": " (outcome)
            @if let Some(why) = why { " (" (why) ")" }
            ", " (time_el(Some(&u.at)))
        }
    }
}

/// The server's verdict on each section, worst first, each expandable to what the
/// agent reported; sections that do not concern this PC's OS come last, as `n/a`.
pub(super) fn telemetry(t: Option<&(String, String, Value)>, health: Option<&Assessment>) -> Markup {
    let (Some((collected_at, _, snapshot)), Some(health)) = (t, health) else {
        return html! {
            section class="card" id="telemetry" {
                h2 { "Health" }
                p class="muted" id="telemetry-when" {
                    "No telemetry yet: it arrives when the agent connects, or press Refresh telemetry."
                }
                div id="sections" {}
            }
        };
    };
    let details = |name: &str| {
        let mut rest = snapshot.get(name).cloned().unwrap_or(Value::Null);
        if let Some(o) = rest.as_object_mut() {
            o.remove("status");
            o.remove("summary");
        }
        serde_json::to_string_pretty(&rest).unwrap_or_default()
    };
    html! {
        section class="card" id="telemetry" {
            h2 { "Health" }
            p class="overall" id="telemetry-overall" {
                (badge(health.status.as_str())) " "
                (health.top_reason().map_or_else(|| format!("all {} sections ok", health.sections.len()), str::to_owned))
            }
            p class="muted" id="telemetry-when" { "Collected " (time_el(Some(collected_at))) }
            div id="sections" {
                @for v in &health.sections {
                    details class="section" data-section=(v.section) data-status=(v.status.as_str()) {
                        summary {
                            (badge(v.status.as_str())) " " strong { (v.section) } " " span class="summary" { (v.summary) }
                        }
                        @if let Some(reason) = &v.reason { p class="reason" { (reason) } }
                        @if let Some(todo) = &v.attention { p class="attention" { "What to do: " (todo) } }
                        @if v.status >= Status::Warn {
                            button type="button" class="ask secondary" data-ask-section=(v.section)
                                data-ask-text=(ask_text(v)) { "Ask kenny about this" }
                        }
                        pre { (details(&v.section)) }
                    }
                }
                @for name in &health.skipped {
                    details class="section" data-section=(name) data-status="n/a" {
                        summary { (badge("n/a")) " " strong { (name) } " " span class="summary muted" { "does not apply to this PC's OS" } }
                        pre { (details(name)) }
                    }
                }
            }
        }
    }
}

/// The question "Ask kenny about this" opens a conversation with. It names the section
/// and its status only: the reason is the PC's words in part, and reaches the model
/// fenced, through `agent_health`, never as the person's own.
fn ask_text(v: &crate::health::Verdict) -> String {
    let plain = v.section.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let section = if plain { v.section.as_str() } else { "flagged" };
    format!(
        "The {section} section of this PC is {}. Look into it (agent_health and agent_snapshot have the details) \
         and tell me what is wrong and what to do.",
        v.status.as_str()
    )
}

fn screen(agent_id: &str, shot: Option<&ScreenshotMeta>) -> Markup {
    html! {
        section class="card" id="screen" {
            h2 { "Screen" }
            figure {
                @if let Some(m) = shot {
                    a href={ "/api/agent/" (agent_id) "/screenshot" } {
                        img id="screenshot-img" src={ "/api/agent/" (agent_id) "/screenshot" }
                            alt={ "Latest screenshot of " (agent_id) } width=(m.width) height=(m.height);
                    }
                    figcaption id="screenshot-caption" {
                        (m.width) "×" (m.height) ", taken " (short_time(&m.taken_at)) " by " (m.taken_by)
                    }
                } @else {
                    img id="screenshot-img" alt={ "Latest screenshot of " (agent_id) } hidden;
                    figcaption id="screenshot-caption" class="muted" { "No screenshot yet: press Capture screen." }
                }
            }
        }
    }
}

fn recent(agent_id: &str, rows: &[AuditEntry]) -> Markup {
    let all_calls: String = url::form_urlencoded::byte_serialize(agent_id.as_bytes()).collect();
    html! {
        section class="card" id="recent" {
            h2 { "Recent calls" }
            @if rows.is_empty() {
                p class="muted" { "No calls yet." }
            } @else {
                table class="stack compact" {
                    thead { tr { th { "When" } th { "Tool" } th { "Who" } th { "Outcome" } } }
                    tbody {
                        @for e in rows {
                            tr {
                                td data-label="When" { (time_el(Some(&e.at))) }
                                td data-label="Tool" { code { (e.tool) } }
                                td data-label="Who" { (e.user.as_deref().unwrap_or("—")) }
                                td data-label="Outcome" {
                                    (badge(&e.outcome))
                                    @if let Some(c) = &e.error_code { " " span class="muted" { (c) } }
                                }
                            }
                        }
                    }
                }
            }
            p { a href={ "/audit?agent_id=" (all_calls) } { "All calls for this PC" } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn telemetry_lists_the_servers_verdicts_worst_first_with_escaped_details() {
        let snap = json!({
            "cpu": {"status": "crit", "summary": "busy", "load_15": 0.5, "cores": 4, "free": 10},
            "disk": {"status": "ok", "summary": "<full>", "volumes": [{"mount": "/", "percent_used": 99}]},
            "memory": {"status": "ok", "summary": "tight", "percent_used": 93},
            "defender": {"status": "ok", "summary": "n/a on this platform"},
        });
        let at = "2026-01-02T03:04:05.000Z";
        let health = assess(
            snap.as_object().unwrap(),
            Some("linux"),
            &crate::health::Thresholds::default(),
            at,
            at,
        );
        let html = telemetry(Some(&(at.into(), "x".into(), snap)), Some(&health)).into_string();
        let pos = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing in {html}"));
        // The server judges by the numbers, not by the agent's word.
        assert!(
            pos("data-section=\"disk\" data-status=\"crit\"") < pos("data-section=\"memory\" data-status=\"warn\"")
        );
        assert!(pos("data-section=\"memory\"") < pos("data-section=\"cpu\" data-status=\"ok\""));
        assert!(pos("data-section=\"cpu\"") < pos("data-section=\"defender\" data-status=\"n/a\""));
        assert!(html.contains("<span class=\"summary\">&lt;full&gt;</span>"));
        assert!(html.contains("&quot;free&quot;: 10"));
        assert!(
            !html.contains("&quot;status&quot;"),
            "status and summary are shown once, above"
        );
        assert!(
            html.contains("disk: / is 99% full (threshold 97%)"),
            "the overall line gives the worst reason"
        );
        assert!(html.contains("What to do: free space"));
        assert!(telemetry(None, None).into_string().contains("No telemetry yet"));
    }

    #[test]
    fn an_update_line_says_how_it_ended_with_the_agents_reason_escaped() {
        let u = UpdateRecord {
            order_id: "o".into(),
            agent_id: "pc".into(),
            requested_by: "kim".into(),
            from_version: "0.1.0".into(),
            to_version: "0.2.0".into(),
            outcome: "rolled_back".into(),
            detail: "<b>did not log in</b>".into(),
            at: "2026-01-02T03:04:05.000Z".into(),
        };
        let line = update_line(&u).into_string();
        assert!(
            line.contains("0.2.0: rolled back (&lt;b&gt;did not log in&lt;/b&gt;)"),
            "{line}"
        );
        let ok = update_line(&UpdateRecord {
            outcome: "succeeded".into(),
            ..u
        })
        .into_string();
        assert!(ok.contains("0.2.0: installed,") && !ok.contains("did not"), "{ok}");
    }
}
