//! The admin page's "Add a PC with a link" section: the form that makes an install link
//! (the command is shown once, by the script, from the API's answer), the recent links
//! with their state and a revoke button while they are usable, and the agent builds
//! this server hands out per OS and architecture.

use maud::{Markup, html};

use super::time_el;
use crate::store::InstallLinkRow;
use crate::updates::releases::Build;

pub(super) fn section(links: &[InstallLinkRow], builds: &[Build], now: &str) -> Markup {
    html! {
        section class="card" id="install-links" {
            h2 { "Add a PC with a link" }
            p class="muted" {
                "Makes a link that works once, for a while: on the PC, one command downloads this server's \
                 agent build, checks it against a manifest signed by the server key, installs the service and \
                 enrolls it. For an existing agent id, using the link forgets the key that PC had."
            }
            form id="link-form" class="inline-form" {
                label {
                    "Agent id"
                    input name="agent_id" required pattern="[A-Za-z0-9][A-Za-z0-9._\\-]{0,63}" placeholder="kids-laptop"
                        autocomplete="off";
                }
                label {
                    "System"
                    select name="os" {
                        option value="windows" { "Windows" }
                        option value="linux" { "Linux" }
                    }
                }
                label {
                    "Usable for"
                    select name="expires_minutes" {
                        option value="60" { "1 hour" }
                        option value="1440" selected { "1 day" }
                        option value="10080" { "7 days" }
                    }
                }
                button { "Make link" }
            }
            div id="link-result" class="status" role="status" data-keep hidden {}
            @if !links.is_empty() {
                h3 { "Recent links" }
                table class="stack" {
                    thead { tr { th { "Agent" } th { "System" } th { "State" } th { "Made" } th { "Expires" } th {} } }
                    tbody {
                        @for link in links {
                            @let state = link.state(now);
                            tr data-link-id=(link.id) {
                                td data-label="Agent" { (link.agent_id) }
                                td data-label="System" { (link.os) }
                                td data-label="State" {
                                    (state)
                                    @if let Some(from) = &link.used_from { span class="muted" { " from " (from) } }
                                }
                                td data-label="Made" { (time_el(Some(&link.created_at))) " by " (link.created_by) }
                                td data-label="Expires" { (time_el(Some(&link.expires_at))) }
                                td data-label="" class="row-actions" {
                                    @if state == "active" {
                                        button type="button" class="secondary" data-link-revoke=(link.id) { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            h3 { "Agent builds" }
            @if builds.is_empty() {
                p class="note" {
                    "This server has no agent builds yet, so links cannot install anything. Add one with "
                    code { "kenny-server releases add FILE --version V --os windows --arch x86_64" } "."
                }
            } @else {
                table class="stack" id="agent-builds" {
                    thead { tr { th { "System" } th { "Architecture" } th { "Version" } th { "Size" } } }
                    tbody {
                        @for b in builds {
                            tr {
                                td data-label="System" { (b.os) }
                                td data-label="Architecture" { (b.arch) }
                                td data-label="Version" { (b.version) }
                                td data-label="Size" { (format!("{:.1} MB", b.size as f64 / 1_000_000.0)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(id: i64, agent: &str, used: bool) -> InstallLinkRow {
        InstallLinkRow {
            id,
            agent_id: agent.into(),
            os: "windows".into(),
            created_by: "alice".into(),
            created_at: "2026-12-01T10:00:00.000Z".into(),
            expires_at: "2026-12-02T10:00:00.000Z".into(),
            used_at: used.then(|| "2026-12-01T11:00:00.000Z".into()),
            used_from: used.then(|| "192.0.2.7".into()),
            revoked_at: None,
            revoked_by: None,
        }
    }

    #[test]
    fn only_usable_links_can_be_revoked_and_names_are_escaped() {
        let html = section(
            &[link(1, "<pc>", false), link(2, "den", true)],
            &[],
            "2026-12-01T12:00:00.000Z",
        )
        .into_string();
        assert!(html.contains("&lt;pc&gt;"));
        assert!(html.contains("data-link-revoke=\"1\""));
        assert!(
            !html.contains("data-link-revoke=\"2\""),
            "a used link has nothing to revoke"
        );
        assert!(html.contains("used<span class=\"muted\"> from 192.0.2.7</span>"));
        assert!(html.contains("no agent builds yet"));
    }
}
