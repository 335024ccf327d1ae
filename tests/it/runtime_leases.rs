//! Leases on one SQLite file shared by two runtime instances: a call that runs far longer than
//! the lease keeps it (the heartbeat renews it), so the other instance's worker never takes it
//! over. (Take-overs of instances that died are tested with real processes on Postgres, in
//! `tests/instances_postgres.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::runtime::{Options, Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall};

use crate::support::builder;

/// Short enough that five leases make a quick test, long enough that a heartbeat (every third
/// of it) is not missed when the machine is busy: other tests of this binary write and vacuum
/// SQLite files at the same time, and a renewal waits for the disk.
const LEASE: Duration = Duration::from_millis(1500);

/// How many times the long call's body started, across both instances.
#[derive(Clone, Default)]
struct Started(Arc<AtomicU32>);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Work {
    /// How long to work, in milliseconds.
    ms: u64,
}

/// Works for a while; counts its starts.
#[tool(effect = write, durable)]
async fn long_work(
    args: Work,
    ctx: DurableContext,
    started: State<Started>,
) -> Result<u64, ToolError> {
    ctx.step("work", async {
        started.0.0.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        Ok(args.ms)
    })
    .await
}

fn instance(path: &std::path::Path, name: &str, started: &Started) -> Runtime {
    builder([long_work::TOOL])
        .store(SqliteStore::open(path).unwrap())
        .state(started.clone())
        .options(Options {
            instance: name.to_owned(),
            lease: LEASE,
            ..Default::default()
        })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_longer_than_its_lease_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let started = Started::default();
    let a = instance(&path, "a", &started);
    let b = instance(&path, "b", &started);
    let workers = [
        a.run_worker(Duration::from_millis(50)),
        b.run_worker(Duration::from_millis(50)),
    ];
    let session = a.open_session(SessionSpec::new("s")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    // Five leases long: without renewal, b would take it over after the first.
    let outcome = turn
        .step(vec![ToolCall::new(
            "c1",
            "long_work",
            json!({ "ms": 5 * LEASE.as_millis() as u64 }).to_string(),
        )])
        .await
        .expect("the holder's writes are not fenced");
    let StepOutcome::Completed { results, .. } = outcome else {
        panic!("expected the call to complete: {outcome:?}")
    };
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(started.0.load(Ordering::SeqCst), 1, "b never took it over");
    for worker in workers {
        worker.abort();
    }
}
