//! `/alerts`: where alerts go and when. Superusers set up channels (each with a test
//! button), the alert settings and the health thresholds, and see every delivery with
//! its errors; operators silence alerts; everyone sees the silences of their PCs.
//! Forms are sent as JSON to `/api/alerts/...` and `/api/health/thresholds` by the
//! dashboard script (`data-api`), so the page and the API check the same things.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;

use super::{Nav, badge, layout, message_page, time_el, viewer};
use crate::alerts::channels::ChannelConfig;
use crate::alerts::settings::{AlertSettings, DAYS};
use crate::health::Thresholds;
use crate::principal::Role;
use crate::state::{Accounts, Fleet};
use crate::store::{ChannelRow, DeliveryRow, SilenceRow};

struct Page {
    role: Role,
    channels: Vec<ChannelRow>,
    settings: AlertSettings,
    thresholds: Thresholds,
    silences: Vec<SilenceRow>,
    deliveries: Vec<(DeliveryRow, String)>,
}

pub(super) async fn page(State(accounts): State<Accounts>, State(fleet): State<Fleet>, headers: HeaderMap) -> Response {
    let (who, csrf) = match viewer(&accounts, &headers, "/alerts").await {
        Ok(v) => v,
        Err(redirect) => return redirect,
    };
    let superuser = who.role == Role::Superuser;
    let now = fleet.clock.now();
    let read = fleet
        .store
        .blocking(move |s| {
            Ok((
                if superuser { s.channels()? } else { Vec::new() },
                AlertSettings::load(s)?,
                s.active_silences(None, &now)?,
                if superuser {
                    s.recent_deliveries(30)?
                } else {
                    Vec::new()
                },
            ))
        })
        .await;
    let (channels, settings, silences, deliveries) = match read {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "reading the alerts page failed");
            return message_page(
                &who,
                &csrf,
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The alert settings could not be read; see the server log.",
            );
        }
    };
    let page = Page {
        role: who.role,
        channels,
        settings,
        thresholds: fleet.health.thresholds().0.as_ref().clone(),
        silences: silences.into_iter().filter(|s| who.may_reach(&s.agent_id)).collect(),
        deliveries,
    };
    layout(&who, &csrf, "Alerts", Nav::Alerts, render(&page))
}

fn render(p: &Page) -> Markup {
    let superuser = p.role == Role::Superuser;
    html! {
        div class="page-head" id="alerts-page" {
            h1 { "Alerts" }
            p class="muted" { "Where alerts go, when a PC counts as offline, what counts as a problem, and what is silenced." }
        }
        div class="host-grid" {
            @if superuser {
                (channels(&p.channels))
                (deliveries(&p.deliveries))
                (settings(&p.settings))
                (thresholds(&p.thresholds))
            }
            (silences(&p.silences, p.role != Role::User))
        }
    }
}

fn target(config: &str) -> String {
    match serde_json::from_str::<ChannelConfig>(config) {
        Ok(ChannelConfig::Ntfy { url, .. } | ChannelConfig::Webhook { url, .. }) => url,
        Ok(ChannelConfig::Email { host, port, to, .. }) => format!("{} via {host}:{port}", to.join(", ")),
        Err(_) => "(unreadable settings)".into(),
    }
}

fn channels(rows: &[ChannelRow]) -> Markup {
    html! {
        section class="card wide" id="channels" {
            h2 { "Channels" }
            @if rows.is_empty() {
                p class="muted" { "No channel yet: alerts are recorded and shown on the Today page, but sent nowhere." }
            } @else {
                table class="stack compact" {
                    thead { tr { th { "Name" } th { "Kind" } th { "To" } th { "Digest" } th { "" } } }
                    tbody {
                        @for c in rows {
                            tr data-channel=(c.id) {
                                td data-label="Name" { (c.name) @if !c.enabled { " " span class="muted" { "(off)" } } }
                                td data-label="Kind" { (c.kind) }
                                td data-label="To" { code { (target(&c.config)) } }
                                td data-label="Digest" { @if c.digest { "weekly" } @else { "—" } }
                                td class="row-actions" {
                                    button type="button" data-api={ "POST /api/alerts/channels/" (c.id) "/test" } { "Send a test" }
                                    button type="button" class="secondary" data-api={ "POST /api/alerts/channels/" (c.id) "/digest" } { "Send the digest" }
                                    button type="button" class="danger" data-api={ "DELETE /api/alerts/channels/" (c.id) }
                                        data-confirm={ "Delete the channel " (c.name) "?" } data-refresh="channels" { "Delete" }
                                }
                            }
                        }
                    }
                }
            }
            p id="channels-result" class="result status" data-keep role="status" aria-live="polite" hidden {}
            details class="add" {
                summary { "Add a channel" }
                form id="channel-form" class="inline-form" data-api="POST /api/alerts/channels" data-refresh="channels" {
                    label { "Name " input name="name" required maxlength="80" placeholder="Phone"; }
                    label { "Kind "
                        select name="config.kind" data-kind-select {
                            option value="ntfy" { "ntfy" }
                            option value="webhook" { "Webhook (signed JSON)" }
                            option value="email" { "E-mail (SMTP)" }
                        }
                    }
                    label data-kinds="ntfy webhook" { "URL " input name="config.url" type="url" placeholder="https://ntfy.sh/your-topic"; }
                    label data-kinds="ntfy" { "Access token (optional) " input name="config.token" type="password" autocomplete="off"; }
                    label data-kinds="webhook" { "Secret (16+ characters) " input name="config.secret" type="password" autocomplete="off" minlength="16"; }
                    label data-kinds="email" { "SMTP server " input name="config.host" placeholder="smtp.example.org"; }
                    label data-kinds="email" { "Port " input name="config.port" type="number" data-type="number" value="587" min="1" max="65535"; }
                    label data-kinds="email" { "Security "
                        select name="config.tls" {
                            option value="starttls" { "STARTTLS (587)" }
                            option value="tls" { "TLS (465)" }
                            option value="none" { "None (this machine only)" }
                        }
                    }
                    label data-kinds="email" { "User name " input name="config.username" autocomplete="off"; }
                    label data-kinds="email" { "Password " input name="config.password" type="password" autocomplete="off"; }
                    label data-kinds="email" { "From " input name="config.from" type="email" placeholder="kenny@example.org"; }
                    label data-kinds="email" { "To (comma-separated) " input name="config.to" data-type="list" placeholder="me@example.org"; }
                    label class="check" { input type="checkbox" name="digest" data-type="bool"; " Weekly digest too" }
                    button type="submit" { "Add channel" }
                    p id="channel-form-result" class="result status" data-keep role="status" aria-live="polite" hidden {}
                }
            }
        }
    }
}

fn deliveries(rows: &[(DeliveryRow, String)]) -> Markup {
    html! {
        section class="card wide" id="deliveries" {
            h2 { "Recent deliveries" }
            @if rows.is_empty() {
                p class="muted" { "Nothing sent yet." }
            } @else {
                table class="stack compact" {
                    thead { tr { th { "When" } th { "Channel" } th { "What" } th { "State" } th { "Error" } } }
                    tbody {
                        @for (d, channel) in rows {
                            tr data-status=(d.status) {
                                td data-label="When" { (time_el(Some(&d.created_at))) }
                                td data-label="Channel" { (channel) }
                                td data-label="What" {
                                    (d.event) ": "
                                    (serde_json::from_str::<Value>(&d.message).ok().and_then(|m| m["title"].as_str().map(str::to_owned)).unwrap_or_default())
                                }
                                td data-label="State" {
                                    (badge(match d.status.as_str() { "sent" => "ok", "failed" => "crit", _ => "warn" }))
                                    " " (d.status)
                                    @if d.attempts > 1 { " after " (d.attempts) " tries" }
                                    @if d.status == "pending" && d.attempts > 0 { ", again " (time_el(Some(&d.next_at))) }
                                }
                                td data-label="Error" { (d.last_error.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn settings(s: &AlertSettings) -> Markup {
    html! {
        section class="card" id="alert-settings" {
            h2 { "When to alert" }
            form id="settings-form" class="inline-form" data-api="PUT /api/alerts/settings" data-refresh="alert-settings" {
                label { "A PC is offline after (seconds) "
                    input name="offline_after_secs" type="number" data-type="number" min="10" value=(s.offline_after_secs); }
                label { "Quiet after an alert clears (seconds) "
                    input name="cooldown_secs" type="number" data-type="number" min="0" value=(s.cooldown_secs); }
                label { "Weekly digest on "
                    select name="digest_day" {
                        @for d in DAYS { option value=(d) selected[d == s.digest_day] { (d) } }
                    }
                }
                button type="submit" { "Save" }
                p id="settings-form-result" class="result status" data-keep role="status" aria-live="polite" hidden {}
            }
        }
    }
}

fn thresholds(t: &Thresholds) -> Markup {
    let fields = match serde_json::to_value(t) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    html! {
        section class="card" id="thresholds" {
            h2 { "Health thresholds" }
            p class="muted" { "Every PC is judged again as soon as these are saved." }
            form id="thresholds-form" class="inline-form" data-api="PUT /api/health/thresholds" data-refresh="thresholds" {
                @for (name, value) in &fields {
                    @if let Some(on) = value.as_bool() {
                        label { input name=(name) type="checkbox" data-type="bool" checked[on]; " " (name) }
                    } @else if let Some(list) = value.as_array() {
                        label { (name) " "
                            input name=(name) data-type="int-list"
                                value=(list.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")); }
                    } @else {
                        label { (name) " " input name=(name) type="number" step="any" data-type="number" value=(value.to_string()); }
                    }
                }
                button type="submit" { "Save thresholds" }
                p id="thresholds-form-result" class="result status" data-keep role="status" aria-live="polite" hidden {}
            }
        }
    }
}

fn silences(rows: &[SilenceRow], may_change: bool) -> Markup {
    html! {
        section class="card wide" id="silences" {
            h2 { "Silences" }
            @if rows.is_empty() {
                p class="muted" { "Nothing is silenced." }
            } @else {
                table class="stack compact" {
                    thead { tr { th { "PC" } th { "Section" } th { "Until" } th { "Why" } th { "By" } th { "" } } }
                    tbody {
                        @for s in rows {
                            tr data-silence=(s.id) {
                                td data-label="PC" { a class="host-link" href={ "/hosts/" (s.agent_id) } { (s.agent_id) } }
                                td data-label="Section" { (s.section) }
                                td data-label="Until" { (time_el(Some(&s.until))) }
                                td data-label="Why" { (s.reason) }
                                td data-label="By" { (s.created_by) }
                                td class="row-actions" {
                                    @if may_change {
                                        button type="button" class="secondary" data-api="POST /api/alerts/silences/clear"
                                            data-body=(serde_json::json!({"agent_id": s.agent_id, "section": s.section}).to_string())
                                            data-refresh="silences" { "End now" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p id="silences-result" class="result status" data-keep role="status" aria-live="polite" hidden {}
            @if may_change {
                form id="silence-form" class="inline-form" data-api="POST /api/alerts/silences" data-refresh="silences" {
                    label { "PC " input name="agent_id" required placeholder="pc-a"; }
                    label { "Section (empty: all) " input name="section" placeholder="disk"; }
                    label { "For " input name="duration" required value="2h" placeholder="2h, 3d"; }
                    label { "Why " input name="reason" required maxlength="500"; }
                    button type="submit" { "Silence" }
                    p id="silence-form-result" class="result status" data-keep role="status" aria-live="polite" hidden {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(role: Role) -> Page {
        Page {
            role,
            channels: vec![ChannelRow {
                id: 3,
                name: "<phone>".into(),
                kind: "webhook".into(),
                config: r#"{"kind":"webhook","url":"https://hooks.example/x","secret":"0123456789abcdef-hidden"}"#
                    .into(),
                digest: true,
                enabled: true,
                created_at: "t".into(),
                digest_sent_at: None,
            }],
            settings: AlertSettings::default(),
            thresholds: Thresholds::default(),
            silences: Vec::new(),
            deliveries: Vec::new(),
        }
    }

    #[test]
    fn superusers_get_channels_with_test_buttons_and_never_see_secrets() {
        let html = render(&page(Role::Superuser)).into_string();
        assert!(html.contains(r#"data-api="POST /api/alerts/channels/3/test""#));
        assert!(html.contains("&lt;phone&gt;") && !html.contains("<phone>"));
        assert!(!html.contains("0123456789abcdef-hidden"));
        assert!(html.contains(r#"name="disk_warn_percent""#) && html.contains(r#"value="90""#));
        assert!(html.contains(r#"value="21, 23, 512, 513, 514, 5800, 5900""#));
        let user = render(&page(Role::User)).into_string();
        assert!(!user.contains("channel-form") && !user.contains("silence-form") && !user.contains("hooks.example"));
        let operator = render(&page(Role::Operator)).into_string();
        assert!(operator.contains("silence-form") && !operator.contains("channel-form"));
    }
}
