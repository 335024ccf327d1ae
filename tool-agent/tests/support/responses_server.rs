//! The loopback server of the Responses adapter's tests and the documented events it answers
//! with: OpenAI's API reference, "Streaming events", and the response object of "Responses".

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::{Value, json};
use toolwright_agent::{
    Message, Model, ModelError, Request, Responses, Settings, StreamEvent, ToolDefinitions, ToolUse,
};

/// One answer of the server: status, extra headers, body.
pub(crate) type Answer = (u16, Vec<(&'static str, &'static str)>, String);

/// What the server answers, request by request (the last answer repeats), and what it was sent.
#[derive(Clone)]
struct Fixture {
    answers: Arc<Vec<Answer>>,
    seen: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

async fn answer(State(fixture): State<Fixture>, headers: HeaderMap, body: String) -> Response {
    let json: Value = serde_json::from_str(&body).expect("the adapter sends JSON");
    let n = {
        let mut seen = fixture.seen.lock().unwrap();
        seen.push((headers, json));
        seen.len() - 1
    };
    let (status, headers, body) = &fixture.answers[n.min(fixture.answers.len() - 1)];
    let content_type = if *status == 200 {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut response = Response::builder()
        .status(StatusCode::from_u16(*status).unwrap())
        .header("content-type", content_type);
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    response.body(Body::from(body.clone())).unwrap()
}

pub(crate) type Seen = Arc<Mutex<Vec<(HeaderMap, Value)>>>;

/// A server answering with `answers` in turn; the model pointed at it, and what it was sent.
pub(crate) async fn serve_all(answers: Vec<Answer>) -> (Responses, Seen) {
    serve_as("gpt-5", answers).await
}

/// [`serve_all`] with the model named `name`.
pub(crate) async fn serve_as(name: &str, answers: Vec<Answer>) -> (Responses, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let fixture = Fixture {
        answers: Arc::new(answers),
        seen: Arc::clone(&seen),
    };
    let app = Router::new()
        .route("/v1/responses", post(answer))
        .with_state(fixture);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let model = Responses::new(name)
        .base_url(format!("http://{address}/v1"))
        .api_key("sk-test");
    (model, seen)
}

/// A server answering every request with the SSE `body`.
pub(crate) async fn serve(body: String) -> (Responses, Seen) {
    serve_all(vec![(200, vec![], body)]).await
}

/// An SSE body: each event as `event: <type>` and `data: <event>`, numbered in order
/// (`sequence_number`), as "Streaming events" documents them.
pub(crate) fn sse(events: &[Value]) -> String {
    let mut body = String::new();
    for (n, event) in events.iter().enumerate() {
        let mut event = event.clone();
        event["sequence_number"] = json!(n);
        body.push_str(&format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap()
        ));
    }
    body
}

/// The response object (`Response`) of the lifecycle events, with `status`, `output` and
/// `usage` (`ResponseUsage` with `input_tokens_details.cached_tokens`).
pub(crate) fn response_object(status: &str, output: Value, usage: Value) -> Value {
    json!({
        "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41",
        "object": "response",
        "created_at": 1741476777,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "max_output_tokens": null,
        "model": "gpt-5-2025-08-07",
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": { "effort": null, "summary": null },
        "store": false,
        "temperature": 1,
        "text": { "format": { "type": "text" } },
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1,
        "truncation": "disabled",
        "usage": usage,
        "user": null,
        "metadata": {},
    })
}

pub(crate) fn usage() -> Value {
    json!({
        "input_tokens": 328,
        "input_tokens_details": { "cached_tokens": 256, "cache_write_tokens": 0 },
        "output_tokens": 52,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": 380,
    })
}

pub(crate) fn created() -> Value {
    json!({ "type": "response.created", "response": response_object("in_progress", json!([]), Value::Null) })
}

pub(crate) fn in_progress() -> Value {
    json!({ "type": "response.in_progress", "response": response_object("in_progress", json!([]), Value::Null) })
}

pub(crate) fn completed(output: Value) -> Value {
    json!({ "type": "response.completed", "response": response_object("completed", output, usage()) })
}

pub(crate) fn added(output_index: usize, item: Value) -> Value {
    json!({ "type": "response.output_item.added", "output_index": output_index, "item": item })
}

pub(crate) fn done(output_index: usize, item: Value) -> Value {
    json!({ "type": "response.output_item.done", "output_index": output_index, "item": item })
}

pub(crate) fn text_delta(output_index: usize, delta: &str) -> Value {
    json!({ "type": "response.output_text.delta", "item_id": "msg_123", "output_index": output_index,
        "content_index": 0, "delta": delta, "logprobs": [] })
}

/// An assistant `message` output item (`OutputMessage`) with one `output_text` part.
pub(crate) fn message_item(status: &str, text: &str) -> Value {
    let content = if status == "in_progress" {
        json!([])
    } else {
        json!([{ "type": "output_text", "text": text, "annotations": [] }])
    };
    json!({ "id": "msg_123", "type": "message", "status": status, "role": "assistant", "content": content })
}

/// A `function_call` output item (`FunctionToolCall`).
pub(crate) fn call_item(id: &str, call_id: &str, status: &str, arguments: &str) -> Value {
    json!({ "id": id, "type": "function_call", "status": status, "call_id": call_id,
        "name": "get_weather", "arguments": arguments })
}

pub(crate) fn arguments_delta(output_index: usize, item_id: &str, delta: &str) -> Value {
    json!({ "type": "response.function_call_arguments.delta", "item_id": item_id,
        "output_index": output_index, "delta": delta })
}

pub(crate) fn arguments_done(output_index: usize, item_id: &str, arguments: &str) -> Value {
    json!({ "type": "response.function_call_arguments.done", "item_id": item_id,
        "name": "get_weather", "output_index": output_index, "arguments": arguments })
}

/// A `reasoning` output item (`ReasoningItem`); `encrypted_content` as `include:
/// ["reasoning.encrypted_content"]` returns it.
pub(crate) fn reasoning_item(encrypted: &str) -> Value {
    json!({ "id": "rs_6820f383d7c08191846711c5df8233bc", "type": "reasoning", "summary": [],
        "encrypted_content": encrypted, "status": "completed" })
}

/// The flat function tool of the Responses API ("Function calling", "Defining functions").
pub(crate) fn tools() -> ToolDefinitions {
    ToolDefinitions::from_json(
        json!([{
            "type": "function",
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": { "location": { "type": "string" } },
                "required": ["location"],
                "additionalProperties": false,
            },
            "strict": true,
        }, { "type": "web_search" }])
        .to_string(),
    )
}

pub(crate) fn request() -> Request {
    Request::new(vec![Message::user("Weather in Paris and Bogotá?")])
        .instructions("You answer briefly.")
        .tools(tools())
        .settings(Settings::new().max_output_tokens(300))
}

pub(crate) async fn events(
    model: &Responses,
    request: Request,
) -> Vec<Result<StreamEvent, ModelError>> {
    model.stream(request).await.unwrap().collect().await
}

pub(crate) fn completed_response(
    events: &[Result<StreamEvent, ModelError>],
) -> toolwright_agent::Response {
    match events.last() {
        Some(Ok(StreamEvent::Completed(response))) => response.clone(),
        _ => panic!("the stream completes: {events:?}"),
    }
}

pub(crate) fn calls_done(events: &[Result<StreamEvent, ModelError>]) -> Vec<ToolUse> {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallDone(call)) => Some(call.clone()),
            _ => None,
        })
        .collect()
}

/// The parallel calls of "Function calling", "Streaming": two `function_call` items, their
/// arguments in pieces, each item done, then the response.
pub(crate) fn two_calls() -> String {
    sse(&[
        created(),
        added(
            0,
            call_item("fc_1", "call_DdmO9pD3xa9XTPNJ32zg2hcA", "in_progress", ""),
        ),
        arguments_delta(0, "fc_1", "{\"lo"),
        arguments_delta(0, "fc_1", "cation\":\"Par"),
        arguments_delta(0, "fc_1", "is\"}"),
        arguments_done(0, "fc_1", "{\"location\":\"Paris\"}"),
        done(
            0,
            call_item(
                "fc_1",
                "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                "completed",
                "{\"location\":\"Paris\"}",
            ),
        ),
        added(
            1,
            call_item("fc_2", "call_ABCDEFGHIJKLMNOPQRSTUVWX", "in_progress", ""),
        ),
        arguments_delta(1, "fc_2", "{\"location\""),
        arguments_delta(1, "fc_2", ":\"Bogotá\"}"),
        arguments_done(1, "fc_2", "{\"location\":\"Bogotá\"}"),
        done(
            1,
            call_item(
                "fc_2",
                "call_ABCDEFGHIJKLMNOPQRSTUVWX",
                "completed",
                "{\"location\":\"Bogotá\"}",
            ),
        ),
        completed(json!([
            call_item(
                "fc_1",
                "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                "completed",
                "{\"location\":\"Paris\"}"
            ),
            call_item(
                "fc_2",
                "call_ABCDEFGHIJKLMNOPQRSTUVWX",
                "completed",
                "{\"location\":\"Bogotá\"}"
            ),
        ])),
    ])
}
