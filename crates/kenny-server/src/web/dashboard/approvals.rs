//! `/approvals`: the MCP calls held for approval (waiting ones with Approve and Deny,
//! then the recent decisions with what became of each) and the rules that hold them.
//! For operators and superusers; each sees the calls on the PCs they reach. The
//! buttons and forms speak to `/api/approvals` (the script sends the CSRF token), which
//! takes decisions only from a signed-in session.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;

use super::{Nav, badge, layout, message_page, time_el, viewer};
use crate::approvals;
use crate::principal::{Principal, Role};
use crate::state::{Accounts, Fleet};
use crate::store::{ApprovalRule, HeldCall, UserRecord};

/// Decided calls shown under the waiting ones.
const RECENT: u32 = 30;
/// How much of a call's arguments or result a row shows.
const SHOWN_CHARS: usize = 600;

struct Page {
    waiting: Vec<HeldCall>,
    recent: Vec<HeldCall>,
    rules: Vec<ApprovalRule>,
    users: Vec<UserRecord>,
}

pub(super) async fn page(State(accounts): State<Accounts>, State(fleet): State<Fleet>, headers: HeaderMap) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/approvals").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    if who.role < Role::Operator {
        return message_page(
            &who,
            &csrf,
            StatusCode::FORBIDDEN,
            "Not for this account",
            "Approvals are given by operators and superusers. A call of yours waiting for one is shown by approval_status.",
        );
    }
    let now = fleet.clock.now();
    let (scope, at) = (who.clone(), now.clone());
    let read = fleet
        .store
        .blocking(move |s| {
            let reach = |calls: Vec<HeldCall>| -> Vec<HeldCall> {
                calls
                    .into_iter()
                    .filter(|c| scope.may_reach(c.agent_id.as_str()))
                    .collect()
            };
            let waiting = reach(s.waiting_held_calls(&at, 500)?);
            let mut recent = reach(s.recent_held_calls(RECENT + 500)?);
            recent.retain(|c| c.status_at(&at) != "held");
            recent.truncate(RECENT as usize);
            Ok(Page {
                waiting,
                recent,
                rules: s.approval_rules()?,
                users: s.users()?,
            })
        })
        .await;
    match read {
        Ok(page) => layout(&who, &csrf, "Approvals", Nav::Approvals, render(&who, &page, &now)),
        Err(e) => {
            tracing::error!(error = %e, "reading held calls failed");
            message_page(
                &who,
                &csrf,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The held calls could not be read; see the server log.",
            )
        }
    }
}

fn render(who: &Principal, page: &Page, now: &str) -> Markup {
    html! {
        div class="page-head" id="approvals-page" {
            h1 { "Approvals" }
            p class="muted" {
                "Calls made over MCP that change a PC wait here when a rule below covers their caller. \
                 Approving runs the call once, as its caller, on the PC shown and no other; denying runs nothing. \
                 A call not decided within 24 hours expires."
            }
        }
        (waiting(&page.waiting))
        (recent(&page.recent, now))
        (rules(who, &page.rules, &page.users))
    }
}

fn waiting(calls: &[HeldCall]) -> Markup {
    html! {
        section class="card" id="approvals-waiting" {
            h2 { "Waiting" }
            div class="result status" role="status" hidden {}
            @if calls.is_empty() {
                p class="muted" { "No call is waiting for approval." }
            } @else {
                table class="stack" {
                    thead { tr { th { "Asked" } th { "Caller" } th { "Call" } th { "Arguments" } th { "Expires" } th {} } }
                    tbody {
                        @for c in calls {
                            tr data-approval=(c.id) {
                                td data-label="Asked" { (time_el(Some(&c.created_at))) }
                                td data-label="Caller" { (c.username) span class="muted" { " (" (c.credential_kind) ")" } }
                                td data-label="Call" {
                                    code { (c.tool) } " on " a href={ "/hosts/" (c.agent_id) } { (c.agent_id) }
                                }
                                // Whole, and with anything that could hide or reorder text escaped.
                                td data-label="Arguments" { pre class="args" { (approvals::readable(&approvals::shown_args(c))) } }
                                td data-label="Expires" { (time_el(Some(&c.expires_at))) }
                                td data-label="" class="row-actions" {
                                    button type="button" data-api={ "POST /api/approvals/" (c.id) "/approve" }
                                        data-confirm={ "Run " (c.tool) " on " (c.agent_id) " as " (c.username) "?" }
                                        data-refresh="approvals-waiting,approvals-recent" { "Approve" }
                                    " "
                                    button type="button" class="secondary" data-api={ "POST /api/approvals/" (c.id) "/deny" }
                                        data-refresh="approvals-waiting,approvals-recent" { "Deny" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn recent(calls: &[HeldCall], now: &str) -> Markup {
    html! {
        section class="card" id="approvals-recent" {
            h2 { "Decided" }
            @if calls.is_empty() {
                p class="muted" { "Nothing decided yet." }
            } @else {
                table class="stack" {
                    thead { tr { th { "Asked" } th { "Caller" } th { "Call" } th { "Status" } th { "Decided" } th { "Result" } } }
                    tbody {
                        @for c in calls {
                            @let status = c.status_at(now);
                            tr data-approval=(c.id) data-status=(status) {
                                td data-label="Asked" { (time_el(Some(&c.created_at))) }
                                td data-label="Caller" { (c.username) }
                                td data-label="Call" {
                                    code { (c.tool) } " on " a href={ "/hosts/" (c.agent_id) } { (c.agent_id) }
                                }
                                td data-label="Status" { (badge(status)) }
                                td data-label="Decided" {
                                    @if let Some(by) = &c.decided_by { (by) " " (time_el(c.decided_at.as_deref())) }
                                }
                                td data-label="Result" { pre class="args" { (cut(&result_text(c.result.as_ref()))) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn rules(who: &Principal, rules: &[ApprovalRule], users: &[UserRecord]) -> Markup {
    html! {
        section class="card" id="approvals-rules" {
            h2 { "Rules" }
            p class="muted" {
                "Whose MCP calls that change something wait for approval: every credential of a user, or one \
                 personal access token. Reads never wait. Where a rule allows it, a caller whose client supports MCP \
                 elicitation is asked there: that guards against the model acting alone, not against whoever holds \
                 the token. For an account someone else should watch (a child's), untick it: then only an operator \
                 approves, here. A rule on yourself is lifted by someone else."
            }
            div class="result status" role="status" hidden {}
            @if rules.is_empty() {
                p class="muted" { "No rule: MCP calls run without approval." }
            } @else {
                table class="stack" {
                    thead { tr { th { "Covers" } th { "Who approves" } th { "Set" } th {} } }
                    tbody {
                        @for r in rules {
                            tr data-rule={ (r.subject.as_str()) "-" (r.subject_id) } {
                                td data-label="Covers" { (r.subject.as_str()) " " strong { (r.name) } }
                                td data-label="Who approves" {
                                    @if r.elicitation { "the caller's MCP client, or an operator here" } @else { "an operator here" }
                                }
                                td data-label="Set" { "by " (r.set_by) " " (time_el(Some(&r.set_at))) }
                                td data-label="" class="row-actions" {
                                    button type="button" class="secondary"
                                        data-api={ "DELETE /api/approvals/rules/" (r.subject.as_str()) "/" (r.subject_id) }
                                        data-confirm={ "Let " (r.name) " run MCP calls without approval?" }
                                        data-refresh="approvals-rules" { "Remove" }
                                }
                            }
                        }
                    }
                }
            }
            @if who.role >= Role::Operator {
                form class="inline-form" data-api="POST /api/approvals/rules" data-refresh="approvals-rules" id="rule-user-form" {
                    input type="hidden" name="subject" value="user";
                    label {
                        "Require approval for user"
                        select name="id" data-type="number" {
                            @for u in users { option value=(u.id) { (u.username) " (" (u.role.as_str()) ")" } }
                        }
                    }
                    label {
                        input type="checkbox" name="elicitation" data-type="bool" checked;
                        " their MCP client may ask them (elicitation)"
                    }
                    button { "Add rule" }
                    div class="result status" role="status" hidden {}
                }
                form class="inline-form" data-api="POST /api/approvals/rules" data-refresh="approvals-rules" id="rule-token-form" {
                    input type="hidden" name="subject" value="token";
                    label {
                        "Or for one personal access token, by id"
                        input name="id" data-type="number" type="number" min="1" required;
                    }
                    label {
                        input type="checkbox" name="elicitation" data-type="bool" checked;
                        " its MCP client may ask (elicitation)"
                    }
                    button { "Add rule" }
                    div class="result status" role="status" hidden {}
                }
            }
        }
    }
}

/// A stored MCP result as a person reads it: its text content.
fn result_text(result: Option<&Value>) -> String {
    let Some(result) = result else { return String::new() };
    let text: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    let error = result.get("isError").and_then(Value::as_bool) == Some(true);
    format!("{}{}", if error { "error: " } else { "" }, text.join("\n"))
}

fn cut(s: &str) -> String {
    if s.chars().count() <= SHOWN_CHARS {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(SHOWN_CHARS).collect();
    out.push('…');
    out
}
