//! Answers to input requests. The first valid answer wins: later ones are dropped. A response
//! policy may reject an answer, which leaves the request pending for another approver. When
//! the last pending request of the step settles, the step resumes here and its approved calls
//! run (exactly once: the turn is claimed in the store first).

use std::sync::Arc;

use serde_json::Value;
use toolwright_core::{AskAnswer, ResponseVerdict};

use super::resume::{Resumption, resume, write};
use crate::call::{InputResponse, RespondOutcome, StepOptions, StepOutcome};
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::{CandidateStatus, Event};
use crate::exec::context::session_info;
use crate::record::{
    Approver, Decision, InputRequest, JournalEntry, RequestKind, TurnRecord, TurnStatus,
};
use crate::store::StoreError;
use crate::transition::HookRef;
use crate::transition::answer::{
    Settler, TokenCheck, answer_text, decision_of, journal_entry, question_answer, response_verdict,
};
use crate::transition::turn::Settlement;

/// Answers an input request on a task of its own: a resumed step must finish even if the
/// caller stops waiting.
pub(crate) async fn respond(
    engine: &Arc<Engine>,
    response: InputResponse,
    options: StepOptions,
) -> Result<RespondOutcome, RuntimeError> {
    let engine = Arc::clone(engine);
    tokio::spawn(async move { settle(&engine, response, options, Settler::Person).await })
        .await
        .map_err(|error| RuntimeError::Task(error.to_string()))?
}

/// Withdraws question `request_id`, whose deadline passed: its body gets
/// [`AskAnswer::Timeout`] (unless an answer was recorded first, which wins), and the step or
/// task resumes when nothing else holds it.
pub(crate) async fn expire(
    engine: &Arc<Engine>,
    request_id: &str,
) -> Result<RespondOutcome, RuntimeError> {
    let response = Settler::withdrawal(request_id);
    settle(engine, response, StepOptions::new(), Settler::Deadline).await
}

/// Settles the wait `request_id` on a hook with the hook's delivered `payload`, on a task of
/// its own like [`respond`].
pub(crate) async fn deliver(
    engine: &Arc<Engine>,
    request_id: &str,
    payload: Value,
) -> Result<RespondOutcome, RuntimeError> {
    let engine = Arc::clone(engine);
    let response = InputResponse::fill(request_id, None, payload);
    tokio::spawn(async move { settle(&engine, response, StepOptions::new(), Settler::Hook).await })
        .await
        .map_err(|error| RuntimeError::Task(error.to_string()))?
}

/// Answers an input request of a turn, or of a workflow task's body.
async fn settle(
    engine: &Arc<Engine>,
    response: InputResponse,
    options: StepOptions,
    settler: Settler,
) -> Result<RespondOutcome, RuntimeError> {
    let store = engine.store();
    let Some(turn_id) = store.turn_of_request(&response.request_id).await? else {
        // A question asked by a workflow task's body parks the task, not a turn.
        return match store.task_of_request(&response.request_id).await? {
            Some(task_id) => {
                crate::task::answer::settle_task(engine, &task_id, response, settler).await
            }
            None => Err(RuntimeError::UnknownRequest(response.request_id.clone())),
        };
    };
    loop {
        // The copy the last answer to this turn wrote, if this process made it; else the store's.
        let kept = engine.parked().take(&turn_id);
        let from_memory = kept.is_some();
        let (mut turn, version) = match kept {
            Some(kept) => kept,
            None => engine.turn(&turn_id).await?,
        };
        let Some(request) = pending_request(&turn, &response.request_id) else {
            // A copy may be older than a step parked since: only the store can say "no".
            if from_memory {
                continue;
            }
            return Ok(RespondOutcome::Dropped);
        };
        if let Some(reason) = settler.refusal(&request) {
            engine.parked().keep(turn, version);
            return Ok(RespondOutcome::Rejected { reason });
        }
        let (session, session_version) = engine.session(&turn.session_id).await?;
        let info = session_info(&session, &turn.id, turn.current.as_ref(), turn.caller);
        let registry = engine.registry();
        let tool = request.tool.as_deref().and_then(|name| registry.get(name));
        let token = match settler {
            Settler::Person => engine.token_check(tool, &request, &response).await,
            _ => TokenCheck::NotRequired,
        };
        if settler == Settler::Person
            && let ResponseVerdict::Rejected(reason) =
                response_verdict(tool, &info, &request, &response, &token)
        {
            engine.emit(Event::ApprovalCandidate {
                session_id: session.id.clone(),
                turn_id: turn.id.clone(),
                request_id: request.request_id.clone(),
                decision: response.decision,
                responder: response.principal.clone(),
                status: CandidateStatus::Rejected,
                reason: Some(reason.clone()),
            });
            engine.parked().keep(turn, version);
            return Ok(RespondOutcome::Rejected { reason });
        }
        let decision = decision_of(response.decision);
        let answer = match answer(engine, &turn, &request, &response, settler).await? {
            Answer::Given(answer) => answer,
            Answer::Rejected(reason) => {
                engine.parked().keep(turn, version);
                return Ok(RespondOutcome::Rejected { reason });
            }
            Answer::Dropped => return Ok(RespondOutcome::Dropped),
        };
        let Some(step) = turn.pending.as_mut() else {
            return Ok(RespondOutcome::Dropped);
        };
        let settlement = Settlement {
            decision,
            responder: response.principal.clone(),
            note: response.note.clone(),
            answer,
        };
        step.settle(&response.request_id, &settlement);
        // Approving a changed remote definition pins it, for every session, before the turn
        // is claimed: a failure here leaves the request pending (answer again), never a
        // claimed call whose approval was lost. Pinning twice (a retry of this loop, a second
        // approver) is harmless.
        if decision == Decision::Approved
            && let Some(change) = &request.definition_change
        {
            engine
                .remote()
                .approve_change(change, response.principal.clone())
                .await?;
        }
        // `once` memory is written only when no request for the same grant (requester and
        // key) is still pending: by the answer that settles the last of them.
        let remember = step.grants_completed_by(std::slice::from_ref(&response.request_id));
        let pending = step.pending_requests();
        // A sleeping workflow call holds the step until its timer is due.
        let claim = pending.is_empty() && !step.is_sleeping();
        let written = match record(engine, &mut turn, version, &response.request_id, claim).await {
            Ok(written) => written,
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        };
        for (requester, key) in remember {
            store
                .remember_approval(&session.id, &requester, &key)
                .await?;
        }
        announce_settled(engine, &turn, &request, &response, decision, settler);
        return match written {
            Recorded::Patched(version) => {
                engine.parked().keep(turn, version);
                Ok(RespondOutcome::Settled { pending })
            }
            Recorded::Claimed(claimed, mut resumption) => {
                resumption.model = options.model;
                let session = (session, session_version);
                let outcome = resume(engine, session, turn, claimed, resumption).await?;
                if let StepOutcome::Waiting { requests, .. } = &outcome {
                    recheck(engine, requests);
                }
                Ok(RespondOutcome::Resumed(outcome))
            }
        };
    }
}

/// What recording an answer did.
enum Recorded {
    /// The answer's patch went beside the turn, which is now at this version.
    Patched(u64),
    /// The answer settled the step's last request: the whole turn was written, claiming these
    /// calls to run here.
    Claimed(Vec<(String, Option<Approver>)>, Resumption),
}

/// Records the answer to `request_id`, settled in `turn` (read at `version`). While requests
/// stay pending, only what the answer changed is written
/// ([`crate::Store::settle_request`]): an answer costs the same however big the step is. The
/// answer that settles the last one (`claim`) writes the whole turn and claims its calls.
async fn record(
    engine: &Engine,
    turn: &mut TurnRecord,
    version: u64,
    request_id: &str,
    claim: bool,
) -> Result<Recorded, StoreError> {
    if claim {
        let claimed = turn.claim_step();
        let resumption = write(engine, turn, version, engine.claim_here()).await?;
        return Ok(Recorded::Claimed(claimed, resumption));
    }
    let patch = turn
        .pending
        .as_ref()
        .and_then(|step| step.patch(request_id))
        .ok_or_else(|| StoreError::Corrupt {
            id: turn.id.clone(),
            error: format!("the settled request `{request_id}` is not in the parked step"),
        })?;
    let version = engine
        .store()
        .settle_request(&turn.id, &patch, version)
        .await?;
    Ok(Recorded::Patched(version))
}

/// The request `request_id` of `turn`, if the turn waits on it.
pub(super) fn pending_request(turn: &TurnRecord, request_id: &str) -> Option<InputRequest> {
    let request = turn.request(request_id)?;
    (request.is_pending() && turn.status == TurnStatus::Waiting).then(|| request.clone())
}

/// What an answer says, once checked against its request.
enum Answer {
    /// The answer to a question (`None` for approvals and declines).
    Given(Option<String>),
    /// Not an answer the request takes; the request stays pending.
    Rejected(String),
    /// The request was answered already.
    Dropped,
}

/// What `response` answers to `request` of `turn`. A workflow body's answer goes into the
/// call's journal first (the first valid answer wins there too); the body replays up to it.
async fn answer(
    engine: &Engine,
    turn: &TurnRecord,
    request: &InputRequest,
    response: &InputResponse,
    settler: Settler,
) -> Result<Answer, RuntimeError> {
    if let Some(position) = request.journal_position {
        let answer = match settler.answer(request, response) {
            Ok(answer) => answer,
            Err(reason) => return Ok(Answer::Rejected(reason)),
        };
        let call_id = request.call_id.as_deref().unwrap_or_default();
        let run = crate::ids::durable_run_id(&turn.id, call_id);
        return journal_answer(engine, &run, journal_entry(request, position, &answer)).await;
    }
    if request.kind == RequestKind::Question && decision_of(response.decision) == Decision::Approved
    {
        return Ok(match question_answer(request, response) {
            Ok(answer) => Answer::Given(Some(answer)),
            Err(reason) => Answer::Rejected(reason),
        });
    }
    Ok(Answer::Given(None))
}

/// Journals the answer to a workflow body's request (`entry`) in run `run`.
async fn journal_answer(
    engine: &Engine,
    run: &str,
    entry: JournalEntry,
) -> Result<Answer, RuntimeError> {
    let store = engine.store();
    let position = entry.position;
    let answer: AskAnswer =
        serde_json::from_value(entry.value.clone()).unwrap_or(AskAnswer::Cancelled);
    match store.append_journal(run, &entry).await {
        Ok(()) => Ok(Answer::Given(answer_text(&answer))),
        // Already recorded: by this answer on an earlier try (the turn write raced another
        // writer), or by another answer, perhaps from a process that died before settling the
        // request. The first answer on record wins: the request is settled with it, so the body
        // never waits on a question the journal has already answered.
        Err(StoreError::Conflict(_)) => {
            let recorded = store.journal(run).await?;
            let Some(entry) = recorded.iter().find(|e| e.position == position) else {
                return Ok(Answer::Dropped);
            };
            Ok(
                match serde_json::from_value::<AskAnswer>(entry.value.clone()) {
                    Ok(recorded) => Answer::Given(answer_text(&recorded)),
                    Err(_) => Answer::Dropped,
                },
            )
        }
        Err(error) => Err(error.into()),
    }
}

/// The events of a settled request.
fn announce_settled(
    engine: &Engine,
    turn: &TurnRecord,
    request: &InputRequest,
    response: &InputResponse,
    decision: Decision,
    settler: Settler,
) {
    if request.kind != RequestKind::Question {
        engine.emit(Event::ApprovalCandidate {
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            request_id: request.request_id.clone(),
            decision: response.decision,
            responder: response.principal.clone(),
            status: CandidateStatus::Pending,
            reason: None,
        });
        engine.emit(Event::ApprovalSettled {
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            request_id: request.request_id.clone(),
            decision,
        });
    }
    engine.emit(Event::InputResolved {
        session_id: turn.session_id.clone(),
        turn_id: turn.id.clone(),
        request_id: request.request_id.clone(),
        outcome: settler.outcome(),
    });
}

/// Right after a run parked on `requests`: a wait on a hook whose delivery arrived between the
/// body's check and the park is settled now, in the background. (A delivery after the park
/// finds the request itself.)
pub(crate) fn recheck(engine: &Arc<Engine>, requests: &[InputRequest]) {
    for request in requests.iter().filter(|r| r.is_pending()) {
        let Some(hook) = HookRef::of(request) else {
            continue;
        };
        let engine = Arc::clone(engine);
        let request_id = request.request_id.clone();
        tokio::spawn(async move {
            let delivered = match crate::host::hook::delivery(engine.store().as_ref(), &hook.id)
                .await
            {
                Ok(delivered) => delivered,
                Err(error) => {
                    tracing::warn!(hook = %hook.id, "checking a hook's delivery failed: {error}");
                    return;
                }
            };
            if let Some(payload) = delivered
                && let Err(error) = deliver(&engine, &request_id, payload).await
            {
                tracing::warn!(hook = %hook.id, "settling a delivered hook failed: {error}");
            }
        });
    }
}
