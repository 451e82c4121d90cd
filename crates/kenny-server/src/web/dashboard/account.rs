//! `/account` (everyone signed in): what a person manages for themselves: their
//! password (optionally revoking their tokens, after a confirmation that says how many
//! stop working), their personal access tokens, and the apps they let act as them
//! (OAuth grants), each of which they can disconnect. The buttons call `/api/me/...`;
//! after a change the script re-reads this page and swaps the changed sections in.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};

use super::{Nav, layout, message_page, time_el, viewer};
use crate::state::Accounts;
use crate::store::{GrantRecord, TokenRecord};

pub(super) async fn page(State(accounts): State<Accounts>, headers: HeaderMap) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/account").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    let user_id = who.user_id;
    let now = accounts.clock.now();
    let read = accounts
        .store
        .blocking(move |s| Ok((s.user_tokens(user_id)?, s.user_grants(user_id, &now)?)))
        .await;
    let (tokens, grants) = match read {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "reading the account page failed");
            return message_page(
                &who,
                &csrf,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "Your account could not be read; see the server log.",
            );
        }
    };
    let body = html! {
        div class="page-head" { h1 { "Your account" } }
        div class="admin-grid" {
            (password_section())
            (apps_section(&grants))
            (tokens_section(&tokens))
        }
    };
    layout(&who, &csrf, "Account", Nav::Account, body)
}

fn password_section() -> Markup {
    html! {
        section class="card" id="password" {
            h2 { "Password" }
            div id="password-result" class="status" role="status" data-keep hidden {}
            p class="muted" { "Changing it signs out your other sessions and disconnects every app you connected." }
            form id="password-form" class="inline-form" {
                label {
                    "Current password"
                    input name="current_password" type="password" autocomplete="current-password" required;
                }
                label {
                    "New password (at least 8 characters)"
                    input name="new_password" type="password" autocomplete="new-password" minlength="8" required;
                }
                label {
                    "Repeat the new password"
                    input name="confirm" type="password" autocomplete="new-password" required;
                }
                label class="check" {
                    input type="checkbox" name="revoke_tokens";
                    " Also revoke my personal access tokens"
                }
                button { "Change password" }
            }
        }
    }
}

/// How a grant's app is named: the name it gave itself, as its claim, or its id.
fn app_label(g: &GrantRecord) -> String {
    match g.client_name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => format!("\u{201c}{name}\u{201d}"),
        None => g.client_id.clone(),
    }
}

/// Scheme, host and port of a redirect URI.
fn redirect_host(uri: Option<&str>) -> String {
    uri.and_then(|u| url::Url::parse(u).ok())
        .map(|u| match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{}://{h}:{p}", u.scheme()),
            (Some(h), None) => format!("{}://{h}", u.scheme()),
            _ => u.scheme().to_owned(),
        })
        .unwrap_or_else(|| "—".to_owned())
}

fn apps_section(grants: &[GrantRecord]) -> Markup {
    html! {
        section class="card" id="apps" {
            h2 { "Connected apps" }
            div id="apps-result" class="status" role="status" data-keep hidden {}
            p class="muted" {
                "Apps you allowed to act as you through kenny's MCP endpoint (OAuth). An app names itself; \
                 its id and where it sends you back identify it. Disconnecting one ends its access at once."
            }
            @if grants.is_empty() {
                p class="muted" id="no-apps" { "No app is connected to your account." }
            } @else {
                table class="stack" {
                    thead { tr { th { "App" } th { "Sends back to" } th { "Connected" } th { "Last active" } th {} } }
                    tbody {
                        @for g in grants {
                            @let label = app_label(g);
                            tr data-grant-id=(g.id) data-app=(label) {
                                td data-label="App" {
                                    strong { (label) }
                                    div class="muted" { code { (g.client_id) } }
                                }
                                td data-label="Sends back to" { code { (redirect_host(g.redirect_uri.as_deref())) } }
                                td data-label="Connected" { (time_el(Some(&g.created_at))) }
                                td data-label="Last active" { (time_el(Some(&g.last_issued_at))) }
                                td data-label="" class="row-actions" {
                                    button type="button" class="danger" data-grant-action="revoke" { "Disconnect" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn tokens_section(tokens: &[TokenRecord]) -> Markup {
    let live: Vec<&TokenRecord> = tokens.iter().filter(|t| t.revoked_at.is_none()).collect();
    html! {
        section class="card" id="tokens" {
            h2 { "Your tokens" }
            div id="tokens-result" class="status" role="status" data-keep hidden {}
            p class="muted" { "Personal access tokens let MCP and API clients act as you. A new token is shown once." }
            @if live.is_empty() {
                p class="muted" { "You have no personal access tokens." }
            } @else {
                table class="stack" {
                    thead { tr { th { "Label" } th { "Created" } th { "Last used" } th {} } }
                    tbody {
                        @for t in &live {
                            tr data-token-id=(t.id) {
                                td data-label="Label" { (t.label.as_deref().unwrap_or("(no label)")) }
                                td data-label="Created" { (time_el(Some(&t.created_at))) }
                                td data-label="Last used" { (time_el(t.last_used_at.as_deref())) }
                                td data-label="" class="row-actions" {
                                    button type="button" class="danger" data-token-action="revoke" { "Revoke" }
                                }
                            }
                        }
                    }
                }
            }
            form id="token-form" class="inline-form" {
                label { "Label" input name="label" maxlength="100" placeholder="laptop" autocomplete="off"; }
                label {
                    "Your password"
                    input name="password" type="password" autocomplete="current-password" required;
                }
                button { "Create token" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(name: Option<&str>, redirect: Option<&str>) -> GrantRecord {
        GrantRecord {
            id: "fam-\"1".into(),
            client_id: "kenny_client_<x>".into(),
            client_name: name.map(str::to_owned),
            redirect_uri: redirect.map(str::to_owned),
            created_at: "t".into(),
            last_issued_at: "t".into(),
            expires_at: "t".into(),
        }
    }

    #[test]
    fn apps_are_named_by_their_claim_id_and_redirect_host_escaped() {
        let html = apps_section(&[grant(Some("<Claude>"), Some("http://127.0.0.1:53682/callback?x=1"))]).into_string();
        assert!(html.contains("data-grant-id=\"fam-&quot;1\""));
        assert!(html.contains("<strong>\u{201c}&lt;Claude&gt;\u{201d}</strong>"));
        assert!(html.contains("<code>kenny_client_&lt;x&gt;</code>"));
        assert!(
            html.contains("<code>http://127.0.0.1:53682</code>"),
            "host and port, not the path"
        );
        let html = apps_section(&[grant(None, None)]).into_string();
        assert!(html.contains("<strong>kenny_client_&lt;x&gt;</strong>") && html.contains("<code>—</code>"));
        assert!(apps_section(&[]).into_string().contains("No app is connected"));
    }

    #[test]
    fn revoked_tokens_are_not_listed() {
        let tokens = vec![
            TokenRecord {
                id: 1,
                label: Some("<old>".into()),
                created_at: "t".into(),
                last_used_at: None,
                revoked_at: Some("t".into()),
            },
            TokenRecord {
                id: 2,
                label: Some("laptop".into()),
                created_at: "t".into(),
                last_used_at: None,
                revoked_at: None,
            },
        ];
        let html = tokens_section(&tokens).into_string();
        assert!(html.contains("data-token-id=\"2\"") && !html.contains("&lt;old"));
    }
}
