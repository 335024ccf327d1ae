//! Parking, resuming and journaling through the SQLite store, against the floor of the same
//! durability settings (figures in BENCHMARKS.md):
//!
//! - `parking/park`: a step whose one call needs approval (`always`): the turn is recorded as
//!   waiting, with its request indexed; `parking/resume`: the approval, which claims the turn, runs
//!   the call and closes the step;
//! - `big_step/restart_1000`: a step of 1,000 calls that all need approval (`always`) parks
//!   (untimed), then the 1,000 requests are answered one by one (timed): the last answer resumes
//!   the step and runs the calls. Each answer costs the same store calls however many the step
//!   parked; `big_step/restart_10` is the same with 10 calls, for the ratio; `big_step/pay_*`
//!   the same with a `once` tool keyed by its input, so that every answer completes a grant of
//!   its own (with `TOOLWRIGHT_BENCH_BIG_STEP_ONCE` set, one round of each is timed and printed
//!   instead of criterion's samples);
//! - `journal/durable_step`: one `ctx.step` of a durable tool, recorded before it returns (a call
//!   of 20 steps, divided by 20), against `journal/rusqlite_insert`: one row inserted in its own
//!   transaction with rusqlite directly, same file settings (WAL, `synchronous = FULL`).
//!
//! All on a file in a temporary directory, every commit synced to disk.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall, Turn,
};
use toolwright::{Caller, Principal};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restarts one service.
#[tool(effect = write, approval = always)]
async fn restart(args: Args) -> String {
    format!("{} restarted", args.service)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PayArgs {
    cents: u64,
}

/// Pays; `once`, keyed by the input: every answer of a big step completes a grant of its own.
#[tool(effect = money, approval = once, approval_key = input)]
async fn pay(args: PayArgs) -> u64 {
    args.cents
}

/// Twenty journaled steps.
#[tool(effect = write, durable)]
async fn provision(_: NoInput, ctx: DurableContext) -> Result<u32, ToolError> {
    let mut total = 0;
    for i in 0..STEPS {
        total += ctx.step(format!("step-{i}"), async move { Ok(i) }).await?;
    }
    Ok(total)
}

const STEPS: u32 = 20;

fn alice() -> Principal {
    Principal::user("bench", "alice")
}

async fn park(turn: &Turn) -> String {
    match turn
        .step(vec![ToolCall::new("c", "restart", r#"{"service":"api"}"#)])
        .await
        .expect("step")
    {
        StepOutcome::Waiting { requests, .. } => requests[0].request_id.clone(),
        other => panic!("expected to park, got {other:?}"),
    }
}

/// Parks a step of `calls` calls of `tool` (`restart`, or `pay` with amounts never asked for
/// before) in a new turn; returns the request ids.
async fn park_many(
    session: &toolwright::runtime::Session,
    tool: &str,
    calls: usize,
) -> Vec<String> {
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .expect("turn");
    static PAID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let batch = (0..calls)
        .map(|n| {
            let arguments = if tool == "pay" {
                let cents = PAID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                format!(r#"{{"cents":{cents}}}"#)
            } else {
                format!(r#"{{"service":"s{n}"}}"#)
            };
            ToolCall::new(format!("c{n}"), tool, arguments)
        })
        .collect();
    match turn.step(batch).await.expect("step") {
        StepOutcome::Waiting { requests, .. } => {
            assert_eq!(requests.len(), calls);
            requests.into_iter().map(|r| r.request_id).collect()
        }
        other => panic!("expected to park, got {other:?}"),
    }
}

/// Answers every request of a step parked by [`park_many`]; the last resumes it.
async fn answer_all(runtime: &Runtime, requests: Vec<String>) {
    for request in requests {
        runtime
            .respond(InputResponse::approve(&request, Some(alice())))
            .await
            .expect("respond");
    }
}

fn big_step(c: &mut Criterion) {
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime =
        Runtime::builder(Registry::from_tools([restart::TOOL, pay::TOOL]).expect("registry"))
            .store(SqliteStore::open(dir.path().join("big.db")).expect("store"))
            .build()
            .expect("runtime");
    let session = tokio.block_on(async {
        runtime
            .open_session(SessionSpec::new("big").initiator(alice()))
            .await
            .expect("session")
    });
    if std::env::var_os("TOOLWRIGHT_BENCH_BIG_STEP_ONCE").is_some() {
        // One timed round of each size, without criterion's samples: for a build where
        // answering 1,000 takes a minute (BENCHMARKS.md compares one with the other).
        for (tool, calls) in [
            ("restart", 10),
            ("restart", 1000),
            ("pay", 10),
            ("pay", 1000),
        ] {
            tokio.block_on(async {
                let requests = park_many(&session, tool, calls).await;
                let start = Instant::now();
                answer_all(&runtime, requests).await;
                println!("big_step/{tool}_{calls} once: {:?}", start.elapsed());
            });
        }
        return;
    }
    let mut group = c.benchmark_group("big_step");
    group.sample_size(10);
    group.sampling_mode(criterion::SamplingMode::Flat);
    for (tool, calls) in [
        ("restart", 10),
        ("restart", 1000),
        ("pay", 10),
        ("pay", 1000),
    ] {
        group.bench_function(format!("{tool}_{calls}"), |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let requests = park_many(&session, tool, calls).await;
                        let start = Instant::now();
                        answer_all(&runtime, requests).await;
                        total += start.elapsed();
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

fn store(c: &mut Criterion) {
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime =
        Runtime::builder(Registry::from_tools([restart::TOOL, provision::TOOL]).expect("registry"))
            .store(SqliteStore::open(dir.path().join("bench.db")).expect("store"))
            .build()
            .expect("runtime");
    let session = tokio.block_on(async {
        runtime
            .open_session(SessionSpec::new("bench").initiator(alice()))
            .await
            .expect("session")
    });

    let mut parking = c.benchmark_group("parking");
    parking.bench_function("park", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let turn = session
                        .begin_turn(Some(alice()), Caller::Model)
                        .await
                        .expect("turn");
                    let start = Instant::now();
                    park(&turn).await;
                    total += start.elapsed();
                }
                total
            })
        })
    });
    parking.bench_function("resume", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                let mut parked = Vec::new();
                for _ in 0..iters {
                    let turn = session
                        .begin_turn(Some(alice()), Caller::Model)
                        .await
                        .expect("turn");
                    parked.push(park(&turn).await);
                }
                let start = Instant::now();
                for request in parked {
                    runtime
                        .respond(InputResponse::approve(&request, Some(alice())))
                        .await
                        .expect("respond");
                }
                start.elapsed()
            })
        })
    });
    parking.finish();

    let mut journal = c.benchmark_group("journal");
    let turn = tokio.block_on(async {
        session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .expect("turn")
    });
    // Call ids never repeat: a repeated id would replay its recorded journal instead of writing.
    let mut calls = 0u64;
    journal.bench_function("durable_step", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    calls += 1;
                    let start = Instant::now();
                    turn.step(vec![ToolCall::new(format!("p{calls}"), "provision", "{}")])
                        .await
                        .expect("step");
                    total += start.elapsed();
                }
                // Per step: the call's fixed cost (two turn writes) spread over its steps.
                total / STEPS
            })
        })
    });
    let raw = rusqlite::Connection::open(dir.path().join("raw.db")).expect("raw");
    let mode: String = raw
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .expect("wal");
    assert_eq!(mode, "wal", "the floor uses the store's settings");
    raw.pragma_update(None, "synchronous", "FULL")
        .expect("sync");
    raw.execute_batch(
        "CREATE TABLE journal (run_id TEXT NOT NULL, position INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (run_id, position)) WITHOUT ROWID",
    )
    .expect("table");
    let mut position = 0i64;
    journal.bench_function("rusqlite_insert", |b| {
        b.iter(|| {
            position += 1;
            raw.execute(
                "INSERT INTO journal (run_id, position, json) VALUES ('run', ?1, ?2)",
                rusqlite::params![position, r#"{"kind":"step","name":"step-1","value":1}"#],
            )
            .expect("insert")
        })
    });
    journal.finish();
}

criterion_group!(benches, store, big_step);
criterion_main!(benches);
