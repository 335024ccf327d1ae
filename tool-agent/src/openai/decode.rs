//! Streamed chunks into [`StreamEvent`]s: text and refusal deltas, tool calls assembled from
//! their pieces by `index`, usage, and the finish reason.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use crate::message::Usage;
use crate::message::{AssistantMessage, ToolUse};
use crate::model::{FinishReason, ModelError, Response, StreamEvent};

use super::wire::Chunk;
use crate::http::Decode;

/// What the chunks of one response have said so far.
#[derive(Default)]
pub(crate) struct Decoder {
    message: AssistantMessage,
    /// Calls by their `index`: a call's first chunk names it, later ones add arguments. A map,
    /// not a vector the index sizes: the index is the server's number, any `usize`.
    calls: BTreeMap<usize, ToolUse>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    model: String,
    id: String,
}

impl Decode for Decoder {
    /// The events of one `data:` payload (a chunk's JSON); `[DONE]` ends the response.
    fn push(
        &mut self,
        _event: Option<&str>,
        data: &str,
        events: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError> {
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| ModelError::Protocol(format!("a chunk is not valid: {e}: {data}")))?;
        if let Some(error) = chunk.error {
            return Err(ModelError::Provider {
                code: error.code(),
                message: error.message,
            });
        }
        if self.id.is_empty() {
            self.id = chunk.id;
            self.model = chunk.model;
        }
        // With `n` = 1, the only choice is index 0; other choices are not asked for.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                self.message.text.push_str(&text);
                events.push(StreamEvent::TextDelta(text));
            }
            if let Some(text) = choice.delta.refusal.filter(|t| !t.is_empty()) {
                self.message
                    .refusal
                    .get_or_insert_with(String::new)
                    .push_str(&text);
                events.push(StreamEvent::RefusalDelta(text));
            }
            for piece in choice.delta.tool_calls {
                self.call_piece(piece, events)?;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(finish_reason(&reason));
            }
        }
        if let Some(usage) = chunk.usage {
            let usage = Usage {
                input_tokens: usage.prompt_tokens,
                cached_input_tokens: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
                output_tokens: usage.completion_tokens,
                cache_write_input_tokens: 0,
            };
            self.usage = Some(usage);
            events.push(StreamEvent::Usage(usage));
        }
        Ok(false)
    }

    /// The last events once the stream ended (`done`: it ended with `data: [DONE]`). A stream
    /// that ends with neither `[DONE]` nor a finish reason broke off: its calls may be cut
    /// short, so none of them is returned.
    fn finish(self, done: bool) -> Result<Vec<StreamEvent>, ModelError> {
        self.complete(done)
    }
}

impl Decoder {
    fn call_piece(
        &mut self,
        piece: super::wire::ToolCallChunk,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        let index = piece.index;
        let (name, arguments) = piece
            .function
            .map_or((None, None), |f| (f.name, f.arguments));
        let call = match self.calls.entry(index) {
            Entry::Occupied(call) => call.into_mut(),
            Entry::Vacant(slot) => {
                let (Some(call_id), Some(name)) = (piece.id, name) else {
                    return Err(ModelError::Protocol(format!(
                        "tool call {index} began without its id and name"
                    )));
                };
                events.push(StreamEvent::ToolCallStart {
                    index,
                    call_id: call_id.clone(),
                    name: name.clone(),
                });
                slot.insert(ToolUse::new(call_id, name, String::new()))
            }
        };
        if let Some(arguments) = arguments.filter(|a| !a.is_empty()) {
            call.arguments.push_str(&arguments);
            events.push(StreamEvent::ToolCallDelta { index, arguments });
        }
        Ok(())
    }

    fn complete(self, done: bool) -> Result<Vec<StreamEvent>, ModelError> {
        let Some(finish_reason) = self.finish_reason else {
            return Err(ModelError::Transport(if done {
                "the response ended without a finish reason".into()
            } else {
                "the response broke off before it finished".into()
            }));
        };
        let mut message = self.message;
        let mut events = Vec::new();
        for call in self.calls.into_values() {
            let call = ToolUse {
                // A call without arguments is a call with none: `{}` is what the tool gets.
                arguments: if call.arguments.trim().is_empty() {
                    "{}".into()
                } else {
                    call.arguments
                },
                ..call
            };
            events.push(StreamEvent::ToolCallDone(call.clone()));
            message.tool_calls.push(call);
        }
        events.push(StreamEvent::Completed(Response {
            message,
            finish_reason,
            usage: self.usage,
            model: self.model,
            id: self.id,
        }));
        Ok(events)
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        // `function_call` is the deprecated form of `tool_calls`.
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}
