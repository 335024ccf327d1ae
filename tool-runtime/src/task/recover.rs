//! Tasks a stopped process left running, and tasks whose durable sleep is over, run again.

use std::sync::Arc;

use super::runner::spawn;
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::store::StoreError;
use crate::transition::answer::Settler;

/// Runs tasks a stopped process left `running` or `cancelling` again from their journals:
/// `ids` (every open task when `None`), claimed with `take_over` (whether a live lease
/// keeps a task with its holder) .
pub(crate) async fn recover_tasks(
    engine: &Arc<Engine>,
    ids: Option<Vec<String>>,
    take_over: bool,
) -> Result<Vec<String>, RuntimeError> {
    let mut recovered = Vec::new();
    let ids = match ids {
        Some(ids) => ids,
        None => engine.store().open_tasks().await?,
    };
    for id in ids {
        let local = engine.work().runs_task(&id);
        if local {
            continue;
        }
        let (task, version) = match engine.store().task(&id).await {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            // One record that cannot be read must not stop the take-over of the rest.
            Err(error) if take_over => {
                tracing::warn!(task_id = id, "cannot take over a running task: {error}");
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        if !task.is_leased() {
            continue;
        }
        let claim = if take_over {
            engine.take_over()
        } else {
            engine.claim_here()
        };
        match engine.store().write_task(&task, Some(version), claim).await {
            Ok(written) => {
                spawn(engine, &id, written.lease);
                recovered.push(id);
            }
            // Taken (or changed) by another instance meanwhile.
            Err(StoreError::Conflict(_)) => {}
            Err(error) if take_over => {
                tracing::warn!(task_id = id, "taking over a running task failed: {error}");
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(recovered)
}

/// Wakes tasks whose durable sleep is over.
pub(crate) async fn wake_tasks(
    engine: &Arc<Engine>,
    now: u64,
) -> Result<Vec<String>, RuntimeError> {
    let mut woken = Vec::new();
    for id in engine.store().due_tasks(now).await? {
        if expire_questions(engine, &id, now).await? {
            woken.push(id.clone());
            continue;
        }
        loop {
            let Some((mut task, version)) = engine.store().task(&id).await? else {
                break;
            };
            if !task.wake(now) {
                break;
            }
            match engine
                .store()
                .write_task(&task, Some(version), engine.claim_here())
                .await
            {
                Ok(written) => {
                    spawn(engine, &id, written.lease);
                    woken.push(id.clone());
                    break;
                }
                Err(StoreError::Conflict(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(woken)
}

/// Withdraws the questions of task `id` whose deadline is `now` or earlier: the body gets
/// `AskAnswer::Timeout` for each (an answer recorded first wins). Whether any was withdrawn.
async fn expire_questions(engine: &Arc<Engine>, id: &str, now: u64) -> Result<bool, RuntimeError> {
    let Some((task, _)) = engine.store().task(id).await? else {
        return Ok(false);
    };
    let expired: Vec<String> = task
        .expired_questions(now)
        .into_iter()
        .map(|r| r.request_id.clone())
        .collect();
    for request_id in &expired {
        let response = Settler::withdrawal(request_id);
        super::answer::settle_task(engine, id, response, Settler::Deadline).await?;
    }
    Ok(!expired.is_empty())
}
