//! The Anthropic Messages API, streamed: one request, its server-sent events read as
//! they arrive, text handed on as it streams, the whole assistant message returned.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::ChatSettings;

const API_VERSION: &str = "2023-06-01";
/// A model turn longer than this is treated as failed.
const TURN_LIMIT: Duration = Duration::from_secs(300);
/// An SSE event larger than this is not from a well-behaved server.
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// One finished assistant turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Messages API content blocks (`text`, `tool_use`), as they go back into history.
    pub content: Vec<Value>,
    pub stop_reason: Option<String>,
    pub usage: Usage,
}

/// Tokens one turn cost, as the API reports them (`message_start` carries the input,
/// `message_delta` the cumulative output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    /// Takes what a `usage` object says; counts only grow (later events are cumulative).
    fn absorb(&mut self, usage: &Value) {
        let n = |k: &str| usage[k].as_u64().unwrap_or(0);
        let input = n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens");
        self.input_tokens = self.input_tokens.max(input);
        self.output_tokens = self.output_tokens.max(n("output_tokens"));
    }
}

/// Why a turn could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    /// `model_unreachable`, `model_error` (the API said no), `model_protocol`.
    pub code: &'static str,
    pub message: String,
    /// What the model reported using before the turn failed: billed all the same, so it
    /// counts against the daily limit.
    pub usage: Usage,
}

impl ModelError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ModelError {
            code,
            message: message.into(),
            usage: Usage::default(),
        }
    }
}

/// Streams one turn; `on_text` gets text as it arrives.
pub async fn turn(
    http: &reqwest::Client,
    settings: &ChatSettings,
    api_key: &str,
    system: &str,
    messages: &[Value],
    tools: &[Value],
    mut on_text: impl FnMut(&str),
) -> Result<Turn, ModelError> {
    let body = json!({
        "model": settings.model,
        "max_tokens": settings.max_tokens,
        "system": system,
        "messages": messages,
        "tools": tools,
        "stream": true,
    });
    let url = format!("{}/v1/messages", settings.base_url.trim_end_matches('/'));
    // Outside the work, so what it counted survives a failure or the time limit.
    let mut assembler = Assembler::default();
    let work = async {
        let response = http
            .post(&url)
            .header("x-api-key", api_key)
            .header("anthropic-version", API_VERSION)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| ModelError::new("model_unreachable", format!("cannot reach {url}: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| text.chars().take(300).collect());
            return Err(ModelError::new(
                "model_error",
                format!("the model API answered {status}: {detail}"),
            ));
        }
        let mut reader = EventReader::default();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| ModelError::new("model_unreachable", format!("the stream broke: {e}")))?;
            for (event, data) in reader.push(&chunk)? {
                if let Some(text) = assembler.apply(&event, &data)? {
                    on_text(&text);
                }
                if assembler.finished {
                    return assembler.finish();
                }
            }
        }
        Err(ModelError::new(
            "model_protocol",
            "the model's stream ended before message_stop",
        ))
    };
    let result = tokio::time::timeout(TURN_LIMIT, work).await.unwrap_or_else(|_| {
        Err(ModelError::new(
            "model_unreachable",
            format!("no complete answer from the model within {}s", TURN_LIMIT.as_secs()),
        ))
    });
    result.map_err(|e| ModelError {
        usage: assembler.usage,
        ..e
    })
}

/// Splits a byte stream into SSE events (`event:` name, joined `data:` lines).
#[derive(Default)]
pub(crate) struct EventReader {
    buf: Vec<u8>,
}

impl EventReader {
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<(String, String)>, ModelError> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = find_blank_line(&self.buf) {
            let raw: Vec<u8> = self.buf.drain(..end.0).collect();
            self.buf.drain(..end.1 - end.0);
            let text = String::from_utf8_lossy(&raw);
            let mut name = String::from("message");
            let mut data = Vec::new();
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                }
            }
            if !data.is_empty() {
                events.push((name, data.join("\n")));
            }
        }
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(ModelError::new(
                "model_protocol",
                "an event from the model API is too large",
            ));
        }
        Ok(events)
    }
}

/// The end of the first event: (where the event stops, where the next one starts).
fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    for i in 0..buf.len() {
        if buf[i..].starts_with(b"\n\n") {
            return Some((i, i + 2));
        }
        if buf[i..].starts_with(b"\r\n\r\n") {
            return Some((i, i + 4));
        }
    }
    None
}

/// Builds the assistant message from the stream's events.
#[derive(Default)]
pub(crate) struct Assembler {
    blocks: Vec<Value>,
    /// Partial JSON of each tool_use block's input, by block index.
    partial_inputs: Vec<String>,
    stop_reason: Option<String>,
    pub(crate) usage: Usage,
    pub(crate) finished: bool,
}

impl Assembler {
    /// Applies one event; returns text to show, if the event carried some.
    pub(crate) fn apply(&mut self, event: &str, data: &str) -> Result<Option<String>, ModelError> {
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ModelError::new("model_protocol", format!("unreadable {event} event: {e}")))?;
        let index = v["index"].as_u64().unwrap_or(0) as usize;
        match event {
            "content_block_start" => {
                while self.blocks.len() <= index {
                    self.blocks.push(Value::Null);
                    self.partial_inputs.push(String::new());
                }
                self.blocks[index] = v["content_block"].clone();
            }
            "content_block_delta" => {
                let Some(block) = self.blocks.get_mut(index) else {
                    return Err(ModelError::new(
                        "model_protocol",
                        "a delta for a block that never started",
                    ));
                };
                let delta = &v["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        let text = delta["text"].as_str().unwrap_or_default();
                        let so_far = block["text"].as_str().unwrap_or_default().to_owned();
                        block["text"] = Value::from(so_far + text);
                        return Ok(Some(text.to_owned()));
                    }
                    Some("input_json_delta") => {
                        self.partial_inputs[index].push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(block) = self.blocks.get_mut(index)
                    && block["type"] == "tool_use"
                {
                    let partial = &self.partial_inputs[index];
                    let input: Value = if partial.trim().is_empty() {
                        block.get("input").cloned().unwrap_or_else(|| json!({}))
                    } else {
                        serde_json::from_str(partial).map_err(|e| {
                            ModelError::new("model_protocol", format!("a tool call's input is not JSON: {e}"))
                        })?
                    };
                    block["input"] = input;
                }
            }
            "message_start" => self.usage.absorb(&v["message"]["usage"]),
            "message_delta" => {
                if let Some(reason) = v["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.usage.absorb(&v["usage"]);
            }
            "message_stop" => self.finished = true,
            "error" => {
                return Err(ModelError::new(
                    "model_error",
                    format!(
                        "the model API reported: {}",
                        v["error"]["message"].as_str().unwrap_or("an error")
                    ),
                ));
            }
            _ => {} // ping, and anything newer.
        }
        Ok(None)
    }

    pub(crate) fn finish(&mut self) -> Result<Turn, ModelError> {
        let content: Vec<Value> = std::mem::take(&mut self.blocks)
            .into_iter()
            .filter(|b| matches!(b["type"].as_str(), Some("text" | "tool_use")))
            .filter(|b| b["type"] != "text" || b["text"].as_str().is_some_and(|t| !t.is_empty()))
            .map(|b| clean_block(&b))
            .collect();
        Ok(Turn {
            content,
            stop_reason: self.stop_reason.take(),
            usage: self.usage,
        })
    }
}

/// Only the fields the API takes back in history.
fn clean_block(block: &Value) -> Value {
    let mut out = Map::new();
    let keep: &[&str] = match block["type"].as_str() {
        Some("text") => &["type", "text"],
        _ => &["type", "id", "name", "input"],
    };
    for key in keep {
        if let Some(v) = block.get(*key) {
            out.insert((*key).to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[]}}\r\n\r\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: ping\ndata: {\"type\":\"ping\"}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking \"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"disk.\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"fs_disk_usage\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"agent_\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"id\\\": \\\"pc-a\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    #[test]
    fn assembles_text_and_tool_use_from_any_chunking() {
        for chunk in [1, 7, 64, STREAM.len()] {
            let mut reader = EventReader::default();
            let mut asm = Assembler::default();
            let mut shown = String::new();
            for piece in STREAM.as_bytes().chunks(chunk) {
                for (event, data) in reader.push(piece).unwrap() {
                    if let Some(t) = asm.apply(&event, &data).unwrap() {
                        shown.push_str(&t);
                    }
                }
            }
            assert!(asm.finished);
            let turn = asm.finish().unwrap();
            assert_eq!(shown, "Checking disk.");
            assert_eq!(turn.stop_reason.as_deref(), Some("tool_use"));
            assert_eq!(
                turn.content,
                vec![
                    json!({"type": "text", "text": "Checking disk."}),
                    json!({"type": "tool_use", "id": "toolu_1", "name": "fs_disk_usage", "input": {"agent_id": "pc-a"}}),
                ],
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn protocol_problems_are_errors_not_guesses() {
        let mut asm = Assembler::default();
        assert_eq!(
            asm.apply("content_block_delta", "{\"index\":3,\"delta\":{}}")
                .unwrap_err()
                .code,
            "model_protocol"
        );
        assert_eq!(
            asm.apply("content_block_start", "not json").unwrap_err().code,
            "model_protocol"
        );
        let err = asm
            .apply(
                "error",
                "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
            )
            .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            ("model_error", "the model API reported: Overloaded")
        );
        let mut reader = EventReader::default();
        assert!(reader.push(&vec![b'x'; MAX_EVENT_BYTES + 1]).is_err());
    }
}
