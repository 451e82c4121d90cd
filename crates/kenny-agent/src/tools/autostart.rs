//! What starts by itself at boot or login.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn list(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("autostart::list"))
}
