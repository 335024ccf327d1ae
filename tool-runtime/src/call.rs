//! What hosts hand the runtime and get back: a step's calls, its outcome, answers to input
//! requests and what they did, and what a transport supplies for the calls of one step.

use std::sync::Arc;

use serde_json::Value;
use toolwright_core::{ModelBackend, Principal, ResponseDecision};

use crate::record::{CallResult, InputRequest};

/// One model call of a step: the call id, the tool name and the raw JSON arguments; for a
/// provider-native tool, also the result the provider returned with the response.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call id the model gave.
    pub call_id: String,
    /// The tool name the model used.
    pub name: String,
    /// The arguments as the model wrote them (JSON text).
    pub arguments: String,
    /// What the model provider returned for a provider-native tool it ran itself.
    pub provider_result: Option<ProviderResult>,
}

/// The result of a provider-native tool call (web search, code execution, ...), as the model
/// provider returned it with its response: the runtime records it in the step (events, taint of
/// an `untrusted` tool) instead of running anything.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderResult {
    /// The provider's result block, as JSON.
    pub output: Value,
    /// Whether the provider reported the call as failed.
    pub is_error: bool,
}

impl ToolCall {
    /// A call `call_id` of `name` with JSON `arguments`.
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.into(),
            provider_result: None,
        }
    }

    /// A call of provider-native tool `name` that the provider already ran, with its result
    /// (`output`, failed when `is_error`).
    pub fn provider_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
        output: Value,
        is_error: bool,
    ) -> Self {
        ToolCall {
            provider_result: Some(ProviderResult { output, is_error }),
            ..ToolCall::new(call_id, name, arguments)
        }
    }
}

/// What a step (or a resumed step) came to.
#[derive(Clone, Debug, PartialEq)]
pub enum StepOutcome {
    /// Every call has its result.
    Completed {
        /// One result per call, in the model's order (shared with the turn's record of the
        /// step, [`ClosedStep::results`](crate::record::ClosedStep::results)).
        results: Vec<Arc<CallResult>>,
        /// Whether the turn ended (every call may end it and all succeeded).
        ends_turn: bool,
        /// Notices for the model, e.g. "New tool available: publish_release".
        notices: Vec<String>,
    },
    /// Some calls wait for input; the turn is parked in the store.
    Waiting {
        /// The results known so far (calls that ran or failed).
        results: Vec<Arc<CallResult>>,
        /// The open requests.
        requests: Vec<InputRequest>,
        /// Notices for the model.
        notices: Vec<String>,
    },
}

/// An answer to an input request.
#[derive(Clone, Debug)]
pub struct InputResponse {
    /// The request.
    pub request_id: String,
    /// Approve or cancel.
    pub decision: ResponseDecision,
    /// Who answers (`None` when unauthenticated).
    pub principal: Option<Principal>,
    /// A note sent with the decision; it reaches the model.
    pub note: Option<String>,
    /// For a question: the chosen option (its label, as `ask_question` offers it).
    pub option: Option<String>,
    /// For a question: the answer in the person's own words.
    pub text: Option<String>,
    /// For a form question ([`AskRequest::with_form`](toolwright_core::AskRequest::with_form)):
    /// the fields filled in, a JSON object checked against the form's schema.
    pub fields: Option<serde_json::Value>,
}

impl InputResponse {
    /// Answers question `request_id` as `principal` with `text` (an option's label picks that
    /// option; anything else is a free-form answer).
    pub fn answer(
        request_id: impl Into<String>,
        principal: Option<Principal>,
        text: impl Into<String>,
    ) -> Self {
        InputResponse {
            request_id: request_id.into(),
            decision: ResponseDecision::Approve,
            principal,
            note: None,
            option: None,
            text: Some(text.into()),
            fields: None,
        }
    }

    /// Answers the form question `request_id` as `principal` with `fields` (a JSON object of
    /// the form's fields; an answer the form's schema refuses is rejected and the question stays
    /// pending).
    pub fn fill(
        request_id: impl Into<String>,
        principal: Option<Principal>,
        fields: serde_json::Value,
    ) -> Self {
        InputResponse {
            fields: Some(fields),
            text: None,
            ..Self::answer(request_id, principal, "")
        }
    }

    /// Answers question `request_id` by choosing the option labelled `label`.
    pub fn choose(
        request_id: impl Into<String>,
        principal: Option<Principal>,
        label: impl Into<String>,
    ) -> Self {
        InputResponse {
            option: Some(label.into()),
            text: None,
            ..Self::answer(request_id, principal, "")
        }
    }

    /// Approve `request_id` as `principal`.
    pub fn approve(request_id: impl Into<String>, principal: Option<Principal>) -> Self {
        InputResponse {
            request_id: request_id.into(),
            decision: ResponseDecision::Approve,
            principal,
            note: None,
            option: None,
            text: None,
            fields: None,
        }
    }

    /// Cancel `request_id` as `principal`.
    pub fn cancel(request_id: impl Into<String>, principal: Option<Principal>) -> Self {
        InputResponse {
            request_id: request_id.into(),
            decision: ResponseDecision::Cancel,
            principal,
            note: None,
            option: None,
            text: None,
            fields: None,
        }
    }

    /// `self` with a note for the model.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// What an answer did.
#[derive(Clone, Debug, PartialEq)]
pub enum RespondOutcome {
    /// The response policy refused the answer; the request stays pending.
    Rejected {
        /// Why (shown to the responder).
        reason: String,
    },
    /// The request was already settled or revoked; the answer was dropped.
    Dropped,
    /// Settled; other requests of the turn are still pending.
    Settled {
        /// The requests still pending.
        pending: Vec<String>,
    },
    /// Settled, and the turn resumed: the parked step ran to completion.
    Resumed(StepOutcome),
    /// Settled a question of a workflow task, which now runs again on a task of its own; its
    /// results arrive as `task.result` events and through [`Turn::task_results`](crate::Turn::task_results).
    TaskResumed {
        /// The task.
        task_id: String,
    },
}

/// A delivery to a hook that was accepted ([`Runtime::resume_hook`](crate::Runtime::resume_hook),
/// [`Runtime::deliver_hook`](crate::Runtime::deliver_hook)): recorded once, for the run that
/// made the hook.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HookDelivery {
    /// The hook's public id (records and events name it; never the token).
    pub hook_id: String,
    /// The name the body gave the hook.
    pub name: String,
    /// What waking the run did, when [`Runtime::resume_hook`](crate::Runtime::resume_hook)
    /// woke it: the wait settled (and a turn's step resumed, or a task runs again). `None`
    /// when the body does not wait on the hook yet (the payload is kept for its wait), and
    /// from [`Runtime::deliver_hook`](crate::Runtime::deliver_hook), which wakes the run in
    /// the background.
    pub outcome: Option<RespondOutcome>,
}

/// What a message steered into a turn did ([`Turn::steer`](crate::Turn::steer)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Steered {
    /// A step of the turn was running in this process: the tokens of its running plain and
    /// `execute` calls (durable ones too) fired, and each ends with an
    /// [`ErrorCode::Interrupted`](toolwright_core::ErrorCode::Interrupted) result; `task` and
    /// `serve` bodies keep running, and calls that had finished keep their results. The step
    /// closes as usual without ending the turn, and the message is recorded for the model, to
    /// follow the step's results.
    Interrupted,
    /// No step was running (the host was asking its model): the message is recorded for the
    /// model's next request.
    Queued,
    /// The turn waited for input and the message answered its first unanswered question, as
    /// [`Turn::message`](crate::Turn::message) does; it is not recorded as a steered message.
    Answered(RespondOutcome),
    /// The turn waited for approvals: they were revoked (`ignored`), calls of the step that
    /// were approved already ran, and the message is recorded for the model, to follow the
    /// step's results. A turn parked on its budget's limit stops instead (see
    /// [`Turn::park_on_limit`](crate::Turn::park_on_limit)), and the message is not recorded.
    Revoked(RespondOutcome),
}

/// What the host supplies for the calls of one step, beyond the runtime's own: given to
/// [`Turn::step_with`](crate::Turn::step_with), and to
/// [`Runtime::respond_with`](crate::Runtime::respond_with) for the calls an answer resumes.
///
/// A transport that serves one client per request (the MCP server) installs that client's
/// model here, so the calls of this step ask *this* client. What a step's options install wins
/// over what the runtime's builder installed, for the calls of that step only. A `task` or
/// `serve` workflow body outlives the step that started it and uses the runtime's.
///
/// ```
/// use toolwright_runtime::StepOptions;
/// # use futures_util::future::BoxFuture;
/// # use toolwright_core::{ModelBackend, ModelReply, ModelRequest, ToolError};
/// # struct Client;
/// # impl ModelBackend for Client {
/// #     fn complete(&self, _: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
/// #         Box::pin(async { Ok(ModelReply::new("m", "hi")) })
/// #     }
/// # }
/// let options = StepOptions::new().model(Client);
/// assert!(options.has_model());
/// ```
#[derive(Clone, Default)]
pub struct StepOptions {
    pub(crate) model: Option<Arc<dyn ModelBackend>>,
    pub(crate) conversation: Option<(u64, Vec<serde_json::Value>)>,
    pub(crate) delivered: Option<usize>,
    pub(crate) messages: Option<Arc<[serde_json::Value]>>,
}

impl std::fmt::Debug for StepOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepOptions")
            .field("model", &self.model.is_some())
            .field(
                "conversation",
                &self
                    .conversation
                    .as_ref()
                    .map(|(first, m)| (first, m.len())),
            )
            .field("delivered", &self.delivered)
            .field("messages", &self.messages.as_ref().map(|m| m.len()))
            .finish()
    }
}

impl StepOptions {
    /// Nothing beyond the runtime's own: what [`Turn::step`](crate::Turn::step) uses.
    pub fn new() -> Self {
        Self::default()
    }

    /// The model the step's calls reach through `ctx.model()`.
    pub fn model(self, backend: impl ModelBackend) -> Self {
        self.shared_model(Arc::new(backend))
    }

    /// [`StepOptions::model`] with a backend already shared.
    pub fn shared_model(mut self, backend: Arc<dyn ModelBackend>) -> Self {
        self.model = Some(backend);
        self
    }

    /// Whether a model is installed.
    pub fn has_model(&self) -> bool {
        self.model.is_some()
    }

    /// Messages to append to the session's conversation at positions `first`, `first + 1`, ...
    /// in the transaction that records the step (see
    /// [`Store::write_turn_appending`](crate::Store::write_turn_appending)): the model loop
    /// sends the model's message with the calls this way, so the step is recorded with the
    /// message that asked for it, or neither is. A step whose write is refused (a position
    /// another process took, a turn another process wrote) fails with
    /// [`RuntimeError::Store`](crate::RuntimeError::Store) and nothing of it runs. Only a new
    /// step carries messages: [`Runtime::respond_with`](crate::Runtime::respond_with) resumes
    /// a step recorded already and ignores them.
    pub fn conversation(mut self, first: u64, messages: Vec<serde_json::Value>) -> Self {
        self.conversation = Some((first, messages));
        self
    }

    /// The model input that made the step's calls: what they read as `ctx.messages()`, the
    /// same after a park, a resume or a crash (the step records them). The model loop need not
    /// call it: with [`StepOptions::conversation`] the input is the session's stored
    /// conversation before `first`, recorded as a position rather than copied. A host without
    /// the loop hands the messages it sent its model here, in its own JSON format; they are
    /// stored with the step while it is pending, so hand what the tools need.
    pub fn messages(mut self, messages: Vec<serde_json::Value>) -> Self {
        self.messages = Some(messages.into());
        self
    }

    /// The host has handed the first `delivered` messages steered into the turn
    /// ([`Turn::steer`](crate::Turn::steer), listed by
    /// [`Turn::steering`](crate::Turn::steering)) to its model. A step that would end the
    /// turn then ends it only when no later message waits, and closes the turn's steering in
    /// the same move, so a message steered from then on is refused rather than lost; one that
    /// waits keeps the turn going (the step's `ends_turn` is false) for the host to deliver it.
    /// Without it a step ends the turn whatever was steered before it began (a message steered
    /// while it runs still keeps the turn going).
    pub fn steering(mut self, delivered: usize) -> Self {
        self.delivered = Some(delivered);
        self
    }
}
