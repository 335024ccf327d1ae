//! The SQLite store: the conformance suite on a file and in memory, durability across reopening,
//! two connections racing on one file, the schema migration, and many parked turns.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolwright_core::{Caller, Principal};
use toolwright_runtime::store::{
    ANONYMOUS_REQUESTER, UNKNOWN_REQUESTER, conformance, requester_key,
};
use toolwright_runtime::{
    CallResult, ClosedStep, PendingStep, SessionRecord, SqliteStore, Store, StoreError, TurnRecord,
    TurnRetention, TurnStatus,
};

#[path = "support/pages.rs"]
mod pages;

#[path = "support/records.rs"]
mod records;

/// A fresh directory (removed on drop) and a store path inside it.
fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("toolwright.db");
    (dir, path)
}

fn turn(id: &str, status: TurnStatus, requests: &[&str]) -> TurnRecord {
    TurnRecord {
        id: id.to_owned(),
        session_id: "s1".to_owned(),
        current: None,
        caller: Caller::Model,
        structured_output: false,
        tainted_by: None,
        status,
        steps: 0,
        last_step: None,
        pending: (!requests.is_empty()).then(|| PendingStep {
            index: 0,
            input: None,
            calls: Vec::new(),
            requests: requests
                .iter()
                .map(|request| records::question((*request).to_owned(), "s1", id))
                .collect(),
        }),
    }
}

/// Closed step `index` of one call, its result saying `form`.
fn closed_step(index: u32, form: &str) -> ClosedStep {
    let result = CallResult::failed(
        &format!("call-{index}"),
        "todo.add",
        toolwright_core::ToolError::new(format!("step {index}: {form}")),
    );
    ClosedStep {
        index,
        results: vec![Arc::new(result)],
        requests: Vec::new(),
    }
}

fn user_version(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap()
}

fn backend_message(result: Result<SqliteStore, StoreError>) -> String {
    match result {
        Err(StoreError::Backend(message)) => message,
        other => panic!("expected StoreError::Backend, got {other:?}"),
    }
}

#[tokio::test]
async fn conformance_on_a_file() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
    conformance::run(&store).await;
}

#[tokio::test]
async fn conformance_in_memory() {
    conformance::run(&SqliteStore::in_memory().unwrap()).await;
}

#[tokio::test]
async fn retention_conformance_on_a_file_of_its_own() {
    let (_dir, path) = temp_db();
    conformance::retention(&SqliteStore::open(&path).unwrap()).await;
}

#[tokio::test]
async fn conformance_runs_twice_on_one_file() {
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
    conformance::run(&store).await;
    conformance::run(&store).await;
}

#[tokio::test]
async fn records_survive_reopening() {
    let (_dir, path) = temp_db();
    let mut session = SessionRecord::new("s1");
    session.state.insert("seen".into(), json!(["a", "b"]));
    let parked = turn("t1", TurnStatus::Waiting, &["q1", "q2"]);
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_session(&session, None).await.unwrap();
        store.put_session(&session, Some(1)).await.unwrap();
        store.put_turn(&parked, None).await.unwrap();
        store
            .put_turn(&turn("t2", TurnStatus::Completed, &[]), None)
            .await
            .unwrap();
        store
            .remember_approval("s1", "user:oidc:alice", "wallet.pay")
            .await
            .unwrap();
    }

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.session("s1").await.unwrap(),
        Some((session.clone(), 2))
    );
    assert_eq!(store.turn("t1").await.unwrap(), Some((parked.clone(), 1)));
    assert_eq!(
        store.turn_of_request("q2").await.unwrap().as_deref(),
        Some("t1")
    );
    assert_eq!(store.waiting_turns().await.unwrap(), ["t1"]);
    assert!(
        store
            .approvals("s1", "user:oidc:alice")
            .await
            .unwrap()
            .contains("wallet.pay")
    );

    // Versions carry on from the file, and a stale writer from before is still refused.
    assert_eq!(store.put_session(&session, Some(2)).await.unwrap(), 3);
    assert!(matches!(
        store.put_session(&session, Some(2)).await,
        Err(StoreError::Conflict(_))
    ));
    let mut resumed = parked;
    resumed.status = TurnStatus::Running;
    resumed.pending = None;
    assert_eq!(store.put_turn(&resumed, Some(1)).await.unwrap(), 2);
    drop(store);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.turn("t1").await.unwrap(), Some((resumed, 2)));
    assert_eq!(
        store.turn_of_request("q1").await.unwrap().as_deref(),
        Some("t1")
    );
    assert!(store.waiting_turns().await.unwrap().is_empty());
}

/// Tasks spread over `stores` increment turn `t` (`TASKS × ROUNDS` times in all), each
/// re-reading and retrying on a conflict (`yielding` between its read and its write, so that
/// another task reads the same version meanwhile): every version must have exactly one winner,
/// and no increment may be lost, as each store reads it. The first attempt of every task waits
/// on a barrier between its read and its write, so all of them read version 1 and exactly one
/// wins it: the tasks race on every run, however the scheduler orders them.
async fn race_without_lost_updates(stores: &[Arc<SqliteStore>], yielding: bool) {
    const TASKS: u32 = 16;
    const ROUNDS: u32 = 5;
    stores[0]
        .put_turn(&turn("t", TurnStatus::Running, &[]), None)
        .await
        .unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(TASKS as usize));
    let tasks: Vec<_> = (0..TASKS)
        .map(|n| {
            let store = Arc::clone(&stores[n as usize % stores.len()]);
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                let mut won = Vec::new();
                let mut conflicts = 0_u32;
                let mut first = true;
                for _ in 0..ROUNDS {
                    loop {
                        let (mut record, version) = store.turn("t").await.unwrap().unwrap();
                        record.steps += 1;
                        if std::mem::take(&mut first) {
                            assert_eq!(version, 1, "task {n} read before the barrier");
                            barrier.wait().await;
                        } else if yielding {
                            tokio::task::yield_now().await;
                        }
                        match store.put_turn(&record, Some(version)).await {
                            Ok(next) => {
                                assert_eq!(next, version + 1);
                                won.push(next);
                                break;
                            }
                            Err(StoreError::Conflict(_)) => conflicts += 1,
                            Err(error) => panic!("task {n}: {error}"),
                        }
                    }
                }
                (won, conflicts)
            })
        })
        .collect();
    let mut won = Vec::new();
    let mut conflicts = 0;
    for task in tasks {
        let (task_won, task_conflicts) = task.await.unwrap();
        won.extend(task_won);
        conflicts += task_conflicts;
    }
    won.sort_unstable();
    let every: Vec<u64> = (2..=u64::from(TASKS * ROUNDS) + 1).collect();
    assert_eq!(won, every, "each version must have exactly one winner");
    assert!(
        conflicts >= TASKS - 1,
        "all {TASKS} tasks read version 1, so {} of them must have lost it; {conflicts} did",
        TASKS - 1
    );
    for store in stores {
        let (record, version) = store.turn("t").await.unwrap().unwrap();
        assert_eq!(
            (record.steps, version),
            (TASKS * ROUNDS, u64::from(TASKS * ROUNDS) + 1)
        );
    }
}

/// Two connections on one file (as two processes would have) increment one turn from many
/// tasks: no update is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_race_without_lost_updates() {
    let (_dir, path) = temp_db();
    let stores = [
        Arc::new(SqliteStore::open(&path).unwrap()),
        Arc::new(SqliteStore::open(&path).unwrap()),
    ];
    race_without_lost_updates(&stores, false).await;
}

/// A store in memory runs its operations on the calling task while the connection is free and
/// on the blocking pool while another holds it: tasks on two threads racing on one record
/// still get exactly one winner per version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_racing_on_a_store_in_memory_lose_no_update() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    race_without_lost_updates(&[store], true).await;
}

#[test]
fn opening_migrates_once() {
    let (_dir, path) = temp_db();
    drop(SqliteStore::open(&path).unwrap());
    assert_eq!(user_version(&path), 10);
    drop(SqliteStore::open(&path).unwrap());
    drop(SqliteStore::open(&path).unwrap());
    assert_eq!(user_version(&path), 10);
    let journal: String = rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
}

#[tokio::test]
async fn reopening_keeps_data_written_between_opens() {
    let (_dir, path) = temp_db();
    let first = SqliteStore::open(&path).unwrap();
    first
        .put_session(&SessionRecord::new("s1"), None)
        .await
        .unwrap();
    // A second open while the first is still in use must not migrate again or lose anything.
    let second = SqliteStore::open(&path).unwrap();
    assert!(second.session("s1").await.unwrap().is_some());
    second
        .put_session(&SessionRecord::new("s2"), None)
        .await
        .unwrap();
    assert!(first.session("s2").await.unwrap().is_some());
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let (_dir, path) = temp_db();
    drop(SqliteStore::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 11)
        .unwrap();

    let message = backend_message(SqliteStore::open(&path));
    assert!(
        message.contains("schema version 11") && message.contains("newer toolwright"),
        "{message}"
    );
    assert_eq!(
        user_version(&path),
        11,
        "the refused file must not be changed"
    );
}

#[test]
fn a_foreign_database_is_refused() {
    let (dir, path) = temp_db();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE notes (body TEXT)")
        .unwrap();
    let message = backend_message(SqliteStore::open(&path));
    assert!(message.contains("is not a toolwright store"), "{message}");
    assert_eq!(
        user_version(&path),
        0,
        "the foreign file must not be changed"
    );

    let other_app = dir.path().join("other.db");
    rusqlite::Connection::open(&other_app)
        .unwrap()
        .pragma_update(None, "application_id", 42)
        .unwrap();
    let message = backend_message(SqliteStore::open(&other_app));
    assert!(message.contains("is not a toolwright store"), "{message}");

    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "not a database at all, just some text in a file\n".repeat(20),
    )
    .unwrap();
    let message = backend_message(SqliteStore::open(&text));
    assert!(message.contains("notes.txt"), "{message}");
}

/// Many parked turns live in the file, not in memory; listing them stays quick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_waiting_turns() {
    const TURNS: usize = 10_000;
    let (_dir, path) = temp_db();
    let store = Arc::new(SqliteStore::open(&path).unwrap());

    let started = Instant::now();
    let ids: Vec<String> = (0..TURNS).map(|n| format!("turn-{n:05}")).collect();
    for (n, id) in ids.iter().enumerate() {
        let status = if n % 10 == 9 {
            TurnStatus::Completed
        } else {
            TurnStatus::Waiting
        };
        let request = format!("request-{n}");
        store
            .put_turn(&turn(id, status, &[&request]), None)
            .await
            .unwrap();
    }
    let written = started.elapsed();

    let started = Instant::now();
    let waiting = store.waiting_turns().await.unwrap();
    let listed = started.elapsed();

    let expected: Vec<&String> = ids
        .iter()
        .enumerate()
        .filter(|(n, _)| n % 10 != 9)
        .map(|(_, id)| id)
        .collect();
    assert_eq!(waiting.iter().collect::<Vec<_>>(), expected);
    assert_eq!(
        store
            .turn_of_request("request-4321")
            .await
            .unwrap()
            .as_deref(),
        Some("turn-04321")
    );
    eprintln!("wrote {TURNS} turns in {written:?}, listed the waiting ones in {listed:?}");
}

/// 100,000 parked turns, written straight into the file in one transaction (parking them one
/// by one takes minutes), paged through 100 at a time: each listed once, newest first, every
/// page bounded and as quick as the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_parked_turns_page_through() {
    use pages::{PARKED, SESSION, parked_id, parked_json};
    let (_dir, path) = temp_db();
    let store = SqliteStore::open(&path).unwrap();
    let started = Instant::now();
    {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO turns (id, session_id, status, version, json, updated) \
                     VALUES (?1, ?2, 'waiting', 1, ?3, ?4)",
                )
                .unwrap();
            for n in 0..PARKED {
                let position = i64::try_from(n).unwrap() + 1;
                insert
                    .execute(rusqlite::params![
                        parked_id(n),
                        SESSION,
                        parked_json(n),
                        position
                    ])
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let seeded = started.elapsed();
    let (walked, slowest) = pages::walk_the_inbox(&store).await;
    eprintln!(
        "sqlite: seeded {PARKED} parked turns in {seeded:?}, paged through them twice in \
         {walked:?} (slowest page {slowest:?})"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "a page took {slowest:?}: pages must not grow with the listing"
    );
}

/// A version 8 file (before the listings' indexes) gets them, and lists what it held.
#[tokio::test]
async fn a_version_8_file_gets_the_listing_indexes() {
    let (_dir, path) = temp_db();
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .put_session(&SessionRecord::new("kept"), None)
            .await
            .unwrap();
        store
            .put_turn(&turn("parked", TurnStatus::Waiting, &["q1"]), None)
            .await
            .unwrap();
    }
    downgrade(&path, 8);
    assert_eq!(user_version(&path), 8);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    let indexes: Vec<String> = rusqlite::Connection::open(&path)
        .unwrap()
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE '%_by_%' ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for index in [
        "sessions_by_update",
        "turns_by_status",
        "turns_by_session_update",
        "tasks_by_creation",
    ] {
        assert!(
            indexes.iter().any(|name| name == index),
            "{index}: {indexes:?}"
        );
    }
    let first = toolwright_runtime::PageRequest::first(10);
    let sessions = store.list_sessions(&first).await.unwrap();
    assert_eq!(sessions.items.len(), 1);
    assert_eq!(
        (sessions.items[0].id.as_str(), sessions.next),
        ("kept", None)
    );
    let waiting = toolwright_runtime::TurnFilter::default().status(TurnStatus::Waiting);
    let turns = store.list_turns(&waiting, &first).await.unwrap();
    assert_eq!(turns.items.len(), 1);
    assert_eq!(turns.items[0].id, "parked");
    conformance::listings(&store).await;
}

/// A version 9 file (before the step history) gets the `turn_steps` table, with the closed
/// step each turn's record held copied in; its parked turn is kept, answered and resumed as
/// before, and the steps its writes close from then on are all kept.
#[tokio::test]
async fn a_version_9_file_gets_the_step_history() {
    let (_dir, path) = temp_db();
    let mut done = turn("done", TurnStatus::Completed, &[]);
    done.pending = None;
    done.last_step = Some(closed_step(4, "before the upgrade"));
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .put_session(&SessionRecord::new("kept"), None)
            .await
            .unwrap();
        store
            .put_turn(&turn("parked", TurnStatus::Waiting, &["q1"]), None)
            .await
            .unwrap();
        store.put_turn(&done, None).await.unwrap();
    }
    downgrade(&path, 9);
    assert_eq!(user_version(&path), 9);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    let first = toolwright_runtime::PageRequest::first(10);
    let kept = store.turn_steps("done", &first).await.unwrap();
    assert_eq!(kept.items, [done.last_step.clone().unwrap()]);
    let (mut parked, version) = store.turn("parked").await.unwrap().unwrap();
    assert_eq!(parked.status, TurnStatus::Waiting);
    assert_eq!(parked.request("q1").unwrap().request_id, "q1");
    assert_eq!(
        store.turn_of_request("q1").await.unwrap().as_deref(),
        Some("parked")
    );
    assert!(
        store
            .turn_steps("parked", &first)
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // The parked step closes, then two more steps: each write keeps its step.
    let mut version = version;
    for index in 0..3 {
        parked.pending = None;
        parked.status = TurnStatus::Active;
        parked.last_step = Some(closed_step(index, "after the upgrade"));
        version = store.put_turn(&parked, Some(version)).await.unwrap();
    }
    let steps = store.turn_steps("parked", &first).await.unwrap();
    let indexes: Vec<u32> = steps.items.iter().map(|step| step.index).collect();
    assert_eq!(indexes, [0, 1, 2]);
    conformance::steps(&store).await;
}

/// Turns a current file back into what release `version` (1 to 9) wrote: version 10 added
/// the history of turns' closed steps, version 9 the indexes of the paged listings, version 8
/// added
/// attachments and what deleting and retention walk, version 7 the model loop's conversation, version 6 kept
/// answers beside their turn, version 5 keyed grants by requester and marked what each write
/// indexed, version 4 added the pins, version 3 leases and timer columns, version 2 the task
/// tables. (A file with answers beside a turn has none of that turn's answers after this.)
fn downgrade(path: &Path, version: u32) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("DROP TABLE turn_steps; PRAGMA user_version = 9;")
        .unwrap();
    if version == 9 {
        return;
    }
    conn.execute_batch(
        "DROP INDEX sessions_by_update; DROP INDEX turns_by_status; \
         DROP INDEX turns_by_session_update; DROP INDEX tasks_by_creation; \
         PRAGMA user_version = 8;",
    )
    .unwrap();
    if version == 8 {
        return;
    }
    conn.execute_batch(
        "DROP TABLE attachments; DROP INDEX turns_by_session; DROP INDEX task_requests_by_task; \
         DROP INDEX turns_finished; ALTER TABLE sessions DROP COLUMN updated_ms; \
         ALTER TABLE turns DROP COLUMN finished_ms; ALTER TABLE tasks DROP COLUMN finished_ms; \
         PRAGMA user_version = 7;",
    )
    .unwrap();
    if version == 7 {
        return;
    }
    conn.execute_batch("DROP TABLE conversation; PRAGMA user_version = 6;")
        .unwrap();
    if version == 6 {
        return;
    }
    conn.execute_batch("DROP TABLE turn_patches; PRAGMA user_version = 5;")
        .unwrap();
    if version == 5 {
        return;
    }
    conn.execute_batch(
        "DROP TABLE grants; \
         CREATE TABLE approvals (session_id TEXT NOT NULL, key TEXT NOT NULL, \
             PRIMARY KEY (session_id, key)) WITHOUT ROWID; \
         ALTER TABLE turns DROP COLUMN indexed; ALTER TABLE tasks DROP COLUMN indexed; \
         PRAGMA user_version = 4;",
    )
    .unwrap();
    if version == 4 {
        return;
    }
    conn.execute_batch("DROP TABLE pins; PRAGMA user_version = 3;")
        .unwrap();
    if version == 3 {
        return;
    }
    conn.execute_batch(
        "DROP INDEX turns_due; DROP INDEX turns_by_owner; DROP INDEX tasks_due; \
         DROP INDEX tasks_leased; \
         ALTER TABLE turns DROP COLUMN wake_at; ALTER TABLE turns DROP COLUMN lease_owner; \
         ALTER TABLE turns DROP COLUMN lease_token; ALTER TABLE turns DROP COLUMN lease_expires; \
         ALTER TABLE tasks DROP COLUMN wake_at; ALTER TABLE tasks DROP COLUMN lease_owner; \
         ALTER TABLE tasks DROP COLUMN lease_token; ALTER TABLE tasks DROP COLUMN lease_expires; \
         PRAGMA user_version = 2;",
    )
    .unwrap();
    if version == 1 {
        conn.execute_batch("DROP TABLE tasks; DROP TABLE task_requests; PRAGMA user_version = 1;")
            .unwrap();
    }
}

#[tokio::test]
async fn a_version_3_file_gets_a_pins_table() {
    let (_dir, path) = temp_db();
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .put_session(&toolwright_runtime::SessionRecord::new("kept"), None)
            .await
            .unwrap();
    }
    downgrade(&path, 3);
    assert_eq!(user_version(&path), 3);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    assert!(store.session("kept").await.unwrap().is_some());
    conformance::pins(&store).await;
}

#[tokio::test]
async fn a_version_5_file_keeps_its_parked_turn_and_takes_answers_beside_it() {
    let (_dir, path) = temp_db();
    let parked = turn("parked", TurnStatus::Waiting, &["r1", "r2"]);
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_turn(&parked, None).await.unwrap();
    }
    downgrade(&path, 5);
    assert_eq!(user_version(&path), 5);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    assert_eq!(store.turn("parked").await.unwrap(), Some((parked, 1)));
    assert_eq!(
        store.turn_of_request("r2").await.unwrap().as_deref(),
        Some("parked")
    );
    conformance::answers(&store).await;
}

#[tokio::test]
async fn a_version_6_file_gets_a_conversation_and_keeps_its_parked_turn() {
    let (_dir, path) = temp_db();
    let parked = turn("parked", TurnStatus::Waiting, &["r1"]);
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_turn(&parked, None).await.unwrap();
    }
    downgrade(&path, 6);
    assert_eq!(user_version(&path), 6);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    assert_eq!(store.turn("parked").await.unwrap(), Some((parked, 1)));
    conformance::conversation(&store).await;
}

#[tokio::test]
async fn a_version_7_file_gets_attachments_and_keeps_its_parked_turn() {
    let (_dir, path) = temp_db();
    let parked = turn("parked", TurnStatus::Waiting, &["r1"]);
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_turn(&parked, None).await.unwrap();
        let done = turn("done", TurnStatus::Completed, &[]);
        store.put_turn(&done, None).await.unwrap();
        store
            .append_conversation("s", "parked", 0, &[serde_json::json!({ "kept": true })])
            .await
            .unwrap();
    }
    downgrade(&path, 7);
    assert_eq!(user_version(&path), 7);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    assert_eq!(
        store.turn("parked").await.unwrap(),
        Some((parked.clone(), 1))
    );
    assert_eq!(store.conversation("s").await.unwrap().len(), 1);
    conformance::attachments(&store).await;

    // A turn finished before the upgrade counts as finished from the upgrade: swept, while
    // the parked one stays.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let rule = TurnRetention {
        older_than: Some(Duration::ZERO),
        ..TurnRetention::default()
    };
    let swept = store.sweep_turns(rule, 10).await.unwrap();
    assert_eq!((swept.turns, swept.done), (1, true));
    assert!(store.turn("done").await.unwrap().is_none());
    assert_eq!(store.turn("parked").await.unwrap(), Some((parked, 1)));
}

#[tokio::test]
async fn a_version_1_file_is_migrated_keeping_its_records() {
    let (_dir, path) = temp_db();
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .put_session(&toolwright_runtime::SessionRecord::new("kept"), None)
            .await
            .unwrap();
    }
    downgrade(&path, 1);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    assert!(store.session("kept").await.unwrap().is_some());
    assert!(store.open_tasks().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_version_2_file_gets_its_timers_indexed() {
    let (_dir, path) = temp_db();
    let at = 1_700_000_000_000_u64;
    {
        let store = SqliteStore::open(&path).unwrap();
        let mut sleeping = turn("sleeper", TurnStatus::Waiting, &[]);
        sleeping.pending = Some(PendingStep {
            index: 0,
            input: None,
            calls: vec![toolwright_runtime::PendingCall {
                call_id: "c1".to_owned(),
                tool: "deploy".to_owned(),
                input: json!({}),
                state: toolwright_runtime::CallState::Sleeping { until_ms: at },
            }],
            requests: Vec::new(),
        });
        store.put_turn(&sleeping, None).await.unwrap();
    }
    downgrade(&path, 2);

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    assert_eq!(store.due_turns(at).await.unwrap(), ["sleeper"]);
    assert!(store.due_turns(at - 1).await.unwrap().is_empty());
    assert!(store.expired_leases().await.unwrap().is_empty());
}

/// A version 4 file remembered grants per session only. Migrated, a session's grants go to the
/// one requester who acted in its turns, or to nobody when several did (or none); the request
/// index, written before writes were marked, keeps resolving and grows again.
#[tokio::test]
async fn a_version_4_file_gives_its_grants_to_the_one_requester_who_acted() {
    let (_dir, path) = temp_db();
    let alice = Principal::user("oidc", "alice");
    let bob = Principal::user("oidc", "bob");
    {
        let store = SqliteStore::open(&path).unwrap();
        let acted = |id: &str, session: &str, who: Option<&Principal>, requests: &[&str]| {
            let mut record = turn(id, TurnStatus::Waiting, requests);
            record.session_id = session.to_owned();
            record.current = who.cloned();
            record
        };
        for record in [
            acted("t1", "solo", Some(&alice), &["q1"]),
            acted("t2", "solo", Some(&alice), &[]),
            acted("t3", "shared", Some(&alice), &[]),
            acted("t4", "shared", Some(&bob), &[]),
            acted("t5", "nobody", None, &[]),
        ] {
            store.put_turn(&record, None).await.unwrap();
        }
    }
    downgrade(&path, 4);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "INSERT INTO approvals VALUES ('solo', 'pay'), ('shared', 'pay'), \
             ('nobody', 'pay'), ('no-turns', 'pay');",
        )
        .unwrap();

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), 10);
    let keys = |session: &'static str, requester: String| {
        let store = &store;
        async move { store.approvals(session, &requester).await.unwrap() }
    };
    let pay: BTreeSet<String> = ["pay".to_owned()].into();
    let none = BTreeSet::new();
    let alice_key = requester_key(Some(&alice));
    let bob_key = requester_key(Some(&bob));
    assert_eq!(keys("solo", alice_key.clone()).await, pay);
    assert_eq!(keys("solo", bob_key.clone()).await, none);
    assert_eq!(keys("shared", alice_key.clone()).await, none);
    assert_eq!(keys("shared", bob_key).await, none);
    assert_eq!(keys("shared", UNKNOWN_REQUESTER.to_owned()).await, pay);
    assert_eq!(keys("nobody", ANONYMOUS_REQUESTER.to_owned()).await, pay);
    assert_eq!(keys("no-turns", UNKNOWN_REQUESTER.to_owned()).await, pay);

    // The index the old build wrote still resolves; the first write after the upgrade (no
    // marker yet) indexes the turn's requests again, and later ones only what they add.
    assert_eq!(
        store.turn_of_request("q1").await.unwrap().as_deref(),
        Some("t1")
    );
    let mut record = turn("t1", TurnStatus::Waiting, &["q1", "q2"]);
    record.session_id = "solo".to_owned();
    record.current = Some(alice);
    store.put_turn(&record, Some(1)).await.unwrap();
    assert_eq!(
        store.turn_of_request("q2").await.unwrap().as_deref(),
        Some("t1")
    );
}
