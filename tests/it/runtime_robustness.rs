//! Failures at the edges: policies that panic, callers that stop waiting, strict-mode nulls,
//! `once` grants settled by a revoking message, every failing pointer in one answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, RespondOutcome, SessionSpec, StepOutcome, ToolCall, TurnStatus,
};
use toolwright::{Caller, ErrorCode, Registry};

use crate::support::{alice, builder};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Ratio {
    a: i64,
    b: i64,
}

fn dividing_policy(cx: &ApprovalContext<'_, Ratio>) -> ApprovalDecision {
    // Divides by a number the model chose: panics on 0.
    if cx.input.a / cx.input.b > 10 {
        ApprovalDecision::UserApproval
    } else {
        ApprovalDecision::NotApplicable
    }
}

/// Divides.
#[tool(effect = write, approval = dividing_policy)]
async fn divide(args: Ratio) -> i64 {
    args.a / args.b.max(1)
}

#[tokio::test]
async fn a_policy_that_panics_denies_the_call_and_the_runtime_goes_on() {
    let runtime = builder([divide::TOOL]).build().unwrap();
    let session = runtime
        .open_session(SessionSpec::new("panic"))
        .await
        .unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![ToolCall::new("c1", "divide", r#"{"a":1,"b":0}"#)])
        .await
        .unwrap()
    else {
        panic!("expected completed")
    };
    let error = results[0].error.as_ref().unwrap();
    assert_eq!(error.code(), ErrorCode::Denied);
    assert!(
        error.message().contains("approval policy"),
        "{}",
        error.message()
    );
    // The next step works.
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![ToolCall::new("c2", "divide", r#"{"a":4,"b":2}"#)])
        .await
        .unwrap()
    else {
        panic!("expected completed")
    };
    assert_eq!(results[0].output, json!(2));
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Limited {
    #[serde(default = "fifty")]
    limit: u32,
}

fn fifty() -> u32 {
    50
}

/// Echoes its limit.
#[tool(effect = read)]
async fn limited(args: Limited) -> u32 {
    args.limit
}

#[tokio::test]
async fn strict_mode_nulls_for_optional_fields_mean_absent() {
    let runtime = builder([limited::TOOL]).build().unwrap();
    let session = runtime
        .open_session(SessionSpec::new("strict"))
        .await
        .unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let StepOutcome::Completed { results, .. } = turn
        .step(vec![ToolCall::new("c1", "limited", r#"{"limit":null}"#)])
        .await
        .unwrap()
    else {
        panic!("expected completed")
    };
    assert_eq!(results[0].output, json!(50), "{results:?}");
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Named {
    #[schemars(length(min = 1))]
    name: String,
    count: u32,
}

/// Counts.
#[tool(effect = read)]
async fn counted(args: Named) -> String {
    format!("{} {}", args.name, args.count)
}

#[tokio::test]
async fn schema_and_number_problems_come_in_one_answer() {
    let registry = Registry::from_tools([counted::TOOL]).unwrap();
    let error = registry
        .get("counted")
        .unwrap()
        .validate(json!({ "name": "", "count": 5_000_000_000u64 }))
        .unwrap_err();
    let pointers: Vec<&str> = error.problems.iter().map(|p| p.pointer.as_str()).collect();
    assert!(pointers.contains(&"/name"), "{pointers:?}");
    assert!(pointers.contains(&"/count"), "{pointers:?}");
}

static SLOW_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Takes a moment.
#[tool(effect = write, approval = always)]
async fn slow(_: NoInput) -> &'static str {
    tokio::time::sleep(Duration::from_millis(200)).await;
    SLOW_RUNS.fetch_add(1, Ordering::SeqCst);
    "done"
}

#[tokio::test]
async fn a_caller_that_stops_waiting_does_not_strand_the_turn() {
    let runtime = builder([slow::TOOL]).build().unwrap();
    let session = runtime
        .open_session(SessionSpec::new("impatient").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("c1", "slow", "{}")])
        .await
        .unwrap()
    else {
        panic!("expected waiting")
    };
    // The caller gives up long before the tool finishes.
    let answer = runtime.respond(InputResponse::approve(
        &requests[0].request_id,
        Some(alice()),
    ));
    assert!(
        tokio::time::timeout(Duration::from_millis(20), answer)
            .await
            .is_err()
    );
    // The resumed step still completes on its own.
    for _ in 0..200 {
        if turn.record().await.unwrap().status == TurnStatus::Active {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
    assert_eq!(SLOW_RUNS.load(Ordering::SeqCst), 1);
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Target {
    host: String,
}

/// Pings, asking once per session.
#[tool(effect = write, approval = once)]
async fn ping(args: Target) -> String {
    args.host
}

#[tokio::test]
async fn a_once_grant_survives_a_message_that_revokes_its_sibling() {
    let runtime = builder([ping::TOOL]).build().unwrap();
    let session = runtime
        .open_session(SessionSpec::new("once").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![
            ToolCall::new("c1", "ping", r#"{"host":"a"}"#),
            ToolCall::new("c2", "ping", r#"{"host":"b"}"#),
        ])
        .await
        .unwrap()
    else {
        panic!("expected waiting")
    };
    assert_eq!(
        requests.len(),
        2,
        "concurrent calls of a `once` tool all ask"
    );
    let first = runtime
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    assert!(matches!(first, RespondOutcome::Settled { .. }), "{first:?}");
    assert!(
        runtime
            .approvals("once", Some(&alice()))
            .await
            .unwrap()
            .is_empty(),
        "not while one is pending"
    );
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) =
        turn.message("never mind the second one").await.unwrap()
    else {
        panic!("expected resumed")
    };
    assert!(!results[0].is_error);
    assert!(results[1].is_error);
    assert!(
        runtime
            .approvals("once", Some(&alice()))
            .await
            .unwrap()
            .contains("ping")
    );
}

fn release_open(cx: &EnabledContext<'_>) -> bool {
    cx.flag("release_open")
}

/// Publishes the release.
#[tool(effect = write, enabled = release_open)]
async fn publish(_: NoInput) -> &'static str {
    "published"
}

/// Reads the release notes.
#[tool(effect = read)]
async fn notes(_: NoInput) -> &'static str {
    "notes"
}

/// Signs the release off (users only).
#[tool(effect = write, user_only, enabled = release_open)]
async fn sign_off(_: NoInput) -> &'static str {
    "signed"
}

#[tokio::test]
async fn alternating_user_and_model_turns_do_not_announce_tools_twice() {
    let runtime = builder([publish::TOOL, notes::TOOL, sign_off::TOOL])
        .build()
        .unwrap();
    let session = runtime
        .open_session(SessionSpec::new("audiences").initiator(alice()))
        .await
        .unwrap();
    let step = |caller: Caller| {
        let session = session.clone();
        async move {
            let turn = session.begin_turn(Some(alice()), caller).await.unwrap();
            match turn
                .step(vec![ToolCall::new("n", "notes", "{}")])
                .await
                .unwrap()
            {
                StepOutcome::Completed { notices, .. } => notices,
                other => panic!("{other:?}"),
            }
        }
    };
    assert!(
        step(Caller::Model).await.is_empty(),
        "the first list is not news"
    );
    session.set_state("release_open", true).await.unwrap();
    assert_eq!(step(Caller::Model).await, ["New tool available: publish"]);
    // The user's view (which also holds the user-only `sign_off`) is its own: its first list is
    // not news, and going back to the model does not read as `sign_off` going away.
    assert!(step(Caller::User).await.is_empty());
    assert!(step(Caller::Model).await.is_empty());
    assert!(step(Caller::User).await.is_empty());
}
