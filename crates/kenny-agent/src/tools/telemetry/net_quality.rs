//! STUB: being written (issue 12).

use super::{Outcome, not_collected_here};

pub(super) async fn section() -> Outcome {
    Ok(not_collected_here())
}
