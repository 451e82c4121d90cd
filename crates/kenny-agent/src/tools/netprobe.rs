//! Network probes: reachability and latency, name resolution, TCP port checks.

use serde_json::{Map, Value};

use super::{ToolResult, not_implemented};

pub async fn ping(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("netprobe::ping"))
}

pub async fn dns_lookup(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("netprobe::dns_lookup"))
}

pub async fn port_check(_args: &Map<String, Value>) -> ToolResult {
    Err(not_implemented("netprobe::port_check"))
}
