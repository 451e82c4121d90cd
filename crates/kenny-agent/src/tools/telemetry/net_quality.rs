//! STUB: being written (issue 12).

use super::windows::Query;
use super::{Outcome, not_collected_here};

pub(super) fn windows_query() -> Option<&'static Query> {
    None
}

pub(super) async fn section() -> Outcome {
    Ok(not_collected_here())
}
