//! Workflow tools (`workflow = execute`): the body's steps are journaled, `ctx.ask` parks the
//! call on a question through the input protocol, and the answer resumes the body by replay,
//! from any process sharing the store.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, RequestKind, RespondOutcome, Runtime, SessionSpec, SqliteStore, StepOutcome,
    ToolCall,
};
use toolwright::{Caller, OptionStyle, Registry};

use crate::support::clock::ManualClock;
use crate::support::effects::EffectLog;
use crate::support::{alice, builder};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct DeployArgs {
    service: String,
}

#[derive(Serialize, JsonSchema)]
struct Deployed {
    deployed: bool,
    plan: String,
    note: Option<String>,
}

/// Deploys one service after showing the operator the plan.
#[tool(effect = write, workflow = execute)]
async fn deploy(
    args: DeployArgs,
    ctx: WorkflowContext,
    effects: State<EffectLog>,
) -> Result<Deployed, ToolError> {
    let plan: String = ctx
        .step("plan", async {
            effects.append("plan")?;
            Ok(format!("roll {} in 3 waves", args.service))
        })
        .await?;
    let go = ctx
        .ask(
            AskRequest::new(format!("Plan: {plan}. Start?"))
                .display(AskDisplay::Confirmation)
                .option(AskOption::new("go", "Start").style(OptionStyle::Primary))
                .option(AskOption::new("stop", "Cancel").style(OptionStyle::Danger)),
        )
        .await?;
    if !go.chose("go") {
        return Ok(Deployed {
            deployed: false,
            plan,
            note: None,
        });
    }
    ctx.step("apply", async { effects.append("apply") }).await?;
    let note = ctx
        .ask(AskRequest::new("Anything for the change log?").allow_freeform())
        .await?;
    let note = match note {
        AskAnswer::Answered { text, .. } => text,
        _ => None,
    };
    Ok(Deployed {
        deployed: true,
        plan,
        note,
    })
}

fn runtime(store: SqliteStore, effects: PathBuf) -> Runtime {
    builder([deploy::TOOL])
        .store(store)
        .state(EffectLog(effects))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_workflow_parks_on_each_question_and_replays_to_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (db, log) = (dir.path().join("db"), dir.path().join("effects"));
    let effects = EffectLog(log.clone());

    // Process one: the call runs until its first question, then parks.
    let first = runtime(SqliteStore::open(&db).unwrap(), log.clone());
    let session = first
        .open_session(SessionSpec::new("wf").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let turn_id = turn.id().to_owned();
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("c1", "deploy", r#"{"service":"api"}"#)])
        .await
        .unwrap()
    else {
        panic!("expected waiting")
    };
    assert_eq!(requests[0].kind, RequestKind::Question);
    assert_eq!(requests[0].prompt, "Plan: roll api in 3 waves. Start?");
    assert_eq!(effects.count("plan"), 1);
    drop(first);

    // Process two (a fresh runtime on the same file) answers: the body replays `plan` from the
    // journal, gets "go", applies, and parks on the second question.
    let second = runtime(SqliteStore::open(&db).unwrap(), log.clone());
    let outcome = second
        .respond(InputResponse::choose(
            &requests[0].request_id,
            Some(alice()),
            "go",
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Waiting { requests, .. }) = outcome else {
        panic!("expected the second question: {outcome:?}")
    };
    assert_eq!(requests[0].prompt, "Anything for the change log?");
    assert_eq!(effects.count("plan"), 1, "recorded steps do not run again");
    assert_eq!(effects.count("apply"), 1);

    // A plain message answers the free-form question; the body finishes.
    let third = runtime(SqliteStore::open(&db).unwrap(), log.clone());
    let outcome = third
        .turn(&turn_id)
        .await
        .unwrap()
        .message("rolled during the quiet hour")
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("expected completed: {outcome:?}")
    };
    assert_eq!(
        results[0].output,
        json!({ "deployed": true, "plan": "roll api in 3 waves", "note": "rolled during the quiet hour" })
    );
    assert_eq!(effects.count("plan"), 1);
    assert_eq!(effects.count("apply"), 1);
}

#[tokio::test]
async fn an_answer_outside_the_options_keeps_the_question_pending() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("effects");
    let rt = runtime(SqliteStore::in_memory().unwrap(), log.clone());
    let session = rt
        .open_session(SessionSpec::new("wf2").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("c1", "deploy", r#"{"service":"db"}"#)])
        .await
        .unwrap()
    else {
        panic!("expected waiting")
    };
    let rejected = rt
        .respond(InputResponse::answer(
            &requests[0].request_id,
            Some(alice()),
            "maybe later",
        ))
        .await
        .unwrap();
    assert!(
        matches!(rejected, RespondOutcome::Rejected { .. }),
        "{rejected:?}"
    );
    // The option's label works as well as its id; "Cancel" picks `stop`.
    let outcome = rt
        .respond(InputResponse::answer(
            &requests[0].request_id,
            Some(alice()),
            "Cancel",
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("expected completed: {outcome:?}")
    };
    assert_eq!(results[0].output["deployed"], false);
    assert_eq!(EffectLog(log).count("apply"), 0);
}

#[tokio::test]
async fn nobody_to_ask_means_unavailable_and_the_default_path() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("effects");
    let rt = runtime(SqliteStore::in_memory().unwrap(), log.clone());
    let session = rt
        .open_session(SessionSpec::new("wf3").non_interactive())
        .await
        .unwrap();
    let turn = session.begin_turn(None, Caller::Schedule).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![ToolCall::new("c1", "deploy", r#"{"service":"db"}"#)])
        .await
        .unwrap()
    else {
        panic!("a schedule never parks")
    };
    assert_eq!(results[0].output["deployed"], false, "{results:?}");
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct WatchArgs {
    service: String,
}

/// Deploys, then watches the service for five minutes before reporting.
#[tool(effect = write, workflow = execute)]
async fn deploy_and_watch(
    args: WatchArgs,
    ctx: WorkflowContext,
    effects: State<EffectLog>,
) -> Result<String, ToolError> {
    ctx.step("deploy", async { effects.append("deploy") })
        .await?;
    ctx.sleep(std::time::Duration::from_secs(300)).await?;
    let health: String = ctx
        .step("check", async {
            effects.append("check")?;
            Ok(format!("{} healthy", args.service))
        })
        .await?;
    Ok(health)
}

fn watching_runtime(store: SqliteStore, effects: PathBuf, clock: ManualClock) -> Runtime {
    builder([deploy_and_watch::TOOL])
        .store(store)
        .state(EffectLog(effects))
        .options(clock.options())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_durable_sleep_holds_no_task_and_wakes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (db, log) = (dir.path().join("db"), dir.path().join("effects"));
    let effects = EffectLog(log.clone());
    let clock = ManualClock::at(1_000_000);

    let first = watching_runtime(SqliteStore::open(&db).unwrap(), log.clone(), clock.clone());
    let session = first.open_session(SessionSpec::new("watch")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let outcome = turn
        .step(vec![ToolCall::new(
            "c1",
            "deploy_and_watch",
            r#"{"service":"api"}"#,
        )])
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("expected parked: {outcome:?}")
    };
    assert!(requests.is_empty(), "a sleep asks nobody");
    assert_eq!(effects.count("deploy"), 1);
    assert!(first.wake_due().await.unwrap().is_empty(), "not due yet");
    drop(first);

    // Five minutes later, a new process wakes it.
    clock.advance(300_000);
    let second = watching_runtime(SqliteStore::open(&db).unwrap(), log.clone(), clock.clone());
    let woken = second.wake_due().await.unwrap();
    assert_eq!(woken.len(), 1);
    let StepOutcome::Completed { results, .. } = &woken[0].1 else {
        panic!("{woken:?}")
    };
    assert_eq!(results[0].output, json!("api healthy"));
    assert_eq!(
        effects.count("deploy"),
        1,
        "the step before the sleep ran once"
    );
    assert_eq!(effects.count("check"), 1);
    assert!(
        second.wake_due().await.unwrap().is_empty(),
        "a timer fires once"
    );
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct BackfillArgs {
    table: String,
}

/// Backfills a table, asking before it commits; undoes the work when cancelled.
#[tool(effect = write, workflow = execute)]
async fn backfill(
    args: BackfillArgs,
    ctx: WorkflowContext,
    effects: State<EffectLog>,
) -> Result<String, ToolError> {
    ctx.step("start", async { effects.append("start") }).await?;
    let answer = ctx
        .ask(
            AskRequest::new(format!("Commit the backfill of {}?", args.table))
                .option(AskOption::new("commit", "Commit")),
        )
        .await?;
    if matches!(answer, AskAnswer::Cancelled) {
        // Cleanup: runs even though the body was parked when the turn was cancelled.
        ctx.step("rollback", async { effects.append("rollback") })
            .await?;
        return Err(ToolError::new("cancelled"));
    }
    Ok("committed".into())
}

#[tokio::test]
async fn cancelling_a_turn_runs_the_cleanup_of_a_parked_workflow_body() {
    let dir = tempfile::tempdir().unwrap();
    let (db, log) = (dir.path().join("db"), dir.path().join("effects"));
    let effects = EffectLog(log.clone());
    let rt = Runtime::builder(Registry::from_tools([backfill::TOOL]).unwrap())
        .store(SqliteStore::open(&db).unwrap())
        .state(EffectLog(log))
        .build()
        .unwrap();
    let session = rt
        .open_session(SessionSpec::new("backfill").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let outcome = turn
        .step(vec![ToolCall::new(
            "b1",
            "backfill",
            r#"{"table":"orders"}"#,
        )])
        .await
        .unwrap();
    assert!(
        matches!(outcome, StepOutcome::Waiting { .. }),
        "{outcome:?}"
    );
    assert_eq!(effects.count("start"), 1);

    turn.cancel().await.unwrap();
    for _ in 0..500 {
        if effects.count("rollback") == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(effects.count("rollback"), 1, "the cleanup ran once");
    assert_eq!(
        effects.count("start"),
        1,
        "the recorded step did not run again"
    );
}
