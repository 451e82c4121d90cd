//! `/api`: the JSON HTTP API. Handlers parse, delegate and map errors; nothing else.

mod agents;
mod alerts;
mod approvals;
mod audit;
pub(crate) mod audited;
mod campaigns;
mod chat;
mod error;
mod extract;
mod health;
pub(crate) mod held_tokens;
mod hosts;
mod install_links;
mod me;
mod policy;
mod users;
mod webfilter;

use std::sync::Arc;

use axum::Router;
use axum::routing::{delete, get, post, put};

use crate::state::AppState;

pub(crate) use error::ApiError;
pub(crate) use extract::{BodyShape, JsonBody, SignedIn, Superuser, patched};

/// Routes that need a principal (mounted behind `guard::require_principal`).
pub(crate) fn authenticated() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/audit", get(audit::list))
        .route("/api/agents", get(agents::list).post(agents::create))
        .route("/api/agent/{id}", get(hosts::facts))
        .route("/api/agent/{id}/refresh", post(hosts::refresh))
        .route(
            "/api/agent/{id}/screenshot",
            get(hosts::screenshot).post(hosts::capture),
        )
        .route("/api/agent/{id}/remotehelp", post(hosts::remote_help))
        .route("/api/agents/{id}", delete(agents::remove))
        .route("/api/agents/{id}/rekey", post(agents::rekey))
        .route("/api/agents/{id}/update", post(hosts::update))
        .route("/api/agents/{id}/updates", get(hosts::updates))
        .route("/api/agents/{id}/telemetry", get(agents::telemetry))
        .route("/api/agents/{id}/channel", put(campaigns::set_channel))
        .route("/api/campaigns", get(campaigns::list).post(campaigns::start))
        .route("/api/campaigns/{id}", get(campaigns::show))
        .route("/api/campaigns/{id}/{action}", post(campaigns::act))
        .route("/api/agent/{id}/webfilter", get(webfilter::show).put(webfilter::change))
        .route("/api/agent/{id}/webfilter/push", post(webfilter::push))
        .route("/api/agent/{id}/accounts/{tool}", post(hosts::account_action))
        .route("/api/agent/{id}/web-activity", get(webfilter::activity))
        .route(
            "/api/webfilter/sources",
            get(webfilter::sources).post(webfilter::add_source),
        )
        .route("/api/webfilter/sources/{id}", delete(webfilter::remove_source))
        .route("/api/webfilter/sources/{id}/refresh", post(webfilter::refresh_source))
        .route(
            "/api/install-links",
            get(install_links::list).post(install_links::create),
        )
        .route("/api/install-links/{id}", delete(install_links::revoke))
        .route("/api/releases", get(install_links::builds))
        .route("/api/policy", get(policy::show).put(policy::replace))
        .route("/api/health/thresholds", get(health::show).put(health::change))
        .route("/api/alerts", get(alerts::list))
        .route(
            "/api/alerts/settings",
            get(alerts::show_settings).put(alerts::change_settings),
        )
        .route(
            "/api/alerts/channels",
            get(alerts::channels).post(alerts::create_channel),
        )
        .route(
            "/api/alerts/channels/{id}",
            put(alerts::update_channel).delete(alerts::delete_channel),
        )
        .route("/api/alerts/channels/{id}/test", post(alerts::test_channel))
        .route("/api/alerts/channels/{id}/digest", post(alerts::send_digest))
        .route("/api/alerts/deliveries", get(alerts::deliveries))
        .route("/api/alerts/silences", get(alerts::silences).post(alerts::silence))
        .route("/api/alerts/silences/clear", post(alerts::unsilence))
        .route("/api/approvals", get(approvals::list))
        .route("/api/approvals/rules", get(approvals::rules).post(approvals::add_rule))
        .route("/api/approvals/rules/{subject}/{id}", delete(approvals::remove_rule))
        .route("/api/approvals/{id}", get(approvals::show))
        .route("/api/approvals/{id}/approve", post(approvals::approve))
        .route("/api/approvals/{id}/deny", post(approvals::deny))
        .route("/api/chat/status", get(chat::status))
        .route("/api/chat/sessions", get(chat::list).post(chat::create))
        .route("/api/chat/sessions/{id}", get(chat::show).delete(chat::delete))
        .route("/api/chat/sessions/{id}/selection", put(chat::select))
        .route("/api/chat/sessions/{id}/messages", post(chat::message))
        .route("/api/chat/calls/{id}/{decision}", post(chat::decide))
        .route("/api/users", get(users::list).post(users::create))
        .route(
            "/api/users/{id}",
            get(users::get_one).patch(users::update).delete(users::delete),
        )
        .route("/api/users/{id}/password", post(users::reset_password))
        .route("/api/me", get(me::show))
        .route("/api/me/password", post(me::change_password))
        .route("/api/me/sessions", get(me::sessions))
        .route("/api/me/sessions/{id}", delete(me::revoke_session))
        .route("/api/me/tokens", get(me::tokens).post(me::create_token))
        .route("/api/me/tokens/{id}", delete(me::revoke_token))
        .route("/api/me/grants", get(me::grants))
        .route("/api/me/grants/{id}", delete(me::revoke_grant))
        .route("/api/me/totp", post(me::totp_start))
        .route("/api/me/totp/confirm", post(me::totp_confirm))
        .route("/api/me/totp/disable", post(me::totp_disable))
}

/// Routes with their own credential check (the agent's enrollment token).
pub(crate) fn public() -> Router<Arc<AppState>> {
    Router::new().route("/api/agents/{id}/enroll", post(agents::enroll))
}
