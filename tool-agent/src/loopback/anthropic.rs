//! Anthropic Messages answers, as Anthropic's "Streaming Messages" guide documents the event
//! flow and its API types (`anthropics/anthropic-sdk-python`, `types/raw_*_event.py`) their
//! shapes: `message_start` with the `Message` (empty `content`, `stop_reason: null`, the input
//! usage), a `ping`, then per content block `content_block_start`, `content_block_delta`s
//! (`text_delta`, or `input_json_delta` pieces of a `tool_use` block's input, the first one
//! empty) and `content_block_stop`; then `message_delta` with the `stop_reason` and the
//! cumulative `output_tokens`, and `message_stop`. Every event is named after its `type`.
//! Errors follow the errors guide: `{"type": "error", "error": {"type", "message"}}`, as the
//! body of an error response or as an `error` event inside a started stream.

use serde_json::{Value, json};

use super::{Answer, Failure, Frame, INPUT_TOKENS, OUTPUT_TOKENS};
use crate::scripted::pieces;

/// The whole stream of a reply: a text block for its text (or its refusal: the Messages API
/// has no refusal block, it stops with `stop_reason: "refusal"`), then a `tool_use` block per
/// call.
pub(super) fn reply(answer: &Answer<'_>) -> Vec<Frame> {
    let message = answer.message;
    let mut frames = opening(answer);
    let mut index = 0;
    let text = message.refusal.as_deref().unwrap_or(&message.text);
    if !text.is_empty() || message.tool_calls.is_empty() {
        let start = json!({ "type": "text", "text": "" });
        frames.push(block_start(index, start));
        for piece in pieces(text) {
            let delta = json!({ "type": "text_delta", "text": piece });
            frames.push(block_delta(index, delta));
        }
        frames.push(block_stop(index));
        index += 1;
    }
    for (position, call) in message.tool_calls.iter().enumerate() {
        let start = json!({
            "type": "tool_use",
            "id": format!("toolu_loopback_{}_{}", answer.round, position + 1),
            "name": call.name,
            "input": {},
        });
        frames.push(block_start(index, start));
        for piece in std::iter::once("").chain(pieces(&call.arguments)) {
            let delta = json!({ "type": "input_json_delta", "partial_json": piece });
            frames.push(block_delta(index, delta));
        }
        frames.push(block_stop(index));
        index += 1;
    }
    let stop_reason = if message.refusal.is_some() {
        "refusal"
    } else if message.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    frames.push(event(
        "message_delta",
        json!({
            "delta": { "stop_reason": stop_reason, "stop_sequence": null },
            "usage": { "output_tokens": OUTPUT_TOKENS },
        }),
    ));
    frames.push(event("message_stop", json!({})));
    frames
}

/// `message_start` and a `ping`.
pub(super) fn opening(answer: &Answer<'_>) -> Vec<Frame> {
    let message = json!({
        "id": format!("msg_loopback_{}", answer.round),
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": answer.model,
        "stop_reason": null,
        "stop_sequence": null,
        "usage": {
            "input_tokens": INPUT_TOKENS,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
        },
    });
    vec![
        event("message_start", json!({ "message": message })),
        event("ping", json!({})),
    ]
}

/// An error in a started stream: an `error` event, after which nothing follows.
pub(super) fn failed(failure: &Failure<'_>) -> Vec<Frame> {
    vec![event("error", error_body(failure))]
}

/// The error object of an error response (or of an `error` event).
pub(super) fn error_body(failure: &Failure<'_>) -> Value {
    // The errors guide's type for each status; a scripted `code` replaces it.
    let kind = failure.code.unwrap_or(match failure.status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    });
    json!({
        "type": "error",
        "error": { "type": kind, "message": failure.message },
        "request_id": "req_loopback",
    })
}

fn block_start(index: usize, block: Value) -> Frame {
    event(
        "content_block_start",
        json!({ "index": index, "content_block": block }),
    )
}

fn block_delta(index: usize, delta: Value) -> Frame {
    event(
        "content_block_delta",
        json!({ "index": index, "delta": delta }),
    )
}

fn block_stop(index: usize) -> Frame {
    event("content_block_stop", json!({ "index": index }))
}

/// An event named `kind` whose data is `fields` with its `type`.
fn event(kind: &'static str, mut fields: Value) -> Frame {
    fields["type"] = json!(kind);
    Frame::named(kind, fields.to_string())
}
