//! System services: systemd units on Linux, services on Windows.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn list(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("services::list"))
}
