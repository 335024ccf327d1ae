//! The end of a step: record what ran, then park the turn on the calls that wait, or close the
//! step (and end the turn when it may). A cancel that landed while the calls ran wins the
//! write; the step is then closed in the cancelled record.

use std::collections::HashSet;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolwright_core::{ErrorCode, ToolError};

use super::execute::Ran;
use super::prepared::Prepared;
use super::scope::StepScope;
use crate::call::StepOutcome;
use crate::engine::{Engine, keeping};
use crate::error::RuntimeError;
use crate::event::{CompletionReason, Event};
use crate::record::{CallResult, TurnRecord, TurnStatus};
use crate::store::{Appended, Lease, StoreError};
use crate::transition::Parked;

/// The version and lease the step's claiming write left (the turn's own when nothing ran).
pub(super) struct Claimed {
    pub(super) version: u64,
    pub(super) lease: Option<Lease>,
}

/// Records the results of `prepared`'s calls (`ran` where they ran) and parks or closes the
/// step.
pub(super) async fn close_or_park(
    engine: &Arc<Engine>,
    scope: &mut StepScope,
    prepared: Vec<Prepared>,
    ran: Vec<Option<Ran>>,
    claimed: Claimed,
    steer: &CancellationToken,
) -> Result<StepOutcome, RuntimeError> {
    let (results, suspended) = collect(engine, scope, &prepared, ran);
    if super::guard::stopped(&results) {
        return stop(engine, scope, &prepared, results, suspended, claimed).await;
    }
    if prepared.iter().any(Prepared::asks) || !suspended.is_empty() {
        park(engine, scope, &prepared, results, suspended, claimed).await
    } else {
        close(engine, scope, results, claimed, steer).await
    }
}

/// The results of the calls that have one, in the model's order, each announced and noted for
/// taint; and the workflow calls that parked. A result is shared from here on: by its event,
/// the step's outcome and the turn's record.
fn collect(
    engine: &Engine,
    scope: &mut StepScope,
    prepared: &[Prepared],
    ran: Vec<Option<Ran>>,
) -> (Vec<Arc<CallResult>>, Vec<Parked>) {
    let mut results = Vec::new();
    let mut suspended = Vec::new();
    for (prep, ran) in prepared.iter().zip(ran) {
        let (result, invoked) = match (prep, ran) {
            (Prepared::Run { call_id, tool, .. }, Some(Ran::Suspended(suspension))) => {
                suspended.push(Parked::new(&scope.turn, call_id, tool.name(), *suspension));
                continue;
            }
            // Taint is decided by the tool that ran, not by what the registry holds now (a
            // server may have dropped the tool meanwhile).
            (Prepared::Run { tool, .. }, Some(Ran::Done(result))) => (result, tool.is_untrusted()),
            (_, Some(Ran::Done(result))) => (result, false),
            (Prepared::Done(result), None) => (Arc::clone(result), false),
            // The provider ran it: its output is in the turn, and taints like any other.
            (Prepared::Provided(result, untrusted), None) => (Arc::clone(result), *untrusted),
            _ => continue,
        };
        scope.turn.note_taint(&result.tool, invoked);
        engine.emit_with(|| Event::ActionResult {
            session_id: scope.session.id.clone(),
            turn_id: scope.turn.id.clone(),
            result: Arc::clone(&result),
        });
        results.push(result);
    }
    (results, suspended)
}

/// Parks the turn on the requests of the calls that wait and the workflow calls that parked.
async fn park(
    engine: &Engine,
    scope: &mut StepScope,
    prepared: &[Prepared],
    results: Vec<Arc<CallResult>>,
    suspended: Vec<Parked>,
    claimed: Claimed,
) -> Result<StepOutcome, RuntimeError> {
    let parked: HashSet<String> = suspended.iter().map(|p| p.call_id.clone()).collect();
    if scope.turn.park(&results, suspended).is_none() {
        return Err(RuntimeError::Store(StoreError::Corrupt {
            id: scope.turn.id.clone(),
            error: "a running step has no record".into(),
        }));
    }
    let requests = scope
        .turn
        .pending
        .as_ref()
        .map(|step| step.requests.clone())
        .unwrap_or_default();
    // A step recorded nothing before its calls ran when they were all reads: this write is
    // its first, and appends the conversation's messages.
    let appended = scope.appended();
    let write = engine.store().write_turn_appending(
        &scope.turn,
        Some(claimed.version),
        keeping(claimed.lease.as_ref()),
        appended,
    );
    match write.await {
        Ok(written) => {
            scope.conversation = None;
            scope.stored = Some(written.version);
        }
        // Cancelled while the ready calls ran: `cancel` closed the turn, and the requests,
        // never announced, will not be; the calls that waited on them are cancelled.
        Err(StoreError::Conflict(_)) if cancelled_meanwhile(engine, &scope.turn.id).await? => {
            scope.stored = None;
            keep_messages(engine, &scope.turn, scope.appended()).await?;
            return Ok(StepOutcome::Completed {
                results: cancelled_results(prepared, &parked, results),
                ends_turn: false,
                notices: std::mem::take(&mut scope.notices),
            });
        }
        Err(error) => return Err(error.into()),
    }
    for request in &requests {
        engine.emit(Event::InputRequested {
            request: request.clone(),
        });
    }
    engine.emit(Event::TurnWaiting {
        session_id: scope.session.id.clone(),
        turn_id: scope.turn.id.clone(),
        on: "input".into(),
        requests: requests.iter().map(|r| r.request_id.clone()).collect(),
    });
    Ok(StepOutcome::Waiting {
        results,
        requests,
        notices: std::mem::take(&mut scope.notices),
    })
}

/// The results of a step whose turn was cancelled while its ready calls ran: theirs, and a
/// cancellation for each call that waited or parked.
fn cancelled_results(
    prepared: &[Prepared],
    parked: &HashSet<String>,
    results: Vec<Arc<CallResult>>,
) -> Vec<Arc<CallResult>> {
    let mut ran = results.into_iter();
    let mut all = Vec::with_capacity(prepared.len());
    for prep in prepared {
        match prep {
            Prepared::Ask { call_id, tool, .. } | Prepared::Run { call_id, tool, .. }
                if prep.asks() || parked.contains(&**call_id) =>
            {
                let name = tool.name();
                all.push(Arc::new(CallResult::failed(
                    call_id,
                    name,
                    ToolError::with_code(
                        ErrorCode::Cancelled,
                        format!("`{name}` was cancelled with its turn"),
                    ),
                )));
            }
            _ => all.extend(ran.next()),
        }
    }
    all
}

/// An output guardrail stopped the turn: the calls that waited for a person or parked do not
/// run (their requests, never announced, are revoked), the turn's workflow tasks are cancelled,
/// and the step closes, ending the turn.
async fn stop(
    engine: &Arc<Engine>,
    scope: &mut StepScope,
    prepared: &[Prepared],
    results: Vec<Arc<CallResult>>,
    suspended: Vec<Parked>,
    claimed: Claimed,
) -> Result<StepOutcome, RuntimeError> {
    let parked: HashSet<String> = suspended.iter().map(|p| p.call_id.clone()).collect();
    let results = cancelled_results(prepared, &parked, results);
    scope.turn.revoke_unannounced();
    crate::task::results::cancel_tasks_of_turn(engine, &scope.session.id, &scope.turn.id).await;
    let closing = Closing {
        version: claimed.version,
        lease: claimed.lease.as_ref(),
        ends: true,
        notices: std::mem::take(&mut scope.notices),
        appended: super::scope::appended(&scope.conversation),
        // A stop ends the turn whatever was steered into it meanwhile.
        steer: None,
        delivered: None,
    };
    let (outcome, stored) = finish(engine, &mut scope.turn, results, closing).await?;
    scope.stored = stored;
    Ok(outcome)
}

/// Closes the step with every call's result; the turn ends when every call may end it, all
/// succeeded, and no workflow task owes it a result.
async fn close(
    engine: &Engine,
    scope: &mut StepScope,
    results: Vec<Arc<CallResult>>,
    claimed: Claimed,
    steer: &CancellationToken,
) -> Result<StepOutcome, RuntimeError> {
    let ends_turn = scope.turn.may_end(&results)
        && crate::task::results::owing(engine, &scope.session.id, &scope.turn.id)
            .await?
            .is_empty();
    let lease = claimed.lease.as_ref();
    let closing = Closing {
        version: claimed.version,
        lease,
        ends: ends_turn,
        notices: std::mem::take(&mut scope.notices),
        // Nothing was recorded yet when nothing ran: this write is the step's first.
        appended: super::scope::appended(&scope.conversation),
        steer: Some(steer),
        delivered: scope.delivered,
    };
    let (outcome, stored) = finish(engine, &mut scope.turn, results, closing).await?;
    scope.stored = stored;
    Ok(outcome)
}

/// How a step closes: the version and lease its write goes under, whether the turn ends, and
/// the notices for the model.
pub(crate) struct Closing<'a> {
    pub(crate) version: u64,
    pub(crate) lease: Option<&'a Lease>,
    pub(crate) ends: bool,
    pub(crate) notices: Vec<String>,
    /// The conversation's messages the write appends, when it is the step's first.
    pub(crate) appended: Appended<'a>,
    /// The step's steering token: a step steered while it ran does not end the turn (the
    /// message must reach the model).
    pub(crate) steer: Option<&'a CancellationToken>,
    /// How many steered messages the host delivered, when it said (see
    /// [`crate::StepOptions::steering`]).
    pub(crate) delivered: Option<usize>,
}

/// Closes `turn`'s step with one result per call and writes it; returns the outcome and the
/// version the write gave `turn`. A cancel that won the write closed the turn: the results
/// are reported, the turn does not end here, and `turn` is not what the store holds (`None`).
pub(crate) async fn finish(
    engine: &Engine,
    turn: &mut TurnRecord,
    results: Vec<Arc<CallResult>>,
    closing: Closing<'_>,
) -> Result<(StepOutcome, Option<u64>), RuntimeError> {
    let Closing {
        version,
        lease,
        ends,
        notices,
        appended,
        steer,
        delivered,
    } = closing;
    let ends = ends && !steered(engine, &turn.id, steer, delivered).await?;
    // A turn an output guardrail stopped ends whatever its calls say (a resumed step too).
    let stopped = super::guard::stopped(&results);
    let ends = ends || (stopped && turn.status != TurnStatus::Cancelled);
    // The record and the outcome share the results: a step's results are never copied.
    turn.close_step(&results, ends);
    let stored = match engine
        .store()
        .write_turn_appending(turn, Some(version), keeping(lease), appended)
        .await
    {
        Ok(written) => written.version,
        // Cancelled while the calls ran: `cancel` closed the turn; report what the calls did.
        Err(StoreError::Conflict(_)) if cancelled_meanwhile(engine, &turn.id).await? => {
            keep_messages(engine, turn, appended).await?;
            let outcome = StepOutcome::Completed {
                results,
                ends_turn: false,
                notices,
            };
            return Ok((outcome, None));
        }
        Err(error) => return Err(error.into()),
    };
    if ends {
        let limited = turn.last_step.as_ref().and_then(|s| s.session_limit());
        engine.emit(Event::TurnCompleted {
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            reason: if stopped {
                CompletionReason::Guardrail
            } else if limited.is_some() {
                CompletionReason::SessionLimit
            } else {
                CompletionReason::EndsTurn
            },
        });
    }
    let outcome = StepOutcome::Completed {
        results,
        ends_turn: ends,
        notices,
    };
    Ok((outcome, Some(stored)))
}

/// Whether a message steered into turn `turn_id` keeps it going, when its step could end it:
/// the step was steered while it ran, or the host delivered fewer messages than were
/// recorded. When the host said how many it delivered and none waits, the turn's steering is
/// closed here, before the step's write ends the turn: a message racing this close either
/// lands first (and the turn goes on) or is refused.
async fn steered(
    engine: &Engine,
    turn_id: &str,
    steer: Option<&CancellationToken>,
    delivered: Option<usize>,
) -> Result<bool, RuntimeError> {
    if steer.is_some_and(CancellationToken::is_cancelled) {
        return Ok(true);
    }
    let Some(delivered) = delivered else {
        return Ok(false);
    };
    let waiting = crate::steering::close(engine.store().as_ref(), turn_id, delivered).await?;
    Ok(!waiting.is_empty())
}

/// Appends the conversation's messages a step's first write would have appended, when that
/// write lost to a cancel: the model's message that made the calls stays in the conversation,
/// before the results the host appends next, as when the step was recorded running first.
async fn keep_messages(
    engine: &Engine,
    turn: &TurnRecord,
    appended: Appended<'_>,
) -> Result<(), RuntimeError> {
    if appended.messages.is_empty() {
        return Ok(());
    }
    let store = engine.store();
    let append = store.append_conversation(
        &turn.session_id,
        &turn.id,
        appended.first,
        appended.messages,
    );
    match append.await {
        // Appended already (by a write that won after all): nothing is lost.
        Ok(()) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// After a write lost to a concurrent writer: whether that writer cancelled turn `turn_id`.
/// If so, the step the calls belonged to is closed in the cancelled record too, so none of
/// its calls stays `running` (the results went to the caller; the turn takes no more steps).
pub(crate) async fn cancelled_meanwhile(
    engine: &Engine,
    turn_id: &str,
) -> Result<bool, RuntimeError> {
    loop {
        let Some((mut turn, version)) = engine.store().turn(turn_id).await? else {
            return Ok(false);
        };
        if turn.status != TurnStatus::Cancelled {
            return Ok(false);
        }
        if !turn.close_cancelled_step() {
            return Ok(true);
        }
        match engine.store().put_turn(&turn, Some(version)).await {
            Ok(_) => return Ok(true),
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
}
