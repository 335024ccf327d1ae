//! Recovery: steps a stopped process claimed but never recorded, work whose lease expired, and
//! durable timers that are due.

use std::sync::Arc;

use crate::call::{RespondOutcome, StepOutcome};
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::input::resume::{Resumption, resume, write};
use crate::record::{Approver, CallState, SessionRecord, TurnRecord, TurnStatus};
use crate::store::{Claim, LeaseKind, StoreError};

/// Settles turns left `running` by a stopped process (see [`crate::Runtime::recover`]).
pub(crate) async fn recover(
    engine: &Arc<Engine>,
) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
    let turns = engine.store().running_turns().await?;
    let recovered = recover_turns(engine, turns, false).await?;
    // Workflow tasks a stopped process was running go on from their journals.
    crate::task::recover::recover_tasks(engine, None, false).await?;
    // Deliveries a stopped process recorded but did not hand to their waiting runs.
    crate::input::hook::wake_delivered(engine).await?;
    Ok(recovered)
}

/// Takes over the running work of instances that stopped renewing their leases (see
/// [`crate::Runtime::take_over_expired`]).
pub(crate) async fn take_over_expired(
    engine: &Arc<Engine>,
) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
    let expired = engine.store().expired_leases().await?;
    let (turns, tasks): (Vec<_>, Vec<_>) = expired
        .into_iter()
        .partition(|(kind, _)| *kind == LeaseKind::Turn);
    let tasks: Vec<String> = tasks.into_iter().map(|(_, id)| id).collect();
    if !tasks.is_empty()
        && let Err(error) = crate::task::recover::recover_tasks(engine, Some(tasks), true).await
    {
        // The turns are taken over all the same.
        tracing::warn!("taking over expired tasks failed: {error}");
    }
    let turns = turns.into_iter().map(|(_, id)| id).collect();
    recover_turns(engine, turns, true).await
}

/// A turn claimed for recovery, ready to resume.
struct Claimed {
    /// The turn's session, with the version it was read at.
    session: (SessionRecord, u64),
    turn: TurnRecord,
    durable: Vec<(String, Option<Approver>)>,
    resumption: Resumption,
}

/// Claims each of `turns` still `running` (for a take-over only when its lease expired) and
/// settles its interrupted step.
async fn recover_turns(
    engine: &Arc<Engine>,
    turns: Vec<String>,
    take_over: bool,
) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
    let mut recovered = Vec::new();
    // Take-overs resume concurrently: one long durable call must not hold up the others.
    let mut spawned = Vec::new();
    for turn_id in turns {
        let Some(claimed) = claim(engine, &turn_id, take_over).await? else {
            continue;
        };
        let Claimed {
            session,
            turn,
            durable,
            resumption,
        } = claimed;
        if take_over {
            let engine = Arc::clone(engine);
            spawned.push(tokio::spawn(async move {
                let outcome = resume(&engine, session, turn, durable, resumption).await;
                if let Ok(outcome) = &outcome {
                    recheck(&engine, outcome);
                }
                (turn_id, outcome)
            }));
            continue;
        }
        match resume(engine, session, turn, durable, resumption).await {
            Ok(outcome) => {
                recheck(engine, &outcome);
                recovered.push((turn_id, outcome));
            }
            Err(RuntimeError::Store(StoreError::Conflict(_) | StoreError::Fenced { .. })) => {}
            Err(error) => return Err(error),
        }
    }
    for joined in futures_util::future::join_all(spawned).await {
        match joined {
            Ok((turn_id, Ok(outcome))) => recovered.push((turn_id, outcome)),
            Ok((
                _,
                Err(RuntimeError::Store(StoreError::Conflict(_) | StoreError::Fenced { .. })),
            )) => {}
            Ok((turn_id, Err(error))) => {
                tracing::warn!(turn_id, "taking over a running turn failed: {error}");
            }
            Err(error) => tracing::warn!("a take-over task failed: {error}"),
        }
    }
    Ok(recovered)
}

/// Claims running turn `turn_id` for recovery. `None` when there is nothing to recover here:
/// its calls run in this process, it is not running (any more), another instance claimed it
/// first, or (in a take-over) its record cannot be used.
async fn claim(
    engine: &Engine,
    turn_id: &str,
    take_over: bool,
) -> Result<Option<Claimed>, RuntimeError> {
    if engine.work().runs_turn(turn_id) {
        // Its calls run in this process.
        return Ok(None);
    }
    let (turn, version) = match engine.store().turn(turn_id).await {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(None),
        // One record that cannot be read must not stop the take-over of the rest.
        Err(error) if take_over => {
            tracing::warn!(turn_id, "cannot take over a running turn: {error}");
            return Ok(None);
        }
        Err(error) => return Err(error.into()),
    };
    if turn.status != TurnStatus::Running {
        return Ok(None);
    }
    let Some(session) = engine.store().session(&turn.session_id).await? else {
        if take_over {
            // One broken record must not stop the take-over of the rest.
            tracing::warn!(
                turn_id,
                "cannot take over a running turn: its session `{}` is gone",
                turn.session_id
            );
            return Ok(None);
        }
        return Err(RuntimeError::UnknownSession(turn.session_id.clone()));
    };
    let durable = durable_calls(engine, &turn);
    let claim = if take_over {
        engine.take_over()
    } else {
        engine.claim_here()
    };
    // The claim gives the turn a new fencing token: whatever the former holder still writes
    // is refused.
    let resumption = match write(engine, &turn, version, claim).await {
        Ok(resumption) => resumption,
        // Another instance recovered or resumed it meanwhile, or its lease is live.
        Err(StoreError::Conflict(_)) => return Ok(None),
        Err(error) if take_over => {
            tracing::warn!(turn_id, "taking over a running turn failed: {error}");
            return Ok(None);
        }
        Err(error) => return Err(error.into()),
    };
    Ok(Some(Claimed {
        session,
        turn,
        durable,
        resumption,
    }))
}

/// The interrupted calls of `turn` that run again from their journals: durable ones (recorded
/// steps return their values without running). Any other interrupted call's result is
/// unknown.
fn durable_calls(engine: &Engine, turn: &TurnRecord) -> Vec<(String, Option<Approver>)> {
    let registry = engine.registry();
    turn.pending
        .iter()
        .flat_map(|step| &step.calls)
        .filter(|call| {
            call.state == CallState::Running
                && registry
                    .get(&call.tool)
                    .is_some_and(|t| t.kind().is_journaled())
        })
        .map(|call| (call.call_id.clone(), None))
        .collect()
}

/// Wakes workflow calls and tasks whose durable sleep is over (see
/// [`crate::Runtime::wake_due`]).
pub(crate) async fn wake_due(
    engine: &Arc<Engine>,
) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
    let now = engine.options().clock.now_ms();
    crate::task::recover::wake_tasks(engine, now).await?;
    let mut woken = Vec::new();
    for turn_id in engine.store().due_turns(now).await? {
        for outcome in expire_questions(engine, &turn_id, now).await? {
            woken.push((turn_id.clone(), outcome));
        }
        if let Some(outcome) = wake_turn(engine, &turn_id, now).await? {
            woken.push((turn_id, outcome));
        }
    }
    Ok(woken)
}

/// Withdraws the questions of turn `turn_id` whose deadline is `now` or earlier: each body
/// gets `AskAnswer::Timeout` (an answer recorded first wins). The steps that resumed.
async fn expire_questions(
    engine: &Arc<Engine>,
    turn_id: &str,
    now: u64,
) -> Result<Vec<StepOutcome>, RuntimeError> {
    let Some((turn, _)) = engine.store().turn(turn_id).await? else {
        return Ok(Vec::new());
    };
    let expired: Vec<String> = turn
        .expired_questions(now)
        .into_iter()
        .map(|r| r.request_id.clone())
        .collect();
    let mut resumed = Vec::new();
    for request_id in expired {
        if let RespondOutcome::Resumed(outcome) =
            crate::input::settle::expire(engine, &request_id).await?
        {
            resumed.push(outcome);
        }
    }
    Ok(resumed)
}

/// Wakes the sleeping calls of turn `turn_id` that are due at `now`, and resumes its step when
/// nothing else holds it.
async fn wake_turn(
    engine: &Arc<Engine>,
    turn_id: &str,
    now: u64,
) -> Result<Option<StepOutcome>, RuntimeError> {
    loop {
        let Some((mut turn, version)) = engine.store().turn(turn_id).await? else {
            return Ok(None);
        };
        if !turn.wake_sleepers(now) {
            return Ok(None);
        }
        let claimed = turn.claim_step();
        let claim = if turn.status == TurnStatus::Running {
            engine.claim_here()
        } else {
            Claim::None
        };
        let resumption = match write(engine, &turn, version, claim).await {
            Ok(resumption) => resumption,
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        };
        if turn.status != TurnStatus::Running {
            return Ok(None);
        }
        let session = engine.session(&turn.session_id).await?;
        let outcome = resume(engine, session, turn, claimed, resumption).await?;
        recheck(engine, &outcome);
        return Ok(Some(outcome));
    }
}

/// A resumed step that parked again on a hook whose delivery came meanwhile is settled now.
fn recheck(engine: &Arc<Engine>, outcome: &StepOutcome) {
    if let StepOutcome::Waiting { requests, .. } = outcome {
        crate::input::settle::recheck(engine, requests);
    }
}
