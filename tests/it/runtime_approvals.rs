//! The approval protocol through the runtime: park, answer, resume, exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, InputResponse, RespondOutcome, SessionSpec, StepOutcome, ToolCall,
};
use toolwright::{Caller, Principal, Registry};

use crate::support::{alice, builder_over};

static RESTARTS: AtomicUsize = AtomicUsize::new(0);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RestartArgs {
    service: String,
}

#[derive(Serialize, JsonSchema)]
struct Restarted {
    service: String,
}

/// Restarts one service.
#[tool(effect = write, approval(request = always, prompt = "Restart {service}?"))]
async fn restart(args: RestartArgs) -> Restarted {
    // Only the first test restarts `api`; tests run concurrently.
    if args.service == "api" {
        RESTARTS.fetch_add(1, Ordering::SeqCst);
    }
    Restarted {
        service: args.service,
    }
}

#[tokio::test]
async fn always_parks_then_runs_once_after_approval() {
    let registry = Registry::from_tools([restart::TOOL]).unwrap();
    let runtime = builder_over(registry).build().unwrap();
    let mut events = runtime.subscribe();
    let session = runtime
        .open_session(SessionSpec::new("s1").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let outcome = turn
        .step(vec![ToolCall::new("c1", "restart", r#"{"service":"api"}"#)])
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("expected waiting: {outcome:?}")
    };
    assert_eq!(requests[0].prompt, "Restart api?");
    assert_eq!(RESTARTS.load(Ordering::SeqCst), 0);

    // Bob may not answer Alice's request.
    let rejected = runtime
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(Principal::user("oidc", "bob")),
        ))
        .await
        .unwrap();
    assert!(
        matches!(rejected, RespondOutcome::Rejected { .. }),
        "{rejected:?}"
    );

    let resumed = runtime
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = resumed else {
        panic!("{resumed:?}")
    };
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(RESTARTS.load(Ordering::SeqCst), 1);

    // A second answer is dropped; the tool does not run again.
    let again = runtime
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    assert_eq!(again, RespondOutcome::Dropped);
    assert_eq!(RESTARTS.load(Ordering::SeqCst), 1);

    let mut kinds = Vec::new();
    while let Ok(event) = events.try_recv() {
        kinds.push(
            serde_json::to_value(&event).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        let _: Event = event;
    }
    assert_eq!(
        kinds,
        [
            "turn.started",
            "action.requested",
            "input.requested",
            "turn.waiting",
            "approval.candidate",
            "approval.candidate",
            "approval.settled",
            "input.resolved",
            "action.result"
        ]
    );
}

static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Waits until cancelled.
#[tool(effect = read)]
async fn wait_forever(_: NoInput, ctx: ToolContext) -> Result<(), ToolError> {
    WAITING.fetch_add(1, Ordering::SeqCst);
    ctx.cancelled().await;
    Err(ToolError::new("stopped"))
}

#[tokio::test]
async fn cancelling_through_another_handle_reaches_running_calls() {
    let registry = Registry::from_tools([wait_forever::TOOL]).unwrap();
    let runtime = builder_over(registry).build().unwrap();
    let session = runtime
        .open_session(SessionSpec::new("s-cancel"))
        .await
        .unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    let turn_id = turn.id().to_owned();
    let running = tokio::spawn(async move {
        turn.step(vec![ToolCall::new("c1", "wait_forever", "{}")])
            .await
    });
    while WAITING.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    // A fresh handle, as another task or request handler would have.
    runtime
        .turn(&turn_id)
        .await
        .unwrap()
        .cancel()
        .await
        .unwrap();
    // Without cross-handle cancellation the tool would wait forever.
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), running)
        .await
        .expect("the running call saw the cancellation")
        .unwrap()
        .unwrap();
    let StepOutcome::Completed {
        results, ends_turn, ..
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert!(!ends_turn);
    // The tool saw its token fire (it returns "stopped"), or the runtime cut it off first.
    let error = results[0].error.as_ref().unwrap();
    assert!(
        error.message() == "stopped" || error.code() == toolwright::ErrorCode::Cancelled,
        "{results:?}"
    );
}

#[tokio::test]
async fn a_note_sent_with_an_approval_reaches_the_model() {
    let registry = Registry::from_tools([restart::TOOL]).unwrap();
    let runtime = builder_over(registry).build().unwrap();
    let session = runtime
        .open_session(SessionSpec::new("s-note").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("c1", "restart", r#"{"service":"db"}"#)])
        .await
        .unwrap()
    else {
        panic!("expected waiting")
    };
    let outcome = runtime
        .respond(
            InputResponse::approve(&requests[0].request_id, Some(alice()))
                .note("only the replicas, please"),
        )
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("{outcome:?}")
    };
    let seen = serde_json::to_string(&results[0].model()).unwrap();
    assert!(seen.contains("only the replicas, please"), "{seen}");
    // The raw output for events and clients is untouched.
    assert_eq!(results[0].output, serde_json::json!({ "service": "db" }));
}
