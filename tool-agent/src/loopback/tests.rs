//! The loopback against the adapters, and each wire's events as its documentation lists them.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use sse_stream::SseStream;

use super::{LoopbackProvider, Wire};
use crate::model::{FinishReason, Model, ModelError, Request, StreamEvent, complete};
use crate::{Anthropic, ChatCompletions, Message, Reply, Responses, Usage};

fn chat(provider: &LoopbackProvider) -> ChatCompletions {
    ChatCompletions::new("gpt-4.1")
        .base_url(provider.base_url())
        .api_key("sk-test")
}

fn request() -> Request {
    Request::new(vec![Message::user("restart api, then tell me")])
}

/// The `(event name, data)` of every event of a streamed answer to `body`.
async fn raw(provider: &LoopbackProvider, body: Value) -> Vec<(Option<String>, Value)> {
    let url = format!("http://{}{}", provider.address(), provider.wire().path());
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    SseStream::from_bytes_stream(response.bytes_stream())
        .map(|sse| {
            let sse = sse.unwrap();
            let data = sse.data.unwrap_or_default();
            let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
            (sse.event, data)
        })
        .collect()
        .await
}

fn script() -> [Reply; 1] {
    [
        Reply::call("restart_service", json!({ "service": "payment-api" }))
            .and_call(
                "read_logs",
                json!({ "service": "payment-api", "lines": 20 }),
            )
            .saying("Restarting payment-api."),
    ]
}

#[tokio::test]
async fn chat_completions_get_text_and_split_calls_with_usage() {
    let provider = LoopbackProvider::start(Wire::ChatCompletions, script())
        .await
        .unwrap();
    let model = chat(&provider);
    let events: Vec<_> = model.stream(request()).await.unwrap().collect().await;
    let deltas = events
        .iter()
        .filter(|e| matches!(e, Ok(StreamEvent::ToolCallDelta { index: 1, .. })))
        .count();
    assert!(deltas > 1, "the arguments arrive in pieces: {events:?}");
    let Some(Ok(StreamEvent::Completed(response))) = events.last() else {
        panic!("the stream completes: {events:?}");
    };
    assert_eq!(response.message.text, "Restarting payment-api.");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls = &response.message.tool_calls;
    assert_eq!(calls[0].call_id, "call_loopback_1_1");
    assert_eq!(calls[1].name, "read_logs");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[1].arguments).unwrap(),
        json!({ "service": "payment-api", "lines": 20 })
    );
    assert_eq!(response.model, "gpt-4.1");
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        })
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0]["messages"][0]["content"],
        "restart api, then tell me"
    );
    assert_eq!(provider.remaining(), 0);
}

#[tokio::test]
async fn chat_completions_chunks_end_with_usage_then_done() {
    let provider = LoopbackProvider::start(Wire::ChatCompletions, [Reply::text("Hi")])
        .await
        .unwrap();
    let body = json!({ "model": "m", "stream": true, "stream_options": { "include_usage": true } });
    let events = raw(&provider, body).await;
    assert!(events.iter().all(|(name, _)| name.is_none()));
    let n = events.len();
    assert_eq!(events[n - 1].1, "[DONE]");
    assert_eq!(events[n - 2].1["choices"], json!([]));
    assert_eq!(events[n - 2].1["usage"]["prompt_tokens"], 10);
    assert_eq!(events[n - 3].1["choices"][0]["finish_reason"], "stop");
    assert_eq!(events[0].1["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(events[0].1["object"], "chat.completion.chunk");

    // Without `include_usage` there is no usage chunk.
    provider.push(Reply::text("Hi"));
    let events = raw(&provider, json!({ "model": "m", "stream": true })).await;
    assert!(events.iter().all(|(_, data)| data.get("usage").is_none()));
}

#[tokio::test]
async fn responses_events_follow_the_streaming_reference() {
    let provider = LoopbackProvider::start(Wire::Responses, script())
        .await
        .unwrap();
    assert!(provider.base_url().ends_with("/v1"));
    let events = raw(&provider, json!({ "model": "gpt-4.1", "stream": true })).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    let mut expected = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    expected.extend(["response.output_text.delta"; 4]);
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]);
    expected.extend(["response.function_call_arguments.delta"; 4]);
    expected.extend([
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
    ]);
    expected.extend(["response.function_call_arguments.delta"; 6]);
    expected.extend([
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(names, expected);
    for (position, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_deref().unwrap());
        assert_eq!(data["sequence_number"], position);
    }
    let arguments: String = events
        .iter()
        .filter(|(_, d)| d["type"] == "response.function_call_arguments.delta")
        .filter(|(_, d)| d["output_index"] == 2)
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        json!({ "service": "payment-api", "lines": 20 })
    );
    let completed = &events.last().unwrap().1["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["model"], "gpt-4.1");
    assert_eq!(completed["usage"]["input_tokens"], 10);
    assert_eq!(completed["usage"]["output_tokens"], 5);
    let output = completed["output"].as_array().unwrap();
    assert_eq!(output[0]["content"][0]["text"], "Restarting payment-api.");
    assert_eq!(output[1]["type"], "function_call");
    assert_eq!(output[1]["call_id"], "call_loopback_1_1");
    assert_eq!(output[2]["name"], "read_logs");
    assert_eq!(output[2]["status"], "completed");
}

#[tokio::test]
async fn anthropic_events_follow_the_streaming_guide() {
    let provider = LoopbackProvider::start(Wire::Anthropic, script())
        .await
        .unwrap();
    assert!(
        !provider.base_url().ends_with("/v1"),
        "the adapter adds /v1"
    );
    let events = raw(&provider, json!({ "model": "claude", "stream": true })).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    let mut expected = vec!["message_start", "ping", "content_block_start"];
    expected.extend(["content_block_delta"; 4]);
    expected.extend(["content_block_stop", "content_block_start"]);
    expected.extend(["content_block_delta"; 5]);
    expected.extend(["content_block_stop", "content_block_start"]);
    expected.extend(["content_block_delta"; 7]);
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names, expected);
    for (name, data) in &events {
        assert_eq!(data["type"], name.as_deref().unwrap());
    }
    assert_eq!(events[0].1["message"]["model"], "claude");
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 10);
    assert_eq!(events[8].1["content_block"]["type"], "tool_use");
    assert_eq!(events[8].1["content_block"]["id"], "toolu_loopback_1_1");
    let input: String = events
        .iter()
        .filter(|(_, d)| d["index"] == 2 && d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&input).unwrap(),
        json!({ "service": "payment-api", "lines": 20 })
    );
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 5);
}

#[tokio::test]
async fn the_responses_adapter_gets_text_split_calls_usage_refusals_and_failures() {
    let mut replies = script().to_vec();
    replies.push(Reply::refusal("I can't help with that."));
    let failed = ModelError::Provider {
        message: "The model failed to generate a response.".into(),
        code: Some("server_error".into()),
    };
    replies.push(Reply::fail(failed.clone()));
    let provider = LoopbackProvider::start(Wire::Responses, replies)
        .await
        .unwrap();
    let model = Responses::new("gpt-4.1")
        .base_url(provider.base_url())
        .api_key("sk-test");
    let events: Vec<_> = model.stream(request()).await.unwrap().collect().await;
    let deltas = events
        .iter()
        .filter(|e| matches!(e, Ok(StreamEvent::ToolCallDelta { index: 1, .. })))
        .count();
    assert!(deltas > 1, "the arguments arrive in pieces: {events:?}");
    let Some(Ok(StreamEvent::Completed(response))) = events.last() else {
        panic!("the stream completes: {events:?}");
    };
    assert_eq!(response.message.text, "Restarting payment-api.");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls = &response.message.tool_calls;
    assert_eq!(calls[0].call_id, "call_loopback_1_1");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[1].arguments).unwrap(),
        json!({ "service": "payment-api", "lines": 20 })
    );
    assert_eq!(response.model, "gpt-4.1");
    assert_eq!(response.id, "resp_loopback_1");
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        })
    );
    assert_eq!(provider.requests()[0]["model"], "gpt-4.1");

    let refused = complete(&model, request()).await.unwrap();
    assert_eq!(
        refused.message.refusal.as_deref(),
        Some("I can't help with that.")
    );
    assert_eq!(complete(&model, request()).await.unwrap_err(), failed);
}

#[tokio::test]
async fn the_anthropic_adapter_gets_text_split_calls_usage_and_refusals() {
    let mut replies = script().to_vec();
    replies.push(Reply::refusal("I can't help with that."));
    let provider = LoopbackProvider::start(Wire::Anthropic, replies)
        .await
        .unwrap();
    let model = Anthropic::new("claude-sonnet-4-5")
        .base_url(provider.base_url())
        .api_key("sk-ant-test");
    let events: Vec<_> = model.stream(request()).await.unwrap().collect().await;
    let deltas = events
        .iter()
        .filter(|e| matches!(e, Ok(StreamEvent::ToolCallDelta { index: 1, .. })))
        .count();
    assert!(deltas > 1, "the input arrives in pieces: {events:?}");
    let Some(Ok(StreamEvent::Completed(response))) = events.last() else {
        panic!("the stream completes: {events:?}");
    };
    assert_eq!(response.message.text, "Restarting payment-api.");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls = &response.message.tool_calls;
    assert_eq!(calls[0].call_id, "toolu_loopback_1_1");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[1].arguments).unwrap(),
        json!({ "service": "payment-api", "lines": 20 })
    );
    assert_eq!(response.model, "claude-sonnet-4-5");
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        })
    );
    assert_eq!(provider.requests()[0]["model"], "claude-sonnet-4-5");

    let refused = complete(&model, request()).await.unwrap();
    assert_eq!(refused.finish_reason, FinishReason::ContentFilter);
}

#[tokio::test]
async fn an_http_failure_keeps_its_status_code_and_retry_after() {
    let limited = ModelError::Http {
        status: 429,
        message: "Rate limit reached for requests".into(),
        code: Some("rate_limit_exceeded".into()),
        retry_after: Some(Duration::from_secs(2)),
    };
    let provider = LoopbackProvider::start(Wire::ChatCompletions, [Reply::fail(limited.clone())])
        .await
        .unwrap();
    let error = complete(&chat(&provider), request()).await.unwrap_err();
    assert_eq!(error, limited);

    let provider = LoopbackProvider::start(Wire::Anthropic, [Reply::fail(limited.clone())])
        .await
        .unwrap();
    let model = Anthropic::new("claude-sonnet-4-5").base_url(provider.base_url());
    assert_eq!(complete(&model, request()).await.unwrap_err(), limited);
    provider.push(Reply::fail(limited));
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", provider.base_url()))
        .body(json!({ "stream": true }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "2");
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_exceeded");
}

#[tokio::test]
async fn failures_inside_the_stream_reach_the_adapter_as_they_would_from_a_provider() {
    let overloaded = ModelError::Provider {
        message: "The server had an error while processing your request.".into(),
        code: Some("server_error".into()),
    };
    let provider = LoopbackProvider::start(
        Wire::ChatCompletions,
        [
            Reply::fail(overloaded.clone()),
            Reply::fail(ModelError::Transport("cut".into())),
            Reply::fail(ModelError::Protocol("garbled".into())),
            Reply::fail(ModelError::Unavailable("down for maintenance".into())),
        ],
    )
    .await
    .unwrap();
    let model = chat(&provider);
    assert_eq!(complete(&model, request()).await.unwrap_err(), overloaded);
    let cut = complete(&model, request()).await.unwrap_err();
    assert!(matches!(cut, ModelError::Transport(_)), "{cut:?}");
    let garbled = complete(&model, request()).await.unwrap_err();
    assert!(matches!(garbled, ModelError::Protocol(_)), "{garbled:?}");
    let down = complete(&model, request()).await.unwrap_err();
    assert!(
        matches!(&down, ModelError::Http { status: 503, message, .. } if message == "down for maintenance"),
        "{down:?}"
    );
}

#[tokio::test]
async fn refused_requests_say_what_to_change() {
    let provider = LoopbackProvider::start(Wire::ChatCompletions, [Reply::text("only one")])
        .await
        .unwrap();
    let model = chat(&provider);
    complete(&model, request()).await.unwrap();
    let past = complete(&model, request()).await.unwrap_err();
    assert!(
        matches!(&past, ModelError::Http { status: 400, message, .. }
            if message.contains("no reply left for request 2")),
        "{past:?}"
    );

    let lost = ChatCompletions::new("gpt-4.1").base_url(format!("http://{}", provider.address()));
    let error = complete(&lost, request()).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::Http { status: 404, message, .. }
            if message.contains("POST /v1/chat/completions")),
        "{error:?}"
    );
    assert_eq!(
        provider.requests().len(),
        2,
        "the lost request never arrived"
    );
}

#[tokio::test]
async fn a_dropped_provider_stops_listening() {
    let provider = LoopbackProvider::start(Wire::Anthropic, []).await.unwrap();
    let address = provider.address();
    tokio::net::TcpStream::connect(address).await.unwrap();
    drop(provider);
    // The server task sees the signal when it next runs; on this single-threaded runtime it
    // runs whenever the test yields.
    let mut refused = false;
    for _ in 0..1_000 {
        tokio::task::yield_now().await;
        if tokio::net::TcpStream::connect(address).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "{address} still accepts connections");
}
