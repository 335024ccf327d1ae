//! A new message from the user while a turn goes on (steering): recorded for the model in the
//! turn's steering log ([`crate::steering`]); a step running here has its plain and `execute`
//! calls interrupted; a waiting turn has its question answered or its approvals revoked.

use std::sync::Arc;

use super::revoke::revoke;
use super::settle::respond;
use crate::call::{InputResponse, Steered, StepOptions};
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::{InputRequest, Outcome, RequestKind, TurnRecord, TurnStatus};
use crate::steering::{Recorded, record};

/// Steers `text` into turn `turn_id` (see [`crate::Turn::steer`]).
pub(crate) async fn steer(
    engine: &Arc<Engine>,
    turn_id: &str,
    text: &str,
) -> Result<Steered, RuntimeError> {
    let (turn, _) = engine.turn(turn_id).await?;
    match turn.status {
        TurnStatus::Completed | TurnStatus::Cancelled => {
            return Err(refused(
                &turn,
                "it has ended; begin a new turn with the message",
            ));
        }
        TurnStatus::Waiting => return waiting(engine, &turn, text).await,
        // Calls run in the process that claimed them, and only that process holds their
        // tokens: the message would reach the model but nothing would be interrupted.
        TurnStatus::Running if !engine.work().runs_turn(turn_id) => {
            return Err(refused(
                &turn,
                "its calls run in another process, and steering interrupts only calls running \
                 in this one; steer it through the process that runs it, or send the message \
                 once the step has closed",
            ));
        }
        TurnStatus::Running | TurnStatus::Active => {}
    }
    recorded(engine, &turn, text).await?;
    let interrupted = engine.work().steer_turn(turn_id);
    // A step that closed while the message was recorded may have ended the turn before it
    // could see it: the message would never reach the model.
    let (after, _) = engine.turn(turn_id).await?;
    if matches!(after.status, TurnStatus::Completed | TurnStatus::Cancelled) {
        return Err(refused(
            &after,
            "it ended while the message was recorded, which will not reach the model; begin a \
             new turn with it",
        ));
    }
    announce(engine, &turn, interrupted);
    Ok(if interrupted {
        Steered::Interrupted
    } else {
        Steered::Queued
    })
}

/// The first unanswered question of a waiting turn: a plain message answers it.
pub(crate) fn pending_question(turn: &TurnRecord) -> Option<&InputRequest> {
    if turn.status != TurnStatus::Waiting {
        return None;
    }
    turn.pending
        .iter()
        .flat_map(|p| &p.requests)
        .find(|r| r.kind == RequestKind::Question && r.is_pending())
}

/// A message to a waiting turn: it answers the first unanswered question; else it revokes the
/// pending approvals and is recorded for the model (a turn parked on its budget stops, as a
/// revoked limit stops it, and nothing is recorded).
async fn waiting(
    engine: &Arc<Engine>,
    turn: &TurnRecord,
    text: &str,
) -> Result<Steered, RuntimeError> {
    if let Some(question) = pending_question(turn) {
        let response = InputResponse::answer(&question.request_id, turn.current.clone(), text);
        let outcome = respond(engine, response, StepOptions::new()).await?;
        return Ok(Steered::Answered(outcome));
    }
    let at_limit = turn
        .pending
        .iter()
        .flat_map(|p| &p.requests)
        .any(|r| r.kind == RequestKind::SessionLimit && r.is_pending());
    if !at_limit {
        recorded(engine, turn, text).await?;
        announce(engine, turn, false);
    }
    let outcome = revoke(engine, &turn.id, Outcome::Ignored, text).await?;
    Ok(Steered::Revoked(outcome))
}

/// Records `text` in `turn`'s steering log; refused once the log is closed.
async fn recorded(engine: &Engine, turn: &TurnRecord, text: &str) -> Result<(), RuntimeError> {
    match record(engine.store().as_ref(), &turn.id, text).await? {
        Recorded::At(_) => Ok(()),
        Recorded::Closed => Err(refused(
            turn,
            "its host gave the model's final answer already; begin a new turn with the message",
        )),
    }
}

fn announce(engine: &Engine, turn: &TurnRecord, interrupted: bool) {
    engine.emit(Event::TurnSteered {
        session_id: turn.session_id.clone(),
        turn_id: turn.id.clone(),
        interrupted,
    });
}

fn refused(turn: &TurnRecord, what: &'static str) -> RuntimeError {
    RuntimeError::TurnState {
        turn: turn.id.clone(),
        status: turn.status,
        what,
    }
}
