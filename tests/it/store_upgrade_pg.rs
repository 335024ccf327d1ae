//! Upgrades keep working on Postgres: a database written by the release before attachments,
//! deletion and retention (migration 5; committed as `tests/fixtures/store-pg-v5.sql`, a
//! `pg_dump --inserts` of it, see `tests/fixtures/README.md`) is restored into a scratch
//! database, opened with this build (which migrates it), and its parked work resumes: a parked
//! approval runs once, a parked workflow replays its journal and runs its step once, and a
//! remembered `once` grant still covers its requester's calls.
//!
//! The database holds three sessions, all opened by alice:
//! - `pg-release`: a turn parked on alice's `always` approval of `pg_unlock`;
//! - `pg-flow`: a turn whose `pg_flow` workflow call recorded its `prepare` step and parked on a
//!   question;
//! - `pg-grant`: a turn where alice approved `pg_top_up` (`once`: a remembered grant).

use serde_json::json;
use toolwright::runtime::{InputResponse, PostgresStore, Runtime, SessionSpec};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, resumed, waiting};
use crate::upgrade_checks::pg::{dump, scratch, server, upgraded};
use crate::upgrade_checks::{
    grant_covers, parked_approval_resumes_once, parked_workflow_replays_its_journal, release_tools,
};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-pg-v5.sql"
);

release_tools!(pg_unlock, pg_flow, pg_top_up);

fn registry() -> Registry {
    Registry::from_tools([pg_unlock::TOOL, pg_flow::TOOL, pg_top_up::TOOL]).unwrap()
}

/// Writes the fixture with the toolwright this test is built with. Run it only on the commit
/// named in `tests/fixtures/README.md` (the last one before migration 6), with what it calls of
/// `upgrade_checks.rs` (the tool macro, the Postgres helpers) added, a Postgres server and
/// `pg_dump` on the path:
/// `cargo test --workspace --locked --all-features --test it store_upgrade_pg::write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-pg-v5.sql; see tests/fixtures/README.md"]
async fn write_the_pg_v5_fixture() {
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
        let turn = open("pg-release").await;
        let (_, parked) = waiting(
            turn.step(vec![call("c1", "pg_unlock", json!({ "code": "7" }))])
                .await
                .unwrap(),
        );
        assert_eq!(parked.len(), 1);

        let turn = open("pg-flow").await;
        let (_, asked) = waiting(
            turn.step(vec![call("c1", "pg_flow", json!({ "code": "v2" }))])
                .await
                .unwrap(),
        );
        assert_eq!(asked.len(), 1);

        let turn = open("pg-grant").await;
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "pg_top_up", json!({ "cents": 100 }))])
                .await
                .unwrap(),
        );
        let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
        resumed(runtime.respond(answer).await.unwrap());
        turn.complete().await.unwrap();
    }
    dump(&db, FIXTURE);
}

#[tokio::test]
async fn a_v5_database_migrates_and_its_parked_work_resumes_and_its_grants_hold() {
    let Some((_db, runtime)) = upgraded(FIXTURE, registry()).await else {
        return;
    };
    let waiting_turns = runtime.waiting_turns().await.unwrap();
    assert_eq!(waiting_turns.len(), 2, "{waiting_turns:?}");

    // The parked approval: answered, the call runs once.
    parked_approval_resumes_once(&runtime, &TOOLS, "pg-release", &[json!("unlocked with 7")]).await;

    // The parked workflow: its `prepare` step replays from the journal, `ship` runs once.
    parked_workflow_replays_its_journal(&runtime, &TOOLS, "pg-flow").await;

    // The grant: alice's next top-up in that session runs without asking.
    grant_covers(&runtime, &TOOLS, "pg-grant", alice()).await;

    // And what the upgrade added works on it: the finished session is deleted whole.
    let deleted = runtime
        .session("pg-grant")
        .await
        .unwrap()
        .delete()
        .await
        .unwrap();
    assert_eq!(deleted.turns, 2, "{deleted:?}");
}
