//! `/audit`: the audit trail with filters (host, tool, user, outcome) and paging to
//! older rows. A `user` sees the trail of its own calls, as `GET /api/audit` does.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::{Nav, badge, layout, message_page, time_el, viewer};
use crate::principal::Role;
use crate::state::AppState;
use crate::store::{AuditEntry, AuditFilter};
use crate::web::html::esc;

const PAGE: u32 = 50;
const OUTCOMES: &[&str] = &["ok", "error", "refused", "sent", "interrupted"];

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

pub(super) async fn page(State(state): State<Arc<AppState>>, headers: HeaderMap, Query(p): Query<Params>) -> Response {
    let (who, csrf) = match viewer(&state, &headers, "/audit").await {
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
    let entries = match state.store.blocking(move |s| s.audit(&query)).await {
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
    let agents = crate::fleet::list(&state, &who).await.unwrap_or_default();
    let hosts: Vec<String> = agents.into_iter().map(|a| a.agent_id.to_string()).collect();
    layout(&who, &csrf, "Audit log", Nav::Audit, &render(&filter, &entries, &hosts))
}

fn render(f: &AuditFilter, entries: &[AuditEntry], hosts: &[String]) -> String {
    let val = |v: &Option<String>| esc(v.as_deref().unwrap_or(""));
    let outcome_options: String = std::iter::once("")
        .chain(OUTCOMES.iter().copied())
        .map(|o| {
            let selected = if f.outcome.as_deref().unwrap_or("") == o {
                " selected"
            } else {
                ""
            };
            let label = if o.is_empty() { "any" } else { o };
            format!("<option value=\"{o}\"{selected}>{label}</option>")
        })
        .collect();
    let host_options: String = hosts.iter().map(|h| format!("<option value=\"{}\">", esc(h))).collect();
    let tool_options: String = kenny_proto::catalog::TOOLS
        .iter()
        .map(|t| t.name())
        .chain(["agent_health", "agent_update", "select_agent", "list_agents"])
        .map(|t| format!("<option value=\"{t}\">"))
        .collect();
    let rows: String = entries.iter().map(row).collect();
    let table = if entries.is_empty() {
        "<p class=\"empty\">No calls match.</p>".to_owned()
    } else {
        format!(
            "<table class=\"stack\" id=\"audit-table\"><thead><tr><th>When</th><th>Who</th><th>From</th><th>PC</th><th>Tool</th><th>Outcome</th><th>Took</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    };
    let older = match entries.last() {
        Some(last) if entries.len() as u32 == f.limit => {
            format!(
                "<a class=\"button secondary\" id=\"audit-older\" href=\"/audit?{}\">Older</a>",
                page_query(f, last.id)
            )
        }
        _ => String::new(),
    };
    let newest = if f.before_id.is_some() {
        format!(
            "<a class=\"button secondary\" href=\"/audit?{}\">Newest</a>",
            page_query(f, 0)
        )
    } else {
        String::new()
    };
    format!(
        "<div class=\"page-head\"><h1>Audit log</h1><p class=\"muted\">Every call and refusal, newest first, with who made it and from where.</p></div>\
         <section class=\"card\"><form class=\"filters\" method=\"get\" action=\"/audit\">\
         <label>PC<input name=\"agent_id\" list=\"audit-hosts\" value=\"{host}\" autocomplete=\"off\"></label>\
         <label>Tool<input name=\"tool\" list=\"audit-tools\" value=\"{tool}\" autocomplete=\"off\"></label>\
         <label>User<input name=\"user\" value=\"{user}\" autocomplete=\"off\"></label>\
         <label>Outcome<select name=\"outcome\">{outcome_options}</select></label>\
         <div class=\"filter-buttons\"><button>Filter</button><a class=\"button secondary\" href=\"/audit\">Clear</a></div></form>\
         <datalist id=\"audit-hosts\">{host_options}</datalist><datalist id=\"audit-tools\">{tool_options}</datalist>\
         {table}<div class=\"pager\">{newest}{older}</div></section>",
        host = val(&f.agent_id),
        tool = val(&f.tool),
        user = val(&f.username),
    )
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
    esc(&q.finish())
}

fn row(e: &AuditEntry) -> String {
    let dash = "—";
    let who = match (&e.user, &e.credential_kind) {
        (Some(u), Some(k)) => format!("{} <span class=\"muted\">({})</span>", esc(u), esc(k)),
        (Some(u), None) => esc(u),
        _ => dash.to_owned(),
    };
    let host = match &e.agent_id {
        Some(a) => format!("<a href=\"/hosts/{0}\">{0}</a>", esc(a)),
        None => dash.to_owned(),
    };
    let code = e
        .error_code
        .as_deref()
        .map(|c| format!(" <span class=\"muted\">{}</span>", esc(c)))
        .unwrap_or_default();
    format!(
        "<tr data-id=\"{id}\"><td data-label=\"When\">{at}</td><td data-label=\"Who\">{who}</td><td data-label=\"From\">{from}</td>\
         <td data-label=\"PC\">{host}</td><td data-label=\"Tool\"><code>{tool}</code>{target}</td><td data-label=\"Outcome\">{outcome}{code}</td>\
         <td data-label=\"Took\">{ms} ms</td></tr>",
        id = e.id,
        at = time_el(Some(&e.at)),
        from = esc(e.client_addr.as_deref().unwrap_or(dash)),
        tool = esc(&e.tool),
        // API actions name the path they acted on (e.g. which user).
        target = e
            .target
            .as_deref()
            .map(|t| format!(" <span class=\"muted\">{}</span>", esc(t)))
            .unwrap_or_default(),
        outcome = badge(&e.outcome),
        ms = e.duration_ms,
    )
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
        let html = render(&f, &[entry(9), entry(7)], &["pc-a".into()]);
        assert!(html.contains("kim&lt; <span class=\"muted\">(session)</span>"));
        assert!(html.contains("<td data-label=\"From\">127.0.0.1</td>"));
        assert!(
            html.contains("href=\"/audit?agent_id=pc-a&amp;tool=a%26b&amp;before=7\""),
            "{html}"
        );
        assert!(html.contains("value=\"a&amp;b\""));
        // A short page is the last one.
        assert!(!render(&f, &[entry(9)], &[]).contains("audit-older"));
        assert!(
            render(
                &AuditFilter {
                    limit: 5,
                    ..Default::default()
                },
                &[],
                &[]
            )
            .contains("No calls match")
        );
    }
}
