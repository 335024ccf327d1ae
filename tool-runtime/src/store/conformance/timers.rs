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
}
