//! Resuming a parked step once nothing holds it: its claimed calls run (each checked again
//! first), and the step closes, or parks again when a workflow body asks again.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolwright_core::{
    ApprovalDecision, Effect, ErrorCode, ModelBackend, RequestPolicy, SessionInfo, ToolError,
};

use crate::call::StepOutcome;
use crate::engine::kept::KeptTurn;
use crate::engine::work::TrackedTurn;
use crate::engine::{Engine, find_tool, keeping};
use crate::error::RuntimeError;
use crate::event::Event;
use crate::exec::context::session_info;
use crate::exec::{Executed, Execution, RunMode};
use crate::pipeline::close::{Closing, finish};
use crate::pipeline::decide::{PolicyCall, custom_decision};
use crate::pipeline::execute::run_call;
use crate::pipeline::scope::TokenSignal;
use crate::record::{
    Approver, CallResult, CallState, PendingCall, PendingStep, SessionRecord, TurnRecord,
};
use crate::store::{Appended, Claim, Lease, StoreError};
use crate::transition::Parked;
use crate::transition::answer::with_note;

/// A turn written back after a change, with the claim of its step when the write took one.
pub(crate) struct Resumption {
    /// The turn's version after the write.
    pub(crate) version: u64,
    /// The lease of the claim.
    pub(crate) lease: Option<Lease>,
    /// Cancels the claimed calls (fired by `cancel` on this process).
    token: CancellationToken,
    /// Registered before the claim is written, so a cancel that lands right after it still
    /// reaches the calls; held until they are done.
    running: Option<TrackedTurn>,
    /// The model the answer's carrier brought for the resumed calls (see
    /// [`crate::StepOptions`]); else the runtime's.
    pub(crate) model: Option<Arc<dyn ModelBackend>>,
}

impl Resumption {
    /// The steering token of the claimed calls, when the write claimed them here.
    fn steer(&self) -> Option<&CancellationToken> {
        self.running.as_ref().map(TrackedTurn::steer_token)
    }
}

/// Writes `turn` (read at `version`) with `claim`. A claiming write registers the turn's
/// calls as running here first.
pub(crate) async fn write(
    engine: &Engine,
    turn: &TurnRecord,
    version: u64,
    claim: Claim<'_>,
) -> Result<Resumption, StoreError> {
    let token = CancellationToken::new();
    let running =
        (!matches!(claim, Claim::None)).then(|| engine.work().track_turn(&turn.id, &token));
    let written = engine
        .store()
        .write_turn(turn, Some(version), claim)
        .await?;
    if let Some(running) = &running {
        running.hold(written.lease.clone());
    }
    Ok(Resumption {
        version: written.version,
        lease: written.lease,
        token,
        running,
        model: None,
    })
}

/// Runs the `claimed` calls of `turn`'s step (claimed by the write that gave `resumption`)
/// and closes the step. `session` is the turn's session with the version it was read at: a
/// turn the close leaves active is kept with it for its next step (see
/// [`crate::engine::kept`]), which then asks the store whether both are still at those
/// versions instead of reading them.
pub(crate) async fn resume(
    engine: &Arc<Engine>,
    (session, session_version): (SessionRecord, u64),
    mut turn: TurnRecord,
    claimed: Vec<(String, Option<Approver>)>,
    resumption: Resumption,
) -> Result<StepOutcome, RuntimeError> {
    let Some(step) = turn.pending.clone() else {
        return Err(RuntimeError::Store(StoreError::Corrupt {
            id: turn.id.clone(),
            error: "a claimed turn has no pending step".into(),
        }));
    };
    let approved = engine.approvals(&session.id, turn.current.as_ref()).await?;
    let lease = resumption.lease.as_ref();
    // The calls' context sees one session, built once for the step.
    let info = Arc::new(session_info(
        &session,
        &turn.id,
        turn.current.as_ref(),
        turn.caller,
    ));
    let runs = step.calls.iter().filter_map(|call| {
        let (_, approved_by) = claimed.iter().find(|(id, _)| *id == call.call_id)?;
        let again = Again {
            session: &session,
            turn: &turn,
            info: &info,
            call,
            approved: &approved,
            token: &resumption.token,
            steer: resumption.steer(),
            lease,
            model: resumption.model.clone(),
        };
        let approved_by = approved_by.clone();
        Some(async move { (call, run_approved(engine, again, approved_by).await) })
    });
    let executed = futures_util::future::join_all(runs).await;
    let mut ran: Vec<(CallResult, bool)> = Vec::new();
    let mut asked: Vec<Parked> = Vec::new();
    for (call, (execution, invoked)) in executed {
        match execution {
            Executed::Done(result) => ran.push((result, invoked)),
            Executed::Suspended(suspension) => {
                asked.push(Parked::new(&turn, &call.call_id, &call.tool, suspension));
            }
        }
    }
    if !asked.is_empty() {
        return park_again(
            engine,
            &session,
            turn,
            resumption.version,
            lease,
            ran,
            asked,
        )
        .await;
    }
    let invoked: Vec<String> = ran
        .iter()
        .filter(|(_, invoked)| *invoked)
        .map(|(r, _)| r.call_id.clone())
        .collect();
    let mut ran: Vec<CallResult> = ran.into_iter().map(|(r, _)| r).collect();
    // A note sent with an approval reaches the model beside the result.
    for result in &mut ran {
        if let Some(note) = step.approver_note(&result.call_id) {
            result.set_model(with_note(&result.model(), note));
        }
    }
    let ran: Vec<Arc<CallResult>> = ran.into_iter().map(Arc::new).collect();
    let results = step_results(engine, &session, &turn, &step, &ran);
    for result in &results {
        turn.note_taint(&result.tool, invoked.contains(&result.call_id));
    }
    // A session-limit request the host did not approve stops the turn.
    let ends = turn.status != crate::record::TurnStatus::Cancelled
        && (turn.may_end(&results) || step.stops_at_limit())
        && crate::task::results::owing(engine, &session.id, &turn.id)
            .await?
            .is_empty();
    let closing = Closing {
        version: resumption.version,
        lease,
        ends,
        notices: Vec::new(),
        // The step was recorded, with its messages, before it parked.
        appended: Appended::default(),
        // A limit not approved stops the turn, steered or not.
        steer: resumption.steer().filter(|_| !step.stops_at_limit()),
        delivered: None,
    };
    let (outcome, stored) = finish(engine, &mut turn, results, closing).await?;
    if let Some(version) = stored {
        engine.kept().keep(KeptTurn {
            turn,
            version,
            session,
            session_version,
        });
    }
    Ok(outcome)
}

/// One result per call of the resumed `step`, in the model's order: the calls that ran now
/// (announced), the calls settled while the turn was parked (announced when they waited on a
/// request), and calls a stopped process left behind.
fn step_results(
    engine: &Engine,
    session: &SessionRecord,
    turn: &TurnRecord,
    step: &PendingStep,
    ran: &[Arc<CallResult>],
) -> Vec<Arc<CallResult>> {
    let announce = |result: &Arc<CallResult>| {
        engine.emit(Event::ActionResult {
            session_id: session.id.clone(),
            turn_id: turn.id.clone(),
            result: Arc::clone(result),
        });
    };
    let mut results = Vec::with_capacity(step.calls.len());
    for call in &step.calls {
        let result = match (&call.state, ran.iter().find(|r| r.call_id == call.call_id)) {
            (_, Some(result)) => {
                announce(result);
                Arc::clone(result)
            }
            (CallState::Finished { result }, None) => {
                // A call that waited on a request was settled (cancelled, revoked) while the
                // turn was parked: its result is new. One that never waited had its result
                // announced by the step itself.
                let result = Arc::new(result.clone());
                if step.gated(&call.call_id) {
                    announce(&result);
                }
                result
            }
            (CallState::Waiting { .. }, None) => Arc::new(CallResult::failed(
                &call.call_id,
                &call.tool,
                ToolError::with_code(
                    ErrorCode::Cancelled,
                    format!(
                        "`{}` did not run: the process stopped before its approval was requested; call it again if it is still needed",
                        call.tool
                    ),
                ),
            )),
            _ => Arc::new(CallResult::failed(
                &call.call_id,
                &call.tool,
                ToolError::with_code(
                    ErrorCode::ResultUnknown,
                    format!(
                        "the process running `{}` stopped before it recorded a result; whether it took effect is unknown, so check before retrying",
                        call.tool
                    ),
                ),
            )),
        };
        results.push(result);
    }
    results
}

/// A resumed step whose workflow bodies asked again: record what ran, park on the new
/// questions (or timers).
async fn park_again(
    engine: &Engine,
    session: &SessionRecord,
    mut turn: TurnRecord,
    version: u64,
    lease: Option<&Lease>,
    ran: Vec<(CallResult, bool)>,
    parked: Vec<Parked>,
) -> Result<StepOutcome, RuntimeError> {
    let mut results = Vec::with_capacity(ran.len());
    for (result, invoked) in ran {
        turn.note_taint(&result.tool, invoked);
        results.push(Arc::new(result));
    }
    let Some(asked) = turn.park(&results, parked) else {
        return Err(RuntimeError::Store(StoreError::Corrupt {
            id: turn.id.clone(),
            error: "a resumed step has no record".into(),
        }));
    };
    engine
        .store()
        .write_turn(&turn, Some(version), keeping(lease))
        .await?;
    for result in &results {
        engine.emit(Event::ActionResult {
            session_id: session.id.clone(),
            turn_id: turn.id.clone(),
            result: Arc::clone(result),
        });
    }
    for request in &asked {
        engine.emit(Event::InputRequested {
            request: request.clone(),
        });
    }
    engine.emit(Event::TurnWaiting {
        session_id: session.id.clone(),
        turn_id: turn.id.clone(),
        on: if asked.is_empty() { "timer" } else { "input" }.into(),
        requests: asked.iter().map(|r| r.request_id.clone()).collect(),
    });
    Ok(StepOutcome::Waiting {
        results,
        requests: asked,
        notices: Vec::new(),
    })
}

/// A claimed call of a resumed step, and what it runs under.
struct Again<'a> {
    session: &'a SessionRecord,
    turn: &'a TurnRecord,
    /// The session as the calls' context sees it, built once for the step.
    info: &'a Arc<SessionInfo>,
    call: &'a PendingCall,
    /// The approval keys the session remembers for the turn's requester.
    approved: &'a BTreeSet<String>,
    token: &'a CancellationToken,
    /// The resumed step's steering token.
    steer: Option<&'a CancellationToken>,
    lease: Option<&'a Lease>,
    model: Option<Arc<dyn ModelBackend>>,
}

/// Before an approved call runs: validate its input again and re-run a custom request policy;
/// a `denied` now wins over the approval. Returns the execution and whether an untrusted tool
/// ran.
async fn run_approved(
    engine: &Arc<Engine>,
    again: Again<'_>,
    approved_by: Option<Approver>,
) -> (Executed, bool) {
    let Again {
        session,
        turn,
        info,
        call,
        approved,
        token,
        steer,
        lease,
        model,
    } = again;
    let refused = |error: ToolError| {
        let result = CallResult::failed(&call.call_id, &call.tool, error);
        (Executed::Done(result), false)
    };
    let registry = engine.registry();
    let Some(tool) = find_tool(&registry, &call.tool) else {
        // A remote tool whose connection is down says so; others are gone.
        return refused(match registry.resolve(&call.tool, turn.caller) {
            Err(error) if error.code() == ErrorCode::Unavailable => error,
            _ => ToolError::with_code(
                ErrorCode::UnknownTool,
                format!("tool `{}` is no longer registered", call.tool),
            ),
        });
    };
    // The server changed the tool after this call was approved (or again after its change
    // was approved): what was approved is not what would run.
    if let Some(change) = crate::remote::definition_change(&tool) {
        return refused(ToolError::with_code(
            ErrorCode::Denied,
            format!(
                "`{}` did not run: the server of connection `{}` changed its {} after this call was approved; call it again to ask for approval of the new definition",
                call.tool,
                change.connection,
                change.changed_parts().join(", ")
            ),
        ));
    }
    let mut input = call.input.clone();
    if let Err(unsealable) = engine.options().sealing.open(
        &tool.sensitivity().input,
        crate::sealing::SealScope {
            tool: tool.name(),
            session: &session.id,
        },
        &mut input,
    ) {
        return refused(ToolError::with_code(
            ErrorCode::Unavailable,
            unsealable.message(&call.tool),
        ));
    }
    let input = match tool.validate(input) {
        Ok(input) => input,
        Err(error) => return refused(error.into_tool_error()),
    };
    if let Some(RequestPolicy::Custom(policy)) = tool.approval().map(|a| a.request) {
        let info = session_info(session, &turn.id, turn.current.as_ref(), turn.caller);
        let signal = TokenSignal(token.clone());
        let policy_call = PolicyCall {
            info: &info,
            tool: &tool,
            input: &input,
            call_id: &call.call_id,
            approved,
            cancel: &signal,
        };
        if let ApprovalDecision::Denied(reason) = custom_decision(&policy_call, policy).await {
            return refused(ToolError::with_code(
                ErrorCode::Denied,
                format!(
                    "`{}` was approved, then denied by its policy: {}",
                    call.tool,
                    reason.unwrap_or_else(|| "no reason given".into())
                ),
            ));
        }
    }
    if turn.caller.is_model() && tool.effect() != Effect::Read {
        tracing::debug!(tool = tool.name(), "running an approved call");
    }
    let run = Execution {
        session,
        turn,
        info: Arc::clone(info),
        tool: &tool,
        call_id: Arc::from(call.call_id.as_str()),
        input,
        approved_by,
        token,
        steer,
        lease,
        mode: RunMode::Normal,
        model,
    };
    let result = run_call(engine, run).await;
    (result, tool.is_untrusted())
}
