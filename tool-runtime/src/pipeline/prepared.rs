//! What the pipeline decided for one call before anything ran.

use std::sync::Arc;

use serde_json::Value;
use toolwright_core::{Effect, Tool, ToolError, ToolKind};

use crate::record::{CallResult, InputRequest, PendingCall};
use crate::sealing::{SealScope, Sealing};

/// What the pipeline decided for one call before anything ran.
pub(crate) enum Prepared {
    /// The call already has its result (an error, a denial, a meta-tool answer), shared as it
    /// will be by its event, the step's outcome and the record (and small: the calls that run
    /// keep a step's `Prepared`s side by side).
    Done(Arc<CallResult>),
    /// A provider-native tool the model provider ran: its result came with the response; and
    /// whether the tool is `untrusted`.
    Provided(Arc<CallResult>, bool),
    /// The call may run.
    Run {
        /// Shared with the call's host and context.
        call_id: Arc<str>,
        tool: Arc<Tool>,
        input: Value,
    },
    /// A task meta-tool (`task_wait`, `task_cancel`), run with the step's calls.
    Meta {
        call_id: String,
        name: &'static str,
        arguments: String,
    },
    /// The call waits for a person.
    Ask {
        call_id: Arc<str>,
        tool: Arc<Tool>,
        input: Value,
        request: Box<InputRequest>,
    },
}

/// What one stage of a call's preparation found: the value the next stage works on, or the
/// call's outcome when it is settled early (refused, routed to a meta-tool, run by the
/// provider), boxed: the early outcome is the rare path.
pub(super) type Stage<T> = Result<T, Box<Prepared>>;

/// A call refused before anything ran.
pub(super) fn refused(call_id: &str, tool: &str, error: ToolError) -> Box<Prepared> {
    Box::new(Prepared::Done(Arc::new(CallResult::failed(
        call_id, tool, error,
    ))))
}

impl Prepared {
    /// The call as the step records it before anything runs, its sensitive input sealed.
    pub(super) fn pending_call(&self, sealing: &Sealing, session: &str) -> PendingCall {
        let sealed = |tool: &Tool, input: &Value| {
            let mut input = input.clone();
            let scope = SealScope {
                tool: tool.name(),
                session,
            };
            sealing.seal(&tool.sensitivity().input, scope, &mut input);
            input
        };
        match self {
            Prepared::Done(result) | Prepared::Provided(result, _) => {
                PendingCall::finished((**result).clone())
            }
            Prepared::Run {
                call_id,
                tool,
                input,
            } => PendingCall::running(call_id, tool.name(), sealed(tool, input)),
            Prepared::Meta { call_id, name, .. } => {
                PendingCall::running(call_id, name, Value::Null)
            }
            Prepared::Ask {
                call_id,
                tool,
                input,
                request,
            } => PendingCall::waiting(
                call_id,
                tool.name(),
                sealed(tool, input),
                &request.request_id,
            ),
        }
    }

    /// Whether the call waits for a person.
    pub(super) fn asks(&self) -> bool {
        matches!(self, Prepared::Ask { .. })
    }

    /// Whether the step must be recorded as running before this call runs: every call that
    /// runs, except a plain `read` call, which a crash may cut and the host run again (the spec
    /// allows re-running reads). A durable or workflow call runs from a journal kept under the
    /// step's claim; a meta-tool may cancel a task. A call that waits for a person is recorded
    /// by the write that parks the step, before its request is announced.
    pub(super) fn needs_record(&self) -> bool {
        match self {
            Prepared::Run { tool, .. } => {
                tool.effect() != Effect::Read || tool.kind() != ToolKind::Plain
            }
            Prepared::Meta { .. } => true,
            Prepared::Done(_) | Prepared::Provided(..) | Prepared::Ask { .. } => false,
        }
    }

    /// Whether something runs for the call in this step (or waits to).
    pub(super) fn runs(&self) -> bool {
        matches!(
            self,
            Prepared::Run { .. } | Prepared::Ask { .. } | Prepared::Meta { .. }
        )
    }
}
