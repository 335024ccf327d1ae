//! What the PostgreSQL store notifies, and when `changed` wakes its waiters: a write notifies
//! only what a waiter acts on (a new wake-up time, a task's result or end), and a wake-up time
//! wakes the waiters when it comes, not when it is written.
//!
//! Each test runs on a database of its own (notifications are per database), made from
//! `TOOLWRIGHT_TEST_POSTGRES_URL` (`scripts/postgres start` prints one); without it the tests pass
//! with a notice, except in CI. Nothing here depends on how fast the machine is: notifications
//! are read in commit order up to a last write that must notify, and the only time limits are
//! generous upper bounds (a lower bound is checked against the clock, which load cannot bring
//! forward).
#![cfg(feature = "postgres")]

#[path = "support/postgres.rs"]
mod support;

#[path = "support/records.rs"]
mod records;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx_postgres::{PgListener, PgPool};
use toolwright_core::{Caller, ToolError};
use toolwright_runtime::store::Claim;
use toolwright_runtime::{
    CallResult, CallState, Decision, PendingCall, PendingStep, RequestStatus, StepPatch, Store,
    TaskCall, TaskRecord, TaskStatus, TurnRecord, TurnStatus,
};

use support::{parked, pool, server, store, turn, with_scratch_database};

/// The channel the store notifies on.
const CHANNEL: &str = "toolwright";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A turn whose one workflow call sleeps until `until_ms`.
fn sleeping(id: &str, until_ms: u64) -> TurnRecord {
    TurnRecord {
        pending: Some(PendingStep {
            index: 0,
            calls: vec![PendingCall {
                call_id: "c1".to_owned(),
                tool: "nap".to_owned(),
                input: serde_json::json!({}),
                state: CallState::Sleeping { until_ms },
            }],
            requests: Vec::new(),
            input: None,
        }),
        ..turn(id, TurnStatus::Waiting)
    }
}

/// The answer to the request of [`parked`] turn `turn`.
fn approval(turn: &TurnRecord) -> StepPatch {
    let mut request = turn.pending.as_ref().unwrap().requests[0].clone();
    request.status = RequestStatus::Settled {
        decision: Decision::Approved,
        responder: None,
        note: None,
    };
    StepPatch {
        step: 0,
        request,
        calls: Vec::new(),
    }
}

/// A running task with one call, no result yet.
fn task(id: &str) -> TaskRecord {
    TaskRecord {
        id: id.to_owned(),
        tool: "render".to_owned(),
        entry: toolwright_core::Entry::Task,
        session_id: "s1".to_owned(),
        turn_id: "t-of-task".to_owned(),
        caller: Caller::Model,
        current: None,
        approved_by: None,
        status: TaskStatus::Running,
        cancel_requested: false,
        calls: vec![TaskCall {
            call_id: "call-1".to_owned(),
            turn_id: "t-of-task".to_owned(),
            step: 0,
            input: serde_json::json!({}),
            result: None,
            delivered: false,
            cancelled: false,
            step_input: None,
        }],
        requests: Vec::new(),
        answers: Default::default(),
    }
}

/// Waits until `count` connections of the database `admin` is on have their `LISTEN` in
/// effect (sqlx sends `LISTEN "toolwright"`; the connection is idle once it is done).
async fn until_listening(admin: &PgPool, count: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listening: i64 = sqlx_core::query_scalar::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND state = 'idle' AND query LIKE 'LISTEN %'",
        )
        .fetch_one(admin)
        .await
        .unwrap();
        if listening >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{listening} listening, not {count}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The payloads notified on the channel, in commit order, up to and including the first that
/// names `last` (within a generous limit: a missing one fails the test, a slow one does not).
async fn notified_until(listener: &mut PgListener, last: &str) -> Vec<String> {
    let mut heard = Vec::new();
    loop {
        let notification = tokio::time::timeout(Duration::from_secs(60), listener.recv())
            .await
            .expect("the last write's notification arrives")
            .expect("the listening connection stays up");
        let payload = notification.payload().to_owned();
        let done = payload.ends_with(&format!(":{last}"));
        heard.push(payload);
        if done {
            return heard;
        }
    }
}

/// Answers, claims, closes and parks without a wake-up stay silent; a new wake-up time, a
/// task's result and a task's end notify. (PostgreSQL serialises notifying commits
/// cluster-wide: every `NOTIFY` nobody acts on costs every instance's throughput.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_what_a_waiter_acts_on_is_notified() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        let store = store(&url).await;
        let mut listener = PgListener::connect(&url).await.unwrap();
        listener.listen(CHANNEL).await.unwrap();

        // The life of an approved turn, as the instances bench answers it: silent.
        let waiting = parked("t-approved");
        let mut version = store.put_turn(&waiting, None).await.unwrap();
        version = store
            .settle_request(&waiting.id, &approval(&waiting), version)
            .await
            .unwrap();
        let running = turn("t-approved", TurnStatus::Running);
        let claim = Claim::Take {
            owner: "a",
            ttl: Duration::from_secs(30),
        };
        version = store
            .write_turn(&running, Some(version), claim)
            .await
            .unwrap()
            .version;
        let done = turn("t-approved", TurnStatus::Completed);
        store
            .write_turn(&done, Some(version), Claim::None)
            .await
            .unwrap();

        // A sleep: its wake-up time is announced once, not again by a write that keeps it.
        let until = now_ms() + 3_600_000;
        let version = store
            .put_turn(&sleeping("t-sleeps", until), None)
            .await
            .unwrap();
        store
            .put_turn(&sleeping("t-sleeps", until), Some(version))
            .await
            .unwrap();

        // A task: running is silent, a result to deliver notifies, so does its end.
        let mut record = task("k-renders");
        let mut version = store.put_task(&record, None).await.unwrap();
        version = store.put_task(&record, Some(version)).await.unwrap();
        record.calls[0].result = Some(CallResult::failed(
            "call-1",
            "render",
            ToolError::new("out of paper"),
        ));
        version = store.put_task(&record, Some(version)).await.unwrap();
        record.calls[0].delivered = true;
        version = store.put_task(&record, Some(version)).await.unwrap();
        record.status = TaskStatus::Finished;
        store.put_task(&record, Some(version)).await.unwrap();

        let heard = notified_until(&mut listener, "k-renders").await;
        assert_eq!(
            heard,
            [
                format!("wake:turn:{until}:t-sleeps"),
                "change:task::k-renders".to_owned(),
            ],
            "the task's end comes after: {heard:?}"
        );
        let heard = notified_until(&mut listener, "k-renders").await;
        assert_eq!(heard, ["change:task::k-renders"]);
    })
    .await;
}

/// A wake-up time written by one store wakes another's `changed` when it comes: not at the
/// write (the timer scan would find nothing due), and long before the waiter's poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_wakes_when_an_announced_wake_up_comes() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        let (a, b) = (store(&url).await, store(&url).await);
        // The first call starts b's listener: what is written once its `LISTEN` is in effect
        // is heard.
        b.changed(Duration::from_millis(10)).await;
        let admin = pool(&url).await;
        until_listening(&admin, 1).await;
        let until = now_ms() + 1_500;
        a.put_turn(&sleeping("t-naps", until), None).await.unwrap();
        let started = Instant::now();
        b.changed(Duration::from_secs(120)).await;
        let (waited, now) = (started.elapsed(), now_ms());
        assert!(
            waited < Duration::from_secs(60),
            "changed(120 s) returned after {waited:?}: the announced wake-up did not wake it"
        );
        // Timers sleep on a monotonic clock: allow it a little disagreement with the wall's.
        assert!(
            now + 100 >= until,
            "changed returned {} ms before the wake-up time it was told of",
            until - now
        );

        // A time already come wakes at once; so does a task's result, which waiters read.
        let version = a.put_turn(&parked("t-parked"), None).await.unwrap();
        let mut asked = parked("t-parked");
        asked.pending.as_mut().unwrap().requests[0].deadline_ms = Some(now_ms() - 1);
        a.put_turn(&asked, Some(version)).await.unwrap();
        let started = Instant::now();
        b.changed(Duration::from_secs(120)).await;
        assert!(started.elapsed() < Duration::from_secs(60));
        let mut record = task("k-result");
        let version = a.put_task(&record, None).await.unwrap();
        record.calls[0].result = Some(CallResult::failed("call-1", "render", ToolError::new("no")));
        a.put_task(&record, Some(version)).await.unwrap();
        let started = Instant::now();
        b.changed(Duration::from_secs(120)).await;
        assert!(started.elapsed() < Duration::from_secs(60));
    })
    .await;
}
