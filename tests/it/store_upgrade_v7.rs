//! Upgrades keep working across the release that let tools write session state and read the
//! model input of their step: a SQLite store file written by the release before it (schema
//! version 7, committed as `tests/fixtures/store-v7-parked.db`, see `tests/fixtures/README.md`)
//! opens with this build and its parked work resumes.
//!
//! The file holds two sessions, both opened by alice:
//! - `v7-release`: a turn parked on alice's approval of `v7_unlock`, its step recorded with two
//!   messages of the model loop's conversation;
//! - `v7-flow`: a turn whose `v7_flow` workflow call recorded its `prepare` step and parked on a
//!   question.

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    Event, InputRequest, InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore,
    StepOptions, StepProgress,
};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, drain, resumed, waiting};
use crate::upgrade_checks::parked_step;

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-v7-parked.db"
);

static UNLOCKED: AtomicUsize = AtomicUsize::new(0);
static PREPARED: AtomicUsize = AtomicUsize::new(0);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct UnlockArgs {
    /// The operator's code.
    code: String,
}

#[derive(Serialize, JsonSchema)]
struct Unlocked {
    unlocked: bool,
    /// How many messages of model input the call saw.
    messages: usize,
}

/// What `v7_unlock` writes: the release is approved.
const APPROVED: StateKey<bool> = StateKey::new("approved");
/// What `v7_flow` writes once it rolled out: the service.
const ROLLED_OUT: StateKey<String> = StateKey::new("rolled_out");

/// Records the operator's approval of the release. (Before the upgrade its body wrote nothing
/// and read no messages: the fixture was written with that body.)
#[tool(effect = write, approval = always)]
async fn v7_unlock(args: UnlockArgs, ctx: ToolContext) -> Result<Unlocked, ToolError> {
    UNLOCKED.fetch_add(1, Ordering::SeqCst);
    ctx.set_session_state(&APPROVED, &!args.code.is_empty())
        .await?;
    Ok(Unlocked {
        unlocked: !args.code.is_empty(),
        messages: ctx.messages().await?.len(),
    })
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct FlowArgs {
    /// What to roll out.
    service: String,
}

#[derive(Serialize, JsonSchema)]
struct Rolled {
    service: String,
    go: bool,
}

static AUDITED: AtomicUsize = AtomicUsize::new(0);

/// Rolls a service out after asking. (Before the upgrade its body had no audit and ended after
/// the question: the audit is behind a version marker, so the run parked before the upgrade
/// replays the old path; the state write after the question is a new journal position.)
#[tool(effect = write, workflow = execute)]
async fn v7_flow(args: FlowArgs, ctx: WorkflowContext) -> Result<Rolled, ToolError> {
    ctx.step("prepare", async {
        PREPARED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .await?;
    if ctx.patched("audit-rollout").await? {
        ctx.step("audit", async {
            AUDITED.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await?;
    }
    let go = ctx
        .ask(
            AskRequest::new(format!("Roll {} out?", args.service))
                .option(AskOption::new("go", "Roll out"))
                .option(AskOption::new("stop", "Not now")),
        )
        .await?;
    if go.chose("go") {
        ctx.set_session_state(&ROLLED_OUT, &args.service).await?;
    }
    Ok(Rolled {
        service: args.service,
        go: go.chose("go"),
    })
}

fn registry() -> Registry {
    Registry::from_tools([v7_unlock::TOOL, v7_flow::TOOL]).unwrap()
}

/// Writes the fixture with the toolwright this test is built with. Run it only on the commit
/// named in `tests/fixtures/README.md` (the last one before stores changed what they hold):
/// `cargo test --workspace --locked --all-features --test it store_upgrade_v7::write -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/store-v7-parked.db; see tests/fixtures/README.md"]
async fn write_the_v7_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let runtime = Runtime::builder(registry())
            .store(SqliteStore::open(&path).unwrap())
            .build()
            .unwrap();
        // `v7-release`: a step the model loop recorded with its conversation, parked on an
        // approval.
        let session = runtime
            .open_session(SessionSpec::new("v7-release").initiator(alice()))
            .await
            .unwrap();
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let conversation = vec![
            json!({ "role": "user", "content": "unlock the release with REL-7Q2K" }),
            json!({ "role": "assistant", "content": "", "tool_calls": ["c1"] }),
        ];
        let (_, requests) = waiting(
            turn.step_with(
                vec![call("c1", "v7_unlock", json!({ "code": "REL-7Q2K" }))],
                StepOptions::new().conversation(0, conversation),
            )
            .await
            .unwrap(),
        );
        assert_eq!(requests.len(), 1);

        // `v7-flow`: a workflow call with a recorded step, parked on its question.
        let flow = runtime
            .open_session(SessionSpec::new("v7-flow").initiator(alice()))
            .await
            .unwrap();
        let turn = flow.begin_turn(Some(alice()), Caller::Model).await.unwrap();
        let (_, requests) = waiting(
            turn.step(vec![call("c1", "v7_flow", json!({ "service": "api" }))])
                .await
                .unwrap(),
        );
        assert_eq!(requests.len(), 1);
        assert_eq!(PREPARED.load(Ordering::SeqCst), 1);
        assert_eq!(UNLOCKED.load(Ordering::SeqCst), 0);
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

/// The pending request of the parked turn of `session`.
async fn parked_request(runtime: &Runtime, session: &str) -> InputRequest {
    let step = parked_step(runtime, session).await;
    assert_eq!(
        step.input, None,
        "steps recorded before the upgrade carry no input"
    );
    step.requests.into_iter().find(|r| r.is_pending()).unwrap()
}

#[tokio::test]
async fn a_v7_parked_approval_resumes_and_its_tool_writes_session_state() {
    let (_dir, runtime) = upgraded();
    assert_eq!(runtime.waiting_turns().await.unwrap().len(), 2);
    let request = parked_request(&runtime, "v7-release").await;
    assert_eq!(request.tool.as_deref(), Some("v7_unlock"));

    let unlocked = UNLOCKED.load(Ordering::SeqCst);
    let answer = InputResponse::approve(&request.request_id, Some(alice()));
    let results = resumed(runtime.respond(answer.clone()).await.unwrap());
    assert!(!results[0].is_error, "{results:?}");
    // The step was recorded before steps kept their model input: the tool sees none.
    assert_eq!(
        results[0].output,
        json!({ "unlocked": true, "messages": 0 })
    );
    assert_eq!(UNLOCKED.load(Ordering::SeqCst), unlocked + 1);
    let session = runtime.session("v7-release").await.unwrap();
    let state = session.record().await.unwrap().state;
    assert_eq!(state.get("approved"), Some(&json!(true)));
    assert!(matches!(
        runtime.respond(answer).await.unwrap(),
        RespondOutcome::Dropped
    ));

    // A new step records its input: the same tool now reads the conversation before it.
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let (_, requests) = waiting(
        turn.step_with(
            vec![call("c2", "v7_unlock", json!({ "code": "REL-4M8D" }))],
            StepOptions::new().conversation(
                2,
                vec![json!({ "role": "assistant", "tool_calls": ["c2"] })],
            ),
        )
        .await
        .unwrap(),
    );
    let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert_eq!(
        results[0].output,
        json!({ "unlocked": true, "messages": 2 })
    );
}

#[tokio::test]
async fn a_v7_parked_workflow_replays_its_journal_and_journals_its_new_write() {
    let (_dir, runtime) = upgraded();
    let mut events = runtime.subscribe();
    let request = parked_request(&runtime, "v7-flow").await;
    let prepared = PREPARED.load(Ordering::SeqCst);
    let answer = InputResponse::choose(&request.request_id, Some(alice()), "go");
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(results[0].output, json!({ "service": "api", "go": true }));
    assert_eq!(
        PREPARED.load(Ordering::SeqCst),
        prepared,
        "the step recorded before the upgrade is replayed, not run"
    );
    assert_eq!(
        AUDITED.load(Ordering::SeqCst),
        0,
        "the run parked before the audit existed takes the old path"
    );
    let steps: Vec<(String, StepProgress)> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ActionStep { step, progress, .. } => Some((step, progress)),
            _ => None,
        })
        .collect();
    assert_eq!(steps, vec![("prepare".to_owned(), StepProgress::Replayed)]);
    let state = runtime
        .session("v7-flow")
        .await
        .unwrap()
        .record()
        .await
        .unwrap()
        .state;
    assert_eq!(state.get("rolled_out"), Some(&json!("api")));
    let run_id = format!("{}/c1", request.turn_id);
    let journal = runtime.store().journal(&run_id).await.unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names[0], "prepare");
    assert_eq!(
        names.last(),
        Some(&"toolwright.state.set:rolled_out"),
        "{names:?}"
    );
}
