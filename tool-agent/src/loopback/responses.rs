//! Responses API answers, as OpenAI's API reference documents its streaming events (the
//! OpenAPI description in `openai/openai-openapi`): `response.created` and
//! `response.in_progress` with the `Response` in progress; per output item
//! `response.output_item.added`, then for a message (`OutputMessage`)
//! `response.content_part.added`, `response.output_text.delta` / `response.refusal.delta`,
//! `response.output_text.done` / `response.refusal.done` and `response.content_part.done`, for
//! a function call (`FunctionToolCall`) `response.function_call_arguments.delta` and
//! `response.function_call_arguments.done`, and `response.output_item.done` with the whole
//! item; last `response.completed` with every item and the `ResponseUsage`. Every event is
//! named after its `type` and carries a `sequence_number`; there is no `[DONE]`. A failure in a
//! started stream is an `error` event (`ResponseErrorEvent`) followed by `response.failed`.

use serde_json::{Value, json};

use super::{Answer, Failure, Frame, INPUT_TOKENS, OUTPUT_TOKENS};
use crate::scripted::pieces;

/// The events of one response, numbered as they are added.
struct Events {
    frames: Vec<Frame>,
    sequence: u64,
}

impl Events {
    fn new() -> Events {
        Events {
            frames: Vec::new(),
            sequence: 0,
        }
    }

    /// An event of `kind` with the fields of `data`, its `type` and its `sequence_number`.
    fn push(&mut self, kind: &'static str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        self.frames.push(Frame::named(kind, data.to_string()));
    }
}

/// The whole stream of a reply: a message item for its text or refusal (or an empty one when
/// it has nothing else), then a function-call item per call.
pub(super) fn reply(answer: &Answer<'_>) -> Vec<Frame> {
    let message = answer.message;
    let mut events = started(answer);
    let mut output = Vec::new();
    if !message.text.is_empty() || message.refusal.is_some() || message.tool_calls.is_empty() {
        let item = message_item(&mut events, answer, output.len());
        output.push(item);
    }
    for (position, call) in message.tool_calls.iter().enumerate() {
        let output_index = output.len();
        let mut item = json!({
            "id": format!("fc_loopback_{}_{}", answer.round, position + 1),
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": format!("call_loopback_{}_{}", answer.round, position + 1),
            "name": call.name,
        });
        events.push(
            "response.output_item.added",
            json!({ "output_index": output_index, "item": item }),
        );
        let item_id = item["id"].clone();
        for piece in pieces(&call.arguments) {
            events.push(
                "response.function_call_arguments.delta",
                json!({ "item_id": item_id, "output_index": output_index, "delta": piece }),
            );
        }
        events.push(
            "response.function_call_arguments.done",
            json!({
                "item_id": item_id,
                "output_index": output_index,
                "name": call.name,
                "arguments": call.arguments,
            }),
        );
        item["status"] = json!("completed");
        item["arguments"] = json!(call.arguments);
        events.push(
            "response.output_item.done",
            json!({ "output_index": output_index, "item": item }),
        );
        output.push(item);
    }
    let usage = json!({
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": { "cached_tokens": 0, "cache_write_tokens": 0 },
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    });
    let mut completed = response(answer, "completed", output);
    completed["usage"] = usage;
    completed["completed_at"] = json!(answer.created);
    events.push("response.completed", json!({ "response": completed }));
    events.frames
}

/// `response.created` and `response.in_progress`.
pub(super) fn opening(answer: &Answer<'_>) -> Vec<Frame> {
    started(answer).frames
}

/// An error in a started stream: `error`, then `response.failed` with the error.
pub(super) fn failed(answer: &Answer<'_>, failure: &Failure<'_>) -> Vec<Frame> {
    let mut events = Events::new();
    // Numbered after the two events of the opening.
    events.sequence = 2;
    events.push(
        "error",
        json!({ "code": failure.code, "message": failure.message, "param": null }),
    );
    let mut failed = response(answer, "failed", Vec::new());
    failed["error"] = json!({
        "code": failure.code.unwrap_or("server_error"),
        "message": failure.message,
    });
    events.push("response.failed", json!({ "response": failed }));
    events.frames
}

fn started(answer: &Answer<'_>) -> Events {
    let mut events = Events::new();
    let response = response(answer, "in_progress", Vec::new());
    events.push("response.created", json!({ "response": response }));
    events.push("response.in_progress", json!({ "response": response }));
    events
}

/// The message item at `output_index`: its text part, then its refusal part.
fn message_item(events: &mut Events, answer: &Answer<'_>, output_index: usize) -> Value {
    let message = answer.message;
    let item_id = format!("msg_loopback_{}", answer.round);
    let mut item = json!({
        "id": item_id,
        "type": "message",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    });
    events.push(
        "response.output_item.added",
        json!({ "output_index": output_index, "item": item }),
    );
    let mut parts = Vec::new();
    if !message.text.is_empty() || message.refusal.is_none() {
        let at = json!({ "item_id": item_id, "output_index": output_index, "content_index": parts.len() });
        let part = |text: &str| json!({ "type": "output_text", "text": text, "annotations": [] });
        events.push("response.content_part.added", with(&at, "part", part("")));
        for piece in pieces(&message.text) {
            let delta = with(&at, "delta", json!(piece));
            events.push(
                "response.output_text.delta",
                with(&delta, "logprobs", json!([])),
            );
        }
        let done = with(&at, "text", json!(message.text));
        events.push(
            "response.output_text.done",
            with(&done, "logprobs", json!([])),
        );
        events.push(
            "response.content_part.done",
            with(&at, "part", part(&message.text)),
        );
        parts.push(part(&message.text));
    }
    if let Some(refusal) = &message.refusal {
        let at = json!({ "item_id": item_id, "output_index": output_index, "content_index": parts.len() });
        let part = |text: &str| json!({ "type": "refusal", "refusal": text });
        events.push("response.content_part.added", with(&at, "part", part("")));
        for piece in pieces(refusal) {
            events.push("response.refusal.delta", with(&at, "delta", json!(piece)));
        }
        events.push(
            "response.refusal.done",
            with(&at, "refusal", json!(refusal)),
        );
        events.push(
            "response.content_part.done",
            with(&at, "part", part(refusal)),
        );
        parts.push(part(refusal));
    }
    item["status"] = json!("completed");
    item["content"] = Value::Array(parts);
    events.push(
        "response.output_item.done",
        json!({ "output_index": output_index, "item": item }),
    );
    item
}

/// `fields` with one more field.
fn with(fields: &Value, name: &str, value: Value) -> Value {
    let mut fields = fields.clone();
    fields[name] = value;
    fields
}

/// The `Response` object with `status` and `output`, echoing what the request set.
fn response(answer: &Answer<'_>, status: &str, output: Vec<Value>) -> Value {
    let request = answer.request;
    let echo = |name: &str, default: Value| request.get(name).cloned().unwrap_or(default);
    json!({
        "id": format!("resp_loopback_{}", answer.round),
        "object": "response",
        "created_at": answer.created,
        "status": status,
        "completed_at": null,
        "error": null,
        "incomplete_details": null,
        "instructions": echo("instructions", Value::Null),
        "max_output_tokens": echo("max_output_tokens", Value::Null),
        "model": answer.model,
        "output": output,
        "parallel_tool_calls": echo("parallel_tool_calls", json!(true)),
        "previous_response_id": echo("previous_response_id", Value::Null),
        "store": echo("store", json!(true)),
        "temperature": echo("temperature", json!(1.0)),
        "text": { "format": { "type": "text" } },
        "tool_choice": echo("tool_choice", json!("auto")),
        "tools": echo("tools", json!([])),
        "top_p": echo("top_p", json!(1.0)),
        "truncation": "disabled",
        "usage": null,
        "metadata": {},
    })
}
