//! The system log: the journal (or syslog) on Linux, event logs on Windows.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn query(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("eventlog::query"))
}
