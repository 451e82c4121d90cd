//! `/audit`: the audit trail with filters (host, tool, user, outcome) and paging to
//! older rows. A `user` sees the trail of its own calls, as `GET /api/audit` does.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::{Nav, badge, layout, message_page, time_el, viewer};
use crate::principal::Role;
use crate::state::{Accounts, Fleet};
use crate::store::{AuditEntry, AuditFilter};

const PAGE: u32 = 50;
const OUTCOMES: &[&str] = &["ok", "error", "refused", "held", "sent", "interrupted"];

/// Every field is text so a hand-edited URL gets a page that says what is wrong, not a
/// bare 400.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Params {
    agent_id: Option<String>,
    tool: Option<String>,
    user: Option<String>,
    outcome: Option<String>,
    before: Option<String>,
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

pub(super) async fn page(
    State(accounts): State<Accounts>,
    State(fleet): State<Fleet>,
    headers: HeaderMap,
    Query(p): Query<Params>,
) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/audit").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    let before = match given(&p.before).map(|b| b.parse::<i64>()) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(_)) => {
            return message_page(
                &who,
                &csrf,
                StatusCode::BAD_REQUEST,
                "Bad page link",
                "`before` must be a row number; open the audit log again.",
            );
        }
    };
    let filter = AuditFilter {
        agent_id: given(&p.agent_id),
        user_id: (who.role == Role::User).then_some(who.user_id),
        before_id: before,
        limit: PAGE,
        tool: given(&p.tool),
        username: given(&p.user),
        outcome: given(&p.outcome),
    };
    let query = filter.clone();
    let entries = match fleet.store.blocking(move |s| s.audit(&query)).await {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "reading the audit log failed");
            return message_page(
                &who,
                &csrf,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The audit log could not be read; see the server log.",
            );
        }
    };
    let agents = fleet.list(&who).await.unwrap_or_default();
    let hosts: Vec<String> = agents.into_iter().map(|a| a.agent_id.to_string()).collect();
    // Operators and superusers see the whole trail, so its state is theirs to see.
    let chain = (who.role != Role::User).then(|| chain_state(fleet.ledger.latest().as_ref()));
    layout(
        &who,
        &csrf,
        "Audit log",
        Nav::Audit,
        render(&filter, &entries, &hosts, chain),
    )
}

/// The hash chain's state as the last background check found it.
fn chain_state(checked: Option<&crate::ledger::Checked>) -> Markup {
    html! {
        p id="audit-chain" class="muted" {
            @match checked {
                None => { "Tamper evidence: not checked on this server yet (it checks hourly; `kenny-server audit verify` checks now)." }
                Some(c) => @match &c.report.broken {
                    None => {
                        "Tamper evidence: intact at " (time_el(Some(&c.at))) ": " (c.report.rows_verified) " rows match the hash chain"
                        @if let Some(cp) = &c.report.signed_through { ", signed through " (time_el(Some(&cp.at))) }
                        "."
                    }
                    Some(b) => span class="bad" { "Tamper evidence: BROKEN at " (time_el(Some(&c.at))) ": " (b.what) }
                },
            }
        }
    }
}

fn render(f: &AuditFilter, entries: &[AuditEntry], hosts: &[String], chain: Option<Markup>) -> Markup {
    let val = |v: &Option<String>| v.as_deref().unwrap_or("").to_owned();
    let outcome = f.outcome.as_deref().unwrap_or("");
    let tools = kenny_proto::catalog::TOOLS.iter().map(|t| t.name()).chain([
        "agent_health",
        "agent_update",
        "select_agent",
        "list_agents",
    ]);
    // A full page may have older rows behind it; a short one is the last.
    let older = entries.last().filter(|_| entries.len() as u32 == f.limit);
    html! {
        div class="page-head" {
            h1 { "Audit log" }
            p class="muted" { "Every call and refusal, newest first, with who made it and from where." }
            @if let Some(chain) = chain { (chain) }
        }
        section class="card" {
            form class="filters" method="get" action="/audit" {
                label { "PC" input name="agent_id" list="audit-hosts" value=(val(&f.agent_id)) autocomplete="off"; }
                label { "Tool" input name="tool" list="audit-tools" value=(val(&f.tool)) autocomplete="off"; }
                label { "User" input name="user" value=(val(&f.username)) autocomplete="off"; }
                label {
                    "Outcome"
                    select name="outcome" {
                        @for o in std::iter::once("").chain(OUTCOMES.iter().copied()) {
                            option value=(o) selected[o == outcome] { @if o.is_empty() { "any" } @else { (o) } }
                        }
                    }
                }
                div class="filter-buttons" {
                    button { "Filter" }
                    a class="button secondary" href="/audit" { "Clear" }
                }
            }
            datalist id="audit-hosts" { @for h in hosts { option value=(h); } }
            datalist id="audit-tools" { @for t in tools { option value=(t); } }
            @if entries.is_empty() {
                p class="empty" { "No calls match." }
            } @else {
                table class="stack" id="audit-table" {
                    thead {
                        tr {
                            th { "When" } th { "Who" } th { "From" } th { "PC" } th { "Tool" } th { "Outcome" }
                            th { "Took" }
                        }
                    }
                    tbody { @for e in entries { (row(e)) } }
                }
            }
            div class="pager" {
                @if f.before_id.is_some() {
                    a class="button secondary" href={ "/audit?" (page_query(f, 0)) } { "Newest" }
                }
                @if let Some(last) = older {
                    a class="button secondary" id="audit-older" href={ "/audit?" (page_query(f, last.id)) } { "Older" }
                }
            }
        }
    }
}

/// The query string for a page of the same filter; `before` 0 means the newest page.
fn page_query(f: &AuditFilter, before: i64) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [
        ("agent_id", &f.agent_id),
        ("tool", &f.tool),
        ("user", &f.username),
        ("outcome", &f.outcome),
    ] {
        if let Some(v) = v {
            q.append_pair(k, v);
        }
    }
    if before > 0 {
        q.append_pair("before", &before.to_string());
    }
    q.finish()
}

fn row(e: &AuditEntry) -> Markup {
    let dash = "—";
    html! {
        tr data-id=(e.id) {
            td data-label="When" { (time_el(Some(&e.at))) }
            td data-label="Who" {
                @match (&e.user, &e.credential_kind) {
                    (Some(u), Some(k)) => { (u) " " span class="muted" { "(" (k) ")" } },
                    (Some(u), None) => (u),
                    _ => (dash),
                }
            }
            td data-label="From" { (e.client_addr.as_deref().unwrap_or(dash)) }
            td data-label="PC" {
                @match &e.agent_id {
                    Some(a) => a href={ "/hosts/" (a) } { (a) },
                    None => (dash),
                }
            }
            td data-label="Tool" {
                code { (e.tool) }
                // API actions name the path they acted on (e.g. which user).
                @if let Some(t) = &e.target { " " span class="muted" { (t) } }
            }
            td data-label="Outcome" {
                (badge(&e.outcome))
                @if let Some(c) = &e.error_code { " " span class="muted" { (c) } }
                // The agent's signature over its answer is kept with the row.
                @if e.proof.is_some() && e.error_code.as_deref() != Some("bad_signature") {
                    " " span class="muted signed" title="The PC signed this answer with its enrolled key" { "signed" }
                }
            }
            td data-label="Took" { (e.duration_ms) " ms" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64) -> AuditEntry {
        AuditEntry {
            call_id: None,
            id,
            at: "2026-01-02T03:04:05.000Z".into(),
            user: Some("kim<".into()),
            credential_kind: Some("session".into()),
            credential_id: Some("1".into()),
            agent_id: Some("pc-a".into()),
            tool: "shell_exec".into(),
            args_digest: "d".into(),
            outcome: "error".into(),
            error_code: Some("timeout".into()),
            duration_ms: 12,
            client_addr: Some("127.0.0.1".into()),
            target: None,
            proof: None,
        }
    }

    #[test]
    fn pages_keep_the_filter_and_escape_rows() {
        let f = AuditFilter {
            agent_id: Some("pc-a".into()),
            tool: Some("a&b".into()),
            limit: 2,
            ..Default::default()
        };
        let html = render(&f, &[entry(9), entry(7)], &["pc-a".into()], None).into_string();
        assert!(html.contains("kim&lt; <span class=\"muted\">(session)</span>"));
        assert!(html.contains("<td data-label=\"From\">127.0.0.1</td>"));
        assert!(
            html.contains("href=\"/audit?agent_id=pc-a&amp;tool=a%26b&amp;before=7\""),
            "{html}"
        );
        assert!(html.contains("value=\"a&amp;b\""));
        // A short page is the last one.
        assert!(!render(&f, &[entry(9)], &[], None).into_string().contains("audit-older"));
        assert!(
            render(
                &AuditFilter {
                    limit: 5,
                    ..Default::default()
                },
                &[],
                &[],
                None
            )
            .into_string()
            .contains("No calls match")
        );
    }

    #[test]
    fn the_chain_state_and_signed_answers_show_and_a_broken_chain_says_where() {
        let report = |broken: Option<crate::ledger::Broken>| crate::ledger::Checked {
            at: "2026-12-02T06:00:00.000Z".into(),
            report: crate::ledger::ChainReport {
                events: 3,
                rows_verified: 2,
                rows_before_chain: 0,
                rows_pruning: 0,
                checkpoints: 1,
                signed_through: None,
                base: None,
                broken,
            },
        };
        assert!(
            chain_state(None)
                .into_string()
                .contains("not checked on this server yet")
        );
        let intact = chain_state(Some(&report(None))).into_string();
        assert!(intact.contains("intact") && intact.contains("2 rows"), "{intact}");
        let broken = chain_state(Some(&report(Some(crate::ledger::Broken {
            audit_id: Some(7),
            seq: Some(9),
            what: "row 7 <was> edited".into(),
        }))))
        .into_string();
        assert!(
            broken.contains("BROKEN") && broken.contains("row 7 &lt;was&gt; edited"),
            "{broken}"
        );

        let mut signed = entry(3);
        signed.proof = Some("{}".into());
        signed.error_code = None;
        assert!(row(&signed).into_string().contains("signed"));
        assert!(!row(&entry(4)).into_string().contains(">signed<"));
    }
}
