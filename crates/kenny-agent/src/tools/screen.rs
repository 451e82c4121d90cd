//! Screenshots, scaled to fit a tool result.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn capture(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("screen::capture"))
}
