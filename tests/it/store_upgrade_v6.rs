//! Upgrades keep working across the release that added the model loop's conversation: a SQLite
//! store file written by the release before it (schema version 6, committed as
//! `tests/fixtures/store-v6-parked.db`, see `tests/fixtures/README.md`) opens with this build,
//! which migrates it, and its parked work resumes: a parked approval runs its calls once, with
//! the answer kept beside the turn (`turn_patches`, the layout version 6 added) taken in; a
//! parked workflow replays its journal and runs its next step once; a remembered `once` grant
//! still covers its requester's calls, and only theirs.
//!
//! The file holds three sessions, all opened by alice:
//! - `v6-release`: a turn whose step called `v6_unlock` twice, each call asking alice's
//!   approval (`always`); she approved the first (an answer kept as a patch beside the turn)
//!   and the turn is parked on the second;
//! - `v6-flow`: a turn whose `v6_flow` workflow call journaled its `prepare` step and parked on
//!   a question;
//! - `v6-grant`: a completed turn where alice approved `v6_top_up` (`once`: a remembered grant).

use std::sync::atomic::Ordering;

use serde_json::json;
use toolwright::runtime::{InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, resumed, waiting};
use crate::upgrade_checks::{
    grant_covers_alice_only, parked_approval_resumes_once, parked_workflow_replays_its_journal,
    release_tools,
};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-v6-parked.db"
);

release_tools!(v6_unlock, v6_flow, v6_top_up);

fn registry() -> Registry {
    Registry::from_tools([v6_unlock::TOOL, v6_flow::TOOL, v6_top_up::TOOL]).unwrap()
}

/// Writes the fixture with the toolwright this test is built with. Run it only at the commit
/// named in `tests/fixtures/README.md` (cd70496, the last release at schema version 6), with this
/// file, its reading tests left out, and the tool macro of `upgrade_checks.rs` added:
/// `cargo test --locked --all-features --test it store_upgrade_v6::write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-v6-parked.db; see tests/fixtures/README.md"]
async fn write_the_v6_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let runtime = Runtime::builder(registry())
            .store(SqliteStore::open(&path).unwrap())
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
        // `v6-release`: two approvals, the first answered (a patch beside the turn).
        let turn = open("v6-release").await;
        let (_, parked) = waiting(
            turn.step(vec![
                call("c1", "v6_unlock", json!({ "code": "7" })),
                call("c2", "v6_unlock", json!({ "code": "8" })),
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

        // `v6-flow`: a workflow call with a journaled step, parked on its question.
        let turn = open("v6-flow").await;
        let (_, asked) = waiting(
            turn.step(vec![call("c1", "v6_flow", json!({ "code": "v2" }))])
                .await
                .unwrap(),
        );
        assert_eq!(asked.len(), 1);

        // `v6-grant`: alice's remembered grant.
        let turn = open("v6-grant").await;
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "v6_top_up", json!({ "cents": 100 }))])
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
    // The last connection closed: the log is folded into the file. Fold it again to be sure,
    // and leave the file in rollback mode, so that one file is all there is to commit.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let patches: i64 = conn
        .query_row("SELECT count(*) FROM turn_patches", [], |row| row.get(0))
        .unwrap();
    assert_eq!(patches, 1, "alice's first answer is kept beside its turn");
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    std::fs::copy(&path, FIXTURE).unwrap();
}

/// A copy of the fixture, opened (and migrated) by this build.
fn upgraded() -> (tempfile::TempDir, Runtime) {
    crate::support::upgraded(FIXTURE, registry())
}

#[tokio::test]
async fn a_v6_parked_approval_resumes_with_the_answer_kept_beside_its_turn() {
    let (_dir, runtime) = upgraded();
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 2);
    let outputs = [json!("unlocked with 7"), json!("unlocked with 8")];
    parked_approval_resumes_once(&runtime, &TOOLS, "v6-release", &outputs).await;
}

#[tokio::test]
async fn a_v6_parked_workflow_replays_its_journal_and_runs_its_next_step_once() {
    let (_dir, runtime) = upgraded();
    parked_workflow_replays_its_journal(&runtime, &TOOLS, "v6-flow").await;
}

#[tokio::test]
async fn a_v6_grant_still_covers_alice_and_nobody_else() {
    let (_dir, runtime) = upgraded();
    grant_covers_alice_only(&runtime, &TOOLS, "v6-grant").await;
}
