//! Turning call outcomes into MCP tool results. A failure is a tool result with
//! `isError: true`, text `"<code>: <message>"` and `{"error": {"code", "message"}}`.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::forward::CallFailure;

pub(super) fn outcome(outcome: Result<Value, CallFailure>) -> CallToolResult {
    match outcome {
        Ok(v) => success(v),
        Err(f) => failure(&f),
    }
}

pub(super) fn success(value: Value) -> CallToolResult {
    // Structured content must be an object; agents answer with objects, but wrap
    // anything else rather than break the client.
    let mut value = if value.is_object() {
        value
    } else {
        json!({ "value": value })
    };
    if let Some((data, mime_type)) = kenny_proto::results::take_image(&mut value) {
        // The picture travels once, as image content a client can show; the metadata
        // (size, scaling) stays structured and readable.
        let mut result = CallToolResult::success(vec![
            ContentBlock::image(data, mime_type),
            ContentBlock::text(value.to_string()),
        ]);
        result.structured_content = Some(value);
        return result;
    }
    CallToolResult::structured(value)
}

pub(super) fn failure(f: &CallFailure) -> CallToolResult {
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

    #[test]
    fn images_become_image_content_once() {
        let r = success(json!({"mime_type": "image/png", "width": 2, "data_base64": "iVBORw0KGgo="}));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["type"], "image");
        assert_eq!(v["content"][0]["data"], "iVBORw0KGgo=");
        assert_eq!(v["content"][0]["mimeType"], "image/png");
        assert_eq!(v["structuredContent"], json!({"mime_type": "image/png", "width": 2}));
        assert!(!v["content"][1]["text"].as_str().unwrap().contains("iVBOR"));
        // Not an image type: left as plain structured data.
        let plain = success(json!({"mime_type": "text/plain", "data_base64": "eA=="}));
        assert_eq!(plain.structured_content.unwrap()["data_base64"], "eA==");
    }
}
