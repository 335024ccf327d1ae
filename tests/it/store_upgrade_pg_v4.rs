//! Upgrades keep working on Postgres across the release that added the model loop's
//! conversation: a database written by the release before it (migration 4, committed as
//! `tests/fixtures/store-pg-v4.sql`, a `pg_dump --inserts` of it, see
//! `tests/fixtures/README.md`) is restored into a scratch database, opened with this build (which
//! migrates it), and its parked work resumes: a parked approval runs its calls once, with the
//! answer kept beside the turn (`turn_patches`, the table migration 4 added) taken in; a parked
//! workflow replays its journal and runs its next step once; a remembered `once` grant still
//! covers its requester's calls, and only theirs.
//!
//! The database holds three sessions, all opened by alice:
//! - `pg4-release`: a turn whose step called `pg4_unlock` twice, each call asking alice's
//!   approval (`always`); she approved the first (an answer kept as a patch beside the turn)
//!   and the turn is parked on the second;
//! - `pg4-flow`: a turn whose `pg4_flow` workflow call journaled its `prepare` step and parked
//!   on a question;
//! - `pg4-grant`: a completed turn where alice approved `pg4_top_up` (`once`: a remembered
//!   grant).

use std::sync::atomic::Ordering;

use serde_json::json;
use toolwright::runtime::{InputResponse, PostgresStore, RespondOutcome, Runtime, SessionSpec};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, resumed, waiting};
use crate::upgrade_checks::pg::{dump, scratch, server, upgraded};
use crate::upgrade_checks::{
    grant_covers_alice_only, parked_approval_resumes_once, parked_workflow_replays_its_journal,
    release_tools,
};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-pg-v4.sql"
);

release_tools!(pg4_unlock, pg4_flow, pg4_top_up);

fn registry() -> Registry {
    Registry::from_tools([pg4_unlock::TOOL, pg4_flow::TOOL, pg4_top_up::TOOL]).unwrap()
}

/// Writes the fixture with the toolwright this test is built with, against a Postgres server
/// with `pg_dump` on the path. Run it only at the commit named in `tests/fixtures/README.md`
/// (cd70496, the last release at migration 4), with this file (its reading tests left out) and
/// what it calls of `upgrade_checks.rs` (the tool macro, the Postgres helpers) added:
/// `cargo test --locked --all-features --test it store_upgrade_pg_v4::write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-pg-v4.sql; see tests/fixtures/README.md"]
async fn write_the_pg_v4_fixture() {
    let Some(url) = server() else { return };
    let (_name, db) = scratch(&url).await;
    {
        let runtime = Runtime::builder(registry())
            .store(PostgresStore::connect(&db).await.unwrap())
            .build()
            .unwrap();
        let open = |id: &'static str| {
            let runtime = runtime.clone();
            async move {
                runtime
                    .open_session(SessionSpec::new(id).initiator(alice()))
                    .await
                    .unwrap()
                    .begin_turn(Some(alice()), Caller::Model)
                    .await
                    .unwrap()
            }
        };
        // `pg4-release`: two approvals, the first answered (a patch beside the turn).
        let turn = open("pg4-release").await;
        let (_, parked) = waiting(
            turn.step(vec![
                call("c1", "pg4_unlock", json!({ "code": "7" })),
                call("c2", "pg4_unlock", json!({ "code": "8" })),
            ])
            .await
            .unwrap(),
        );
        assert_eq!(parked.len(), 2);
        let first = parked
            .iter()
            .find(|r| r.call_id.as_deref() == Some("c1"))
            .unwrap();
        let answer = InputResponse::approve(&first.request_id, Some(alice()));
        let outcome = runtime.respond(answer).await.unwrap();
        assert!(
            matches!(outcome, RespondOutcome::Settled { .. }),
            "{outcome:?}"
        );

        // `pg4-flow`: a workflow call with a journaled step, parked on its question.
        let turn = open("pg4-flow").await;
        let (_, asked) = waiting(
            turn.step(vec![call("c1", "pg4_flow", json!({ "code": "v2" }))])
                .await
                .unwrap(),
        );
        assert_eq!(asked.len(), 1);

        // `pg4-grant`: alice's remembered grant.
        let turn = open("pg4-grant").await;
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "pg4_top_up", json!({ "cents": 100 }))])
                .await
                .unwrap(),
        );
        let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
        resumed(runtime.respond(answer).await.unwrap());
        turn.complete().await.unwrap();
        assert_eq!(UNLOCKED.load(Ordering::SeqCst), 0);
        assert_eq!(PREPARED.load(Ordering::SeqCst), 1);
        assert_eq!(SHIPPED.load(Ordering::SeqCst), 0);
        assert_eq!(TOPPED_UP.load(Ordering::SeqCst), 1);
    }
    dump(&db, FIXTURE);
    let dumped = std::fs::read_to_string(FIXTURE).unwrap();
    assert!(
        dumped.contains("INSERT INTO public.turn_patches"),
        "alice's first answer is kept beside its turn"
    );
}

#[tokio::test]
async fn a_pg_v4_parked_approval_resumes_with_the_answer_kept_beside_its_turn() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 2);
    let outputs = [json!("unlocked with 7"), json!("unlocked with 8")];
    parked_approval_resumes_once(&runtime, &TOOLS, "pg4-release", &outputs).await;
}

#[tokio::test]
async fn a_pg_v4_parked_workflow_replays_its_journal_and_runs_its_next_step_once() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    parked_workflow_replays_its_journal(&runtime, &TOOLS, "pg4-flow").await;
}

#[tokio::test]
async fn a_pg_v4_grant_still_covers_alice_and_nobody_else() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    grant_covers_alice_only(&runtime, &TOOLS, "pg4-grant").await;
}
