//! Several instances on one PostgreSQL database, in one process, with the store notifying only
//! what a waiter acts on: an answer given on one instance resumes its turn there and notifies
//! nobody; a durable timer set on one instance fires on another when it comes due, without
//! waiting for that instance's poll; work whose holder stopped renewing its lease is taken over
//! by the take-over scan's poll alone, with no write to announce it.
//!
//! Every test runs on a fresh database on `TOOLWRIGHT_TEST_POSTGRES_URL` (skipped with a notice
//! without one, except in CI). Waits are bounded generously and nothing asserts a duration: a
//! worker's poll is set far beyond the bound when only a notification may meet it.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use sqlx_postgres::PgListener;
use toolwright::prelude::*;
use toolwright::runtime::{
    CallResult, CallState, ChangeMark, Claim, InputResponse, Options, PendingCall, PendingStep,
    PostgresStore, RespondOutcome, Runtime, StepOutcome, Store, TaskCall, TaskRecord, TaskStatus,
    TurnRecord, TurnStatus,
};
use toolwright::{Caller, ErrorCode};

use crate::support::{alice, builder, call, turn_in, waiting};
use crate::upgrade_checks::pg::{scratch, server};

/// How long a test waits for what must happen: far beyond what it takes on a loaded machine.
const BOUND: Duration = Duration::from_secs(60);

/// A poll no test waits for: only a notification can wake a worker in time.
const NEVER: Duration = Duration::from_secs(3600);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct NapArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

/// Sleeps on a durable timer, then says so.
#[tool(effect = write, workflow = execute)]
async fn wk_nap(args: NapArgs, ctx: WorkflowContext) -> Result<String, ToolError> {
    ctx.sleep(Duration::from_millis(args.ms)).await?;
    Ok("rested".to_owned())
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RestartArgs {
    service: String,
}

/// Restarts a service; a person approves every call.
#[tool(effect = write, approval = always)]
async fn wk_restart(args: RestartArgs) -> String {
    format!("{} restarted", args.service)
}

/// An instance named `name` on `store`.
fn instance(store: PostgresStore, name: &str, lease: Duration) -> Runtime {
    builder([wk_nap::TOOL, wk_restart::TOOL])
        .store(store)
        .options(Options {
            instance: name.to_owned(),
            lease,
            ..Default::default()
        })
        .build()
        .unwrap()
}

/// A store whose listener is up: a write committed after this returns wakes its waiters.
async fn listening(db: &str) -> PostgresStore {
    let store = PostgresStore::connect(db).await.unwrap();
    // Starts the listener, which goes on starting when the call returns.
    store.changed(Duration::from_millis(10)).await;
    // Once its `LISTEN` is in effect, it reads the wake-up times to come and counts its start
    // as one change (marks taken before were taken while nobody listened): a mark taken before
    // that count would be woken by it, not by what a test waits for.
    let deadline = tokio::time::Instant::now() + BOUND;
    while store.change_mark().seen() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the store's listener starts within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    store
}

/// Turn `id` once `done` holds for it, read every 50 ms for at most [`BOUND`].
async fn turn_once(
    store: &PostgresStore,
    id: &str,
    what: &str,
    done: impl Fn(&TurnRecord) -> bool,
) -> TurnRecord {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let (turn, _) = store.turn(id).await.unwrap().expect("the turn");
        if done(&turn) {
            return turn;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} within {BOUND:?}: {turn:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The result of call `c1` in the last closed step of `turn`.
fn result_of_c1(turn: &TurnRecord) -> &CallResult {
    let step = turn.last_step.as_ref().expect("a closed step");
    step.results
        .iter()
        .find(|r| r.call_id == "c1")
        .expect("c1's result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_set_on_one_instance_fires_on_another_when_due() {
    let Some(url) = server() else { return };
    let (_, db) = scratch(&url).await;
    let a = instance(
        PostgresStore::connect(&db).await.unwrap(),
        "a",
        Duration::from_secs(30),
    );
    let b = instance(listening(&db).await, "b", Duration::from_secs(30));
    // Only b looks for due timers, and its poll is out of reach: the wake-up time a announces
    // is what must wake it.
    let worker = b.run_worker(NEVER);
    let turn = turn_in(&a, "s-nap", Some(alice())).await;
    let outcome = turn
        .step(vec![call("c1", "wk_nap", json!({ "ms": 1000 }))])
        .await
        .unwrap();
    assert!(
        matches!(outcome, StepOutcome::Waiting { .. }),
        "the nap parks: {outcome:?}"
    );
    let reader = PostgresStore::connect(&db).await.unwrap();
    let woken = turn_once(&reader, turn.id(), "b wakes the nap", |t| {
        t.last_step.is_some()
    })
    .await;
    assert_eq!(result_of_c1(&woken).output, json!("rested"));
    worker.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_on_another_instance_resumes_the_turn_and_notifies_nobody() {
    let Some(url) = server() else { return };
    let (_, db) = scratch(&url).await;
    let mut listener = PgListener::connect(&db).await.unwrap();
    listener.listen("toolwright").await.unwrap();
    let a = instance(listening(&db).await, "a", Duration::from_secs(30));
    let b = instance(listening(&db).await, "b", Duration::from_secs(30));
    let workers = [a.run_worker(NEVER), b.run_worker(NEVER)];

    let turn = turn_in(&a, "s-restart", Some(alice())).await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "wk_restart", json!({ "service": "api" }))])
            .await
            .unwrap(),
    );
    let answered = b
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = answered else {
        panic!("b resumes the turn it answered: {answered:?}")
    };
    assert_eq!(results[0].output, json!("api restarted"));

    // A last write that must notify: a task's result. Notifications arrive in commit order, so
    // whatever the turn's writes notified would come first.
    let store = PostgresStore::connect(&db).await.unwrap();
    let mut task = sentinel_task();
    let version = store.put_task(&task, None).await.unwrap();
    task.calls[0].result = Some(CallResult::failed("k1", "wk_nap", ToolError::new("done")));
    store.put_task(&task, Some(version)).await.unwrap();
    let first = tokio::time::timeout(BOUND, listener.recv())
        .await
        .expect("the task's result is notified")
        .unwrap();
    assert_eq!(
        first.payload(),
        "change:task::k-sentinel",
        "parking, answering, resuming and closing a turn notify nobody"
    );
    for worker in workers {
        worker.abort();
    }
}

/// A running task with one call, no result yet.
fn sentinel_task() -> TaskRecord {
    TaskRecord {
        id: "k-sentinel".to_owned(),
        tool: "wk_nap".to_owned(),
        entry: toolwright::registry::Entry::Task,
        session_id: "s-restart".to_owned(),
        turn_id: "t-none".to_owned(),
        caller: Caller::Model,
        current: None,
        approved_by: None,
        status: TaskStatus::Running,
        cancel_requested: false,
        calls: vec![TaskCall {
            call_id: "k1".to_owned(),
            turn_id: "t-none".to_owned(),
            step: 0,
            input: json!({ "ms": 1 }),
            result: None,
            delivered: false,
            cancelled: false,
            step_input: None,
        }],
        requests: Vec::new(),
        answers: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_nobody_renews_is_taken_over_by_the_poll_alone() {
    let Some(url) = server() else { return };
    let (_, db) = scratch(&url).await;
    let b = instance(listening(&db).await, "b", Duration::from_secs(30));
    let turn = turn_in(&b, "s-ghost", Some(alice())).await;
    // An instance that died mid-call: its step is recorded running under a short lease it
    // never renews, and nothing is written after it.
    let ghost = PostgresStore::connect(&db).await.unwrap();
    let (mut record, version) = ghost.turn(turn.id()).await.unwrap().expect("the turn");
    record.status = TurnStatus::Running;
    record.pending = Some(PendingStep {
        index: record.steps,
        calls: vec![PendingCall {
            call_id: "c1".to_owned(),
            tool: "wk_restart".to_owned(),
            input: json!({ "service": "api" }),
            state: CallState::Running,
        }],
        requests: Vec::new(),
        input: None,
    });
    let claim = Claim::Take {
        owner: "ghost",
        ttl: Duration::from_millis(300),
    };
    ghost
        .write_turn(&record, Some(version), claim)
        .await
        .unwrap();

    let worker = b.run_worker(Duration::from_millis(100));
    let taken = turn_once(&ghost, turn.id(), "b takes the turn over", |t| {
        t.status != TurnStatus::Running
    })
    .await;
    let result = result_of_c1(&taken);
    assert!(result.is_error, "{result:?}");
    assert_eq!(
        result.error.as_ref().map(|e| e.code()),
        Some(ErrorCode::ResultUnknown),
        "an interrupted call that is not durable may have had its effect: {result:?}"
    );
    worker.abort();
}

/// Each waiter of a store keeps its own mark of the changes it has seen: a change that ends
/// one waiter's wait ends the next wait of another that was busy reading when it came, at
/// once, instead of leaving it to its poll; so does a wake-up time that came, or one already
/// past when its notice arrives; and a waiter that has seen every change waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_wakes_one_waiter_is_not_lost_to_another() {
    let Some(url) = server() else { return };
    let (_, db) = scratch(&url).await;
    let store = listening(&db).await;
    let writer = PostgresStore::connect(&db).await.unwrap();
    // Both waiters read what they wait for now; only the first waits meanwhile.
    let mut first = store.change_mark();
    let mut busy = store.change_mark();
    let wakes_both = async |first: &mut ChangeMark, busy: &mut ChangeMark, what: &str| {
        tokio::time::timeout(BOUND, store.changed_since(first, NEVER))
            .await
            .unwrap_or_else(|_| panic!("{what} wakes the waiter"));
        tokio::time::timeout(BOUND, store.changed_since(busy, NEVER))
            .await
            .unwrap_or_else(|_| panic!("{what}, seen by the other waiter, ends this one's wait"));
        assert!(busy.seen() >= first.seen(), "{busy:?} {first:?}");
    };

    // A write that notifies: a task's result.
    let mut task = sentinel_task();
    let version = writer.put_task(&task, None).await.unwrap();
    task.calls[0].result = Some(CallResult::failed("k1", "wk_nap", ToolError::new("done")));
    writer.put_task(&task, Some(version)).await.unwrap();
    wakes_both(&mut first, &mut busy, "a task's result").await;

    // Seen: the next wait waits (for a change, or its timeout).
    let waited = tokio::time::timeout(
        Duration::from_millis(300),
        store.changed_since(&mut busy, NEVER),
    )
    .await;
    assert!(waited.is_err(), "a waiter that saw every change waits");

    // A wake-up time: it wakes the waiters when it comes, the busy one at its next wait.
    let now_ms = wall_ms();
    let mut sleeping = sentinel_task();
    sleeping.id = "k-sleeping".to_owned();
    sleeping.status = TaskStatus::Sleeping {
        until_ms: now_ms + 200,
    };
    writer.put_task(&sleeping, None).await.unwrap();
    wakes_both(&mut first, &mut busy, "a wake-up time coming").await;
    assert!(
        wall_ms() >= now_ms + 200,
        "it wakes when the time comes, not at the write"
    );

    // One already past when its notice arrives (a short sleep, a slow commit) is a change at once.
    let mut late = sentinel_task();
    late.id = "k-late".to_owned();
    late.status = TaskStatus::Sleeping {
        until_ms: now_ms.saturating_sub(1_000),
    };
    writer.put_task(&late, None).await.unwrap();
    wakes_both(&mut first, &mut busy, "a wake-up time already past").await;
}

/// Unix milliseconds by this machine's clock.
fn wall_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(now.unwrap().as_millis()).unwrap()
}

/// A wake-up time written before a store listened (by another instance, or before a restart)
/// wakes that store's waiters when it comes: the listener reads the times to come when it
/// starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_time_written_before_the_store_listened_wakes_it_when_it_comes() {
    let Some(url) = server() else { return };
    let (_, db) = scratch(&url).await;
    let writer = PostgresStore::connect(&db).await.unwrap();
    let until_ms = wall_ms() + 2_000;
    let mut sleeping = sentinel_task();
    sleeping.status = TaskStatus::Sleeping { until_ms };
    writer.put_task(&sleeping, None).await.unwrap();

    let store = listening(&db).await;
    let mut mark = store.change_mark();
    if wall_ms() >= until_ms {
        // The machine took longer to start listening than the time was away: the waiter's
        // read finds the task due, and there is nothing left to wake it for.
        eprintln!("skipped: the listener started after the wake-up time");
        return;
    }
    tokio::time::timeout(BOUND, store.changed_since(&mut mark, NEVER))
        .await
        .expect("the time written before the store listened wakes its waiter");
    assert!(wall_ms() >= until_ms, "when it comes, not before");
}
