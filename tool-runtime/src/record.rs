//! The durable records of the runtime: sessions, turns, the step a turn is parked on, its calls
//! and input requests. They serialize as JSON (stable field names) into any [`crate::Store`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolwright_core::{
    Caller, Effect, Entry, ModelOutput, ModelUsage, Principal, RemoteDefinition, ToolError,
};

/// Whether a session lets calls of an effect run without asking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Calls run unless their policy asks (the default).
    #[default]
    Allow,
    /// Calls whose policy would not ask still ask the user.
    Ask,
}

/// A session: identities, lineage, permissions and state. Approval memory is kept beside it in
/// the store ([`crate::Store::approvals`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session id.
    pub id: String,
    /// The parent session, for subagent sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Who created the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<Principal>,
    /// Whether a person can be asked (false for schedules).
    pub interactive: bool,
    /// Per-effect permissions; an effect not listed is [`Permission::Allow`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub permissions: BTreeMap<Effect, Permission>,
    /// Persistent key-value state, read by `enabled` predicates.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub state: Map<String, Value>,
    /// The conditional tools each audience (`model`, `subagent`, `user`) was last told about;
    /// an audience without an entry has not taken a step yet.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub announced: BTreeMap<String, Vec<String>>,
    /// Whether the session has ended ([`crate::Session::end`]): it takes no new turns.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended: bool,
    /// The only tools the session may list and call (a subagent's subset), when it is limited;
    /// any other tool is unknown to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The locale of the person using the session (a BCP 47 tag, `zh-Hans-CN`): the titles and
    /// summaries of its catalog, UI calls and `tool_search` results are resolved for it. `None`:
    /// the registry's default locale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
}

impl SessionRecord {
    /// A new interactive session `id`.
    pub fn new(id: impl Into<String>) -> Self {
        SessionRecord {
            id: id.into(),
            parent: None,
            initiator: None,
            interactive: true,
            permissions: BTreeMap::new(),
            state: Map::new(),
            announced: BTreeMap::new(),
            ended: false,
            tools: None,
            locale: None,
        }
    }

    /// Whether the session may list and call tool `name` (see [`SessionRecord::tools`]).
    pub fn allows(&self, name: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.binary_search_by(|t| t.as_str().cmp(name)).is_ok())
    }

    /// The permission for `effect`.
    pub fn permission(&self, effect: Effect) -> Permission {
        self.permissions.get(&effect).copied().unwrap_or_default()
    }
}

/// Where a turn is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnStatus {
    /// Accepting steps.
    Active,
    /// Parked on input requests; holds no task.
    Waiting,
    /// Claimed by one process, which is running the approved calls of the parked step.
    Running,
    /// Ended (by `ends_turn` or by the host).
    Completed,
    /// Cancelled; its requests were revoked.
    Cancelled,
}

/// A turn and, while it waits, the step it is parked on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The turn id; unchanged across park and resume.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Who is acting in this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Principal>,
    /// Who issues this turn's calls.
    pub caller: Caller,
    /// Whether the turn asks for structured output (then `ends_turn` is ignored).
    #[serde(default)]
    pub structured_output: bool,
    /// The untrusted tool whose output tainted the turn, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tainted_by: Option<String>,
    /// Where the turn is.
    pub status: TurnStatus,
    /// Steps run so far.
    pub steps: u32,
    /// The step parked on input, or being resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingStep>,
    /// The results of the last step that closed, written with the close: a host restarted right
    /// after it can still hand them to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_step: Option<ClosedStep>,
}

/// The results of a closed step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClosedStep {
    /// The step's index in the turn.
    pub index: u32,
    /// One result per call, in the model's order: shared with the [`StepOutcome`](crate::StepOutcome)
    /// the step returned (a result is written once and never changed).
    pub results: Vec<Arc<CallResult>>,
    /// The input requests the step parked on, as they ended (approved, cancelled, revoked):
    /// how a host learns the answer to a [`RequestKind::SessionLimit`] request, whose step
    /// has no call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<InputRequest>,
}

impl ClosedStep {
    /// The step's session-limit request, when it parked on one (see
    /// [`Turn::park_on_limit`](crate::Turn::park_on_limit)).
    pub fn session_limit(&self) -> Option<&InputRequest> {
        self.requests
            .iter()
            .find(|r| r.kind == RequestKind::SessionLimit)
    }
}

impl TurnRecord {
    /// The id of the journal a `durable` call `call_id` of this turn runs from: what
    /// [`Store::journal`](crate::store::Store::journal) reads for it (a workflow task's is
    /// [`TaskRecord::run_id`]).
    pub fn journal_id(&self, call_id: &str) -> String {
        crate::ids::durable_run_id(&self.id, call_id)
    }

    /// The request `request_id` of the parked step.
    pub fn request(&self, request_id: &str) -> Option<&InputRequest> {
        self.pending
            .as_ref()?
            .requests
            .iter()
            .find(|r| r.request_id == request_id)
    }

    /// Ids of every request in the parked step (the store indexes them).
    pub fn request_ids(&self) -> Vec<&str> {
        self.pending
            .iter()
            .flat_map(|p| p.requests.iter().map(|r| r.request_id.as_str()))
            .collect()
    }

    /// When the earliest durable timer of a waiting turn's parked step is due (Unix
    /// milliseconds): a call's sleep, or a pending question's deadline; `None` when the turn is
    /// not waiting or has neither. Stores index it ([`crate::Store::due_turns`]).
    pub fn wake_at(&self) -> Option<u64> {
        if self.status != TurnStatus::Waiting {
            return None;
        }
        let step = self.pending.as_ref()?;
        let sleeps = step.calls.iter().filter_map(|c| match c.state {
            CallState::Sleeping { until_ms } => Some(until_ms),
            _ => None,
        });
        sleeps.chain(deadlines(&step.requests)).min()
    }

    /// The pending questions of the parked step whose deadline is `now_ms` or earlier.
    pub fn expired_questions(&self, now_ms: u64) -> Vec<&InputRequest> {
        match (&self.pending, self.status) {
            (Some(step), TurnStatus::Waiting) => expired(&step.requests, now_ms),
            _ => Vec::new(),
        }
    }
}

/// The deadlines of the pending questions among `requests`.
fn deadlines(requests: &[InputRequest]) -> impl Iterator<Item = u64> + '_ {
    requests
        .iter()
        .filter(|r| r.is_pending())
        .filter_map(|r| r.deadline_ms)
}

/// The pending questions among `requests` whose deadline is `now_ms` or earlier.
fn expired(requests: &[InputRequest], now_ms: u64) -> Vec<&InputRequest> {
    requests
        .iter()
        .filter(|r| r.is_pending() && r.deadline_ms.is_some_and(|d| d <= now_ms))
        .collect()
}

/// What answering one request changes in a parked step: the request as settled and the calls it
/// gated, in their new states. A store keeps it beside the turn
/// ([`Store::settle_request`](crate::Store::settle_request)) instead of writing the whole turn
/// again, so answering one request of a step costs the same however many the step holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepPatch {
    /// The index of the step it changes.
    pub step: u32,
    /// The request, in its new status.
    pub request: InputRequest,
    /// The calls the request gated, in their new states.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<PendingCall>,
}

impl TurnRecord {
    /// Applies `patch` to the parked step: its request and calls replace those with the same
    /// ids. Returns `false`, changing nothing, when the turn holds no step `patch.step` or the
    /// step no such request (a patch written for another step is never applied to this one).
    pub fn apply(&mut self, patch: &StepPatch) -> bool {
        let Some(step) = self.pending.as_mut().filter(|s| s.index == patch.step) else {
            return false;
        };
        let Some(request) = step
            .requests
            .iter_mut()
            .find(|r| r.request_id == patch.request.request_id)
        else {
            return false;
        };
        request.clone_from(&patch.request);
        for call in &patch.calls {
            if let Some(held) = step.calls.iter_mut().find(|c| c.call_id == call.call_id) {
                held.clone_from(call);
            }
        }
        true
    }
}

/// The calls of one step, with the requests some of them wait on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingStep {
    /// The step's index in the turn.
    pub index: u32,
    /// Every call of the step, in the model's order.
    pub calls: Vec<PendingCall>,
    /// The input requests of the step.
    pub requests: Vec<InputRequest>,
    /// Where the model input that made the step's calls is (what `ctx.messages()` returns);
    /// `None` when the step carried none, as every step recorded before this field was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<StepInput>,
}

/// Where a step's model input is: what its calls read as `ctx.messages()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepInput {
    /// The session's conversation in the store (the model loop's) before position `end`: the
    /// step's own messages (the model's reply with the calls) start at `end`.
    Conversation {
        /// The first position not part of the input.
        end: u64,
    },
    /// Messages the host handed with the step ([`crate::StepOptions::messages`]), shared by
    /// its calls.
    Messages(#[serde(with = "shared_values")] std::sync::Arc<[Value]>),
}

/// Shared messages as a JSON array.
mod result_json;

mod shared_values {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    pub(super) fn serialize<S: Serializer>(values: &Arc<[Value]>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(values.iter())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<[Value]>, D::Error> {
        Vec::<Value>::deserialize(d).map(Arc::from)
    }
}

/// One call of a parked step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call id.
    pub call_id: String,
    /// The resolved tool name.
    pub tool: String,
    /// The validated, defaulted input.
    pub input: Value,
    /// Where the call is.
    pub state: CallState,
}

/// Where one call of a parked step is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum CallState {
    /// May run when the step resumes.
    Ready {
        /// Who approved it, when a person did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approved_by: Option<Approver>,
    },
    /// Waits on the request `request_id`.
    Waiting {
        /// The request.
        request_id: String,
    },
    /// Claimed for execution; found in this state after a crash, the call settles as "result
    /// unknown" and is never run again.
    Running,
    /// A workflow body sleeps until `until_ms` (Unix milliseconds); the call runs again, replaying
    /// its journal, when the timer is due.
    Sleeping {
        /// When the sleep ends.
        until_ms: u64,
    },
    /// Has its result.
    Finished {
        /// The result.
        result: CallResult,
    },
}

/// The person who approved a call (approval is consent, not borrowed identity).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Approver {
    /// Who answered; `None` for an unauthenticated answer to an anonymous call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
}

/// What kind of input a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestKind {
    /// Approve or cancel a tool call.
    ToolApproval,
    /// Answer a question.
    Question,
    /// Allow the turn past a limit of its budget (steps, tool calls, tokens, cost): approving
    /// extends the budget, cancelling stops the turn.
    SessionLimit,
    /// A workflow body waits on a hook
    /// ([`WorkflowContext::wait_hook`](toolwright_core::WorkflowContext::wait_hook)): no
    /// person answers it; a delivery to the hook's token settles it
    /// ([`Runtime::resume_hook`](crate::Runtime::resume_hook)). Its `input` names the hook:
    /// `{"hook": {"id": ..., "name": ...}}`.
    Hook,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RequestStatus {
    /// Waiting for an answer.
    Pending,
    /// Answered.
    Settled {
        /// Approved or cancelled.
        decision: Decision,
        /// Who answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        responder: Option<Principal>,
        /// A note sent with the decision; it reaches the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Withdrawn without an answer.
    Revoked {
        /// `ignored` (a new message arrived) or `cancelled` (the turn was cancelled).
        outcome: Outcome,
    },
}

/// A settled approval's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The call may run.
    Approved,
    /// The call does not run.
    Cancelled,
}

/// How an input request was resolved (`input.resolved`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Outcome {
    /// Answered.
    Answered,
    /// Revoked by a message that did not answer it.
    Ignored,
    /// Revoked by cancelling the turn.
    Cancelled,
    /// Withdrawn unanswered: its deadline passed
    /// ([`AskRequest::timeout`](toolwright_core::AskRequest::timeout)).
    Expired,
}

/// A request for input: what the client renders and answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    /// The request id clients answer with.
    pub request_id: String,
    /// What kind of input.
    pub kind: RequestKind,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call it gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The call's resolved tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call's validated input, shown to the approver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// What the person is asked.
    pub prompt: String,
    /// Why the request exists beyond the tool's policy (e.g. the untrusted source that tainted
    /// the turn, or the session permission).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Who made the call (`None` when unauthenticated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<Principal>,
    /// The `once` memory key a grant is recorded under, when the policy is `once`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_key: Option<String>,
    /// For a question asked by a workflow body (`ctx.ask`): the position in the call's journal
    /// where the answer is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_position: Option<u32>,
    /// For a question asked by the body of a `task` or `serve` workflow: the task, which parks on
    /// it instead of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// For the call of a remote tool whose server changed its definition since it was
    /// approved: the pinned and the new definition. Approving the request approves the new
    /// definition (for every session) and the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_change: Option<Box<DefinitionChange>>,
    /// For a question with a deadline ([`AskRequest::timeout`](toolwright_core::AskRequest::timeout)):
    /// when it is withdrawn unanswered (Unix milliseconds), and the body gets
    /// [`AskAnswer::Timeout`](toolwright_core::AskAnswer::Timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Where the request is.
    pub status: RequestStatus,
}

/// A remote tool's definition as pinned and as its server lists it now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DefinitionChange {
    /// The connection.
    pub connection: String,
    /// The server's name for the tool.
    pub tool: String,
    /// The definition approved before.
    pub pinned: RemoteDefinition,
    /// The definition the server lists now.
    pub listed: RemoteDefinition,
    /// The digest of `listed`: what an approval pins.
    pub digest: String,
}

impl DefinitionChange {
    /// The parts of the definition that changed, e.g. `["description", "inputSchema"]`.
    pub fn changed_parts(&self) -> Vec<&'static str> {
        let (a, b) = (&self.pinned, &self.listed);
        let mut parts = Vec::new();
        if a.title != b.title {
            parts.push("title");
        }
        if a.description != b.description {
            parts.push("description");
        }
        if a.input_schema != b.input_schema {
            parts.push("inputSchema");
        }
        if a.output_schema != b.output_schema {
            parts.push("outputSchema");
        }
        if a.annotations != b.annotations {
            parts.push("annotations");
        }
        parts
    }
}

/// A remote tool definition the runtime will run: pinned at the first listing of its
/// connection (declaring the connection and its allowlist is the approval), replaced only when a
/// person approves a changed definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PinRecord {
    /// The connection.
    pub connection: String,
    /// The server's name for the tool.
    pub tool: String,
    /// The digest of `definition`.
    pub digest: String,
    /// The definition.
    pub definition: RemoteDefinition,
    /// Who approved it (`None` for the first pin, and for approvals without an identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<Principal>,
    /// When it was pinned, Unix milliseconds.
    pub pinned_at_ms: u64,
}

impl InputRequest {
    /// Whether it still waits for an answer.
    pub fn is_pending(&self) -> bool {
        matches!(self.status, RequestStatus::Pending)
    }
}

/// The result of one call, as the model and the events see it.
///
/// What the model sees is [`CallResult::model`]: the output itself as JSON (a tool without a
/// projection, the most common case) or [`CallResult::projection`]. A result holds its output
/// once, in memory and as JSON: there, `model` is written only for a projection.
#[derive(Clone, Debug, PartialEq)]
pub struct CallResult {
    /// The call id.
    pub call_id: String,
    /// The resolved tool name (the real name for deferred tools called through `tool_call`).
    pub tool: String,
    /// Whether the call failed (the model sees an error result).
    pub is_error: bool,
    /// The raw output (for events and clients), or the error as JSON.
    pub output: Value,
    /// What the model sees when it is not the output itself: the tool's projection, a failed
    /// call's message, the output with its sensitive values taken out. `None`: the model sees
    /// `output` as JSON. Read it through [`CallResult::model`].
    pub projection: Option<ModelOutput>,
    /// The error, when the call failed.
    pub error: Option<ToolError>,
    /// Whether this call may end the turn.
    pub ends_turn: bool,
    /// The completion label, if rendered.
    pub label: Option<String>,
    /// What the call's model asks used (`ctx.model()`, subagents), summed, when a backend
    /// counted it: the model loop counts it against the turn's budget.
    pub model_usage: Option<ModelUsage>,
}

impl CallResult {
    /// A failed call: the model sees the message.
    pub fn failed(call_id: &str, tool: &str, error: ToolError) -> Self {
        CallResult {
            model_usage: None,
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            is_error: true,
            output: serde_json::to_value(&error).unwrap_or(Value::Null),
            projection: Some(ModelOutput::Text(error.message().to_owned())),
            error: Some(error),
            ends_turn: false,
            label: None,
        }
    }

    /// What the model sees: the projection, or else the output as JSON (a copy, made when
    /// asked).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolwright_core::{ErrorCode, ModelOutput, ToolError};
    /// use toolwright_runtime::CallResult;
    ///
    /// let mut result = CallResult {
    ///     call_id: "c1".into(),
    ///     tool: "read_logs".into(),
    ///     is_error: false,
    ///     output: json!({ "lines": 3 }),
    ///     projection: None,
    ///     error: None,
    ///     ends_turn: false,
    ///     label: None,
    ///     model_usage: None,
    /// };
    /// assert_eq!(*result.model(), ModelOutput::Json(json!({ "lines": 3 })));
    /// result.set_model(ModelOutput::text("3 lines"));
    /// assert_eq!(result.model().to_text(), "3 lines");
    ///
    /// let error = ToolError::with_code(ErrorCode::ToolFailed, "no logs");
    /// assert_eq!(CallResult::failed("c2", "read_logs", error).model().to_text(), "no logs");
    /// ```
    pub fn model(&self) -> Cow<'_, ModelOutput> {
        match &self.projection {
            Some(model) => Cow::Borrowed(model),
            None => Cow::Owned(ModelOutput::Json(self.output.clone())),
        }
    }

    /// Sets what the model sees: a projection, or none when `model` is the output itself as
    /// JSON.
    pub fn set_model(&mut self, model: ModelOutput) {
        self.projection = match model {
            ModelOutput::Json(value) if value == self.output => None,
            model => Some(model),
        };
    }
}

/// What a journal entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EntryKind {
    /// A `step(name, ...)` and the JSON value it produced.
    Step,
    /// An `ask` and its answer.
    Ask,
    /// A `sleep` and when it ends.
    Sleep,
    /// A version marker the body reached as new work (`ctx.patched(marker)`): its replays take
    /// the new path again. The value is `true`.
    Patch,
    /// A hook the body made (`ctx.hook(name)`): its token, id, name and URL. In a hook's own
    /// journal (`hook:<id>`), position 0: what a delivery is checked against (the payload's
    /// schema) and where it goes (the run that made it).
    Hook,
    /// A wait on a hook, and how it ended (received, timeout, cancelled).
    HookWait,
    /// In a hook's own journal, position 1: the payload delivered to it. Recorded once, so a
    /// second delivery is refused.
    Delivery,
}

/// One recorded result of a durable run, at its position in the run's journal. On replay the
/// body meets the same entries in the same order; reaching a different one is an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// 0-based position in the run.
    pub position: u32,
    /// What was recorded.
    pub kind: EntryKind,
    /// The step's name (for asks and sleeps, a name derived from the call).
    pub name: String,
    /// The recorded value.
    pub value: Value,
}

/// Where a workflow task (`workflow = task` or `serve`) is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum TaskStatus {
    /// Its body runs (or, found in this state after a crash, runs again from its journal).
    Running,
    /// Parked on a question (one of `requests`); holds no task.
    Waiting,
    /// Parked on a durable timer until `until_ms` (Unix milliseconds); holds no task.
    Sleeping {
        /// When the sleep ends.
        until_ms: u64,
    },
    /// A `serve` task that replied and waits for its next call; holds no task.
    Idle,
    /// Cancelled: its body runs with its cancellation token fired, for at most the cleanup
    /// window ([`crate::Options::task_cleanup`]), then the task ends.
    Cancelling,
    /// Its body returned (or failed); every call has its result.
    Finished,
    /// Cancelled, and its cleanup is over.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task has ended (`finished` or `cancelled`).
    pub fn is_over(self) -> bool {
        matches!(self, TaskStatus::Finished | TaskStatus::Cancelled)
    }

    /// What the task waits on, in words for the model.
    pub fn describe(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Waiting => "waiting for a person's answer",
            TaskStatus::Sleeping { .. } => "sleeping until a timer",
            TaskStatus::Idle => "idle, waiting for its next call",
            TaskStatus::Cancelling => "being cancelled",
            TaskStatus::Finished => "finished",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// A workflow task: the durable run of a `task` or `serve` tool, outliving the step (and, for
/// `serve`, the turn) that started it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The task id the model sees (`deploy_service-4hd8sa2k1x`).
    pub id: String,
    /// The tool.
    pub tool: String,
    /// `task` or `serve`.
    pub entry: Entry,
    /// The session; only calls from it may reach the task.
    pub session_id: String,
    /// The turn whose call started the task.
    pub turn_id: String,
    /// Who issued the starting call.
    pub caller: Caller,
    /// Who was acting in the starting turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Principal>,
    /// Who approved the starting call, when a person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<Approver>,
    /// Where the task is.
    #[serde(flatten)]
    pub status: TaskStatus,
    /// Whether a cancel was asked for while another process ran the body.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    /// The calls the task serves, in arrival order: the starting call first, then (for `serve`)
    /// the calls that carried its `task_id`.
    pub calls: Vec<TaskCall>,
    /// The questions its body asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<InputRequest>,
    /// Answers to those questions by journal position, written when a question is settled (the
    /// journal records them when the body next runs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub answers: BTreeMap<u32, toolwright_core::AskAnswer>,
}

impl TaskRecord {
    /// The journal its body replays from (the starting call's).
    pub fn run_id(&self) -> String {
        format!(
            "{}/{}",
            self.turn_id,
            self.calls.first().map_or("", |c| c.call_id.as_str())
        )
    }

    /// Ids of the requests (the store indexes them).
    pub fn request_ids(&self) -> Vec<&str> {
        self.requests
            .iter()
            .map(|r| r.request_id.as_str())
            .collect()
    }

    /// When a sleeping task's timer is due, or the deadline of a waiting task's earliest
    /// pending question (Unix milliseconds); stores index it ([`crate::Store::due_tasks`]).
    pub fn wake_at(&self) -> Option<u64> {
        match self.status {
            TaskStatus::Sleeping { until_ms } => Some(until_ms),
            TaskStatus::Waiting => deadlines(&self.requests).min(),
            _ => None,
        }
    }

    /// The pending questions of a waiting task whose deadline is `now_ms` or earlier.
    pub fn expired_questions(&self, now_ms: u64) -> Vec<&InputRequest> {
        match self.status {
            TaskStatus::Waiting => expired(&self.requests, now_ms),
            _ => Vec::new(),
        }
    }

    /// Whether a lease covers the task's work: its body runs (`running`, `cancelling`).
    pub fn is_leased(&self) -> bool {
        matches!(self.status, TaskStatus::Running | TaskStatus::Cancelling)
    }

    /// Whether the task still owes turn `turn_id` something: a result not produced yet, or one
    /// not delivered yet.
    pub fn owes(&self, turn_id: &str) -> bool {
        self.calls
            .iter()
            .any(|c| c.turn_id == turn_id && (c.result.is_none() || !c.delivered))
    }
}

/// One call a task serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskCall {
    /// The call id.
    pub call_id: String,
    /// The turn that made the call; its result is delivered there.
    pub turn_id: String,
    /// The index of the turn's step that made the call (call ids are unique only within one).
    #[serde(default)]
    pub step: u32,
    /// The validated input, without `task_id`.
    pub input: Value,
    /// The result, once the body replied (or returned, or the task ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<CallResult>,
    /// Whether the result reached the model (as a `task_result` message or through
    /// `task_wait`/`task_cancel`).
    #[serde(default)]
    pub delivered: bool,
    /// Whether the call was cancelled on its own (its turn was, or
    /// [`Runtime::cancel_task_call`](crate::Runtime::cancel_task_call)): its result says so,
    /// and the body sees the call cancelled, on every replay too. The task keeps serving.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// Where the model input of the step that made the call is (what `call.messages()` reads
    /// in a `serve` body, and the starting call's what the body's `ctx.messages()` reads);
    /// `None` when that step carried none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_input: Option<StepInput>,
}

/// A task's result for one call, delivered to the turn that made the call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// The task.
    pub task_id: String,
    /// The call it answers.
    pub call_id: String,
    /// The turn that made the call.
    pub turn_id: String,
    /// The result.
    pub result: CallResult,
}

impl TaskResult {
    /// The message to add to the model's history: `<task_result task_id="…" tool="…">…</task_result>`.
    pub fn message(&self) -> String {
        let status = if self.result.is_error {
            "failed"
        } else {
            "finished"
        };
        format!(
            "<task_result task_id=\"{}\" tool=\"{}\" call_id=\"{}\" status=\"{status}\">\n{}\n</task_result>",
            self.task_id,
            self.result.tool,
            self.call_id,
            self.result.model().to_text()
        )
    }
}

/// One message of a session's conversation, as the model loop stored it: its position in the
/// session (from 0), the turn that added it, and the message as JSON (the runtime does not read
/// it; the loop that wrote it does).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversationEntry {
    /// Its position in the session's conversation, from 0.
    pub position: u64,
    /// The turn that added it.
    pub turn_id: String,
    /// The message.
    pub message: Value,
}

/// A file a tool returned, stored once per session (see
/// [`ContentPart::Attachment`](toolwright_core::ContentPart::Attachment)): results, events and
/// conversations name it by `id`.
#[derive(Clone, PartialEq, Eq)]
pub struct AttachmentRecord {
    /// The session it belongs to: it is deleted with the session's attachments.
    pub session_id: String,
    /// `sha256:` and the hex digest of the bytes.
    pub id: String,
    /// The media type, e.g. `image/png`.
    pub media_type: String,
    /// The size of the bytes.
    pub size: u64,
    /// Where the bytes are: in the store, or in the runtime's sandbox.
    pub place: AttachmentPlace,
}

/// Where an attachment's bytes are kept.
#[derive(Clone, PartialEq, Eq)]
pub enum AttachmentPlace {
    /// In the store, with the record.
    Stored(Vec<u8>),
    /// In the runtime's sandbox, at this path relative to its root; the store keeps the record
    /// only.
    Sandbox(String),
}

impl std::fmt::Debug for AttachmentRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The bytes are not worth printing: their size says enough.
        let place = match &self.place {
            AttachmentPlace::Stored(_) => "stored".to_owned(),
            AttachmentPlace::Sandbox(path) => format!("sandbox:{path}"),
        };
        f.debug_struct("AttachmentRecord")
            .field("session_id", &self.session_id)
            .field("id", &self.id)
            .field("media_type", &self.media_type)
            .field("size", &self.size)
            .field("place", &place)
            .finish()
    }
}

impl std::fmt::Debug for AttachmentPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachmentPlace::Stored(bytes) => write!(f, "Stored({} bytes)", bytes.len()),
            AttachmentPlace::Sandbox(path) => write!(f, "Sandbox({path:?})"),
        }
    }
}
