//! A stateless MCP client over Streamable HTTP: JSON-RPC in a POST to `/mcp`, as any
//! client that holds no session talks to kenny. The official SDK is what the e2e suite
//! uses to show what a real client sees; this one is for server logic and load.

use serde_json::{Value, json};

pub const PROTOCOL: &str = "2025-06-18";

/// A `tools/call` result: an error result is an outcome too, not a transport failure.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub is_error: bool,
    pub structured: Value,
    pub text: String,
}

impl CallOutcome {
    /// `error.code` of a failed call.
    pub fn error_code(&self) -> Option<&str> {
        self.structured.pointer("/error/code").and_then(Value::as_str)
    }
}

#[derive(Clone)]
pub struct Mcp {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Mcp {
    pub fn new(base: &str, token: &str) -> Self {
        Self::with_client(reqwest::Client::new(), base, token)
    }

    /// Shares a connection pool (load generators hold many clients).
    pub fn with_client(http: reqwest::Client, base: &str, token: &str) -> Self {
        Mcp {
            http,
            url: format!("{}/mcp", base.trim_end_matches('/')),
            token: token.to_owned(),
        }
    }

    /// One JSON-RPC request; its `result` or an error naming what went wrong.
    pub async fn rpc(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        Ok(self.rpc_sized(method, params).await?.0)
    }

    /// A tool call's structured result and the size of the whole HTTP response body.
    pub async fn call_sized(&self, name: &str, arguments: Value) -> anyhow::Result<(Value, usize)> {
        let (result, bytes) = self
            .rpc_sized("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        anyhow::ensure!(result["isError"] != true, "{name} failed: {result}");
        Ok((result["structuredContent"].clone(), bytes))
    }

    async fn rpc_sized(&self, method: &str, params: Value) -> anyhow::Result<(Value, usize)> {
        let (status, value, size) = self.exchange(method, params).await?;
        anyhow::ensure!(status.is_success(), "{method}: HTTP {status}: {value}");
        anyhow::ensure!(value.get("error").is_none(), "{method}: {value}");
        Ok((value["result"].clone(), size))
    }

    /// The JSON-RPC `error` a request is answered with (a protocol error, not a tool
    /// result); an error itself if the request succeeded.
    pub async fn rpc_error(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let (status, value, _) = self.exchange(method, params).await?;
        anyhow::ensure!(
            value.get("result").is_none(),
            "{method} succeeded: HTTP {status}: {value}"
        );
        anyhow::ensure!(
            value["id"] == 1,
            "{method}: the error must answer request id 1: {value}"
        );
        Ok(value["error"].clone())
    }

    async fn exchange(&self, method: &str, params: Value) -> anyhow::Result<(reqwest::StatusCode, Value, usize)> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        let value: Value = serde_json::from_slice(&bytes)?;
        Ok((status, value, bytes.len()))
    }

    pub async fn initialize(&self) -> anyhow::Result<()> {
        let params = json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "kenny-testkit", "version": "0"}});
        let result = self.rpc("initialize", params).await?;
        anyhow::ensure!(result["protocolVersion"] == PROTOCOL, "initialize failed: {result}");
        Ok(())
    }

    pub async fn list_tools(&self) -> anyhow::Result<Vec<Value>> {
        let result = self.rpc("tools/list", json!({})).await?;
        Ok(result["tools"].as_array().cloned().unwrap_or_default())
    }

    /// Calls a tool and returns its outcome, success or not.
    pub async fn call_outcome(&self, name: &str, arguments: Value) -> anyhow::Result<CallOutcome> {
        let result = self
            .rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        let text = result["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|block| block["text"].as_str())
            .collect();
        Ok(CallOutcome {
            is_error: result["isError"] == true,
            structured: result["structuredContent"].clone(),
            text,
        })
    }

    /// Calls a tool; an `isError` result is an error here.
    pub async fn call(&self, name: &str, arguments: Value) -> anyhow::Result<Value> {
        let outcome = self.call_outcome(name, arguments).await?;
        anyhow::ensure!(!outcome.is_error, "{name} failed: {}", outcome.text);
        Ok(outcome.structured)
    }
}
