//! What tools reach of their session: session state written through the context (journaled in
//! durable and workflow bodies, unlocking conditional tools, over MCP too), the model input of
//! the step that made the call (`ctx.messages()`), and journaled steps' progress as events.

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, InputResponse, Runtime, SessionSpec, SqliteStore, StepOptions, StepOutcome,
};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, completed, drain, resumed, waiting};

const UNLOCKED: StateKey<bool> = StateKey::new("unlocked");
const VISITS: StateKey<u32> = StateKey::new("visits");

#[derive(Deserialize, JsonSchema, ToolInput)]
struct UnlockArgs {
    /// Whether to unlock (`false` locks again).
    on: bool,
}

/// Unlocks the vault for this session.
#[tool(effect = write)]
async fn unlock(args: UnlockArgs, ctx: ToolContext) -> Result<String, ToolError> {
    if args.on {
        ctx.set_session_state(&UNLOCKED, &true).await?;
    } else {
        ctx.remove_session_state(&UNLOCKED).await?;
    }
    Ok("done".to_owned())
}

fn unlocked(cx: &EnabledContext<'_>) -> bool {
    cx.get(&UNLOCKED).unwrap_or(false)
}

/// Opens the vault; exists only once `unlock` ran in the session.
#[tool(effect = read, enabled = unlocked)]
async fn open_vault(_: NoInput) -> String {
    "the vault is open".to_owned()
}

#[derive(Serialize, JsonSchema)]
struct Seen {
    /// How many messages of model input the call saw.
    count: usize,
    /// The first message, if any.
    first: Option<Value>,
}

/// Reports the model input it was called with.
#[tool(effect = write, approval = always)]
async fn echo_input(_: NoInput, ctx: ToolContext) -> Result<Seen, ToolError> {
    let messages = ctx.messages().await?;
    Ok(Seen {
        count: messages.len(),
        first: messages.first().cloned(),
    })
}

static VISITED: AtomicUsize = AtomicUsize::new(0);

#[derive(Serialize, JsonSchema)]
struct Visit {
    visits: u32,
    messages: usize,
}

/// Counts a visit in the session's state, then asks before finishing.
#[tool(effect = write, workflow = execute)]
async fn visit(_: NoInput, ctx: WorkflowContext) -> Result<Visit, ToolError> {
    ctx.step("greet", async {
        VISITED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .await?;
    let visits = ctx.session_state(&VISITS).await?.unwrap_or(0) + 1;
    ctx.set_session_state(&VISITS, &visits).await?;
    ctx.ask(AskRequest::new("Done visiting?").option(AskOption::new("yes", "Yes")))
        .await?;
    ctx.step("leave", async { Ok(()) }).await?;
    Ok(Visit {
        visits,
        messages: ctx.messages().await?.len(),
    })
}

/// Counts a visit inside a step (the step's record covers the write), then asks.
#[tool(effect = write, workflow = execute)]
async fn visit_in_step(_: NoInput, ctx: WorkflowContext) -> Result<u32, ToolError> {
    let visits: u32 = ctx
        .step("count", async {
            let visits = ctx.session_state(&VISITS).await?.unwrap_or(0) + 1;
            ctx.set_session_state(&VISITS, &visits).await?;
            Ok(visits)
        })
        .await?;
    ctx.ask(AskRequest::new("Done?").option(AskOption::new("yes", "Yes")))
        .await?;
    ctx.step("leave", async { Ok(()) }).await?;
    Ok(visits)
}

static INNER: AtomicUsize = AtomicUsize::new(0);

/// A step with a step inside it (a model ask inside a step journals the same way), then a
/// question.
#[tool(effect = write, workflow = execute)]
async fn nested(_: NoInput, ctx: WorkflowContext) -> Result<u32, ToolError> {
    let outer: u32 = ctx
        .step("outer", async {
            let inner: u32 = ctx
                .step("inner", async {
                    INNER.fetch_add(1, Ordering::SeqCst);
                    Ok(41)
                })
                .await?;
            Ok(inner + 1)
        })
        .await?;
    ctx.ask(AskRequest::new("Done?").option(AskOption::new("yes", "Yes")))
        .await?;
    ctx.step("after", async { Ok(()) }).await?;
    Ok(outer)
}

/// Reports, from a task of its own, how many messages of model input started it.
#[tool(effect = write, workflow = task)]
async fn count_later(_: NoInput, ctx: WorkflowContext) -> Result<Seen, ToolError> {
    let messages = ctx.messages().await?;
    Ok(Seen {
        count: messages.len(),
        first: messages.first().cloned(),
    })
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Revise {
    /// What to change.
    #[allow(dead_code)] // reason: the model fills it in; this body only reports its input
    change: String,
}

/// Revises a draft on request (pass the task_id to revise); says how many messages of model
/// input each revision came with.
#[tool(effect = write, workflow = serve)]
async fn revise(mut calls: ServeCalls<Revise, Seen>) -> Result<(), ToolError> {
    while let Some(call) = calls.next().await {
        let messages = call.messages().await?;
        call.reply(Seen {
            count: messages.len(),
            first: messages.first().cloned(),
        });
    }
    Ok(())
}

/// A step that fails: nothing is recorded.
#[tool(effect = write, durable)]
async fn failing(_: NoInput, ctx: DurableContext) -> Result<(), ToolError> {
    ctx.step("charge", async {
        Err::<(), _>(ToolError::new("the card was declined"))
    })
    .await
}

fn registry() -> Registry {
    Registry::from_tools([
        unlock::TOOL,
        open_vault::TOOL,
        echo_input::TOOL,
        visit::TOOL,
        visit_in_step::TOOL,
        nested::TOOL,
        count_later::TOOL,
        revise::TOOL,
        failing::TOOL,
    ])
    .unwrap()
}

fn runtime_on(path: &std::path::Path) -> Runtime {
    Runtime::builder(registry())
        .store(SqliteStore::open(path).unwrap())
        .build()
        .unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    runtime: Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let runtime = runtime_on(&path);
        Fixture {
            _dir: dir,
            path,
            runtime,
        }
    }

    async fn turn(
        &self,
        session: &str,
    ) -> (toolwright::runtime::Session, toolwright::runtime::Turn) {
        let session = self
            .runtime
            .open_session(SessionSpec::new(session).initiator(alice()))
            .await
            .unwrap();
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        (session, turn)
    }
}

#[tokio::test]
async fn a_tools_write_unlocks_a_conditional_tool_from_the_next_step() {
    let fx = Fixture::new();
    let (session, turn) = fx.turn("vault").await;
    let mut events = fx.runtime.subscribe();
    let refused = completed(
        turn.step(vec![call("c1", "open_vault", json!({}))])
            .await
            .unwrap(),
    );
    assert!(refused[0].is_error, "locked at first: {refused:?}");

    completed(
        turn.step(vec![call("c2", "unlock", json!({ "on": true }))])
            .await
            .unwrap(),
    );
    assert_eq!(
        session.record().await.unwrap().state.get("unlocked"),
        Some(&json!(true))
    );
    assert!(
        drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::SessionChanged { session_id } if session_id == "vault"))
    );
    let StepOutcome::Completed {
        results, notices, ..
    } = turn
        .step(vec![call("c3", "open_vault", json!({}))])
        .await
        .unwrap()
    else {
        panic!("the step completes");
    };
    assert_eq!(notices, ["New tool available: open_vault"]);
    assert_eq!(results[0].output, json!("the vault is open"));

    // Removing the key locks it again.
    completed(
        turn.step(vec![call("c4", "unlock", json!({ "on": false }))])
            .await
            .unwrap(),
    );
    assert!(
        !session
            .record()
            .await
            .unwrap()
            .state
            .contains_key("unlocked")
    );
    let locked = completed(
        turn.step(vec![call("c5", "open_vault", json!({}))])
            .await
            .unwrap(),
    );
    assert!(locked[0].is_error, "{locked:?}");
}

#[tokio::test]
async fn a_workflows_read_and_write_are_journaled_and_a_replay_does_not_write_again() {
    let fx = Fixture::new();
    let (session, turn) = fx.turn("visits").await;
    session.set_state(VISITS.name(), 4).await.unwrap();
    let visited = VISITED.load(Ordering::SeqCst);
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "visit", json!({}))])
            .await
            .unwrap(),
    );
    assert_eq!(
        session.record().await.unwrap().state.get("visits"),
        Some(&json!(5))
    );

    // The host changes the key while the body waits; the replay neither reads it again nor
    // writes over it.
    session.set_state(VISITS.name(), 40).await.unwrap();
    let other = runtime_on(&fx.path);
    let answer = InputResponse::choose(&requests[0].request_id, Some(alice()), "yes");
    let results = resumed(other.respond(answer).await.unwrap());
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(
        results[0].output["visits"], 5,
        "the replay read what the first run read"
    );
    assert_eq!(
        session.record().await.unwrap().state.get("visits"),
        Some(&json!(40)),
        "the replay did not write again"
    );
    assert_eq!(VISITED.load(Ordering::SeqCst), visited + 1);
    let journal = fx
        .runtime
        .store()
        .journal(&format!("{}/c1", turn.id()))
        .await
        .unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "greet",
            "toolwright.state.get:visits",
            "toolwright.state.set:visits",
            "ask#3",
            "leave"
        ]
    );
}

#[tokio::test]
async fn state_written_inside_a_step_is_covered_by_the_steps_record() {
    let fx = Fixture::new();
    let (session, turn) = fx.turn("in-step").await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "visit_in_step", json!({}))])
            .await
            .unwrap(),
    );
    session.set_state(VISITS.name(), 40).await.unwrap();
    let answer = InputResponse::choose(&requests[0].request_id, Some(alice()), "yes");
    let results = resumed(runtime_on(&fx.path).respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!(1), "{results:?}");
    assert_eq!(
        session.record().await.unwrap().state.get("visits"),
        Some(&json!(40)),
        "the replay returned the step's value without writing again"
    );
    let journal = fx
        .runtime
        .store()
        .journal(&format!("{}/c1", turn.id()))
        .await
        .unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["count", "ask#1", "leave"]);
}

#[tokio::test]
async fn a_step_inside_a_step_is_covered_by_the_outer_record() {
    let fx = Fixture::new();
    let (_, turn) = fx.turn("nested").await;
    let inner = INNER.load(Ordering::SeqCst);
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "nested", json!({}))])
            .await
            .unwrap(),
    );
    let answer = InputResponse::choose(&requests[0].request_id, Some(alice()), "yes");
    let results = resumed(runtime_on(&fx.path).respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!(42), "{results:?}");
    assert_eq!(
        INNER.load(Ordering::SeqCst),
        inner + 1,
        "the replay ran nothing"
    );
    let journal = fx
        .runtime
        .store()
        .journal(&format!("{}/c1", turn.id()))
        .await
        .unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["outer", "ask#1", "after"]);
}

#[tokio::test]
async fn a_journaled_steps_progress_is_told_as_events() {
    let fx = Fixture::new();
    let (_, turn) = fx.turn("progress").await;
    let mut events = fx.runtime.subscribe();
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "visit", json!({}))])
            .await
            .unwrap(),
    );
    let answer = InputResponse::choose(&requests[0].request_id, Some(alice()), "yes");
    resumed(fx.runtime.respond(answer).await.unwrap());
    let steps: Vec<Value> = drain(&mut events)
        .into_iter()
        .filter(|e| matches!(e, Event::ActionStep { .. }))
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            v["turn_id"] = json!("[turn]");
            v
        })
        .collect();
    insta::assert_json_snapshot!(steps);
}

#[tokio::test]
async fn the_hosts_messages_reach_the_call_after_a_park_in_another_process() {
    let fx = Fixture::new();
    let (_, turn) = fx.turn("input").await;
    let messages = vec![
        json!({ "role": "system", "content": "be brief" }),
        json!({ "role": "user", "content": "echo what I said" }),
    ];
    let (_, requests) = waiting(
        turn.step_with(
            vec![call("c1", "echo_input", json!({}))],
            StepOptions::new().messages(messages.clone()),
        )
        .await
        .unwrap(),
    );
    let other = runtime_on(&fx.path);
    let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
    let results = resumed(other.respond(answer).await.unwrap());
    assert_eq!(results[0].output["count"], 2);
    assert_eq!(results[0].output["first"], messages[0]);

    // A step without messages: the call sees none.
    let (_, requests) = waiting(
        turn.step(vec![call("c2", "echo_input", json!({}))])
            .await
            .unwrap(),
    );
    let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
    let results = resumed(fx.runtime.respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!({ "count": 0, "first": null }));
}

#[tokio::test]
async fn a_task_body_reads_the_messages_of_the_step_that_started_it() {
    let fx = Fixture::new();
    let (_, turn) = fx.turn("task").await;
    let messages = vec![json!({ "role": "user", "content": "later, please" })];
    let receipts = completed(
        turn.step_with(
            vec![call("c1", "count_later", json!({}))],
            StepOptions::new().messages(messages.clone()),
        )
        .await
        .unwrap(),
    );
    let task_id = receipts[0].output["task_id"].as_str().unwrap().to_owned();
    let results = turn
        .wait_task_results(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let result = results
        .iter()
        .find(|r| r.task_id == task_id)
        .expect("the task delivers");
    assert_eq!(result.result.output["count"], 1, "{result:?}");
    assert_eq!(result.result.output["first"], messages[0]);
}

/// The model loop records each step's input as a position in the session's conversation: a
/// tool reads the messages the model was sent, as the loop's own `Message`s.
#[cfg(feature = "agent")]
mod agent_loop {
    use serde_json::json;
    use toolwright::ContentPart;
    use toolwright::agent::{Agent, AgentOutcome, Message, Reply, ScriptedModel};
    use toolwright::prelude::*;
    use toolwright::runtime::{Runtime, SessionSpec, SqliteStore};

    use crate::support::alice;

    /// Says what the user asked for, read from the model input of the step.
    #[tool(effect = read)]
    async fn what_was_asked(_: NoInput, ctx: ToolContext) -> Result<String, ToolError> {
        let messages = ctx.messages().await?.decode::<Message>()?;
        let asked = messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::User { content } => content.iter().find_map(|part| match part {
                    ContentPart::Text { text } => Some(text.clone()),
                    _ => None,
                }),
                _ => None,
            })
            .unwrap_or_default();
        Ok(format!("{} messages; asked: {asked}", messages.len()))
    }

    #[tokio::test]
    async fn a_tool_reads_the_messages_the_model_was_sent() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = Runtime::builder(Registry::from_tools([what_was_asked::TOOL]).unwrap())
            .store(SqliteStore::open(dir.path().join("agent.db")).unwrap())
            .build()
            .unwrap();
        let session = runtime
            .open_session(SessionSpec::new("asked").initiator(alice()))
            .await
            .unwrap();
        let model = ScriptedModel::new([
            Reply::call("what_was_asked", json!({})),
            Reply::call("what_was_asked", json!({})),
            Reply::text("done"),
        ]);
        let agent = Agent::new(runtime.clone(), model.clone());
        let run = agent
            .send(&session, Some(alice()), "find the second invoice")
            .await
            .unwrap();
        assert!(
            matches!(run.outcome, AgentOutcome::Answered(_)),
            "{:?}",
            run.outcome
        );
        let conversation = runtime.store().conversation("asked").await.unwrap();
        let results: Vec<String> = conversation
            .iter()
            .filter_map(
                |entry| match serde_json::from_value::<Message>(entry.message.clone()) {
                    Ok(Message::ToolResult { output, .. }) => {
                        Some(serde_json::to_string(&output).unwrap())
                    }
                    _ => None,
                },
            )
            .collect();
        // The first call saw the user's message; the second also the first call and its result.
        assert_eq!(results.len(), 2, "{results:?}");
        assert!(
            results[0].contains("1 messages; asked: find the second invoice"),
            "{results:?}"
        );
        assert!(
            results[1].contains("3 messages; asked: find the second invoice"),
            "{results:?}"
        );
        // What the tool read is what the model was sent.
        let requests = model.requests();
        assert_eq!(requests[0].messages.len(), 1);
        assert_eq!(requests[1].messages.len(), 3);
    }
}

/// Over MCP: a client's call of a tool that writes session state tells the client its list
/// changed, and the tool it unlocked is listed. The client here is a second runtime, through
/// its own MCP connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_is_told_of_the_tool_a_call_unlocked() {
    use std::time::{Duration, Instant};

    use toolwright::Effect;
    use toolwright::approval::RequestPolicy;
    use toolwright::mcp::{McpConnector, McpHttp, McpServer};
    use toolwright::runtime::{Connection, ToolOverride};

    let upstream = Fixture::new();
    let server = McpServer::new(upstream.runtime.clone());
    let http = McpHttp::new(server).start().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let downstream = Runtime::builder(Registry::from_tools([]).unwrap())
        .store(SqliteStore::open(dir.path().join("down.db")).unwrap())
        .connection(
            Connection::new(
                "up",
                McpConnector::http(format!("http://{}/mcp", http.addr())),
            )
            .allow_all()
            .trusted()
            .tool(
                "unlock",
                ToolOverride::new()
                    .effect(Effect::Read)
                    .approval(RequestPolicy::Never),
            ),
        )
        .build()
        .unwrap();
    downstream.connect().await.unwrap();
    let registry = downstream.registry();
    assert!(registry.get("up__unlock").is_some());
    assert!(registry.get("up__open_vault").is_none(), "locked at first");

    let session = downstream
        .open_session(SessionSpec::new("down").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let results = completed(
        turn.step(vec![call("c1", "up__unlock", json!({ "on": true }))])
            .await
            .unwrap(),
    );
    assert!(!results[0].is_error, "{results:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while downstream.registry().get("up__open_vault").is_none() {
        assert!(
            Instant::now() < deadline,
            "the client never heard that its list changed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn each_serve_call_reads_the_input_of_the_step_that_made_it() {
    let fx = Fixture::new();
    let (session, first) = fx.turn("revise").await;
    let opening = vec![json!({ "role": "user", "content": "draft the notes" })];
    let receipts = completed(
        first
            .step_with(
                vec![call("c1", "revise", json!({ "change": "draft" }))],
                StepOptions::new().messages(opening.clone()),
            )
            .await
            .unwrap(),
    );
    let task_id = receipts[0].output["task_id"].as_str().unwrap().to_owned();
    let results = first
        .wait_task_results(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(results[0].result.output["count"], 1);
    assert_eq!(results[0].result.output["first"], opening[0]);

    let second = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let later = vec![
        json!({ "role": "user", "content": "shorter" }),
        json!({ "role": "assistant", "content": "ok" }),
    ];
    completed(
        second
            .step_with(
                vec![call(
                    "c2",
                    "revise",
                    json!({ "change": "shorter", "task_id": task_id }),
                )],
                StepOptions::new().messages(later.clone()),
            )
            .await
            .unwrap(),
    );
    let results = second
        .wait_task_results(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(results[0].result.output["count"], 2, "{results:?}");
    assert_eq!(results[0].result.output["first"], later[0]);
}

#[tokio::test]
async fn a_failed_step_is_told_as_failed_and_left_unrecorded() {
    let fx = Fixture::new();
    let (_, turn) = fx.turn("failing").await;
    let mut events = fx.runtime.subscribe();
    let results = completed(
        turn.step(vec![call("c1", "failing", json!({}))])
            .await
            .unwrap(),
    );
    assert!(results[0].is_error, "{results:?}");
    let steps: Vec<(String, toolwright::runtime::StepProgress)> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ActionStep { step, progress, .. } => Some((step, progress)),
            _ => None,
        })
        .collect();
    use toolwright::runtime::StepProgress::{Failed, Started};
    assert_eq!(
        steps,
        [
            ("charge".to_owned(), Started),
            ("charge".to_owned(), Failed)
        ]
    );
    let journal = fx
        .runtime
        .store()
        .journal(&format!("{}/c1", turn.id()))
        .await
        .unwrap();
    assert!(journal.is_empty(), "{journal:?}");
}
