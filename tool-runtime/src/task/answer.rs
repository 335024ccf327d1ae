//! Answers to the questions of a task's body: the answer is journaled (the first valid one
//! wins) and the task, if nothing else is pending, runs again.

use std::sync::Arc;

use toolwright_core::ResponseVerdict;

use super::runner::spawn;
use crate::call::{InputResponse, RespondOutcome};
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::exec::context::session_info;
use crate::record::TaskStatus;
use crate::store::{Claim, StoreError};
use crate::transition::answer::{Settler, decision_of, journal_entry, response_verdict};

/// Answers a question asked by a task's body: the answer is journaled (the first valid one
/// wins) and the task, if nothing else is pending, runs again.
pub(crate) async fn settle_task(
    engine: &Arc<Engine>,
    id: &str,
    response: InputResponse,
    settler: Settler,
) -> Result<RespondOutcome, RuntimeError> {
    loop {
        let Some((mut task, version)) = engine.store().task(id).await? else {
            return Ok(RespondOutcome::Dropped);
        };
        let Some(request) = task
            .requests
            .iter()
            .find(|r| r.request_id == response.request_id)
            .cloned()
        else {
            return Ok(RespondOutcome::Dropped);
        };
        if !request.is_pending() || task.status != TaskStatus::Waiting {
            return Ok(RespondOutcome::Dropped);
        }
        if let Some(reason) = settler.refusal(&request) {
            return Ok(RespondOutcome::Rejected { reason });
        }
        let Some((session, _)) = engine.store().session(&task.session_id).await? else {
            return Err(RuntimeError::UnknownSession(task.session_id.clone()));
        };
        let registry = engine.registry();
        let tool = registry.get(&task.tool);
        let token = engine.token_check(tool, &request, &response).await;
        let verdict = response_verdict(
            tool,
            &session_info(&session, &task.turn_id, task.current.as_ref(), task.caller),
            &request,
            &response,
            &token,
        );
        if let (Settler::Person, ResponseVerdict::Rejected(reason)) = (settler, verdict) {
            return Ok(RespondOutcome::Rejected { reason });
        }
        let answer = match settler.answer(&request, &response) {
            Ok(answer) => answer,
            Err(reason) => return Ok(RespondOutcome::Rejected { reason }),
        };
        let position = request.journal_position.unwrap_or_default();
        // The answer is claimed on the task record first (the first valid answer wins
        // there, and a cancel that revoked the question wins over it); the journal records it
        // after, or, if this process stops in between, when the body next runs.
        let Some(pending) = task.settle_answer(
            &response.request_id,
            answer.clone(),
            decision_of(response.decision),
            response.principal.clone(),
            response.note.clone(),
        ) else {
            return Ok(RespondOutcome::Dropped);
        };
        let resume = pending.is_empty();
        let taking = if resume {
            engine.claim_here()
        } else {
            Claim::None
        };
        let lease = match engine
            .store()
            .write_task(&task, Some(version), taking)
            .await
        {
            Ok(written) => written.lease,
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        };
        let entry = journal_entry(&request, position, &answer);
        match engine.store().append_journal(&task.run_id(), &entry).await {
            Ok(()) | Err(StoreError::Conflict(_)) => {}
            Err(error) => {
                tracing::warn!(
                    task_id = id,
                    "journaling an answer failed: {error}; the body journals it when it runs"
                );
            }
        }
        engine.emit(Event::InputResolved {
            session_id: task.session_id.clone(),
            turn_id: task.turn_id.clone(),
            request_id: request.request_id.clone(),
            outcome: settler.outcome(),
        });
        if !resume {
            return Ok(RespondOutcome::Settled { pending });
        }
        spawn(engine, id, lease);
        return Ok(RespondOutcome::TaskResumed {
            task_id: id.to_owned(),
        });
    }
}
