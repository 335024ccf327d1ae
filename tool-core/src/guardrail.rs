//! Guardrails and per-step tool preparation: checks that run around a call (input guardrails
//! before it runs, output guardrails before the model sees its result) and fns that hide a tool
//! or change its description for one step.
//!
//! A tool names its own with `#[tool(guardrails(input = path, output = path), prepare = path)]`;
//! a runtime adds checks over every tool with `RuntimeBuilder::input_guardrail`,
//! `RuntimeBuilder::output_guardrail` and `RuntimeBuilder::prepare_tools`.

use std::future::Future;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::approval::CancelSignal;
use crate::output::ModelOutput;
use crate::session::{Caller, SessionInfo};

/// What an input guardrail decides about a call whose input was validated.
///
/// The runtime combines it with the approval decision, the strictest winning: `Ask` makes a
/// call that would run wait for a person (it never lets a denied call run), `Refuse` denies
/// the call with `reason`, which the model sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputVerdict {
    /// Nothing to object to.
    Allow,
    /// A person must approve the call; the approval request says `reason`.
    Ask(String),
    /// The call is refused; the model sees `reason`.
    Refuse(String),
}

impl InputVerdict {
    /// A person must approve the call, for `reason`.
    pub fn ask(reason: impl Into<String>) -> Self {
        InputVerdict::Ask(reason.into())
    }

    /// The call is refused, for `reason` (the model sees it).
    pub fn refuse(reason: impl Into<String>) -> Self {
        InputVerdict::Refuse(reason.into())
    }
}

/// What an output guardrail decides about a call's successful output, before the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputVerdict {
    /// The output goes to the model as the tool returned it.
    Pass,
    /// The model sees `replacement` instead of the output. The raw output is dropped: neither
    /// the events nor the stored turn keep it (they hold the replacement).
    Redact {
        /// Why, for events and logs (the model sees only `replacement`).
        reason: String,
        /// What the model sees instead.
        replacement: ModelOutput,
    },
    /// The turn ends when the step closes: the output never reaches the model, the call's
    /// result is an error saying a guardrail stopped the turn, the other calls of the step are
    /// cancelled, and the turn completes with `CompletionReason::Guardrail`.
    Stop(String),
}

impl OutputVerdict {
    /// Redacts the output: the model sees a text saying it was withheld, and why.
    pub fn redact(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        let replacement = ModelOutput::Text(format!(
            "[the output of this call was withheld by a guardrail: {reason}]"
        ));
        OutputVerdict::Redact {
            reason,
            replacement,
        }
    }

    /// Redacts the output: the model sees `replacement` (text or a JSON value) instead.
    pub fn redact_with(reason: impl Into<String>, replacement: impl Into<ModelOutput>) -> Self {
        OutputVerdict::Redact {
            reason: reason.into(),
            replacement: replacement.into(),
        }
    }

    /// Stops the turn, for `reason`.
    pub fn stop(reason: impl Into<String>) -> Self {
        OutputVerdict::Stop(reason.into())
    }
}

/// Which side of a call a guardrail checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardrailStage {
    /// Before the call runs, after its input was validated.
    Input,
    /// After the call succeeded, before the model sees its result.
    Output,
}

/// A call as an input guardrail sees it.
#[non_exhaustive]
pub struct InputCheck<'a> {
    /// The session, its identities and lineage.
    pub session: &'a SessionInfo,
    /// Who issued the call: the model, a subagent or a schedule.
    pub caller: Caller,
    /// The resolved tool name (with its toolset or connection prefix).
    pub tool_name: &'a str,
    /// The validated, defaulted input.
    pub input: &'a Value,
    /// The call id.
    pub call_id: &'a str,
    /// Whether the tool's output is third-party text (`untrusted`).
    pub untrusted: bool,
    /// Fires when the turn is cancelled; pass it to slow checks.
    pub cancel: &'a dyn CancelSignal,
}

impl<'a> InputCheck<'a> {
    /// The check of call `call_id` of `tool_name` with `input`.
    pub fn new(
        session: &'a SessionInfo,
        caller: Caller,
        tool_name: &'a str,
        input: &'a Value,
        call_id: &'a str,
        untrusted: bool,
        cancel: &'a dyn CancelSignal,
    ) -> Self {
        InputCheck {
            session,
            caller,
            tool_name,
            input,
            call_id,
            untrusted,
            cancel,
        }
    }
}

impl std::fmt::Debug for InputCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputCheck")
            .field("session", &self.session.id)
            .field("caller", &self.caller)
            .field("tool_name", &self.tool_name)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// A call's successful output as an output guardrail sees it.
#[non_exhaustive]
pub struct OutputCheck<'a> {
    /// The call, as its input guardrails saw it.
    pub call: InputCheck<'a>,
    /// The output as JSON, before `to_model_output` projects it (what events and clients
    /// receive; the model's view is derived from it).
    pub output: &'a Value,
    /// What the model would see: the projection of `output`.
    pub model: &'a ModelOutput,
}

impl<'a> OutputCheck<'a> {
    /// The check of `call`'s `output`, which the model would see as `model`.
    pub fn new(call: InputCheck<'a>, output: &'a Value, model: &'a ModelOutput) -> Self {
        OutputCheck {
            call,
            output,
            model,
        }
    }

    /// The output as text, for scanning: a string output as it is, anything else as JSON.
    pub fn text(&self) -> std::borrow::Cow<'a, str> {
        match self.output {
            Value::String(text) => std::borrow::Cow::Borrowed(text),
            other => std::borrow::Cow::Owned(other.to_string()),
        }
    }
}

impl std::fmt::Debug for OutputCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputCheck")
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}

/// Erased input guardrail of a tool (the adapter `#[tool(guardrails(input = path))]`
/// generates around the user's fn).
pub type InputGuardrailFn = for<'a> fn(&'a InputCheck<'a>) -> BoxFuture<'a, InputVerdict>;
/// Erased output guardrail of a tool (`#[tool(guardrails(output = path))]`).
pub type OutputGuardrailFn = for<'a> fn(&'a OutputCheck<'a>) -> BoxFuture<'a, OutputVerdict>;

/// A tool's own guardrails, with the names events report them by (the paths as written).
#[derive(Clone, Copy, Debug, Default)]
pub struct GuardrailSpec {
    /// The input guardrail and its name.
    pub input: Option<(&'static str, InputGuardrailFn)>,
    /// The output guardrail and its name.
    pub output: Option<(&'static str, OutputGuardrailFn)>,
}

impl GuardrailSpec {
    /// No guardrails.
    pub const NONE: GuardrailSpec = GuardrailSpec {
        input: None,
        output: None,
    };
}

/// An input guardrail a runtime runs before every call the model, a subagent or a schedule
/// makes (`RuntimeBuilder::input_guardrail`). Any `Fn(&InputCheck<'_>) -> InputVerdict` is
/// one; implement the trait for a check that awaits (a moderation service).
pub trait InputGuardrail: Send + Sync + 'static {
    /// Judges one call.
    fn check<'a>(&'a self, call: &'a InputCheck<'a>) -> BoxFuture<'a, InputVerdict>;
}

impl<F> InputGuardrail for F
where
    F: Fn(&InputCheck<'_>) -> InputVerdict + Send + Sync + 'static,
{
    fn check<'a>(&'a self, call: &'a InputCheck<'a>) -> BoxFuture<'a, InputVerdict> {
        Box::pin(std::future::ready(self(call)))
    }
}

/// An output guardrail a runtime runs on every successful call before the model sees its
/// result (`RuntimeBuilder::output_guardrail`). Any `Fn(&OutputCheck<'_>) -> OutputVerdict`
/// is one; implement the trait for a check that awaits.
pub trait OutputGuardrail: Send + Sync + 'static {
    /// Judges one output.
    fn check<'a>(&'a self, call: &'a OutputCheck<'a>) -> BoxFuture<'a, OutputVerdict>;
}

impl<F> OutputGuardrail for F
where
    F: Fn(&OutputCheck<'_>) -> OutputVerdict + Send + Sync + 'static,
{
    fn check<'a>(&'a self, call: &'a OutputCheck<'a>) -> BoxFuture<'a, OutputVerdict> {
        Box::pin(std::future::ready(self(call)))
    }
}

/// What an input guardrail fn of a tool may return: a verdict, or a future of one (an
/// `async fn`).
#[diagnostic::on_unimplemented(
    message = "an input guardrail must return `InputVerdict` or a future of one, not `{Self}`",
    note = "write `fn my_guardrail(check: &InputCheck<'_>) -> InputVerdict` (or an `async fn`)"
)]
pub trait IntoInputVerdict {
    /// The future yielding the verdict.
    type Future: Future<Output = InputVerdict> + Send;
    /// Converts into that future.
    fn into_verdict(self) -> Self::Future;
}

impl IntoInputVerdict for InputVerdict {
    type Future = std::future::Ready<InputVerdict>;
    fn into_verdict(self) -> Self::Future {
        std::future::ready(self)
    }
}

impl<F: Future<Output = InputVerdict> + Send> IntoInputVerdict for F {
    type Future = F;
    fn into_verdict(self) -> F {
        self
    }
}

/// What an output guardrail fn of a tool may return: a verdict, or a future of one.
#[diagnostic::on_unimplemented(
    message = "an output guardrail must return `OutputVerdict` or a future of one, not `{Self}`",
    note = "write `fn my_guardrail(check: &OutputCheck<'_>) -> OutputVerdict` (or an `async fn`)"
)]
pub trait IntoOutputVerdict {
    /// The future yielding the verdict.
    type Future: Future<Output = OutputVerdict> + Send;
    /// Converts into that future.
    fn into_verdict(self) -> Self::Future;
}

impl IntoOutputVerdict for OutputVerdict {
    type Future = std::future::Ready<OutputVerdict>;
    fn into_verdict(self) -> Self::Future {
        std::future::ready(self)
    }
}

impl<F: Future<Output = OutputVerdict> + Send> IntoOutputVerdict for F {
    type Future = F;
    fn into_verdict(self) -> F {
        self
    }
}

/// What a `prepare` fn decides about a tool for one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preparation {
    /// Offer the tool as it is.
    Keep,
    /// Leave it out of this step's list and refuse calls to it, as a disabled conditional tool.
    Hide,
    /// Offer it with this description instead (for this step only).
    Describe(String),
}

/// What a `prepare` fn sees: the session, its state, and the tool as the model would see it.
#[derive(Debug)]
#[non_exhaustive]
pub struct PrepareContext<'a> {
    /// The session.
    pub session: &'a SessionInfo,
    /// The session's persistent key-value state.
    pub state: &'a Map<String, Value>,
    /// Who the list is for: the model, a subagent or the user interface.
    pub caller: Caller,
    /// The tool's model-facing name.
    pub tool_name: &'a str,
    /// Its description now (a tool's own `prepare` may have changed it before a runtime's
    /// `prepare_tools` sees it).
    pub description: &'a str,
}

impl<'a> PrepareContext<'a> {
    /// The view of tool `tool_name`, described as `description`, in `session` with `state`.
    pub fn new(
        session: &'a SessionInfo,
        state: &'a Map<String, Value>,
        caller: Caller,
        tool_name: &'a str,
        description: &'a str,
    ) -> Self {
        PrepareContext {
            session,
            state,
            caller,
            tool_name,
            description,
        }
    }

    /// Whether the state key `key` holds `true`.
    pub fn flag(&self, key: &str) -> bool {
        self.state
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// A tool's `prepare` fn (`#[tool(prepare = path)]`), evaluated at each step.
pub type PrepareFn = fn(&PrepareContext<'_>) -> Preparation;

/// A runtime's preparation of every tool (`RuntimeBuilder::prepare_tools`), evaluated at each
/// step after the tools' own. Any `Fn(&PrepareContext<'_>) -> Preparation` is one.
pub trait PrepareTools: Send + Sync + 'static {
    /// Decides about one tool for this step.
    fn prepare(&self, cx: &PrepareContext<'_>) -> Preparation;
}

impl<F> PrepareTools for F
where
    F: Fn(&PrepareContext<'_>) -> Preparation + Send + Sync + 'static,
{
    fn prepare(&self, cx: &PrepareContext<'_>) -> Preparation {
        self(cx)
    }
}
