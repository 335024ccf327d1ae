//! The Responses API adapter against a loopback server that answers as OpenAI documents:
//! typed SSE events (`event:` the type, `data:` the event object), output items announced and
//! completed, function call arguments streamed in pieces, reasoning items, the usage of
//! `response.completed`, the terminal events and error bodies.
//!
//! Each fixture names the documentation it follows: OpenAI's API reference, "Responses"
//! ("Create a model response", the response object) and "Streaming events"
//! (`ResponseCreatedEvent`, `ResponseOutputItemAddedEvent`, `ResponseTextDeltaEvent`,
//! `ResponseRefusalDeltaEvent`, `ResponseFunctionCallArgumentsDeltaEvent` and `DoneEvent`,
//! `ResponseOutputItemDoneEvent`, `ResponseCompletedEvent`, `ResponseIncompleteEvent`,
//! `ResponseFailedEvent`, `ResponseErrorEvent`), as the OpenAPI description in
//! `openai/openai-openapi` gives them; and the guides "Function calling", "Reasoning models"
//! and "Conversation state".

use std::time::Duration;

use serde_json::{Value, json};
use toolwright_agent::{
    AssistantMessage, FinishReason, Message, Model, ModelError, ReasoningEffort, ReasoningSummary,
    Request, Settings, StreamEvent, ToolChoice, ToolUse, Usage, complete,
};
use toolwright_core::ModelOutput;

#[path = "support/responses_server.rs"]
mod server;

use server::{
    added, arguments_delta, arguments_done, call_item, calls_done, completed, completed_response,
    created, done, events, in_progress, message_item, reasoning_item, request, response_object,
    serve, serve_all, sse, text_delta, tools, two_calls, usage,
};

// Streaming events, the text of a message: `response.created`, `response.in_progress`, the
// `message` item added, `response.content_part.added`, `response.output_text.delta` pieces,
// `response.output_text.done`, `response.content_part.done`, the item done, and
// `response.completed` whose `usage` has `input_tokens_details.cached_tokens`.
#[tokio::test]
async fn streamed_text_arrives_in_deltas_with_usage_and_cached_tokens() {
    let text = "Sunny in Paris.";
    let body = sse(&[
        created(),
        in_progress(),
        added(0, message_item("in_progress", "")),
        json!({ "type": "response.content_part.added", "item_id": "msg_123", "output_index": 0,
            "content_index": 0, "part": { "type": "output_text", "text": "", "annotations": [] } }),
        text_delta(0, "Sunny in "),
        text_delta(0, "Paris."),
        json!({ "type": "response.output_text.done", "item_id": "msg_123", "output_index": 0,
            "content_index": 0, "text": text, "logprobs": [] }),
        json!({ "type": "response.content_part.done", "item_id": "msg_123", "output_index": 0,
            "content_index": 0, "part": { "type": "output_text", "text": text, "annotations": [] } }),
        done(0, message_item("completed", text)),
        completed(json!([message_item("completed", text)])),
    ]);
    let (model, seen) = serve(body).await;
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
        input_tokens: 328,
        cached_input_tokens: 256,
        cache_write_input_tokens: 0,
        output_tokens: 52,
    };
    assert!(
        events.contains(&Ok(StreamEvent::Usage(usage))),
        "{events:?}"
    );
    let response = completed_response(&events);
    assert_eq!(response.message.text, text);
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.model, "gpt-5-2025-08-07");
    assert_eq!(
        response.id,
        "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41"
    );
    assert_eq!(response.usage, Some(usage));
    // The message item is kept (its `phase` matters to later models); no response id, since
    // nothing was stored.
    let items: Vec<&Value> = response.message.items_of("openai-responses").collect();
    assert_eq!(items, [&message_item("completed", text)]);

    let (headers, _) = seen.lock().unwrap().remove(0);
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(headers["accept"], "text/event-stream");
}

// "Create a model response", the request body: `model`, `instructions`, `input` items,
// flat function tools beside hosted ones ("Function calling", "Defining functions"),
// `stream`, `store`, `include`, `max_output_tokens`, `reasoning`, `tool_choice`
// (`ToolChoiceFunction`), `parallel_tool_calls`, `temperature`; `Settings::extra` fields
// added, and replacing the adapter's field of the same name.
#[tokio::test]
async fn the_request_body_is_the_documented_one() {
    let body = sse(&[
        created(),
        completed(json!([message_item("completed", "ok")])),
    ]);
    let (model, seen) = serve(body).await;
    let model = model
        .reasoning_effort(ReasoningEffort::Low)
        .reasoning_summary(ReasoningSummary::Auto);
    let mut request = request();
    request.tool_choice = ToolChoice::Tool("get_weather".into());
    request.settings = Settings::new()
        .max_output_tokens(300)
        .temperature(0.5)
        .extra("prompt_cache_key", "ops-agent")
        .extra("text", json!({ "verbosity": "low" }));
    request.settings.parallel_tool_calls = Some(false);
    complete(&model, request).await.unwrap();
    let (_, body) = seen.lock().unwrap().remove(0);
    assert_eq!(
        body,
        json!({
            "model": "gpt-5",
            "instructions": "You answer briefly.",
            "input": [{ "role": "user", "content": [{ "type": "input_text", "text": "Weather in Paris and Bogotá?" }] }],
            "tools": tools().json().parse::<Value>().unwrap(),
            "tool_choice": { "type": "function", "name": "get_weather" },
            "parallel_tool_calls": false,
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "reasoning": { "effort": "low", "summary": "auto" },
            "max_output_tokens": 300,
            "temperature": 0.5,
            "prompt_cache_key": "ops-agent",
            "text": { "verbosity": "low" },
        })
    );
    assert_eq!(body["tools"][0]["strict"], true, "flat, strict written out");
    assert!(body["tools"][0].get("function").is_none());

    // An extra replaces the adapter's field: no duplicate keys.
    let body = sse(&[created(), completed(json!([]))]);
    let (model, seen) = serve(body).await;
    let request = Request::new(vec![Message::user("hi")]).settings(
        Settings::new()
            .extra("include", json!([]))
            .extra("reasoning", json!({ "effort": "xhigh" })),
    );
    complete(&model.reasoning_effort(ReasoningEffort::Low), request)
        .await
        .unwrap();
    let (_, body) = seen.lock().unwrap().remove(0);
    assert_eq!(body["include"], json!([]));
    assert_eq!(body["reasoning"], json!({ "effort": "xhigh" }));
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

// "Function calling", "Streaming": `response.output_item.added` announces the call
// (`call_id`, `name`, empty `arguments`), `response.function_call_arguments.delta` pieces
// follow, cut anywhere (here inside a key and inside a value), then `.done` with the whole
// arguments and the item done.
#[tokio::test]
async fn a_function_call_is_assembled_from_arguments_split_mid_token() {
    let arguments = "{\"location\":\"Paris, France\"}";
    let body = sse(&[
        created(),
        added(
            0,
            call_item("fc_12345xyz", "call_12345xyz", "in_progress", ""),
        ),
        arguments_delta(0, "fc_12345xyz", "{\"loc"),
        arguments_delta(0, "fc_12345xyz", "ation\":\"Pa"),
        arguments_delta(0, "fc_12345xyz", "ris, Fr"),
        arguments_delta(0, "fc_12345xyz", "ance\"}"),
        arguments_done(0, "fc_12345xyz", arguments),
        done(
            0,
            call_item("fc_12345xyz", "call_12345xyz", "completed", arguments),
        ),
        completed(json!([call_item(
            "fc_12345xyz",
            "call_12345xyz",
            "completed",
            arguments
        )])),
    ]);
    let (model, _) = serve(body).await;
    let events = events(&model, request()).await;
    assert!(matches!(
        &events[0],
        Ok(StreamEvent::ToolCallStart { index: 0, call_id, name })
            if call_id == "call_12345xyz" && name == "get_weather"
    ));
    let pieces: String = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallDelta {
                index: 0,
                arguments,
            }) => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(pieces, arguments);
    let call = ToolUse::new("call_12345xyz", "get_weather", arguments);
    assert_eq!(calls_done(&events), std::slice::from_ref(&call));
    let response = completed_response(&events);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.message.tool_calls, [call]);
    assert!(response.message.text.is_empty());
}

// "Function calling", "Parallel function calling": several `function_call` items in one
// response, each with its own `output_index`; a call's index among the response's calls is
// its place among them.
#[tokio::test]
async fn parallel_function_calls_are_numbered_among_the_calls() {
    let (model, _) = serve(two_calls()).await;
    let events = events(&model, request()).await;
    let starts: Vec<(usize, String)> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallStart { index, call_id, .. }) => {
                Some((*index, call_id.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            (0, "call_DdmO9pD3xa9XTPNJ32zg2hcA".into()),
            (1, "call_ABCDEFGHIJKLMNOPQRSTUVWX".into())
        ]
    );
    let done = calls_done(&events);
    assert_eq!(done[0].arguments, r#"{"location":"Paris"}"#);
    assert_eq!(done[1].arguments, r#"{"location":"Bogotá"}"#);
    let response = completed_response(&events);
    assert_eq!(response.message.tool_calls, done);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

// Streaming events, `response.refusal.delta` and `response.refusal.done`: a refusal is a
// `refusal` content part of the message (`RefusalContent`), reported apart from text.
#[tokio::test]
async fn a_refusal_is_reported_apart_from_text() {
    let refusal = "I'm sorry, I can't help with that.";
    let refused = json!({ "id": "msg_123", "type": "message", "status": "completed", "role": "assistant",
        "content": [{ "type": "refusal", "refusal": refusal }] });
    let body = sse(&[
        created(),
        added(0, message_item("in_progress", "")),
        json!({ "type": "response.refusal.delta", "item_id": "msg_123", "output_index": 0,
            "content_index": 0, "delta": "I'm sorry, I can't " }),
        json!({ "type": "response.refusal.delta", "item_id": "msg_123", "output_index": 0,
            "content_index": 0, "delta": "help with that." }),
        json!({ "type": "response.refusal.done", "item_id": "msg_123", "output_index": 0,
            "content_index": 0, "refusal": refusal }),
        done(0, refused.clone()),
        completed(json!([refused])),
    ]);
    let (model, _) = serve(body).await;
    let events = events(&model, request()).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Ok(StreamEvent::RefusalDelta(_))))
            .count(),
        2
    );
    let response = completed_response(&events);
    assert_eq!(response.message.refusal.as_deref(), Some(refusal));
    assert!(response.message.text.is_empty());
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

// "Reasoning models", "Keeping reasoning items in context" and "Encrypted reasoning items":
// with `store: false` and `include: ["reasoning.encrypted_content"]` the reasoning item of a
// response that called a function comes back with `encrypted_content` (whole only in the
// item's done event, as `ResponseOutputItemAddedEvent` warns), and goes into the next
// request before the call it led to, followed by the function's output.
#[tokio::test]
async fn reasoning_items_are_kept_and_sent_back_first() {
    let arguments = "{\"location\":\"Paris\"}";
    let first = sse(&[
        created(),
        added(
            0,
            json!({ "id": "rs_6820f383d7c08191846711c5df8233bc", "type": "reasoning",
            "summary": [], "encrypted_content": "gAAAAABo", "status": "in_progress" }),
        ),
        done(0, reasoning_item("gAAAAABoWHOLE")),
        added(1, call_item("fc_1", "call_1", "in_progress", "")),
        arguments_delta(1, "fc_1", arguments),
        done(1, call_item("fc_1", "call_1", "completed", arguments)),
        json!({ "type": "response.web_search_call.completed", "output_index": 2, "item_id": "ws_1" }),
        completed(json!([
            reasoning_item("gAAAAABoWHOLE"),
            call_item("fc_1", "call_1", "completed", arguments)
        ])),
    ]);
    let second = sse(&[
        created(),
        completed(json!([message_item("completed", "Sunny.")])),
    ]);
    let (model, seen) = serve_all(vec![(200, vec![], first), (200, vec![], second)]).await;

    let response = complete(&model, request()).await.unwrap();
    let items: Vec<&Value> = response.message.items_of("openai-responses").collect();
    assert_eq!(items[0], &reasoning_item("gAAAAABoWHOLE"));
    assert_eq!(
        response.message.tool_calls,
        [ToolUse::new("call_1", "get_weather", arguments)]
    );

    let mut conversation = request().messages;
    conversation.push(Message::Assistant(response.message));
    conversation.push(Message::ToolResult {
        usage: None,
        call_id: "call_1".into(),
        name: "get_weather".into(),
        output: ModelOutput::text("18°C, sunny"),
        is_error: false,
        error: None,
    });
    let mut next = request();
    next.messages = conversation;
    complete(&model, next).await.unwrap();

    let (_, body) = seen.lock().unwrap().remove(1);
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    let input = body["input"].as_array().unwrap();
    assert_eq!(input.len(), 4, "{input:#?}");
    assert_eq!(input[0]["role"], "user");
    // Without `store` OpenAI kept nothing to match ids against: the items go without them.
    assert_eq!(
        input[1],
        json!({ "type": "reasoning", "summary": [], "encrypted_content": "gAAAAABoWHOLE", "status": "completed" })
    );
    assert_eq!(
        input[2],
        json!({ "type": "function_call", "status": "completed", "call_id": "call_1", "name": "get_weather", "arguments": arguments })
    );
    assert_eq!(
        input[3],
        json!({ "type": "function_call_output", "call_id": "call_1", "output": "18°C, sunny" })
    );
}

// Built-in tools ("Web search"): their calls are output items of their own type
// (`web_search_call`), run by OpenAI. They are kept in output order with the message and sent
// back as they came; unknown streaming events about them are ignored.
#[tokio::test]
async fn built_in_tool_items_are_kept_and_sent_back() {
    let search = json!({ "id": "ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609", "type": "web_search_call",
        "status": "completed", "action": { "type": "search", "query": "weather Paris" } });
    let first = sse(&[
        created(),
        added(
            0,
            json!({ "id": search["id"], "type": "web_search_call", "status": "in_progress" }),
        ),
        json!({ "type": "response.web_search_call.in_progress", "output_index": 0, "item_id": search["id"] }),
        json!({ "type": "response.web_search_call.searching", "output_index": 0, "item_id": search["id"] }),
        json!({ "type": "response.web_search_call.completed", "output_index": 0, "item_id": search["id"] }),
        done(0, search.clone()),
        added(1, message_item("in_progress", "")),
        text_delta(1, "Sunny."),
        done(1, message_item("completed", "Sunny.")),
        completed(json!([search, message_item("completed", "Sunny.")])),
    ]);
    let (model, seen) = serve(first).await;
    let model = model.store(true);
    let response = complete(&model, request()).await.unwrap();
    assert_eq!(response.message.text, "Sunny.");
    let mut next = request();
    next.messages.push(Message::Assistant(response.message));
    next.messages.push(Message::user("And tomorrow?"));
    complete(&model, next).await.unwrap();
    let (_, body) = seen.lock().unwrap().remove(1);
    assert!(
        body.get("include").is_none(),
        "stored: reasoning is found by id"
    );
    let input = body["input"].as_array().unwrap();
    assert_eq!(input[1], search, "stored: sent with its id");
    assert_eq!(input[2], message_item("completed", "Sunny."));
    assert_eq!(input[3]["role"], "user");
    assert_eq!(
        input.len(),
        4,
        "the response id is never an input item: {input:#?}"
    );
}

// "Conversation state", "Passing context from the previous response": with `store: true` a
// request names the previous response (`previous_response_id`) and sends only what is new;
// "Create a model response": `instructions` are not carried over from it, so they are sent
// again.
#[tokio::test]
async fn chaining_sends_previous_response_id_and_only_new_items() {
    let second = sse(&[
        created(),
        completed(json!([message_item("completed", "Sunny in both.")])),
    ]);
    let (model, seen) = serve_all(vec![(200, vec![], two_calls()), (200, vec![], second)]).await;
    let model = model.store(true).chain(true);

    let response = complete(&model, request()).await.unwrap();
    assert!(
        response
            .message
            .items_of("openai-responses")
            .any(|i| i == &json!({ "type": "response_id", "id": response.id })),
        "a stored response keeps its id"
    );
    let mut next = request();
    next.messages
        .push(Message::Assistant(response.message.clone()));
    for (call, output) in response.message.tool_calls.iter().zip(["18°C", "22°C"]) {
        next.messages.push(Message::ToolResult {
            usage: None,
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            output: ModelOutput::text(output),
            is_error: false,
            error: None,
        });
    }
    complete(&model, next).await.unwrap();

    let seen = seen.lock().unwrap();
    let first = &seen[0].1;
    assert!(first.get("previous_response_id").is_none());
    assert_eq!(first["store"], true);
    let body = &seen[1].1;
    assert_eq!(body["previous_response_id"], response.id);
    assert_eq!(body["instructions"], "You answer briefly.");
    assert_eq!(
        body["input"],
        json!([
            { "type": "function_call_output", "call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "output": "18°C" },
            { "type": "function_call_output", "call_id": "call_ABCDEFGHIJKLMNOPQRSTUVWX", "output": "22°C" },
        ])
    );
}

// The error of a chained request whose response OpenAI no longer has (400,
// `previous_response_not_found`, as the error object of "Error codes" carries it): the
// conversation is toolwright's, so the request goes again whole.
#[tokio::test]
async fn a_chained_response_that_is_gone_is_resent_whole() {
    let gone = json!({ "error": {
        "message": "Previous response with id 'resp_1' not found.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }});
    let ok = sse(&[
        created(),
        completed(json!([message_item("completed", "ok")])),
    ]);
    let (model, seen) = serve_all(vec![(400, vec![], gone.to_string()), (200, vec![], ok)]).await;
    let model = model.store(true).chain(true);
    let mut earlier = AssistantMessage::text("Hello.");
    earlier.items.push(toolwright_agent::ProviderItem::new(
        "openai-responses",
        message_item("completed", "Hello."),
    ));
    earlier.items.push(toolwright_agent::ProviderItem::new(
        "openai-responses",
        json!({ "type": "response_id", "id": "resp_1" }),
    ));
    let request = Request::new(vec![
        Message::user("hi"),
        Message::Assistant(earlier),
        Message::user("weather?"),
    ]);
    let response = complete(&model, request).await.unwrap();
    assert_eq!(response.message.text, "ok");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].1["previous_response_id"], "resp_1");
    assert_eq!(seen[0].1["input"].as_array().unwrap().len(), 1);
    assert!(seen[1].1.get("previous_response_id").is_none());
    let input = seen[1].1["input"].as_array().unwrap();
    assert_eq!(input.len(), 3);
    // The stored items went with the response: they go back without their ids.
    assert!(
        input.iter().all(|item| item.get("id").is_none()),
        "{input:#?}"
    );
}

#[tokio::test]
async fn chaining_without_store_and_stop_sequences_are_refused_with_what_to_do() {
    let (model, seen) = serve(String::new()).await;
    let error = complete(&model.clone().chain(true), request())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Unavailable(m) if m.contains("store(true)")),
        "{error:?}"
    );
    let mut stop = request();
    stop.settings.stop = vec!["END".into()];
    let error = complete(&model, stop).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::Unavailable(m) if m.contains("no stop sequences")),
        "{error:?}"
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent");
    let debug = format!("{model:?}");
    assert!(
        !debug.contains("sk-test") && debug.contains("<redacted>"),
        "{debug}"
    );
}

// "Error codes", "API errors": 429 "Rate limit reached for requests" with the error object
// `{"error": {"message", "type", "param", "code"}}`, and the `Retry-After` header.
#[tokio::test]
async fn a_rate_limit_is_an_http_error_with_its_code_and_retry_after() {
    let body = json!({ "error": {
        "message": "Rate limit reached for gpt-5 in organization org-123 on tokens per min (TPM): Limit 30000, Used 30000, Requested 512.",
        "type": "tokens",
        "param": null,
        "code": "rate_limit_exceeded",
    }});
    let (model, _) = serve_all(vec![(
        429,
        vec![("retry-after", "2"), ("x-ratelimit-remaining-tokens", "0")],
        body.to_string(),
    )])
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

// Streaming events, `response.failed`: the response object with `status: "failed"` and
// `error: {"code", "message"}` (`ResponseError`).
#[tokio::test]
async fn a_failed_response_is_a_provider_error_with_its_code() {
    let mut failed = response_object("failed", json!([]), Value::Null);
    failed["error"] =
        json!({ "code": "server_error", "message": "The model failed to generate a response." });
    let body = sse(&[
        created(),
        added(0, message_item("in_progress", "")),
        text_delta(0, "Sun"),
        json!({ "type": "response.failed", "response": failed }),
    ]);
    let (model, _) = serve(body).await;
    let events = events(&model, request()).await;
    assert_eq!(
        events.last(),
        Some(&Err(ModelError::Provider {
            message: "The model failed to generate a response.".into(),
            code: Some("server_error".into()),
        }))
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Completed(_))))
    );
}

// Streaming events, `error`: `code`, `message` and `param` at the top level of the event.
#[tokio::test]
async fn an_error_event_is_a_provider_error() {
    let body = sse(&[
        created(),
        json!({ "type": "error", "code": "ERR_SOMETHING", "message": "Something went wrong", "param": null }),
    ]);
    let (model, _) = serve(body).await;
    let error = complete(&model, request()).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Provider {
            message: "Something went wrong".into(),
            code: Some("ERR_SOMETHING".into()),
        }
    );
}

// A connection that closes inside a call's arguments, before `response.completed`: the call
// is never handed over, and the stream fails as broken off.
#[tokio::test]
async fn a_stream_cut_mid_call_fails_without_completing_the_call() {
    let body = sse(&[
        created(),
        added(0, call_item("fc_1", "call_1", "in_progress", "")),
        arguments_delta(0, "fc_1", "{\"loc"),
    ]);
    let (model, _) = serve(body).await;
    let events = events(&model, request()).await;
    assert!(calls_done(&events).is_empty(), "{events:?}");
    assert!(
        matches!(events.last(), Some(Err(ModelError::Transport(_)))),
        "{events:?}"
    );
}

// Streaming events, `response.incomplete`: `status: "incomplete"` with
// `incomplete_details.reason: "max_output_tokens"` (the response object's `incomplete_details`);
// the text so far is the answer, cut short, and a call cut inside its arguments is left out.
#[tokio::test]
async fn an_incomplete_response_finishes_for_its_reason() {
    let mut incomplete = response_object(
        "incomplete",
        json!([
            message_item("completed", "Sunny in"),
            call_item("fc_1", "call_1", "incomplete", "{\"loc"),
        ]),
        usage(),
    );
    incomplete["incomplete_details"] = json!({ "reason": "max_output_tokens" });
    let body = sse(&[
        created(),
        added(0, message_item("in_progress", "")),
        text_delta(0, "Sunny in"),
        done(0, message_item("completed", "Sunny in")),
        added(1, call_item("fc_1", "call_1", "in_progress", "")),
        arguments_delta(1, "fc_1", "{\"loc"),
        json!({ "type": "response.incomplete", "response": incomplete }),
    ]);
    let (model, _) = serve(body).await;
    let events = events(&model, request()).await;
    assert!(calls_done(&events).is_empty(), "{events:?}");
    let response = completed_response(&events);
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(response.message.text, "Sunny in");
    assert!(response.message.tool_calls.is_empty());
    assert!(response.usage.is_some());

    let mut filtered = response_object("incomplete", json!([]), Value::Null);
    filtered["incomplete_details"] = json!({ "reason": "content_filter" });
    let body = sse(&[
        created(),
        json!({ "type": "response.incomplete", "response": filtered }),
    ]);
    let (model, _) = serve(body).await;
    let response = complete(&model, request()).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
}

// Streaming events, `error`, as the API has also been seen sending it: the code and message in
// a nested `error` object (`{"type":"error","error":{"type","code","message"}}`).
#[tokio::test]
async fn a_nested_error_event_keeps_its_code_and_message() {
    let body = sse(&[
        created(),
        json!({ "type": "error", "sequence_number": 2, "error": {
            "type": "too_many_requests", "code": "too_many_requests", "message": "Too Many Requests"
        }}),
    ]);
    let (model, _) = serve(body).await;
    let events = events(&model, request()).await;
    assert_eq!(
        events.last(),
        Some(&Err(ModelError::Provider {
            message: "Too Many Requests".into(),
            code: Some("too_many_requests".into()),
        }))
    );
}

// "Computer use" and the function-calling guide's custom tools: a `computer_call` or
// `custom_tool_call` waits for the client's output item, which this loop does not produce.
#[tokio::test]
async fn an_item_that_needs_the_clients_answer_fails_the_request_clearly() {
    let computer = json!({ "type": "computer_call", "id": "cu_1", "call_id": "call_1",
        "action": { "type": "screenshot" }, "status": "completed" });
    let body = sse(&[
        created(),
        added(0, computer.clone()),
        done(0, computer.clone()),
        completed(json!([computer])),
    ]);
    let (model, _) = serve(body).await;
    let events = events(&model, request()).await;
    let Some(Err(ModelError::Unavailable(message))) = events.last() else {
        panic!("{events:?}");
    };
    assert!(message.contains("computer_call"), "{message}");
}

// Reasoning guide, "Encrypted reasoning items": only reasoning models return them; other models
// refuse `include: ["reasoning.encrypted_content"]`.
#[tokio::test]
async fn encrypted_reasoning_is_asked_of_reasoning_models_only() {
    let body = sse(&[created(), completed(json!([]))]);
    let (plain, seen) = server::serve_as("gpt-4.1", vec![(200, vec![], body)]).await;
    complete(&plain, request()).await.unwrap();
    let (_, sent) = seen.lock().unwrap().remove(0);
    assert!(sent.get("include").is_none(), "{sent}");
    complete(&plain.clone().encrypted_reasoning(true), request())
        .await
        .unwrap();
    let (_, sent) = seen.lock().unwrap().remove(0);
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
}
