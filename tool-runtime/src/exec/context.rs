//! What a running body talks to: its host (events, state, the sandbox, its journal) and its
//! context. One builder serves a turn's calls and a workflow task's body alike.

use std::sync::Arc;

use serde_json::Value;
use toolwright_core::{
    CallContext, CallHost, Caller, ModelBackend, Principal, SessionInfo, StepNames, Tool,
};

use crate::engine::Engine;
use crate::host::{CallToken, Journal, RuntimeHost, StepMessages, TaskLink};
use crate::record::{Approver, SessionRecord, StepInput};

/// What a call or a task's body sees of its session: the session, the turn that made the call
/// and who acts in it.
pub(crate) fn session_info(
    session: &SessionRecord,
    turn_id: &str,
    current: Option<&Principal>,
    caller: Caller,
) -> SessionInfo {
    SessionInfo {
        id: session.id.clone(),
        turn_id: turn_id.to_owned(),
        parent: session.parent.clone(),
        initiator: session.initiator.clone(),
        current: current.cloned(),
        interactive: session.interactive && caller != Caller::Schedule,
    }
}

/// One run of a tool's body.
pub(crate) struct Body<'a> {
    /// The tool (a snapshot: the registry may change while the body runs).
    pub(crate) tool: &'a Arc<Tool>,
    /// Its session, as [`session_info`] describes it (shared by the calls of one step).
    pub(crate) info: Arc<SessionInfo>,
    /// The call (for a task, its starting call).
    pub(crate) call_id: &'a Arc<str>,
    /// Who issued the call.
    pub(crate) caller: Caller,
    /// The validated input.
    pub(crate) input: &'a Value,
    /// Who approved the call, when a person did.
    pub(crate) approved_by: Option<&'a Approver>,
    /// Fires to cancel the body.
    pub(crate) token: CallToken,
    /// The journal of a durable or workflow body.
    pub(crate) journal: Option<Journal>,
    /// For a `task` or `serve` body: its calls and where its replies go.
    pub(crate) task: Option<TaskLink>,
    /// The model its step brought (see [`crate::StepOptions`]); else the runtime's is used.
    pub(crate) model: Option<Arc<dyn ModelBackend>>,
    /// Where the model input of the step that made the call is.
    pub(crate) step_input: Option<StepInput>,
}

/// The host and the context `body` runs with.
pub(crate) fn build(engine: &Engine, body: Body<'_>) -> (Arc<RuntimeHost>, CallContext) {
    let tool = body.tool;
    let host = Arc::new(RuntimeHost {
        token: body.token,
        events: engine.events().clone(),
        states: Arc::clone(engine.services()),
        tool: Arc::clone(tool),
        sandbox: engine.sandbox().cloned(),
        model: body.model.or_else(|| engine.model().cloned()),
        credentials: engine.credentials().cloned(),
        session: Arc::clone(&body.info),
        call_id: Arc::clone(body.call_id),
        // Only delta labels read the input back; other calls need not copy it.
        input: if tool.label().delta.is_some() {
            body.input.clone()
        } else {
            Value::Null
        },
        interactive: body.info.interactive,
        steps: StepNames::default(),
        journal: body.journal,
        suspended: std::sync::Mutex::new(None),
        parked: tokio::sync::Notify::new(),
        clock: Arc::clone(&engine.options().clock),
        task: body.task,
        store: Arc::clone(engine.store()),
        messages: StepMessages::new(body.step_input),
        in_step: std::sync::atomic::AtomicUsize::new(0),
        webhook_url: engine.options().webhook_url.as_deref().map(Arc::from),
    });
    let mut builder = CallContext::builder()
        .shared_session(body.info)
        .shared_call_id(Arc::clone(body.call_id))
        .shared_tool_name(tool.shared_name())
        .caller(body.caller)
        .host(Arc::clone(&host) as Arc<dyn CallHost>);
    if let Some(approver) = body.approved_by {
        builder = builder.approved_by(approver.principal.clone());
    }
    (host, builder.build())
}
