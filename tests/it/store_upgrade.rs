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
        let turn = shared
            .begin_turn(Some(bob()), Caller::Model)
            .await
            .unwrap();
        completed(
            turn.step(vec![call("c1", "upgrade_look", json!({}))])
                .await
                .unwrap(),
        );
        let mut remembered = runtime.approvals("upgrade-solo").await.unwrap();
        remembered.extend(runtime.approvals("upgrade-shared").await.unwrap());
        assert_eq!(remembered.len(), 1, "{remembered:?}");
    }
    // The last connection closed: the log is folded into the file. Fold it again to be sure,
    // and leave the file in rollback mode, so that one file is all there is to commit.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    std::fs::copy(&path, FIXTURE).unwrap();
}
