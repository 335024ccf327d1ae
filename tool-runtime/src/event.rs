//! Events: everything a client renders, with stable JSON names (`{"type": "action.result", ...}`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolwright_core::{Caller, LogLevel, Principal, ResponseDecision};

use crate::record::{CallResult, Decision, InputRequest, Outcome};

/// One thing that happened in a session.
#[allow(clippy::large_enum_variant)]
// reason: events are built once and moved into the channel; boxing would add an allocation per event
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum Event {
    /// A turn began.
    #[serde(rename = "turn.started")]
    TurnStarted {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// Who issues the turn's calls: the model, a subagent, the user (a call from the user
        /// interface) or a schedule.
        caller: Caller,
        /// Who acts in the turn, when the host said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<Principal>,
    },
    /// A call was received; `label` is its start label.
    #[serde(rename = "action.requested")]
    ActionRequested {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The call.
        call_id: String,
        /// The resolved tool name.
        tool: String,
        /// The validated input (or the raw arguments when they did not parse).
        input: Value,
        /// The start label (the humanized tool name when the tool has none).
        label: String,
        /// Who issued the call.
        caller: Caller,
        /// Who acts in the call's turn, when the host said: for a call from the user interface,
        /// the user.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<Principal>,
    },
    /// A partial result; it replaces the previous one and never enters the model's history.
    #[serde(rename = "action.partial")]
    ActionPartial {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The call.
        call_id: String,
        /// The resolved tool name.
        tool: String,
        /// The snapshot.
        snapshot: Value,
        /// The delta label, if the tool has one that rendered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// A log line from a tool (never model-visible).
    #[serde(rename = "action.log")]
    ActionLog {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The call.
        call_id: String,
        /// The resolved tool name.
        tool: String,
        /// The severity.
        level: LogLevel,
        /// The line.
        message: String,
    },
    /// A journaled step of a `durable` or `workflow` body (or of a workflow task's body) moved
    /// on: it started running, its value was recorded, it failed (nothing was recorded, so a
    /// later run runs it again), or an earlier run's value was replayed without running it.
    /// Hosts show these as the call's progress, e.g. as label deltas (`label`); the MCP
    /// server sends them as progress notifications. Never model-visible.
    #[serde(rename = "action.step")]
    ActionStep {
        /// The session.
        session_id: String,
        /// The turn (for a workflow task, the turn of its starting call).
        turn_id: String,
        /// The call (for a workflow task, its starting call).
        call_id: String,
        /// The resolved tool name.
        tool: String,
        /// The step's name, as the body gave it.
        step: String,
        /// The step's position in the call's journal.
        position: u32,
        /// What happened to it.
        progress: StepProgress,
        /// A short line for the user: the step's name and what happened.
        label: String,
    },
    /// A call's result.
    #[serde(rename = "action.result")]
    ActionResult {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The result, shared with the step's outcome and its record.
        result: Arc<CallResult>,
    },
    /// A request for input was opened.
    #[serde(rename = "input.requested")]
    InputRequested {
        /// The request.
        request: InputRequest,
    },
    /// The turn is parked, waiting for input.
    #[serde(rename = "turn.waiting")]
    TurnWaiting {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// What it waits on (`input`).
        on: String,
        /// The pending request ids.
        requests: Vec<String>,
    },
    /// An answer to an approval arrived and was checked by the response policy.
    #[serde(rename = "approval.candidate")]
    ApprovalCandidate {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The request.
        request_id: String,
        /// Approve or cancel.
        decision: ResponseDecision,
        /// Who answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        responder: Option<Principal>,
        /// `pending` when accepted (settling follows), `rejected` when the response policy
        /// refused it (the request stays pending).
        status: CandidateStatus,
        /// Why it was rejected.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An approval request was settled.
    #[serde(rename = "approval.settled")]
    ApprovalSettled {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The request.
        request_id: String,
        /// Approved or cancelled.
        decision: Decision,
    },
    /// A request for input was resolved.
    #[serde(rename = "input.resolved")]
    InputResolved {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The request.
        request_id: String,
        /// Answered, ignored or cancelled.
        outcome: Outcome,
    },
    /// The set of conditional tools changed; the model is told once.
    #[serde(rename = "tools.changed")]
    ToolsChanged {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// Tools that became available.
        added: Vec<String>,
        /// Tools that went away.
        removed: Vec<String>,
    },
    /// A guardrail did not allow a call (input) or pass its output (output).
    #[serde(rename = "guardrail.tripped")]
    GuardrailTripped {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The call.
        call_id: String,
        /// The resolved tool name.
        tool: String,
        /// The guardrail's name: the path a tool names it by, or the name given to the runtime.
        guardrail: String,
        /// Before the call ran, or after it succeeded.
        stage: toolwright_core::GuardrailStage,
        /// What it decided.
        action: GuardrailAction,
        /// Why.
        reason: String,
    },
    /// A connection's state changed (connected, down, refused).
    #[serde(rename = "connection.changed")]
    ConnectionChanged {
        /// The connection.
        connection: String,
        /// Where it is now.
        state: crate::remote::ConnectionState,
    },
    /// The host registered or unregistered a tool defined at run time
    /// ([`Runtime::register_tool`](crate::Runtime::register_tool)): each session's model is
    /// told at its next step, and MCP clients are told to list again.
    #[serde(rename = "tools.registered")]
    ToolsRegistered {
        /// Tools added.
        added: Vec<String>,
        /// Tools removed.
        removed: Vec<String>,
    },
    /// A remote server lists a definition of a tool that differs from the pinned one: the tool
    /// is withheld until a person approves the change.
    #[serde(rename = "tool.definition_changed")]
    ToolDefinitionChanged {
        /// The connection.
        connection: String,
        /// The server's name for the tool.
        tool: String,
        /// The model-facing name (`<connection>__<tool>`).
        name: String,
        /// The digest of the approved definition.
        pinned_digest: String,
        /// The digest of the definition the server lists now.
        digest: String,
    },
    /// Something the host should know that is not an error (e.g. a large file sent to the model).
    #[serde(rename = "warning")]
    Warning {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// The call, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// What to know.
        message: String,
    },
    /// The host or a tool (`ctx.set_session_state`) changed a session's state or permissions
    /// ([`crate::Session::set_state`],
    /// [`crate::Session::set_permission`]): conditional tools may have come or gone.
    #[serde(rename = "session.changed")]
    SessionChanged {
        /// The session.
        session_id: String,
    },
    /// A `task` or `serve` call started a workflow task.
    #[serde(rename = "task.started")]
    TaskStarted {
        /// The session.
        session_id: String,
        /// The turn whose call started it.
        turn_id: String,
        /// The task.
        task_id: String,
        /// The tool.
        tool: String,
        /// The starting call.
        call_id: String,
    },
    /// A task produced the result of one of its calls (a `task`'s return value, a `serve`
    /// reply, or the error that ended it). Hand it to the model with
    /// [`crate::Turn::task_results`], which marks it delivered.
    #[serde(rename = "task.result")]
    TaskResult {
        /// The session.
        session_id: String,
        /// The result.
        result: crate::record::TaskResult,
    },
    /// A task ended (`finished` or `cancelled`).
    #[serde(rename = "task.ended")]
    TaskEnded {
        /// The session.
        session_id: String,
        /// The task.
        task_id: String,
        /// How it ended.
        status: crate::record::TaskStatus,
    },
    /// A new message from the user was steered into the turn
    /// ([`Turn::steer`](crate::Turn::steer)) and recorded for the model.
    #[serde(rename = "turn.steered")]
    TurnSteered {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// Whether a step of the turn was running here, whose plain and `execute` calls were
        /// interrupted (each also ends with an `INTERRUPTED` `action.result`).
        interrupted: bool,
    },
    /// The turn ended.
    #[serde(rename = "turn.completed")]
    TurnCompleted {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// Why.
        reason: CompletionReason,
    },
}

impl Event {
    /// The session the event belongs to; `None` for events of the runtime as a whole (a
    /// connection's state, a remote tool's changed definition).
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Event::TurnStarted { session_id, .. }
            | Event::ActionRequested { session_id, .. }
            | Event::ActionPartial { session_id, .. }
            | Event::ActionLog { session_id, .. }
            | Event::ActionStep { session_id, .. }
            | Event::ActionResult { session_id, .. }
            | Event::TurnWaiting { session_id, .. }
            | Event::ApprovalCandidate { session_id, .. }
            | Event::ApprovalSettled { session_id, .. }
            | Event::InputResolved { session_id, .. }
            | Event::ToolsChanged { session_id, .. }
            | Event::GuardrailTripped { session_id, .. }
            | Event::Warning { session_id, .. }
            | Event::SessionChanged { session_id }
            | Event::TaskStarted { session_id, .. }
            | Event::TaskResult { session_id, .. }
            | Event::TaskEnded { session_id, .. }
            | Event::TurnSteered { session_id, .. }
            | Event::TurnCompleted { session_id, .. } => Some(session_id),
            Event::InputRequested { request } => Some(&request.session_id),
            Event::ConnectionChanged { .. }
            | Event::ToolDefinitionChanged { .. }
            | Event::ToolsRegistered { .. } => None,
        }
    }

    /// The turn the event belongs to; `None` for events of a session or of the runtime as a
    /// whole, and for a workflow task's end (a task outlives the turn that started it).
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            Event::TurnStarted { turn_id, .. }
            | Event::ActionRequested { turn_id, .. }
            | Event::ActionPartial { turn_id, .. }
            | Event::ActionLog { turn_id, .. }
            | Event::ActionStep { turn_id, .. }
            | Event::ActionResult { turn_id, .. }
            | Event::TurnWaiting { turn_id, .. }
            | Event::ApprovalCandidate { turn_id, .. }
            | Event::ApprovalSettled { turn_id, .. }
            | Event::InputResolved { turn_id, .. }
            | Event::ToolsChanged { turn_id, .. }
            | Event::GuardrailTripped { turn_id, .. }
            | Event::Warning { turn_id, .. }
            | Event::TaskStarted { turn_id, .. }
            | Event::TurnSteered { turn_id, .. }
            | Event::TurnCompleted { turn_id, .. } => Some(turn_id),
            Event::InputRequested { request } => Some(&request.turn_id),
            Event::TaskResult { result, .. } => Some(&result.turn_id),
            Event::SessionChanged { .. }
            | Event::TaskEnded { .. }
            | Event::ConnectionChanged { .. }
            | Event::ToolDefinitionChanged { .. }
            | Event::ToolsRegistered { .. } => None,
        }
    }
}

/// What happened to a journaled step ([`Event::ActionStep`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepProgress {
    /// It runs now: no earlier run recorded it.
    Started,
    /// It ran, and its value is on record: no later run runs it again.
    Recorded,
    /// It failed: nothing was recorded (the body decides what the error means).
    Failed,
    /// An earlier run recorded it: its value was returned without running it.
    Replayed,
}

impl StepProgress {
    /// The label of step `step` at this point, e.g. `create-tenant: done`.
    pub fn label(self, step: &str) -> String {
        let what = match self {
            StepProgress::Started => "started",
            StepProgress::Recorded => "done",
            StepProgress::Failed => "failed",
            StepProgress::Replayed => "done earlier",
        };
        format!("{step}: {what}")
    }
}

/// The status of an approval candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CandidateStatus {
    /// Accepted by the response policy.
    Pending,
    /// Refused by the response policy; the request stays pending.
    Rejected,
}

/// What a guardrail that tripped decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardrailAction {
    /// The call waits for a person's approval.
    Ask,
    /// The call was refused.
    Refuse,
    /// The model sees a replacement of the output.
    Redact,
    /// The output was withheld and the turn ends.
    Stop,
}

/// Why a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionReason {
    /// Every call of the last step ended the turn.
    EndsTurn,
    /// The host completed it.
    Host,
    /// It was cancelled.
    Cancelled,
    /// It reached a limit of its budget and the host did not extend it (see
    /// [`RequestKind::SessionLimit`](crate::RequestKind::SessionLimit)).
    SessionLimit,
    /// An output guardrail stopped it ([`toolwright_core::OutputVerdict::Stop`]).
    Guardrail,
}
