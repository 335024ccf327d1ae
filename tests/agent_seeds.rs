//! The model loop over the seeds' tools (`examples/seed`), driven by a script: an approval that
//! parks the turn and is resumed by another process on the same SQLite file, `once` memory
//! across turns, a workflow's question answered through `Runtime::respond`, a task whose result
//! reaches the model in a later request, taint making a write ask, a tool that ends the turn,
//! and a deferred tool found through `tool_search`, then called.
//!
//! Every scenario runs on the scripted model itself (`scripted::<scenario>`) and through each
//! HTTP adapter against a `LoopbackProvider` serving the same script in that adapter's wire
//! format (`chat_completions::<scenario>`, `responses::<scenario>`, `anthropic::<scenario>`):
//! what the loop does must not depend on how the model is reached.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::Principal;
use toolwright::agent::{
    Agent, AgentEvent, AgentOutcome, Anthropic, Backend, ChatCompletions, LoopbackProvider,
    Message, Model, ModelError, Reply, Request, ResponseStream, Responses, ScriptedModel, Wire,
};
use toolwright::prelude::*;
use toolwright::registry::Format;
use toolwright::runtime::{
    Event, InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore,
};

#[path = "../examples/seed/mod.rs"]
#[allow(dead_code)] // reason: the loop drives a few seed tools, not every helper of the fakes
mod seed;

use seed::ops::OpsBackend;
use seed::release::Releases;
use seed::treehole::Treehole;
use seed::wallet::Wallet;

/// Holds `transcode` bodies until the test opens it.
#[derive(Clone)]
struct Gate(Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TranscodeArgs {
    /// The video.
    video: String,
}

/// Transcodes a video for the web; takes minutes, so it runs as a task.
#[tool(effect = write, workflow = task)]
async fn transcode(args: TranscodeArgs, gate: State<Gate>) -> Result<String, ToolError> {
    let permit = gate.0.0.acquire().await;
    permit.map_err(|e| ToolError::new(e.to_string()))?.forget();
    Ok(format!("https://cdn.example/{}.webm", args.video))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RoomArgs {
    /// What the meeting is about.
    topic: String,
}

/// Books a meeting room, asking the user which half of the day suits them.
#[tool(effect = write, workflow = execute)]
async fn book_room(args: RoomArgs, ctx: WorkflowContext) -> Result<String, ToolError> {
    let slot = ctx
        .ask(
            AskRequest::new(format!("Morning or afternoon for \"{}\"?", args.topic))
                .option(AskOption::new("am", "Morning"))
                .option(AskOption::new("pm", "Afternoon")),
        )
        .await?;
    let half = if slot.chose("pm") { "14:00" } else { "09:00" };
    Ok(format!("room 4.2 booked at {half} for {}", args.topic))
}

/// A scripted model whose answer loses a race: while it answers, another writer takes the
/// conversation's next position (where the model's message with its calls goes).
struct Raced {
    inner: Scripted,
    runtime: Runtime,
    session: String,
}

impl Model for Raced {
    fn tool_format(&self) -> Format {
        self.inner.tool_format()
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        Box::pin(async move {
            let next = request.messages.len() as u64;
            let other = [json!({ "role": "user", "text": "from another process" })];
            self.runtime
                .store()
                .append_conversation(&self.session, "elsewhere", next, &other)
                .await
                .expect("the other writer appends");
            self.inner.stream(request).await
        })
    }
}

fn runtime_on(path: &Path) -> Runtime {
    runtime_with(path, Gate::default())
}

fn runtime_with(path: &Path, gate: Gate) -> Runtime {
    Runtime::builder(Registry::collect().expect("the seed tools collect"))
        .store(SqliteStore::open(path).expect("the store opens"))
        .state(OpsBackend::default())
        .state(Releases::default())
        .state(Treehole::default())
        .state(Wallet::default())
        .state(gate)
        .build()
        .expect("every state the seed tools need is registered")
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct SummaryArgs {
    /// The text to summarize.
    text: String,
}

/// Summarizes a text in one sentence, with the model.
#[tool(effect = read)]
async fn summarize(args: SummaryArgs, ctx: ToolContext) -> Result<String, ToolError> {
    ctx.model()
        .prompt(format!("Summarize in one sentence: {}", args.text))
        .text()
        .await
}

/// A scripted model that opens `gate` when it is asked for the second time: what the task's
/// body waits for happens only after the model has seen the task's receipt.
struct OpensGate {
    inner: Scripted,
    gate: Gate,
    asked: AtomicUsize,
}

impl Model for OpensGate {
    fn tool_format(&self) -> Format {
        self.inner.tool_format()
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        if self.asked.fetch_add(1, Ordering::SeqCst) == 1 {
            self.gate.0.add_permits(1);
        }
        self.inner.stream(request)
    }
}

/// Where a scenario's model answers from.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// The scripted model, in process.
    Scripted,
    /// The adapter of `Wire`, over HTTP to a loopback provider serving the script.
    Http(Wire),
}

impl Via {
    /// Its name in the child process's environment.
    fn key(self) -> &'static str {
        match self {
            Via::Scripted => "scripted",
            Via::Http(Wire::ChatCompletions) => "chat_completions",
            Via::Http(Wire::Responses) => "responses",
            Via::Http(Wire::Anthropic) => "anthropic",
            Via::Http(other) => panic!("no adapter for {other} yet"),
        }
    }

    fn from_key(key: &str) -> Via {
        match key {
            "scripted" => Via::Scripted,
            "chat_completions" => Via::Http(Wire::ChatCompletions),
            "responses" => Via::Http(Wire::Responses),
            "anthropic" => Via::Http(Wire::Anthropic),
            other => panic!("unknown model `{other}`"),
        }
    }
}

/// The model of a scenario: `replies` answered through its [`Via`], with the provider-neutral
/// requests the loop sent kept whatever the wire.
#[derive(Clone)]
struct Scripted {
    model: Arc<dyn Model>,
    requests: Arc<Mutex<Vec<Request>>>,
    source: Source,
}

/// What holds the script.
#[derive(Clone)]
enum Source {
    Script(ScriptedModel),
    Loopback(Arc<LoopbackProvider>),
}

impl Scripted {
    async fn new(via: Via, replies: impl IntoIterator<Item = Reply>) -> Scripted {
        let (model, source): (Arc<dyn Model>, _) = match via {
            Via::Scripted => {
                let script = ScriptedModel::new(replies);
                (Arc::new(script.clone()), Source::Script(script))
            }
            Via::Http(wire) => {
                let provider = LoopbackProvider::start(wire, replies)
                    .await
                    .expect("the loopback provider starts");
                (adapter(&provider), Source::Loopback(Arc::new(provider)))
            }
        };
        Scripted {
            model,
            requests: Arc::default(),
            source,
        }
    }

    /// The requests it was sent, in order.
    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// How many replies are left.
    fn remaining(&self) -> usize {
        match &self.source {
            Source::Script(script) => script.remaining(),
            Source::Loopback(provider) => provider.remaining(),
        }
    }

    /// Whether the last request body the provider received holds `text`; `None` in process.
    fn provider_saw(&self, text: &str) -> Option<bool> {
        let Source::Loopback(provider) = &self.source else {
            return None;
        };
        let body = provider.requests().pop().expect("the provider was asked");
        // The body as JSON text escapes quotes; the texts looked for have none.
        Some(body.to_string().contains(text))
    }
}

/// The adapter of the provider's wire, pointed at it.
fn adapter(provider: &LoopbackProvider) -> Arc<dyn Model> {
    match provider.wire() {
        Wire::ChatCompletions => Arc::new(
            ChatCompletions::new("gpt-4.1")
                .base_url(provider.base_url())
                .api_key("sk-loopback"),
        ),
        Wire::Responses => Arc::new(
            Responses::new("gpt-4.1")
                .base_url(provider.base_url())
                .api_key("sk-loopback"),
        ),
        Wire::Anthropic => Arc::new(
            Anthropic::new("claude-sonnet-4-5")
                .base_url(provider.base_url())
                .api_key("sk-ant-loopback"),
        ),
        other => panic!("no adapter for {other} yet"),
    }
}

impl Model for Scripted {
    fn tool_format(&self) -> Format {
        self.model.tool_format()
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        self.requests.lock().unwrap().push(request.clone());
        self.model.stream(request)
    }
}

/// Tests `scripted::<scenario>` and `<wire>::<scenario>` for each scenario: one module per
/// model, one test per scenario.
macro_rules! on_every_model {
    ($($scenario:ident),* $(,)?) => {
        on_model!(scripted, Via::Scripted, $($scenario),*);
        on_model!(chat_completions, Via::Http(Wire::ChatCompletions), $($scenario),*);
        on_model!(responses, Via::Http(Wire::Responses), $($scenario),*);
        on_model!(anthropic, Via::Http(Wire::Anthropic), $($scenario),*);
    };
}

macro_rules! on_model {
    ($module:ident, $via:expr, $($scenario:ident),*) => {
        mod $module {
            #[allow(unused_imports)] // reason: `Wire` only names the HTTP models
            use super::{Via, Wire};
            $(
                #[tokio::test]
                async fn $scenario() {
                    super::$scenario($via).await;
                }
            )*
        }
    };
}

on_every_model!(
    an_approval_parks_the_turn_and_another_process_resumes_it_from_the_store,
    a_tool_that_ends_the_turn_ends_the_run,
    a_deferred_tool_is_found_through_tool_search_and_then_called,
    an_approval_remembered_once_is_not_asked_again_in_the_session,
    a_workflows_question_parks_the_turn_and_the_answer_resumes_the_loop,
    a_tasks_result_reaches_the_model_in_a_later_request,
    untrusted_output_makes_a_later_write_ask,
    a_step_whose_record_is_refused_neither_stores_its_calls_nor_runs_them,
    the_agents_model_answers_the_tools_it_runs,
);

fn alice() -> Principal {
    Principal::user("oidc", "alice")
}

/// The results the model was shown in its last request.
fn last_results(model: &Scripted) -> Vec<(String, String, bool)> {
    let requests = model.requests();
    let last = requests.last().expect("the model was asked");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult {
                name,
                output,
                is_error,
                ..
            } => Some((name.clone(), output.to_text(), *is_error)),
            _ => None,
        })
        .collect()
}

async fn an_approval_parks_the_turn_and_another_process_resumes_it_from_the_store(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");

    // The first process: the model calls `restart_service`, which asks; the turn parks.
    let (turn_id, request_id) = {
        let runtime = runtime_on(&path);
        let session = runtime
            .open_session(SessionSpec::new("ops-1").initiator(alice()))
            .await
            .unwrap();
        let model = Scripted::new(via, [Reply::call(
            "restart_service",
            json!({ "service": "payment-api", "reason": "p99 latency doubled since the deploy" }),
        )
        .saying("I'll restart it.")]).await;
        let agent = Agent::new(runtime.clone(), model.clone()).instructions("You run ops.");
        let run = agent
            .send(&session, Some(alice()), "payment-api is slow, restart it")
            .await
            .unwrap();
        let AgentOutcome::Waiting(requests) = run.outcome else {
            panic!("the restart asks first: {:?}", run.outcome);
        };
        assert_eq!(requests.len(), 1);
        assert!(
            requests[0].prompt.starts_with("Restart payment-api?"),
            "{requests:?}"
        );
        let first = &model.requests()[0];
        assert!(
            first
                .instructions
                .as_deref()
                .unwrap()
                .starts_with("You run ops.")
        );
        assert!(first.tools.json().contains("restart_service"));
        // Asking again before anyone answered gives the same requests back.
        let again = agent.resume(&run.turn_id).await.unwrap();
        assert_eq!(again.outcome, AgentOutcome::Waiting(requests.clone()));
        (run.turn_id, requests[0].request_id.clone())
    };

    // Another process on the same file: the approval runs the call; the agent resumes the turn
    // with nothing replayed by the caller.
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, &path)
        .env(CHILD_TURN, &turn_id)
        .env(CHILD_REQUEST, &request_id)
        .env(CHILD_VIA, via.key())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let seen: serde_json::Value = stdout
        .lines()
        .find_map(|line| line.split_once("RESUMED ").map(|(_, rest)| rest))
        .map(|line| serde_json::from_str(line).unwrap())
        .unwrap_or_else(|| {
            panic!(
                "the other process resumed nothing ({}):\n{stdout}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert_eq!(seen["turn_id"], json!(turn_id));
    assert_eq!(seen["answer"], "Restarted payment-api.");
    assert_eq!(
        seen["first_message"], true,
        "the conversation came from the store, the person's message first"
    );
    let results = seen["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0][0], "restart_service");
    assert_eq!(results[0][2], false, "{results:?}");
    assert!(
        results[0][1]
            .as_str()
            .unwrap()
            .contains("Note from the approver: go ahead"),
        "{results:?}"
    );
    assert_eq!(
        seen["stored"], 4,
        "user, assistant with the call, result, answer"
    );
    assert_eq!(
        seen["completed_resumes"], "refused",
        "a completed turn has nothing left to run"
    );
    assert_ne!(
        seen["provider_saw_the_note"], false,
        "the resumed step's result reached the provider in its wire format"
    );
}

/// Where the child process finds the parked turn (see the test above).
const CHILD_DB: &str = "TOOLWRIGHT_AGENT_CHILD_DB";
const CHILD_TURN: &str = "TOOLWRIGHT_AGENT_CHILD_TURN";
const CHILD_REQUEST: &str = "TOOLWRIGHT_AGENT_CHILD_REQUEST";
const CHILD_VIA: &str = "TOOLWRIGHT_AGENT_CHILD_VIA";

/// The other process of the approval test: approves the parked request, resumes the turn with a
/// fresh agent and prints what the model was shown. Does nothing unless the parent set it up.
#[tokio::test]
async fn child_entry() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let (turn_id, request_id) = (
        std::env::var(CHILD_TURN).unwrap(),
        std::env::var(CHILD_REQUEST).unwrap(),
    );
    let via = Via::from_key(&std::env::var(CHILD_VIA).unwrap());
    let runtime = runtime_on(Path::new(&path));
    let outcome = runtime
        .respond(InputResponse::approve(&request_id, Some(alice())).note("go ahead"))
        .await
        .unwrap();
    assert!(matches!(outcome, RespondOutcome::Resumed(_)), "{outcome:?}");
    let model = Scripted::new(via, [Reply::text("Restarted payment-api.")]).await;
    let agent = Agent::new(runtime.clone(), model.clone());
    let run = agent.resume(&turn_id).await.unwrap();
    let AgentOutcome::Answered(response) = run.outcome else {
        panic!("the model answers after the restart: {:?}", run.outcome);
    };
    let first_message =
        model.requests()[0].messages[0] == Message::user("payment-api is slow, restart it");
    let stored = runtime.store().conversation("ops-1").await.unwrap();
    assert!(stored.iter().all(|e| e.turn_id == turn_id));
    let completed_resumes = match agent.resume(&turn_id).await {
        Ok(_) => "resumed",
        Err(_) => "refused",
    };
    let seen = json!({
        "turn_id": run.turn_id,
        "answer": response.message.text,
        "first_message": first_message,
        "results": last_results(&model),
        "stored": stored.len(),
        "completed_resumes": completed_resumes,
        "provider_saw_the_note": model.provider_saw("Note from the approver: go ahead"),
    });
    println!("RESUMED {seen}");
}

async fn a_tool_that_ends_the_turn_ends_the_run(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));
    let session = runtime
        .open_session(SessionSpec::new("chat-1"))
        .await
        .unwrap();
    let model = Scripted::new(via, [Reply::call("react", json!({ "emoji": "👍" }))]).await;
    let agent = Agent::new(runtime.clone(), model.clone());
    let run = agent
        .send(&session, Some(alice()), "thanks!")
        .await
        .unwrap();
    let AgentOutcome::Ended(results) = run.outcome else {
        panic!("react ends the turn: {:?}", run.outcome);
    };
    assert_eq!(results[0].tool, "react");
    assert_eq!(model.remaining(), 0);
    assert_eq!(
        model.requests().len(),
        1,
        "no request after the ending tool"
    );
    // The tool's description tells the model that calling it ends the turn.
    assert!(
        model.requests()[0]
            .tools
            .json()
            .contains("Calling this tool ends your turn.")
    );
}

async fn a_deferred_tool_is_found_through_tool_search_and_then_called(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));
    let session = runtime
        .open_session(SessionSpec::new("reports-1"))
        .await
        .unwrap();
    let model = Scripted::new(
        via,
        [
            Reply::call("tool_search", json!({ "query": "export a report as pdf" })),
            Reply::call("export_report", json!({ "report_id": "rpt_storefront" })),
            Reply::text("Exported to reports/rpt_storefront.pdf."),
        ],
    )
    .await;
    let agent = Agent::new(runtime.clone(), model.clone());
    let first_list = {
        let run = agent
            .send(
                &session,
                Some(alice()),
                "export the storefront report as PDF",
            )
            .await
            .unwrap();
        assert!(
            matches!(run.outcome, AgentOutcome::Answered(_)),
            "{:?}",
            run.outcome
        );
        model.requests()[0].tools.json().to_owned()
    };
    assert!(
        !first_list.contains("\"export_report\""),
        "deferred tools are not listed"
    );
    let requests = model.requests();
    let found = requests[1]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult { name, output, .. } if name == "tool_search" => Some(output),
            _ => None,
        })
        .expect("the search result reached the model");
    assert!(found.to_text().contains("export_report"), "{found:?}");
    let results = last_results(&model);
    let (name, text, is_error) = &results[1];
    assert_eq!(name, "export_report");
    assert!(
        !is_error && text.contains("rpt_storefront.pdf"),
        "{results:?}"
    );
}

async fn an_approval_remembered_once_is_not_asked_again_in_the_session(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));
    let session = runtime
        .open_session(SessionSpec::new("card-1").initiator(alice()))
        .await
        .unwrap();
    let recharge = json!({ "amount_cents": 5000 });
    let model = Scripted::new(
        via,
        [
            Reply::call("wallet__recharge", recharge.clone()),
            Reply::text("Recharged 50 yuan."),
            Reply::call("wallet__recharge", recharge.clone()),
            Reply::text("Recharged another 50 yuan."),
        ],
    )
    .await;
    let agent = Agent::new(runtime.clone(), model.clone());

    let first = agent
        .send(&session, Some(alice()), "top up my card with 50 yuan")
        .await
        .unwrap();
    let AgentOutcome::Waiting(requests) = first.outcome else {
        panic!("the first recharge asks: {:?}", first.outcome);
    };
    let outcome = runtime
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    assert!(matches!(outcome, RespondOutcome::Resumed(_)), "{outcome:?}");
    let resumed = agent.resume(&first.turn_id).await.unwrap();
    assert!(
        matches!(resumed.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        resumed.outcome
    );

    // A later turn of the same session: the same recharge runs without asking.
    let second = agent
        .send(&session, Some(alice()), "and 50 more, please")
        .await
        .unwrap();
    assert_ne!(second.turn_id, first.turn_id);
    let AgentOutcome::Answered(answer) = second.outcome else {
        panic!("`once` remembered the grant: {:?}", second.outcome);
    };
    assert_eq!(answer.message.text, "Recharged another 50 yuan.");
    let results = last_results(&model);
    let (name, text, is_error) = results.last().unwrap();
    assert_eq!(name, "wallet__recharge");
    assert!(!is_error && text.contains("15230"), "{results:?}");
    assert_eq!(model.remaining(), 0);
}

async fn a_workflows_question_parks_the_turn_and_the_answer_resumes_the_loop(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));
    let session = runtime
        .open_session(SessionSpec::new("rooms-1").initiator(alice()))
        .await
        .unwrap();
    let model = Scripted::new(
        via,
        [
            Reply::call("book_room", json!({ "topic": "quarterly review" })),
            Reply::text("Booked room 4.2 for the afternoon."),
        ],
    )
    .await;
    let agent = Agent::new(runtime.clone(), model.clone());
    let mut events = agent.subscribe();
    let run = agent
        .send(
            &session,
            Some(alice()),
            "book a room for the quarterly review",
        )
        .await
        .unwrap();
    let AgentOutcome::Waiting(requests) = run.outcome else {
        panic!("the workflow asks: {:?}", run.outcome);
    };
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].prompt.contains("Morning or afternoon"),
        "{requests:?}"
    );
    // The question reached the host's event stream too, for its user interface.
    let mut asked = false;
    while let Ok(event) = events.try_recv() {
        if let AgentEvent::Runtime(Event::InputRequested { request }) = event {
            asked |= request.request_id == requests[0].request_id;
        }
    }
    assert!(asked, "the loop relays the question");

    let outcome = runtime
        .respond(InputResponse::choose(
            &requests[0].request_id,
            Some(alice()),
            "Afternoon",
        ))
        .await
        .unwrap();
    assert!(matches!(outcome, RespondOutcome::Resumed(_)), "{outcome:?}");
    let resumed = agent.resume(&run.turn_id).await.unwrap();
    assert!(
        matches!(resumed.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        resumed.outcome
    );
    let results = last_results(&model);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("14:00"), "{results:?}");
}

async fn a_tasks_result_reaches_the_model_in_a_later_request(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::default();
    let runtime = runtime_with(&dir.path().join("agent.db"), gate.clone());
    let session = runtime
        .open_session(SessionSpec::new("videos-1").initiator(alice()))
        .await
        .unwrap();
    let script = Scripted::new(
        via,
        [
            Reply::call("transcode", json!({ "video": "launch" })),
            Reply::text("Transcoding has started; I'll tell you when it is done."),
            Reply::text("Your video is ready: https://cdn.example/launch.webm"),
        ],
    )
    .await;
    let model = OpensGate {
        inner: script.clone(),
        gate,
        asked: AtomicUsize::new(0),
    };
    let agent = Agent::new(runtime.clone(), model);
    let run = agent
        .send(&session, Some(alice()), "transcode the launch video")
        .await
        .unwrap();
    let AgentOutcome::Answered(answer) = run.outcome else {
        panic!("the model answers once the result is in: {:?}", run.outcome);
    };
    assert!(answer.message.text.contains("ready"), "{answer:?}");

    let requests = script.requests();
    assert_eq!(requests.len(), 3);
    let delivered = |request: &Request| {
        request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Context { text, .. } if text.contains("launch.webm")))
    };
    // The second request has the receipt, not the result: the body was still held.
    let receipt = requests[1]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult { name, output, .. } if name == "transcode" => Some(output),
            _ => None,
        })
        .expect("the receipt reached the model");
    assert!(receipt.to_text().contains("task_result"), "{receipt:?}");
    assert!(!delivered(&requests[1]), "{:?}", requests[1].messages);
    assert!(delivered(&requests[2]), "{:?}", requests[2].messages);
    assert!(
        runtime
            .turn(&run.turn_id)
            .await
            .unwrap()
            .open_tasks()
            .await
            .unwrap()
            .is_empty()
    );
}

async fn untrusted_output_makes_a_later_write_ask(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));

    // Untainted, the write runs at once.
    let clean = runtime
        .open_session(SessionSpec::new("treehole-clean").initiator(alice()))
        .await
        .unwrap();
    let model = Scripted::new(
        via,
        [
            Reply::call("treehole__send_code", json!({})),
            Reply::text("A code is on its way."),
        ],
    )
    .await;
    let agent = Agent::new(runtime.clone(), model);
    let run = agent
        .send(&clean, Some(alice()), "I want to post, send me the code")
        .await
        .unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );

    // After the model read strangers' posts, the same write asks and says why.
    let session = runtime
        .open_session(SessionSpec::new("treehole-1").initiator(alice()))
        .await
        .unwrap();
    let model = Scripted::new(
        via,
        [
            Reply::call("treehole__read", json!({ "limit": 3 })),
            Reply::call("treehole__send_code", json!({})),
        ],
    )
    .await;
    let agent = Agent::new(runtime.clone(), model.clone());
    let run = agent
        .send(&session, Some(alice()), "what's new on the treehole?")
        .await
        .unwrap();
    let AgentOutcome::Waiting(requests) = run.outcome else {
        panic!("the write after untrusted output asks: {:?}", run.outcome);
    };
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].tool.as_deref(), Some("treehole__send_code"));
    assert!(
        requests[0]
            .reasons
            .iter()
            .any(|r| r.contains("`treehole__read`")),
        "{:?}",
        requests[0].reasons
    );
    let record = runtime
        .turn(&run.turn_id)
        .await
        .unwrap()
        .record()
        .await
        .unwrap();
    assert_eq!(record.tainted_by.as_deref(), Some("treehole__read"));
}

async fn a_step_whose_record_is_refused_neither_stores_its_calls_nor_runs_them(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir.path().join("agent.db"));
    let session = runtime
        .open_session(SessionSpec::new("raced-1").initiator(alice()))
        .await
        .unwrap();
    let model = Raced {
        inner: Scripted::new(via, [Reply::call("treehole__send_code", json!({}))]).await,
        runtime: runtime.clone(),
        session: "raced-1".into(),
    };
    let mut events = runtime.subscribe();
    let agent = Agent::new(runtime.clone(), model);
    let error = agent
        .send(&session, Some(alice()), "send me the code")
        .await
        .expect_err("the step's write loses to the other writer");
    assert!(error.to_string().contains("raced-1#1"), "{error}");

    // The conversation has the person's message and the other writer's, not the model's
    // calls; the turn has no step; the tool did not run.
    let stored = runtime.store().conversation("raced-1").await.unwrap();
    let writers: Vec<&str> = stored.iter().map(|e| e.turn_id.as_str()).collect();
    assert_eq!(writers.len(), 2, "{stored:?}");
    assert_eq!(writers[1], "elsewhere");
    let turns: Vec<String> = std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|event| match event {
            Event::ActionResult { result, .. } => Some(result.tool.clone()),
            Event::TurnStarted { turn_id, .. } => Some(turn_id),
            _ => None,
        })
        .collect();
    assert_eq!(
        turns.len(),
        1,
        "a turn began and no call has a result: {turns:?}"
    );
    let record = runtime
        .turn(&turns[0])
        .await
        .unwrap()
        .record()
        .await
        .unwrap();
    assert_eq!(record.steps, 0, "{record:?}");
    assert!(record.pending.is_none() && record.last_step.is_none());
}

async fn the_agents_model_answers_the_tools_it_runs(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let model = Scripted::new(
        via,
        [
            Reply::call(
                "summarize",
                json!({ "text": "p99 doubled after 2.4; 2.3 was fine" }),
            ),
            Reply::text("The 2.4 release slowed the service."),
            Reply::text("In short: 2.4 made it slower."),
        ],
    )
    .await;
    let shared: Arc<dyn Model> = Arc::new(model.clone());
    let runtime = Runtime::builder(Registry::collect().unwrap())
        .store(SqliteStore::open(dir.path().join("agent.db")).unwrap())
        .state(OpsBackend::default())
        .state(Releases::default())
        .state(Treehole::default())
        .state(Wallet::default())
        .state(Gate::default())
        .model(Backend::shared(shared.clone()))
        .build()
        .unwrap();
    let session = runtime
        .open_session(SessionSpec::new("summary-1"))
        .await
        .unwrap();
    let agent = Agent::shared(runtime.clone(), shared);
    let run = agent
        .send(&session, Some(alice()), "what happened with 2.4?")
        .await
        .unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "the loop, the tool, the loop");
    assert!(
        requests[1].tools.is_empty(),
        "the tool's request has no tools"
    );
    assert_eq!(
        requests[1].messages,
        [Message::user(
            "Summarize in one sentence: p99 doubled after 2.4; 2.3 was fine"
        )]
    );
    let results = last_results(&model);
    assert!(
        results[0].1.contains("The 2.4 release slowed the service."),
        "{results:?}"
    );
}
