//! `/`: every PC the viewer may reach, with its state and health at a glance.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};

use super::{Nav, badge, chat_panel, layout, state_badge, time_el, viewer};
use crate::fleet::AgentSummary;
use crate::state::{Accounts, Fleet};

pub(super) async fn page(State(accounts): State<Accounts>, State(fleet): State<Fleet>, headers: HeaderMap) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    let agents = match fleet.list(&who).await {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "listing the fleet failed");
            return super::message_page(
                &who,
                &csrf,
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The fleet could not be read; see the server log.",
            );
        }
    };
    let body = render(&agents, who.role == crate::principal::Role::Superuser);
    layout(&who, &csrf, "Fleet", Nav::Fleet, body)
}

fn render(agents: &[AgentSummary], superuser: bool) -> Markup {
    let online = agents.iter().filter(|a| a.online).count();
    html! {
        div class="page-head" {
            h1 { "Fleet" }
            p class="muted" id="fleet-count" { (agents.len()) " PCs · " (online) " online" }
        }
        div class="with-chat" {
            section class="card" {
                div class="toolbar" {
                    input id="fleet-search" type="search" placeholder="Search name, OS, version, health"
                        aria-label="Search the fleet" autocomplete="off";
                    select id="fleet-state" aria-label="Show" {
                        option value="" { "All" }
                        option value="online" { "Online" }
                        option value="offline" { "Offline" }
                    }
                }
                @if agents.is_empty() {
                    @if superuser {
                        p class="empty" { "No PCs yet. " a href="/admin#agents" { "Add an agent" } " to get started." }
                    } @else {
                        p class="empty" { "No PCs are assigned to you yet; ask a superuser." }
                    }
                }
                table class="fleet stack" id="fleet-table" {
                    thead {
                        tr {
                            th { "PC" } th { "State" } th { "OS" } th { "Version" } th { "Last seen" }
                            th { "Health" }
                        }
                    }
                    tbody {
                        @for a in agents {
                            (row(a))
                        }
                    }
                }
                p class="empty" id="fleet-none" hidden { "No PC matches the filter." }
            }
            (chat_panel(None))
        }
    }
}

fn row(a: &AgentSummary) -> Markup {
    let os = match (&a.os, &a.arch) {
        (Some(os), Some(arch)) => format!("{os} ({arch})"),
        (Some(os), None) => os.clone(),
        _ => "—".to_owned(),
    };
    // What the page's filter box matches against.
    let search = [
        a.agent_id.as_str(),
        a.hostname.as_deref().unwrap_or(""),
        &os,
        a.version.as_deref().unwrap_or(""),
        a.health_reason.as_deref().unwrap_or(""),
        a.health.map_or("", |h| h.as_str()),
    ]
    .join(" ")
    .to_lowercase();
    let id = a.agent_id.as_str();
    html! {
        tr data-search=(search) data-online=(a.online) {
            td data-label="PC" {
                a class="host-link" href={ "/hosts/" (id) } { (id) }
                @if let Some(h) = a.hostname.as_deref().filter(|h| *h != id) {
                    div class="muted" { (h) }
                }
            }
            td data-label="State" { (state_badge(a.online)) }
            td data-label="OS" { (os) }
            td data-label="Version" { (a.version.as_deref().unwrap_or("—")) }
            td data-label="Last seen" { (time_el(a.last_seen.as_deref())) }
            td data-label="Health" {
                @match a.health {
                    Some(h) => {
                        (badge(h.as_str())) " "
                        span class="summary" { (a.health_reason.as_deref().unwrap_or("all sections ok")) }
                    },
                    None => span class="muted" { "no telemetry yet" },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::Status;

    fn agent(id: &str, online: bool) -> AgentSummary {
        AgentSummary {
            agent_id: kenny_proto::AgentId::parse(id).unwrap(),
            online,
            os: Some("linux".into()),
            hostname: Some("<den>".into()),
            version: Some("0.1.0".into()),
            arch: Some("x86_64".into()),
            enrolled: true,
            public_key: None,
            signs_results: Some(true),
            last_seen: Some("2026-01-02T03:04:05.000Z".into()),
            health: None,
            health_reason: None,
            channel: "stable".into(),
        }
    }

    #[test]
    fn rows_link_to_hosts_carry_filter_data_and_escape() {
        let mut a = agent("pc-a", true);
        a.health = Some(Status::Warn);
        a.health_reason = Some("disk: <b>91%</b> full".into());
        let html = render(&[a, agent("pc-b", false)], false).into_string();
        assert!(html.contains("2 PCs · 1 online"));
        assert!(html.contains("<a class=\"host-link\" href=\"/hosts/pc-a\">pc-a</a>"));
        assert!(html.contains("data-online=\"true\"") && html.contains("data-online=\"false\""));
        assert!(html.contains(
            "<span class=\"badge st-warn\">warn</span> <span class=\"summary\">disk: &lt;b&gt;91%&lt;/b&gt; full</span>"
        ));
        assert!(
            html.contains(
                "data-search=\"pc-a &lt;den&gt; linux (x86_64) 0.1.0 disk: &lt;b&gt;91%&lt;/b&gt; full warn\""
            )
        );
        assert!(html.contains("no telemetry yet"));
        assert!(!html.contains("<den>") && !html.contains("<b>91"));
        assert!(html.contains("<aside id=\"chat\""));
        assert!(render(&[], true).into_string().contains("Add an agent"));
    }
}
