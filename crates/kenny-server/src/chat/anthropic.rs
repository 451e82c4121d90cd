//! The Anthropic Messages API, streamed: one request, its server-sent events read as
//! they arrive, text handed on as it streams, the whole assistant message returned.

use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ChatSettings;

const API_VERSION: &str = "2023-06-01";
/// A model turn longer than this is treated as failed.
const TURN_LIMIT: Duration = Duration::from_secs(300);
/// A streamed answer larger than this is not from a well-behaved server.
const MAX_STREAM_BYTES: usize = 16 * 1024 * 1024;
/// More content blocks than this in one answer is not a well-behaved server either.
const MAX_BLOCKS: usize = 1024;

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

/// The request: one streamed Messages API turn.
#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    system: &'a str,
    messages: &'a [Value],
    tools: &'a [Value],
    stream: bool,
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
    let body = MessagesRequest {
        model: &settings.model,
        max_tokens: settings.max_tokens,
        system,
        messages,
        tools,
        stream: true,
    };
    let url = format!("{}/v1/messages", settings.base_url.trim_end_matches('/'));
    // Outside the work, so what it counted survives a failure or the time limit.
    let mut assembler = Assembler::default();
    let work = async {
        let response = http
            .post(&url)
            .header("x-api-key", api_key)
            .header("anthropic-version", API_VERSION)
            .json(&body)
            .send()
            .await
            .map_err(|e| ModelError::new("model_unreachable", format!("cannot reach {url}: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let detail = serde_json::from_str::<ErrorBody>(&text)
                .ok()
                .and_then(|b| b.error.message)
                .unwrap_or_else(|| text.chars().take(300).collect());
            return Err(ModelError::new(
                "model_error",
                format!("the model API answered {status}: {detail}"),
            ));
        }
        let mut events = bounded(response.bytes_stream()).eventsource();
        while let Some(event) = events.next().await {
            let event = event.map_err(stream_error)?;
            if let Some(text) = assembler.apply(&event.data)? {
                on_text(&text);
            }
            if assembler.finished {
                return assembler.finish();
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

/// Why the byte stream under the events stopped.
#[derive(Debug, thiserror::Error)]
enum Transport {
    #[error("the stream broke: {0}")]
    Broken(#[from] reqwest::Error),
    #[error("the model's answer passed {MAX_STREAM_BYTES} bytes")]
    TooLarge,
}

/// The body, cut off with an error once it passes [`MAX_STREAM_BYTES`]: a turn of a few
/// thousand tokens is far below it, and the parser buffers what it has not yet split.
fn bounded(
    body: impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>>,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, Transport>> {
    let mut seen = 0usize;
    body.map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len();
        if seen > MAX_STREAM_BYTES {
            return Err(Transport::TooLarge);
        }
        Ok(chunk)
    })
}

fn stream_error(e: EventStreamError<Transport>) -> ModelError {
    match e {
        EventStreamError::Transport(t @ Transport::TooLarge) => ModelError::new("model_protocol", t.to_string()),
        EventStreamError::Transport(t) => ModelError::new("model_unreachable", t.to_string()),
        other => ModelError::new("model_protocol", format!("unreadable event stream: {other}")),
    }
}

/// A non-2xx answer's body, when it is the API's error shape.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    message: Option<String>,
}

/// One event of the stream, by its `type` (the Messages API streaming reference).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<ApiUsage>,
    },
    MessageStop,
    Error {
        error: ErrorDetail,
    },
    /// `ping`, and event types newer than this code.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<ApiUsage>,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct ApiUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

impl Usage {
    /// Takes what a `usage` object says; counts only grow (later events are cumulative).
    fn absorb(&mut self, usage: Option<&ApiUsage>) {
        let Some(u) = usage else { return };
        let input = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
        self.input_tokens = self.input_tokens.max(input);
        self.output_tokens = self.output_tokens.max(u.output_tokens);
    }
}

/// A content block as it starts, and as it goes back into history.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking and other blocks this chat does not send back.
    #[serde(other, skip_serializing)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

/// Builds the assistant message from the stream's events.
#[derive(Default)]
pub(crate) struct Assembler {
    blocks: Vec<Option<ContentBlock>>,
    /// Partial JSON of each tool_use block's input, by block index.
    partial_inputs: Vec<String>,
    stop_reason: Option<String>,
    pub(crate) usage: Usage,
    pub(crate) finished: bool,
}

impl Assembler {
    /// Applies one event's data; returns text to show, if the event carried some.
    pub(crate) fn apply(&mut self, data: &str) -> Result<Option<String>, ModelError> {
        let event: StreamEvent = serde_json::from_str(data)
            .map_err(|e| ModelError::new("model_protocol", format!("unreadable event from the model API: {e}")))?;
        match event {
            StreamEvent::ContentBlockStart { index, content_block } => {
                if index >= MAX_BLOCKS {
                    return Err(ModelError::new(
                        "model_protocol",
                        "too many content blocks in one answer",
                    ));
                }
                while self.blocks.len() <= index {
                    self.blocks.push(None);
                    self.partial_inputs.push(String::new());
                }
                self.blocks[index] = Some(content_block);
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let Some(Some(block)) = self.blocks.get_mut(index) else {
                    return Err(ModelError::new(
                        "model_protocol",
                        "a delta for a block that never started",
                    ));
                };
                match (delta, block) {
                    (Delta::Text { text }, ContentBlock::Text { text: so_far }) => {
                        so_far.push_str(&text);
                        return Ok(Some(text));
                    }
                    (Delta::InputJson { partial_json }, ContentBlock::ToolUse { .. }) => {
                        self.partial_inputs[index].push_str(&partial_json);
                    }
                    _ => {}
                }
            }
            StreamEvent::ContentBlockStop { index } => {
                if let Some(Some(ContentBlock::ToolUse { input, .. })) = self.blocks.get_mut(index) {
                    let partial = &self.partial_inputs[index];
                    if !partial.trim().is_empty() {
                        *input = serde_json::from_str(partial).map_err(|e| {
                            ModelError::new("model_protocol", format!("a tool call's input is not JSON: {e}"))
                        })?;
                    } else if input.is_null() {
                        *input = json!({});
                    }
                }
            }
            StreamEvent::MessageStart { message } => self.usage.absorb(message.usage.as_ref()),
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(reason);
                }
                self.usage.absorb(usage.as_ref());
            }
            StreamEvent::MessageStop => self.finished = true,
            StreamEvent::Error { error } => {
                return Err(ModelError::new(
                    "model_error",
                    format!(
                        "the model API reported: {}",
                        error.message.as_deref().unwrap_or("an error")
                    ),
                ));
            }
            StreamEvent::Other => {}
        }
        Ok(None)
    }

    pub(crate) fn finish(&mut self) -> Result<Turn, ModelError> {
        let content: Vec<Value> = std::mem::take(&mut self.blocks)
            .into_iter()
            .flatten()
            .filter(|b| match b {
                ContentBlock::Text { text } => !text.is_empty(),
                ContentBlock::ToolUse { .. } => true,
                ContentBlock::Other => false,
            })
            .filter_map(|b| serde_json::to_value(b).ok())
            .collect();
        Ok(Turn {
            content,
            stop_reason: self.stop_reason.take(),
            usage: self.usage,
        })
    }
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

    async fn assemble(chunk: usize) -> (Assembler, String) {
        let pieces: Vec<Result<bytes::Bytes, Transport>> = STREAM
            .as_bytes()
            .chunks(chunk)
            .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
            .collect();
        let mut events = futures_util::stream::iter(pieces).eventsource();
        let mut asm = Assembler::default();
        let mut shown = String::new();
        while let Some(event) = events.next().await {
            if let Some(t) = asm.apply(&event.unwrap().data).unwrap() {
                shown.push_str(&t);
            }
        }
        (asm, shown)
    }

    #[tokio::test]
    async fn assembles_text_and_tool_use_from_any_chunking() {
        for chunk in [1, 7, 64, STREAM.len()] {
            let (mut asm, shown) = assemble(chunk).await;
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

    #[tokio::test]
    async fn protocol_problems_are_errors_not_guesses() {
        let mut asm = Assembler::default();
        let code = |r: Result<Option<String>, ModelError>| r.unwrap_err().code;
        assert_eq!(
            code(asm.apply(r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#)),
            "model_protocol"
        );
        assert_eq!(code(asm.apply("not json")), "model_protocol");
        assert_eq!(
            code(
                asm.apply(r#"{"type":"content_block_start","index":99999,"content_block":{"type":"text","text":""}}"#)
            ),
            "model_protocol"
        );
        let err = asm
            .apply(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
            .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            ("model_error", "the model API reported: Overloaded")
        );
        // Unknown event types (ping, newer ones) are skipped, not errors.
        assert_eq!(asm.apply(r#"{"type":"ping"}"#), Ok(None));
        assert_eq!(asm.apply(r#"{"type":"something_new","x":1}"#), Ok(None));
        // A body past the bound stops the stream.
        let big = vec![
            Ok(bytes::Bytes::from(vec![b'x'; MAX_STREAM_BYTES])),
            Ok(bytes::Bytes::from_static(b"x")),
        ];
        let mut limited = Box::pin(bounded(futures_util::stream::iter(big)));
        assert!(limited.next().await.unwrap().is_ok());
        assert!(matches!(limited.next().await, Some(Err(Transport::TooLarge))));
    }
}
