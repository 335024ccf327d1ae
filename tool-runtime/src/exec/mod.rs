//! Running one body of a turn's call: its context, the journal of a durable or workflow body,
//! the timeout, cancellation, a workflow body parking, and the result.

pub(crate) mod context;
pub(crate) mod result;
pub(crate) mod slot;

use std::sync::Arc;

use futures_util::future::Either;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_core::{ErrorCode, ModelBackend, SessionInfo, Tool, ToolError};
use tracing::Instrument;

use crate::attachments::Origin;
use crate::engine::Engine;
use crate::host::{CallToken, Journal};
use crate::record::{Approver, CallResult, SessionRecord, TurnRecord};
use crate::store::Lease;
use crate::transition::Suspension;
use context::Body;

/// One execution of a turn's call.
pub(crate) struct Execution<'a> {
    pub(crate) session: &'a SessionRecord,
    pub(crate) turn: &'a TurnRecord,
    /// The session as the call's context sees it ([`context::session_info`] of `session` and
    /// `turn`), built once for a step's calls.
    pub(crate) info: Arc<SessionInfo>,
    pub(crate) tool: &'a Arc<Tool>,
    /// Shared by the call's host and context (one copy of the id a call).
    pub(crate) call_id: Arc<str>,
    /// The validated input.
    pub(crate) input: Value,
    /// Who approved the call, when a person did.
    pub(crate) approved_by: Option<Approver>,
    /// The turn's token: the call is cancelled with the turn.
    pub(crate) token: &'a CancellationToken,
    /// The step's steering token (a child of `token`), when a new message from the user may
    /// interrupt the call: the call's token is then its child.
    pub(crate) steer: Option<&'a CancellationToken>,
    /// The lease of the step's claim, under which the journal records.
    pub(crate) lease: Option<&'a Lease>,
    pub(crate) mode: RunMode,
    /// The model the step brought for its calls; else the runtime's.
    pub(crate) model: Option<Arc<dyn ModelBackend>>,
}

/// Why a body runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunMode {
    /// To produce the call's result.
    Normal,
    /// A cancelled parked body runs once more with its token fired, only for its cleanup
    /// (within [`crate::Options::task_cleanup`]).
    CleanupOnly,
}

/// How one execution ended.
pub(crate) enum Executed {
    /// With a result.
    Done(CallResult),
    /// A workflow body waits for a person or a timer; the call parks.
    Suspended(Suspension),
}

/// Executes one call: context, timeout, cancellation, panic capture (in `Tool::invoke`),
/// output check and projection.
pub(crate) fn execute<'a>(
    engine: &'a Engine,
    run: Execution<'a>,
) -> impl Future<Output = Executed> + Send + 'a {
    // Taken apart before the future is made: an `async fn` keeps its arguments for its
    // whole life, beside the parts taken from them (every call's future was larger).
    let Execution {
        session,
        turn,
        info,
        tool,
        call_id: shared_id,
        input,
        approved_by,
        token,
        steer,
        lease,
        mode,
        model,
    } = run;
    async move {
        let call_id: &str = &shared_id;
        // Cached reads of the toolset are stale from the moment a write may start until after
        // it ends, however it ends (a read that ran meanwhile may have seen half of it).
        let _writing = engine.cache().writing(tool);
        // Steering fires the step's token, cancelling the turn fires the turn's: either reaches
        // the call.
        let parent = steer.unwrap_or(token);
        // A call whose token fired before it got its place never starts: its body would act
        // for a turn that was cancelled. A free place is taken at once, without registering
        // with the token; the wait for one is boxed, off a plain call's future.
        let permit = match engine.free_call_permit() {
            Some(permit) => Some(permit),
            None => Box::pin(wait_for_place(engine, parent, mode)).await,
        };
        let Some(permit) = permit.filter(|_| mode != RunMode::Normal || !parent.is_cancelled())
        else {
            return Executed::Done(result::result_of(tool, call_id, Err(stopped(tool, token))));
        };
        let slot = slot::Slot::new(engine.call_slots(), permit);
        let call_token = CallToken::child_of(parent);
        if mode == RunMode::CleanupOnly {
            call_token.cancel();
        }
        let limit = time_limit(engine.options(), mode);
        let journal = if tool.kind().is_journaled() {
            match journal(engine, tool, &turn.id, call_id, lease).await {
                Ok(journal) => Some(journal),
                Err(result) => return Executed::Done(result),
            }
        } else {
            None
        };
        let (host, cx) = context::build(
            engine,
            Body {
                tool,
                info,
                call_id: &shared_id,
                caller: turn.caller,
                input: &input,
                approved_by: approved_by.as_ref(),
                token: call_token,
                journal,
                task: None,
                model,
                step_input: turn.pending.as_ref().and_then(|step| step.input.clone()),
            },
        );
        let span = tracing::info_span!("tool_call", tool = tool.name(), call_id);
        // An error may quote the input (a server echoing it, a custom `Deserialize`): its
        // sensitive values are taken out of the message.
        let secrets = tool.sensitivity().input.texts_in(&input);
        // Kept to read what the body's model asks used once it is done.
        let spent = cx.clone();
        // The body holds the call's place; it gives it up, and stops its timeout's clock, while
        // it waits on other calls (`waiting_on_calls`).
        let run = Arc::clone(&slot)
            .hold(tool.invoke(input, cx))
            .instrument(span);
        let outcome = {
            // Pinned out here so the tool is dropped only after its token fired on a timeout:
            // its cleanup (drop guards, tasks watching `ctx.cancelled()`) sees the cancellation.
            let mut run = std::pin::pin!(run);
            // The body first: one that finishes when first polled (most reads) never registers
            // with the turn's token or the host's notification.
            tokio::select! {
                biased;
                result = slot.within(limit, run.as_mut()) => match result {
                    Ok(result) => result,
                    Err(_) => {
                        host.token.cancel();
                        Err(ToolError::with_code(
                            ErrorCode::Timeout,
                            format!("`{}` did not finish within {limit:?} and was cancelled; try a narrower request", tool.name()),
                        ))
                    }
                },
                () = parent.cancelled() => Err(stopped(tool, token)),
                () = host.parked.notified() => {
                    // The body waits for a person: drop it here; it replays from its journal
                    // once the answer is recorded.
                    let suspension = host.suspended.lock().ok().and_then(|mut s| s.take());
                    match suspension {
                        Some(Suspension::Receive { .. }) | None => {}
                        Some(suspension) => return Executed::Suspended(suspension),
                    }
                    Err(ToolError::with_code(ErrorCode::Journal, "the body stopped without saying why"))
                }
            }
        };
        // A body that saw its token fire may return its own error before the runtime notices
        // the token: when steering fired it, the model learns why the call stopped all the same.
        // (A body that finished with a value keeps it.)
        let outcome = match outcome {
            Err(error)
                if steer.is_some_and(CancellationToken::is_cancelled)
                    && !token.is_cancelled()
                    && error.code() != ErrorCode::Interrupted =>
            {
                Err(stopped(tool, token))
            }
            // Only an output guardrail stops the turn: a body's own `STOPPED` is a failure.
            Err(error) if error.code() == ErrorCode::Stopped => Err(ToolError::with_code(
                ErrorCode::ToolFailed,
                error.message().to_owned(),
            )),
            outcome => outcome,
        };
        let outcome = outcome.map_err(|error| error.scrubbed(&secrets));
        let origin = Origin {
            session_id: &session.id,
            turn_id: &turn.id,
            call_id,
        };
        let mut result =
            match result::with_files(engine, origin, result::result_of(tool, call_id, outcome)) {
                Either::Left(result) => result,
                Either::Right(storing) => storing.await,
            };
        result.model_usage = spent.model_usage();
        Executed::Done(result)
    }
}

/// How long a body may run: the call's timeout, or a cleanup run's window within it.
fn time_limit(options: &crate::options::Options, mode: RunMode) -> std::time::Duration {
    match mode {
        RunMode::Normal => options.call_timeout,
        RunMode::CleanupOnly => options.task_cleanup.min(options.call_timeout),
    }
}

/// Waits for the call's place among the runtime's concurrent calls; `None` when its token
/// (`parent`) fires first. Cleanup runs start with their own token fired, their parent's
/// untouched: they wait for their place whatever happens.
async fn wait_for_place(
    engine: &Engine,
    parent: &CancellationToken,
    mode: RunMode,
) -> Option<Option<tokio::sync::OwnedSemaphorePermit>> {
    tokio::select! {
        biased;
        permit = engine.call_permit() => Some(permit),
        () = parent.cancelled(), if mode == RunMode::Normal => None,
    }
}

/// Why a call whose token fired stopped: its turn was cancelled (`turn` fired), or a new
/// message from the user interrupted it (only the step's steering token fired).
fn stopped(tool: &Tool, turn: &CancellationToken) -> ToolError {
    if turn.is_cancelled() {
        return ToolError::with_code(
            ErrorCode::Cancelled,
            format!("`{}` was cancelled with its turn", tool.name()),
        );
    }
    ToolError::with_code(
        ErrorCode::Interrupted,
        format!(
            "`{}` was interrupted by a new message from the user, which follows; it did not \
             finish, and whatever it did before stopping stays done. Read the message before \
             calling it again",
            tool.name()
        ),
    )
}

/// The journal of durable call `call_id` of turn `turn_id`, read from the store; a call that
/// cannot read it fails (it can be retried).
async fn journal(
    engine: &Engine,
    tool: &Tool,
    turn_id: &str,
    call_id: &str,
    lease: Option<&Lease>,
) -> Result<Journal, CallResult> {
    let run_id = crate::ids::durable_run_id(turn_id, call_id);
    match engine.store().journal(&run_id).await {
        Ok(recorded) => Ok(Journal::new(
            run_id,
            Arc::clone(engine.store()),
            lease.cloned(),
            recorded,
        )),
        Err(error) => Err(CallResult::failed(
            call_id,
            tool.name(),
            ToolError::with_code(
                ErrorCode::Journal,
                format!(
                    "the journal of `{}` could not be read: {error}; the call can be retried",
                    tool.name()
                ),
            ),
        )),
    }
}
