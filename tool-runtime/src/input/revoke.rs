//! A plain message while a turn waits, when it answers no question: pending approvals are
//! revoked (`ignored`), and calls of the batch that were already approved still run.

use std::sync::Arc;

use super::resume::{resume, write};
use crate::call::RespondOutcome;
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::record::{Outcome, TurnStatus};
use crate::store::{Claim, StoreError};

/// Revokes every pending request of turn `turn_id` with `outcome` (`text` is the message that
/// did), then resumes the step so already-approved calls run.
pub(crate) async fn revoke(
    engine: &Arc<Engine>,
    turn_id: &str,
    outcome: Outcome,
    text: &str,
) -> Result<RespondOutcome, RuntimeError> {
    loop {
        let (mut turn, version) = engine.turn(turn_id).await?;
        if turn.status != TurnStatus::Waiting {
            return Ok(RespondOutcome::Dropped);
        }
        let (session, session_version) = engine.session(&turn.session_id).await?;
        let Some(step) = turn.pending.as_mut() else {
            return Err(RuntimeError::Store(StoreError::Corrupt {
                id: turn_id.to_owned(),
                error: "a waiting turn has no pending step".into(),
            }));
        };
        let revoked = step.revoke(outcome, text);
        // `once` grants of requests approved earlier in this step: with nothing pending for
        // their key any more, the memory is written now.
        let grants = step.grants_completed_by(&revoked);
        let sleeping = step.is_sleeping();
        let claimed = turn.claim_step();
        let taking = if turn.status == TurnStatus::Running {
            engine.claim_here()
        } else {
            Claim::None
        };
        let resumption = match write(engine, &turn, version, taking).await {
            Ok(resumption) => resumption,
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        };
        for (requester, key) in grants {
            engine
                .store()
                .remember_approval(&session.id, &requester, &key)
                .await?;
        }
        engine.emit_resolved(&session.id, &turn.id, revoked, outcome);
        if sleeping {
            // The step goes on when the timer wakes it.
            return Ok(RespondOutcome::Settled {
                pending: Vec::new(),
            });
        }
        let session = (session, session_version);
        let outcome = resume(engine, session, turn, claimed, resumption).await?;
        if let crate::call::StepOutcome::Waiting { requests, .. } = &outcome {
            super::settle::recheck(engine, requests);
        }
        return Ok(RespondOutcome::Resumed(outcome));
    }
}
