//! STUB: being written (issue 12).

use super::windows::Query;

pub(super) fn windows_query() -> Option<&'static Query> {
    None
}
