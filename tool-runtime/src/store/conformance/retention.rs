//! The part `retention`: sweeps are store-wide, so it runs on a store of its own (not in
//! [`run`](super::run)).

use std::time::Duration;

use serde_json::json;
use toolwright_core::ToolError;

use super::fixtures::{awkward_json, minimal_task, turn};
use super::part::Part;
use super::steps::closed;
use crate::record::{
    CallResult, EntryKind, JournalEntry, SessionRecord, TaskCall, TaskRecord, TaskStatus,
    TurnRecord, TurnStatus,
};
use crate::store::{Claim, PageRequest, Store, TurnRetention};

/// Long enough for the store's clock to move on between two writes.
const TICK: Duration = Duration::from_millis(5);

/// Writes `record`, then lets the clock move on, so later turns finish later.
async fn write(store: &dyn Store, part: &Part, record: &TurnRecord) {
    part.ok("writing a turn", store.put_turn(record, None).await);
    let run = format!("{}/call-0", record.id);
    let entry = JournalEntry {
        position: 0,
        kind: EntryKind::Step,
        name: "step".into(),
        value: json!(1),
    };
    part.ok("journaling", store.append_journal(&run, &entry).await);
    tokio::time::sleep(TICK).await;
}

/// A task of `session` started by turn `turn`, in `status`, whose first call has a result
/// `delivered` or not; `also` adds a second call from another turn.
fn task(
    id: &str,
    session: &str,
    turn: &str,
    status: TaskStatus,
    delivered: bool,
    also: Option<&str>,
) -> TaskRecord {
    let mut task = minimal_task(id, session);
    // A NUL in a record must not stop the store from reading its ids and flags.
    task.calls[0].input = awkward_json();
    task.turn_id = turn.to_owned();
    task.status = status;
    task.calls[0].turn_id = turn.to_owned();
    task.calls[0].result = Some(CallResult::failed(
        "call-1",
        "render",
        ToolError::new("a result"),
    ));
    task.calls[0].delivered = delivered;
    if let Some(other) = also {
        task.calls.push(TaskCall {
            turn_id: other.to_owned(),
            call_id: "call-2".into(),
            ..task.calls[0].clone()
        });
    }
    task
}

/// Sweeps until a batch is not full; returns the turns deleted.
async fn sweep(store: &dyn Store, part: &Part, rule: TurnRetention) -> u64 {
    let mut turns = 0;
    for _ in 0..100 {
        let deleted = part.ok("sweeping", store.sweep_turns(rule, 1).await);
        turns += deleted.turns;
        if deleted.done {
            return turns;
        }
    }
    panic!("{part}: a sweep in batches of 1 never finishes")
}

async fn exists(store: &dyn Store, part: &Part, id: &str) -> bool {
    part.ok("reading a turn", store.turn(id).await).is_some()
}

/// What the part writes: sessions `k` (three completed turns, a cancelled one, a waiting
/// one), `t` (four completed turns held by tasks in different ways) and `idle` (no work).
struct Written {
    k: String,
    t: String,
    idle: String,
    kt: Vec<String>,
    tt: Vec<String>,
    tasks: [TaskRecord; 4],
    versions: Vec<u64>,
}

async fn fill(store: &dyn Store, part: &Part) -> Written {
    let (k, t, idle) = (part.id("k"), part.id("t"), part.id("idle"));
    for session in [&k, &t, &idle] {
        part.ok(
            "writing a session",
            store.put_session(&SessionRecord::new(session), None).await,
        );
    }
    let ids = |session: &str, names: &[&str]| -> Vec<String> {
        names.iter().map(|n| format!("{session}-{n}")).collect()
    };
    let kt = ids(&k, &["1", "2", "3", "cancelled", "waiting"]);
    for (n, id) in kt.iter().enumerate() {
        let status = match n {
            3 => TurnStatus::Cancelled,
            4 => TurnStatus::Waiting,
            _ => TurnStatus::Completed,
        };
        let request = format!("{id}-r");
        let mut record = turn(id, &k, status, &[request.as_str()]);
        record.last_step = Some(closed(0, "kept"));
        write(store, part, &record).await;
    }
    let tt = ids(&t, &["delivered", "running", "undelivered", "call"]);
    for id in &tt {
        write(store, part, &turn(id, &t, TurnStatus::Completed, &[])).await;
    }
    // `d`, idle, holds `delivered` by its start and `call` by a call.
    let tasks = [
        task(
            &format!("{t}-a"),
            &t,
            &tt[0],
            TaskStatus::Finished,
            true,
            None,
        ),
        task(
            &format!("{t}-b"),
            &t,
            &tt[1],
            TaskStatus::Running,
            false,
            None,
        ),
        task(
            &format!("{t}-c"),
            &t,
            &tt[2],
            TaskStatus::Finished,
            false,
            None,
        ),
        task(
            &format!("{t}-d"),
            &t,
            &tt[0],
            TaskStatus::Idle,
            true,
            Some(&tt[3]),
        ),
    ];
    let mut versions = Vec::new();
    for task in &tasks {
        versions.push(part.ok("writing a task", store.put_task(task, None).await));
    }
    Written {
        k,
        t,
        idle,
        kt,
        tt,
        tasks,
        versions,
    }
}

/// Retention: finished turns beyond the newest `keep` of their session, or older than a
/// duration, go with their journals, request index rows and closed steps, and the ended tasks they started;
/// never a turn that is not finished, nor one a task still needs (a task that has not ended,
/// or whose result was not delivered, holding the turn by its start or by a call); sessions
/// are idle only when all their work is over. Sweeps are store-wide: run this part on a store
/// of its own.
pub async fn retention(store: &dyn Store) {
    let part = Part::new("retention");
    let written = fill(store, &part).await;
    by_count(store, &part, &written).await;
    by_age(store, &part, &written).await;
    idle_sessions(store, &part, &written).await;
}

/// Keep two per session: of K, the two oldest go; of T, nothing (tasks hold the oldest). A
/// count or a batch as large as `usize` allows deletes nothing by count.
async fn by_count(store: &dyn Store, part: &Part, w: &Written) {
    let all = TurnRetention {
        keep: Some(usize::MAX),
        ..TurnRetention::default()
    };
    let none = part.ok(
        "sweeping with no limit",
        store.sweep_turns(all, usize::MAX).await,
    );
    assert_eq!(
        none.turns, 0,
        "{part}: keeping `usize::MAX` turns keeps them all"
    );
    let rule = TurnRetention {
        keep: Some(2),
        ..TurnRetention::default()
    };
    assert_eq!(
        sweep(store, part, rule).await,
        2,
        "{part}: keeping two finished turns per session deletes K's two oldest"
    );
    for (id, kept) in w.kt.iter().zip([false, false, true, true, true]) {
        assert_eq!(exists(store, part, id).await, kept, "{part}: turn `{id}`");
    }
    assert!(
        part.ok(
            "reading a journal",
            store.journal(&format!("{}/call-0", w.kt[0])).await
        )
        .is_empty(),
        "{part}: a swept turn's journal goes with it"
    );
    assert!(
        part.ok(
            "resolving",
            store.turn_of_request(&format!("{}-r", w.kt[0])).await
        )
        .is_none(),
        "{part}: a swept turn's request index rows go with it"
    );
    for (id, kept) in [(&w.kt[0], false), (&w.kt[2], true)] {
        let steps = part.ok(
            "listing steps",
            store.turn_steps(id, &PageRequest::first(10)).await,
        );
        assert_eq!(
            steps.items.len(),
            usize::from(kept),
            "{part}: a swept turn's steps go with it, a kept one's stay (turn `{id}`)"
        );
    }
    for id in &w.tt {
        assert!(
            exists(store, part, id).await,
            "{part}: turn `{id}` is needed"
        );
    }
}

/// The idle task ends: by age, `delivered` goes with its tasks and `call` too (its task has
/// ended, its result delivered); a running task's turn and an undelivered result's stay.
async fn by_age(store: &dyn Store, part: &Part, w: &Written) {
    let mut ended = w.tasks[3].clone();
    ended.status = TaskStatus::Finished;
    part.ok(
        "ending the idle task",
        store.put_task(&ended, Some(w.versions[3])).await,
    );
    // Cancelled while a step of it runs: its step still open, its lease live.
    let running = turn(
        &format!("{}-cancelled-running", w.k),
        &w.k,
        TurnStatus::Cancelled,
        &[],
    );
    let take = Claim::Take {
        owner: "conformance",
        ttl: Duration::from_secs(60),
    };
    part.ok(
        "writing a turn cancelled mid-step",
        store.write_turn(&running, None, take).await,
    );
    tokio::time::sleep(TICK).await;
    let rule = TurnRetention {
        older_than: Some(Duration::ZERO),
        ..TurnRetention::default()
    };
    let swept = sweep(store, part, rule).await;
    assert!(
        exists(store, part, &running.id).await,
        "{part}: a turn cancelled while its step runs is not swept"
    );
    assert_eq!(
        swept, 4,
        "{part}: K's two finished turns, and T's two no task needs"
    );
    assert!(
        exists(store, part, &w.kt[4]).await,
        "{part}: a waiting turn is never swept"
    );
    let mut kept = Vec::new();
    for id in &w.tt {
        kept.push(exists(store, part, id).await);
    }
    assert_eq!(
        kept,
        [false, true, true, false],
        "{part}: a running task's turn and an undelivered result's turn stay"
    );
    for (task, kept) in w.tasks.iter().zip([false, true, true, false]) {
        assert_eq!(
            part.ok("reading a task", store.task(&task.id).await)
                .is_some(),
            kept,
            "{part}: task `{}` goes with the turn that started it once it has ended",
            task.id
        );
    }
}

/// Sessions are idle only when all their work is over, and only past the time asked.
async fn idle_sessions(store: &dyn Store, part: &Part, w: &Written) {
    let listed = part.ok(
        "listing idle sessions",
        store.idle_sessions(Duration::ZERO, 10_000).await,
    );
    assert!(
        listed.contains(&w.idle),
        "{part}: a session without work is idle"
    );
    assert!(
        !listed.contains(&w.k),
        "{part}: a session with a waiting turn is not"
    );
    assert!(
        !listed.contains(&w.t),
        "{part}: a session with a running task is not"
    );
    let recent = part.ok(
        "listing idle sessions",
        store.idle_sessions(Duration::from_secs(3600), 10_000).await,
    );
    assert!(
        !recent.contains(&w.idle),
        "{part}: a session written just now is not idle for an hour"
    );
}
