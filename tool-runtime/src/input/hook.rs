//! Deliveries to hooks: what resumes a workflow body that waits on an outside system. A
//! delivery is checked against the hook's schema, recorded once in the hook's journal (the
//! store refuses a second), then wakes the run if it waits on the hook; a run that does not
//! wait yet finds the delivery when it does. The run also checks once more right after it
//! parks ([`super::settle::recheck`]), so a delivery that lands between its check and its park is not missed.

use std::sync::Arc;

use serde_json::Value;

use crate::call::{HookDelivery, RespondOutcome};
use crate::engine::Engine;
use crate::error::{HookRefused, RuntimeError};
use crate::host::hook::{Registration, delivery, lookup, record_delivery};
use crate::record::{CallState, InputRequest, TurnStatus};
use crate::transition::HookRef;

/// Delivers `payload` to the hook with `token` and, with `wake`, settles the run's wait on it
/// here (else in the background).
pub(crate) async fn deliver(
    engine: &Arc<Engine>,
    token: &str,
    payload: Value,
    wait: bool,
) -> Result<HookDelivery, RuntimeError> {
    let id = crate::ids::hook_id(token);
    let Some((registration, delivered)) = lookup(engine.store().as_ref(), &id).await? else {
        return Err(HookRefused::Unknown.into());
    };
    let name = registration.name.clone();
    if delivered.is_some() {
        // Perhaps a retry of a delivery whose process stopped before it woke the run: wake it
        // now, then refuse the payload all the same.
        if let Err(error) = wake(engine, &id, &registration).await {
            tracing::warn!(hook = %id, "waking the run of a delivered hook failed: {error}");
        }
        return Err(HookRefused::Delivered { name }.into());
    }
    check(&registration, &payload)?;
    if let Some(ended) = ended(engine, &registration).await? {
        return Err(HookRefused::Closed { name, ended }.into());
    }
    if !record_delivery(engine.store().as_ref(), &id, &payload).await? {
        return Err(HookRefused::Delivered { name }.into());
    }
    let outcome = if wait {
        wake(engine, &id, &registration).await?
    } else {
        let engine = Arc::clone(engine);
        let hook = id.clone();
        tokio::spawn(async move {
            if let Err(error) = wake(&engine, &hook, &registration).await {
                tracing::warn!(%hook, "waking the run of a delivered hook failed: {error}");
            }
        });
        None
    };
    Ok(HookDelivery {
        hook_id: id,
        name,
        outcome,
    })
}

/// `payload` checked against the hook's schema.
fn check(registration: &Registration, payload: &Value) -> Result<(), HookRefused> {
    let invalid = |problems: String| HookRefused::Invalid {
        name: registration.name.clone(),
        problems,
    };
    let validator = toolwright_core::schema::InputValidator::compile(&registration.schema)
        .map_err(|error| invalid(format!("the hook's schema cannot be compiled ({error})")))?;
    validator
        .check(&registration.name, payload)
        .map_err(|error| {
            let problems: Vec<String> = error
                .problems
                .iter()
                .map(|p| {
                    let at = if p.pointer.is_empty() {
                        "(the payload)"
                    } else {
                        &p.pointer
                    };
                    format!("{at}: {}", p.message)
                })
                .collect();
            invalid(problems.join("; "))
        })
}

/// How the run that made the hook ended, if it did: nothing would read a delivery.
async fn ended(
    engine: &Engine,
    registration: &Registration,
) -> Result<Option<String>, RuntimeError> {
    if let Some(task_id) = &registration.task_id {
        return Ok(match engine.store().task(task_id).await? {
            Some((task, _)) if task.status.is_over() => {
                Some(format!("(task `{task_id}`) has ended"))
            }
            Some(_) => None,
            None => Some(format!("(task `{task_id}`) is gone from the store")),
        });
    }
    let Some((turn, _)) = engine.store().turn(&registration.turn_id).await? else {
        return Ok(Some(format!(
            "(turn `{}`) is gone from the store",
            registration.turn_id
        )));
    };
    let open = turn.status != TurnStatus::Cancelled
        && turn.pending.as_ref().is_some_and(|step| {
            step.calls.iter().any(|call| {
                call.call_id == registration.call_id
                    && !matches!(call.state, CallState::Finished { .. })
            })
        });
    Ok((!open).then(|| {
        format!(
            "(call `{}` of turn `{}`) has returned",
            registration.call_id, registration.turn_id
        )
    }))
}

/// Settles the run's pending wait on hook `id` with its delivery, if the run waits on it.
async fn wake(
    engine: &Arc<Engine>,
    id: &str,
    registration: &Registration,
) -> Result<Option<RespondOutcome>, RuntimeError> {
    let requests = match &registration.task_id {
        Some(task_id) => match engine.store().task(task_id).await? {
            Some((task, _)) => task.requests,
            None => Vec::new(),
        },
        None => match engine.store().turn(&registration.turn_id).await? {
            Some((turn, _)) => turn.pending.map(|step| step.requests).unwrap_or_default(),
            None => Vec::new(),
        },
    };
    let Some(waiting) = requests
        .iter()
        .find(|r| r.is_pending() && HookRef::of(r).is_some_and(|hook| hook.id == id))
    else {
        return Ok(None);
    };
    let Some(payload) = delivery(engine.store().as_ref(), id).await? else {
        return Ok(None);
    };
    let outcome = super::settle::deliver(engine, &waiting.request_id, payload).await?;
    Ok(Some(outcome))
}

/// Wakes every run that waits on a hook whose delivery is recorded: what a process that
/// stopped between recording a delivery and settling the wait left behind. Reads every
/// waiting turn and open task once; [`crate::Runtime::recover`] runs it at start.
pub(crate) async fn wake_delivered(engine: &Arc<Engine>) -> Result<usize, RuntimeError> {
    let store = engine.store();
    let mut waits: Vec<InputRequest> = Vec::new();
    for turn_id in store.waiting_turns().await? {
        if let Some((turn, _)) = store.turn(&turn_id).await?
            && let Some(step) = turn.pending
        {
            waits.extend(step.requests);
        }
    }
    for task_id in store.open_tasks().await? {
        if let Some((task, _)) = store.task(&task_id).await? {
            waits.extend(task.requests);
        }
    }
    let mut woken = 0;
    for request in waits.iter().filter(|r| r.is_pending()) {
        let Some(hook) = HookRef::of(request) else {
            continue;
        };
        if let Some(payload) = delivery(store.as_ref(), &hook.id).await? {
            super::settle::deliver(engine, &request.request_id, payload).await?;
            woken += 1;
        }
    }
    Ok(woken)
}
