//! Cancelling a turn: its running calls see their tokens fire, its pending requests are
//! revoked, and workflow bodies parked mid-run get to run their cleanup.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, find_tool};
use crate::error::RuntimeError;
use crate::event::{CompletionReason, Event};
use crate::exec::context::session_info;
use crate::exec::{Executed, Execution, RunMode, execute};
use crate::record::{Outcome, TurnRecord, TurnStatus};
use crate::store::StoreError;
use crate::transition::turn::Cancellation;

/// Cancels turn `turn_id` (nothing when it has ended).
pub(crate) async fn cancel_turn(engine: &Arc<Engine>, turn_id: &str) -> Result<(), RuntimeError> {
    // Calls of this turn running in this process see their tokens fire, whichever handle
    // started them.
    engine.work().cancel_turn(turn_id);
    loop {
        let (mut turn, version) = engine.turn(turn_id).await?;
        if matches!(turn.status, TurnStatus::Completed | TurnStatus::Cancelled) {
            return Ok(());
        }
        let cancellation = turn.cancel();
        match engine.store().put_turn(&turn, Some(version)).await {
            Ok(_) => {
                announce(engine, &turn, cancellation);
                return Ok(());
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
}

/// What the cancel of `turn` changed, told: revoked requests, calls that waited, and the
/// cleanup of parked bodies, which runs in the background.
fn announce(engine: &Arc<Engine>, turn: &TurnRecord, cancellation: Cancellation) {
    let Cancellation {
        revoked,
        closed,
        bodies,
    } = cancellation;
    engine.emit_resolved(&turn.session_id, &turn.id, revoked, Outcome::Cancelled);
    for result in closed {
        engine.emit(Event::ActionResult {
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            result: Arc::new(result),
        });
    }
    // A resumption that registered after the first look still sees the cancel.
    engine.work().cancel_turn(&turn.id);
    if !bodies.is_empty() {
        let engine = Arc::clone(engine);
        let turn = turn.clone();
        tokio::spawn(async move { clean_up(&engine, turn, bodies).await });
    }
    engine.emit(Event::TurnCompleted {
        session_id: turn.session_id.clone(),
        turn_id: turn.id.clone(),
        reason: CompletionReason::Cancelled,
    });
}

/// Runs the cleanup of cancelled workflow bodies that were parked: each replays its journal
/// with its token fired (`ask` answers `cancelled`, `sleep` fails at once) for at most
/// [`crate::Options::task_cleanup`]. What they return is dropped: their calls are cancelled.
async fn clean_up(engine: &Engine, turn: TurnRecord, bodies: Vec<(String, String, Value)>) {
    let Ok(Some((session, _))) = engine.store().session(&turn.session_id).await else {
        return;
    };
    let registry = engine.registry();
    let info = Arc::new(session_info(
        &session,
        &turn.id,
        turn.current.as_ref(),
        turn.caller,
    ));
    let runs = bodies.into_iter().filter_map(|(call_id, tool, mut input)| {
        let found = find_tool(&registry, &tool)?;
        let sealing = &engine.options().sealing;
        // A body whose input cannot be opened here runs no cleanup: it never ran in this
        // process, and its call is cancelled all the same.
        sealing
            .open(
                &found.sensitivity().input,
                crate::sealing::SealScope {
                    tool: found.name(),
                    session: &turn.session_id,
                },
                &mut input,
            )
            .ok()?;
        let (session, turn, info) = (&session, &turn, Arc::clone(&info));
        Some(async move {
            let token = CancellationToken::new();
            let run = Execution {
                session,
                turn,
                info,
                tool: &found,
                call_id: Arc::from(call_id.as_str()),
                input,
                approved_by: None,
                token: &token,
                steer: None,
                lease: None,
                mode: RunMode::CleanupOnly,
                model: None,
            };
            if let Executed::Done(result) = execute(engine, run).await
                && result.is_error
            {
                tracing::debug!(
                    call_id,
                    tool,
                    "cleanup of a cancelled body: {}",
                    result.model().to_text()
                );
            }
        })
    });
    futures_util::future::join_all(runs).await;
}
