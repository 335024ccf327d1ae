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
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore, StepOptions};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, waiting};

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

/// Records the operator's approval of the release.
#[tool(effect = write, approval = always)]
async fn v7_unlock(args: UnlockArgs) -> Unlocked {
    UNLOCKED.fetch_add(1, Ordering::SeqCst);
    Unlocked {
        unlocked: !args.code.is_empty(),
        messages: 0,
    }
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

/// Rolls a service out after asking.
#[tool(effect = write, workflow = execute)]
async fn v7_flow(args: FlowArgs, ctx: WorkflowContext) -> Result<Rolled, ToolError> {
    ctx.step("prepare", async {
        PREPARED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .await?;
    let go = ctx
        .ask(
            AskRequest::new(format!("Roll {} out?", args.service))
                .option(AskOption::new("go", "Roll out"))
                .option(AskOption::new("stop", "Not now")),
        )
        .await?;
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
