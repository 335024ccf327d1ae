//! The Messages API wire format, as Anthropic's documentation describes it ("Messages" in the
//! API reference, "Streaming Messages", "Prompt caching"): the request body this adapter writes
//! and the streamed events it reads. Content blocks stay JSON values: the adapter builds the
//! few it writes, and keeps the ones it does not know (thinking, server tools' blocks) as they
//! came, to send them back unchanged. Unknown event, block and delta types parse, so a stream
//! that carries something newer still reads (the streaming guide's "Other events" asks clients
//! to handle unknown event types gracefully).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::http::WireError;

/// The API version this adapter speaks (the `anthropic-version` header).
pub(crate) const API_VERSION: &str = "2023-06-01";

/// The request body (`POST /v1/messages`).
#[derive(Serialize)]
pub(crate) struct MessagesRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) system: Vec<SystemBlock<'a>>,
    pub(crate) messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tools: Option<Vec<Box<RawValue>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<Value>,
    pub(crate) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub(crate) stop_sequences: &'a [String],
    #[serde(flatten)]
    pub(crate) extra: &'a Map<String, Value>,
}

/// One text block of `system` (the array form, which can carry a cache breakpoint).
#[derive(Serialize)]
pub(crate) struct SystemBlock<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cache_control: Option<Value>,
}

/// One message of `messages`: its role and its content blocks.
#[derive(Debug, PartialEq, Serialize)]
pub(crate) struct WireMessage {
    pub(crate) role: Role,
    pub(crate) content: Vec<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Assistant,
}

/// `cache_control` of a block that ends a cached prefix. The default lifetime (five minutes,
/// refreshed on each hit) needs no `ttl`.
pub(crate) fn ephemeral() -> Value {
    serde_json::json!({ "type": "ephemeral" })
}

/// One streamed event (its `data:`); the event's `type` names it, as the SSE `event:` line does.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: Map<String, Value>,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

/// The `Message` of `message_start`, its `content` still empty.
#[derive(Deserialize)]
pub(crate) struct MessageStart {
    #[serde(default)]
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) model: String,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
}

/// A `content_block_delta`'s `delta`.
#[derive(Deserialize)]
#[serde(tag = "type")]
pub(crate) enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    /// A piece of a tool input's JSON text, cut anywhere.
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    /// `citations_delta` and whatever comes later.
    #[serde(other)]
    Unknown,
}

/// `message_delta`'s `delta`: top-level changes of the message.
#[derive(Deserialize)]
pub(crate) struct MessageDelta {
    #[serde(default)]
    pub(crate) stop_reason: Option<String>,
}

/// `Usage`: `input_tokens` counts only the prompt after the last cache breakpoint; the cached
/// part is read (`cache_read_input_tokens`) or written (`cache_creation_input_tokens`). The
/// counts of `message_delta` are cumulative, and may repeat the input counts.
#[derive(Clone, Copy, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) input_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) output_tokens: Option<u64>,
}

impl WireUsage {
    /// `self` with the counts `later` reports.
    pub(crate) fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
    }

    /// The counts, normalised: the whole prompt in `input_tokens`.
    pub(crate) fn normalised(self) -> crate::message::Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        crate::message::Usage {
            // Saturating: token counts come from the provider.
            input_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read)
                .saturating_add(written),
            cached_input_tokens: read,
            cache_write_input_tokens: written,
            output_tokens: self.output_tokens.unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_events_and_deltas_parse() {
        let event: StreamEvent =
            serde_json::from_str(r#"{"type":"message_checkpoint","at":3}"#).unwrap();
        assert!(matches!(event, StreamEvent::Unknown));
        let event: StreamEvent = serde_json::from_str(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}"#,
        )
        .unwrap();
        assert!(matches!(
            event,
            StreamEvent::ContentBlockDelta {
                delta: Delta::Unknown,
                ..
            }
        ));
    }

    #[test]
    fn a_prompt_too_large_to_count_saturates() {
        let usage: WireUsage = serde_json::from_str(
            r#"{"input_tokens":18446744073709551615,"cache_read_input_tokens":1,"cache_creation_input_tokens":1}"#,
        )
        .unwrap();
        assert_eq!(usage.normalised().input_tokens, u64::MAX);
    }

    #[test]
    fn later_usage_replaces_only_what_it_reports() {
        let mut usage: WireUsage = serde_json::from_str(
            r#"{"input_tokens":10,"cache_creation_input_tokens":null,"cache_read_input_tokens":90,"output_tokens":1}"#,
        )
        .unwrap();
        usage.update(serde_json::from_str(r#"{"output_tokens":15}"#).unwrap());
        let usage = usage.normalised();
        assert_eq!(usage.input_tokens, 100);
        assert_eq!(usage.cached_input_tokens, 90);
        assert_eq!(usage.cache_write_input_tokens, 0);
        assert_eq!(usage.output_tokens, 15);
    }
}
