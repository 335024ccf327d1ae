//! Transitions of a turn and of the calls of its pending step.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use toolwright_core::{Caller, ErrorCode, Principal, ToolError};

use super::{Parked, Suspension};
use crate::record::{
    Approver, CallResult, CallState, ClosedStep, Decision, InputRequest, Outcome, PendingCall,
    PendingStep, RequestKind, RequestStatus, StepInput, StepPatch, TurnRecord, TurnStatus,
};
use crate::store::requester_key;

/// A `once` grant: the requester (a [`requester_key`]) and the approval key.
pub(crate) type Grant = (String, String);

/// What cancelling a turn changed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Cancellation {
    /// The requests revoked (`cancelled`).
    pub(crate) revoked: Vec<String>,
    /// The results of calls that waited on a request: they have had no result event yet.
    pub(crate) closed: Vec<CallResult>,
    /// Workflow bodies parked mid-run, whose cleanup runs: call id, tool, input.
    pub(crate) bodies: Vec<(String, String, Value)>,
}

/// An answer that settles a request of a parked step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settlement {
    /// Approved or cancelled.
    pub(crate) decision: Decision,
    /// Who answered.
    pub(crate) responder: Option<Principal>,
    /// The note sent with the answer.
    pub(crate) note: Option<String>,
    /// For a question: the answer (an option or the person's words).
    pub(crate) answer: Option<String>,
}

impl TurnRecord {
    /// A new turn `id` of session `session_id`, accepting steps.
    pub(crate) fn begin(
        id: String,
        session_id: String,
        current: Option<Principal>,
        caller: Caller,
        structured_output: bool,
    ) -> TurnRecord {
        TurnRecord {
            id,
            session_id,
            current,
            caller,
            structured_output,
            tainted_by: None,
            status: TurnStatus::Active,
            steps: 0,
            pending: None,
            last_step: None,
        }
    }

    /// A step none of whose calls ran (their ids repeat): it is counted, nothing else changes.
    pub(crate) fn refuse_step(&mut self) {
        self.steps += 1;
    }

    /// Records the step's calls before any of them runs: the turn is `running` (a second
    /// handle cannot step it meanwhile, and after a crash recovery finds what ran).
    /// `input` is where the model input that made the calls is.
    pub(crate) fn begin_step(
        &mut self,
        calls: Vec<PendingCall>,
        requests: Vec<InputRequest>,
        input: Option<StepInput>,
    ) {
        self.pending = Some(PendingStep {
            index: self.steps,
            calls,
            requests,
            input,
        });
        self.status = TurnStatus::Running;
    }

    /// Records the results of the calls that ran and the calls that parked, and parks the turn
    /// on its requests and timers. Returns the requests the parked calls opened; `None` when
    /// the turn has no pending step (a corrupt record).
    pub(crate) fn park(
        &mut self,
        results: &[Arc<CallResult>],
        parked: Vec<Parked>,
    ) -> Option<Vec<InputRequest>> {
        let step = self.pending.as_mut()?;
        for result in results {
            if let Some(call) = step.call_mut(&result.call_id) {
                call.state = CallState::Finished {
                    result: CallResult::clone(result),
                };
            }
        }
        let mut opened = Vec::new();
        for parked in parked {
            if let Some(call) = step.call_mut(&parked.call_id) {
                call.state = parked.state;
            }
            if let Some(request) = parked.request {
                step.requests.push(request.clone());
                opened.push(request);
            }
        }
        self.status = TurnStatus::Waiting;
        Some(opened)
    }

    /// Parks an active turn on `request`, a session-limit request, as a step without calls:
    /// answering it resumes the turn like any parked step. Only an active turn (no step
    /// running or parked) can park so; otherwise its status is returned.
    pub(crate) fn park_on_limit(&mut self, request: InputRequest) -> Result<(), TurnStatus> {
        if self.status != TurnStatus::Active || self.pending.is_some() {
            return Err(self.status);
        }
        self.pending = Some(PendingStep {
            index: self.steps,
            calls: Vec::new(),
            requests: vec![request],
            input: None,
        });
        self.status = TurnStatus::Waiting;
        Ok(())
    }

    /// Closes the pending step with one result per call: the turn takes steps again, or ends
    /// when `ends` (a cancelled turn stays cancelled). The step's requests are kept with its
    /// results, as they ended.
    pub(crate) fn close_step(&mut self, results: &[Arc<CallResult>], ends: bool) {
        let requests = self
            .pending
            .take()
            .map(|step| step.requests)
            .unwrap_or_default();
        self.last_step = Some(ClosedStep {
            index: self.steps,
            results: results.to_vec(),
            requests,
        });
        self.steps += 1;
        self.status = if self.status == TurnStatus::Cancelled {
            TurnStatus::Cancelled
        } else if ends {
            TurnStatus::Completed
        } else {
            TurnStatus::Active
        };
    }

    /// After a write of a running step lost to a cancel: closes the cancelled turn's step (its
    /// calls' results went to their caller; the turn takes no more steps), so none of its
    /// calls stays `running`. Returns whether there was a step to close.
    pub(crate) fn close_cancelled_step(&mut self) -> bool {
        if self.pending.is_none() {
            return false;
        }
        self.pending = None;
        self.steps += 1;
        true
    }

    /// An output guardrail stopped the turn while its step ran: the step's pending requests,
    /// never announced, are revoked (`cancelled`), so the closed step shows none pending.
    pub(crate) fn revoke_unannounced(&mut self) {
        if let Some(step) = self.pending.as_mut() {
            for request in step.requests.iter_mut().filter(|r| r.is_pending()) {
                request.status = RequestStatus::Revoked {
                    outcome: Outcome::Cancelled,
                };
            }
        }
    }

    /// The host ends the turn. Only an active turn can end so; otherwise its status is returned.
    pub(crate) fn complete(&mut self) -> Result<(), TurnStatus> {
        if self.status != TurnStatus::Active {
            return Err(self.status);
        }
        self.status = TurnStatus::Completed;
        Ok(())
    }

    /// Marks every ready call of the parked step as running and the turn as running, returning
    /// the claimed calls with their approvers; nothing while a request is pending or a call
    /// sleeps. Written with the turn's version, so only one process claims a step.
    pub(crate) fn claim_step(&mut self) -> Vec<(String, Option<Approver>)> {
        let Some(step) = self.pending.as_mut() else {
            return Vec::new();
        };
        if step.requests.iter().any(InputRequest::is_pending) || step.is_sleeping() {
            return Vec::new();
        }
        let mut claimed = Vec::new();
        for call in &mut step.calls {
            if let CallState::Ready { approved_by } = &call.state {
                claimed.push((call.call_id.clone(), approved_by.clone()));
                call.state = CallState::Running;
            }
        }
        self.status = TurnStatus::Running;
        claimed
    }

    /// Sleeping calls of a waiting turn whose timer is due at `now_ms` become ready (they run
    /// again, replaying their journals). Returns whether any did.
    pub(crate) fn wake_sleepers(&mut self, now_ms: u64) -> bool {
        if self.status != TurnStatus::Waiting {
            return false;
        }
        let Some(step) = self.pending.as_mut() else {
            return false;
        };
        let mut due = false;
        for call in &mut step.calls {
            if let CallState::Sleeping { until_ms } = call.state
                && until_ms <= now_ms
            {
                call.state = CallState::Ready { approved_by: None };
                due = true;
            }
        }
        due
    }

    /// An untrusted tool whose body ran taints the rest of the turn, whatever it returned: an
    /// error message may quote third-party text too. A call the pipeline refused before it ran
    /// (unknown, invalid, denied) read nothing and taints nothing.
    pub(crate) fn note_taint(&mut self, tool: &str, untrusted_ran: bool) {
        if untrusted_ran && self.tainted_by.is_none() {
            self.tainted_by = Some(tool.to_owned());
        }
    }

    /// Whether a step with `results` may end the turn: every call may end it and all
    /// succeeded. Subagents must answer their parent, and structured-output turns must
    /// produce it, so theirs never end so.
    pub(crate) fn may_end(&self, results: &[Arc<CallResult>]) -> bool {
        self.caller != Caller::Subagent
            && !self.structured_output
            && !results.is_empty()
            && results.iter().all(|r| !r.is_error && r.ends_turn)
    }

    /// Cancels the turn. A parked step's pending requests are revoked and its unfinished calls
    /// fail as cancelled (approved calls of a cancelled turn do not run); a running step's
    /// calls are running and finish on their own.
    pub(crate) fn cancel(&mut self) -> Cancellation {
        let mut cancellation = Cancellation::default();
        if self.status == TurnStatus::Waiting
            && let Some(step) = self.pending.as_mut()
        {
            cancellation.bodies = step.parked_bodies();
            for request in step.requests.iter_mut().filter(|r| r.is_pending()) {
                request.status = RequestStatus::Revoked {
                    outcome: Outcome::Cancelled,
                };
                cancellation.revoked.push(request.request_id.clone());
            }
            for call in &mut step.calls {
                if !matches!(call.state, CallState::Finished { .. }) {
                    call.state = CallState::Finished {
                        result: cancelled(&call.call_id, &call.tool),
                    };
                }
            }
            cancellation.closed = step
                .calls
                .iter()
                .filter(|call| step.gated(&call.call_id))
                .filter_map(|call| match &call.state {
                    CallState::Finished { result } => Some(result.clone()),
                    _ => None,
                })
                .collect();
        }
        self.status = TurnStatus::Cancelled;
        cancellation
    }
}

impl PendingStep {
    /// Whether the step parked on a session-limit request that was not approved (cancelled,
    /// or revoked by a message or a cancel): then the turn stops when the step closes.
    pub(crate) fn stops_at_limit(&self) -> bool {
        self.requests.iter().any(|r| {
            r.kind == RequestKind::SessionLimit
                && !matches!(
                    r.status,
                    RequestStatus::Settled {
                        decision: Decision::Approved,
                        ..
                    }
                )
        })
    }

    /// Whether a workflow call of the step sleeps on a durable timer (it holds the step until
    /// the timer is due).
    pub(crate) fn is_sleeping(&self) -> bool {
        self.calls
            .iter()
            .any(|c| matches!(c.state, CallState::Sleeping { .. }))
    }

    /// Whether call `call_id` waited on a request of the step.
    pub(crate) fn gated(&self, call_id: &str) -> bool {
        self.requests
            .iter()
            .any(|r| r.call_id.as_deref() == Some(call_id))
    }

    /// The ids of the requests still pending.
    pub(crate) fn pending_requests(&self) -> Vec<String> {
        self.requests
            .iter()
            .filter(|r| r.is_pending())
            .map(|r| r.request_id.clone())
            .collect()
    }

    /// The `once` grants whose last request is among `settled` (ids of requests just settled
    /// or revoked): grants that a request of the step approved and no request waits on any
    /// more. A grant is the requester ([`requester_key`] of the principal the call ran for) and
    /// the approval key: one person's approval never records a grant for another's calls. Each
    /// grant is thus written once, when its last request settles, and finding them costs the
    /// settled requests, not the step's others again at every answer.
    pub(crate) fn grants_completed_by(&self, settled: &[String]) -> Vec<Grant> {
        let grant = |r: &InputRequest| {
            r.approval_key
                .as_ref()
                .map(|key| (requester_key(r.requester.as_ref()), key.clone()))
        };
        let mut candidates: BTreeSet<Grant> = BTreeSet::new();
        for id in settled {
            if let Some(g) = self.request(id).and_then(grant) {
                candidates.insert(g);
            }
        }
        if candidates.is_empty() {
            return Vec::new();
        }
        let (mut approved, mut pending) = (BTreeSet::new(), BTreeSet::new());
        for request in self.requests.iter().filter(|r| r.approval_key.is_some()) {
            match &request.status {
                RequestStatus::Pending => pending.extend(grant(request)),
                RequestStatus::Settled {
                    decision: Decision::Approved,
                    ..
                } => approved.extend(grant(request)),
                _ => {}
            }
        }
        candidates
            .into_iter()
            .filter(|g| approved.contains(g) && !pending.contains(g))
            .collect()
    }

    /// The request `request_id` of the step.
    fn request(&self, request_id: &str) -> Option<&InputRequest> {
        self.requests.iter().find(|r| r.request_id == request_id)
    }

    /// The note an approver sent with the approval of call `call_id`, if any.
    pub(crate) fn approver_note(&self, call_id: &str) -> Option<&str> {
        self.requests.iter().find_map(|r| match &r.status {
            // A question's answer is the call's to use, not a note for the model.
            RequestStatus::Settled {
                decision: Decision::Approved,
                note: Some(note),
                ..
            } if r.call_id.as_deref() == Some(call_id) && r.kind != RequestKind::Question => {
                Some(note.as_str())
            }
            _ => None,
        })
    }

    /// Settles the pending request `request_id` with `settlement` and moves the call it gates:
    /// a workflow body's question makes the call ready to replay up to the answer; an
    /// `ask_question` call finishes with the answer; an approval makes the call ready (with
    /// its approver), a decline finishes it as denied. Returns `false`, changing nothing, when
    /// the step has no such pending request.
    pub(crate) fn settle(&mut self, request_id: &str, settlement: &Settlement) -> bool {
        let Some(request) = self
            .requests
            .iter_mut()
            .find(|r| r.request_id == request_id && r.is_pending())
        else {
            return false;
        };
        request.status = RequestStatus::Settled {
            decision: settlement.decision,
            responder: settlement.responder.clone(),
            note: settlement
                .answer
                .clone()
                .or_else(|| settlement.note.clone()),
        };
        let gated = request.call_id.clone();
        let workflow_ask = request.journal_position.is_some();
        let question = request.kind == RequestKind::Question;
        for call in &mut self.calls {
            if Some(&call.call_id) != gated.as_ref() {
                continue;
            }
            call.state = if workflow_ask {
                // Runs again when the step resumes, replaying to the recorded answer.
                CallState::Ready { approved_by: None }
            } else if question {
                CallState::Finished {
                    result: answered(call, settlement.answer.as_deref()),
                }
            } else {
                match settlement.decision {
                    Decision::Approved => CallState::Ready {
                        approved_by: Some(Approver {
                            principal: settlement.responder.clone(),
                        }),
                    },
                    Decision::Cancelled => CallState::Finished {
                        result: declined(call, settlement.note.as_deref()),
                    },
                }
            };
        }
        true
    }

    /// What settling request `request_id` changed in the step (see [`PendingStep::settle`]):
    /// the request and the calls it gates, as they are now. A store keeps it beside the turn
    /// instead of the whole step ([`crate::Store::settle_request`]).
    pub(crate) fn patch(&self, request_id: &str) -> Option<StepPatch> {
        let request = self.request(request_id)?;
        let calls = self
            .calls
            .iter()
            .filter(|c| request.call_id.as_deref() == Some(c.call_id.as_str()))
            .cloned()
            .collect();
        Some(StepPatch {
            step: self.index,
            request: request.clone(),
            calls,
        })
    }

    /// Revokes every pending request with `outcome` (`ignored`: a message that answers none of
    /// them, `text`; `cancelled`), failing the calls that waited on them. Calls already
    /// approved stay ready. Returns the revoked requests' ids.
    pub(crate) fn revoke(&mut self, outcome: Outcome, text: &str) -> Vec<String> {
        let mut revoked = Vec::new();
        for request in self.requests.iter_mut().filter(|r| r.is_pending()) {
            request.status = RequestStatus::Revoked { outcome };
            revoked.push(request.request_id.clone());
        }
        for call in &mut self.calls {
            if let CallState::Waiting { .. } = call.state {
                let (code, message) = match outcome {
                    Outcome::Ignored => (
                        ErrorCode::Denied,
                        format!(
                            "`{}` was not approved: the user sent a new message instead ({:?})",
                            call.tool,
                            toolwright_core::error::quoted_prefix(text)
                        ),
                    ),
                    _ => (
                        ErrorCode::Cancelled,
                        format!("`{}` was cancelled with its turn", call.tool),
                    ),
                };
                call.state = CallState::Finished {
                    result: CallResult::failed(
                        &call.call_id,
                        &call.tool,
                        ToolError::with_code(code, message),
                    ),
                };
            }
        }
        revoked
    }

    /// Workflow bodies parked mid-run (on a question, a timer, or answered and waiting for the
    /// step to resume): call id, tool and input of each.
    fn parked_bodies(&self) -> Vec<(String, String, Value)> {
        self.calls
            .iter()
            .filter(|call| match &call.state {
                CallState::Sleeping { .. } => true,
                CallState::Waiting { .. } | CallState::Ready { .. } => {
                    self.requests.iter().any(|r| {
                        r.journal_position.is_some()
                            && r.call_id.as_deref() == Some(call.call_id.as_str())
                    })
                }
                _ => false,
            })
            .map(|call| (call.call_id.clone(), call.tool.clone(), call.input.clone()))
            .collect()
    }

    fn call_mut(&mut self, call_id: &str) -> Option<&mut PendingCall> {
        self.calls.iter_mut().find(|c| c.call_id == call_id)
    }
}

impl PendingCall {
    /// A call that already has its result when the step is recorded (refused, answered by a
    /// meta-tool, run by the provider).
    pub(crate) fn finished(result: CallResult) -> PendingCall {
        PendingCall {
            call_id: result.call_id.clone(),
            tool: result.tool.clone(),
            input: Value::Null,
            state: CallState::Finished { result },
        }
    }

    /// A call that runs now.
    pub(crate) fn running(call_id: &str, tool: &str, input: Value) -> PendingCall {
        PendingCall {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            input,
            state: CallState::Running,
        }
    }

    /// A call that waits on request `request_id`.
    pub(crate) fn waiting(
        call_id: &str,
        tool: &str,
        input: Value,
        request_id: &str,
    ) -> PendingCall {
        PendingCall {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            input,
            state: CallState::Waiting {
                request_id: request_id.to_owned(),
            },
        }
    }
}

impl Parked {
    /// Where workflow call `call_id` of `tool` in `turn` parks when its body stopped with
    /// `suspension`: on a question (an input request) or a timer.
    pub(crate) fn new(
        turn: &TurnRecord,
        call_id: &str,
        tool: &str,
        suspension: Suspension,
    ) -> Parked {
        let (state, request) = match suspension {
            Suspension::Ask {
                position,
                request,
                deadline_ms,
            } => {
                let request = InputRequest::workflow_ask(
                    turn,
                    call_id,
                    tool,
                    position,
                    &request,
                    deadline_ms,
                );
                let state = CallState::Waiting {
                    request_id: request.request_id.clone(),
                };
                (state, Some(request))
            }
            Suspension::Hook {
                position,
                hook,
                deadline_ms,
            } => {
                let request =
                    InputRequest::hook_wait(turn, call_id, tool, position, &hook, deadline_ms);
                let state = CallState::Waiting {
                    request_id: request.request_id.clone(),
                };
                (state, Some(request))
            }
            Suspension::Sleep { until_ms } => (CallState::Sleeping { until_ms }, None),
            // Only a task's body waits for calls; a turn's call never reports it.
            Suspension::Receive { .. } => (CallState::Running, None),
        };
        Parked {
            call_id: call_id.to_owned(),
            state,
            request,
        }
    }
}

/// The result of a call cancelled with its turn.
fn cancelled(call_id: &str, tool: &str) -> CallResult {
    CallResult::failed(
        call_id,
        tool,
        ToolError::with_code(
            ErrorCode::Cancelled,
            format!("`{tool}` was cancelled with its turn"),
        ),
    )
}

/// The result of an `ask_question` call: the answer, or `cancelled` without one.
fn answered(call: &PendingCall, answer: Option<&str>) -> CallResult {
    let output = match answer {
        Some(answer) => json!({ "status": "answered", "answer": answer }),
        None => json!({ "status": "cancelled" }),
    };
    CallResult {
        model_usage: None,
        call_id: call.call_id.clone(),
        tool: call.tool.clone(),
        is_error: false,
        projection: None,
        output,
        error: None,
        ends_turn: false,
        label: None,
    }
}

/// The result of a call whose approval the user declined, with their note.
fn declined(call: &PendingCall, note: Option<&str>) -> CallResult {
    let message = match note {
        Some(note) => format!("the user declined `{}`; their note: {note}", call.tool),
        None => format!(
            "the user declined `{}`; do not retry it unless they ask",
            call.tool
        ),
    };
    CallResult::failed(
        &call.call_id,
        &call.tool,
        ToolError::with_code(ErrorCode::Denied, message),
    )
}

#[cfg(test)]
mod tests;
