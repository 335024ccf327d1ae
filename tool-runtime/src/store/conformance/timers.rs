//! The part `timers`.

use serde_json::json;

use super::fixtures::{minimal_task, turn};
use super::part::Part;
use crate::record::{CallState, PendingCall, TaskStatus, TurnStatus};
use crate::store::Store;

/// Durable timers: a waiting turn whose call sleeps, and a sleeping task, are due from their
/// time on and no longer once written in another state.
pub async fn timers(store: &dyn Store) {
    let part = Part::new("timers");
    let session = part.id("session");
    let id = part.id("turn");
    let at = 1_700_000_000_000_u64;
    let mut record = turn(&id, &session, TurnStatus::Waiting, &[]);
    if let Some(step) = record.pending.as_mut() {
        step.calls.push(PendingCall {
            call_id: "sleeper".to_owned(),
            tool: "deploy".to_owned(),
            input: json!({}),
            state: CallState::Sleeping { until_ms: at + 5 },
        });
        step.calls.push(PendingCall {
            call_id: "early".to_owned(),
            tool: "deploy".to_owned(),
            input: json!({}),
            state: CallState::Sleeping { until_ms: at },
        });
    }
    let version = part.ok(
        "inserting a sleeping turn",
        store.put_turn(&record, None).await,
    );
    let due = |listed: Vec<String>, id: &str| listed.iter().any(|found| found == id);
    assert!(
        !due(
            part.ok("listing due turns", store.due_turns(at - 1).await),
            &id
        ),
        "{part}: not due before its earliest timer"
    );
    assert!(
        due(part.ok("listing due turns", store.due_turns(at).await), &id),
        "{part}: due at its earliest timer"
    );
    record.status = TurnStatus::Active;
    part.ok(
        "waking the turn",
        store.put_turn(&record, Some(version)).await,
    );
    assert!(
        !due(
            part.ok("listing due turns", store.due_turns(at + 10).await),
            &id
        ),
        "{part}: a turn that no longer waits is not due"
    );

    let task_id = part.id("task");
    let mut task = minimal_task(&task_id, &session);
    task.status = TaskStatus::Sleeping { until_ms: at };
    let version = part.ok(
        "inserting a sleeping task",
        store.put_task(&task, None).await,
    );
    assert!(
        !due(
            part.ok("listing due tasks", store.due_tasks(at - 1).await),
            &task_id
        ) && due(
            part.ok("listing due tasks", store.due_tasks(at).await),
            &task_id
        ),
        "{part}: a sleeping task is due from its time on"
    );
    task.status = TaskStatus::Running;
    part.ok(
        "waking the task",
        store.put_task(&task, Some(version)).await,
    );
    assert!(
        !due(
            part.ok("listing due tasks", store.due_tasks(at + 1).await),
            &task_id
        ),
        "{part}: a running task is not due"
    );
    deadlines(store, &part, &session, at).await;
}

/// A question's deadline is a timer too: a waiting turn or task is due from the deadline of
/// its earliest pending question on.
async fn deadlines(store: &dyn Store, part: &Part, session: &str, at: u64) {
    let due = |listed: Vec<String>, id: &str| listed.iter().any(|found| found == id);
    let id = part.id("asking-turn");
    let (late, early) = (part.id("late"), part.id("early"));
    let mut record = turn(&id, session, TurnStatus::Waiting, &[&late, &early]);
    if let Some(step) = record.pending.as_mut() {
        step.requests[0].deadline_ms = Some(at + 5);
        step.requests[1].deadline_ms = Some(at);
    }
    part.ok(
        "inserting a turn waiting on questions with deadlines",
        store.put_turn(&record, None).await,
    );
    let listed = |n| store.due_turns(n);
    assert!(
        !due(part.ok("listing due turns", listed(at - 1).await), &id)
            && due(part.ok("listing due turns", listed(at).await), &id),
        "{part}: a turn is due from its earliest question's deadline on"
    );

    let task_id = part.id("asking-task");
    let mut task = minimal_task(&task_id, session);
    task.status = TaskStatus::Waiting;
    task.requests = record.pending.as_ref().unwrap().requests.clone();
    for request in &mut task.requests {
        request.task_id = Some(task_id.clone());
        request.request_id = format!("{}-task", request.request_id);
    }
    part.ok(
        "inserting a task waiting on questions with deadlines",
        store.put_task(&task, None).await,
    );
    assert!(
        !due(
            part.ok("listing due tasks", store.due_tasks(at - 1).await),
            &task_id
        ) && due(
            part.ok("listing due tasks", store.due_tasks(at).await),
            &task_id
        ),
        "{part}: a task is due from its earliest question's deadline on"
    );
}
