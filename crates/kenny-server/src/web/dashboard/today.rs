//! `/today`: what needs attention now, worst first, and what changed since yesterday,
//! for the PCs the viewer may reach.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};

use super::{Nav, badge, layout, message_page, time_el, viewer};
use crate::fleet::AgentSummary;
use crate::health::{FleetHealth, Status};
use crate::state::{Accounts, Fleet};
use crate::store::{AlertRow, ChangeRow};

const CHANGES_SHOWN: u32 = 200;

struct Today {
    agents: Vec<AgentSummary>,
    open: Vec<AlertRow>,
    recent: Vec<AlertRow>,
    changes: Vec<ChangeRow>,
}

pub(super) async fn page(State(accounts): State<Accounts>, State(fleet): State<Fleet>, headers: HeaderMap) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/today").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    let yesterday = crate::clock::format(fleet.clock.now_utc() - time::Duration::hours(24));
    let hosts = who.hosts_json();
    let read = fleet
        .store
        .blocking(move |s| {
            Ok((
                s.open_alerts()?,
                s.alerts_since(&yesterday, 500, hosts.as_deref())?,
                s.changes_since(&yesterday, CHANGES_SHOWN, hosts.as_deref())?,
            ))
        })
        .await;
    let agents = fleet.list(&who).await;
    let (agents, (open, recent, changes)) = match (agents, read) {
        (Ok(a), Ok(r)) => (a, r),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "reading the Today page failed");
            return message_page(
                &who,
                &csrf,
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "Today's alerts could not be read; see the server log.",
            );
        }
    };
    let mine = |a: &String| who.may_reach(a);
    let mut open: Vec<AlertRow> = open.into_iter().filter(|a| mine(&a.agent_id)).collect();
    // Worst first; the longest-standing first among equals.
    open.sort_by(|a, b| (a.status != "crit", &a.opened_at).cmp(&(b.status != "crit", &b.opened_at)));
    let today = Today {
        agents,
        open,
        recent: recent.into_iter().filter(|a| mine(&a.agent_id)).collect(),
        changes: changes.into_iter().filter(|c| mine(&c.agent_id)).collect(),
    };
    layout(&who, &csrf, "Today", Nav::Today, render(&today))
}

fn render(t: &Today) -> Markup {
    let mut mix = FleetHealth::default();
    for a in &t.agents {
        mix.count(a.health);
    }
    let offline = t.agents.iter().filter(|a| !a.online).count();
    let attention = t.agents.iter().filter(|a| a.health >= Some(Status::Warn)).count();
    let mut changes: Vec<&ChangeRow> = t.changes.iter().collect();
    changes.sort_by_key(|c| c.priority != "high");
    html! {
        div class="page-head" {
            h1 { "Today" }
            p class="muted" id="today-count" {
                (t.agents.len()) " PCs · " (attention) " need attention · " (offline) " offline"
            }
        }
        div class="host-grid" {
            section class="card wide" id="attention" {
                h2 { "Needs attention now" }
                @if t.open.is_empty() {
                    p class="muted" { "Nothing: every PC you can see is fine." }
                } @else {
                    table class="stack compact" {
                        thead { tr { th { "State" } th { "PC" } th { "What" } th { "Why" } th { "Since" } } }
                        tbody {
                            @for a in &t.open {
                                tr data-agent=(a.agent_id) data-key=(a.key) {
                                    td data-label="State" {
                                        (badge(&a.status))
                                        @if a.silenced { " " span class="muted" title="Silenced or cooling down: not sent" { "silenced" } }
                                    }
                                    td data-label="PC" { a class="host-link" href={ "/hosts/" (a.agent_id) } { (a.agent_id) } }
                                    td data-label="What" { (a.key) }
                                    td data-label="Why" {
                                        (a.reason)
                                        @if let Some(todo) = &a.attention { div class="muted" { "What to do: " (todo) } }
                                    }
                                    td data-label="Since" { (time_el(Some(&a.opened_at))) }
                                }
                            }
                        }
                    }
                }
            }
            section class="card" id="changes-today" {
                h2 { "Changed since yesterday" }
                (super::changes::list(&changes.into_iter().cloned().collect::<Vec<_>>(), true))
            }
            section class="card" id="mix" {
                h2 { "Health" }
                dl class="facts" {
                    dt { (badge("ok")) } dd { (mix.ok) }
                    dt { (badge("warn")) } dd { (mix.warn) }
                    dt { (badge("crit")) } dd { (mix.crit) }
                    dt { (badge("unknown")) } dd { (mix.unknown) }
                    dt { "no report yet" } dd { (mix.no_data) }
                }
                h3 { "Alerts since yesterday" }
                @if t.recent.is_empty() {
                    p class="muted" { "None." }
                } @else {
                    ul class="changes" id="recent-alerts" {
                        @for a in &t.recent {
                            li {
                                (badge(if a.closed_at.is_some() && !a.key.starts_with("change:") { "ok" } else { &a.status }))
                                " " a class="host-link" href={ "/hosts/" (a.agent_id) } { (a.agent_id) } " "
                                (a.key) ": " (a.reason) " "
                                span class="muted" {
                                    @match &a.closed_at {
                                        Some(c) if !a.key.starts_with("change:") => { "cleared " (time_el(Some(c))) }
                                        _ => { (time_el(Some(&a.opened_at))) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(agent: &str, key: &str, status: &str, opened: &str) -> AlertRow {
        AlertRow {
            id: 1,
            agent_id: agent.into(),
            key: key.into(),
            status: status.into(),
            reason: format!("{key} <bad>"),
            attention: Some("fix it".into()),
            opened_at: opened.into(),
            updated_at: opened.into(),
            closed_at: None,
            silenced: false,
            notified: true,
        }
    }

    #[test]
    fn the_worst_comes_first_and_text_is_escaped() {
        let t = Today {
            agents: Vec::new(),
            open: vec![
                alert("pc-b", "offline", "crit", "2026-01-01T00:00:00Z"),
                alert("pc-a", "disk", "warn", "2026-01-01T00:00:00Z"),
            ],
            recent: Vec::new(),
            changes: Vec::new(),
        };
        let html = render(&t).into_string();
        assert!(html.find("pc-b").unwrap() < html.find("pc-a").unwrap());
        assert!(html.contains("offline &lt;bad&gt;") && !html.contains("<bad>"));
        assert!(html.contains("What to do: fix it"));
        let calm = render(&Today {
            agents: Vec::new(),
            open: Vec::new(),
            recent: Vec::new(),
            changes: Vec::new(),
        })
        .into_string();
        assert!(calm.contains("Nothing: every PC you can see is fine."));
    }
}
