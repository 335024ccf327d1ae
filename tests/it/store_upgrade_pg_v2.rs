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

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, InputRequest, InputResponse, PostgresStore, RespondOutcome, Runtime, SessionSpec,
    StepProgress, UNKNOWN_REQUESTER,
};
use toolwright::{Caller, Registry};

use crate::store_upgrade_pg::{dump, restored, scratch, server};
use crate::support::{alice, bob, call, completed, drain, resumed, waiting};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-pg-v2.sql"
);

static UNLOCKED: AtomicUsize = AtomicUsize::new(0);
static PREPARED: AtomicUsize = AtomicUsize::new(0);
static SHIPPED: AtomicUsize = AtomicUsize::new(0);
static TOPPED_UP: AtomicUsize = AtomicUsize::new(0);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Code {
    /// The operator's code.
    code: String,
}

/// Unlocks the release (asks every time).
#[tool(effect = write, approval = always)]
async fn pg2_unlock(args: Code) -> String {
    UNLOCKED.fetch_add(1, Ordering::SeqCst);
    format!("unlocked with {}", args.code)
}

/// Prepares, asks, then ships.
#[tool(effect = write, workflow = execute)]
async fn pg2_flow(args: Code, ctx: WorkflowContext) -> Result<String, ToolError> {
    ctx.step("prepare", async {
        PREPARED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .await?;
    let go = ctx
        .ask(
            AskRequest::new(format!("Ship {}?", args.code))
                .option(AskOption::new("go", "Ship"))
                .option(AskOption::new("stop", "Not now")),
        )
        .await?;
    if go.chose("go") {
        ctx.step("ship", async {
            SHIPPED.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await?;
    }
    Ok(format!("go: {}", go.chose("go")))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TopUp {
    /// Cents.
    cents: u64,
}

/// Tops up the card (asks once per person and session).
#[tool(effect = money, approval(request = once, prompt = "Top up {cents} cents?"))]
async fn pg2_top_up(args: TopUp) -> u64 {
    TOPPED_UP.fetch_add(1, Ordering::SeqCst);
    args.cents
}

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
/// helpers of `store_upgrade_pg.rs` and those of `tests/support` it calls:
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

/// The fixture restored into a fresh database and opened (and migrated) by this build, or
/// `None` when no server is configured.
async fn upgraded() -> Option<Runtime> {
    let url = server()?;
    let db = restored(&url, FIXTURE).await;
    let store = PostgresStore::connect(&db).await.unwrap();
    Some(Runtime::builder(registry()).store(store).build().unwrap())
}

/// The requests of the parked step of the waiting turn of session `session`.
async fn parked_requests(runtime: &Runtime, session: &str) -> Vec<InputRequest> {
    for id in runtime.waiting_turns().await.unwrap() {
        let turn = runtime.turn(&id).await.unwrap();
        if turn.session_id() == session {
            let record = turn.record().await.unwrap();
            return record.pending.expect("a parked step").requests;
        }
    }
    panic!("no parked turn in `{session}`");
}

#[tokio::test]
async fn a_pg_v2_parked_approval_resumes_and_its_call_runs_once() {
    let Some(runtime) = upgraded().await else {
        return;
    };
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 2);
    let requests = parked_requests(&runtime, "pg2-release").await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].tool.as_deref(), Some("pg2_unlock"));
    assert!(requests[0].is_pending(), "{:?}", requests[0].status);

    let unlocked = UNLOCKED.load(Ordering::SeqCst);
    let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
    let results = resumed(runtime.respond(answer.clone()).await.unwrap());
    assert_eq!(results[0].output, json!("unlocked with 7"), "{results:?}");
    assert_eq!(UNLOCKED.load(Ordering::SeqCst), unlocked + 1);
    assert!(matches!(
        runtime.respond(answer).await.unwrap(),
        RespondOutcome::Dropped
    ));
    assert_eq!(UNLOCKED.load(Ordering::SeqCst), unlocked + 1);
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_pg_v2_parked_workflow_replays_its_journal_and_runs_its_next_step_once() {
    let Some(runtime) = upgraded().await else {
        return;
    };
    let mut events = runtime.subscribe();
    let requests = parked_requests(&runtime, "pg2-flow").await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (prepared, shipped) = (
        PREPARED.load(Ordering::SeqCst),
        SHIPPED.load(Ordering::SeqCst),
    );
    let answer = InputResponse::choose(&requests[0].request_id, Some(alice()), "go");
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(results[0].output, json!("go: true"));
    assert_eq!(
        PREPARED.load(Ordering::SeqCst),
        prepared,
        "the step journaled before the upgrade is replayed, not run"
    );
    assert_eq!(SHIPPED.load(Ordering::SeqCst), shipped + 1);
    let replayed: Vec<String> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ActionStep {
                step,
                progress: StepProgress::Replayed,
                ..
            } => Some(step),
            _ => None,
        })
        .collect();
    assert_eq!(replayed, ["prepare"]);
    let run_id = format!("{}/c1", requests[0].turn_id);
    let journal = runtime.store().journal(&run_id).await.unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names.first(), Some(&"prepare"), "{names:?}");
    assert_eq!(names.last(), Some(&"ship"), "{names:?}");
}

#[tokio::test]
async fn a_pg_v2_grant_goes_to_the_one_requester_who_acted_and_covers_nobody_else() {
    let Some(runtime) = upgraded().await else {
        return;
    };
    // `pg2-grant`: only alice acted, so the grant was given for her calls; it still covers
    // them, and only them.
    assert_eq!(
        runtime
            .approvals("pg2-grant", Some(&alice()))
            .await
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        ["pg2_top_up"]
    );
    let session = runtime.session("pg2-grant").await.unwrap();
    let topped = TOPPED_UP.load(Ordering::SeqCst);
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let results = completed(
        turn.step(vec![call("c9", "pg2_top_up", json!({ "cents": 100 }))])
            .await
            .unwrap(),
    );
    assert_eq!(results[0].output, json!(100));
    assert_eq!(TOPPED_UP.load(Ordering::SeqCst), topped + 1);
    turn.complete().await.unwrap();
    let bobs = session
        .begin_turn(Some(bob()), Caller::Model)
        .await
        .unwrap();
    let (_, requests) = waiting(
        bobs.step(vec![call("c1", "pg2_top_up", json!({ "cents": 100 }))])
            .await
            .unwrap(),
    );
    assert_eq!(requests[0].requester, Some(bob()));
    assert_eq!(TOPPED_UP.load(Ordering::SeqCst), topped + 1);

    // `pg2-shared`: alice and bob both acted, and the old grant does not say whose call it was
    // given for: it covers nobody, and each is asked again (once).
    for who in [alice(), bob()] {
        assert!(
            runtime
                .approvals("pg2-shared", Some(&who))
                .await
                .unwrap()
                .is_empty()
        );
        let turn = runtime
            .session("pg2-shared")
            .await
            .unwrap()
            .begin_turn(Some(who.clone()), Caller::Model)
            .await
            .unwrap();
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "pg2_top_up", json!({ "cents": 100 }))])
                .await
                .unwrap(),
        );
        assert_eq!(requests[0].requester, Some(who));
    }
    assert_eq!(TOPPED_UP.load(Ordering::SeqCst), topped + 1);
    assert_eq!(
        runtime
            .store()
            .approvals("pg2-shared", UNKNOWN_REQUESTER)
            .await
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        ["pg2_top_up"],
        "kept, under a requester no call has"
    );
}
