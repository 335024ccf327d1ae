//! The Chat Completions adapter against a loopback server that answers as OpenAI documents:
//! SSE `data:` chunks, tool calls streamed by `index` with their arguments split, parallel
//! calls, refusals, the usage chunk of `stream_options.include_usage`, and error bodies.
//!
//! Each fixture names the documentation it follows. The shapes are those of OpenAI's API
//! reference (the OpenAPI description in `openai/openai-openapi`):
//! `CreateChatCompletionStreamResponse` ("The chat completion chunk object"),
//! `ChatCompletionStreamResponseDelta`, `ChatCompletionMessageToolCallChunk`,
//! `ChatCompletionStreamOptions` and `CompletionUsage`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::{Value, json};
use toolwright_agent::{
    ChatCompletions, FinishReason, Message, Model, ModelError, Request, Settings, StreamEvent,
    ToolDefinitions, Usage, complete,
};

/// What the server answers, and what it was sent.
#[derive(Clone)]
struct Fixture {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
    seen: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

async fn answer(State(fixture): State<Fixture>, headers: HeaderMap, body: String) -> Response {
    let json: Value = serde_json::from_str(&body).expect("the adapter sends JSON");
    fixture.seen.lock().unwrap().push((headers, json));
    let mut response = Response::builder().status(StatusCode::from_u16(fixture.status).unwrap());
    let content_type = if fixture.status == 200 {
        "text/event-stream"
    } else {
        "application/json"
    };
    response = response.header("content-type", content_type);
    for (name, value) in &fixture.headers {
        response = response.header(*name, *value);
    }
    response.body(Body::from(fixture.body.clone())).unwrap()
}

/// A server answering every request with `body` (`status`, extra `headers`); the model
/// pointed at it, and what it was sent.
async fn serve(
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
) -> (ChatCompletions, Arc<Mutex<Vec<(HeaderMap, Value)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let fixture = Fixture {
        status,
        headers,
        body,
        seen: Arc::clone(&seen),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(fixture);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let model = ChatCompletions::new("gpt-4.1")
        .base_url(format!("http://{address}/v1"))
        .api_key("sk-test");
    (model, seen)
}

/// An SSE body: one `data:` event per chunk, then `data: [DONE]`.
fn sse(chunks: &[Value]) -> String {
    let mut body = String::new();
    for chunk in chunks {
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

/// A chunk with one choice (index 0) carrying `delta` and `finish_reason`.
fn chunk(delta: Value, finish_reason: Value) -> Value {
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4.1-2025-04-14",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason }],
        "usage": null,
    })
}

/// The last chunk of `stream_options: {"include_usage": true}`: `choices` empty, `usage` set
/// (`ChatCompletionStreamOptions.include_usage`; `CompletionUsage` with
/// `prompt_tokens_details.cached_tokens`).
fn usage_chunk() -> Value {
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4.1-2025-04-14",
        "choices": [],
        "usage": {
            "prompt_tokens": 82,
            "completion_tokens": 17,
            "total_tokens": 99,
            "prompt_tokens_details": { "cached_tokens": 64, "audio_tokens": 0 },
            "completion_tokens_details": { "reasoning_tokens": 0 },
        },
    })
}

fn request() -> Request {
    let tools = json!([{
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": { "location": { "type": "string" } },
                "required": ["location"],
                "additionalProperties": false,
            },
            "strict": true,
        },
    }]);
    Request::new(vec![Message::user("Weather in Paris and Bogotá?")])
        .instructions("You answer briefly.")
        .tools(ToolDefinitions::from_json(tools.to_string()))
        .settings(Settings::new().max_output_tokens(300))
}

async fn events(model: &ChatCompletions, request: Request) -> Vec<Result<StreamEvent, ModelError>> {
    model.stream(request).await.unwrap().collect().await
}

// API reference, Chat Completions, "Create chat completion", example "Streaming": content
// arrives in `delta.content` pieces, the role in the first delta, `finish_reason: "stop"` in the
// last choice, then (with `include_usage`) the usage chunk and `data: [DONE]`.
#[tokio::test]
async fn streamed_text_arrives_in_deltas_with_usage_from_the_last_chunk() {
    let body = sse(&[
        chunk(
            json!({ "role": "assistant", "content": "", "refusal": null }),
            Value::Null,
        ),
        chunk(json!({ "content": "Sunny in " }), Value::Null),
        chunk(json!({ "content": "Paris." }), Value::Null),
        chunk(json!({}), json!("stop")),
        usage_chunk(),
    ]);
    let (model, seen) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Sunny in ", "Paris."]);
    let Some(Ok(StreamEvent::Completed(response))) = events.last() else {
        panic!("the stream completes: {events:?}");
    };
    assert_eq!(response.message.text, "Sunny in Paris.");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.model, "gpt-4.1-2025-04-14");
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 82,
            cached_input_tokens: 64,
            cache_write_input_tokens: 0,
            output_tokens: 17
        })
    );

    // The request as "Create chat completion" documents its body.
    let (headers, body) = seen.lock().unwrap().remove(0);
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(body["model"], "gpt-4.1");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({ "include_usage": true }));
    assert_eq!(body["max_completion_tokens"], 300);
    assert_eq!(
        body["messages"][0],
        json!({ "role": "system", "content": "You answer briefly." })
    );
    assert_eq!(
        body["messages"][1]["content"],
        "Weather in Paris and Bogotá?"
    );
    assert_eq!(body["tools"][0]["function"]["strict"], true);
    assert!(
        body.get("tool_choice").is_none(),
        "auto is the default: {body}"
    );
}

// Function calling guide, "Streaming": each call's first delta carries `index`, `id`, `type`
// and `function.name` with empty `arguments`; later deltas carry only `index` and
// `function.arguments` pieces. With parallel function calling, pieces of several indexes
// follow one another; the last choice has `finish_reason: "tool_calls"`.
#[tokio::test]
async fn parallel_tool_calls_are_assembled_from_split_arguments() {
    let first = |index: usize, id: &str| {
        json!({ "tool_calls": [{
            "index": index, "id": id, "type": "function",
            "function": { "name": "get_weather", "arguments": "" },
        }]})
    };
    let piece = |index: usize, text: &str| json!({ "tool_calls": [{ "index": index, "function": { "arguments": text } }] });
    let body = sse(&[
        chunk(json!({ "role": "assistant", "content": null }), Value::Null),
        chunk(first(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA"), Value::Null),
        chunk(piece(0, "{\"lo"), Value::Null),
        chunk(piece(0, "cation\": \"Par"), Value::Null),
        chunk(first(1, "call_ABCDEFGHIJKLMNOPQRSTUVWX"), Value::Null),
        chunk(piece(1, "{\"location\""), Value::Null),
        chunk(piece(0, "is\"}"), Value::Null),
        chunk(piece(1, ": \"Bogotá\"}"), Value::Null),
        chunk(json!({}), json!("tool_calls")),
        usage_chunk(),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallStart { index, name, .. }) => Some((*index, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [(0, "get_weather".into()), (1, "get_weather".into())]
    );
    let done: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallDone(call)) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(done.len(), 2);
    assert_eq!(done[0].call_id, "call_DdmO9pD3xa9XTPNJ32zg2hcA");
    assert_eq!(done[0].arguments, r#"{"location": "Paris"}"#);
    assert_eq!(done[1].arguments, r#"{"location": "Bogotá"}"#);
    let Some(Ok(StreamEvent::Completed(response))) = events.last() else {
        panic!("the stream completes: {events:?}");
    };
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.message.tool_calls, done);
}

// `ChatCompletionMessageToolCallChunk.index` is the server's number for the call, any integer:
// calls are assembled by it, whatever it is, and a call's first piece names it or the stream is
// refused. (An index once sized a vector: `1e12` aborted the process.)
#[tokio::test]
async fn a_tool_call_index_is_a_key_not_a_size() {
    let huge = 1_000_000_000_000_usize;
    let body = sse(&[
        chunk(
            json!({ "tool_calls": [{
                "index": huge, "id": "call_far", "type": "function",
                "function": { "name": "get_weather", "arguments": "{\"location\"" },
            }]}),
            Value::Null,
        ),
        chunk(
            json!({ "tool_calls": [{ "index": huge, "function": { "arguments": ": \"Paris\"}" } }] }),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let response = complete(&model, request()).await.unwrap();
    assert_eq!(response.message.tool_calls.len(), 1);
    assert_eq!(response.message.tool_calls[0].call_id, "call_far");
    assert_eq!(
        response.message.tool_calls[0].arguments,
        r#"{"location": "Paris"}"#
    );

    for index in [json!(huge), json!(u64::MAX)] {
        let bare = sse(&[chunk(
            json!({ "tool_calls": [{ "index": index, "function": { "arguments": "{}" } }] }),
            json!("tool_calls"),
        )]);
        let (model, _) = serve(200, vec![], bare).await;
        let error = complete(&model, request()).await.unwrap_err();
        assert!(
            matches!(&error, ModelError::Protocol(m) if m.contains("began without its id and name")),
            "{error:?}"
        );
    }
}

// Structured Outputs guide, "Refusals": a refusal arrives in `delta.refusal` (not `content`),
// and `ChatCompletionStreamResponseDelta.refusal` documents it for streamed chunks.
#[tokio::test]
async fn a_refusal_is_reported_apart_from_text() {
    let body = sse(&[
        chunk(
            json!({ "role": "assistant", "content": null, "refusal": "" }),
            Value::Null,
        ),
        chunk(json!({ "refusal": "I'm sorry, I can't " }), Value::Null),
        chunk(json!({ "refusal": "help with that." }), Value::Null),
        chunk(json!({}), json!("stop")),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let response = complete(&model, request()).await.unwrap();
    assert_eq!(
        response.message.refusal.as_deref(),
        Some("I'm sorry, I can't help with that.")
    );
    assert!(response.message.text.is_empty());
    assert!(response.usage.is_none(), "no usage chunk was sent");
}

// Error codes guide, "API errors": 429 "Rate limit reached for requests" with the error object
// `{"error": {"message", "type", "param", "code"}}`; rate limits guide, "Rate limits in
// headers", and the `Retry-After` header.
#[tokio::test]
async fn a_rate_limit_is_an_http_error_with_its_code_and_retry_after() {
    let body = json!({ "error": {
        "message": "Rate limit reached for gpt-4.1 in organization org-123 on requests per min (RPM): Limit 500, Used 500, Requested 1.",
        "type": "requests",
        "param": null,
        "code": "rate_limit_exceeded",
    }});
    let (model, _) = serve(
        429,
        vec![
            ("retry-after", "2"),
            ("x-ratelimit-remaining-requests", "0"),
        ],
        body.to_string(),
    )
    .await;
    let Err(error) = model.stream(request()).await else {
        panic!("a 429 fails the request");
    };
    let ModelError::Http {
        status,
        message,
        code,
        retry_after,
    } = error
    else {
        panic!("an HTTP error: {error:?}");
    };
    assert_eq!(status, 429);
    assert!(message.starts_with("Rate limit reached"), "{message}");
    assert_eq!(code.as_deref(), Some("rate_limit_exceeded"));
    assert_eq!(retry_after, Some(Duration::from_secs(2)));
}

// Error codes guide, "API errors": 401 "Invalid Authentication" / "Incorrect API key
// provided", `type: "invalid_request_error"`, `code: "invalid_api_key"`.
#[tokio::test]
async fn a_wrong_key_is_an_http_error_with_the_providers_message() {
    let body = json!({ "error": {
        "message": "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_api_key",
    }});
    let (model, _) = serve(401, vec![], body.to_string()).await;
    let error = complete(&model, request()).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::Http { status: 401, code: Some(code), .. } if code == "invalid_api_key"),
        "{error:?}"
    );
    assert!(error.to_string().contains("Incorrect API key"), "{error}");
}

// `CreateChatCompletionStreamResponse.usage`, the note: "If the stream is interrupted or
// cancelled, you may not receive the final usage chunk". A stream cut in the middle of a tool
// call's arguments must not hand the loop a half-parsed call.
#[tokio::test]
async fn a_stream_cut_mid_call_fails_without_completing_the_call() {
    let cut = chunk(
        json!({ "tool_calls": [{ "index": 0, "id": "call_1", "type": "function",
            "function": { "name": "get_weather", "arguments": "{\"loc" } }] }),
        Value::Null,
    );
    let body = format!("data: {cut}\n\n");
    let (model, _) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::ToolCallDone(_)))),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(Err(ModelError::Transport(_)))),
        "{events:?}"
    );
}

// OpenAI-compatible servers (vLLM's and llama.cpp's) report a failure inside a started stream
// as a `data:` event holding the same error object as an error response.
#[tokio::test]
async fn an_error_inside_the_stream_fails_it() {
    let error = json!({ "error": {
        "message": "The server had an error while processing your request.",
        "type": "server_error",
        "code": null,
    }});
    let body = sse(&[chunk(json!({ "content": "Sun" }), Value::Null), error]);
    let (model, _) = serve(200, vec![], body).await;
    let error = complete(&model, request()).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Provider {
            message: "The server had an error while processing your request.".into(),
            code: Some("server_error".into()),
        }
    );
}

// Compatible servers that only know `max_tokens` (the field "Create chat completion" marks
// deprecated in favour of `max_completion_tokens`).
#[tokio::test]
async fn legacy_servers_get_max_tokens() {
    let body = sse(&[chunk(json!({ "content": "ok" }), json!("stop"))]);
    let (model, seen) = serve(200, vec![], body).await;
    let model = model.legacy_max_tokens();
    complete(&model, request()).await.unwrap();
    let (_, body) = seen.lock().unwrap().remove(0);
    assert_eq!(body["max_tokens"], 300);
    assert!(body.get("max_completion_tokens").is_none());
}
