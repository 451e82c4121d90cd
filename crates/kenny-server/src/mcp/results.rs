//! Turning call outcomes into MCP tool results. A failure is a tool result with
//! `isError: true`, text `"<code>: <message>"` and `{"error": {"code", "message"}}`.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::forward::CallFailure;

pub fn outcome(outcome: Result<Value, CallFailure>) -> CallToolResult {
    match outcome {
        Ok(v) => success(v),
        Err(f) => failure(&f),
    }
}

pub fn success(value: Value) -> CallToolResult {
    // Structured content must be an object; agents answer with objects, but wrap
    // anything else rather than break the client.
    let value = if value.is_object() {
        value
    } else {
        json!({ "value": value })
    };
    CallToolResult::structured(value)
}

pub fn failure(f: &CallFailure) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(f.to_string())]);
    result.structured_content = Some(json!({"error": {"code": f.code, "message": f.message}}));
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use kenny_proto::error::ErrorCode;

    #[test]
    fn failures_carry_code_in_text_and_structure() {
        let r = failure(&CallFailure::new(ErrorCode::NoAgent, "agent_id is required"));
        assert_eq!(r.is_error, Some(true));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], "no_agent: agent_id is required");
        assert_eq!(v["structuredContent"]["error"]["code"], "no_agent");
        assert_eq!(success(json!(3)).structured_content, Some(json!({"value": 3})));
    }
}
