//! Turning call outcomes into MCP tool results. A failure is a tool result with
//! `isError: true`, text `"<code>: <message>"` and `{"error": {"code", "message"}}`.

use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Value, json};

use crate::forward::{CallFailure, Forwarded, Provenance};
use crate::proofs::PROOF_META_KEY;

/// A forwarded call's result, with `_meta` saying who vouches for it: the agent's
/// signed proof and where in this result its signed answer is, or that the agent
/// answered unsigned. Calls the agent never answered carry no proof.
pub(super) fn proved(forwarded: Forwarded, agent_id: &str) -> CallToolResult {
    let Forwarded {
        outcome,
        provenance,
        rewritten,
    } = forwarded;
    let answer_in = match &outcome {
        _ if rewritten => Value::Null,
        Ok(v) if !v.is_object() => json!("structuredContent.value"),
        Ok(_) => json!("structuredContent"),
        Err(_) => json!("structuredContent.error"),
    };
    let image_in = match &outcome {
        Ok(v) if kenny_proto::results::is_image(v) => json!({"content_index": 0, "field": "data_base64"}),
        _ => Value::Null,
    };
    let mut result = self::outcome(outcome);
    let meta = match provenance {
        Provenance::Signed(proof) => {
            let mut meta = json!({"signed": true, "answer_in": answer_in});
            if !image_in.is_null() {
                meta["image_in"] = image_in;
            }
            if let (Some(meta), Ok(Value::Object(proof))) = (meta.as_object_mut(), serde_json::to_value(&proof)) {
                meta.extend(proof);
            }
            meta
        }
        Provenance::Unsigned => json!({
            "signed": false,
            "why": format!("agent {agent_id} speaks a protocol older than {}, which does not sign its results", kenny_proto::proof::SIGNED_RESULTS_PROTOCOL),
        }),
        Provenance::NotAnswered => return result,
    };
    let mut object = serde_json::Map::new();
    object.insert(PROOF_META_KEY.into(), meta);
    result.meta = Some(MetaObject(object));
    result
}

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
