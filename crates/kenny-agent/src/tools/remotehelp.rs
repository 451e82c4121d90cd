//! Remote help through Quick Assist (Windows).

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn status(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("remotehelp::status"))
}

pub async fn start(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("remotehelp::start"))
}

pub async fn stop(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("remotehelp::stop"))
}
