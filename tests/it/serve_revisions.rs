//! Serve revisions: each call a `serve` task receives has its own cancellation. Cancelling one
//! (`Runtime::cancel_task_call`, or cancelling the turn that made it) gives that call a
//! `CANCELLED` result at once and tells the body, and the task keeps serving.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::{CallResult, Runtime, SessionSpec, SqliteStore, TaskStatus, Turn};
use toolwright::{Caller, ErrorCode, Registry};

use crate::support::{alice, call, completed};

/// The trace of one runtime's body, shared with its test.
struct Traced(Arc<Trace>);

/// What the body did, in order, and a signal when it starts slow work.
#[derive(Default)]
struct Trace {
    lines: Mutex<Vec<String>>,
    working: tokio::sync::Notify,
}

impl Trace {
    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Edit {
    /// The change to make.
    change: String,
    /// Whether the change takes long (it waits until cancelled).
    #[serde(default)]
    slow: bool,
}

#[derive(Clone, Serialize, JsonSchema)]
struct Draft {
    changes: Vec<String>,
}

/// Drafts a text and revises it on request (pass the task_id to revise).
#[tool(effect = write, workflow = serve)]
async fn draft(
    mut calls: ServeCalls<Edit, Draft>,
    ctx: WorkflowContext,
    traced: State<Traced>,
) -> Result<(), ToolError> {
    let trace = &traced.0.0;
    let mut draft = Draft {
        changes: Vec::new(),
    };
    while let Some(call) = calls.next().await {
        if call.input.slow {
            // The slow work races the call's cancellation inside a step: the step's record
            // stands for how the race went.
            let key = format!("slow:{}", call.call_id());
            ctx.step(key, async {
                trace.working.notify_one();
                call.cancelled().await;
                Ok(())
            })
            .await?;
        }
        if call.is_cancelled().await? {
            trace.push(format!("{} cancelled", call.call_id()));
            continue;
        }
        draft.changes.push(call.input.change.clone());
        trace.push(format!("{} done", call.call_id()));
        call.reply(draft.clone());
    }
    Ok(())
}

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    trace: Arc<Trace>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let trace = Arc::new(Trace::default());
        let runtime = Runtime::builder(Registry::from_tools([draft::TOOL]).unwrap())
            .store(SqliteStore::open(dir.path().join("store.db")).unwrap())
            .state(Traced(Arc::clone(&trace)))
            .build()
            .unwrap();
        Fixture {
            _dir: dir,
            runtime,
            trace,
        }
    }

    async fn turn(&self) -> Turn {
        let session = self
            .runtime
            .open_session(SessionSpec::new("draft").initiator(alice()))
            .await
            .unwrap();
        session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap()
    }

    /// Calls `draft` from `turn` and returns the receipt.
    async fn edit(&self, turn: &Turn, call_id: &str, input: Value) -> CallResult {
        let results = completed(
            turn.step(vec![call(call_id, "draft", input)])
                .await
                .unwrap(),
        );
        assert!(!results[0].is_error, "{results:?}");
        results.into_iter().next().unwrap()
    }
}

/// The one result the task delivers to `turn`.
async fn result_for(turn: &Turn) -> CallResult {
    let results = turn
        .wait_task_results(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    results.into_iter().next().unwrap().result
}

#[tokio::test]
async fn cancelling_one_revision_leaves_the_task_serving() {
    let fx = Fixture::new();
    let first = fx.turn().await;
    let receipt = fx.edit(&first, "c1", json!({ "change": "title" })).await;
    let task_id = receipt.output["task_id"].as_str().unwrap().to_owned();
    assert_eq!(
        result_for(&first).await.output,
        json!({ "changes": ["title"] })
    );

    // A slow revision, cancelled while the body works on it.
    let second = fx.turn().await;
    let working = fx.trace.working.notified();
    fx.edit(
        &second,
        "c2",
        json!({ "change": "tone", "slow": true, "task_id": task_id }),
    )
    .await;
    working.await;
    assert_eq!(
        fx.runtime.cancel_task_call(&task_id, "c2").await.unwrap(),
        1
    );
    let cancelled = result_for(&second).await;
    assert!(cancelled.is_error, "{cancelled:?}");
    assert_eq!(cancelled.error.unwrap().code(), ErrorCode::Cancelled);
    assert_eq!(
        fx.runtime.cancel_task_call(&task_id, "c2").await.unwrap(),
        0,
        "nothing left to cancel"
    );

    // The task keeps serving: the next revision builds on the last one that finished.
    let third = fx.turn().await;
    fx.edit(
        &third,
        "c3",
        json!({ "change": "ending", "task_id": task_id }),
    )
    .await;
    assert_eq!(
        result_for(&third).await.output,
        json!({ "changes": ["title", "ending"] })
    );
    // An idle body is dropped and replayed for each new call, so lines repeat; every replay
    // sees c2 cancelled, and none finished it.
    let mut seen = fx.trace.lines();
    assert!(!seen.contains(&"c2 done".to_owned()), "{seen:?}");
    let mut first_seen = Vec::new();
    seen.retain(|line| {
        let new = !first_seen.contains(line);
        first_seen.push(line.clone());
        new
    });
    assert_eq!(seen, ["c1 done", "c2 cancelled", "c3 done"]);
    assert_ne!(
        fx.runtime.task(&task_id).await.unwrap().status,
        TaskStatus::Cancelled
    );
}

#[tokio::test]
async fn cancelling_the_turn_of_a_revision_cancels_only_that_revision() {
    let fx = Fixture::new();
    let first = fx.turn().await;
    let receipt = fx.edit(&first, "c1", json!({ "change": "title" })).await;
    let task_id = receipt.output["task_id"].as_str().unwrap().to_owned();
    result_for(&first).await;

    let second = fx.turn().await;
    let working = fx.trace.working.notified();
    fx.edit(
        &second,
        "c2",
        json!({ "change": "tone", "slow": true, "task_id": task_id }),
    )
    .await;
    working.await;
    second.cancel().await.unwrap();
    // The body hears of it and moves on.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !fx.trace.lines().contains(&"c2 cancelled".to_owned()) {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            fx.trace.lines()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let third = fx.turn().await;
    fx.edit(
        &third,
        "c3",
        json!({ "change": "ending", "task_id": task_id }),
    )
    .await;
    assert_eq!(
        result_for(&third).await.output,
        json!({ "changes": ["title", "ending"] })
    );
}
