//! Versioned bodies: a workflow's code changes while a run is parked. Each runtime here stands
//! for a deployment of one version of the body (the version is the runtime's state); they
//! share one store file, as a redeployed service does.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::{EntryKind, InputResponse, Runtime, SessionSpec, SqliteStore};
use toolwright::{Caller, ErrorCode, Registry};

use crate::support::{alice, call, resumed, waiting};

/// Which code the deployment runs: 1 (no audit), 2 (an audit behind the `add-audit` marker),
/// 3 (the audit added without a marker).
struct Version(u8);

/// How many audits ran, across deployments.
#[derive(Clone, Default)]
struct Audits(Arc<AtomicUsize>);

/// Copies a table, then switches over once a person says so.
#[tool(effect = write, workflow = execute)]
async fn migrate(
    _: NoInput,
    ctx: WorkflowContext,
    version: State<Version>,
    audits: State<Audits>,
) -> Result<Value, ToolError> {
    ctx.step("copy", async { Ok(()) }).await?;
    let audit = || async {
        audits.0.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    let audited = match version.0.0 {
        1 => false,
        2 => {
            if ctx.patched("add-audit").await? {
                ctx.step("audit", audit()).await?;
                true
            } else {
                false
            }
        }
        _ => {
            ctx.step("audit", audit()).await?;
            true
        }
    };
    let go = ctx
        .ask(AskRequest::new("Switch over?").option(AskOption::new("go", "Switch")))
        .await?;
    ctx.step("switch", async { Ok(()) }).await?;
    Ok(json!({ "audited": audited, "switched": go.chose("go") }))
}

fn deployment(path: &Path, version: u8, audits: &Audits) -> Runtime {
    Runtime::builder(Registry::from_tools([migrate::TOOL]).unwrap())
        .store(SqliteStore::open(path).unwrap())
        .state(Version(version))
        .state(audits.clone())
        .build()
        .unwrap()
}

/// Starts `migrate` as call `call_id` in a new turn of session `session` on `runtime`; it parks
/// on its question, whose request id is returned.
async fn park(runtime: &Runtime, session: &str, call_id: &str) -> (String, String) {
    let session = runtime
        .open_session(SessionSpec::new(session).initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let (_, requests) = waiting(
        turn.step(vec![call(call_id, "migrate", json!({}))])
            .await
            .unwrap(),
    );
    (turn.id().to_owned(), requests[0].request_id.clone())
}

fn go(request_id: &str) -> InputResponse {
    InputResponse::choose(request_id, Some(alice()), "go")
}

#[tokio::test]
async fn a_run_parked_before_a_change_replays_the_old_path_and_new_runs_take_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let audits = Audits::default();

    // Version 1 parks a run.
    let v1 = deployment(&path, 1, &audits);
    let (_, old) = park(&v1, "old", "c1").await;
    drop(v1);

    // Version 2 resumes it: its journal predates the marker, so it takes the old path.
    let v2 = deployment(&path, 2, &audits);
    let results = resumed(v2.respond(go(&old)).await.unwrap());
    assert_eq!(
        results[0].output,
        json!({ "audited": false, "switched": true })
    );
    assert_eq!(audits.0.load(Ordering::SeqCst), 0);

    // A run started by version 2 takes the new path, and its replay takes it again.
    let (turn_id, new) = park(&v2, "new", "c2").await;
    assert_eq!(audits.0.load(Ordering::SeqCst), 1);
    let journal = v2.store().journal(&format!("{turn_id}/c2")).await.unwrap();
    let marker = &journal[1];
    assert_eq!(
        (marker.kind, marker.name.as_str()),
        (EntryKind::Patch, "add-audit")
    );
    let again = deployment(&path, 2, &audits);
    let results = resumed(again.respond(go(&new)).await.unwrap());
    assert_eq!(
        results[0].output,
        json!({ "audited": true, "switched": true })
    );
    assert_eq!(
        audits.0.load(Ordering::SeqCst),
        1,
        "the audit replayed from the journal"
    );
}

#[tokio::test]
async fn a_change_without_a_marker_fails_the_replay_naming_the_marker_to_add() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let audits = Audits::default();
    let (_, request) = park(&deployment(&path, 1, &audits), "s", "c1").await;

    let v3 = deployment(&path, 3, &audits);
    let results = resumed(v3.respond(go(&request)).await.unwrap());
    assert!(results[0].is_error, "{results:?}");
    let error = results[0].error.as_ref().unwrap();
    assert_eq!(error.code(), ErrorCode::Journal);
    assert!(
        error
            .message()
            .contains("the journal holds question `ask#1`, but this run reached step `audit`"),
        "{error}"
    );
    assert!(
        error.message().contains(
            r#"if ctx.patched("change-audit").await? { <new code> } else { <old code> }"#
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_marker_removed_while_runs_recorded_with_it_remain_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let audits = Audits::default();
    let (_, request) = park(&deployment(&path, 2, &audits), "s", "c1").await;

    // Version 1 again (the marker dropped too early): the run recorded with it cannot replay.
    let v1 = deployment(&path, 1, &audits);
    let results = resumed(v1.respond(go(&request)).await.unwrap());
    let error = results[0].error.as_ref().unwrap();
    assert_eq!(error.code(), ErrorCode::Journal);
    assert!(
        error
            .message()
            .contains(r#"keep `ctx.patched("add-audit")` in the body until none is left"#),
        "{error}"
    );
}
