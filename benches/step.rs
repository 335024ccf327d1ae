//! What a runtime step costs against what it must do, side by side in one group (figures in
//! BENCHMARKS.md):
//!
//! - `step/floor`: `serde_json::from_str` into `read_logs`' argument struct, a direct call,
//!   `serde_json::to_string` of its output;
//! - `step/spawn_blocking`: one hop through tokio's blocking pool and back, as every store call
//!   makes;
//! - `step/sqlite_transaction`: one rusqlite transaction on an in-memory database writing the
//!   rows a step's close writes (the turn's row, with the record's JSON as the runtime wrote it,
//!   the closed step's row in the turn's step history, and its answers' rows deleted), without
//!   the runtime;
//! - `step/read_call`: `Turn::step` with one `read_logs` call, approval `never`, on
//!   `SqliteStore::in_memory()` (events on, no subscriber): a step of reads records nothing
//!   before it runs, so its one write is the close;
//! - `step/ten_read_calls`: the same step with ten calls, which run concurrently;
//! - `step/write_call`: one call of a `write` tool, recorded as running before it runs, then
//!   closed: two writes.
//! - `step/ten_read_calls_subscribed`: `ten_read_calls` while a subscriber drains the runtime's
//!   events on another task (as the console and the MCP server subscribe).

use criterion::{Criterion, criterion_group, criterion_main};
use rusqlite::{Connection, TransactionBehavior, params};
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore, ToolCall, Turn};

#[path = "common/read_logs.rs"]
mod read_logs;

use read_logs::{INPUT, ReadLogs};

/// `read_logs` as a `write` tool.
#[tool(effect = write)]
async fn write_logs(args: ReadLogs) -> Result<read_logs::Lines, ToolError> {
    Ok(read_logs::lines(&args))
}

fn turn(tokio: &tokio::runtime::Runtime, runtime: &Runtime) -> Turn {
    tokio.block_on(async {
        runtime
            .open_session(SessionSpec::new("bench"))
            .await
            .expect("session")
            .begin_turn(None, Caller::Model)
            .await
            .expect("turn")
    })
}

fn calls(tool: &str, n: usize) -> Vec<ToolCall> {
    (0..n)
        .map(|i| ToolCall::new(format!("c{i}"), tool, INPUT))
        .collect()
}

/// An in-memory database with the columns of the store's `turns`, `turn_steps` and
/// `turn_patches` tables, holding turn `t1` at version 1.
fn reference_database(json: &str) -> Connection {
    let conn = Connection::open_in_memory().expect("database");
    conn.execute_batch(
        "CREATE TABLE turns (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, status TEXT NOT NULL, \
         version INTEGER NOT NULL, json TEXT NOT NULL, updated INTEGER NOT NULL, wake_at INTEGER, \
         finished_ms INTEGER); \
         CREATE INDEX turns_status ON turns (status, updated); \
         CREATE TABLE turn_patches (turn_id TEXT NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL, \
         PRIMARY KEY (turn_id, seq)); \
         CREATE TABLE turn_steps (turn_id TEXT NOT NULL, step INTEGER NOT NULL, json TEXT NOT NULL, \
         PRIMARY KEY (turn_id, step)) WITHOUT ROWID;",
    )
    .expect("schema");
    conn.execute(
        "INSERT INTO turns (id, session_id, status, version, json, updated) \
         VALUES ('t1', 's1', 'active', 1, ?1, 1)",
        [json],
    )
    .expect("turn");
    conn
}

/// One transaction writing the turn's row at the next version and its closed step (`step`)
/// into the history, as a step's close does.
fn write_turn_row(conn: &mut Connection, (json, step): (&str, &str), version: &mut i64) {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .expect("begin");
    let updated = tx
        .prepare_cached(
            "UPDATE turns SET session_id = ?2, status = ?3, version = ?4, json = ?5, \
             updated = ?6 WHERE id = ?1 AND version = ?7",
        )
        .expect("statement")
        .execute(params![
            "t1",
            "s1",
            "active",
            *version + 1,
            json,
            *version + 1,
            *version
        ])
        .expect("update");
    assert_eq!(updated, 1);
    tx.prepare_cached(
        "INSERT INTO turn_steps (turn_id, step, json) VALUES (?1, ?2, ?3) \
         ON CONFLICT (turn_id, step) DO UPDATE SET json = excluded.json WHERE json != excluded.json",
    )
    .expect("statement")
    .execute(params!["t1", *version, step])
    .expect("history");
    tx.prepare_cached("DELETE FROM turn_patches WHERE turn_id = ?1")
        .expect("statement")
        .execute(["t1"])
        .expect("delete");
    tx.commit().expect("commit");
    *version += 1;
}

fn step(c: &mut Criterion) {
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let registry =
        Registry::from_tools([read_logs::read_logs::TOOL, write_logs::TOOL]).expect("registry");
    let runtime = Runtime::builder(registry)
        .store(SqliteStore::in_memory().expect("store"))
        .build()
        .expect("runtime");
    let reads = turn(&tokio, &runtime);
    let writes = turn(&tokio, &runtime);
    // The record as a step of one read call leaves it, and its closed step: the bytes the
    // reference writes.
    let (json, step_json) = tokio.block_on(async {
        reads.step(calls("read_logs", 1)).await.expect("step");
        let record = reads.record().await.expect("record");
        (
            serde_json::to_string(&record).expect("json"),
            serde_json::to_string(&record.last_step).expect("step json"),
        )
    });
    let mut conn = reference_database(&json);
    let mut version = 1;

    let mut group = c.benchmark_group("step");
    group.bench_function("floor", |b| {
        b.iter(|| {
            let args: ReadLogs = serde_json::from_str(INPUT).expect("input");
            let out = futures_executor::block_on(read_logs::read_logs(args)).expect("output");
            serde_json::to_string(&out).expect("json")
        })
    });
    group.bench_function("spawn_blocking", |b| {
        b.iter(|| tokio.block_on(async { tokio::task::spawn_blocking(|| 1).await.expect("hop") }))
    });
    group.bench_function("sqlite_transaction", |b| {
        b.iter(|| write_turn_row(&mut conn, (&json, &step_json), &mut version))
    });
    group.bench_function("read_call", |b| {
        b.iter(|| {
            tokio
                .block_on(reads.step(calls("read_logs", 1)))
                .expect("step")
        })
    });
    group.bench_function("ten_read_calls", |b| {
        b.iter(|| {
            tokio
                .block_on(reads.step(calls("read_logs", 10)))
                .expect("step")
        })
    });
    group.bench_function("write_call", |b| {
        b.iter(|| {
            tokio
                .block_on(writes.step(calls("write_logs", 1)))
                .expect("step")
        })
    });
    // Last: the subscriber stays for the rest of the process.
    let mut events = runtime.subscribe();
    tokio.spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => drop(std::hint::black_box(event)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    group.bench_function("ten_read_calls_subscribed", |b| {
        b.iter(|| {
            tokio
                .block_on(reads.step(calls("read_logs", 10)))
                .expect("step")
        })
    });
    group.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
