//! Packages: winget on Windows, apt or dnf on Linux, with one result shape.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn list(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("packages::list"))
}

pub async fn install(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("packages::install"))
}

pub async fn uninstall(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("packages::uninstall"))
}

pub async fn update(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("packages::update"))
}
