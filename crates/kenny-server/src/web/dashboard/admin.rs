//! `/admin` (superusers): accounts and agents, with the "add an agent" form. The
//! buttons call the JSON API (`/api/users`, `/api/agents`); disabling an account or
//! resetting its password first asks, in a dialog that says how many tokens it has,
//! whether to revoke its personal access tokens too. After a change the script re-reads
//! this page and swaps the changed section in, so a secret shown once stays on screen.
//! The viewer's own tokens are on `/account`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Nav, layout, message_page, time_el, viewer};
use crate::fleet::AgentSummary;
use crate::principal::Role;
use crate::state::AppState;
use crate::store::UserRecord;
use crate::web::html::esc;

pub(super) async fn page(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let (who, csrf) = match viewer(&state, &headers, "/admin").await {
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
    let read = state.store.blocking(move |s| s.users()).await;
    let agents = crate::fleet::list(&state, &who).await;
    let (users, agents) = match (read, agents) {
        (Ok(r), Ok(a)) => (r, a),
        (Err(e), _) | (_, Err(e)) => {
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
    let body = format!(
        "<div class=\"page-head\"><h1>Admin</h1><span class=\"muted\">Your own tokens and connected apps are on \
         <a href=\"/account\">your account page</a>.</span></div><div class=\"admin-grid\">{}{}</div>",
        users_section(&users, who.user_id),
        agents_section(&agents, &state.base_url),
    );
    layout(&who, &csrf, "Admin", Nav::Admin, &body)
}

fn role_select(current: Role, id: &str) -> String {
    let options: String = [Role::User, Role::Operator, Role::Superuser]
        .iter()
        .map(|r| {
            let sel = if *r == current { " selected" } else { "" };
            format!("<option value=\"{0}\"{sel}>{0}</option>", r.as_str())
        })
        .collect();
    format!("<select name=\"role\" id=\"{id}\" aria-label=\"Role\">{options}</select>")
}

fn users_section(users: &[UserRecord], me: i64) -> String {
    let rows: String = users
        .iter()
        .map(|u| {
            let state = if u.disabled { "disabled" } else { "active" };
            let toggle = if u.disabled { "Enable" } else { "Disable" };
            let you = if u.id == me { " <span class=\"muted\">(you)</span>" } else { "" };
            format!(
                "<tr data-user-id=\"{id}\" data-username=\"{name}\" data-disabled=\"{disabled}\" data-live-tokens=\"{live}\">\
                 <td data-label=\"User\"><strong>{name}</strong>{you}<div class=\"muted\">{state}{totp}</div></td>\
                 <td data-label=\"Role\">{role}</td>\
                 <td data-label=\"Hosts\"><input name=\"hosts\" value=\"{hosts}\" placeholder=\"pc-a, pc-b (role user)\" aria-label=\"Hosts of {name}\"></td>\
                 <td data-label=\"\" class=\"row-actions\"><button type=\"button\" data-user-action=\"save\">Save</button>\
                 <button type=\"button\" class=\"secondary\" data-user-action=\"toggle\">{toggle}</button>\
                 <button type=\"button\" class=\"secondary\" data-user-action=\"password\">Reset password</button>\
                 <button type=\"button\" class=\"danger\" data-user-action=\"delete\">Delete</button></td></tr>",
                id = u.id,
                name = esc(&u.username),
                disabled = u.disabled,
                live = u.live_tokens,
                totp = if u.totp_enabled { " · 2FA on" } else { "" },
                role = role_select(u.role, &format!("role-{}", u.id)),
                hosts = esc(&u.hosts.join(", ")),
            )
        })
        .collect();
    format!(
        "<section class=\"card\" id=\"users\"><h2>Users</h2>\
         <div id=\"users-result\" class=\"status\" role=\"status\" data-keep hidden></div>\
         <table class=\"stack\"><thead><tr><th>User</th><th>Role</th><th>Hosts</th><th></th></tr></thead><tbody>{rows}</tbody></table>\
         <h3>Add a user</h3><form id=\"user-form\" class=\"inline-form\">\
         <label>User name<input name=\"username\" required autocomplete=\"off\"></label>\
         <label>Role{role}</label>\
         <label>Hosts (role user)<input name=\"hosts\" placeholder=\"pc-a, pc-b\" autocomplete=\"off\"></label>\
         <label>Password (empty: generate one)<input name=\"password\" type=\"password\" autocomplete=\"new-password\"></label>\
         <button>Add user</button></form></section>",
        role = role_select(Role::User, "new-user-role"),
    )
}

fn agents_section(agents: &[AgentSummary], base_url: &str) -> String {
    let rows: String = agents
        .iter()
        .map(|a| {
            format!(
                "<tr><td data-label=\"Agent\"><a href=\"/hosts/{id}\">{id}</a></td><td data-label=\"State\">{state}</td>\
                 <td data-label=\"OS\">{os}</td><td data-label=\"Key\">{key}</td><td data-label=\"Last seen\">{seen}</td></tr>",
                id = esc(&a.agent_id),
                state = if a.online { "online" } else { "offline" },
                os = esc(a.os.as_deref().unwrap_or("—")),
                key = if a.enrolled { "enrolled" } else { "waiting for the PC" },
                seen = time_el(a.last_seen.as_deref()),
            )
        })
        .collect();
    let table = if agents.is_empty() {
        "<p class=\"muted\">No agents yet.</p>".to_owned()
    } else {
        format!(
            "<table class=\"stack\"><thead><tr><th>Agent</th><th>State</th><th>OS</th><th>Key</th><th>Last seen</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    };
    let plaintext_note = if base_url.starts_with("http://") {
        "<p class=\"note\">This server's URL is plain <code>http://</code>: agents on other PCs refuse it unless it is on their own network and you add <code>--allow-plaintext</code>. Put kenny behind HTTPS and start it with <code>--public-url</code>.</p>"
    } else {
        ""
    };
    format!(
        "<section class=\"card\" id=\"agents\"><h2>Agents</h2>{table}\
         <h3>Add an agent</h3><p class=\"muted\">Registers the PC and shows the command to run on it, as an administrator. The enrollment token in it is shown once and works once.</p>\
         <form id=\"agent-form\" class=\"inline-form\"><label>Agent id<input name=\"agent_id\" required pattern=\"[A-Za-z0-9][A-Za-z0-9._\\-]{{0,63}}\" placeholder=\"den-pc\" autocomplete=\"off\"></label>\
         <button>Add agent</button></form>{plaintext_note}<div id=\"agent-result\" class=\"status\" role=\"status\" data-keep hidden></div></section>"
    )
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
        let html = users_section(&users, 3);
        assert!(html.contains("<strong>&lt;kim&gt;</strong> <span class=\"muted\">(you)</span>"));
        assert!(html.contains("value=\"pc-a, pc-b\""));
        assert!(html.contains("<option value=\"user\" selected>user</option>"));
        assert!(
            html.contains("data-live-tokens=\"3\""),
            "the disable dialog says how many tokens stop"
        );
        assert!(agents_section(&[], "http://10.0.0.1:7420").contains("--allow-plaintext"));
        assert!(!agents_section(&[], "https://kenny.example.com").contains("--allow-plaintext"));
    }
}
