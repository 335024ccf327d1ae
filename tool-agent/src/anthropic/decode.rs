//! Streamed events into [`StreamEvent`]s ("Streaming Messages": `message_start`, then each
//! content block as `content_block_start`, deltas and `content_block_stop`, then
//! `message_delta` with the stop reason and usage, then `message_stop`).
//!
//! Text blocks become the message's text and tool-use blocks its calls, numbered in the order
//! they start (the block index also counts text and thinking). Every other block (thinking,
//! redacted thinking, a server tool's use and result, a type newer than this adapter) is kept
//! whole as a [`ProviderItem`], its deltas applied, to be sent back as it came.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::PROVIDER;
use super::wire::{Delta, StreamEvent as WireEvent, WireUsage};
use crate::http::Decode;
use crate::message::{AssistantMessage, ProviderItem, ToolUse};
use crate::model::{FinishReason, ModelError, Response, StreamEvent};

/// What [`AssistantMessage::refusal`] holds when the API stopped the answer with
/// `stop_reason: "refusal"`: the API sends no text of its own for it.
pub(crate) const REFUSAL: &str = "Anthropic's safety classifiers stopped the answer \
     (stop_reason `refusal`); the conversation continues without it";

/// What the events of one response have said so far.
#[derive(Default)]
pub(crate) struct Decoder {
    started: bool,
    id: String,
    model: String,
    message: AssistantMessage,
    /// The blocks started and not yet stopped, by their index.
    open: BTreeMap<usize, Block>,
    usage: Option<WireUsage>,
    stop_reason: Option<String>,
}

/// A content block being streamed.
enum Block {
    Text,
    /// The call's position among the response's calls, the call, and the `input` of
    /// `content_block_start` (empty: the input streams as `input_json_delta`).
    ToolUse {
        index: usize,
        call: ToolUse,
        input: Option<Value>,
    },
    /// Any other block: kept whole, its JSON deltas gathered for its `input`.
    Kept {
        block: Map<String, Value>,
        json: String,
    },
}

impl Decode for Decoder {
    fn push(
        &mut self,
        _event: Option<&str>,
        data: &str,
        events: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError> {
        let event: WireEvent = serde_json::from_str(data)
            .map_err(|e| ModelError::Protocol(format!("an event is not valid: {e}: {data}")))?;
        match event {
            WireEvent::MessageStart { message } => {
                self.started = true;
                self.id = message.id;
                self.model = message.model;
                self.usage = message.usage;
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, content_block, events)?,
            WireEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, events)?,
            WireEvent::ContentBlockStop { index } => self.stop(index, events)?,
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(later) = usage {
                    let usage = self.usage.get_or_insert_with(WireUsage::default);
                    usage.update(later);
                    events.push(StreamEvent::Usage(usage.normalised()));
                }
            }
            WireEvent::MessageStop => return Ok(true),
            WireEvent::Error { error } => {
                return Err(ModelError::Provider {
                    code: error.code(),
                    message: error.message,
                });
            }
            WireEvent::Ping | WireEvent::Unknown => {}
        }
        Ok(false)
    }

    /// The response once the stream ended (`done`: with `message_stop`). A stream that ends
    /// before `message_stop` broke off: nothing of it is returned, not even the calls whose
    /// blocks were complete, since the response they belong to is not.
    fn finish(self, done: bool) -> Result<Vec<StreamEvent>, ModelError> {
        if !done {
            return Err(ModelError::Transport(
                "the response broke off before `message_stop`".into(),
            ));
        }
        if !self.started {
            return Err(ModelError::Protocol(
                "the response ended without `message_start`".into(),
            ));
        }
        if let Some(Block::ToolUse { call, .. }) = self
            .open
            .values()
            .find(|b| matches!(b, Block::ToolUse { .. }))
        {
            return Err(ModelError::Protocol(format!(
                "the response ended before tool call `{}` ({}) was complete",
                call.call_id, call.name
            )));
        }
        let mut message = self.message;
        let mut events = Vec::new();
        let finish_reason = match self.stop_reason.as_deref() {
            Some(reason) => finish_reason(reason),
            // A compatible server may leave `message_delta` out: the content tells.
            None if message.tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        if finish_reason == FinishReason::ContentFilter {
            message.refusal = Some(REFUSAL.to_owned());
            events.push(StreamEvent::RefusalDelta(REFUSAL.to_owned()));
        }
        events.push(StreamEvent::Completed(Response {
            message,
            finish_reason,
            usage: self.usage.map(WireUsage::normalised),
            model: self.model,
            id: self.id,
        }));
        Ok(events)
    }
}

impl Decoder {
    fn start(
        &mut self,
        index: usize,
        mut block: Map<String, Value>,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let started = match kind {
            "text" => {
                if let Some(Value::String(text)) = block.remove("text")
                    && !text.is_empty()
                {
                    self.text(text, events);
                }
                Block::Text
            }
            "tool_use" => {
                let field = |name: &str| block.get(name).and_then(Value::as_str);
                let (Some(call_id), Some(name)) = (field("id"), field("name")) else {
                    return Err(ModelError::Protocol(format!(
                        "the tool_use block {index} has no `id` or `name`"
                    )));
                };
                let call = ToolUse::new(call_id, name, String::new());
                let calls = self.message.tool_calls.len();
                let open = self.open.values();
                let index = calls + open.filter(|b| matches!(b, Block::ToolUse { .. })).count();
                events.push(StreamEvent::ToolCallStart {
                    index,
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                });
                let input = block.remove("input");
                Block::ToolUse { index, call, input }
            }
            _ => Block::Kept {
                block,
                json: String::new(),
            },
        };
        if self.open.insert(index, started).is_some() {
            return Err(ModelError::Protocol(format!(
                "content block {index} started twice"
            )));
        }
        Ok(())
    }

    fn delta(
        &mut self,
        index: usize,
        delta: Delta,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        let Some(block) = self.open.get_mut(&index) else {
            return Err(ModelError::Protocol(format!(
                "a delta arrived for content block {index}, which is not open"
            )));
        };
        match (block, delta) {
            (Block::Text, Delta::Text { text }) => self.text(text, events),
            (Block::ToolUse { index, call, .. }, Delta::InputJson { partial_json })
                if !partial_json.is_empty() =>
            {
                call.arguments.push_str(&partial_json);
                events.push(StreamEvent::ToolCallDelta {
                    index: *index,
                    arguments: partial_json,
                });
            }
            (Block::Kept { json, .. }, Delta::InputJson { partial_json }) => {
                json.push_str(&partial_json);
            }
            (Block::Kept { block, .. }, Delta::Thinking { thinking }) => {
                append(block, "thinking", &thinking);
            }
            (Block::Kept { block, .. }, Delta::Signature { signature }) => {
                append(block, "signature", &signature);
            }
            (Block::Kept { block, .. }, Delta::Text { text }) => append(block, "text", &text),
            // Empty input pieces, citations, and deltas of kinds this adapter does not read.
            _ => {}
        }
        Ok(())
    }

    fn stop(&mut self, index: usize, events: &mut Vec<StreamEvent>) -> Result<(), ModelError> {
        let Some(block) = self.open.remove(&index) else {
            return Err(ModelError::Protocol(format!(
                "content block {index} stopped without starting"
            )));
        };
        match block {
            Block::Text => {}
            Block::ToolUse {
                index,
                mut call,
                input,
            } => {
                if call.arguments.trim().is_empty() {
                    // A server that sends the whole input with the block's start, and a call
                    // without arguments, which is a call with none.
                    call.arguments = match input {
                        Some(input @ Value::Object(_)) if input != Value::Object(Map::new()) => {
                            let arguments = input.to_string();
                            events.push(StreamEvent::ToolCallDelta {
                                index,
                                arguments: arguments.clone(),
                            });
                            arguments
                        }
                        _ => "{}".into(),
                    };
                }
                events.push(StreamEvent::ToolCallDone(call.clone()));
                self.message.tool_calls.push(call);
            }
            Block::Kept { mut block, json } => {
                if !json.trim().is_empty() {
                    let input = serde_json::from_str(&json).map_err(|e| {
                        let kind = block.get("type").and_then(Value::as_str).unwrap_or("?");
                        ModelError::Protocol(format!(
                            "the input of the {kind} block {index} is not valid JSON: {e}"
                        ))
                    })?;
                    block.insert("input".into(), input);
                }
                let item = ProviderItem::new(PROVIDER, Value::Object(block));
                self.message.items.push(item);
            }
        }
        Ok(())
    }

    fn text(&mut self, text: String, events: &mut Vec<StreamEvent>) {
        self.message.text.push_str(&text);
        events.push(StreamEvent::TextDelta(text));
    }
}

/// Appends `more` to the string field `field` of `block`.
fn append(block: &mut Map<String, Value>, field: &str, more: &str) {
    match block.get_mut(field) {
        Some(Value::String(text)) => text.push_str(more),
        _ => {
            block.insert(field.into(), Value::String(more.to_owned()));
        }
    }
}

/// The documented stop reasons ("Handling stop reasons").
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        // `pause_turn`: a server tool's long turn paused; sending the conversation back as it
        // is lets the model go on.
        other => FinishReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(events: &[Value], done: bool) -> Result<Vec<StreamEvent>, ModelError> {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        for event in events {
            decoder.push(None, &event.to_string(), &mut out)?;
        }
        out.extend(decoder.finish(done)?);
        Ok(out)
    }

    fn start() -> Value {
        json!({ "type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": 5, "output_tokens": 1 },
        }})
    }

    fn completed(events: &[StreamEvent]) -> &Response {
        match events.last() {
            Some(StreamEvent::Completed(response)) => response,
            other => panic!("not completed: {other:?}"),
        }
    }

    #[test]
    fn an_input_given_whole_at_the_start_is_the_calls_arguments() {
        let events = run(
            &[
                start(),
                json!({ "type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": "toolu_1", "name": "status", "input": { "name": "api" },
                }}),
                json!({ "type": "content_block_stop", "index": 0 }),
                json!({ "type": "message_stop" }),
            ],
            true,
        )
        .unwrap();
        let response = completed(&events);
        assert_eq!(
            response.message.tool_calls[0].arguments,
            r#"{"name":"api"}"#
        );
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn a_call_without_arguments_has_an_empty_object() {
        let events = run(
            &[
                start(),
                json!({ "type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": "toolu_1", "name": "ping", "input": {},
                }}),
                json!({ "type": "content_block_delta", "index": 0,
                    "delta": { "type": "input_json_delta", "partial_json": "" } }),
                json!({ "type": "content_block_stop", "index": 0 }),
                json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use" },
                    "usage": { "output_tokens": 9 } }),
                json!({ "type": "message_stop" }),
            ],
            true,
        )
        .unwrap();
        assert_eq!(completed(&events).message.tool_calls[0].arguments, "{}");
    }

    #[test]
    fn deltas_for_blocks_that_are_not_open_are_protocol_errors() {
        let error = run(
            &[
                start(),
                json!({ "type": "content_block_delta", "index": 3,
                    "delta": { "type": "text_delta", "text": "hi" } }),
            ],
            true,
        )
        .unwrap_err();
        assert!(
            matches!(&error, ModelError::Protocol(m) if m.contains("block 3")),
            "{error:?}"
        );
    }

    #[test]
    fn a_call_still_open_at_message_stop_is_not_returned() {
        let error = run(
            &[
                start(),
                json!({ "type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": "toolu_1", "name": "status", "input": {},
                }}),
                json!({ "type": "content_block_delta", "index": 0,
                    "delta": { "type": "input_json_delta", "partial_json": "{\"na" } }),
                json!({ "type": "message_stop" }),
            ],
            true,
        )
        .unwrap_err();
        assert!(
            matches!(&error, ModelError::Protocol(m) if m.contains("toolu_1")),
            "{error:?}"
        );
    }

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
        assert_eq!(finish_reason("stop_sequence"), FinishReason::Stop);
        assert_eq!(finish_reason("max_tokens"), FinishReason::Length);
        assert_eq!(finish_reason("tool_use"), FinishReason::ToolCalls);
        assert_eq!(finish_reason("refusal"), FinishReason::ContentFilter);
        assert_eq!(
            finish_reason("pause_turn"),
            FinishReason::Other("pause_turn".into())
        );
    }
}
