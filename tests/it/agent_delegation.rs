//! Models inside tools, with the agent installed as the runtime's model: `ctx.model()` asks
//! counted against the turn's budget, an ask with tools in a scratch session of the call, the
//! built-in `task` tool running subagents (their tool subsets, their approvals reaching the
//! parent's person, the depth limit), and a workflow body's `ctx.agent(name)` journaled so a
//! replay does not run the subagent again. All on a real SQLite file.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright::agent::{
    Agent, AgentEvent, AgentOutcome, Budget, Limits, Message, Reply, Request, ScriptedModel,
    Subagent,
};
use toolwright::prelude::*;
use toolwright::registry::task;
use toolwright::runtime::{
    Event, InputResponse, Options, RequestKind, Runtime, RuntimeError, SessionSpec, SqliteStore,
};

use crate::support::alice;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct QueryArgs {
    /// What to look up.
    q: String,
}

/// Looks a fact up.
#[tool(effect = read)]
async fn lookup(args: QueryArgs) -> Result<String, ToolError> {
    Ok(format!("{} is 42", args.q))
}

/// Reads the vault; never handed to subagents.
#[tool(effect = read, subagents = false)]
async fn vault(args: QueryArgs) -> Result<String, ToolError> {
    Ok(format!("secret {}", args.q))
}

/// Publishes a note, with a person's approval.
#[tool(effect = write, approval = always)]
async fn publish_note(args: QueryArgs) -> Result<String, ToolError> {
    Ok(format!("published {}", args.q))
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Finding {
    /// The answer.
    answer: u32,
}

/// Researches a topic with a model that may look facts up.
#[tool(effect = read)]
async fn research(args: QueryArgs, ctx: ToolContext) -> Result<Finding, ToolError> {
    ctx.model()
        .prompt(format!("Research {}", args.q))
        .system("You research with `lookup`.")
        .tools(["lookup"])
        .result::<Finding>()
        .await
}

/// Summarizes text with one model request.
#[tool(effect = read)]
async fn summarize(args: QueryArgs, ctx: ToolContext) -> Result<String, ToolError> {
    ctx.model()
        .prompt(format!("Summarize {}", args.q))
        .text()
        .await
}

/// Has a reviewer check a change, then asks the person to merge it.
#[tool(effect = write, workflow = execute)]
async fn review_and_merge(args: QueryArgs, ctx: WorkflowContext) -> Result<String, ToolError> {
    let verdict = ctx
        .agent("reviewer")
        .send(format!("Review {}", args.q))
        .text()
        .await?;
    let answer = ctx
        .ask(AskRequest::new(format!(
            "The reviewer says: {verdict}. Merge?"
        )))
        .await?;
    let merge = match answer {
        AskAnswer::Answered { text, .. } => text.unwrap_or_default(),
        other => format!("{other:?}"),
    };
    Ok(format!("{verdict}; merge: {merge}"))
}

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: Runtime,
}

impl Fixture {
    fn new() -> Self {
        Self::with_options(Options::default())
    }

    fn with_options(options: Options) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::from_tools([
            lookup::TOOL,
            vault::TOOL,
            publish_note::TOOL,
            research::TOOL,
            summarize::TOOL,
            review_and_merge::TOOL,
            task(),
        ])
        .expect("the tools register");
        let runtime = Runtime::builder(registry)
            .store(SqliteStore::open(dir.path().join("agent.db")).expect("the store opens"))
            .options(options)
            .build()
            .expect("the runtime builds");
        Fixture { _dir: dir, runtime }
    }

    async fn session(&self, id: &str) -> toolwright::runtime::Session {
        self.runtime
            .open_session(SessionSpec::new(id).initiator(alice()))
            .await
            .unwrap()
    }

    /// The stored conversation of `session`.
    async fn messages(&self, session: &str) -> Vec<Message> {
        self.runtime
            .store()
            .conversation(session)
            .await
            .unwrap()
            .into_iter()
            .map(|entry| serde_json::from_value(entry.message).unwrap())
            .collect()
    }
}

/// The names of the tools `request` offered.
fn offered(request: &Request) -> Vec<String> {
    let tools: serde_json::Value = serde_json::from_str(request.tools.json()).unwrap();
    let mut names: Vec<String> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t.pointer("/function/name")
                .or_else(|| t.get("name"))
                .and_then(|n| n.as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    names.sort();
    names
}

fn last_user_text(request: &Request) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { content } => Some(
                content
                    .iter()
                    .filter_map(|part| match part {
                        toolwright::ContentPart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

fn tool_results(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
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

#[tokio::test]
async fn an_ask_with_tools_runs_in_a_scratch_session_of_the_call() {
    let fx = Fixture::new();
    let session = fx.session("scratch").await;
    let model = ScriptedModel::new([
        Reply::call("research", json!({ "q": "the answer" })),
        // The scratch session: it looks the fact up, then answers with the result.
        Reply::call("lookup", json!({ "q": "the answer" })),
        Reply::text("```json\n{\"answer\": 42}\n```"),
        Reply::text("It is 42."),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    agent.install().unwrap();
    let run = agent
        .send(&session, Some(alice()), "research it")
        .await
        .unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );

    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // The scratch session sees only the tools the ask named, and its system prompt asks for
    // the result's schema.
    assert_eq!(offered(&requests[1]), ["lookup"]);
    let instructions = requests[1].instructions.as_deref().unwrap();
    assert!(
        instructions.starts_with("You research with `lookup`."),
        "{instructions}"
    );
    assert!(instructions.contains("JSON Schema"), "{instructions}");
    assert_eq!(last_user_text(&requests[1]), "Research the answer");

    let parent = fx.messages("scratch").await;
    let results = tool_results(&parent);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "research");
    assert!(!results[0].2, "{results:?}");
    assert!(results[0].1.contains("42"), "{results:?}");
    // What the scratch session used is on the call's result: two requests, one tool call.
    let usage = parent
        .iter()
        .find_map(|m| match m {
            Message::ToolResult { usage, .. } => *usage,
            _ => None,
        })
        .expect("the result carries the scratch session's usage");
    assert_eq!((usage.requests, usage.tool_calls), (2, 1));
    assert_eq!((usage.input_tokens, usage.output_tokens), (20, 10));

    // The scratch session stays for inspection, as a child of the caller's.
    let sessions: Vec<String> = fx
        .runtime
        .store()
        .conversation(&format!("scratch/{}/call_1_1/scratch", run.turn_id))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.turn_id)
        .collect();
    assert!(
        !sessions.is_empty(),
        "the scratch session keeps its conversation"
    );
    let (child, _) = fx
        .runtime
        .store()
        .session(&format!("scratch/{}/call_1_1/scratch", run.turn_id))
        .await
        .unwrap()
        .expect("the scratch session exists");
    assert_eq!(child.parent.as_deref(), Some("scratch"));
    assert_eq!(child.tools.as_deref(), Some(&["lookup".to_owned()][..]));
}

#[tokio::test]
async fn what_a_tools_model_uses_counts_against_the_turns_budget() {
    let fx = Fixture::new();
    let session = fx.session("budget").await;
    let model = ScriptedModel::new([
        Reply::call("summarize", json!({ "q": "the log" })),
        Reply::text("a short summary"),
        Reply::text("done"),
    ]);
    // Two model rounds of the turn's own, one more from the tool's ask: the third is over.
    let agent = Agent::new(fx.runtime.clone(), model.clone())
        .budget(Budget::new().turn(Limits::new().steps(2)));
    agent.install().unwrap();
    let run = agent
        .send(&session, Some(alice()), "summarize")
        .await
        .unwrap();
    let AgentOutcome::Waiting(requests) = &run.outcome else {
        panic!(
            "the tool's ask counts: the turn parks at its limit: {:?}",
            run.outcome
        );
    };
    assert_eq!(requests[0].kind, RequestKind::SessionLimit);
    assert_eq!(
        model.requests().len(),
        2,
        "no third round before the approval"
    );
    let messages = fx.messages("budget").await;
    let usage = messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult { usage, .. } => *usage,
            _ => None,
        })
        .unwrap();
    assert_eq!((usage.requests, usage.input_tokens), (1, 10));
}

#[tokio::test]
async fn the_task_tool_runs_a_subagent_with_its_own_tools() {
    let fx = Fixture::new();
    let session = fx.session("task").await;
    let model = ScriptedModel::new([
        Reply::call(
            "task",
            json!({ "agent": "researcher", "prompt": "Find the answer" }),
        ),
        // The subagent: a tool outside its subset is refused, its own works.
        Reply::call("vault", json!({ "q": "pin" })),
        Reply::call("lookup", json!({ "q": "the answer" })),
        Reply::text("The answer is 42."),
        Reply::text("The researcher says 42."),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone())
        .instructions("You coordinate.")
        .subagent(
            Subagent::new("researcher", "Finds facts.")
                .instructions("You find facts.")
                .tools(["lookup", "vault"]),
        );
    agent.install().unwrap();
    let run = agent
        .send(&session, Some(alice()), "find it")
        .await
        .unwrap();
    let AgentOutcome::Answered(response) = &run.outcome else {
        panic!("{:?}", run.outcome);
    };
    assert_eq!(response.message.text, "The researcher says 42.");

    let requests = model.requests();
    // The parent's prompt lists the subagents `task` reaches.
    let parent = requests[0].instructions.as_deref().unwrap();
    assert!(parent.starts_with("You coordinate."), "{parent}");
    assert!(parent.contains("- `researcher`: Finds facts."), "{parent}");
    // The subagent's session: its instructions, its subset without the `subagents = false`
    // tool, and the task as its message.
    assert_eq!(requests[1].instructions.as_deref(), Some("You find facts."));
    assert_eq!(offered(&requests[1]), ["lookup"]);
    assert_eq!(last_user_text(&requests[1]), "Find the answer");
    let child = format!("task/{}/call_1_1/researcher#1", run.turn_id);
    let results = tool_results(&fx.messages(&child).await);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].2, "the withheld tool is refused: {results:?}");
    assert_eq!(
        results[1],
        ("lookup".into(), "\"the answer is 42\"".into(), false)
    );

    // The parent sees the subagent's answer as the result.
    let parent = tool_results(&fx.messages("task").await);
    assert_eq!(parent, [("task".into(), "The answer is 42.".into(), false)]);
}

#[tokio::test]
async fn an_unknown_subagent_and_the_depth_limit_are_errors_the_model_sees() {
    let fx = Fixture::new();
    let session = fx.session("depth").await;
    let model = ScriptedModel::new([
        Reply::call("task", json!({ "agent": "nobody", "prompt": "x" })),
        Reply::call("task", json!({ "prompt": "Go deeper" })),
        // The general subagent tries to delegate again: one level is the limit.
        Reply::call("task", json!({ "prompt": "Deeper still" })),
        Reply::text("I cannot delegate further."),
        Reply::text("done"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone()).max_depth(1);
    agent.install().unwrap();
    let run = agent.send(&session, Some(alice()), "go").await.unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );
    let results = tool_results(&fx.messages("depth").await);
    assert!(results[0].2);
    assert!(
        results[0]
            .1
            .contains("there is no subagent `nobody`; the subagents are `general`"),
        "{results:?}"
    );
    assert_eq!(
        results[1],
        ("task".into(), "I cannot delegate further.".into(), false)
    );
    let child = format!("depth/{}/call_2_1/general#1", run.turn_id);
    let inner = tool_results(&fx.messages(&child).await);
    assert!(inner[0].2);
    assert!(
        inner[0]
            .1
            .contains("delegation is limited to 1 sessions deep"),
        "{inner:?}"
    );
}

#[tokio::test]
async fn a_subagents_approval_reaches_the_parents_person() {
    // The person answers after the parent call's timeout would have passed: the time it waits
    // for its subagent does not count.
    let timeout = std::time::Duration::from_secs(2);
    let fx = Fixture::with_options(Options {
        call_timeout: timeout,
        ..Options::default()
    });
    let session = fx.session("approve").await;
    let model = ScriptedModel::new([
        Reply::call(
            "task",
            json!({ "agent": "writer", "prompt": "Publish the note" }),
        ),
        Reply::call("publish_note", json!({ "q": "release notes" })),
        Reply::text("Published."),
        Reply::text("The writer published it."),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone())
        .subagent(Subagent::new("writer", "Writes and publishes.").tools(["publish_note"]));
    agent.install().unwrap();
    let mut events = agent.subscribe();
    let running = tokio::spawn({
        let agent = agent.clone();
        async move { agent.send(&session, Some(alice()), "publish").await }
    });
    // The subagent's approval request reaches the parent's subscribers, for the same person.
    let request = loop {
        match events.recv().await.unwrap() {
            AgentEvent::Runtime(Event::InputRequested { request })
                if request.kind == RequestKind::ToolApproval =>
            {
                break request;
            }
            _ => continue,
        }
    };
    assert_eq!(request.requester, Some(alice()));
    assert_eq!(request.tool.as_deref(), Some("publish_note"));
    tokio::time::sleep(timeout + std::time::Duration::from_secs(1)).await;
    let outcome = fx
        .runtime
        .respond(InputResponse::approve(&request.request_id, Some(alice())))
        .await
        .unwrap();
    assert!(
        matches!(outcome, toolwright::runtime::RespondOutcome::Resumed(_)),
        "{outcome:?}"
    );
    let run = running.await.unwrap().unwrap();
    let AgentOutcome::Answered(response) = &run.outcome else {
        panic!("{:?}", run.outcome);
    };
    assert_eq!(response.message.text, "The writer published it.");
    let parent = tool_results(&fx.messages("approve").await);
    assert_eq!(parent, [("task".into(), "Published.".into(), false)]);
}

#[tokio::test]
async fn a_workflow_bodys_subagent_is_journaled_and_not_run_again_on_replay() {
    let fx = Fixture::new();
    let session = fx.session("workflow").await;
    let model = ScriptedModel::new([
        Reply::call("review_and_merge", json!({ "q": "PR 7" })),
        Reply::text("looks good"),
        Reply::text("Merged."),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone())
        .subagent(Subagent::new("reviewer", "Reviews changes.").tools(["lookup"]));
    agent.install().unwrap();
    let run = agent
        .send(&session, Some(alice()), "merge PR 7")
        .await
        .unwrap();
    let AgentOutcome::Waiting(requests) = &run.outcome else {
        panic!("the body asks the person: {:?}", run.outcome);
    };
    assert_eq!(requests[0].kind, RequestKind::Question);
    assert!(
        requests[0]
            .prompt
            .contains("The reviewer says: looks good."),
        "{requests:?}"
    );
    assert_eq!(model.requests().len(), 2);
    fx.runtime
        .respond(InputResponse::answer(
            &requests[0].request_id,
            Some(alice()),
            "yes",
        ))
        .await
        .unwrap();
    let run = agent.resume(&run.turn_id).await.unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );
    // The body ran again from its journal: the reviewer's answer was replayed, not asked.
    assert_eq!(model.requests().len(), 3);
    let results = tool_results(&fx.messages("workflow").await);
    assert_eq!(
        results,
        [(
            "review_and_merge".into(),
            "\"looks good; merge: yes\"".into(),
            false
        )]
    );
}

#[tokio::test]
async fn a_runtime_takes_one_model() {
    let fx = Fixture::new();
    let agent = Agent::new(fx.runtime.clone(), ScriptedModel::new([]));
    agent.install().unwrap();
    let error = agent.install().unwrap_err();
    assert!(
        matches!(
            error,
            toolwright::agent::AgentError::Runtime(RuntimeError::ModelInstalled)
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_call_waiting_for_its_subagent_gives_up_its_place_among_concurrent_calls() {
    // One call at a time: the subagent's `lookup` runs only if the `task` call waiting for it
    // gives its place up. (Otherwise it waits for the place until the call times out.)
    let fx = Fixture::with_options(Options {
        concurrency: 1,
        call_timeout: std::time::Duration::from_secs(20),
        ..Options::default()
    });
    let session = fx.session("slots").await;
    let model = ScriptedModel::new([
        Reply::call("task", json!({ "prompt": "Look it up" })),
        Reply::call("lookup", json!({ "q": "the answer" })),
        Reply::text("It is 42."),
        Reply::text("done"),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone());
    agent.install().unwrap();
    let run = agent.send(&session, Some(alice()), "go").await.unwrap();
    assert!(
        matches!(run.outcome, AgentOutcome::Answered(_)),
        "{:?}",
        run.outcome
    );
    let parent = tool_results(&fx.messages("slots").await);
    assert_eq!(parent, [("task".into(), "It is 42.".into(), false)]);
}

#[tokio::test]
async fn a_subagent_gets_what_the_parent_turn_has_left_and_its_use_counts_there() {
    let fx = Fixture::new();
    let session = fx.session("capped").await;
    let model = ScriptedModel::new([
        Reply::call("task", json!({ "prompt": "Count everything" })),
        // The subagent: one round is all the parent turn has left.
        Reply::call("lookup", json!({ "q": "a" })),
        Reply::call("lookup", json!({ "q": "b" })),
    ]);
    let agent = Agent::new(fx.runtime.clone(), model.clone())
        .budget(Budget::new().turn(Limits::new().steps(2)));
    agent.install().unwrap();
    let mut events = agent.subscribe();
    let running = tokio::spawn({
        let agent = agent.clone();
        async move { agent.send(&session, Some(alice()), "go").await }
    });
    // The subagent reaches its cap and asks the parent's person to extend it.
    let request = loop {
        match events.recv().await.unwrap() {
            AgentEvent::Runtime(Event::InputRequested { request })
                if request.kind == RequestKind::SessionLimit =>
            {
                break request;
            }
            _ => continue,
        }
    };
    assert!(request.session_id.ends_with("/general#1"), "{request:?}");
    assert_eq!(request.requester, Some(alice()));
    assert_eq!(
        model.requests().len(),
        2,
        "the subagent's second round waits"
    );
    fx.runtime
        .respond(InputResponse::cancel(&request.request_id, Some(alice())))
        .await
        .unwrap();
    let run = running.await.unwrap().unwrap();
    // The task fails with the limit; what the subagent used counts in the parent's turn,
    // which is now at its own limit.
    let AgentOutcome::Waiting(requests) = &run.outcome else {
        panic!("{:?}", run.outcome);
    };
    assert_eq!(requests[0].kind, RequestKind::SessionLimit);
    assert_eq!(requests[0].session_id, "capped");
    let messages = fx.messages("capped").await;
    let results = tool_results(&messages);
    assert!(results[0].2, "{results:?}");
    assert!(
        results[0].1.contains("stopped before it finished"),
        "{results:?}"
    );
    let usage = messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult { usage, .. } => *usage,
            _ => None,
        })
        .expect("the failed task carries what its subagent used");
    assert_eq!((usage.requests, usage.tool_calls), (1, 1));
    assert_eq!(model.requests().len(), 2);
}
