//! `/admin` (superusers): accounts and agents, with the "add an agent" form and
//! install links (`install_links`). The
//! buttons call the JSON API (`/api/users`, `/api/agents`); disabling an account or
//! resetting its password first asks, in a dialog that says how many tokens it has,
//! whether to revoke its personal access tokens too. After a change the script re-reads
//! this page and swaps the changed section in, so a secret shown once stays on screen.
//! The viewer's own tokens are on `/account`.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};

use super::{Nav, layout, message_page, time_el, viewer};
use crate::fleet::AgentSummary;
use crate::principal::Role;
use crate::state::{Accounts, Fleet, Site};
use crate::store::UserRecord;

pub(super) async fn page(
    State(accounts): State<Accounts>,
    State(fleet): State<Fleet>,
    State(site): State<Site>,
    headers: HeaderMap,
) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/admin").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    if who.role != Role::Superuser {
        return message_page(
            &who,
            &csrf,
            StatusCode::FORBIDDEN,
            "Superusers only",
            "Managing accounts and agents needs a superuser.",
        );
    }
    let read = accounts.store.blocking(move |s| s.users()).await;
    let agents = fleet.list(&who).await;
    let links = fleet.store.blocking(|s| s.install_links(20)).await;
    let releases_dir = crate::updates::releases::dir(&site.config.data_dir);
    let builds = tokio::task::spawn_blocking(move || crate::updates::releases::all(&releases_dir))
        .await
        .unwrap_or_default();
    let (users, agents, links) = match (read, agents, links) {
        (Ok(r), Ok(a), Ok(l)) => (r, a, l),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            tracing::error!(error = %e, "reading the admin page failed");
            return message_page(
                &who,
                &csrf,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "Accounts could not be read; see the server log.",
            );
        }
    };
    let body = html! {
        div class="page-head" {
            h1 { "Admin" }
            span class="muted" {
                "Your own tokens and connected apps are on " a href="/account" { "your account page" } "."
            }
        }
        div class="admin-grid" {
            (users_section(&users, who.user_id))
            (agents_section(&agents, &site.base_url))
            (super::install_links::section(&links, &builds, &fleet.clock.now()))
        }
    };
    layout(&who, &csrf, "Admin", Nav::Admin, body)
}

fn role_select(current: Role, id: &str) -> Markup {
    html! {
        select name="role" id=(id) aria-label="Role" {
            @for r in [Role::User, Role::Operator, Role::Superuser] {
                option value=(r.as_str()) selected[r == current] { (r.as_str()) }
            }
        }
    }
}

fn users_section(users: &[UserRecord], me: i64) -> Markup {
    html! {
        section class="card" id="users" {
            h2 { "Users" }
            div id="users-result" class="status" role="status" data-keep hidden {}
            table class="stack" {
                thead { tr { th { "User" } th { "Role" } th { "Hosts" } th {} } }
                tbody { @for u in users { (user_row(u, me)) } }
            }
            h3 { "Add a user" }
            form id="user-form" class="inline-form" {
                label { "User name" input name="username" required autocomplete="off"; }
                label { "Role" (role_select(Role::User, "new-user-role")) }
                label { "Hosts (role user)" input name="hosts" placeholder="pc-a, pc-b" autocomplete="off"; }
                label {
                    "Password (empty: generate one)"
                    input name="password" type="password" autocomplete="new-password";
                }
                button { "Add user" }
            }
        }
    }
}

fn user_row(u: &UserRecord, me: i64) -> Markup {
    html! {
        tr data-user-id=(u.id) data-username=(u.username) data-disabled=(u.disabled) data-live-tokens=(u.live_tokens) {
            td data-label="User" {
                strong { (u.username) }
                @if u.id == me { " " span class="muted" { "(you)" } }
                div class="muted" {
                    @if u.disabled { "disabled" } @else { "active" }
                    @if u.totp_enabled { " · 2FA on" }
                }
            }
            td data-label="Role" { (role_select(u.role, &format!("role-{}", u.id))) }
            td data-label="Hosts" {
                input name="hosts" value=(u.hosts.join(", ")) placeholder="pc-a, pc-b (role user)"
                    aria-label={ "Hosts of " (u.username) };
            }
            td data-label="" class="row-actions" {
                button type="button" data-user-action="save" { "Save" }
                button type="button" class="secondary" data-user-action="toggle" {
                    @if u.disabled { "Enable" } @else { "Disable" }
                }
                button type="button" class="secondary" data-user-action="password" { "Reset password" }
                button type="button" class="danger" data-user-action="delete" { "Delete" }
            }
        }
    }
}

fn agents_section(agents: &[AgentSummary], base_url: &str) -> Markup {
    html! {
        section class="card" id="agents" {
            h2 { "Agents" }
            @if agents.is_empty() {
                p class="muted" { "No agents yet." }
            } @else {
                table class="stack" {
                    thead { tr { th { "Agent" } th { "State" } th { "OS" } th { "Key" } th { "Last seen" } th {} } }
                    tbody {
                        @for a in agents {
                            tr data-agent-id=(a.agent_id) {
                                @let id = a.agent_id.as_str();
                                td data-label="Agent" { a href={ "/hosts/" (id) } { (id) } }
                                td data-label="State" { @if a.online { "online" } @else { "offline" } }
                                td data-label="OS" { (a.os.as_deref().unwrap_or("—")) }
                                td data-label="Key" { @if a.enrolled { "enrolled" } @else { "waiting for the PC" } }
                                td data-label="Last seen" { (time_el(a.last_seen.as_deref())) }
                                td data-label="" class="row-actions" {
                                    button type="button" class="secondary" data-agent-action="rekey" { "New enrollment" }
                                    button type="button" class="danger" data-agent-action="remove" { "Remove" }
                                }
                            }
                        }
                    }
                }
            }
            h3 { "Add an agent" }
            p class="muted" {
                "Registers the PC and shows the command to run on it, as an administrator. \
                 The enrollment token in it is shown once and works once."
            }
            form id="agent-form" class="inline-form" {
                label {
                    "Agent id"
                    input name="agent_id" required pattern="[A-Za-z0-9][A-Za-z0-9._\\-]{0,63}" placeholder="den-pc"
                        autocomplete="off";
                }
                button { "Add agent" }
            }
            @if base_url.starts_with("http://") {
                p class="note" {
                    "This server's URL is plain " code { "http://" } ": agents on other PCs refuse it unless it is on \
                     their own network and you add " code { "--allow-plaintext" } ". Put kenny behind HTTPS and start \
                     it with " code { "--public-url" } "."
                }
            }
            div id="agent-result" class="status" role="status" data-keep hidden {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_escape_names_and_carry_token_counts() {
        let users = vec![UserRecord {
            id: 3,
            username: "<kim>".into(),
            role: Role::User,
            disabled: false,
            hosts: vec!["pc-a".into(), "pc-b".into()],
            created_at: "t".into(),
            totp_enabled: true,
            live_tokens: 3,
        }];
        let html = users_section(&users, 3).into_string();
        assert!(html.contains("<strong>&lt;kim&gt;</strong> <span class=\"muted\">(you)</span>"));
        assert!(html.contains("value=\"pc-a, pc-b\""));
        assert!(html.contains("<option value=\"user\" selected>user</option>"));
        assert!(
            html.contains("data-live-tokens=\"3\""),
            "the disable dialog says how many tokens stop"
        );
        assert!(
            agents_section(&[], "http://10.0.0.1:7420")
                .into_string()
                .contains("--allow-plaintext")
        );
        assert!(
            !agents_section(&[], "https://kenny.example.com")
                .into_string()
                .contains("--allow-plaintext")
        );
    }
}
