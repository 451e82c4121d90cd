//! What the server's integration tests share: the refusal shape every MCP client sees,
//! and answering one call on a test agent.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use kenny_testkit::{CallOutcome, Mcp, TestAgent};
use serde_json::Value;

pub const WAIT: Duration = Duration::from_secs(10);

/// The documented refusal: `isError`, text `"<code>: <message>"`, structured
/// `{"error": {"code", "message"}}`. Returns the message.
pub fn expect_error(outcome: &CallOutcome, code: &str) -> String {
    assert!(outcome.is_error, "expected {code}, got success: {}", outcome.structured);
    assert_eq!(outcome.error_code(), Some(code), "{}", outcome.text);
    let message = outcome.structured["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!message.trim().is_empty(), "an error must say what went wrong");
    assert_eq!(outcome.text, format!("{code}: {message}"));
    message
}

/// Calls `tool` through `/mcp`, lets `agent` see the request, and answers it with
/// `result`; returns the request's arguments and the outcome.
pub async fn answered(
    mcp: &Mcp,
    agent: &mut TestAgent,
    tool: &str,
    args: Value,
    result: Value,
) -> (Value, CallOutcome) {
    let (mcp, name) = (mcp.clone(), tool.to_owned());
    let call = tokio::spawn(async move { mcp.call_outcome(&name, args).await });
    let request = agent.next_request(WAIT).await.expect("the call reaches the agent");
    assert_eq!(request.tool, tool);
    agent.respond(&request.id, result).expect("answer");
    let outcome = call.await.expect("call task").expect("MCP call");
    (Value::Object(request.args), outcome)
}

pub fn shell_result(stdout: &str) -> Value {
    serde_json::json!({"stdout": stdout, "stderr": "", "exit_code": 0, "truncated": false})
}
