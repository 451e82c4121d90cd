//! The parental web filter: a marked block of entries in the hosts file.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn status(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("webfilter::status"))
}

pub async fn apply(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("webfilter::apply"))
}

pub async fn clear(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("webfilter::clear"))
}
