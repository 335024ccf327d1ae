//! Upgrades keep working on Postgres from the release before `once` grants had requesters: a
//! database written by it (migration 2, committed as `tests/fixtures/store-pg-v2.sql`, a
//! `pg_dump --inserts` of it, see `tests/fixtures/README.md`) is restored into a scratch
//! database, opened with this build (which runs migrations 3 to 6 on it), and its parked work
//! resumes: a parked approval runs its call once, a parked workflow replays its journal and runs
//! its next step once. Its remembered `once` grants, kept per session only then, go where
//! migration 3 says: to the one requester who acted in the session, or to nobody when several
//! did.
//!
//! The database holds four sessions, all opened by alice:
//! - `pg2-release`: a turn parked on alice's `always` approval of `pg2_unlock`;
//! - `pg2-flow`: a turn whose `pg2_flow` workflow call journaled its `prepare` step and parked
//!   on a question;
//! - `pg2-grant`: a completed turn where alice approved `pg2_top_up` (`once`: a remembered
//!   grant);
//! - `pg2-shared`: the same grant, and a turn of bob's (who called `pg2_look`).

use std::sync::atomic::Ordering;

use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{InputResponse, PostgresStore, Runtime, SessionSpec};
use toolwright::{Caller, Registry};

use crate::support::{alice, bob, call, completed, resumed, waiting};
use crate::upgrade_checks::pg::{dump, scratch, server, upgraded};
use crate::upgrade_checks::{
    grant_covers_alice_only, grant_covers_nobody, parked_approval_resumes_once,
    parked_workflow_replays_its_journal, release_tools,
};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-pg-v2.sql"
);

release_tools!(pg2_unlock, pg2_flow, pg2_top_up);

/// Reads the balance.
#[tool(effect = read)]
async fn pg2_look(_: NoInput) -> u64 {
    0
}

fn registry() -> Registry {
    Registry::from_tools([
        pg2_unlock::TOOL,
        pg2_flow::TOOL,
        pg2_top_up::TOOL,
        pg2_look::TOOL,
    ])
    .unwrap()
}

/// Writes the fixture with the toolwright this test is built with, against a Postgres server
/// with `pg_dump` on the path. Run it only at the commit named in `tests/fixtures/README.md`
/// (03b20af, the last release at migration 2). That commit has no `tests/it`: the test binary
/// there is `tests/store_upgrade_pg_v2/`, holding this file (its reading tests left out), the
/// tool macro and Postgres helpers of `upgrade_checks.rs` and the helpers of `tests/support` it
/// calls:
/// `cargo test --locked --test store_upgrade_pg_v2 write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-pg-v2.sql; see tests/fixtures/README.md"]
async fn write_the_pg_v2_fixture() {
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
        // `pg2-release`: a parked approval.
        let turn = open("pg2-release").await;
        let (_, parked) = waiting(
            turn.step(vec![call("c1", "pg2_unlock", json!({ "code": "7" }))])
                .await
                .unwrap(),
        );
        assert_eq!(parked.len(), 1);

        // `pg2-flow`: a workflow call with a journaled step, parked on its question.
        let turn = open("pg2-flow").await;
        let (_, asked) = waiting(
            turn.step(vec![call("c1", "pg2_flow", json!({ "code": "v2" }))])
                .await
                .unwrap(),
        );
        assert_eq!(asked.len(), 1);

        // `pg2-grant` and `pg2-shared`: alice's remembered grant; in `pg2-shared` bob acts too.
        for id in ["pg2-grant", "pg2-shared"] {
            let turn = open(id).await;
            let (_, requests) = waiting(
                turn.step(vec![call("c1", "pg2_top_up", json!({ "cents": 100 }))])
                    .await
                    .unwrap(),
            );
            let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
            resumed(runtime.respond(answer).await.unwrap());
            turn.complete().await.unwrap();
        }
        let turn = runtime
            .session("pg2-shared")
            .await
            .unwrap()
            .begin_turn(Some(bob()), Caller::Model)
            .await
            .unwrap();
        completed(
            turn.step(vec![call("c1", "pg2_look", json!({}))])
                .await
                .unwrap(),
        );
        turn.complete().await.unwrap();
        assert_eq!(UNLOCKED.load(Ordering::SeqCst), 0);
        assert_eq!(PREPARED.load(Ordering::SeqCst), 1);
        assert_eq!(SHIPPED.load(Ordering::SeqCst), 0);
        assert_eq!(TOPPED_UP.load(Ordering::SeqCst), 2);
    }
    dump(&db, FIXTURE);
}

#[tokio::test]
async fn a_pg_v2_parked_approval_resumes_and_its_call_runs_once() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 2);
    parked_approval_resumes_once(&runtime, &TOOLS, "pg2-release", &[json!("unlocked with 7")])
        .await;
}

#[tokio::test]
async fn a_pg_v2_parked_workflow_replays_its_journal_and_runs_its_next_step_once() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    parked_workflow_replays_its_journal(&runtime, &TOOLS, "pg2-flow").await;
}

#[tokio::test]
async fn a_pg_v2_grant_goes_to_the_one_requester_who_acted_and_covers_nobody_else() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    // `pg2-grant`: only alice acted, so the grant was given for her calls; it still covers
    // them, and only them.
    grant_covers_alice_only(&runtime, &TOOLS, "pg2-grant").await;
    // `pg2-shared`: alice and bob both acted, and the old grant does not say whose call it was
    // given for: it covers nobody, and each is asked again (once).
    grant_covers_nobody(&runtime, "pg2-shared", TOOLS.top_up, TOOLS.topped_up).await;
}
