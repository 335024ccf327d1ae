//! The Anthropic adapter against a loopback server that answers as Anthropic documents: named
//! SSE events (`event:` and `data:` carrying the same `type`), text and tool inputs streamed as
//! deltas, thinking blocks with their signatures, server tools' blocks, refusals, cache usage,
//! error bodies and error events.
//!
//! Each fixture names the documentation page and section it follows: "Streaming Messages"
//! (build-with-claude/streaming), the "Messages" API reference (api/messages), "Prompt caching"
//! (build-with-claude/prompt-caching), "Extended thinking" (build-with-claude/extended-thinking),
//! "Handling stop reasons", "Streaming refusals", "Errors" (api/errors), "Web search tool".

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
    Anthropic, AssistantMessage, FinishReason, Message, Model, ModelError, Request, Settings,
    StreamEvent, ToolDefinitions, ToolUse, Usage, complete,
};
use toolwright_core::ModelOutput;

type Seen = Arc<Mutex<Vec<(HeaderMap, Value)>>>;

/// What the server answers, and what it was sent.
#[derive(Clone)]
struct Fixture {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
    seen: Seen,
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

/// A server answering every request with `body` (`status`, extra `headers`): its base URL,
/// and what it was sent.
async fn server(
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
) -> (String, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let fixture = Fixture {
        status,
        headers,
        body,
        seen: Arc::clone(&seen),
    };
    let app = Router::new()
        .route("/v1/messages", post(answer))
        .with_state(fixture);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), seen)
}

/// [`server`], and a model with an API key pointed at it.
async fn serve(
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
) -> (Anthropic, Seen) {
    let (url, seen) = server(status, headers, body).await;
    let model = Anthropic::new("claude-sonnet-4-5")
        .base_url(url)
        .api_key("sk-ant-test");
    (model, seen)
}

/// The shortest complete answer: `message_start`, `message_delta`, `message_stop`.
fn empty_answer() -> String {
    sse(&[
        message_start(plain_usage()),
        message_delta("end_turn", 1),
        message_stop(),
    ])
}

/// An SSE body: each event as `event: <type>` and `data: <json>`, as "Streaming Messages",
/// "Event types" describes them.
fn sse(events: &[Value]) -> String {
    let mut body = String::new();
    for event in events {
        let kind = event["type"].as_str().expect("every event has a type");
        body.push_str(&format!("event: {kind}\ndata: {event}\n\n"));
    }
    body
}

/// `message_start` with `usage` (`input_tokens` after the last breakpoint, and the cache's).
fn message_start(usage: Value) -> Value {
    json!({ "type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-5-20250929",
        "stop_reason": null,
        "stop_sequence": null,
        "usage": usage,
    }})
}

fn plain_usage() -> Value {
    json!({ "input_tokens": 472, "output_tokens": 2 })
}

fn block_start(index: usize, block: Value) -> Value {
    json!({ "type": "content_block_start", "index": index, "content_block": block })
}

fn delta(index: usize, delta: Value) -> Value {
    json!({ "type": "content_block_delta", "index": index, "delta": delta })
}

fn text(index: usize, text: &str) -> Value {
    delta(index, json!({ "type": "text_delta", "text": text }))
}

fn input(index: usize, partial_json: &str) -> Value {
    delta(
        index,
        json!({ "type": "input_json_delta", "partial_json": partial_json }),
    )
}

fn block_stop(index: usize) -> Value {
    json!({ "type": "content_block_stop", "index": index })
}

fn message_delta(stop_reason: &str, output_tokens: u64) -> Value {
    json!({
        "type": "message_delta",
        "delta": { "stop_reason": stop_reason, "stop_sequence": null },
        "usage": { "output_tokens": output_tokens },
    })
}

fn message_stop() -> Value {
    json!({ "type": "message_stop" })
}

fn ping() -> Value {
    json!({ "type": "ping" })
}

/// The "How to implement tool use" guide's weather tool, as the registry exports it.
fn weather_tool() -> Value {
    json!({
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "input_schema": {
            "type": "object",
            "properties": { "location": { "type": "string" } },
            "required": ["location"],
        },
    })
}

fn tools() -> ToolDefinitions {
    let time = json!({
        "name": "get_time",
        "description": "Get the current time in a given time zone",
        "input_schema": { "type": "object", "properties": { "timezone": { "type": "string" } } },
    });
    ToolDefinitions::from_json(json!([time, weather_tool()]).to_string())
}

fn request() -> Request {
    Request::new(vec![Message::user("What's the weather like in Paris?")])
        .instructions("You answer briefly.")
        .tools(tools())
}

async fn events(model: &Anthropic, request: Request) -> Vec<Result<StreamEvent, ModelError>> {
    model.stream(request).await.unwrap().collect().await
}

fn completed(events: &[Result<StreamEvent, ModelError>]) -> &toolwright_agent::Response {
    match events.last() {
        Some(Ok(StreamEvent::Completed(response))) => response,
        _ => panic!("the stream completes: {events:?}"),
    }
}

fn calls_done(events: &[Result<StreamEvent, ModelError>]) -> Vec<ToolUse> {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallDone(call)) => Some(call.clone()),
            _ => None,
        })
        .collect()
}

// "Streaming Messages", "Basic streaming request": `message_start`, a text block streamed as
// `text_delta`s with a `ping` among them, `message_delta` (`stop_reason: "end_turn"`, the
// cumulative `output_tokens`), `message_stop`. "Prompt caching", "Tracking cache performance":
// `cache_read_input_tokens` and `cache_creation_input_tokens` beside `input_tokens`, which
// counts only the tokens after the last breakpoint; the prompt is their sum.
#[tokio::test]
async fn streamed_text_arrives_in_deltas_with_the_cache_usage_normalised() {
    let body = sse(&[
        message_start(json!({
            "input_tokens": 21,
            "cache_creation_input_tokens": 188,
            "cache_read_input_tokens": 1800,
            "output_tokens": 1,
        })),
        block_start(0, json!({ "type": "text", "text": "" })),
        ping(),
        text(0, "Sunny in "),
        text(0, "Paris."),
        block_stop(0),
        message_delta("end_turn", 15),
        message_stop(),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Sunny in ", "Paris."]);
    let usage = Usage {
        input_tokens: 21 + 188 + 1800,
        cached_input_tokens: 1800,
        cache_write_input_tokens: 188,
        output_tokens: 15,
    };
    assert!(
        events.contains(&Ok(StreamEvent::Usage(usage))),
        "{events:?}"
    );
    let response = completed(&events);
    assert_eq!(response.message.text, "Sunny in Paris.");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.usage, Some(usage));
    assert_eq!(response.model, "claude-sonnet-4-5-20250929");
    assert_eq!(response.id, "msg_01XFDUDYJgAACzvnptvVoYEL");
    assert!(response.message.items.is_empty());
}

// "Streaming Messages", "Streaming request with tool use" and "Input JSON deltas": the
// `tool_use` block starts with `id`, `name` and an empty `input`; `input_json_delta`s carry
// `partial_json` pieces, cut anywhere (here inside a key and inside a string), "the final
// `tool_use.input` is always an object"; `stop_reason: "tool_use"`.
#[tokio::test]
async fn a_tool_calls_input_split_mid_token_is_assembled() {
    let body = sse(&[
        message_start(plain_usage()),
        block_start(0, json!({ "type": "text", "text": "" })),
        text(0, "Okay, let's check the weather for Paris."),
        block_stop(0),
        block_start(
            1,
            json!({ "type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "name": "get_weather", "input": {} }),
        ),
        input(1, ""),
        input(1, "{\"loc"),
        input(1, "ation\": \"Par"),
        input(1, "is, France\"}"),
        block_stop(1),
        message_delta("tool_use", 89),
        message_stop(),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    assert!(events.contains(&Ok(StreamEvent::ToolCallStart {
        index: 0,
        call_id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
        name: "get_weather".into(),
    })));
    let pieces: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallDelta {
                index: 0,
                arguments,
            }) => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(pieces, ["{\"loc", "ation\": \"Par", "is, France\"}"]);
    let done = calls_done(&events);
    assert_eq!(
        done,
        [ToolUse::new(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "get_weather",
            r#"{"location": "Paris, France"}"#
        )]
    );
    let response = completed(&events);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.message.tool_calls, done);
    assert_eq!(
        response.message.text,
        "Okay, let's check the weather for Paris."
    );
}

// "Parallel tool use" (the tool use guide): one response may hold several `tool_use` blocks
// after its text. The call index counts calls only, while the block index also counts the
// text block before them.
#[tokio::test]
async fn parallel_calls_after_text_are_numbered_among_the_calls() {
    let call = |index: usize, id: &str, name: &str| {
        block_start(
            index,
            json!({ "type": "tool_use", "id": id, "name": name, "input": {} }),
        )
    };
    let body = sse(&[
        message_start(plain_usage()),
        block_start(0, json!({ "type": "text", "text": "" })),
        text(0, "I'll check both."),
        block_stop(0),
        call(1, "toolu_01A", "get_weather"),
        input(1, "{\"location\": \"Paris\"}"),
        block_stop(1),
        call(2, "toolu_01B", "get_time"),
        input(2, "{\"timezone\": \"Europe/Paris\"}"),
        block_stop(2),
        message_delta("tool_use", 120),
        message_stop(),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    let starts: Vec<(usize, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallStart { index, call_id, .. }) => {
                Some((*index, call_id.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(0, "toolu_01A"), (1, "toolu_01B")]);
    assert!(events.contains(&Ok(StreamEvent::ToolCallDelta {
        index: 1,
        arguments: "{\"timezone\": \"Europe/Paris\"}".into(),
    })));
    let response = completed(&events);
    let names: Vec<&str> = response
        .message
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["get_weather", "get_time"]);
}

// "Extended thinking", "Streaming thinking": a `thinking` block streamed as `thinking_delta`s,
// its signature in a `signature_delta` just before its `content_block_stop`. "Extended
// thinking", "Preserving thinking blocks": during tool use the thinking blocks of the last
// assistant turn go back to the API unchanged, before the `tool_use` blocks.
#[tokio::test]
async fn a_thinking_block_is_kept_and_sent_back_first() {
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds";
    let body = sse(&[
        message_start(plain_usage()),
        block_start(
            0,
            json!({ "type": "thinking", "thinking": "", "signature": "" }),
        ),
        delta(
            0,
            json!({ "type": "thinking_delta", "thinking": "The user wants Paris. " }),
        ),
        delta(
            0,
            json!({ "type": "thinking_delta", "thinking": "I'll call get_weather." }),
        ),
        delta(
            0,
            json!({ "type": "signature_delta", "signature": signature }),
        ),
        block_stop(0),
        block_start(
            1,
            json!({ "type": "tool_use", "id": "toolu_01T", "name": "get_weather", "input": {} }),
        ),
        input(1, "{\"location\": \"Paris\"}"),
        block_stop(1),
        message_delta("tool_use", 140),
        message_stop(),
    ]);
    let (model, seen) = serve(200, vec![], body).await;
    let settings = Settings::new().extra(
        "thinking",
        json!({ "type": "enabled", "budget_tokens": 2048 }),
    );
    let first = request().settings(settings.clone());
    let response = complete(&model, first).await.unwrap();
    let thinking = json!({
        "type": "thinking",
        "thinking": "The user wants Paris. I'll call get_weather.",
        "signature": signature,
    });
    let items: Vec<&Value> = response.message.items_of("anthropic").collect();
    assert_eq!(items, [&thinking]);
    assert!(response.message.text.is_empty());

    // The next request: the assistant message as the loop stores it, then the call's result.
    let next = Request::new(vec![
        Message::user("What's the weather like in Paris?"),
        Message::Assistant(response.message.clone()),
        Message::ToolResult {
            usage: None,
            call_id: "toolu_01T".into(),
            name: "get_weather".into(),
            output: ModelOutput::text("15 degrees, sunny"),
            is_error: false,
            error: None,
        },
    ])
    .tools(tools())
    .settings(settings);
    complete(&model, next).await.unwrap();
    let (_, body) = seen.lock().unwrap().remove(1);
    assert_eq!(body["thinking"]["budget_tokens"], 2048);
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0], thinking);
    assert_eq!(
        assistant["content"][1],
        json!({ "type": "tool_use", "id": "toolu_01T", "name": "get_weather",
            "input": { "location": "Paris" } })
    );
    assert_eq!(
        body["messages"][2]["content"][0]["tool_use_id"],
        "toolu_01T"
    );
}

// The "Messages" API reference, "Create a Message": the `anthropic-version` and `x-api-key`
// headers, `max_tokens` (required), `system` as text blocks, `stream`, `stop_sequences`.
// "Prompt caching", "Structuring your prompt" and "Caching tools and conversations": the cache
// prefix runs tools → system → messages; breakpoints (`cache_control: {"type": "ephemeral"}`,
// at most four) on the last tool, the last system block and the last block of the last user
// message cache all three.
#[tokio::test]
async fn the_request_follows_the_messages_api_with_three_cache_breakpoints() {
    let (model, seen) = serve(200, vec![], empty_answer()).await;
    let mut settings = Settings::new().temperature(0.2);
    settings.stop = vec!["\n\nHuman:".into()];
    complete(
        &model.beta("token-efficient-tools-2025-02-19"),
        request().settings(settings),
    )
    .await
    .unwrap();
    let (headers, body) = seen.lock().unwrap().remove(0);
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(headers["x-api-key"], "sk-ant-test");
    assert!(headers.get("authorization").is_none());
    assert_eq!(
        headers["anthropic-beta"],
        "token-efficient-tools-2025-02-19"
    );
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["max_tokens"], 4096,
        "the default when settings leave it"
    );
    assert_eq!(body["stop_sequences"], json!(["\n\nHuman:"]));
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    let ephemeral = json!({ "type": "ephemeral" });
    assert_eq!(
        body["system"],
        json!([{ "type": "text", "text": "You answer briefly.", "cache_control": ephemeral }])
    );
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(body["tools"][1]["cache_control"], ephemeral);
    assert_eq!(body["tools"][1]["name"], "get_weather");
    assert_eq!(
        body["messages"],
        json!([{ "role": "user", "content": [{
            "type": "text",
            "text": "What's the weather like in Paris?",
            "cache_control": ephemeral,
        }]}])
    );
    assert!(body.get("tool_choice").is_none(), "auto is the default");
    assert_eq!(body.to_string().matches("cache_control").count(), 3);
}

// Anthropic's SDKs also authenticate with a bearer token (`auth_token`, read from
// `ANTHROPIC_AUTH_TOKEN`) sent as `Authorization: Bearer`; `Settings::max_output_tokens` sets
// `max_tokens`; without caching no `cache_control` is sent.
#[tokio::test]
async fn a_bearer_token_and_no_cache_send_neither_key_nor_breakpoints() {
    let (url, seen) = server(200, vec![], empty_answer()).await;
    let model = Anthropic::new("claude-sonnet-4-5")
        .base_url(url)
        .auth_token("oauth-token")
        .cache(false)
        .max_tokens_default(1024);
    let settings = Settings::new().max_output_tokens(300);
    complete(&model, request().settings(settings))
        .await
        .unwrap();
    let (headers, body) = seen.lock().unwrap().remove(0);
    assert_eq!(headers["authorization"], "Bearer oauth-token");
    assert!(headers.get("x-api-key").is_none());
    assert_eq!(body["max_tokens"], 300);
    assert!(!body.to_string().contains("cache_control"), "{body}");
}

// "How to implement tool use", "Handling tool use and tool result content blocks": every
// result of a turn goes in the next `user` message as `tool_result` blocks (`tool_use_id`,
// `content`, `is_error`), before any text of that message ("tool result blocks must come
// first"); images in a result are `image` blocks with a base64 source inside its `content`.
#[tokio::test]
async fn tool_results_merge_into_one_user_message_with_context_after_them() {
    let (model, seen) = serve(200, vec![], empty_answer()).await;
    let calls = AssistantMessage::text("Checking both.")
        .with_call(ToolUse::new(
            "toolu_01A",
            "get_weather",
            r#"{"location":"Paris"}"#,
        ))
        .with_call(ToolUse::new("toolu_01B", "get_time", r#"{"timezone":"#));
    let conversation = vec![
        Message::user("Weather and time in Paris?"),
        Message::Assistant(calls),
        Message::ToolResult {
            usage: None,
            call_id: "toolu_01A".into(),
            name: "get_weather".into(),
            output: ModelOutput::content([
                toolwright_core::ContentPart::text("15 degrees"),
                toolwright_core::ContentPart::file("iVBORw0KGgo=", "image/png"),
            ]),
            is_error: false,
            error: None,
        },
        Message::ToolResult {
            usage: None,
            call_id: "toolu_01B".into(),
            name: "get_time".into(),
            output: ModelOutput::text("the arguments are not valid JSON"),
            is_error: true,
            error: None,
        },
        Message::context("New tool available: publish"),
    ];
    complete(&model, Request::new(conversation).tools(tools()))
        .await
        .unwrap();
    let (_, body) = seen.lock().unwrap().remove(0);
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&Value> = messages.iter().map(|m| &m["role"]).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    // Invalid arguments go back as an empty input; the error result says what went wrong.
    assert_eq!(messages[1]["content"][2]["input"], json!({}));
    let last = messages[2]["content"].as_array().unwrap();
    assert_eq!(last.len(), 3);
    assert_eq!(last[0]["type"], "tool_result");
    assert_eq!(last[0]["tool_use_id"], "toolu_01A");
    assert_eq!(
        last[0]["content"],
        json!([
            { "type": "text", "text": "15 degrees" },
            { "type": "image", "source": {
                "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=" } },
        ])
    );
    assert_eq!(
        last[1],
        json!({ "type": "tool_result", "tool_use_id": "toolu_01B",
            "content": "the arguments are not valid JSON", "is_error": true })
    );
    assert_eq!(
        last[2],
        json!({ "type": "text", "text": "New tool available: publish",
            "cache_control": { "type": "ephemeral" } })
    );
}

// "Streaming refusals": when the streaming classifiers intervene the stream ends with
// `stop_reason: "refusal"`, after whatever text was already sent; the refused turn must be
// removed or changed before the conversation goes on.
#[tokio::test]
async fn a_refusal_finishes_as_content_filter_and_is_not_sent_back() {
    let body = sse(&[
        message_start(plain_usage()),
        block_start(0, json!({ "type": "text", "text": "" })),
        text(0, "Here is how to"),
        block_stop(0),
        message_delta("refusal", 4),
        message_stop(),
    ]);
    let (model, seen) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::RefusalDelta(_)))),
        "{events:?}"
    );
    let response = completed(&events).clone();
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
    assert!(response.message.refusal.is_some());
    assert_eq!(response.message.text, "Here is how to");

    let next = Request::new(vec![
        Message::user("How do I do the bad thing?"),
        Message::Assistant(response.message),
        Message::user("Then tell me about the weather."),
    ]);
    complete(&model, next).await.unwrap();
    let (_, body) = seen.lock().unwrap().remove(1);
    assert_eq!(body["messages"].as_array().unwrap().len(), 1, "{body}");
    assert!(!body.to_string().contains("Here is how to"));
}

// "Errors", "HTTP errors": 429 `rate_limit_error` in the documented shape
// (`{"type": "error", "error": {"type", "message"}, "request_id"}`); "Rate limits", "Response
// headers": `retry-after` says how many seconds to wait.
#[tokio::test]
async fn a_rate_limit_is_an_http_error_with_its_type_and_retry_after() {
    let body = json!({
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed the rate limit for your organization of 50 requests per minute.",
        },
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    });
    let (model, _) = serve(
        429,
        vec![
            ("retry-after", "17"),
            ("anthropic-ratelimit-requests-remaining", "0"),
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
    assert!(message.contains("rate limit"), "{message}");
    assert_eq!(code.as_deref(), Some("rate_limit_error"));
    assert_eq!(retry_after, Some(Duration::from_secs(17)));
}

// "Errors", "HTTP errors": 529 `overloaded_error`, "the API is temporarily overloaded".
#[tokio::test]
async fn an_overloaded_api_is_an_http_529_with_its_type() {
    let body = json!({
        "type": "error",
        "error": { "type": "overloaded_error", "message": "Overloaded" },
    });
    let (model, _) = serve(529, vec![], body.to_string()).await;
    let error = complete(&model, request()).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Http {
            status: 529,
            message: "Overloaded".into(),
            code: Some("overloaded_error".into()),
            retry_after: None,
        }
    );
}

// "Streaming Messages", "Error events": an error can arrive as an `error` event after the 200,
// e.g. `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`.
#[tokio::test]
async fn an_error_event_mid_stream_fails_it() {
    let body = sse(&[
        message_start(plain_usage()),
        block_start(0, json!({ "type": "text", "text": "" })),
        text(0, "Sun"),
        json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        text(0, "ny"),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    assert_eq!(events[0], Ok(StreamEvent::TextDelta("Sun".into())));
    assert_eq!(
        events[1..],
        [Err(ModelError::Provider {
            message: "Overloaded".into(),
            code: Some("overloaded_error".into()),
        })]
    );
}

// "Streaming Messages", "Event types": every stream ends with `message_stop`. One cut in the
// middle of a call's `input_json_delta`s broke off: no call comes out of it.
#[tokio::test]
async fn a_stream_cut_mid_call_fails_without_the_call() {
    let body = sse(&[
        message_start(plain_usage()),
        block_start(
            0,
            json!({ "type": "tool_use", "id": "toolu_01T", "name": "get_weather", "input": {} }),
        ),
        input(0, "{\"location\": \"Pa"),
    ]);
    let (model, _) = serve(200, vec![], body).await;
    let events = events(&model, request()).await;
    assert!(calls_done(&events).is_empty(), "{events:?}");
    assert!(
        matches!(events.last(), Some(Err(ModelError::Transport(_)))),
        "{events:?}"
    );
}

// "Web search tool", "Streaming" and "Response": a server tool's `server_tool_use` block (its
// input streamed as `input_json_delta`s) and its `web_search_tool_result` block are content
// the client does not run but sends back with the turn; "Handling stop reasons": `pause_turn`
// when a long server-tool turn pauses.
#[tokio::test]
async fn server_tool_blocks_are_kept_and_sent_back() {
    let result = json!({
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
        "content": [{
            "type": "web_search_result",
            "title": "Paris weather",
            "url": "https://example.com/paris",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y",
            "page_age": "April 30, 2025",
        }],
    });
    let body = sse(&[
        message_start(plain_usage()),
        block_start(
            0,
            json!({ "type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                "name": "web_search", "input": {} }),
        ),
        input(0, "{\"query\": \"weather "),
        input(0, "Paris\"}"),
        block_stop(0),
        block_start(1, result.clone()),
        block_stop(1),
        message_delta("pause_turn", 50),
        message_stop(),
    ]);
    let (model, seen) = serve(200, vec![], body).await;
    let response = complete(&model, request()).await.unwrap();
    assert_eq!(
        response.finish_reason,
        FinishReason::Other("pause_turn".into())
    );
    assert!(response.message.tool_calls.is_empty());
    let items: Vec<Value> = response.message.items_of("anthropic").cloned().collect();
    assert_eq!(
        items[0],
        json!({ "type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
            "name": "web_search", "input": { "query": "weather Paris" } })
    );
    assert_eq!(items[1], result);

    let next = Request::new(vec![
        Message::user("What's the weather like in Paris?"),
        Message::Assistant(response.message),
    ]);
    complete(&model, next).await.unwrap();
    let (_, body) = seen.lock().unwrap().remove(1);
    assert_eq!(body["messages"][1]["content"], json!(items));
}
