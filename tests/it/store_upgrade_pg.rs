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

use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use sqlx_core::query::query;
use sqlx_core::raw_sql::raw_sql;
use sqlx_postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use toolwright::prelude::*;
use toolwright::runtime::{InputResponse, PostgresStore, Runtime, SessionSpec};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, completed, resumed, waiting};

/// Where the fixture lives, from the crate root.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-pg-v5.sql"
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
async fn pg_unlock(args: Code) -> String {
    UNLOCKED.fetch_add(1, Ordering::SeqCst);
    format!("unlocked with {}", args.code)
}

/// Prepares, asks, then ships.
#[tool(effect = write, workflow = execute)]
async fn pg_flow(args: Code, ctx: WorkflowContext) -> Result<String, ToolError> {
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
async fn pg_top_up(args: TopUp) -> u64 {
    TOPPED_UP.fetch_add(1, Ordering::SeqCst);
    args.cents
}

fn registry() -> Registry {
    Registry::from_tools([pg_unlock::TOOL, pg_flow::TOOL, pg_top_up::TOOL]).unwrap()
}

/// The test server, or `None` (with a notice) when none is configured outside CI.
pub(crate) fn server() -> Option<String> {
    match std::env::var("TOOLWRIGHT_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url.trim().to_owned()),
        _ if std::env::var_os("CI").is_some() => {
            panic!("TOOLWRIGHT_TEST_POSTGRES_URL is not set, and the Postgres tests must run in CI")
        }
        _ => {
            eprintln!("skipping: TOOLWRIGHT_TEST_POSTGRES_URL is not set (scripts/test sets it)");
            None
        }
    }
}

async fn pool(url: &str) -> PgPool {
    use std::str::FromStr;
    PgPoolOptions::new()
        .max_connections(2)
        .connect_with(PgConnectOptions::from_str(url).unwrap())
        .await
        .unwrap()
}

/// A fresh database on the server of `url`: its name and its URL.
pub(crate) async fn scratch(url: &str) -> (String, String) {
    let name = format!("toolwright_upgrade_{}", uuid::Uuid::new_v4().simple());
    let admin = pool(url).await;
    query(sqlx_core::sql_str::AssertSqlSafe(format!(
        "CREATE DATABASE \"{name}\""
    )))
    .execute(&admin)
    .await
    .unwrap();
    admin.close().await;
    let mut parsed = sqlx_core::Url::parse(url).unwrap();
    parsed.set_path(&format!("/{name}"));
    (name, parsed.to_string())
}

/// Writes the fixture with the toolwright this test is built with. Run it only on the commit
/// named in `tests/fixtures/README.md` (the last one before migration 6), with a Postgres
/// server and `pg_dump` on the path:
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

/// Writes a fixture: a `pg_dump --inserts --no-owner --no-privileges` of the database at `db`
/// into the file `fixture` (`pg_dump` must be on the path).
pub(crate) fn dump(db: &str, fixture: &str) {
    let dump = std::process::Command::new("pg_dump")
        .args(["--inserts", "--no-owner", "--no-privileges", "--dbname", db])
        .output()
        .expect("pg_dump runs");
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    std::fs::write(fixture, dump.stdout).unwrap();
}

/// The dump `fixture` restored into a fresh database on the server of `url`: its URL. The
/// dump's statements run as they are, but for psql's meta-commands (lines starting with a
/// backslash), which are no SQL.
pub(crate) async fn restored(url: &str, fixture: &str) -> String {
    let (_name, db) = scratch(url).await;
    let sql: String = std::fs::read_to_string(fixture)
        .unwrap()
        .lines()
        .filter(|line| !line.starts_with('\\'))
        .map(|line| format!("{line}\n"))
        .collect();
    let restore = pool(&db).await;
    raw_sql(sqlx_core::sql_str::AssertSqlSafe(sql))
        .execute(&restore)
        .await
        .unwrap();
    restore.close().await;
    db
}

#[tokio::test]
async fn a_v5_database_migrates_and_its_parked_work_resumes_and_its_grants_hold() {
    let Some(url) = server() else { return };
    let db = restored(&url, FIXTURE).await;
    let runtime = Runtime::builder(registry())
        .store(PostgresStore::connect(&db).await.unwrap())
        .build()
        .unwrap();
    let waiting_turns = runtime.waiting_turns().await.unwrap();
    assert_eq!(waiting_turns.len(), 2, "{waiting_turns:?}");

    // The parked approval: answered, the call runs once.
    let requests = pending_requests(&runtime, "pg-release").await;
    let unlocked = UNLOCKED.load(Ordering::SeqCst);
    let answer = InputResponse::approve(&requests[0], Some(alice()));
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!("unlocked with 7"));
    assert_eq!(UNLOCKED.load(Ordering::SeqCst), unlocked + 1);

    // The parked workflow: its `prepare` step replays from the journal, `ship` runs once.
    let requests = pending_requests(&runtime, "pg-flow").await;
    let (prepared, shipped) = (
        PREPARED.load(Ordering::SeqCst),
        SHIPPED.load(Ordering::SeqCst),
    );
    let answer = InputResponse::choose(&requests[0], Some(alice()), "go");
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!("go: true"));
    assert_eq!(
        PREPARED.load(Ordering::SeqCst),
        prepared,
        "replayed, not run again"
    );
    assert_eq!(SHIPPED.load(Ordering::SeqCst), shipped + 1);

    // The grant: alice's next top-up in that session runs without asking.
    let turn = runtime
        .session("pg-grant")
        .await
        .unwrap()
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let topped = TOPPED_UP.load(Ordering::SeqCst);
    let results = completed(
        turn.step(vec![call("c9", "pg_top_up", json!({ "cents": 100 }))])
            .await
            .unwrap(),
    );
    assert_eq!(results[0].output, json!(100));
    assert_eq!(TOPPED_UP.load(Ordering::SeqCst), topped + 1);

    // And what the upgrade added works on it: the finished session is deleted whole.
    turn.complete().await.unwrap();
    let deleted = runtime
        .session("pg-grant")
        .await
        .unwrap()
        .delete()
        .await
        .unwrap();
    assert_eq!(deleted.turns, 2, "{deleted:?}");
}

/// The pending request ids of the waiting turn of session `session`.
async fn pending_requests(runtime: &Runtime, session: &str) -> Vec<String> {
    for id in runtime.waiting_turns().await.unwrap() {
        let turn = runtime.turn(&id).await.unwrap();
        if turn.session_id() != session {
            continue;
        }
        let step = turn.record().await.unwrap().pending.expect("a parked step");
        return step
            .requests
            .iter()
            .filter(|r| r.is_pending())
            .map(|r| r.request_id.clone())
            .collect();
    }
    panic!("no waiting turn in session `{session}`")
}
