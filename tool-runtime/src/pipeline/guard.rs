//! Guardrails around a call: input guardrails after its approval was decided (they can only
//! make the decision stricter), output guardrails after it succeeded and before the model sees
//! its result. The runtime's guardrails run first, in the order they were added, then the
//! tool's own; the first that does not allow (or pass) decides. A guardrail that panics fails
//! closed: an input guardrail's call asks a person, an output guardrail's output is redacted.
//! Calls from the user interface are the user's own actions and are not checked, as they need
//! no approval. Without guardrails nothing here allocates.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    ApprovalDecision, Caller, ErrorCode, GuardrailStage, InputCheck, InputVerdict, ModelOutput,
    OutputCheck, OutputVerdict, Tool, ToolError,
};

use super::decide::Decided;
use super::prepared::Prepared;
use super::scope::{StepScope, TokenSignal};
use crate::engine::Engine;
use crate::event::{Event, GuardrailAction};
use crate::exec::Execution;
use crate::exec::context::session_info;
use crate::record::{CallResult, SessionRecord, TurnRecord};

/// A guardrail that did not allow a call or pass its output: its name and what it decided.
struct Tripped<V> {
    guardrail: String,
    verdict: V,
}

/// What an output guardrail that did not pass decided.
enum OutputTrip {
    Redact {
        reason: String,
        replacement: ModelOutput,
    },
    Stop(String),
}

/// Runs the guardrail `make` starts; `None` when it panicked (starting or running).
async fn guarded<'a, T>(make: impl FnOnce() -> BoxFuture<'a, T>) -> Option<T> {
    let future = std::panic::catch_unwind(AssertUnwindSafe(make)).ok()?;
    AssertUnwindSafe(future).catch_unwind().await.ok()
}

/// Runs the input guardrails of `tool` (the runtime's, then its own) on the call `call_id`
/// with `input` and makes `decided` stricter by what the first that does not allow says.
/// Returns the note the approval prompt gets when a guardrail asks a person.
pub(super) async fn input(
    engine: &Engine,
    scope: &StepScope,
    tool: &Tool,
    input: &Value,
    call_id: &str,
    decided: &mut Decided,
) -> Option<String> {
    let own = tool.guardrails().input;
    let runtime = &engine.hooks().input;
    if (own.is_none() && runtime.is_empty()) || scope.turn.caller == Caller::User {
        return None;
    }
    let info = scope.info();
    let check = InputCheck::new(
        &info,
        scope.turn.caller,
        tool.name(),
        input,
        call_id,
        tool.is_untrusted(),
        &scope.cancel,
    );
    let mut tripped = None;
    for (name, guardrail) in runtime {
        let verdict = guarded(|| guardrail.check(&check)).await;
        if let Some(found) = input_trip(name, verdict) {
            tripped = Some(found);
            break;
        }
    }
    if tripped.is_none()
        && let Some((name, guardrail)) = own
    {
        tripped = input_trip(name, guarded(|| guardrail(&check)).await);
    }
    let Tripped {
        guardrail,
        verdict: (action, reason),
    } = tripped?;
    engine.emit(Event::GuardrailTripped {
        session_id: scope.session.id.clone(),
        turn_id: scope.turn.id.clone(),
        call_id: call_id.to_owned(),
        tool: tool.name().to_owned(),
        guardrail: guardrail.clone(),
        stage: GuardrailStage::Input,
        action,
        reason: reason.clone(),
    });
    let decision = std::mem::replace(&mut decided.decision, ApprovalDecision::NotApplicable);
    if action == GuardrailAction::Refuse {
        decided.decision = decision.strictest(ApprovalDecision::denied(format!(
            "guardrail `{guardrail}` refused it: {reason}"
        )));
        return None;
    }
    decided.decision = decision.strictest(ApprovalDecision::UserApproval);
    let note = format!("guardrail `{guardrail}`: {reason}");
    decided.reasons.insert(0, note.clone());
    Some(note)
}

/// The trip of input guardrail `name` that answered `verdict` (`None`: it panicked), if it
/// did not allow.
fn input_trip(
    name: &str,
    verdict: Option<InputVerdict>,
) -> Option<Tripped<(GuardrailAction, String)>> {
    let verdict = match verdict {
        Some(InputVerdict::Allow) => return None,
        Some(InputVerdict::Ask(reason)) => (GuardrailAction::Ask, reason),
        Some(InputVerdict::Refuse(reason)) => (GuardrailAction::Refuse, reason),
        None => (
            GuardrailAction::Ask,
            "the guardrail failed on this call (it panicked), so a person must decide; this is a bug in the guardrail".to_owned(),
        ),
    };
    Some(Tripped {
        guardrail: name.to_owned(),
        verdict,
    })
}

/// `prepared` with the guardrail's note added to its approval prompt, when a guardrail asked
/// a person: whoever approves must know why they are asked.
pub(super) fn explained(mut prepared: Prepared, note: Option<String>) -> Prepared {
    if let (Prepared::Ask { request, .. }, Some(note)) = (&mut prepared, note) {
        request.prompt = format!("{} (asked by {note})", request.prompt);
    }
    prepared
}

/// What the output guardrails of one call need, taken before the call runs; `None` when no
/// guardrail would check it (then nothing is copied).
pub(crate) struct OutputGuard<'a> {
    session: &'a SessionRecord,
    turn: &'a TurnRecord,
    tool: &'a Tool,
    call_id: Arc<str>,
    input: Value,
    token: &'a CancellationToken,
}

impl<'a> OutputGuard<'a> {
    /// The guard of `run`, if some output guardrail applies to it.
    pub(crate) fn of(engine: &Engine, run: &Execution<'a>) -> Option<OutputGuard<'a>> {
        let applies = (run.tool.guardrails().output.is_some() || !engine.hooks().output.is_empty())
            && run.turn.caller != Caller::User;
        applies.then(|| OutputGuard {
            session: run.session,
            turn: run.turn,
            tool: run.tool,
            call_id: Arc::clone(&run.call_id),
            input: run.input.clone(),
            token: run.token,
        })
    }

    /// `result` as the model may see it: checked when it succeeded, redacted or turned into
    /// a stop by the first guardrail that does not pass.
    pub(crate) async fn check(self, engine: &Engine, result: CallResult) -> CallResult {
        if result.is_error {
            return result;
        }
        let turn = self.turn;
        let info = session_info(self.session, &turn.id, turn.current.as_ref(), turn.caller);
        let cancel = TokenSignal(self.token.clone());
        let call = InputCheck::new(
            &info,
            turn.caller,
            self.tool.name(),
            &self.input,
            &self.call_id,
            self.tool.is_untrusted(),
            &cancel,
        );
        let model = result.model();
        let check = OutputCheck::new(call, &result.output, &model);
        let mut tripped = None;
        for (name, guardrail) in &engine.hooks().output {
            if let Some(found) = output_trip(name, guarded(|| guardrail.check(&check)).await) {
                tripped = Some(found);
                break;
            }
        }
        if tripped.is_none()
            && let Some((name, guardrail)) = self.tool.guardrails().output
        {
            tripped = output_trip(name, guarded(|| guardrail(&check)).await);
        }
        match tripped {
            Some(tripped) => self.apply(engine, result, tripped),
            None => result,
        }
    }

    /// `result` after `tripped`: redacted, or the stop of the turn (whose other calls are
    /// cancelled now).
    fn apply(
        &self,
        engine: &Engine,
        mut result: CallResult,
        tripped: Tripped<OutputTrip>,
    ) -> CallResult {
        let Tripped { guardrail, verdict } = tripped;
        let (action, reason) = match verdict {
            OutputTrip::Redact {
                reason,
                replacement,
            } => {
                // The raw output goes nowhere: events, clients and the stored turn get what
                // the model gets.
                result.output = match &replacement {
                    ModelOutput::Text(text) => Value::String(text.clone()),
                    ModelOutput::Json(value) => value.clone(),
                    other => serde_json::to_value(other).unwrap_or(Value::Null),
                };
                result.set_model(replacement);
                (GuardrailAction::Redact, reason)
            }
            OutputTrip::Stop(reason) => {
                let name = self.tool.name();
                result = CallResult::failed(
                    &self.call_id,
                    name,
                    ToolError::with_code(
                        ErrorCode::Stopped,
                        format!(
                            "guardrail `{guardrail}` stopped the turn after `{name}` returned: {reason}; its output was withheld"
                        ),
                    ),
                );
                // The turn ends: the step's other calls need not finish.
                self.token.cancel();
                (GuardrailAction::Stop, reason)
            }
        };
        engine.emit(Event::GuardrailTripped {
            session_id: self.session.id.clone(),
            turn_id: self.turn.id.clone(),
            call_id: self.call_id.to_string(),
            tool: self.tool.name().to_owned(),
            guardrail,
            stage: GuardrailStage::Output,
            action,
            reason,
        });
        result
    }
}

/// The trip of output guardrail `name` that answered `verdict` (`None`: it panicked), if it
/// did not pass.
fn output_trip(name: &str, verdict: Option<OutputVerdict>) -> Option<Tripped<OutputTrip>> {
    let verdict = verdict.unwrap_or_else(|| {
        OutputVerdict::redact(
            "the guardrail failed on this output (it panicked), so it is withheld; this is a bug in the guardrail",
        )
    });
    let verdict = match verdict {
        OutputVerdict::Pass => return None,
        OutputVerdict::Redact {
            reason,
            replacement,
        } => OutputTrip::Redact {
            reason,
            replacement,
        },
        OutputVerdict::Stop(reason) => OutputTrip::Stop(reason),
    };
    Some(Tripped {
        guardrail: name.to_owned(),
        verdict,
    })
}

/// Whether an output guardrail stopped the turn in a step with `results`.
pub(crate) fn stopped(results: &[Arc<CallResult>]) -> bool {
    results.iter().any(|r| {
        r.error
            .as_ref()
            .is_some_and(|e| e.code() == ErrorCode::Stopped)
    })
}
