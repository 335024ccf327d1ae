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

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    Decision, Event, InputRequest, InputResponse, PostgresStore, RequestStatus, RespondOutcome,
    Runtime, SessionSpec, StepProgress,
};
use toolwright::{Caller, Registry};

use crate::store_upgrade_pg::{dump, restored, scratch, server};
use crate::support::{alice, bob, call, completed, drain, resumed, waiting};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-pg-v4.sql"
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
async fn pg4_unlock(args: Code) -> String {
    UNLOCKED.fetch_add(1, Ordering::SeqCst);
    format!("unlocked with {}", args.code)
}

/// Prepares, asks, then ships.
#[tool(effect = write, workflow = execute)]
async fn pg4_flow(args: Code, ctx: WorkflowContext) -> Result<String, ToolError> {
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
async fn pg4_top_up(args: TopUp) -> u64 {
    TOPPED_UP.fetch_add(1, Ordering::SeqCst);
    args.cents
}

fn registry() -> Registry {
    Registry::from_tools([pg4_unlock::TOOL, pg4_flow::TOOL, pg4_top_up::TOOL]).unwrap()
}

/// Writes the fixture with the toolwright this test is built with, against a Postgres server
/// with `pg_dump` on the path. Run it only at the commit named in `tests/fixtures/README.md`
/// (cd70496, the last release at migration 4), with this file (its reading tests left out) and
/// the helpers of `store_upgrade_pg.rs` it calls added:
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
async fn a_pg_v4_parked_approval_resumes_with_the_answer_kept_beside_its_turn() {
    let Some(runtime) = upgraded().await else {
        return;
    };
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 2);
    let requests = parked_requests(&runtime, "pg4-release").await;
    assert_eq!(requests.len(), 2, "{requests:?}");
    let by_call = |id: &str| {
        requests
            .iter()
            .find(|r| r.call_id.as_deref() == Some(id))
            .unwrap()
            .clone()
    };
    let (first, second) = (by_call("c1"), by_call("c2"));
    assert_eq!(first.tool.as_deref(), Some("pg4_unlock"));
    assert!(
        matches!(
            first.status,
            RequestStatus::Settled {
                decision: Decision::Approved,
                ..
            }
        ),
        "the answer recorded beside the turn is read with it: {:?}",
        first.status
    );
    assert!(second.is_pending(), "{:?}", second.status);

    // The last answer resumes the step: both calls run, once each.
    let unlocked = UNLOCKED.load(Ordering::SeqCst);
    let answer = InputResponse::approve(&second.request_id, Some(alice()));
    let results = resumed(runtime.respond(answer.clone()).await.unwrap());
    let outputs: Vec<_> = results.iter().map(|r| r.output.clone()).collect();
    assert_eq!(
        outputs,
        [json!("unlocked with 7"), json!("unlocked with 8")],
        "{results:?}"
    );
    assert_eq!(UNLOCKED.load(Ordering::SeqCst), unlocked + 2);
    assert!(matches!(
        runtime.respond(answer).await.unwrap(),
        RespondOutcome::Dropped
    ));
    assert_eq!(UNLOCKED.load(Ordering::SeqCst), unlocked + 2);
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_pg_v4_parked_workflow_replays_its_journal_and_runs_its_next_step_once() {
    let Some(runtime) = upgraded().await else {
        return;
    };
    let mut events = runtime.subscribe();
    let requests = parked_requests(&runtime, "pg4-flow").await;
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
async fn a_pg_v4_grant_still_covers_alice_and_nobody_else() {
    let Some(runtime) = upgraded().await else {
        return;
    };
    assert_eq!(
        runtime
            .approvals("pg4-grant", Some(&alice()))
            .await
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        ["pg4_top_up"]
    );
    let session = runtime.session("pg4-grant").await.unwrap();
    let topped = TOPPED_UP.load(Ordering::SeqCst);
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let results = completed(
        turn.step(vec![call("c9", "pg4_top_up", json!({ "cents": 100 }))])
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
        bobs.step(vec![call("c1", "pg4_top_up", json!({ "cents": 100 }))])
            .await
            .unwrap(),
    );
    assert_eq!(requests[0].requester, Some(bob()));
    assert_eq!(TOPPED_UP.load(Ordering::SeqCst), topped + 1);
}
