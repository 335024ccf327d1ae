//! Questions with a deadline (`AskRequest::timeout`): withdrawn unanswered when it passes, the
//! body getting `AskAnswer::Timeout`, journaled, across restarts, on a test clock; an answer
//! given first wins.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    EntryKind, Event, InputResponse, Outcome, RequestStatus, RespondOutcome, Runtime, SessionSpec,
    SqliteStore, StepOutcome, TaskStatus, Turn,
};
use toolwright::{Caller, Registry};

use crate::support::clock::ManualClock;
use crate::support::{alice, call, completed, drain, resumed, waiting};

/// The answer, as the body saw it.
fn said(answer: &AskAnswer) -> String {
    match answer {
        AskAnswer::Answered { option_id, .. } => option_id.clone().unwrap_or_default(),
        AskAnswer::Timeout => "timeout".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Asks whether to go on, for one minute.
#[tool(effect = write, workflow = execute)]
async fn confirm(_: NoInput, ctx: WorkflowContext) -> Result<String, ToolError> {
    ctx.step("prepare", async { Ok(()) }).await?;
    let answer = ctx
        .ask(
            AskRequest::new("Go on?")
                .option(AskOption::new("go", "Go"))
                .timeout(Duration::from_secs(60)),
        )
        .await?;
    Ok(said(&answer))
}

/// The same question, from a task of its own.
#[tool(effect = write, workflow = task)]
async fn confirm_later(_: NoInput, ctx: WorkflowContext) -> Result<String, ToolError> {
    let answer = ctx
        .ask(
            AskRequest::new("Go on later?")
                .option(AskOption::new("go", "Go"))
                .timeout(Duration::from_secs(60)),
        )
        .await?;
    Ok(said(&answer))
}

const START: u64 = 1_000_000;

fn runtime(path: &Path, clock: &ManualClock) -> Runtime {
    Runtime::builder(Registry::from_tools([confirm::TOOL, confirm_later::TOOL]).unwrap())
        .store(SqliteStore::open(path).unwrap())
        .options(clock.options())
        .build()
        .unwrap()
}

async fn turn(runtime: &Runtime, session: &str) -> Turn {
    runtime
        .open_session(SessionSpec::new(session).initiator(alice()))
        .await
        .unwrap()
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_unanswered_question_is_withdrawn_at_its_deadline_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let clock = ManualClock::at(START);
    let first = runtime(&path, &clock);
    let turn = turn(&first, "late").await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "confirm", json!({}))])
            .await
            .unwrap(),
    );
    assert_eq!(requests[0].deadline_ms, Some(START + 60_000));
    clock.advance(59_999);
    assert!(first.wake_due().await.unwrap().is_empty(), "not due yet");
    drop(first);

    // Another process, after the deadline.
    clock.advance(1);
    let second = runtime(&path, &clock);
    let mut events = second.subscribe();
    let woken = second.wake_due().await.unwrap();
    assert!(
        drain(&mut events).iter().any(|e| matches!(
            e,
            Event::InputResolved { request_id, outcome: Outcome::Expired, .. }
                if *request_id == requests[0].request_id
        )),
        "the withdrawal is announced as expired, not answered"
    );
    assert_eq!(woken.len(), 1, "{woken:?}");
    let StepOutcome::Completed { results, .. } = &woken[0].1 else {
        panic!("{woken:?}");
    };
    assert_eq!(results[0].output, json!("timeout"));
    assert!(
        second.wake_due().await.unwrap().is_empty(),
        "withdrawn once"
    );

    // Journaled: the answer is on record, and the request says why it ended.
    let journal = second
        .store()
        .journal(&format!("{}/c1", turn.id()))
        .await
        .unwrap();
    let ask = journal.iter().find(|e| e.kind == EntryKind::Ask).unwrap();
    assert_eq!(ask.value, json!({ "status": "timeout" }));
    let record = second
        .turn(turn.id())
        .await
        .unwrap()
        .record()
        .await
        .unwrap();
    let request = &record.last_step.unwrap().requests[0];
    let RequestStatus::Settled {
        note, responder, ..
    } = &request.status
    else {
        panic!("{request:?}");
    };
    assert_eq!(responder, &None);
    assert!(note.as_deref().unwrap().contains("deadline"), "{note:?}");
    // A late answer changes nothing.
    let late = InputResponse::choose(&requests[0].request_id, Some(alice()), "go");
    assert!(matches!(
        second.respond(late).await.unwrap(),
        RespondOutcome::Dropped
    ));
}

#[tokio::test]
async fn an_answer_before_the_deadline_wins() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(START);
    let runtime = runtime(&dir.path().join("store.db"), &clock);
    let turn = turn(&runtime, "early").await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "confirm", json!({}))])
            .await
            .unwrap(),
    );
    clock.advance(30_000);
    let answer = InputResponse::choose(&requests[0].request_id, Some(alice()), "go");
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!("go"));
    clock.advance(60_000);
    assert!(runtime.wake_due().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_tasks_question_is_withdrawn_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(START);
    let runtime = runtime(&dir.path().join("store.db"), &clock);
    let turn = turn(&runtime, "task").await;
    let receipts = completed(
        turn.step(vec![call("c1", "confirm_later", json!({}))])
            .await
            .unwrap(),
    );
    let task_id = receipts[0].output["task_id"].as_str().unwrap().to_owned();
    // The body runs on its own task: wait until it parks on its question.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let task = runtime.task(&task_id).await.unwrap();
        if task.status == TaskStatus::Waiting {
            assert_eq!(task.requests[0].deadline_ms, Some(START + 60_000));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{task:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(runtime.wake_due().await.unwrap().is_empty());
    clock.advance(60_000);
    runtime.wake_due().await.unwrap();
    let results = turn
        .wait_task_results(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(results[0].task_id, task_id);
    assert_eq!(results[0].result.output, json!("timeout"));
}
