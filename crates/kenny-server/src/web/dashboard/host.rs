//! `/hosts/{id}`: one PC: facts, latest telemetry by section, recent calls, the last
//! screenshot, and the action buttons (which call `/api/agent/{id}/...`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::{Nav, badge, chat_panel, layout, message_page, short_time, time_el, viewer};
use crate::fleet::AgentSummary;
use crate::principal::Role;
use crate::state::AppState;
use crate::store::{AuditEntry, AuditFilter, ScreenshotMeta, UpdateRecord};
use crate::web::html::esc;

const RECENT_CALLS: u32 = 15;

/// What the page shows besides the agent's own record.
struct Extras {
    /// (collected_at, received_at, snapshot)
    telemetry: Option<(String, String, Value)>,
    screenshot: Option<ScreenshotMeta>,
    recent: Vec<AuditEntry>,
    /// How the newest agent update ended.
    last_update: Option<UpdateRecord>,
}

pub(super) async fn page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(agent_id): Path<String>,
) -> Response {
    let path = format!("/hosts/{agent_id}");
    let (who, csrf) = match viewer(&state, &headers, &path).await {
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
    let agent = match crate::fleet::one(&state, &who, &agent_id).await {
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
    let extras = state
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
                screenshot: s.screenshot_meta(&id)?,
                recent,
                last_update: s.agent_updates(&id, 1)?.into_iter().next(),
            })
        })
        .await;
    let extras = match extras {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(error = %e, "reading host details failed");
            Extras {
                telemetry: None,
                screenshot: None,
                recent: Vec::new(),
                last_update: None,
            }
        }
    };
    let title = agent.agent_id.clone();
    layout(&who, &csrf, &title, Nav::Fleet, &render(&agent, &extras))
}

fn render(a: &AgentSummary, x: &Extras) -> String {
    let id = esc(&a.agent_id);
    let state = if a.online {
        "<span class=\"state on\">Online</span>"
    } else {
        "<span class=\"state off\">Offline</span>"
    };
    format!(
        "<nav class=\"crumbs\" aria-label=\"Breadcrumb\"><a href=\"/\">Fleet</a> / {id}</nav>\
         <div class=\"page-head\"><h1>{id}</h1>{state}</div>\
         <div class=\"actions\" id=\"host-actions\" data-agent=\"{id}\">\
         <button type=\"button\" data-action=\"refresh\">Refresh telemetry</button>\
         <button type=\"button\" data-action=\"screenshot\">Capture screen</button>\
         <button type=\"button\" data-action=\"remotehelp\" class=\"secondary\">Start remote help</button>\
         <button type=\"button\" data-action=\"update\" class=\"secondary\">Update agent</button></div>\
         <p id=\"action-status\" class=\"status\" role=\"status\" aria-live=\"polite\" hidden></p>\
         <div class=\"with-chat\"><div class=\"host-grid\">{facts}{telemetry}{screen}{recent}</div>{chat}</div>",
        facts = facts(a, x.last_update.as_ref()),
        telemetry = telemetry(x.telemetry.as_ref()),
        screen = screen(&a.agent_id, x.screenshot.as_ref()),
        recent = recent(&a.agent_id, &x.recent),
        chat = chat_panel(Some(&a.agent_id)),
    )
}

fn facts(a: &AgentSummary, last_update: Option<&UpdateRecord>) -> String {
    let dash = "—";
    let rows = [
        ("Agent id", esc(&a.agent_id)),
        ("Hostname", esc(a.hostname.as_deref().unwrap_or(dash))),
        ("OS", esc(a.os.as_deref().unwrap_or(dash))),
        ("Architecture", esc(a.arch.as_deref().unwrap_or(dash))),
        ("Agent version", esc(a.version.as_deref().unwrap_or(dash))),
        ("Online", if a.online { "yes" } else { "no" }.to_owned()),
        ("Key enrolled", if a.enrolled { "yes" } else { "no" }.to_owned()),
        ("Last seen", time_el(a.last_seen.as_deref())),
        ("Last update", last_update.map_or_else(|| dash.to_owned(), update_line)),
    ];
    let dl: String = rows.iter().map(|(k, v)| format!("<dt>{k}</dt><dd>{v}</dd>")).collect();
    format!("<section class=\"card\" id=\"facts\"><h2>Facts</h2><dl class=\"facts\">{dl}</dl></section>")
}

/// `0.1.1: rolled back (why), <time>`; the reason is the agent's words, escaped.
fn update_line(u: &UpdateRecord) -> String {
    let outcome = match u.outcome.as_str() {
        "succeeded" => "installed".to_owned(),
        "rolled_back" => "rolled back".to_owned(),
        "no_report" => "no report".to_owned(),
        other => esc(other),
    };
    let why = if u.outcome == "succeeded" || u.detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", esc(&u.detail))
    };
    format!(
        "<span id=\"last-update\">{}: {outcome}{why}, {}</span>",
        esc(&u.to_version),
        time_el(Some(&u.at))
    )
}

/// Sections sorted worst first, then by name, each expandable to its details.
pub(super) fn telemetry(t: Option<&(String, String, Value)>) -> String {
    let Some((collected_at, _, snapshot)) = t else {
        return "<section class=\"card\" id=\"telemetry\"><h2>Health</h2>\
                <p class=\"muted\" id=\"telemetry-when\">No telemetry yet: it arrives when the agent connects, or press Refresh telemetry.</p>\
                <div id=\"sections\"></div></section>"
            .to_owned();
    };
    let mut sections: Vec<(crate::health::Status, &String, String, Value)> = snapshot
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, v)| {
            let (status, summary) = crate::health::section(v);
            let mut details = v.clone();
            if let Some(o) = details.as_object_mut() {
                o.remove("status");
                o.remove("summary");
            }
            (status, name, summary, details)
        })
        .collect();
    sections.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let items: String = sections
        .iter()
        .map(|(status, name, summary, details)| {
            let pretty = serde_json::to_string_pretty(details).unwrap_or_default();
            format!(
                "<details class=\"section\" data-section=\"{n}\"><summary>{b} <strong>{n}</strong> <span class=\"summary\">{s}</span></summary><pre>{d}</pre></details>",
                n = esc(name),
                b = badge(status.as_str()),
                s = esc(summary),
                d = esc(&pretty),
            )
        })
        .collect();
    let overall = crate::health::of_snapshot(snapshot)
        .map(|h| format!("{} {}", badge(h.status.as_str()), esc(&h.summary)))
        .unwrap_or_default();
    format!(
        "<section class=\"card\" id=\"telemetry\"><h2>Health</h2><p class=\"overall\" id=\"telemetry-overall\">{overall}</p>\
         <p class=\"muted\" id=\"telemetry-when\">Collected {}</p><div id=\"sections\">{items}</div></section>",
        time_el(Some(collected_at))
    )
}

fn screen(agent_id: &str, shot: Option<&ScreenshotMeta>) -> String {
    let body = match shot {
        Some(m) => format!(
            "<figure><a href=\"/api/agent/{id}/screenshot\"><img id=\"screenshot-img\" src=\"/api/agent/{id}/screenshot\" alt=\"Latest screenshot of {id}\" width=\"{w}\" height=\"{h}\"></a>\
             <figcaption id=\"screenshot-caption\">{w}×{h}, taken {at} by {by}</figcaption></figure>",
            id = esc(agent_id),
            w = m.width,
            h = m.height,
            at = esc(&short_time(&m.taken_at)),
            by = esc(&m.taken_by),
        ),
        None => format!(
            "<figure><img id=\"screenshot-img\" alt=\"Latest screenshot of {}\" hidden>\
             <figcaption id=\"screenshot-caption\" class=\"muted\">No screenshot yet: press Capture screen.</figcaption></figure>",
            esc(agent_id)
        ),
    };
    format!("<section class=\"card\" id=\"screen\"><h2>Screen</h2>{body}</section>")
}

fn recent(agent_id: &str, rows: &[AuditEntry]) -> String {
    let list = if rows.is_empty() {
        "<p class=\"muted\">No calls yet.</p>".to_owned()
    } else {
        let trs: String = rows
            .iter()
            .map(|e| {
                format!(
                    "<tr><td data-label=\"When\">{}</td><td data-label=\"Tool\"><code>{}</code></td><td data-label=\"Who\">{}</td><td data-label=\"Outcome\">{}{}</td></tr>",
                    time_el(Some(&e.at)),
                    esc(&e.tool),
                    esc(e.user.as_deref().unwrap_or("—")),
                    badge(&e.outcome),
                    e.error_code
                        .as_deref()
                        .map(|c| format!(" <span class=\"muted\">{}</span>", esc(c)))
                        .unwrap_or_default(),
                )
            })
            .collect();
        format!(
            "<table class=\"stack compact\"><thead><tr><th>When</th><th>Tool</th><th>Who</th><th>Outcome</th></tr></thead><tbody>{trs}</tbody></table>"
        )
    };
    format!(
        "<section class=\"card\" id=\"recent\"><h2>Recent calls</h2>{list}<p><a href=\"/audit?agent_id={}\">All calls for this PC</a></p></section>",
        esc(&url::form_urlencoded::byte_serialize(agent_id.as_bytes()).collect::<String>())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn telemetry_lists_worst_first_with_escaped_details() {
        let snap = json!({
            "disk": {"status": "ok", "summary": "plenty", "free_gb": 10},
            "cpu": {"status": "crit", "summary": "<hot>", "load": [9]},
            "memory": {"status": "warn", "summary": "tight"},
        });
        let html = telemetry(Some(&("2026-01-02T03:04:05.000Z".into(), "x".into(), snap)));
        let pos = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing in {html}"));
        assert!(pos("data-section=\"cpu\"") < pos("data-section=\"memory\""));
        assert!(pos("data-section=\"memory\"") < pos("data-section=\"disk\""));
        assert!(html.contains("<span class=\"summary\">&lt;hot&gt;</span>"));
        assert!(html.contains("&quot;free_gb&quot;: 10"));
        assert!(
            !html.contains("&quot;status&quot;"),
            "status and summary are shown once, above"
        );
        assert!(
            html.contains("cpu: &lt;hot&gt;"),
            "the overall line names the worst section"
        );
        assert!(telemetry(None).contains("No telemetry yet"));
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
        let line = update_line(&u);
        assert!(
            line.contains("0.2.0: rolled back (&lt;b&gt;did not log in&lt;/b&gt;)"),
            "{line}"
        );
        let ok = update_line(&UpdateRecord {
            outcome: "succeeded".into(),
            ..u
        });
        assert!(ok.contains("0.2.0: installed,") && !ok.contains("did not"), "{ok}");
    }
}
