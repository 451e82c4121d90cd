//! STUB: being written (issue 12).

use super::windows::Query;

pub(super) fn windows_query(section: &str) -> Option<&'static Query> {
    let _ = section;
    None
}
