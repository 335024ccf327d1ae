//! Retention on a real SQLite file: a store filled with finished and parked work is swept
//! (on demand and by the worker); every parked turn and task still resumes, its call running
//! once, and the file shrinks once vacuumed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, Options, Retention, Runtime, SessionSpec, SqliteStore, TaskStatus,
};
use toolwright::{Caller, Registry};

use crate::support::{alice, call, completed, resumed, waiting};

static SHIPPED: AtomicUsize = AtomicUsize::new(0);

/// How many times each amount was paid (the tests pay different amounts, so they can run at
/// once).
fn paid(cents: u64) -> usize {
    PAID.lock().unwrap().get(&cents).copied().unwrap_or(0)
}

static PAID: std::sync::Mutex<std::collections::BTreeMap<u64, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Report {
    /// Which report.
    n: u32,
}

/// Writes a long report, journaling it.
#[tool(effect = write, durable)]
async fn write_report(args: Report, ctx: DurableContext) -> Result<String, ToolError> {
    let n = args.n;
    ctx.step(
        "draft",
        async move { Ok(format!("{n}:{}", "x".repeat(4000))) },
    )
    .await
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Amount {
    /// Cents.
    cents: u64,
}

/// Pays (asks first).
#[tool(effect = money, approval = always)]
async fn pay_invoice(args: Amount) -> u64 {
    *PAID.lock().unwrap().entry(args.cents).or_default() += 1;
    args.cents
}

/// Ships once a person says where, on a task of its own.
#[tool(effect = write, workflow = task)]
async fn ship_parcel(_: Amount, ctx: WorkflowContext) -> Result<String, ToolError> {
    let answer = ctx.ask(AskRequest::new("Where to?")).await?;
    ctx.step("ship", async {
        SHIPPED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .await?;
    Ok(format!("shipped: {answer:?}"))
}

fn runtime(path: &std::path::Path, retention: Retention) -> Runtime {
    let registry =
        Registry::from_tools([write_report::TOOL, pay_invoice::TOOL, ship_parcel::TOOL]).unwrap();
    Runtime::builder(registry)
        .store(SqliteStore::open(path).unwrap())
        .options(Options {
            retention,
            ..Options::default()
        })
        .build()
        .unwrap()
}

fn size(path: &std::path::Path) -> u64 {
    let wal = path.with_extension("db-wal");
    std::fs::metadata(path).unwrap().len() + std::fs::metadata(wal).map_or(0, |m| m.len())
}

#[tokio::test]
async fn a_sweep_deletes_finished_work_keeps_parked_work_resumable_and_the_file_shrinks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let rt = runtime(
        &path,
        Retention {
            finished_turns: Some(Duration::ZERO),
            batch: 25,
            ..Retention::default()
        },
    );
    let session = rt
        .open_session(SessionSpec::new("busy").initiator(alice()))
        .await
        .unwrap();
    // Finished work: 60 turns, each a durable call with a journaled step.
    let mut finished = Vec::new();
    for n in 0..60 {
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        completed(
            turn.step(vec![call("c1", "write_report", json!({ "n": n }))])
                .await
                .unwrap(),
        );
        turn.complete().await.unwrap();
        finished.push(turn.id().to_owned());
    }
    // Parked work: a turn waiting on an approval, a task waiting on a question.
    let parked = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let (_, approvals) = waiting(
        parked
            .step(vec![call("p1", "pay_invoice", json!({ "cents": 900 }))])
            .await
            .unwrap(),
    );
    let tasked = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    completed(
        tasked
            .step(vec![call("t1", "ship_parcel", json!({ "cents": 1 }))])
            .await
            .unwrap(),
    );
    // (Its turn cannot complete while the task runs: it stays active, and is kept.)
    let question = loop {
        let task = rt.tasks("busy").await.unwrap().remove(0);
        if task.status == TaskStatus::Waiting {
            break task.requests[0].request_id.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let before = size(&path);

    tokio::time::sleep(Duration::from_millis(5)).await;
    let swept = rt.sweep().await.unwrap();
    assert_eq!(
        swept.turns, 60,
        "every finished turn no task needs: {swept:?}"
    );
    assert_eq!(swept.sessions, 0);
    for id in &finished {
        assert!(rt.store().turn(id).await.unwrap().is_none());
        assert!(
            rt.store()
                .journal(&format!("{id}/c1"))
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert!(
        rt.store().turn(tasked.id()).await.unwrap().is_some(),
        "the turn of a task that has not ended stays"
    );
    assert!(rt.store().turn(parked.id()).await.unwrap().is_some());
    // Another handle on the same file vacuums it.
    SqliteStore::open(&path).unwrap().vacuum().await.unwrap();
    let after = size(&path);
    assert!(
        after * 2 < before,
        "the file shrinks once vacuumed: {before} bytes before, {after} after"
    );

    // The parked work resumes, each call running once.
    let answer = InputResponse::approve(&approvals[0].request_id, Some(alice()));
    let results = resumed(rt.respond(answer).await.unwrap());
    assert_eq!(results[0].output, json!(900));
    assert_eq!(paid(900), 1);
    let shipped = SHIPPED.load(Ordering::SeqCst);
    rt.respond(InputResponse::answer(&question, Some(alice()), "Lyon"))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rt.tasks("busy").await.unwrap()[0].status != TaskStatus::Finished {
        assert!(
            std::time::Instant::now() < deadline,
            "the task never finished"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(SHIPPED.load(Ordering::SeqCst), shipped + 1);
}

#[tokio::test]
async fn the_worker_sweeps_idle_sessions_and_keeps_busy_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let rt = runtime(
        &path,
        Retention {
            idle_sessions: Some(Duration::ZERO),
            every: Duration::from_millis(20),
            ..Retention::default()
        },
    );
    let idle = rt
        .open_session(SessionSpec::new("idle").initiator(alice()))
        .await
        .unwrap();
    let turn = idle.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    completed(
        turn.step(vec![call("c1", "write_report", json!({ "n": 1 }))])
            .await
            .unwrap(),
    );
    turn.complete().await.unwrap();
    let busy = rt
        .open_session(SessionSpec::new("waiting").initiator(alice()))
        .await
        .unwrap();
    let parked = busy.begin_turn(Some(alice()), Caller::Model).await.unwrap();
    let (_, approvals) = waiting(
        parked
            .step(vec![call("p1", "pay_invoice", json!({ "cents": 5 }))])
            .await
            .unwrap(),
    );

    let worker = rt.run_worker(Duration::from_millis(20));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rt.store().session("idle").await.unwrap().is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never swept"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker.abort();
    assert!(rt.store().turn(turn.id()).await.unwrap().is_none());
    assert!(rt.store().session("waiting").await.unwrap().is_some());
    let answer = InputResponse::approve(&approvals[0].request_id, Some(alice()));
    resumed(rt.respond(answer).await.unwrap());
    assert_eq!(paid(5), 1);
}
