//! Sections about the machine's power and protection state: whether a restart is pending
//! (`reboot_pending`), the batteries' wear (`battery`) and whether the system disk is
//! encrypted (`encryption`).
//!
//! Each lives in its own submodule, with its Linux reader (files under `/run`, `/proc`,
//! `/boot`, `/lib/modules`, `/sys`) and its Windows query (registry, CIM).

mod battery;
mod encryption;
mod reboot;

use super::windows::Query;

pub(super) use battery::battery_section;
pub(super) use encryption::encryption_section;
pub(super) use reboot::reboot_pending_section;

/// Longest text taken from the PC (names, paths, messages): it reaches the dashboard and
/// the model, and a hostile PC could make it as long as it likes.
pub(super) const MAX_TEXT: usize = 200;

/// The query of each of this module's sections on Windows.
pub(super) fn windows_query(section: &str) -> Option<&'static Query> {
    match section {
        "reboot_pending" => Some(&reboot::WINDOWS),
        "battery" => Some(&battery::WINDOWS),
        "encryption" => Some(&encryption::WINDOWS),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_here_has_a_query() {
        for name in ["reboot_pending", "battery", "encryption"] {
            assert!(windows_query(name).is_some(), "{name}");
        }
        assert!(windows_query("thermals").is_none());
    }
}
