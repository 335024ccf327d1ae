//! One model round of the agent loop against the HTTP request under it, side by side in one run
//! (figures in BENCHMARKS.md). A `LoopbackProvider` on `127.0.0.1` answers every request with the
//! same text, in Chat Completions chunks:
//!
//! - `agent_loop/http_request`: a bare `reqwest` POST of the body the loop sends, the whole SSE
//!   body read — the floor any client pays for the round trip;
//! - `agent_loop/adapter_complete`: `ChatCompletions` with the same request: the body rendered,
//!   the chunks decoded into events and a response;
//! - `agent_loop/agent_send`: `Agent::send` on a fresh session of a runtime on an in-memory
//!   SQLite store: a turn begun, the person's message stored, the tool list asked for, the model
//!   asked (through the default retry policy), its answer stored, the turn completed.
//!
//! The difference between the last and the first is the loop's own cost per model round.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::agent::{
    Agent, AgentOutcome, ChatCompletions, LoopbackProvider, Message, Reply, Request,
    ToolDefinitions, Wire, complete,
};
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore};

/// What the model answers each time: a couple of sentences, streamed in small chunks.
const ANSWER: &str = "payment-api is healthy: p99 latency is 180 ms over the last hour, error \
    rate 0.02%, all 6 instances up. Nothing to restart.";

#[derive(Deserialize, JsonSchema, ToolInput)]
struct StatusArgs {
    /// Service name, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
}

#[derive(Serialize, JsonSchema)]
struct Status {
    service: String,
    healthy: bool,
}

/// Current health of one service. Use when the user asks whether a service is up.
#[tool(effect = read)]
async fn get_service_status(args: StatusArgs) -> Result<Status, ToolError> {
    Ok(Status {
        service: args.service,
        healthy: true,
    })
}

fn agent_loop(c: &mut Criterion) {
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let provider = tokio
        .block_on(LoopbackProvider::start(Wire::ChatCompletions, []))
        .expect("the loopback provider starts");
    let model = ChatCompletions::new("gpt-4.1")
        .base_url(provider.base_url())
        .api_key("sk-bench");
    let registry = Registry::from_tools([get_service_status::TOOL]).expect("registry");
    let runtime = Runtime::builder(registry)
        .store(SqliteStore::in_memory().expect("store"))
        .build()
        .expect("runtime");
    let agent = Agent::new(runtime.clone(), model.clone()).instructions("You run ops.");
    let mut sessions = 0_u64;
    let mut session = || {
        sessions += 1;
        let spec = SessionSpec::new(format!("bench-{sessions}"));
        tokio.block_on(runtime.open_session(spec)).expect("session")
    };

    // One round first: the body the loop sends is the one the bare request sends.
    provider.push(Reply::text(ANSWER));
    let first = tokio
        .block_on(agent.send(&session(), None, "is payment-api healthy?"))
        .expect("a round");
    assert!(matches!(first.outcome, AgentOutcome::Answered(_)));
    let sent = provider.requests().pop().expect("a request");
    let body = sent.to_string();
    let url = format!("{}/chat/completions", provider.base_url());
    let client = reqwest::Client::new();
    let request = Request::new(vec![Message::user("is payment-api healthy?")])
        .instructions("You run ops.")
        .tools(ToolDefinitions::from_json(sent["tools"].to_string()));

    let mut group = c.benchmark_group("agent_loop");
    group.bench_function("http_request", |b| {
        b.iter(|| {
            provider.push(Reply::text(ANSWER));
            tokio.block_on(async {
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .bearer_auth("sk-bench")
                    .body(body.clone())
                    .send()
                    .await
                    .expect("sent");
                response.bytes().await.expect("the whole body")
            })
        })
    });
    group.bench_function("adapter_complete", |b| {
        b.iter(|| {
            provider.push(Reply::text(ANSWER));
            tokio
                .block_on(complete(&model, request.clone()))
                .expect("a response")
        })
    });
    group.bench_function("agent_send", |b| {
        b.iter_batched(
            &mut session,
            |session| {
                provider.push(Reply::text(ANSWER));
                tokio
                    .block_on(agent.send(&session, None, "is payment-api healthy?"))
                    .expect("a round")
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, agent_loop);
criterion_main!(benches);
