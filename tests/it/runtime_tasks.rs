//! Workflow tasks (`workflow = task` and `workflow = serve`): a receipt at once, the result later
//! as a `task_result` message, a turn that cannot end while its tasks run, the `task_wait` and
//! `task_cancel` meta-tools, cancellation with cleanup (of a running and of a parked body),
//! `serve` calls routed by `task_id`, and tasks that outlive their process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::registry::Format;
use toolwright::runtime::{
    Event, InputResponse, Options, RespondOutcome, Runtime, RuntimeError, SqliteStore, StepOutcome,
    TaskStatus, ToolCall, Turn,
};
use toolwright::{Caller, Registry};

use crate::support::clock::ManualClock;
use crate::support::effects::EffectLog;
use crate::support::{alice, bob, text, turn_in};

/// Holds `render` bodies until the test opens it.
struct Gate(Arc<tokio::sync::Semaphore>);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RenderArgs {
    project: String,
}

#[derive(Serialize, JsonSchema)]
struct Rendered {
    url: String,
}

/// Renders a project's video; takes minutes, so it runs as a task.
#[tool(effect = write, workflow = task)]
async fn render(
    args: RenderArgs,
    ctx: WorkflowContext,
    gate: State<Gate>,
    effects: State<EffectLog>,
) -> Result<Rendered, ToolError> {
    let job: String = ctx
        .step("submit", async {
            effects.append("submit")?;
            Ok(format!("job-{}", args.project))
        })
        .await?;
    tokio::select! {
        permit = gate.0.0.acquire() => { permit.map_err(|e| ToolError::new(e.to_string()))?.forget(); }
        () = ctx.cancelled() => {
            // Cleanup runs with the token fired.
            ctx.step("cancel-job", async { effects.append("cancel-job") }).await?;
            return Err(ToolError::new("cancelled"));
        }
    }
    Ok(Rendered {
        url: format!("https://cdn.example/{job}.mp4"),
    })
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct MigrateArgs {
    table: String,
}

/// Migrates a table after an operator confirms, then waits an hour before dropping the old copy.
#[tool(effect = write, workflow = task)]
async fn migrate(
    args: MigrateArgs,
    ctx: WorkflowContext,
    effects: State<EffectLog>,
) -> Result<String, ToolError> {
    ctx.step("copy", async { effects.append("copy") }).await?;
    let go = ctx
        .ask(
            AskRequest::new(format!("Copied {}. Switch over?", args.table))
                .option(AskOption::new("switch", "Switch"))
                .option(AskOption::new("keep", "Keep the old table")),
        )
        .await?;
    if matches!(go, AskAnswer::Cancelled) {
        ctx.step("undo-copy", async { effects.append("undo-copy") })
            .await?;
        return Err(ToolError::new("cancelled"));
    }
    if !go.chose("switch") {
        return Ok(format!("{} kept", args.table));
    }
    ctx.step("switch", async { effects.append("switch") })
        .await?;
    ctx.sleep(Duration::from_secs(3600)).await?;
    ctx.step("drop-old", async { effects.append("drop-old") })
        .await?;
    Ok(format!("{} migrated", args.table))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PlanRequest {
    /// What to change in the plan.
    request: String,
}

#[derive(Clone, Serialize, JsonSchema)]
struct Plan {
    steps: Vec<String>,
}

/// Drafts a release plan and revises it on request.
#[tool(effect = write, workflow = serve)]
async fn plan_release(
    mut calls: ServeCalls<PlanRequest, Plan>,
    ctx: WorkflowContext,
    effects: State<EffectLog>,
) -> Result<(), ToolError> {
    let mut plan = Plan { steps: Vec::new() };
    let mut revision = 0;
    while let Some(call) = calls.next().await {
        revision += 1;
        let step: String = ctx
            .step(format!("revise-{revision}"), async {
                effects.append(&format!("revise-{revision}"))?;
                Ok(call.input.request.clone())
            })
            .await?;
        plan.steps.push(step);
        call.reply(plan.clone());
    }
    // Cleanup, journaled like any step: it must land after every replayed revision.
    ctx.step("serve-ended", async { effects.append("serve-ended") })
        .await?;
    Ok(())
}

/// Publishes the newsletter, after the user approves.
#[tool(effect = public, workflow = task, approval = always)]
async fn publish(_: NoInput, effects: State<EffectLog>) -> Result<String, ToolError> {
    effects.append("publish")?;
    Ok("published".into())
}

/// Reads the weather (a plain tool, to check the meta-tools are not listed without tasks).
#[tool(effect = read)]
async fn weather(_: NoInput) -> String {
    "sunny".into()
}

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    log: PathBuf,
    clock: ManualClock,
    gate: Arc<tokio::sync::Semaphore>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::at(1_000_000);
        Fixture {
            db: dir.path().join("db"),
            log: dir.path().join("effects"),
            _dir: dir,
            clock,
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }

    fn effects(&self) -> EffectLog {
        EffectLog(self.log.clone())
    }

    fn runtime(&self, gate: usize) -> Runtime {
        self.runtime_with(gate, Duration::from_secs(30))
    }

    fn runtime_with(&self, gate: usize, cleanup: Duration) -> Runtime {
        let registry = Registry::from_tools([
            render::TOOL,
            migrate::TOOL,
            plan_release::TOOL,
            publish::TOOL,
        ])
        .unwrap();
        self.gate.add_permits(gate);
        Runtime::builder(registry)
            .store(SqliteStore::open(&self.db).unwrap())
            .state(Gate(self.gate.clone()))
            .state(self.effects())
            .options(Options {
                task_cleanup: cleanup,
                ..self.clock.options()
            })
            .build()
            .unwrap()
    }
}

async fn call(turn: &Turn, id: &str, tool: &str, input: Value) -> toolwright::runtime::CallResult {
    match turn
        .step(vec![ToolCall::new(id, tool, input.to_string())])
        .await
        .unwrap()
    {
        StepOutcome::Completed { mut results, .. } => {
            std::sync::Arc::unwrap_or_clone(results.remove(0))
        }
        other => panic!("expected a completed step, got {other:?}"),
    }
}

fn task_id(result: &toolwright::runtime::CallResult) -> String {
    result.output["task_id"].as_str().unwrap().to_owned()
}

/// Waits until task `id` has `status` (the runner records it on a task of its own).
async fn until_status(rt: &Runtime, id: &str, wanted: impl Fn(TaskStatus) -> bool) -> TaskStatus {
    for _ in 0..500 {
        let status = rt.task(id).await.unwrap().status;
        if wanted(status) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "task {id} never reached the status: {:?}",
        rt.task(id).await.unwrap()
    );
}

/// The events `events` receives until one that `last` picks (included), waiting up to 10 s
/// for it: a task's events are sent after the write that made them, which a test may read
/// first.
async fn events_until(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    last: impl Fn(&Event) -> bool,
) -> Vec<Event> {
    let mut seen = Vec::new();
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Ok(event) => {
                    let done = last(&event);
                    seen.push(event);
                    if done {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "the event never came; seen: {seen:?}");
    seen
}

#[tokio::test]
async fn a_task_returns_a_receipt_and_its_result_arrives_later_as_a_message() {
    let fx = Fixture::new();
    let rt = fx.runtime(0);
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "render", Some(alice())).await;

    let receipt = call(&turn, "c1", "render", json!({ "project": "intro" })).await;
    assert!(!receipt.is_error, "{receipt:?}");
    let id = task_id(&receipt);
    assert!(id.starts_with("render-"), "{id}");
    assert_eq!(
        text(&receipt),
        format!("Started task {id}. Its result will arrive in a task_result message.")
    );

    // The turn cannot end while the task runs.
    let refused = turn.complete().await.unwrap_err();
    assert!(
        matches!(refused, RuntimeError::TasksOpen { .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains(&id), "{refused}");
    assert_eq!(turn.open_tasks().await.unwrap().len(), 1);
    assert!(
        turn.wait_task_results(Duration::from_millis(50))
            .await
            .unwrap()
            .is_empty()
    );

    fx.gate.add_permits(1);
    let results = turn
        .wait_task_results(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(results.len(), 1);
    let delivered = &results[0];
    assert_eq!(
        (delivered.task_id.as_str(), delivered.call_id.as_str()),
        (id.as_str(), "c1")
    );
    assert_eq!(
        delivered.result.output,
        json!({ "url": "https://cdn.example/job-intro.mp4" })
    );
    let message = delivered.message();
    assert!(
        message.starts_with(&format!(
            "<task_result task_id=\"{id}\" tool=\"render\" call_id=\"c1\" status=\"finished\">"
        )) && message.contains("job-intro.mp4")
            && message.ends_with("</task_result>"),
        "{message}"
    );
    // Delivered once.
    assert!(turn.task_results().await.unwrap().is_empty());
    assert_eq!(rt.task(&id).await.unwrap().status, TaskStatus::Finished);
    turn.complete().await.unwrap();

    let mut seen = Vec::new();
    let ended = |e: &Event| matches!(e, Event::TaskEnded { task_id, .. } if *task_id == id);
    for event in events_until(&mut events, ended).await {
        match event {
            Event::TaskStarted { task_id, .. } => seen.push(format!("started {task_id}")),
            Event::TaskResult { result, .. } => seen.push(format!("result {}", result.task_id)),
            Event::TaskEnded {
                task_id, status, ..
            } => {
                seen.push(format!("ended {task_id} {status:?}"));
            }
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            format!("started {id}"),
            format!("result {id}"),
            format!("ended {id} Finished")
        ]
    );
    assert_eq!(fx.effects().count("submit"), 1);
}

#[tokio::test]
async fn task_wait_times_out_while_running_then_returns_the_result_once() {
    let fx = Fixture::new();
    let rt = fx.runtime(0);
    let turn = turn_in(&rt, "wait", Some(alice())).await;
    let id = task_id(&call(&turn, "c1", "render", json!({ "project": "a" })).await);

    let waited = call(
        &turn,
        "w1",
        "task_wait",
        json!({ "task_id": id, "timeout_seconds": 1 }),
    )
    .await;
    assert!(!waited.is_error, "{waited:?}");
    assert_eq!(waited.output["status"], "running");
    assert!(
        text(&waited).contains(&format!("task {id} (running)")),
        "{}",
        text(&waited)
    );

    fx.gate.add_permits(1);
    let waited = call(&turn, "w2", "task_wait", json!({ "task_id": id })).await;
    assert!(!waited.is_error, "{waited:?}");
    assert_eq!(waited.output["results"][0]["task_id"], json!(id));
    assert!(text(&waited).contains("<task_result"), "{}", text(&waited));
    // Taken by `task_wait`: no message repeats it, and the turn may end.
    assert!(turn.task_results().await.unwrap().is_empty());
    let again = call(&turn, "w3", "task_wait", json!({})).await;
    assert_eq!(again.output["status"], "none");
    turn.complete().await.unwrap();
}

#[tokio::test]
async fn task_meta_tools_refuse_unknown_ids_and_bad_input() {
    let fx = Fixture::new();
    let rt = fx.runtime(1);
    let turn = turn_in(&rt, "meta", Some(alice())).await;
    for (tool, input, needle) in [
        (
            "task_wait",
            json!({ "task_id": "render-nope" }),
            "UNKNOWN_TASK",
        ),
        (
            "task_cancel",
            json!({ "task_id": "render-nope" }),
            "UNKNOWN_TASK",
        ),
        ("task_cancel", json!({}), "INVALID_INPUT"),
        (
            "task_wait",
            json!({ "timeout_seconds": 0 }),
            "INVALID_INPUT",
        ),
        (
            "task_wait",
            json!({ "timeout_seconds": 301 }),
            "INVALID_INPUT",
        ),
        ("task_wait", json!({ "id": "x" }), "INVALID_INPUT"),
    ] {
        let result = call(&turn, "m", tool, input.clone()).await;
        assert!(result.is_error, "{tool} {input}: {result:?}");
        assert_eq!(
            result.error.as_ref().unwrap().code().as_str(),
            needle,
            "{tool} {input}: {}",
            text(&result)
        );
    }

    // A task of another session is unknown here.
    let other = turn_in(&rt, "meta-other", Some(alice())).await;
    let id = task_id(&call(&other, "c1", "render", json!({ "project": "b" })).await);
    let result = call(&turn, "m2", "task_cancel", json!({ "task_id": id })).await;
    assert_eq!(result.error.unwrap().code().as_str(), "UNKNOWN_TASK");
}

#[tokio::test]
async fn task_cancel_fires_the_token_and_the_cleanup_runs() {
    let fx = Fixture::new();
    let rt = fx.runtime(0);
    let turn = turn_in(&rt, "cancel", Some(alice())).await;
    let id = task_id(&call(&turn, "c1", "render", json!({ "project": "c" })).await);
    until_status(&rt, &id, |s| s == TaskStatus::Running).await;
    // Let the body reach its wait.
    for _ in 0..200 {
        if fx.effects().count("submit") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let cancelled = call(&turn, "x1", "task_cancel", json!({ "task_id": id })).await;
    assert!(!cancelled.is_error, "{cancelled:?}");
    assert_eq!(
        text(&cancelled),
        format!("Task {id} was cancelled; its cleanup ran.")
    );
    assert_eq!(rt.task(&id).await.unwrap().status, TaskStatus::Cancelled);
    assert_eq!(fx.effects().count("cancel-job"), 1, "the cleanup ran once");
    // The model cancelled it itself: nothing more arrives, and the turn may end.
    assert!(turn.task_results().await.unwrap().is_empty());
    turn.complete().await.unwrap();

    // A cancelled task is over.
    let again = call(
        &turn_in(&rt, "cancel", Some(alice())).await,
        "x2",
        "task_cancel",
        json!({ "task_id": id }),
    )
    .await;
    assert!(
        text(&again).contains("had already ended"),
        "{}",
        text(&again)
    );
}

/// Never watches its token: only the cleanup window stops it.
#[tool(effect = write, workflow = task)]
async fn stubborn(_: NoInput, ctx: WorkflowContext) -> Result<String, ToolError> {
    ctx.step("start", async { Ok(()) }).await?;
    std::future::pending::<()>().await;
    Ok("never".into())
}

#[tokio::test]
async fn a_body_that_ignores_cancellation_is_dropped_after_the_cleanup_window() {
    let fx = Fixture::new();
    let rt = Runtime::builder(Registry::from_tools([stubborn::TOOL]).unwrap())
        .store(SqliteStore::open(&fx.db).unwrap())
        .options(Options {
            task_cleanup: Duration::from_millis(200),
            ..Default::default()
        })
        .build()
        .unwrap();
    let turn = turn_in(&rt, "stubborn", Some(alice())).await;
    let id = task_id(&call(&turn, "c1", "stubborn", json!({})).await);
    let task = rt.cancel_task(&id).await.unwrap();
    assert_eq!(task.status, TaskStatus::Cancelled);
    let result = task.calls[0].result.clone().unwrap();
    assert_eq!(result.error.as_ref().unwrap().code().as_str(), "CANCELLED");
    assert!(
        text(&result).contains("cleanup did not finish"),
        "{}",
        text(&result)
    );
    // Cancelled by the host, not the model: the model is told.
    let results = turn.task_results().await.unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].message().contains("status=\"failed\""));
}

#[tokio::test]
async fn a_task_question_parks_the_task_not_the_turn_and_is_answered_after_a_restart() {
    let fx = Fixture::new();
    let (turn_id, request_id, id) = {
        let rt = fx.runtime(0);
        let mut events = rt.subscribe();
        let turn = turn_in(&rt, "migrate", Some(alice())).await;
        let id = task_id(&call(&turn, "c1", "migrate", json!({ "table": "users" })).await);
        until_status(&rt, &id, |s| s == TaskStatus::Waiting).await;
        let task = rt.task(&id).await.unwrap();
        let request = task.requests[0].clone();
        assert_eq!(request.task_id.as_deref(), Some(id.as_str()));
        assert_eq!(request.prompt, "Copied users. Switch over?");
        // Announced after the write that parked the task, which `until_status` read.
        let asked = |e: &Event| matches!(e, Event::InputRequested { request: r } if r.request_id == request.request_id);
        events_until(&mut events, asked).await;
        // The turn is not parked: the model may go on.
        assert_eq!(
            turn.record().await.unwrap().status,
            toolwright::runtime::TurnStatus::Active
        );
        (turn.id().to_owned(), request.request_id, id)
    };

    // Another runtime on the same file answers and the task runs on there. Asked first, it
    // says who may answer the task's question (by default the turn's caller), answering
    // nothing.
    let rt = fx.runtime(0);
    let may = |principal| InputResponse::choose(&request_id, Some(principal), "switch");
    assert_eq!(
        rt.may_respond(&may(alice())).await.unwrap(),
        ResponseVerdict::Allowed
    );
    let other = rt.may_respond(&may(bob())).await.unwrap();
    assert!(matches!(other, ResponseVerdict::Rejected(_)), "{other:?}");
    assert_eq!(rt.task(&id).await.unwrap().status, TaskStatus::Waiting);
    let outcome = rt
        .respond(InputResponse::choose(&request_id, Some(alice()), "switch"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        RespondOutcome::TaskResumed {
            task_id: id.clone()
        }
    );
    let status = until_status(&rt, &id, |s| matches!(s, TaskStatus::Sleeping { .. })).await;
    assert_eq!(
        status,
        TaskStatus::Sleeping {
            until_ms: 1_000_000 + 3_600_000
        }
    );
    // A second answer is dropped, and nobody may answer any more.
    let answered = rt.may_respond(&may(alice())).await.unwrap();
    assert!(
        matches!(&answered, ResponseVerdict::Rejected(reason) if reason.contains("no longer pending")),
        "{answered:?}"
    );
    assert_eq!(
        rt.respond(InputResponse::choose(&request_id, Some(alice()), "keep"))
            .await
            .unwrap(),
        RespondOutcome::Dropped
    );

    // The sleep outlives this runtime too; the next one wakes it when it is due.
    drop(rt);
    let rt = fx.runtime(0);
    rt.wake_due().await.unwrap();
    assert!(matches!(
        rt.task(&id).await.unwrap().status,
        TaskStatus::Sleeping { .. }
    ));
    fx.clock.advance(3_600_000);
    rt.wake_due().await.unwrap();
    until_status(&rt, &id, |s| s == TaskStatus::Finished).await;
    let turn = rt.turn(&turn_id).await.unwrap();
    let results = turn.task_results().await.unwrap();
    assert_eq!(results[0].result.output, json!("users migrated"));
    for effect in ["copy", "switch", "drop-old"] {
        assert_eq!(fx.effects().count(effect), 1, "{effect} ran once");
    }
}

#[tokio::test]
async fn cancelling_a_parked_task_replays_its_body_to_the_cleanup() {
    let fx = Fixture::new();
    let rt = fx.runtime(0);
    let turn = turn_in(&rt, "undo", Some(alice())).await;
    let id = task_id(&call(&turn, "c1", "migrate", json!({ "table": "orders" })).await);
    until_status(&rt, &id, |s| s == TaskStatus::Waiting).await;
    let request_id = rt.task(&id).await.unwrap().requests[0].request_id.clone();

    // The turn is cancelled: the task it started is cancelled with it.
    turn.cancel().await.unwrap();
    until_status(&rt, &id, TaskStatus::is_over).await;
    let task = rt.task(&id).await.unwrap();
    assert_eq!(task.status, TaskStatus::Cancelled);
    assert_eq!(
        fx.effects().count("copy"),
        1,
        "the recorded step did not run again"
    );
    assert_eq!(fx.effects().count("undo-copy"), 1, "the cleanup ran");
    assert!(!task.requests[0].is_pending(), "the question was revoked");
    assert_eq!(
        rt.respond(InputResponse::choose(&request_id, Some(alice()), "switch"))
            .await
            .unwrap(),
        RespondOutcome::Dropped
    );
}

#[tokio::test]
async fn a_declined_approval_never_starts_the_task() {
    let fx = Fixture::new();
    let rt = fx.runtime(0);
    let turn = turn_in(&rt, "approve", Some(alice())).await;
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("p1", "publish", "{}")])
        .await
        .unwrap()
    else {
        panic!("publish needs approval");
    };
    assert!(rt.tasks("approve").await.unwrap().is_empty());
    let outcome = rt
        .respond(InputResponse::cancel(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(results[0].error.as_ref().unwrap().code().as_str(), "DENIED");
    assert!(
        rt.tasks("approve").await.unwrap().is_empty(),
        "no task started"
    );
    assert_eq!(fx.effects().count("publish"), 0);

    // Approved, the receipt comes back when the step resumes, and the task runs.
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("p2", "publish", "{}")])
        .await
        .unwrap()
    else {
        panic!("publish needs approval");
    };
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = rt
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap()
    else {
        panic!("resumes");
    };
    let id = task_id(&results[0]);
    // As long as it takes (an instant cannot hold it: the wait once panicked computing its
    // deadline).
    let results = turn.wait_task_results(Duration::MAX).await.unwrap();
    assert_eq!(results[0].task_id, id);
    assert_eq!(results[0].result.output, json!("published"));
    assert_eq!(
        rt.task(&id).await.unwrap().approved_by.unwrap().principal,
        Some(alice())
    );
}

#[tokio::test]
async fn a_serve_task_is_revised_three_times_by_task_id_in_order() {
    let fx = Fixture::new();
    let id = {
        let rt = fx.runtime(0);
        let turn = turn_in(&rt, "plan", Some(alice())).await;
        let receipt = call(
            &turn,
            "r1",
            "plan_release",
            json!({ "request": "freeze main" }),
        )
        .await;
        let id = task_id(&receipt);
        assert!(
            text(&receipt).contains(&format!(
                "call `plan_release` again with \"task_id\": \"{id}\""
            )),
            "{}",
            text(&receipt)
        );
        let first = turn
            .wait_task_results(Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(first[0].result.output, json!({ "steps": ["freeze main"] }));
        until_status(&rt, &id, |s| s == TaskStatus::Idle).await;

        // Two revisions in one step: they arrive in order.
        let StepOutcome::Completed { results, .. } = turn
            .step(vec![
                ToolCall::new(
                    "r2",
                    "plan_release",
                    json!({ "request": "tag rc1", "task_id": id }).to_string(),
                ),
                ToolCall::new(
                    "r3",
                    "plan_release",
                    json!({ "request": "ship", "task_id": id }).to_string(),
                ),
            ])
            .await
            .unwrap()
        else {
            panic!("completes");
        };
        for result in &results {
            assert_eq!(
                text(result),
                format!("Sent to task {id}. Its result will arrive in a task_result message.")
            );
        }
        let mut replies = Vec::new();
        while replies.len() < 2 {
            replies.extend(
                turn.wait_task_results(Duration::from_secs(10))
                    .await
                    .unwrap(),
            );
        }
        replies.sort_by(|a, b| a.call_id.cmp(&b.call_id));
        assert_eq!(
            replies[0].result.output,
            json!({ "steps": ["freeze main", "tag rc1"] })
        );
        assert_eq!(
            replies[1].result.output,
            json!({ "steps": ["freeze main", "tag rc1", "ship"] })
        );
        turn.complete().await.unwrap();
        until_status(&rt, &id, |s| s == TaskStatus::Idle).await;
        id
    };

    // An idle serve task holds nothing in memory: the next runtime carries it on, in a later turn,
    // replaying the recorded revisions without running them again.
    let rt = fx.runtime(0);
    let turn = turn_in(&rt, "plan", Some(alice())).await;
    call(
        &turn,
        // Call ids repeat across turns (providers number them per response): `r1` again.
        "r1",
        "plan_release",
        json!({ "request": "announce", "task_id": id }),
    )
    .await;
    let reply = turn
        .wait_task_results(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        reply[0].result.output,
        json!({ "steps": ["freeze main", "tag rc1", "ship", "announce"] })
    );
    for n in 1..=4 {
        assert_eq!(
            fx.effects().count(&format!("revise-{n}")),
            1,
            "revision {n} ran once"
        );
    }

    // Unknown, foreign and ended tasks refuse calls.
    let unknown = call(
        &turn,
        "r5",
        "plan_release",
        json!({ "request": "x", "task_id": "plan_release-nope" }),
    )
    .await;
    assert_eq!(unknown.error.unwrap().code().as_str(), "UNKNOWN_TASK");
    let other = turn_in(&rt, "plan-other", Some(alice())).await;
    let foreign = call(
        &other,
        "r6",
        "plan_release",
        json!({ "request": "x", "task_id": id }),
    )
    .await;
    assert_eq!(foreign.error.unwrap().code().as_str(), "UNKNOWN_TASK");

    // Ending the session cancels the idle task: its loop ends and the code after it runs.
    rt.session("plan").await.unwrap().end().await.unwrap();
    assert_eq!(rt.task(&id).await.unwrap().status, TaskStatus::Cancelled);
    assert_eq!(fx.effects().count("serve-ended"), 1);
    let ended = call(
        &turn,
        "r7",
        "plan_release",
        json!({ "request": "x", "task_id": id }),
    )
    .await;
    let error = ended.error.unwrap();
    assert_eq!(error.code().as_str(), "UNKNOWN_TASK");
    assert!(
        error.message().contains("it has ended"),
        "{}",
        error.message()
    );
    let refused = rt
        .session("plan")
        .await
        .unwrap()
        .begin_turn(None, Caller::Model)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, RuntimeError::SessionEnded(_)),
        "{refused}"
    );
}

#[test]
fn a_running_task_left_by_a_stopped_process_is_recovered_from_its_journal() {
    let fx = Fixture::new();
    // "Process" one: its own tokio runtime, shut down while the task waits at the gate.
    let id = {
        let tokio_rt = tokio::runtime::Runtime::new().unwrap();
        let id = tokio_rt.block_on(async {
            let rt = fx.runtime(0);
            let turn = turn_in(&rt, "crash", Some(alice())).await;
            let id = task_id(&call(&turn, "c1", "render", json!({ "project": "z" })).await);
            for _ in 0..200 {
                if fx.effects().count("submit") == 1 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            id
        });
        tokio_rt.shutdown_background();
        id
    };
    let tokio_rt = tokio::runtime::Runtime::new().unwrap();
    tokio_rt.block_on(async {
        let rt = fx.runtime(1);
        assert_eq!(rt.task(&id).await.unwrap().status, TaskStatus::Running);
        rt.recover().await.unwrap();
        until_status(&rt, &id, |s| s == TaskStatus::Finished).await;
        let task = rt.task(&id).await.unwrap();
        assert_eq!(
            task.calls[0].result.as_ref().unwrap().output,
            json!({ "url": "https://cdn.example/job-z.mp4" })
        );
        assert_eq!(
            fx.effects().count("submit"),
            1,
            "the recorded step did not run again"
        );
    });
}

#[test]
fn the_task_meta_tools_are_listed_only_beside_task_tools() {
    let with = Registry::from_tools([render::TOOL, weather::TOOL]).unwrap();
    let names = |registry: &Registry| -> Vec<String> {
        let list: Value = serde_json::from_str(
            registry
                .list(toolwright::registry::Audience::Model, Format::Anthropic)
                .json(),
        )
        .unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(&with),
        ["render", "weather", "task_wait", "task_cancel"]
    );
    let without = Registry::from_tools([weather::TOOL]).unwrap();
    assert_eq!(names(&without), ["weather"]);
    // The user's own calls never see them.
    assert!(!with.has_tasks(toolwright::registry::Audience::User));
}

#[tokio::test]
async fn task_cancel_hands_over_results_the_task_produced_before_the_cancel() {
    let fx = Fixture::new();
    let rt = fx.runtime(0);
    let turn = turn_in(&rt, "produced", Some(alice())).await;
    let id = task_id(&call(&turn, "r1", "plan_release", json!({ "request": "draft" })).await);
    until_status(&rt, &id, |s| s == TaskStatus::Idle).await;
    // The reply is recorded but not delivered yet; cancelling must not swallow it.
    let cancelled = call(&turn, "x1", "task_cancel", json!({ "task_id": id })).await;
    assert!(!cancelled.is_error, "{cancelled:?}");
    assert_eq!(
        cancelled.output["results"][0]["result"]["output"],
        json!({ "steps": ["draft"] })
    );
    assert!(
        text(&cancelled).contains("<task_result"),
        "{}",
        text(&cancelled)
    );
    assert!(turn.task_results().await.unwrap().is_empty());
    turn.complete().await.unwrap();
}
