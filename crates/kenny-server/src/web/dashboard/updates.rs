//! `/updates`: update campaigns, newest first, each with its PCs' status, and for a
//! superuser the buttons that pause, resume or cancel one and the form that starts one.
//! The buttons and the form speak to `/api/campaigns` (the script sends the CSRF
//! token); operators see the page without them, a `user` does not see it.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};

use super::{Nav, badge, layout, message_page, time_el, viewer};
use crate::principal::Role;
use crate::state::{Accounts, Fleet};
use crate::store::{CampaignPc, CampaignRow};

/// Campaigns shown on the page; older ones are in `GET /api/campaigns`.
const SHOWN: usize = 20;

pub(super) async fn page(State(accounts): State<Accounts>, State(fleet): State<Fleet>, headers: HeaderMap) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/updates").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    if who.role < Role::Operator {
        return message_page(
            &who,
            &csrf,
            StatusCode::FORBIDDEN,
            "Not for this account",
            "Update campaigns are for operators and superusers.",
        );
    }
    let scope = who.clone();
    let read = fleet
        .store
        .blocking(move |s| {
            let mut out = Vec::new();
            for c in s.campaigns()?.into_iter().take(SHOWN) {
                let mut pcs = s.campaign_pcs(c.id)?;
                pcs.retain(|p| scope.may_reach(&p.agent_id));
                out.push((c, pcs));
            }
            Ok(out)
        })
        .await;
    let campaigns = match read {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "reading update campaigns failed");
            return message_page(
                &who,
                &csrf,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The update campaigns could not be read; see the server log.",
            );
        }
    };
    layout(
        &who,
        &csrf,
        "Updates",
        Nav::Updates,
        render(&campaigns, who.role == Role::Superuser),
    )
}

fn render(campaigns: &[(CampaignRow, Vec<CampaignPc>)], superuser: bool) -> Markup {
    html! {
        div class="page-head" id="updates-page" {
            h1 { "Updates" }
            p class="muted" {
                "Campaigns roll one agent build out to a set of PCs as they come online. "
                "A PC rolled back twice is held."
            }
        }
        @if superuser {
            section class="card" {
                h2 { "Start a campaign" }
                form id="campaign-form" class="inline-form" data-api="POST /api/campaigns" data-refresh="campaigns" {
                    label { "Version" input name="version" placeholder="0.2.0" required; }
                    label { "All PCs" input type="checkbox" name="all" data-type="bool"; }
                    label {
                        "or channel"
                        select name="channel" {
                            option value="" { "—" }
                            option value="stable" { "stable" }
                            option value="beta" { "beta" }
                        }
                    }
                    label { "or PCs (comma-separated)" input name="agents" data-type="list" autocomplete="off"; }
                    label { "At once" input name="max_parallel" type="number" min="1" max="50" value="1" data-type="number"; }
                    button { "Start" }
                    p class="result" hidden {}
                }
            }
        }
        section class="card" id="campaigns" {
            p class="result" hidden {}
            @if campaigns.is_empty() {
                p class="empty" { "No campaigns yet. Put a build in the data directory's agent-releases/ first." }
            }
            @for (c, pcs) in campaigns { (campaign(c, pcs, superuser)) }
        }
    }
}

fn campaign(c: &CampaignRow, pcs: &[CampaignPc], superuser: bool) -> Markup {
    let action = |verb: &str, label: &str, class: &str| {
        html! {
            button type="button" class=(class) data-api={ "POST /api/campaigns/" (c.id) "/" (verb) }
                data-refresh="campaigns" { (label) }
        }
    };
    html! {
        div class="campaign" data-campaign=(c.id) {
            h2 {
                "#" (c.id) " kenny-agent " (c.version) " "
                (badge(&c.state))
            }
            p class="muted" {
                "Target " code { (c.target) } ", " (c.max_parallel) " at once, started by " (c.created_by) " "
                (time_el(Some(&c.created_at)))
            }
            @if superuser {
                p class="buttons" {
                    @if c.state == "running" { (action("pause", "Pause", "secondary")) }
                    @if c.state == "paused" { (action("resume", "Resume", "secondary")) }
                    @if c.state == "running" || c.state == "paused" {
                        button type="button" class="danger" data-api={ "POST /api/campaigns/" (c.id) "/cancel" }
                            data-confirm={ "Cancel campaign #" (c.id) "? PCs still waiting are skipped." }
                            data-refresh="campaigns" { "Cancel" }
                    }
                }
            }
            table class="stack" {
                thead { tr { th { "PC" } th { "Status" } th { "Attempts" } th { "Rollbacks" } th { "Detail" } th { "Updated" } } }
                tbody {
                    @for p in pcs {
                        tr data-agent=(p.agent_id) {
                            td data-label="PC" { a href={ "/hosts/" (p.agent_id) } { (p.agent_id) } }
                            td data-label="Status" { (badge(&p.status)) }
                            td data-label="Attempts" { (p.attempts) }
                            td data-label="Rollbacks" { (p.rollbacks) }
                            td data-label="Detail" { (p.detail) }
                            td data-label="Updated" { (time_el(Some(&p.updated_at))) }
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

    fn campaign_row(state: &str) -> CampaignRow {
        CampaignRow {
            id: 7,
            version: "0.2.0".into(),
            target: "channel:beta".into(),
            max_parallel: 2,
            state: state.into(),
            created_by: "root".into(),
            created_at: "2026-01-02T03:04:05.000Z".into(),
            updated_at: "2026-01-02T03:04:05.000Z".into(),
        }
    }

    fn pc(detail: &str) -> CampaignPc {
        CampaignPc {
            agent_id: "pc-a".into(),
            status: "held".into(),
            attempts: 2,
            rollbacks: 2,
            detail: detail.into(),
            started_at: None,
            updated_at: "2026-01-02T03:04:05.000Z".into(),
            known: true,
        }
    }

    #[test]
    fn superusers_get_the_buttons_that_fit_the_state_and_agent_text_is_escaped() {
        let running = [(campaign_row("running"), vec![pc("rolled back: <script>")])];
        let html = render(&running, true).into_string();
        assert!(html.contains("data-api=\"POST /api/campaigns/7/pause\""), "{html}");
        assert!(html.contains("data-api=\"POST /api/campaigns/7/cancel\""));
        assert!(!html.contains("/7/resume"));
        assert!(html.contains("rolled back: &lt;script&gt;"));
        assert!(html.contains("data-api=\"POST /api/campaigns\""));
        let paused = [(campaign_row("paused"), vec![pc("x")])];
        let html = render(&paused, true).into_string();
        assert!(html.contains("/7/resume") && !html.contains("/7/pause"));
        // Operators read, never act.
        let html = render(&paused, false).into_string();
        assert!(!html.contains("data-api"), "{html}");
        assert!(html.contains("st-held"));
        let finished = [(campaign_row("finished"), vec![pc("x")])];
        assert!(!render(&finished, true).into_string().contains("/7/cancel"));
    }
}
