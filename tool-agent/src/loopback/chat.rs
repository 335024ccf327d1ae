//! Chat Completions answers, as OpenAI's API reference documents them (the OpenAPI description
//! in `openai/openai-openapi`): `CreateChatCompletionStreamResponse` ("The chat completion chunk
//! object"), `ChatCompletionStreamResponseDelta`, `ChatCompletionMessageToolCallChunk` (a call's
//! first chunk carries `index`, `id`, `type` and the function's `name` with empty `arguments`,
//! later ones `index` and pieces of `arguments`, as the function calling guide's "Streaming"
//! shows), `ChatCompletionStreamOptions.include_usage` (every chunk has `usage: null` but a last
//! one with empty `choices` and the `CompletionUsage`) and `data: [DONE]`. Errors are the error
//! object of the error codes guide, `{"error": {"message", "type", "param", "code"}}`, which the
//! Responses API shares.

use serde_json::{Value, json};

use super::{Answer, Failure, Frame, INPUT_TOKENS, OUTPUT_TOKENS};
use crate::scripted::pieces;

/// The whole stream of a reply.
pub(super) fn reply(answer: &Answer<'_>) -> Vec<Frame> {
    let message = answer.message;
    let mut frames = opening(answer);
    for piece in pieces(&message.text) {
        frames.push(chunk(answer, json!({ "content": piece }), None));
    }
    for piece in message.refusal.iter().flat_map(|r| pieces(r)) {
        frames.push(chunk(answer, json!({ "refusal": piece }), None));
    }
    for (index, call) in message.tool_calls.iter().enumerate() {
        let first = json!({ "tool_calls": [{
            "index": index,
            "id": format!("call_loopback_{}_{}", answer.round, index + 1),
            "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]});
        frames.push(chunk(answer, first, None));
        for piece in pieces(&call.arguments) {
            let more =
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] });
            frames.push(chunk(answer, more, None));
        }
    }
    // A refusal ends with `stop` too: `content_filter` is for content the provider withheld.
    let finish = if message.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    frames.push(chunk(answer, json!({}), Some(finish)));
    if include_usage(answer.request) {
        frames.push(Frame::data(usage_chunk(answer).to_string()));
    }
    frames.push(Frame::data("[DONE]"));
    frames
}

/// The first chunk: the role, with empty content.
pub(super) fn opening(answer: &Answer<'_>) -> Vec<Frame> {
    let delta = json!({ "role": "assistant", "content": "", "refusal": null });
    vec![chunk(answer, delta, None)]
}

/// An error inside a started stream: a `data:` event holding the error object, as
/// OpenAI-compatible servers (vLLM's, llama.cpp's) send one; the stream ends there.
pub(super) fn failed(failure: &Failure<'_>) -> Vec<Frame> {
    vec![Frame::data(error_body(failure).to_string())]
}

/// The error object of an error response (or of an error inside the stream).
pub(super) fn error_body(failure: &Failure<'_>) -> Value {
    // The type the error codes guide gives each status; `code` is the finer reason.
    let kind = match failure.status {
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json!({ "error": {
        "message": failure.message,
        "type": kind,
        "param": null,
        "code": failure.code,
    }})
}

fn include_usage(request: &Value) -> bool {
    request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true))
}

/// A chunk with one choice (index 0) carrying `delta` and `finish_reason`.
fn chunk(answer: &Answer<'_>, delta: Value, finish_reason: Option<&str>) -> Frame {
    let mut chunk = head(answer);
    chunk["choices"] = json!([{
        "index": 0,
        "delta": delta,
        "logprobs": null,
        "finish_reason": finish_reason,
    }]);
    if include_usage(answer.request) {
        chunk["usage"] = Value::Null;
    }
    Frame::data(chunk.to_string())
}

/// The last chunk of `include_usage`: no choices, the request's usage.
fn usage_chunk(answer: &Answer<'_>) -> Value {
    let mut chunk = head(answer);
    chunk["choices"] = json!([]);
    chunk["usage"] = json!({
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        "prompt_tokens_details": { "cached_tokens": 0, "audio_tokens": 0 },
        "completion_tokens_details": { "reasoning_tokens": 0, "audio_tokens": 0 },
    });
    chunk
}

/// The fields every chunk of one completion shares.
fn head(answer: &Answer<'_>) -> Value {
    json!({
        "id": format!("chatcmpl-loopback-{}", answer.round),
        "object": "chat.completion.chunk",
        "created": answer.created,
        "model": answer.model,
        "system_fingerprint": "fp_loopback",
    })
}
