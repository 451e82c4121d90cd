//! A minimal MCP Streamable HTTP client for load generation: JSON-RPC over POST, the
//! way any stateless MCP client talks to `/mcp`.

use serde_json::{Value, json};

pub const PROTOCOL: &str = "2025-06-18";

#[derive(Clone)]
pub struct Mcp {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Mcp {
    pub fn new(http: reqwest::Client, base: &str, token: &str) -> Self {
        Mcp {
            http,
            url: format!("{base}/mcp"),
            token: token.to_owned(),
        }
    }

    async fn post(&self, body: Value) -> anyhow::Result<Value> {
        let resp = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .json(&body)
            .send()
            .await?;
        let status = resp.status();
        let value: Value = resp.json().await?;
        anyhow::ensure!(status.is_success(), "HTTP {status}: {value}");
        Ok(value)
    }

    pub async fn initialize(&self) -> anyhow::Result<()> {
        let v = self
            .post(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "kenny-bench", "version": "0"}}}))
            .await?;
        anyhow::ensure!(v["result"]["protocolVersion"] == PROTOCOL, "initialize failed: {v}");
        Ok(())
    }

    /// Calls a tool; an `isError` result is an error here.
    pub async fn call(&self, name: &str, arguments: Value) -> anyhow::Result<Value> {
        let v = self
            .post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}))
            .await?;
        let result = &v["result"];
        anyhow::ensure!(result.is_object() && result["isError"] != true, "{name} failed: {v}");
        Ok(result["structuredContent"].clone())
    }
}
