//! A task's results reach the turn that made the call: taken (and marked delivered) by the
//! host or the `task_wait` meta-tool; and cancelling tasks.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::runner::spawn;
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::{Outcome, TaskRecord, TaskResult, TaskStatus};
use crate::store::StoreError;

/// How often waiters look at the store, for results recorded by another process.
const POLL: Duration = Duration::from_millis(200);

/// The tasks of session `session_id`, oldest first.
pub(crate) async fn tasks(
    engine: &Engine,
    session_id: &str,
) -> Result<Vec<TaskRecord>, RuntimeError> {
    let mut tasks = Vec::new();
    for id in engine.store().session_tasks(session_id).await? {
        if let Some((task, _)) = engine.store().task(&id).await? {
            tasks.push(task);
        }
    }
    Ok(tasks)
}

/// Cancels task `id`: its body's token fires and the body gets up to
/// [`crate::Options::task_cleanup`] to run its cleanup (a parked body is run again for it,
/// with every wait returning at once: `ask` answers `cancelled`, `sleep` fails, a `serve`
/// body's `next` returns `None`). Its pending questions are revoked and calls still waiting
/// for a result fail with `CANCELLED`. Returns the task as it is after the cleanup (or when
/// the window has passed, if another process runs it).
pub(crate) async fn cancel_task(
    engine: &Arc<Engine>,
    id: &str,
) -> Result<TaskRecord, RuntimeError> {
    loop {
        let Some((mut task, version)) = engine.store().task(id).await? else {
            return Err(RuntimeError::UnknownTask(id.to_owned()));
        };
        if task.status.is_over() {
            return Ok(task);
        }
        match task.status {
            TaskStatus::Running | TaskStatus::Cancelling => {
                let local = engine.work().task_token(id);
                // Recorded as well as signalled: a runner that already looked at its token
                // (or one in another process, or recovery) sees the request when it records
                // the run, and runs the cleanup instead of parking.
                if task.request_cancel() {
                    match engine.store().put_task(&task, Some(version)).await {
                        Ok(_) => {}
                        Err(StoreError::Conflict(_)) => continue,
                        Err(error) => return Err(error.into()),
                    }
                }
                if let Some(token) = local {
                    token.cancel();
                }
            }
            _ => {
                let revoked = task.begin_cancel();
                let lease = match engine
                    .store()
                    .write_task(&task, Some(version), engine.claim_here())
                    .await
                {
                    Ok(written) => written.lease,
                    Err(StoreError::Conflict(_)) => continue,
                    Err(error) => return Err(error.into()),
                };
                engine.emit_resolved(&task.session_id, &task.turn_id, revoked, Outcome::Cancelled);
                spawn(engine, id, lease);
            }
        }
        break;
    }
    let deadline =
        tokio::time::Instant::now() + engine.options().task_cleanup + Duration::from_secs(1);
    // Taken before the first read, as `notified` is made before each.
    let mut mark = engine.store().change_mark();
    loop {
        let notified = engine.work().task_changed().notified();
        let task = engine.task(id).await?;
        if task.status.is_over() || tokio::time::Instant::now() >= deadline {
            return Ok(task);
        }
        tokio::select! {
            () = notified => {}
            // Another instance's writes (Postgres notifications), or a poll.
            () = engine.store().changed_since(&mut mark, POLL) => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Cancels, in the background, the tasks turn `turn_id` started.
pub(crate) async fn cancel_tasks_of_turn(engine: &Arc<Engine>, session_id: &str, turn_id: &str) {
    let Ok(tasks) = tasks(engine, session_id).await else {
        return;
    };
    for task in tasks {
        // A `serve` task another turn started keeps serving: only this turn's calls to it are
        // cancelled.
        if task.turn_id != turn_id
            && task
                .calls
                .iter()
                .any(|c| c.turn_id == turn_id && c.result.is_none())
        {
            if let Err(error) = cancel_task_calls(engine, &task.id, None, Some(turn_id)).await {
                tracing::warn!(task_id = %task.id, "cancelling the turn's calls failed: {error}");
            }
            continue;
        }
        if task.turn_id == turn_id && !task.status.is_over() {
            let engine = Arc::clone(engine);
            tokio::spawn(async move {
                if let Err(error) = cancel_task(&engine, &task.id).await {
                    tracing::warn!(task_id = %task.id, "cancelling the task failed: {error}");
                }
            });
        }
    }
}

/// Results of the calls turn `turn_id` made to tasks, not yet delivered; marks them
/// delivered. With `only`, the results of that task alone.
pub(crate) async fn take_results(
    engine: &Engine,
    session_id: &str,
    turn_id: &str,
    only: Option<&str>,
) -> Result<Vec<TaskResult>, RuntimeError> {
    let ids = match only {
        Some(id) => vec![id.to_owned()],
        None => engine.store().session_tasks(session_id).await?,
    };
    let mut taken = Vec::new();
    for id in ids {
        loop {
            let Some((mut task, version)) = engine.store().task(&id).await? else {
                break;
            };
            let mut found = Vec::new();
            for call in &mut task.calls {
                if call.turn_id == turn_id
                    && !call.delivered
                    && let Some(result) = &call.result
                {
                    call.delivered = true;
                    found.push(TaskResult {
                        task_id: id.clone(),
                        call_id: call.call_id.clone(),
                        turn_id: call.turn_id.clone(),
                        result: result.clone(),
                    });
                }
            }
            if found.is_empty() {
                break;
            }
            match engine.store().put_task(&task, Some(version)).await {
                Ok(_) => {
                    taken.extend(found);
                    break;
                }
                Err(StoreError::Conflict(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(taken)
}

/// Tasks that still owe turn `turn_id` a result (not produced or not delivered yet).
pub(crate) async fn owing(
    engine: &Engine,
    session_id: &str,
    turn_id: &str,
) -> Result<Vec<TaskRecord>, RuntimeError> {
    // Without task tools no task exists: turns end without reading the store for them.
    if !engine.runs_tasks() {
        return Ok(Vec::new());
    }
    Ok(tasks(engine, session_id)
        .await?
        .into_iter()
        .filter(|t| t.owes(turn_id))
        .collect())
}

/// Waits until turn `turn_id` has task results, `timeout` passes, `cancel` fires, or no
/// task owes the turn anything; returns the results taken.
pub(crate) async fn wait_results(
    engine: &Engine,
    session_id: &str,
    turn_id: &str,
    only: Option<&str>,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Vec<TaskResult>, RuntimeError> {
    // A timeout past what an instant can hold (`Duration::MAX`: wait as long as it takes)
    // waits a century.
    let now = tokio::time::Instant::now();
    let deadline = now
        .checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
    // Taken before the first read, as `notified` is made before each.
    let mut mark = engine.store().change_mark();
    loop {
        let notified = engine.work().task_changed().notified();
        let results = take_results(engine, session_id, turn_id, only).await?;
        if !results.is_empty() {
            return Ok(results);
        }
        let owing = owing(engine, session_id, turn_id).await?;
        if !owing.iter().any(|t| only.is_none_or(|id| t.id == id))
            || tokio::time::Instant::now() >= deadline
        {
            return Ok(Vec::new());
        }
        tokio::select! {
            () = notified => {}
            // Another instance's writes (Postgres notifications), or a poll.
            () = engine.store().changed_since(&mut mark, POLL) => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = cancel.cancelled() => return Ok(Vec::new()),
        }
    }
}

/// Cancels, on their own, the calls of task `id` with id `call_id` (made by turn `turn_id`,
/// when given) that have no result yet: each gets a `CANCELLED` result at once (delivered to
/// its turn like any result), the body sees the call cancelled (at once when it runs in this
/// process, else when it next replays), and the task keeps serving. Returns how many calls
/// were cancelled.
pub(crate) async fn cancel_task_calls(
    engine: &Arc<Engine>,
    id: &str,
    call_id: Option<&str>,
    turn_id: Option<&str>,
) -> Result<usize, RuntimeError> {
    loop {
        let Some((mut task, version)) = engine.store().task(id).await? else {
            return Err(RuntimeError::UnknownTask(id.to_owned()));
        };
        let cancelled = task.cancel_calls(call_id, turn_id);
        if cancelled.is_empty() {
            return Ok(0);
        }
        match engine.store().put_task(&task, Some(version)).await {
            Ok(_) => {}
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        }
        let tokens = engine.work().task_calls(id);
        for &index in &cancelled {
            if let Some(tokens) = &tokens {
                tokens.cancel(index);
            }
            let call = &task.calls[index];
            if let Some(result) = &call.result {
                engine.emit(Event::TaskResult {
                    session_id: task.session_id.clone(),
                    result: TaskResult {
                        task_id: id.to_owned(),
                        call_id: call.call_id.clone(),
                        turn_id: call.turn_id.clone(),
                        result: result.clone(),
                    },
                });
            }
        }
        engine.work().task_changed().notify_waiters();
        return Ok(cancelled.len());
    }
}
