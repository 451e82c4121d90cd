//! The host page's family cards: the web filter the server keeps for the PC, and the
//! PC's local accounts. Both are read from what the server holds (the filter's state,
//! the latest snapshot's `local_accounts`); every button posts to `/api/agent/{id}/...`,
//! which takes the same path as an MCP call (scope, role floor, audit). People below
//! the operator role see the cards without the forms.

use maud::{Markup, html};
use serde_json::Value;

use super::{badge, time_el};
use crate::store::ActivityRow;

/// Most activity rows the card lists.
pub(super) const ACTIVITY_SHOWN: u32 = 20;

const DAYS: [(&str, &str); 7] = [
    ("mon", "Mon"),
    ("tue", "Tue"),
    ("wed", "Wed"),
    ("thu", "Thu"),
    ("fri", "Fri"),
    ("sat", "Sat"),
    ("sun", "Sun"),
];

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// A word for the filter's state, for the badge and for tests.
fn state_word(state: &Value, configured: bool) -> &'static str {
    if !configured {
        "not set up"
    } else if !state["over_cap"].is_null() {
        "over cap"
    } else if flag(state, "drift") {
        "drifted"
    } else if !state["problem"].is_null() {
        "failed"
    } else if state["applied"].is_null() || flag(state, "pending") {
        "pending"
    } else if state["effective"]["action"] == "clear" {
        "off"
    } else {
        "applied"
    }
}

fn state_class(word: &str) -> &'static str {
    match word {
        "applied" => "ok",
        "off" | "not set up" | "pending" => "unknown",
        "drifted" => "warn",
        _ => "crit",
    }
}

pub(super) fn webfilter_card(agent_id: &str, filter: &Value, activity: &[ActivityRow], can_change: bool) -> Markup {
    let config = &filter["config"];
    let state = &filter["state"];
    let configured = flag(filter, "configured");
    let word = state_word(state, configured);
    let on: Vec<&str> = config["categories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let categories: &[Value] = filter["categories_available"].as_array().map_or(&[], Vec::as_slice);
    let entries: &[Value] = config["entries"].as_array().map_or(&[], Vec::as_slice);
    let windows: &[Value] = config["schedules"].as_array().map_or(&[], Vec::as_slice);
    html! {
        section class="card" id="webfilter" data-agent=(agent_id) data-schedules=(config["schedules"].to_string()) {
            h2 { "Web filter" }
            p class="wf-summary" data-state=(word) {
                span class={ "badge st-" (state_class(word)) } { (word) } " " (text(state, "summary"))
            }
            dl class="facts" {
                @if let Some(applied) = state["applied"].as_object() {
                    dt { "Applied" }
                    dd {
                        (applied.get("count").and_then(Value::as_i64).unwrap_or(0)) " names, "
                        (time_el(applied.get("at").and_then(Value::as_str))) " by "
                        (applied.get("by").and_then(Value::as_str).unwrap_or("?"))
                        @if let Some(rule) = applied.get("rule").and_then(Value::as_str) { " (" (rule) ")" }
                    }
                }
                @if let Some(seen) = state["observed"].as_object() {
                    dt { "Last seen on the PC" }
                    dd {
                        @if seen.get("active").and_then(Value::as_bool) == Some(true) { "a block" } @else { "no block" }
                        ", " (time_el(seen.get("at").and_then(Value::as_str)))
                    }
                }
                @if let Some(next) = state["next_change"].as_object() {
                    dt { "Next change" }
                    dd {
                        (next.get("window").and_then(Value::as_str).unwrap_or("")) ", "
                        (time_el(next.get("at").and_then(Value::as_str)))
                    }
                }
                @if let Some(open) = state["open_windows"].as_array().filter(|w| !w.is_empty()) {
                    dt { "Schedule now" }
                    dd { @for (i, w) in open.iter().enumerate() { @if i > 0 { ", " } (w.as_str().unwrap_or("")) } }
                }
                @if let Some(p) = state["over_cap"].as_str() { dt { "Over the cap" } dd { (p) } }
                @if let Some(p) = state["problem"]["message"].as_str() { dt { "Last problem" } dd { (p) } }
            }
            @if can_change {
                form id="wf-settings" class="stack-form" {
                    label class="check" { input type="checkbox" name="enabled" checked[flag(config, "enabled")]; " Filter on" }
                    label { "Mode "
                        select name="mode" {
                            option value="block" selected[text(config, "mode") != "monitor"] { "Block" }
                            option value="monitor" selected[text(config, "mode") == "monitor"] { "Monitor only (flag, block nothing)" }
                        }
                    }
                    fieldset {
                        legend { "Categories" }
                        @for c in categories {
                            @let name = text(c, "name");
                            label class="choice" {
                                input type="checkbox" name="category" value=(name) checked[on.contains(&name)];
                                " " strong { (name) } " " span class="muted" { (text(c, "description")) " (" (c["domains"].as_u64().unwrap_or(0)) ")" }
                            }
                        }
                    }
                    label class="check" { input type="checkbox" name="doh_lockdown" checked[flag(config, "doh_lockdown")]; " Turn browsers' DNS-over-HTTPS off" }
                    label class="check" { input type="checkbox" name="record_activity" checked[flag(config, "record_activity")]; " Record web activity" }
                    div class="actions" {
                        button type="submit" { "Save" }
                        button type="button" class="secondary" data-wf="push" { "Apply now" }
                        button type="button" class="secondary" data-wf="check" { "Check the PC" }
                    }
                }
            }
            h3 { "Custom entries" }
            @if entries.is_empty() {
                p class="muted" { "No custom entries." }
            } @else {
                table class="stack compact" id="wf-entries" {
                    thead { tr { th { "Domain" } th { "Kind" } @if can_change { th { "" } } } }
                    tbody {
                        @for e in entries {
                            tr {
                                td data-label="Domain" { code { (text(e, "domain")) } }
                                td data-label="Kind" { (text(e, "kind")) }
                                @if can_change {
                                    td { button type="button" class="secondary small" data-wf-remove=(text(e, "domain")) { "Remove" } }
                                }
                            }
                        }
                    }
                }
            }
            @if can_change {
                form id="wf-entry" class="inline-form" {
                    input name="domain" placeholder="example.com" required aria-label="Domain";
                    select name="kind" aria-label="Kind" {
                        option value="block" { "Block" } option value="allow" { "Allow" } option value="watch" { "Watch" }
                    }
                    button type="submit" { "Add entry" }
                }
            }
            h3 { "Schedule" }
            @if windows.is_empty() {
                p class="muted" { "No schedule windows: the filter is the same all week." }
            } @else {
                ul class="plain" id="wf-windows" {
                    @for (i, w) in windows.iter().enumerate() {
                        li {
                            strong { (text(w, "name")) } ": "
                            @for (j, d) in w["days"].as_array().into_iter().flatten().enumerate() { @if j > 0 { ", " } (d.as_str().unwrap_or("")) }
                            " " (text(w, "start")) "–" (text(w, "end")) " " (text(w, "time_zone")) ": "
                            @match w["categories"].as_array() {
                                Some(cs) => { @for (j, c) in cs.iter().enumerate() { @if j > 0 { ", " } (c.as_str().unwrap_or("")) } }
                                None => { "the whole filter" }
                            }
                            " " (text(w, "set"))
                            @if can_change { " " button type="button" class="secondary small" data-wf-window=(i) { "Remove" } }
                        }
                    }
                }
            }
            @if can_change {
                form id="wf-window" class="stack-form" {
                    label { "Name " input name="name" placeholder="school nights" required maxlength="60"; }
                    fieldset {
                        legend { "Days it starts on" }
                        @for (value, label) in DAYS { label class="choice" { input type="checkbox" name="day" value=(value); " " (label) } }
                    }
                    label { "From " input type="time" name="start" required; }
                    label { "To " input type="time" name="end" required; }
                    label { "Time zone " input name="time_zone" placeholder="Europe/London" data-default-zone; }
                    fieldset {
                        legend { "Categories it switches (none: the whole filter)" }
                        @for c in categories {
                            label class="choice" { input type="checkbox" name="window-category" value=(text(c, "name")); " " (text(c, "name")) }
                        }
                    }
                    label { "During the window "
                        select name="set" { option value="on" { "on" } option value="off" { "off" } }
                    }
                    button type="submit" { "Add window" }
                }
            }
            h3 { "Recent activity" }
            @if activity.is_empty() {
                p class="muted" {
                    @if flag(config, "record_activity") { "Nothing recorded yet." } @else { "Activity is not recorded for this PC." }
                }
            } @else {
                table class="stack compact" id="wf-activity" {
                    thead { tr { th { "Domain" } th { "Last seen" } th { "Visits" } th { "Flag" } } }
                    tbody {
                        @for a in activity {
                            tr data-flagged=[a.flag.as_ref().map(|_| "yes")] {
                                td data-label="Domain" { code { (a.domain) } }
                                td data-label="Last seen" { (time_el(Some(&a.last_seen))) }
                                td data-label="Visits" { (a.hits) }
                                td data-label="Flag" { @if let Some(f) = &a.flag { (badge("flagged")) " " (f) } }
                            }
                        }
                    }
                }
            }
            p id="wf-status" class="status" role="status" aria-live="polite" hidden {}
        }
    }
}

/// The local accounts from the latest snapshot, with their actions.
pub(super) fn accounts_card(agent_id: &str, section: Option<&Value>, can_change: bool) -> Markup {
    let accounts: &[Value] = section
        .and_then(|s| s["accounts"].as_array())
        .map_or(&[], Vec::as_slice);
    html! {
        section class="card" id="accounts" data-agent=(agent_id) {
            h2 { "Local accounts" }
            @if section.is_none() {
                p class="muted" { "No accounts reported yet: press Refresh telemetry." }
            } @else {
                table class="stack compact" id="account-list" {
                    thead { tr { th { "Account" } th { "Kind" } th { "Admin" } th { "Enabled" } th { "Last logon" } @if can_change { th { "" } } } }
                    tbody {
                        @for a in accounts {
                            @let name = text(a, "name");
                            @let builtin = flag(a, "builtin_admin") || flag(a, "builtin_guest");
                            tr data-account=(name) {
                                td data-label="Account" {
                                    strong { (name) }
                                    @if !text(a, "display").is_empty() && text(a, "display") != name { " " span class="muted" { (text(a, "display")) } }
                                    @if builtin { " " span class="muted" { "(built-in)" } }
                                }
                                td data-label="Kind" { (text(a, "kind")) }
                                td data-label="Admin" { @if flag(a, "is_admin") { "yes" } @else { "no" } }
                                td data-label="Enabled" { @if flag(a, "enabled") { "yes" } @else { "no" } }
                                td data-label="Last logon" { (time_el(a["last_logon"].as_str())) }
                                @if can_change {
                                    td class="row-actions" {
                                        @if flag(a, "enabled") {
                                            button type="button" class="secondary small" data-acct="account_set_enabled" data-principal=(name) data-value="false" { "Disable" }
                                        } @else {
                                            button type="button" class="secondary small" data-acct="account_set_enabled" data-principal=(name) data-value="true" { "Enable" }
                                        }
                                        @if flag(a, "is_admin") {
                                            button type="button" class="secondary small" data-acct="account_set_admin" data-principal=(name) data-value="false" { "Remove admin" }
                                        } @else {
                                            button type="button" class="secondary small" data-acct="account_set_admin" data-principal=(name) data-value="true" { "Make admin" }
                                        }
                                        button type="button" class="secondary small" data-acct="account_session_action" data-principal=(name) data-value="lock" { "Lock" }
                                        button type="button" class="secondary small" data-acct="account_session_action" data-principal=(name) data-value="logoff" { "Sign out" }
                                        button type="button" class="danger small" data-acct="account_delete" data-principal=(name) { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if can_change {
                h3 { "New account" }
                form id="acct-create" class="inline-form" {
                    input name="name" placeholder="name" required aria-label="Account name" autocomplete="off";
                    input name="display_name" placeholder="display name" aria-label="Display name";
                    input type="password" name="password" placeholder="password" required aria-label="Password" autocomplete="new-password";
                    label class="check" { input type="checkbox" name="admin" data-type="bool"; " administrator" }
                    button type="submit" { "Create" }
                }
                h3 { "Password policy" }
                form id="acct-policy" class="inline-form" {
                    @let policy = section.map(|s| &s["password_policy"]).filter(|p| p.is_object());
                    label { "Minimum length " input type="number" name="min_length" min="0" max="128" data-type="number"
                        value=[policy.and_then(|p| p["min_length"].as_i64())]; }
                    label { "Maximum age (days, 0 = never) " input type="number" name="max_age_days" min="0" max="999" data-type="number"
                        value=[policy.and_then(|p| p["max_age_days"].as_i64())]; }
                    label { "Lock out after (failed sign-ins, 0 = never) " input type="number" name="lockout_threshold" min="0" max="999" data-type="number"
                        value=[policy.and_then(|p| p["lockout_threshold"].as_i64())]; }
                    button type="submit" { "Set policy" }
                }
            } @else {
                p class="muted" { "Changing accounts needs the operator role." }
            }
            p id="acct-status" class="status" role="status" aria-live="polite" hidden {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_filter_card_says_its_state_and_escapes_what_it_shows() {
        let filter = json!({
            "configured": true,
            "config": {"enabled": true, "mode": "block", "categories": ["games"],
                       "entries": [{"domain": "bad.example", "kind": "block"}],
                       "schedules": [{"name": "<b>nights</b>", "days": ["sun"], "start": "21:00", "end": "07:00",
                                      "time_zone": "UTC", "categories": ["games"], "set": "on"}]},
            "categories_available": [{"name": "games", "description": "Games", "domains": 25}],
            "state": {"summary": "drifted: the PC's hosts file no longer holds what kenny applied", "drift": true,
                      "over_cap": null, "problem": null, "applied": {"count": 2, "at": "2026-12-01T10:00:00Z", "by": "kenny", "rule": "r"},
                      "effective": {"action": "apply"}},
        });
        let html = webfilter_card("pc-kid", &filter, &[], true).into_string();
        assert!(html.contains(r#"data-state="drifted""#), "{html}");
        assert!(html.contains("&lt;b&gt;nights&lt;/b&gt;") && !html.contains("<b>nights"));
        assert!(html.contains(r#"name="category" value="games" checked"#));
        assert!(html.contains(r#"data-wf-remove="bad.example""#));
        let read_only = webfilter_card("pc-kid", &filter, &[], false).into_string();
        assert!(!read_only.contains("wf-settings") && !read_only.contains("data-wf-remove"));
    }

    #[test]
    fn the_accounts_card_lists_accounts_with_their_actions_for_operators_only() {
        let section = json!({"accounts": [
            {"name": "kid", "display": "Kid", "kind": "local", "enabled": true, "is_admin": false, "last_logon": null},
            {"name": "root", "kind": "local", "enabled": true, "is_admin": true, "builtin_admin": true},
        ]});
        let html = accounts_card("pc-kid", Some(&section), true).into_string();
        assert!(
            html.contains(r#"data-acct="account_set_admin" data-principal="kid" data-value="true""#),
            "{html}"
        );
        assert!(html.contains("(built-in)"));
        assert!(html.contains(r#"autocomplete="new-password""#));
        let read_only = accounts_card("pc-kid", Some(&section), false).into_string();
        assert!(!read_only.contains("data-acct=") && read_only.contains("needs the operator role"));
        assert!(
            accounts_card("pc-kid", None, true)
                .into_string()
                .contains("No accounts reported yet")
        );
    }
}
