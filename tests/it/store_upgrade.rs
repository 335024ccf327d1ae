//! Upgrades keep working: a SQLite store file written by an earlier toolwright (committed as
//! `tests/fixtures/store-v4-parked.db`, see `tests/fixtures/README.md`) opens with this build,
//! its parked turn resumes, and its `once` grants keep meaning what they meant.
//!
//! The file holds two sessions, both opened by alice:
//! - `upgrade-solo`: alice's turn, where she approved `upgrade_top_up` (`once`: a remembered
//!   grant) and then parked on a pending `once` approval of `upgrade_pay`;
//! - `upgrade-shared`: alice approved `upgrade_top_up` too, and bob took a turn as well.

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{InputResponse, Runtime, SessionSpec, SqliteStore};
use toolwright::{Caller, Registry};

use crate::support::{alice, bob, call, completed, resumed, waiting};
use crate::upgrade_checks::{grant_asks, grant_covers_nobody};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-v4-parked.db"
);

static PAID: AtomicUsize = AtomicUsize::new(0);
static TOPPED_UP: AtomicUsize = AtomicUsize::new(0);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PayArgs {
    /// Cents to pay.
    cents: u64,
    /// Who is paid.
    to: String,
}

#[derive(Serialize, JsonSchema)]
struct Paid {
    cents: u64,
}

/// Pays someone.
#[tool(
    effect = money,
    approval(request = once, prompt = "Pay {cents} cents to {to}?")
)]
async fn upgrade_pay(args: PayArgs) -> Paid {
    PAID.fetch_add(1, Ordering::SeqCst);
    Paid { cents: args.cents }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TopUpArgs {
    /// Cents to add to the campus card.
    cents: u64,
}

/// Tops up the campus card.
#[tool(
    effect = money,
    approval(request = once, prompt = "Top up the campus card with {cents} cents?")
)]
async fn upgrade_top_up(args: TopUpArgs) -> Paid {
    TOPPED_UP.fetch_add(1, Ordering::SeqCst);
    Paid { cents: args.cents }
}

/// Reads nothing in particular.
#[tool(effect = read)]
async fn upgrade_look(_: NoInput) -> Paid {
    Paid { cents: 0 }
}

fn registry() -> Registry {
    Registry::from_tools([upgrade_pay::TOOL, upgrade_top_up::TOOL, upgrade_look::TOOL]).unwrap()
}

/// Writes the fixture with the toolwright this test is built with. Run it only on the commit
/// named in `tests/fixtures/README.md` (the last one before stores changed what they hold):
/// `cargo test --workspace --locked --test it store_upgrade::write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-v4-parked.db; see tests/fixtures/README.md"]
async fn write_the_pre_upgrade_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let runtime = Runtime::builder(registry())
            .store(SqliteStore::open(&path).unwrap())
            .build()
            .unwrap();
        // `upgrade-solo`: a grant, then a parked `once` approval.
        let session = runtime
            .open_session(SessionSpec::new("upgrade-solo").initiator(alice()))
            .await
            .unwrap();
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "upgrade_top_up", json!({ "cents": 100 }))])
                .await
                .unwrap(),
        );
        let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
        let results = resumed(runtime.respond(answer).await.unwrap());
        assert!(!results[0].is_error, "{results:?}");
        let (_, parked) = waiting(
            turn.step(vec![call(
                "c2",
                "upgrade_pay",
                json!({ "cents": 2500, "to": "canteen" }),
            )])
            .await
            .unwrap(),
        );
        assert_eq!(parked.len(), 1);

        // `upgrade-shared`: alice's grant, and bob acting in the session too.
        let shared = runtime
            .open_session(SessionSpec::new("upgrade-shared").initiator(alice()))
            .await
            .unwrap();
        let turn = shared
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "upgrade_top_up", json!({ "cents": 100 }))])
                .await
                .unwrap(),
        );
        let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
        resumed(runtime.respond(answer).await.unwrap());
        let turn = shared.begin_turn(Some(bob()), Caller::Model).await.unwrap();
        completed(
            turn.step(vec![call("c1", "upgrade_look", json!({}))])
                .await
                .unwrap(),
        );
        let mut remembered = runtime
            .approvals("upgrade-solo", Some(&alice()))
            .await
            .unwrap();
        remembered.extend(
            runtime
                .approvals("upgrade-shared", Some(&alice()))
                .await
                .unwrap(),
        );
        assert_eq!(remembered.len(), 1, "{remembered:?}");
    }
    // The last connection closed: the log is folded into the file. Fold it again to be sure,
    // and leave the file in rollback mode, so that one file is all there is to commit.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    std::fs::copy(&path, FIXTURE).unwrap();
}

/// A copy of the fixture, opened (and migrated) by this build.
fn upgraded() -> (tempfile::TempDir, Runtime) {
    crate::support::upgraded(FIXTURE, registry())
}

#[tokio::test]
async fn a_store_written_before_the_upgrade_opens_and_its_parked_turn_resumes() {
    let (_dir, runtime) = upgraded();
    let waiting_turns = runtime.waiting_turns().await.unwrap();
    assert_eq!(waiting_turns.len(), 1, "the parked turn of `upgrade-solo`");
    let turn = runtime.turn(&waiting_turns[0]).await.unwrap();
    assert_eq!(turn.session_id(), "upgrade-solo");
    let record = turn.record().await.unwrap();
    let step = record.pending.as_ref().expect("a parked step");
    let request = &step.requests[0];
    assert_eq!(request.tool.as_deref(), Some("upgrade_pay"));
    assert_eq!(request.prompt, "Pay 2500 cents to canteen?");
    assert_eq!(request.requester, Some(alice()));

    // The pre-upgrade request is answered, and the call runs, once.
    let paid = PAID.load(Ordering::SeqCst);
    let answer = InputResponse::approve(&request.request_id, Some(alice()));
    let results = resumed(runtime.respond(answer.clone()).await.unwrap());
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(results[0].output, json!({ "cents": 2500 }));
    assert_eq!(PAID.load(Ordering::SeqCst), paid + 1);
    assert!(
        matches!(
            runtime.respond(answer).await.unwrap(),
            toolwright::runtime::RespondOutcome::Dropped
        ),
        "a second answer changes nothing"
    );
    assert_eq!(PAID.load(Ordering::SeqCst), paid + 1);
    assert!(runtime.waiting_turns().await.unwrap().is_empty());

    // The grant it completed is alice's, written the new way.
    let grants = runtime
        .approvals("upgrade-solo", Some(&alice()))
        .await
        .unwrap();
    assert!(grants.contains("upgrade_pay"), "{grants:?}");
    let again = turn
        .step(vec![call(
            "c3",
            "upgrade_pay",
            json!({ "cents": 100, "to": "canteen" }),
        )])
        .await
        .unwrap();
    completed(again);
}

#[tokio::test]
async fn a_pre_upgrade_grant_stays_with_the_one_requester_who_acted_and_covers_nobody_else() {
    let (_dir, runtime) = upgraded();
    // `upgrade-solo`: only alice ever acted, so the grant was given for her calls; it still
    // covers them, and only them.
    assert_eq!(
        runtime
            .approvals("upgrade-solo", Some(&alice()))
            .await
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        ["upgrade_top_up"]
    );
    let solo = runtime.session("upgrade-solo").await.unwrap();
    let alices = solo.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    let topped = TOPPED_UP.load(Ordering::SeqCst);
    completed(
        alices
            .step(vec![call("c1", "upgrade_top_up", json!({ "cents": 300 }))])
            .await
            .unwrap(),
    );
    assert_eq!(TOPPED_UP.load(Ordering::SeqCst), topped + 1);
    grant_asks(
        &runtime,
        "upgrade-solo",
        bob(),
        "upgrade_top_up",
        &TOPPED_UP,
    )
    .await;

    // `upgrade-shared`: alice and bob both acted, and the old grant does not say whose call it
    // was given for: it covers nobody, and each is asked again (once).
    grant_covers_nobody(&runtime, "upgrade-shared", "upgrade_top_up", &TOPPED_UP).await;
}
