//! The model handle: a tool asks a model through `ctx.model()`, for text or for a structured
//! result checked against a Rust type.
//!
//! The handle talks to a [`ModelBackend`] the host installs: one request, one reply. Over MCP
//! the backend is the client's own model (MCP sampling); an application that runs its own model
//! installs one on the runtime. Without a backend, asking fails with an error that says how to
//! install one.
//!
//! In `durable` and `workflow` tools the answer is journaled like a step: a replay returns the
//! recorded answer without asking the model again. Each ask is a step named `model#<n>` (the
//! n-th ask of the call, from 1) unless [`Prompt::step`] names it.
//!
//! A prompt may name tools ([`Prompt::tools`]): the model then works in a scratch session of
//! its own with those tools, and a workflow body may hand work to a named subagent
//! ([`crate::WorkflowContext::agent`]). Both need a backend that runs sessions (the model
//! loop's); every request carries its [`ModelOrigin`], the call that asked, so such a backend
//! can name the sessions after the call, count what they use against its turn, and limit how
//! deep delegation goes. What an answer used comes back as [`ModelReply::usage`] and is summed
//! per call ([`crate::CallContext::model_usage`]).
//!
//! ```
//! use std::sync::Arc;
//! use futures_util::future::BoxFuture;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use toolwright_core::model::{ModelBackend, ModelReply, ModelRequest};
//! use toolwright_core::{CallContext, DetachedHost, PlainParam, ToolContext, ToolError};
//!
//! /// A backend that always gives the same answer (a test double).
//! struct Canned(&'static str);
//!
//! impl ModelBackend for Canned {
//!     fn complete(&self, _request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
//!         Box::pin(async move { Ok(ModelReply::new("canned-1", self.0)) })
//!     }
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Verdict {
//!     spam: bool,
//! }
//!
//! # futures_executor::block_on(async {
//! let host = DetachedHost::default().with_model(Canned("```json\n{\"spam\": true}\n```"));
//! let cx = CallContext::builder().host(Arc::new(host)).build();
//! let ctx = ToolContext::from_call(&cx)?;
//! let verdict: Verdict = ctx
//!     .model()
//!     .prompt("Is this comment spam? 'Buy cheap watches'")
//!     .system("You moderate comments.")
//!     .max_tokens(200)
//!     .result()
//!     .await?;
//! assert!(verdict.spam);
//! # Ok::<(), ToolError>(())
//! # }).unwrap();
//! ```

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ErrorCode, ToolError, quoted_prefix};
use crate::schema::{InputValidator, model_facing, schema_of};
use crate::session::{Caller, SessionInfo};

/// The most tokens a reply may have when the prompt does not say ([`Prompt::max_tokens`]).
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

/// Who speaks in a [`ModelMessage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    /// The person (or the tool) asking.
    User,
    /// The model.
    Assistant,
}

/// One message of the conversation a [`ModelRequest`] sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelMessage {
    /// Who speaks.
    pub role: MessageRole,
    /// What they say.
    pub text: String,
}

impl ModelMessage {
    /// A message from the user.
    pub fn user(text: impl Into<String>) -> Self {
        ModelMessage {
            role: MessageRole::User,
            text: text.into(),
        }
    }

    /// A message from the model (an earlier answer, or an example).
    pub fn assistant(text: impl Into<String>) -> Self {
        ModelMessage {
            role: MessageRole::Assistant,
            text: text.into(),
        }
    }
}

/// What a tool asks a model: what [`ModelBackend::complete`] receives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The conversation, oldest first; the last message is the user's.
    pub messages: Vec<ModelMessage>,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The most tokens the reply may have.
    pub max_tokens: u32,
    /// The sampling temperature, when the tool sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Sequences that end the reply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Names of the tools the model may call in its session (registry names). A backend that
    /// cannot run them fails (see [`ModelRequest::refuse_tools`]); it never answers without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The JSON Schema the answer must match, when the tool asked for a structured result
    /// ([`Prompt::result`]). A backend without structured output adds
    /// [`ModelRequest::result_instruction`] to the system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_schema: Option<Value>,
    /// The subagent that answers, when a workflow body handed the work to one
    /// ([`crate::WorkflowContext::agent`]). A backend that cannot run subagents fails (see
    /// [`ModelRequest::refuse_tools`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The call that asked, filled in by the handle (never sent to a model).
    #[serde(skip)]
    pub origin: Option<ModelOrigin>,
}

/// The call a [`ModelRequest`] comes from: its session and turn, the call, and which of the
/// call's asks this is. Deterministic across re-runs of a durable or workflow body, so a
/// backend can find again what an earlier run of the same ask started.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelOrigin {
    /// The session and turn of the call, with its identities.
    pub session: SessionInfo,
    /// The call id.
    pub call_id: String,
    /// The resolved tool name.
    pub tool: String,
    /// Who issued the call.
    pub caller: Caller,
    /// Which ask of the call this is (from 1, in the body's order).
    pub ordinal: u64,
    /// Whether the answer is journaled (durable and workflow contexts).
    pub journaled: bool,
}

impl ModelOrigin {
    /// The origin of the `ordinal`-th ask of call `call_id` to `tool` in `session`.
    pub fn new(
        session: SessionInfo,
        call_id: impl Into<String>,
        tool: impl Into<String>,
        ordinal: u64,
    ) -> Self {
        ModelOrigin {
            session,
            call_id: call_id.into(),
            tool: tool.into(),
            caller: Caller::Model,
            ordinal,
            journaled: false,
        }
    }
}

/// What a model answer used: requests, tool calls and tokens, and their cost when the backend
/// knows the price. Summed over a call's asks ([`crate::CallContext::model_usage`]) so the
/// model loop counts them against the turn's budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Model requests sent.
    #[serde(default)]
    pub requests: u64,
    /// Tool calls the model made (in a scratch or subagent session).
    #[serde(default)]
    pub tool_calls: u64,
    /// Input tokens, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_input_tokens: u64,
    /// The cost, in the unit of the backend's prices (0 when it has none).
    #[serde(default)]
    pub cost: f64,
}

impl ModelUsage {
    /// `error`, a failed ask's, saying what the ask used before it failed (in its details,
    /// under `usage`): the handle counts it like a reply's.
    pub fn attach(self, error: ToolError) -> ToolError {
        let mut details = error
            .details_value()
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        details.insert(
            "usage".into(),
            serde_json::to_value(self).unwrap_or(Value::Null),
        );
        error.details(Value::Object(details))
    }

    /// What a failed ask used, when its backend said ([`ModelUsage::attach`]).
    pub fn of_error(error: &ToolError) -> Option<ModelUsage> {
        let usage = error.details_value()?.get("usage")?;
        serde_json::from_value(usage.clone()).ok()
    }
}

/// Saturating: the counts come from providers' answers and from stored results, which may say
/// anything.
impl std::ops::AddAssign for ModelUsage {
    fn add_assign(&mut self, other: ModelUsage) {
        self.requests = self.requests.saturating_add(other.requests);
        self.tool_calls = self.tool_calls.saturating_add(other.tool_calls);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.cache_write_input_tokens = self
            .cache_write_input_tokens
            .saturating_add(other.cache_write_input_tokens);
        self.cost += other.cost;
    }
}

impl ModelRequest {
    /// A request of one user message, with [`DEFAULT_MAX_TOKENS`].
    pub fn new(prompt: impl Into<String>) -> Self {
        Self::conversation(vec![ModelMessage::user(prompt)])
    }

    /// A request that sends `messages`, with [`DEFAULT_MAX_TOKENS`].
    pub fn conversation(messages: Vec<ModelMessage>) -> Self {
        ModelRequest {
            messages,
            system: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: None,
            stop: Vec::new(),
            tools: Vec::new(),
            result_schema: None,
            agent: None,
            origin: None,
        }
    }

    /// For a structured result, the instruction a backend without structured output adds to
    /// the system prompt: answer with JSON that matches the schema, and nothing else.
    pub fn result_instruction(&self) -> Option<String> {
        let schema = self.result_schema.as_ref()?;
        Some(format!(
            "Answer with one JSON value that matches this JSON Schema, and nothing else:\n{schema}"
        ))
    }

    /// `self.system` followed by [`ModelRequest::result_instruction`]: the system prompt of a
    /// backend without structured output.
    pub fn system_with_result_instruction(&self) -> Option<String> {
        match (&self.system, self.result_instruction()) {
            (Some(system), Some(instruction)) => Some(format!("{system}\n\n{instruction}")),
            (system, instruction) => system.clone().or(instruction),
        }
    }

    /// Fails, naming the tools, when the request asks for tools or a subagent: what a backend
    /// that cannot run sessions returns, `why` saying why (and what to do instead). Never drop them silently: a
    /// model without its tools answers something else.
    ///
    /// ```
    /// use toolwright_core::model::ModelRequest;
    /// let request = ModelRequest::new("Find the failing check");
    /// assert!(request.refuse_tools("unused").is_ok());
    /// ```
    pub fn refuse_tools(&self, why: impl fmt::Display) -> Result<(), ToolError> {
        if let Some(agent) = &self.agent {
            return Err(ToolError::with_code(
                ErrorCode::MissingState,
                format!(
                    "the work was handed to subagent `{}`, and {why}",
                    quoted_prefix(agent)
                ),
            ));
        }
        if self.tools.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = self
            .tools
            .iter()
            .map(|t| format!("`{}`", quoted_prefix(t)))
            .collect();
        Err(ToolError::with_code(
            ErrorCode::MissingState,
            format!(
                "the model was asked to use tools ({}), and {why}",
                names.join(", ")
            ),
        ))
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It reached the token limit: the answer may be cut short.
    MaxTokens,
    /// It wrote one of the stop sequences.
    StopSequence,
    /// It wants to call a tool.
    ToolUse,
    /// A reason the backend names another way.
    Other(String),
}

/// A model's answer: what [`ModelBackend::complete`] returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelReply {
    /// The answer's text.
    pub text: String,
    /// The model that answered, as the backend names it.
    pub model: String,
    /// Why it stopped, when the backend says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// What answering used, when the backend counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ModelUsage>,
    /// The session the answer was worked out in, when the backend opened one (a scratch or
    /// subagent session, kept for inspection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl ModelReply {
    /// The answer `text` of `model`.
    pub fn new(model: impl Into<String>, text: impl Into<String>) -> Self {
        ModelReply {
            text: text.into(),
            model: model.into(),
            stop_reason: None,
            usage: None,
            session: None,
        }
    }

    /// `self` saying why the model stopped.
    pub fn stop_reason(mut self, reason: StopReason) -> Self {
        self.stop_reason = Some(reason);
        self
    }

    /// `self` saying what answering used.
    pub fn usage(mut self, usage: ModelUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// `self` naming the session the answer was worked out in.
    pub fn session(mut self, id: impl Into<String>) -> Self {
        self.session = Some(id.into());
        self
    }
}

/// Where a tool's model requests go: one request, one reply. The host installs it (see
/// [`CallHost::model`](crate::CallHost::model)): the MCP server's is the client's model through
/// MCP sampling; an application installs its own on the runtime.
///
/// A backend that cannot honour part of a request fails with an error that says so and what to
/// do instead: requested tools it cannot run ([`ModelRequest::refuse_tools`]), a client that
/// cannot sample. It never answers a different question than the one asked.
pub trait ModelBackend: Send + Sync + 'static {
    /// Answers `request`.
    fn complete(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>>;
}

impl fmt::Debug for dyn ModelBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ModelBackend")
    }
}

/// What the model handle needs of the call it belongs to. The context implements it, so this
/// module does not import the context's (which imports this one's handle).
pub(crate) trait CallScope: Send + Sync + 'static {
    /// The backend the host installed.
    fn backend(&self) -> Option<Arc<dyn ModelBackend>>;
    /// The resolved tool name, for messages.
    fn tool_name(&self) -> &str;
    /// The ordinal (from 1) of the call's next ask: deterministic on every run of the body.
    fn next_model_call(&self) -> u64;
    /// Where the `ordinal`-th ask of the call comes from.
    fn origin(&self, ordinal: u64, journaled: bool) -> ModelOrigin;
    /// Adds what an answer used to the call's sum.
    fn spend(&self, usage: ModelUsage);
    /// Runs or replays the journaled step `name` (see [`crate::CallHost::step`]).
    fn journal<'a>(
        &'a self,
        name: &'a str,
        run: BoxFuture<'a, Result<Value, ToolError>>,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}

/// The model handle of a tool's context (`ctx.model()`): asks the model the host installed.
#[derive(Clone)]
pub struct ModelHandle {
    scope: Arc<dyn CallScope>,
    /// Whether answers are journaled (durable and workflow contexts).
    journaled: bool,
}

impl fmt::Debug for ModelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelHandle")
            .field("tool", &self.scope.tool_name())
            .field("journaled", &self.journaled)
            .finish()
    }
}

impl ModelHandle {
    pub(crate) fn new(scope: Arc<dyn CallScope>, journaled: bool) -> Self {
        ModelHandle { scope, journaled }
    }

    /// Whether a model is available to this call (else asking fails with an error that says
    /// how to install one).
    pub fn is_available(&self) -> bool {
        self.scope.backend().is_some()
    }

    /// A prompt of one user message; set its options, then ask with [`Prompt::text`] or
    /// [`Prompt::result`].
    pub fn prompt(&self, text: impl Into<String>) -> Prompt {
        self.request(ModelRequest::new(text))
    }

    /// A prompt that sends `request` as it is (a conversation of several messages).
    pub fn request(&self, request: ModelRequest) -> Prompt {
        Prompt {
            handle: self.clone(),
            request,
            step: None,
        }
    }
}

/// A subagent a workflow body hands work to ([`crate::WorkflowContext::agent`]): each
/// [`AgentHandle::send`] is a prompt the subagent answers in a session of its own, with its
/// own instructions, tools and budget, as the host configured it (the model loop's
/// `Subagent`). Its approvals and questions reach the person of the body's session; its
/// answer is journaled like any ask (`agent:<name>#<n>` unless [`Prompt::step`] names it), so
/// a replay does not run it again.
#[derive(Clone, Debug)]
pub struct AgentHandle {
    handle: ModelHandle,
    name: String,
}

impl AgentHandle {
    pub(crate) fn new(handle: ModelHandle, name: String) -> Self {
        AgentHandle { handle, name }
    }

    /// The subagent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A task for the subagent; set its options, then wait for the answer with
    /// [`Prompt::text`] or [`Prompt::result`].
    pub fn send(&self, text: impl Into<String>) -> Prompt {
        let mut prompt = self.handle.prompt(text);
        prompt.request.agent = Some(self.name.clone());
        prompt
    }
}

/// A request being built by the model handle; nothing is sent until [`Prompt::text`],
/// [`Prompt::result`] or [`Prompt::reply`].
#[derive(Debug)]
#[must_use = "a prompt asks nothing until `.text()`, `.result()` or `.reply()` is awaited"]
pub struct Prompt {
    handle: ModelHandle,
    request: ModelRequest,
    step: Option<String>,
}

impl Prompt {
    /// The system prompt.
    pub fn system(mut self, text: impl Into<String>) -> Self {
        self.request.system = Some(text.into());
        self
    }

    /// The most tokens the reply may have (default [`DEFAULT_MAX_TOKENS`]).
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.request.max_tokens = tokens;
        self
    }

    /// The sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.request.temperature = Some(temperature);
        self
    }

    /// One more sequence that ends the reply.
    pub fn stop(mut self, sequence: impl Into<String>) -> Self {
        self.request.stop.push(sequence.into());
        self
    }

    /// The tools (registry names) the model may call in its session. A backend that cannot run
    /// them fails with an error naming them.
    pub fn tools<I>(mut self, names: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.request.tools.extend(names.into_iter().map(Into::into));
        self
    }

    /// The name of the journal step that records the answer in durable and workflow contexts
    /// (default `model#<n>`, the n-th ask of the call). Names must be deterministic and unique
    /// within the call, as every step name.
    pub fn step(mut self, name: impl Into<String>) -> Self {
        self.step = Some(name.into());
        self
    }

    /// Asks, and returns the whole reply (text, model, stop reason).
    pub async fn reply(self) -> Result<ModelReply, ToolError> {
        self.ask(None).await
    }

    /// Asks, and returns the answer's text.
    pub async fn text(self) -> Result<String, ToolError> {
        Ok(self.ask(None).await?.text)
    }

    /// Asks for an answer of type `T`: the request carries `T`'s JSON Schema, and the answer
    /// (JSON, alone or in a fenced ```` ```json ```` block) is checked against it before it is
    /// read. A mismatch fails with an error that lists each failing place and why; in a durable
    /// or workflow context nothing is recorded then, so a re-run asks again.
    pub async fn result<T>(self) -> Result<T, ToolError>
    where
        T: JsonSchema + DeserializeOwned + 'static,
    {
        let check = ResultCheck::of::<T>();
        let reply = self.ask(Some(Arc::clone(&check))).await?;
        let value = check.value(&reply.text)?;
        serde_json::from_value(value).map_err(|error| check.unreadable(&error))
    }

    async fn ask(self, check: Option<Arc<ResultCheck>>) -> Result<ModelReply, ToolError> {
        let Prompt {
            handle,
            mut request,
            step,
        } = self;
        let scope = &handle.scope;
        // Counted before anything can fail, so the default names of later asks do not depend on
        // whether an earlier one succeeded.
        let ordinal = scope.next_model_call();
        let backend = scope
            .backend()
            .ok_or_else(|| no_backend(scope.tool_name()))?;
        if let Some(check) = &check {
            request.result_schema = Some(check.schema.clone());
        }
        request.origin = Some(scope.origin(ordinal, handle.journaled));
        let default_name = match &request.agent {
            Some(agent) => format!("agent:{agent}#{ordinal}"),
            None => format!("model#{ordinal}"),
        };
        let failing = Arc::clone(scope);
        let asking = async move {
            // What a failed ask used counts all the same (a subagent stopped at its limit).
            let reply = backend.complete(request).await.inspect_err(|error| {
                if let Some(usage) = ModelUsage::of_error(error) {
                    failing.spend(usage);
                }
            })?;
            if let Some(check) = &check {
                check.value(&reply.text)?;
            }
            Ok::<_, ToolError>(reply)
        };
        if !handle.journaled {
            let reply = asking.await?;
            if let Some(usage) = reply.usage {
                scope.spend(usage);
            }
            return Ok(reply);
        }
        let name = step.unwrap_or(default_name);
        let journaled = Box::pin(async move {
            let reply = asking.await?;
            serde_json::to_value(reply).map_err(|e| {
                ToolError::with_code(
                    ErrorCode::Journal,
                    format!("a model reply is not JSON: {e}"),
                )
            })
        });
        let recorded = scope.journal(&name, journaled).await?;
        let reply: ModelReply = serde_json::from_value(recorded).map_err(|error| {
            ToolError::with_code(
                ErrorCode::Journal,
                format!(
                    "the journal holds a value for step `{name}` that is not a model reply: {error}; did the tool change since it was recorded?"
                ),
            )
        })?;
        // A replayed answer counts as much as it cost when it was recorded: the call's result
        // carries the sum of every answer it used, once.
        if let Some(usage) = reply.usage {
            scope.spend(usage);
        }
        Ok(reply)
    }
}

/// The error of an ask with no model installed.
fn no_backend(tool: &str) -> ToolError {
    let tool = if tool.is_empty() { "this tool" } else { tool };
    ToolError::with_code(
        ErrorCode::MissingState,
        format!(
            "`{tool}` asks a model, and none is available to it: install one with `RuntimeBuilder::model`, or call the tool over MCP from a client that supports sampling"
        ),
    )
}

/// What checks a structured answer: `T`'s schema and its compiled validator, made once per type
/// and process.
struct ResultCheck {
    type_name: &'static str,
    schema: Value,
    validator: Option<InputValidator>,
}

impl ResultCheck {
    fn of<T: JsonSchema + 'static>() -> Arc<ResultCheck> {
        static CHECKS: OnceLock<Mutex<HashMap<TypeId, Arc<ResultCheck>>>> = OnceLock::new();
        let checks = CHECKS.get_or_init(Default::default);
        if let Some(check) = checks
            .lock()
            .ok()
            .and_then(|c| c.get(&TypeId::of::<T>()).cloned())
        {
            return check;
        }
        let schema = model_facing(&schema_of::<T>(true));
        // A schema that does not compile (a type whose `JsonSchema` impl is hand-written and
        // wrong) still reads the answer through serde: the check is the type's own.
        let validator = InputValidator::compile(&schema).ok();
        let check = Arc::new(ResultCheck {
            type_name: std::any::type_name::<T>(),
            schema,
            validator,
        });
        if let Ok(mut checks) = checks.lock() {
            checks.insert(TypeId::of::<T>(), Arc::clone(&check));
        }
        check
    }

    /// The JSON in `answer`, checked against the schema.
    fn value(&self, answer: &str) -> Result<Value, ToolError> {
        let value = json_in(answer).map_err(|error| {
            ToolError::new(format!(
                "the model's answer is not JSON for `{}` ({error}): {:?}; ask again, saying to answer with JSON only",
                self.type_name,
                quoted_prefix(answer.trim())
            ))
        })?;
        let Some(validator) = &self.validator else {
            return Ok(value);
        };
        match validator.check(self.type_name, &value) {
            Ok(()) => Ok(value),
            Err(error) => {
                let problems: Vec<String> = error
                    .problems
                    .iter()
                    .map(|p| {
                        let at = if p.pointer.is_empty() {
                            "(root)".into()
                        } else {
                            quoted_prefix(&p.pointer)
                        };
                        format!("\n- {at}: {}", p.message)
                    })
                    .collect();
                let details = serde_json::to_value(&error.problems).unwrap_or(Value::Null);
                Err(ToolError::new(format!(
                    "the model's answer does not match the schema of `{}`:{}",
                    self.type_name,
                    problems.concat()
                ))
                .details(details))
            }
        }
    }

    fn unreadable(&self, error: &serde_json::Error) -> ToolError {
        ToolError::new(format!(
            "the model's answer matches the schema of `{}` but cannot be read as one: {error}",
            self.type_name
        ))
    }
}

/// The JSON value in a model's answer: the whole answer, or else the first fenced block in it
/// (```` ```json ```` or a bare ```` ``` ````), since models often wrap JSON that way.
fn json_in(answer: &str) -> Result<Value, serde_json::Error> {
    let whole = serde_json::from_str(answer.trim());
    if whole.is_ok() {
        return whole;
    }
    fenced(answer).map_or(whole, |block| serde_json::from_str(block.trim()))
}

/// The text of the first fenced code block in `text`, without its language tag.
fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")? + 3;
    let rest = &text[start..];
    // The info string (`json`) runs to the end of the opening line.
    let body = match rest.find('\n') {
        Some(line_end) if !rest[..line_end].contains('{') && !rest[..line_end].contains('[') => {
            &rest[line_end + 1..]
        }
        _ => rest
            .trim_start_matches(|c: char| c.is_ascii_alphabetic())
            .trim_start(),
    };
    let end = body.find("```").unwrap_or(body.len());
    Some(&body[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{CallContext, DetachedHost, DurableParam, HostEvent, PlainParam};
    use crate::{DurableContext, ToolContext};

    /// Answers every request with `answer`, recording what it was asked.
    struct Canned {
        answer: &'static str,
        asked: Arc<Mutex<Vec<ModelRequest>>>,
    }

    impl ModelBackend for Canned {
        fn complete(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
            self.asked.lock().unwrap().push(request);
            Box::pin(async move { Ok(ModelReply::new("canned", self.answer)) })
        }
    }

    fn canned(answer: &'static str) -> (Arc<DetachedHost>, Arc<Mutex<Vec<ModelRequest>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let backend = Canned {
            answer,
            asked: Arc::clone(&asked),
        };
        (Arc::new(DetachedHost::default().with_model(backend)), asked)
    }

    fn plain(host: &Arc<DetachedHost>) -> ToolContext {
        let cx = CallContext::builder()
            .tool_name("triage")
            .host(Arc::clone(host) as Arc<dyn crate::CallHost>)
            .build();
        ToolContext::from_call(&cx).unwrap()
    }

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    struct Triage {
        /// How bad it is.
        #[schemars(range(min = 1, max = 5))]
        severity: u8,
        team: String,
    }

    #[test]
    fn a_structured_answer_is_checked_against_the_type_and_each_failure_named() {
        let (host, asked) = canned("```json\n{\"severity\": 9}\n```");
        let error =
            futures_executor::block_on(plain(&host).model().prompt("triage").result::<Triage>())
                .unwrap_err();
        let message = error.message();
        assert!(
            message.starts_with("the model's answer does not match the schema of `"),
            "{message}"
        );
        assert!(message.contains("Triage`:"), "{message}");
        assert!(
            message.contains("\n- /severity: 9 is greater than the maximum of 5"),
            "{message}"
        );
        assert!(message.contains("\n- /team: "), "{message}");
        let details = error.details_value().unwrap().as_array().unwrap();
        assert_eq!(details.len(), 2, "{details:?}");
        // The request carried the type's schema, and the system prompt was left to the backend.
        let request = asked.lock().unwrap()[0].clone();
        let schema = request.result_schema.unwrap();
        assert_eq!(schema["properties"]["severity"]["maximum"], 5);
        assert_eq!(request.system, None);

        let (host, _) = canned("I think it is a severity 2 for the web team.");
        let error =
            futures_executor::block_on(plain(&host).model().prompt("triage").result::<Triage>())
                .unwrap_err();
        assert!(
            error.message().contains("is not JSON for `") && error.message().contains("ask again"),
            "{}",
            error.message()
        );

        let (host, _) = canned("{\"severity\": 2, \"team\": \"web\"}");
        let triage =
            futures_executor::block_on(plain(&host).model().prompt("triage").result::<Triage>())
                .unwrap();
        assert_eq!(
            triage,
            Triage {
                severity: 2,
                team: "web".into()
            }
        );
    }

    #[test]
    fn options_reach_the_backend_and_a_missing_backend_says_how_to_install_one() {
        let (host, asked) = canned("fine");
        let text = futures_executor::block_on(
            plain(&host)
                .model()
                .prompt("How is it?")
                .system("Be brief.")
                .max_tokens(50)
                .temperature(0.5)
                .stop("END")
                .tools(["search"])
                .text(),
        )
        .unwrap();
        assert_eq!(text, "fine");
        let request = asked.lock().unwrap()[0].clone();
        assert_eq!(request.messages, vec![ModelMessage::user("How is it?")]);
        assert_eq!(request.system.as_deref(), Some("Be brief."));
        assert_eq!(request.max_tokens, 50);
        assert_eq!(request.temperature, Some(0.5));
        assert_eq!(request.stop, vec!["END".to_owned()]);
        assert_eq!(request.tools, vec!["search".to_owned()]);
        // A plain tool's asks are not steps.
        assert!(host.events().is_empty(), "{:?}", host.events());

        let bare = Arc::new(DetachedHost::default());
        let ctx = plain(&bare);
        assert!(!ctx.model().is_available());
        let error = futures_executor::block_on(ctx.model().prompt("hi").text()).unwrap_err();
        assert_eq!(error.code(), ErrorCode::MissingState);
        assert!(
            error.message().starts_with("`triage` asks a model, and none is available to it: install one with `RuntimeBuilder::model`"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn a_durable_context_journals_each_ask_as_a_numbered_or_named_step() {
        let (host, _) = canned("ok");
        let cx = CallContext::builder()
            .host(Arc::clone(&host) as Arc<dyn crate::CallHost>)
            .build();
        let ctx = DurableContext::from_call(&cx).unwrap();
        futures_executor::block_on(async {
            ctx.model().prompt("one").text().await.unwrap();
            ctx.model()
                .prompt("two")
                .step("summary")
                .text()
                .await
                .unwrap();
            ctx.model().prompt("three").text().await.unwrap();
        });
        assert_eq!(
            host.events(),
            vec![
                HostEvent::Step("model#1".into()),
                HostEvent::Step("summary".into()),
                HostEvent::Step("model#3".into()),
            ]
        );
    }

    #[test]
    fn json_is_found_alone_or_in_a_fence() {
        assert_eq!(
            json_in(" {\"a\": 1} ").unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            json_in("Here it is:\n```json\n{\"a\": 2}\n```\nDone.").unwrap(),
            serde_json::json!({"a": 2})
        );
        assert_eq!(
            json_in("```\n[1, 2]\n```").unwrap(),
            serde_json::json!([1, 2])
        );
        assert_eq!(
            json_in("```json {\"a\": 3}```").unwrap(),
            serde_json::json!({"a": 3})
        );
        assert!(json_in("no json here").is_err());
    }

    #[test]
    fn the_system_prompt_gains_the_result_instruction() {
        let mut request = ModelRequest::new("hi");
        assert_eq!(request.system_with_result_instruction(), None);
        request.result_schema = Some(serde_json::json!({"type": "boolean"}));
        let system = request.system_with_result_instruction().unwrap();
        assert!(system.starts_with("Answer with one JSON value"), "{system}");
        request.system = Some("Be brief.".into());
        let system = request.system_with_result_instruction().unwrap();
        assert!(system.starts_with("Be brief.\n\nAnswer with"), "{system}");
    }

    #[test]
    fn requested_tools_are_refused_by_name() {
        let mut request = ModelRequest::new("hi");
        request.tools = vec!["search".into(), "fetch".into()];
        let error = request
            .refuse_tools("this backend runs no tools")
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::MissingState);
        assert_eq!(
            error.message(),
            "the model was asked to use tools (`search`, `fetch`), and this backend runs no tools"
        );
    }

    #[test]
    fn usage_sums_saturate() {
        let mut usage = ModelUsage {
            requests: u64::MAX,
            input_tokens: u64::MAX - 1,
            ..ModelUsage::default()
        };
        usage += ModelUsage {
            requests: 1,
            input_tokens: 5,
            output_tokens: 7,
            ..ModelUsage::default()
        };
        assert_eq!(usage.requests, u64::MAX);
        assert_eq!(usage.input_tokens, u64::MAX);
        assert_eq!(usage.output_tokens, 7);
    }
}
