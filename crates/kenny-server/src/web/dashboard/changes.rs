//! The changes found between snapshots, as a list: on a host's page (its own) and on
//! the Today page (the fleet's since yesterday). High-priority ones stand out.

use maud::{Markup, html};

use super::{badge, time_el};
use crate::store::ChangeRow;

/// `with_pc`: name the PC on each line (the fleet-wide list).
pub(super) fn list(rows: &[ChangeRow], with_pc: bool) -> Markup {
    html! {
        @if rows.is_empty() {
            p class="muted" { "No changes." }
        } @else {
            ul class="changes" {
                @for c in rows {
                    li class={ "change " (c.priority) } data-kind=(c.kind) data-section=(c.section) {
                        @if c.priority == "high" { (badge("crit")) " " }
                        @if with_pc {
                            a class="host-link" href={ "/hosts/" (c.agent_id) } { (c.agent_id) } ": "
                        }
                        span class="detail" { (c.detail) }
                        " " span class="muted" { (c.section) ", " (time_el(Some(&c.at))) }
                    }
                }
            }
        }
    }
}

/// A host's card: its changes over the last week.
pub(super) fn card(rows: &[ChangeRow]) -> Markup {
    html! {
        section class="card" id="changes" {
            h2 { "Changes this week" }
            (list(rows, false))
        }
    }
}
