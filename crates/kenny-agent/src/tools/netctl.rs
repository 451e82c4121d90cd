//! Changing network state: flushing the DNS cache and resetting an adapter.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn dns_flush(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("netctl::dns_flush"))
}

pub async fn adapter_reset(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("netctl::adapter_reset"))
}
