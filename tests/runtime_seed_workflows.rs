//! The seed's `deploy_service` workflow end to end through the runtime: approval before the
//! start, the plan step, the confirmation question, the deploy step, a five-minute durable sleep
//! on a clock the test controls, the health check and the rollback question, with a restart (a
//! new runtime on the same SQLite file) at every point where the run is parked.

use serde_json::{Value, json};
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::runtime::{
    InputRequest, InputResponse, RequestKind, RespondOutcome, Runtime, SessionSpec, SqliteStore,
    StepOutcome, ToolCall,
};

#[path = "../examples/seed/mod.rs"]
#[allow(dead_code)] // reason: only the deploy workflow is driven here
mod seed;
mod support;

use seed::ops::OpsBackend;
use seed::release::Releases;
use seed::treehole::Treehole;
use seed::wallet::Wallet;
use support::clock::ManualClock;
use support::dana;

/// A "process": a fresh runtime on the shared file, as after a restart.
fn process(db: &std::path::Path, clock: &ManualClock) -> Runtime {
    Runtime::builder(Registry::collect().expect("the seed tools collect"))
        .store(SqliteStore::open(db).unwrap())
        .state(OpsBackend::default())
        .state(Releases::default())
        .state(Treehole::default())
        .state(Wallet::default())
        .options(clock.options())
        .build()
        .unwrap()
}

fn waiting(outcome: RespondOutcome) -> Vec<InputRequest> {
    match outcome {
        RespondOutcome::Resumed(StepOutcome::Waiting { requests, .. }) => requests,
        other => panic!("expected the run to park again, got {other:?}"),
    }
}

fn finished(outcome: StepOutcome) -> Value {
    match outcome {
        StepOutcome::Completed { results, .. } => {
            assert!(!results[0].is_error, "{results:?}");
            results[0].output.clone()
        }
        other => panic!("expected completed, got {other:?}"),
    }
}

async fn deploy(service: &str, db: &std::path::Path, clock: &ManualClock) -> Vec<InputRequest> {
    let rt = process(db, clock);
    let session = rt
        .open_session(SessionSpec::new(format!("deploy-{service}")).initiator(dana()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(dana()), Caller::Model)
        .await
        .unwrap();
    let arguments = json!({ "service": service, "environment": "production", "version": "v9.9.9" });
    let outcome = turn
        .step(vec![ToolCall::new(
            "c1",
            "deploy_service",
            arguments.to_string(),
        )])
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("the deploy waits for approval first: {outcome:?}")
    };
    assert_eq!(requests[0].kind, RequestKind::ToolApproval);
    assert_eq!(
        requests[0].prompt,
        format!("Deploy {service}@v9.9.9 to production?")
    );
    requests
}

#[tokio::test]
async fn a_healthy_deploy_survives_a_restart_at_every_parking_point() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ops.db");
    let clock = ManualClock::at(1_700_000_000_000);

    // Parked on approval; the process stops.
    let approval = deploy("search-api", &db, &clock).await;

    // Restart: approve. The run starts, plans, and parks on the confirmation question.
    let questions = waiting(
        process(&db, &clock)
            .respond(InputResponse::approve(
                &approval[0].request_id,
                Some(dana()),
            ))
            .await
            .unwrap(),
    );
    assert_eq!(questions[0].kind, RequestKind::Question);
    assert!(
        questions[0]
            .prompt
            .starts_with("Deploy plan:\nroll 4 instances of search-api"),
        "{}",
        questions[0].prompt
    );

    // Restart: confirm. The run deploys and parks on its five-minute sleep (no question).
    let parked = process(&db, &clock)
        .respond(InputResponse::choose(
            &questions[0].request_id,
            Some(dana()),
            "go",
        ))
        .await
        .unwrap();
    assert!(waiting(parked).is_empty(), "a sleep asks nobody");

    // Restart before the time is up: nothing happens.
    assert!(process(&db, &clock).wake_due().await.unwrap().is_empty());

    // Restart after five minutes: the run checks health and finishes.
    clock.advance(5 * 60 * 1000);
    let mut woken = process(&db, &clock).wake_due().await.unwrap();
    assert_eq!(woken.len(), 1);
    let output = finished(woken.remove(0).1);
    assert_eq!(output["deployed"], true, "{output}");
    assert_eq!(output["health"]["ok"], true, "{output}");
    assert!(
        output["change"].is_object(),
        "the deploy step's value survived the restarts: {output}"
    );
}

#[tokio::test]
async fn an_unhealthy_deploy_offers_a_rollback_after_the_sleep() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ops.db");
    let clock = ManualClock::at(1_700_000_000_000);

    let approval = deploy("payment-api", &db, &clock).await;
    let questions = waiting(
        process(&db, &clock)
            .respond(InputResponse::approve(
                &approval[0].request_id,
                Some(dana()),
            ))
            .await
            .unwrap(),
    );
    let parked = process(&db, &clock)
        .respond(InputResponse::choose(
            &questions[0].request_id,
            Some(dana()),
            "go",
        ))
        .await
        .unwrap();
    assert!(waiting(parked).is_empty());
    clock.advance(5 * 60 * 1000);
    let mut woken = process(&db, &clock).wake_due().await.unwrap();
    let StepOutcome::Waiting { requests, .. } = woken.remove(0).1 else {
        panic!("payment-api is degraded: the run asks about a rollback")
    };
    assert!(
        requests[0].prompt.contains("Roll back?"),
        "{}",
        requests[0].prompt
    );

    // Restart while parked on the rollback question, then roll back.
    let outcome = process(&db, &clock)
        .respond(InputResponse::choose(
            &requests[0].request_id,
            Some(dana()),
            "rollback",
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(outcome) = outcome else {
        panic!("{outcome:?}")
    };
    let output = finished(outcome);
    assert_eq!(output["rolled_back"], true, "{output}");
    assert_eq!(output["deployed"], false, "{output}");
}

#[tokio::test]
async fn declining_the_approval_never_starts_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ops.db");
    let clock = ManualClock::default();
    let approval = deploy("search-api", &db, &clock).await;
    let rt = process(&db, &clock);
    let outcome = rt
        .respond(InputResponse::cancel(&approval[0].request_id, Some(dana())))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(results[0].is_error);
    let run = format!("{}/c1", approval[0].turn_id);
    assert!(
        rt.store().journal(&run).await.unwrap().is_empty(),
        "no step ran"
    );
}
