//! Upgrades keep working on Postgres from the first release of the Postgres store: a database
//! written by the last toolwright with migration 1 alone (committed as
//! `tests/fixtures/store-pg-v1.sql`, a `pg_dump --inserts` of it, see `tests/fixtures/README.md`)
//! is restored into a scratch database, opened with this build (which runs migrations 2 to 6 on
//! it), and its parked work resumes: a parked approval runs its call once, a parked workflow
//! replays its journal and runs its next step once. Its remembered `once` grant, kept per session
//! only then, goes to the one requester who acted in the session (migration 3): it still covers
//! alice's calls, and only hers.
//!
//! The database holds three sessions, all opened by alice:
//! - `pg1-release`: a turn parked on alice's `always` approval of `pg1_unlock`;
//! - `pg1-flow`: a turn whose `pg1_flow` workflow call journaled its `prepare` step and parked
//!   on a question;
//! - `pg1-grant`: a completed turn where alice approved `pg1_top_up` (`once`: a remembered
//!   grant).

use std::sync::atomic::Ordering;

use serde_json::json;
use toolwright::runtime::{InputResponse, PostgresStore, Runtime, SessionSpec};
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
    "/tests/fixtures/store-pg-v1.sql"
);

release_tools!(pg1_unlock, pg1_flow, pg1_top_up);

fn registry() -> Registry {
    Registry::from_tools([pg1_unlock::TOOL, pg1_flow::TOOL, pg1_top_up::TOOL]).unwrap()
}

/// Writes the fixture with the toolwright this test is built with, against a Postgres server
/// with `pg_dump` on the path. Run it only at the commit named in `tests/fixtures/README.md`
/// (da3d19f, the last with migration 1 alone that builds). That commit has no `tests/it`: the
/// test binary there is `tests/store_upgrade_pg_v1/`, holding this file (its reading tests left
/// out), the tool macro and Postgres helpers of `upgrade_checks.rs` and the helpers of
/// `tests/support` it calls: `cargo test --locked --test store_upgrade_pg_v1 write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-pg-v1.sql; see tests/fixtures/README.md"]
async fn write_the_pg_v1_fixture() {
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
        // `pg1-release`: a parked approval.
        let turn = open("pg1-release").await;
        let (_, parked) = waiting(
            turn.step(vec![call("c1", "pg1_unlock", json!({ "code": "7" }))])
                .await
                .unwrap(),
        );
        assert_eq!(parked.len(), 1);

        // `pg1-flow`: a workflow call with a journaled step, parked on its question.
        let turn = open("pg1-flow").await;
        let (_, asked) = waiting(
            turn.step(vec![call("c1", "pg1_flow", json!({ "code": "v2" }))])
                .await
                .unwrap(),
        );
        assert_eq!(asked.len(), 1);

        // `pg1-grant`: alice's remembered grant.
        let turn = open("pg1-grant").await;
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "pg1_top_up", json!({ "cents": 100 }))])
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
        dumped.contains("INSERT INTO public.approvals"),
        "alice's grant is a row of the table migration 3 replaced"
    );
}

#[tokio::test]
async fn a_pg_v1_parked_approval_resumes_and_its_call_runs_once() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 2);
    parked_approval_resumes_once(&runtime, &TOOLS, "pg1-release", &[json!("unlocked with 7")])
        .await;
}

#[tokio::test]
async fn a_pg_v1_parked_workflow_replays_its_journal_and_runs_its_next_step_once() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    parked_workflow_replays_its_journal(&runtime, &TOOLS, "pg1-flow").await;
}

#[tokio::test]
async fn a_pg_v1_grant_goes_to_the_one_requester_who_acted_and_covers_nobody_else() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    grant_covers_alice_only(&runtime, &TOOLS, "pg1-grant").await;
}
