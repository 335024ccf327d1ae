//! The loop's limits on a real SQLite file: budgets that park the turn on a session-limit
//! request (extended by an approval, stopping the turn on a cancel), the retries of a tool's
//! invalid input, model requests retried after a rate limit or a stream cut mid call, and a
//! prefix of instructions and tools that stays the same bytes. (The spans of a run are
//! `tests/agent_tracing.rs`: they need a subscriber of their own.)

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::Principal;
use toolwright::agent::{
    Agent, AgentError, AgentEvent, AgentOutcome, Budget, Limits, Message, Model, ModelError, Price,
    Reply, Request, ResponseStream, RetryPolicy, ScriptedModel, StreamEvent,
};
use toolwright::prelude::*;
use toolwright::registry::Format;
use toolwright::runtime::{
    CompletionReason, Event, InputResponse, RequestKind, Runtime, SessionSpec, SqliteStore,
    TurnStatus,
};

/// How many times `tally` ran.
#[derive(Clone, Default)]
struct Tally(Arc<AtomicUsize>);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TallyArgs {
    /// What to count.
    item: String,
}

/// Counts an item.
#[tool(effect = read)]
async fn tally(args: TallyArgs, tally: State<Tally>) -> Result<String, ToolError> {
    let n = tally.0.0.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("{} counted ({n})", args.item))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TransferArgs {
    /// Cents to move.
    cents: u32,
    /// The account to pay.
    to: String,
}

/// Moves money; its input is strict.
#[tool(effect = write)]
async fn transfer(args: TransferArgs) -> Result<String, ToolError> {
    Ok(format!("moved {} to {}", args.cents, args.to))
}

/// Publishes an item, with a person's approval.
#[tool(effect = write, approval = always)]
async fn publish(args: TallyArgs) -> Result<String, ToolError> {
    Ok(format!("{} published", args.item))
}

/// Moves money; one invalid input fails the turn.
#[tool(effect = write, input_retries = 0)]
async fn wire(args: TransferArgs) -> Result<String, ToolError> {
    Ok(format!("wired {} to {}", args.cents, args.to))
}

fn alice() -> Principal {
    Principal::user("test", "alice")
}

fn runtime_on(path: &Path, tally: &Tally) -> Runtime {
    Runtime::builder(
        Registry::from_tools([tally::TOOL, transfer::TOOL, wire::TOOL, publish::TOOL])
            .expect("the tools register"),
    )
    .store(SqliteStore::open(path).expect("the store opens"))
    .state(tally.clone())
    .build()
    .expect("the runtime builds")
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    tally: Tally,
    runtime: Runtime,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        let tally = Tally::default();
        let runtime = runtime_on(&path, &tally);
        Fixture {
            _dir: dir,
            path,
            tally,
            runtime,
        }
    }

    async fn session(&self, id: &str) -> toolwright::runtime::Session {
        self.runtime
            .open_session(SessionSpec::new(id).initiator(alice()))
            .await
            .unwrap()
    }

    /// The id of session `session`'s last turn, from its stored conversation.
    async fn last_turn(&self, session: &str) -> String {
        let entries = self.runtime.store().conversation(session).await.unwrap();
        entries
            .last()
            .expect("the session has messages")
            .turn_id
            .clone()
    }

    fn counted(&self) -> usize {
        self.tally.0.load(Ordering::SeqCst)
    }
}

fn waiting_on_limit(outcome: &AgentOutcome) -> toolwright::runtime::InputRequest {
    let AgentOutcome::Waiting(requests) = outcome else {
        panic!("the turn parks on its budget: {outcome:?}");
    };
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].kind, RequestKind::SessionLimit);
    assert_eq!(requests[0].requester, Some(alice()));
    requests[0].clone()
}

fn contexts(request: &Request) -> Vec<String> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Context { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_turn_parks_at_its_step_limit_and_an_approval_extends_it() {
    let fx = Fixture::new();
    let session = fx.session("steps").await;
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })),
        Reply::call("tally", json!({ "item": "b" })),
        Reply::call("tally", json!({ "item": "c" })),
        Reply::text("three counted"),
    ]);
    let budget = Budget::new().turn(Limits::new().steps(2));
    let agent = Agent::new(fx.runtime.clone(), model.clone()).budget(budget.clone());
    let mut events = fx.runtime.subscribe();
    let run = agent.send(&session, Some(alice()), "count").await.unwrap();
    let request = waiting_on_limit(&run.outcome);
    assert_eq!(
        model.requests().len(),
        2,
        "no third request before the approval"
    );
    assert_eq!(fx.counted(), 2);
    assert!(
        request
            .prompt
            .contains("this turn reached its limit of 2 model rounds"),
        "{}",
        request.prompt
    );
    let limits = &request.input.as_ref().unwrap()["limits"];
    assert_eq!(limits[0]["scope"], "turn");
    assert_eq!(limits[0]["limit"], "steps");
    assert_eq!(limits[0]["used"], 2.0);
    let mut requested = false;
    while let Ok(event) = events.try_recv() {
        requested |= matches!(event, Event::InputRequested { request: r } if r.request_id == request.request_id);
    }
    assert!(requested, "the request is announced like any other");
    // Resuming before the answer gives the request back.
    let again = agent.resume(&run.turn_id).await.unwrap();
    assert_eq!(waiting_on_limit(&again.outcome), request);

    // Approved in another process on the same file: the limit grows by its size.
    {
        let other = runtime_on(&fx.path, &fx.tally);
        other
            .respond(InputResponse::approve(&request.request_id, Some(alice())))
            .await
            .unwrap();
    }
    let run = agent.resume(&run.turn_id).await.unwrap();
    let AgentOutcome::Answered(response) = run.outcome else {
        panic!("extended, the turn goes on to an answer: {:?}", run.outcome);
    };
    assert_eq!(response.message.text, "three counted");
    assert_eq!(fx.counted(), 3);
    let third = &model.requests()[2];
    assert!(
        contexts(third)
            .iter()
            .any(|t| t.starts_with("The person extended the budget")),
        "the model is told: {:?}",
        contexts(third)
    );
}

#[tokio::test]
async fn cancelling_a_limit_stops_the_turn_and_the_session_goes_on() {
    let fx = Fixture::new();
    let session = fx.session("stop").await;
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })).and_call("tally", json!({ "item": "b" })),
        Reply::text("next turn answered"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone())
        .budget(Budget::new().turn(Limits::new().tool_calls(1)));
    let run = agent.send(&session, Some(alice()), "count").await.unwrap();
    let request = waiting_on_limit(&run.outcome);
    assert!(
        request.prompt.contains("2 tool calls used"),
        "{}",
        request.prompt
    );
    assert_eq!(fx.counted(), 0, "the calls wait for the extension");

    // Someone else may not answer for alice.
    let bob = Principal::user("test", "bob");
    let rejected = fx
        .runtime
        .respond(InputResponse::cancel(&request.request_id, Some(bob)))
        .await
        .unwrap();
    assert!(
        matches!(
            rejected,
            toolwright::runtime::RespondOutcome::Rejected { .. }
        ),
        "{rejected:?}"
    );
    let mut events = fx.runtime.subscribe();
    fx.runtime
        .respond(InputResponse::cancel(&request.request_id, Some(alice())))
        .await
        .unwrap();
    let mut reason = None;
    while let Ok(event) = events.try_recv() {
        if let Event::TurnCompleted { reason: r, .. } = event {
            reason = Some(r);
        }
    }
    assert_eq!(reason, Some(CompletionReason::SessionLimit));
    let turn = fx.runtime.turn(&run.turn_id).await.unwrap();
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Completed);

    let stopped = agent.resume(&run.turn_id).await.unwrap();
    let AgentOutcome::Stopped(answered) = stopped.outcome else {
        panic!("the turn is over: {:?}", stopped.outcome);
    };
    assert_eq!(answered.request_id, request.request_id);
    assert_eq!(fx.counted(), 0, "a stopped turn runs nothing");
    // Resuming again says the same and writes nothing more.
    let stored = fx.runtime.store().conversation("stop").await.unwrap().len();
    let again = agent.resume(&run.turn_id).await.unwrap();
    assert!(
        matches!(again.outcome, AgentOutcome::Stopped(_)),
        "{:?}",
        again.outcome
    );
    assert_eq!(
        fx.runtime.store().conversation("stop").await.unwrap().len(),
        stored
    );

    // The next turn's request answers the calls that never ran, right after them.
    let next = agent.send(&session, Some(alice()), "hello").await.unwrap();
    assert!(matches!(next.outcome, AgentOutcome::Answered(_)));
    let sent = &model.requests()[1].messages;
    let calls = sent
        .iter()
        .position(|m| m.as_assistant().is_some_and(|a| a.tool_calls.len() == 2))
        .unwrap();
    for offset in 1..=2 {
        let Message::ToolResult {
            usage: None,
            is_error,
            output,
            ..
        } = &sent[calls + offset]
        else {
            panic!("results follow the calls: {sent:?}");
        };
        assert!(*is_error);
        assert!(output.to_text().contains("did not run"), "{output:?}");
    }
}

#[tokio::test]
async fn an_approved_tool_call_limit_runs_the_calls_that_waited_once() {
    let fx = Fixture::new();
    let session = fx.session("calls").await;
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })).and_call("tally", json!({ "item": "b" })),
        Reply::text("done"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone())
        .budget(Budget::new().turn(Limits::new().tool_calls(1)));
    let run = agent.send(&session, Some(alice()), "count").await.unwrap();
    let request = waiting_on_limit(&run.outcome);
    fx.runtime
        .respond(InputResponse::approve(&request.request_id, Some(alice())))
        .await
        .unwrap();
    let resumed = agent.resume(&run.turn_id).await.unwrap();
    assert!(
        matches!(resumed.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        resumed.outcome
    );
    assert_eq!(fx.counted(), 2, "both calls ran, once");
    let sent = &model.requests()[1].messages;
    let kinds: Vec<&str> = sent
        .iter()
        .map(|m| match m {
            Message::User { .. } => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult { .. } => "result",
            Message::Context { .. } => "context",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["user", "assistant", "result", "result", "context"],
        "the calls' results follow them, then the extension"
    );
}

#[tokio::test]
async fn a_session_cost_limit_counts_every_turn_at_the_configured_price() {
    let fx = Fixture::new();
    let session = fx.session("cost").await;
    // Each scripted response takes 10 input and 5 output tokens, from model "scripted".
    let price = Price::per_million(10.0, 20.0); // 0.0001 + 0.0001 per response
    let budget = Budget::new()
        .session(Limits::new().cost(0.0003))
        .price("script", price);
    let model = ScriptedModel::new([
        Reply::text("first turn"),
        Reply::call("tally", json!({ "item": "a" })),
        Reply::text("never asked"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone()).budget(budget);
    let first = agent.send(&session, Some(alice()), "one").await.unwrap();
    assert!(matches!(first.outcome, AgentOutcome::Answered(_)));
    let second = agent.send(&session, Some(alice()), "two").await.unwrap();
    let request = waiting_on_limit(&second.outcome);
    let limits = &request.input.as_ref().unwrap()["limits"];
    assert_eq!(limits[0]["scope"], "session");
    assert_eq!(limits[0]["limit"], "cost");
    assert!((limits[0]["used"].as_f64().unwrap() - 0.0004).abs() < 1e-12);
    assert_eq!(model.requests().len(), 2);
    assert_eq!(fx.counted(), 1);

    // Without a price for the model, a cost limit cannot be counted: a clear error.
    let unpriced = Agent::new(fx.runtime.clone(), ScriptedModel::new([Reply::text("x")]))
        .budget(Budget::new().session(Limits::new().cost(1.0)));
    let other = fx.session("unpriced").await;
    unpriced.send(&other, Some(alice()), "one").await.unwrap();
    let error = unpriced
        .send(&other, Some(alice()), "two")
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no price is configured for model `scripted`"),
        "{error}"
    );
}

#[tokio::test]
async fn token_limits_apply_per_turn_and_per_session_independently() {
    let fx = Fixture::new();
    let session = fx.session("tokens").await;
    let budget = Budget::new()
        .turn(Limits::new().output_tokens(10))
        .session(Limits::new().input_tokens(1000));
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })),
        Reply::call("tally", json!({ "item": "b" })),
        Reply::text("never asked"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone()).budget(budget);
    let run = agent.send(&session, Some(alice()), "count").await.unwrap();
    let request = waiting_on_limit(&run.outcome);
    let limits = &request.input.as_ref().unwrap()["limits"];
    assert_eq!(limits.as_array().unwrap().len(), 1, "{limits}");
    assert_eq!(limits[0]["limit"], "output_tokens");
    assert_eq!(limits[0]["used"], 10.0);
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn invalid_input_is_shown_to_the_model_and_retried_up_to_the_limit() {
    let fx = Fixture::new();
    let session = fx.session("invalid").await;
    let model = ScriptedModel::new([
        Reply::call("transfer", json!({ "cents": "ten", "to": "bob" })),
        Reply::call("transfer", json!({ "cents": 10 })),
        Reply::text("never asked"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    let error = agent
        .send(&session, Some(alice()), "pay bob")
        .await
        .unwrap_err();
    let AgentError::InvalidInput {
        tool,
        attempts,
        allowed,
        message,
    } = &error
    else {
        panic!("the second invalid input in a row fails the turn: {error:?}");
    };
    assert_eq!((tool.as_str(), *attempts, *allowed), ("transfer", 2, 1));
    assert!(
        message.contains("to"),
        "the last validation message: {message}"
    );
    assert!(error.to_string().contains("invalid input 2 times in a row"));
    // The model saw the first validation message, as the call's result.
    let second = &model.requests()[1];
    let shown = second
        .messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult { output, error, .. } => Some((output.to_text(), *error)),
            _ => None,
        })
        .unwrap();
    assert_eq!(shown.1, Some(toolwright::ErrorCode::InvalidInput));
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn a_valid_call_resets_the_count_and_the_agent_may_allow_more() {
    let fx = Fixture::new();
    let session = fx.session("reset").await;
    let model = ScriptedModel::new([
        Reply::call("transfer", json!({ "cents": "ten", "to": "bob" })),
        Reply::call("transfer", json!({ "cents": 10, "to": "bob" })),
        Reply::call("transfer", json!({ "to": "bob" })),
        Reply::call("transfer", json!({ "cents": -1, "to": "bob" })),
        Reply::text("paid"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone()).input_retries(2);
    let run = agent
        .send(&session, Some(alice()), "pay bob")
        .await
        .unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );
}

/// A model whose first attempt streams half a tool call and breaks off; the second attempt
/// answers with a whole call of other arguments.
struct CutMidCall {
    attempts: Mutex<usize>,
    then: ScriptedModel,
}

impl Model for CutMidCall {
    fn tool_format(&self) -> Format {
        Format::OpenAiStrict
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        let first = {
            let mut attempts = self.attempts.lock().unwrap();
            *attempts += 1;
            *attempts == 1
        };
        if !first {
            return self.then.stream(request);
        }
        let events = vec![
            Ok(StreamEvent::ToolCallStart {
                index: 0,
                call_id: "cut_1".into(),
                name: "tally".into(),
            }),
            Ok(StreamEvent::ToolCallDelta {
                index: 0,
                arguments: r#"{"item": "half"#.into(),
            }),
            Err(ModelError::Transport("the response broke off".into())),
        ];
        Box::pin(async move { Ok(Box::pin(stream::iter(events)) as ResponseStream) })
    }
}

#[tokio::test]
async fn a_stream_cut_mid_call_is_sent_again_and_only_the_whole_call_runs() {
    let fx = Fixture::new();
    let session = fx.session("cut").await;
    let model = CutMidCall {
        attempts: Mutex::new(0),
        then: ScriptedModel::new([
            Reply::call("tally", json!({ "item": "whole" })),
            Reply::text("counted"),
        ]),
    };
    let then = model.then.clone();
    let agent = Agent::new(fx.runtime.clone(), model)
        .retry(RetryPolicy::default().backoff(Duration::from_millis(1), Duration::from_millis(2)));
    let mut events = agent.subscribe();
    let run = agent.send(&session, Some(alice()), "count").await.unwrap();
    assert!(matches!(run.outcome, AgentOutcome::Answered(_)));
    assert_eq!(fx.counted(), 1, "the half call never ran");
    let results: Vec<String> = then.requests()[1]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult { output, .. } => Some(output.to_text()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("whole counted"), "{results:?}");
    let mut retried = false;
    while let Ok(event) = events.try_recv() {
        retried |= matches!(
            event,
            AgentEvent::Model {
                event: StreamEvent::Retrying { attempt: 2, .. },
                ..
            }
        );
    }
    assert!(retried, "subscribers learn the first attempt is void");
}

#[tokio::test]
async fn a_rate_limited_request_waits_its_retry_after_and_goes_on() {
    let fx = Fixture::new();
    let session = fx.session("rate").await;
    let limited = ModelError::Http {
        status: 429,
        message: "Rate limit reached".into(),
        code: Some("rate_limit_exceeded".into()),
        retry_after: Some(Duration::from_millis(5)),
    };
    let model = ScriptedModel::new([Reply::fail(limited.clone()), Reply::text("hi")]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    let run = agent.send(&session, Some(alice()), "hello").await.unwrap();
    assert!(matches!(run.outcome, AgentOutcome::Answered(_)));
    assert_eq!(model.requests().len(), 2);

    // With retries off, the provider's error is the loop's.
    let model = ScriptedModel::new([Reply::fail(limited.clone())]);
    let agent = Agent::new(fx.runtime.clone(), model).retry(RetryPolicy::none());
    let other = fx.session("rate-none").await;
    let error = agent
        .send(&other, Some(alice()), "hello")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AgentError::Model(e) if *e == limited),
        "{error:?}"
    );
}

#[tokio::test]
async fn instructions_and_tools_are_the_same_bytes_at_every_request() {
    let fx = Fixture::new();
    let session = fx.session("prefix").await;
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })),
        Reply::call("tally", json!({ "item": "b" })),
        Reply::text("counted"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone()).instructions("Count things.");
    agent.send(&session, Some(alice()), "count").await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for later in &requests[1..] {
        // A provider's prompt cache keys on the prefix: instructions, then tools.
        assert_eq!(later.instructions, requests[0].instructions);
        assert_eq!(
            later.tools.json().as_bytes(),
            requests[0].tools.json().as_bytes()
        );
        // And the conversation only grows: each request starts with the previous one's.
        assert!(later.messages.len() > requests[0].messages.len());
    }
    assert_eq!(
        requests[2].messages[..requests[1].messages.len()],
        requests[1].messages[..]
    );
}

/// A model that first answers as Anthropic does when it pauses a long turn (`pause_turn`).
struct Pausing {
    inner: ScriptedModel,
}

impl Model for Pausing {
    fn tool_format(&self) -> Format {
        Format::Anthropic
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        let first = self.inner.requests().is_empty();
        Box::pin(async move {
            let stream = self.inner.stream(request).await?;
            if !first {
                return Ok(stream);
            }
            let events: Vec<_> = futures_util::StreamExt::collect::<Vec<_>>(stream).await;
            let paused = events.into_iter().map(|event| match event {
                Ok(StreamEvent::Completed(mut response)) => {
                    response.finish_reason =
                        toolwright::agent::FinishReason::Other("pause_turn".into());
                    Ok(StreamEvent::Completed(response))
                }
                other => other,
            });
            Ok(Box::pin(stream::iter(paused.collect::<Vec<_>>())) as ResponseStream)
        })
    }
}

#[tokio::test]
async fn a_paused_turn_is_sent_again_to_go_on() {
    let fx = Fixture::new();
    let session = fx.session("paused").await;
    let inner = ScriptedModel::new([Reply::text("Searching…"), Reply::text("Found it.")]);
    let agent = Agent::new(
        fx.runtime.clone(),
        Pausing {
            inner: inner.clone(),
        },
    );
    let run = agent.send(&session, Some(alice()), "search").await.unwrap();
    let AgentOutcome::Answered(response) = run.outcome else {
        panic!("{:?}", run.outcome);
    };
    assert_eq!(response.message.text, "Found it.");
    let second = &inner.requests()[1];
    assert_eq!(
        second
            .messages
            .last()
            .and_then(Message::as_assistant)
            .map(|a| a.text.as_str()),
        Some("Searching…"),
        "the paused message goes back last"
    );
}

#[tokio::test]
async fn a_tools_own_input_retries_take_precedence_over_the_agents() {
    let fx = Fixture::new();
    let session = fx.session("own-limit").await;
    let model = ScriptedModel::new([
        Reply::call("wire", json!({ "cents": 10 })),
        Reply::text("never asked"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone()).input_retries(5);
    let error = agent
        .send(&session, Some(alice()), "wire bob")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AgentError::InvalidInput { tool, attempts: 1, allowed: 0, .. } if tool == "wire"),
        "{error:?}"
    );
    assert_eq!(
        model.requests().len(),
        1,
        "no retry for `input_retries = 0`"
    );
    let run = fx
        .runtime
        .turn(&fx.last_turn("own-limit").await)
        .await
        .unwrap();
    assert_eq!(run.record().await.unwrap().status, TurnStatus::Cancelled);
}

#[tokio::test]
async fn parallel_invalid_calls_of_a_tool_are_one_attempt() {
    let fx = Fixture::new();
    let session = fx.session("parallel-invalid").await;
    let model = ScriptedModel::new([
        Reply::call("transfer", json!({ "cents": "ten", "to": "bob" }))
            .and_call("transfer", json!({ "to": "carol" })),
        Reply::call("transfer", json!({ "cents": 10, "to": "bob" })),
        Reply::text("paid"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    let run = agent.send(&session, Some(alice()), "pay").await.unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "one response with two invalid calls leaves the one retry: {:?}",
        run.outcome
    );
}

#[tokio::test]
async fn a_new_turn_waits_until_the_sessions_waiting_turn_is_settled() {
    let fx = Fixture::new();
    let session = fx.session("busy").await;
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })).and_call("tally", json!({ "item": "b" }))
    ]);
    let agent = Agent::new(fx.runtime.clone(), model)
        .budget(Budget::new().turn(Limits::new().tool_calls(1)));
    let parked = agent.send(&session, Some(alice()), "count").await.unwrap();
    waiting_on_limit(&parked.outcome);
    let error = agent
        .send(&session, Some(alice()), "something else")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AgentError::TurnState { turn, .. } if *turn == parked.turn_id),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("answer and resume it, or cancel it"),
        "{error}"
    );
}

#[tokio::test]
async fn a_cancelled_turns_calls_reach_the_next_request_with_what_they_did() {
    let fx = Fixture::new();
    let session = fx.session("cancelled").await;
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })).and_call("publish", json!({ "item": "b" })),
        Reply::text("next turn"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    let run = agent
        .send(&session, Some(alice()), "count and publish")
        .await
        .unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Waiting(_)),
        "{:?}",
        run.outcome
    );
    assert_eq!(fx.counted(), 1, "the tally ran; the publish waits");
    fx.runtime
        .turn(&run.turn_id)
        .await
        .unwrap()
        .cancel()
        .await
        .unwrap();

    agent.send(&session, Some(alice()), "hello").await.unwrap();
    let results: Vec<(String, bool)> = model.requests()[1]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult {
                output, is_error, ..
            } => Some((output.to_text(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].0.contains("a counted (1)") && !results[0].1,
        "the call that ran keeps its result: {results:?}"
    );
    assert!(results[1].1, "the cancelled one failed: {results:?}");
    assert_eq!(fx.counted(), 1);
}
