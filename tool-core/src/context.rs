//! The context a tool receives: who is calling, cancellation, logs, partial results, typed state,
//! and (for durable and workflow tools) journaled steps.
//!
//! The runtime builds a [`CallContext`] for every call and installs a [`CallHost`] behind it; the
//! generated adapter of each tool turns it into the context type the tool's kind asks for:
//! [`ToolContext`] for plain tools, [`DurableContext`] for `durable` tools and [`WorkflowContext`]
//! for `workflow` tools. Which one a tool may take is checked at compile time through
//! [`PlainParam`], [`DurableParam`] and [`WorkflowParam`].

use std::any::{Any, TypeId};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::credentials::CredentialBroker;
use crate::error::{ErrorCode, ToolError};
use crate::model::{AgentHandle, CallScope, ModelBackend, ModelHandle, ModelOrigin, ModelUsage};
use crate::output::CallOutput;
use crate::sandbox::Sandbox;
use crate::session::{Caller, Principal, SessionInfo};
use crate::workflow::{AskAnswer, AskRequest};

mod credentials;
mod hook;
mod host;
mod params;
mod session;
mod version;

pub use hook::{Hook, HookEvent, HookHandle};
pub use host::{DetachedHost, HostEvent, StepNames};
pub use params::{DurableParam, PlainParam, Requirement, State, WorkflowParam};
pub use session::Messages;

/// Severity of a log line a tool emits (events only, never model-visible).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Debugging detail.
    Debug,
    /// Progress.
    Info,
    /// Something unexpected that the tool handled.
    Warn,
    /// A failure the tool reports before returning.
    Error,
}

/// Work a step does inside the store's own transaction (see [`DurableContext::step_in_store`]):
/// it gets the store's connection, inside the transaction that records the step, as `&mut dyn
/// Any` (for the Postgres store, a `sqlx_postgres::PgConnection`), and returns the step's value
/// as JSON. Captured data must be owned (`'static`): clone what the work needs into it.
pub type StoreWork = Box<
    dyn for<'c> FnOnce(&'c mut (dyn Any + Send)) -> BoxFuture<'c, Result<Value, ToolError>> + Send,
>;

/// What the runtime provides behind a context. The runtime implements it per call; the
/// [`DetachedHost`] serves direct calls in tests and examples.
pub trait CallHost: Send + Sync + 'static {
    /// Whether the call (or its turn) was cancelled.
    fn is_cancelled(&self) -> bool;
    /// Completes when the call is cancelled.
    fn cancelled(&self) -> BoxFuture<'_, ()>;
    /// Records a log line as an event.
    fn log(&self, level: LogLevel, message: &str);
    /// Publishes a partial result; it replaces the previous one and never enters the model's history.
    fn partial(&self, snapshot: Value);
    /// The application state of type `type_id`, if the host has it.
    fn state(&self, type_id: TypeId) -> Option<Arc<dyn Any + Send + Sync>>;
    /// Runs or replays the journaled step `name`.
    fn step<'a>(
        &'a self,
        name: &'a str,
        run: BoxFuture<'a, Result<Value, ToolError>>,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
    /// Asks a person; parks the run until answered.
    fn ask(&self, request: AskRequest) -> BoxFuture<'_, Result<AskAnswer, ToolError>>;
    /// Sleeps durably.
    fn sleep(&self, duration: Duration) -> BoxFuture<'_, Result<(), ToolError>>;
    /// The next call of a `serve` task after the first, in order; `None` when the task ends.
    fn serve_next(&self) -> BoxFuture<'_, Option<ServeIncoming>>;
    /// Hands back the result of one `serve` call, named by its [`ServeIncoming::key`] (`"#0"` for
    /// the call that started the task).
    fn serve_reply(&self, key: &str, output: Result<CallOutput, ToolError>);
    /// Whether the `serve` call named `key` ([`ServeIncoming::key`]) is cancelled (on its
    /// own, or with its task), as a journaled observation: a replay answers what the first run
    /// saw. The default: never.
    fn serve_call_is_cancelled<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, ToolError>> {
        let _ = key;
        Box::pin(std::future::ready(Ok(false)))
    }
    /// Completes when the `serve` call named `key` is cancelled (on its own, or with its
    /// task); live, not journaled. The default never completes.
    fn serve_call_cancelled<'a>(&'a self, key: &'a str) -> BoxFuture<'a, ()> {
        let _ = key;
        Box::pin(std::future::pending())
    }
    /// Waits `duration` in memory (between retries of a step). The default returns at once.
    fn delay(&self, duration: Duration) -> BoxFuture<'_, ()> {
        let _ = duration;
        Box::pin(std::future::ready(()))
    }
    /// Runs or replays the journaled step `name` with `work` inside the store's transaction, so
    /// its writes commit together with the step's record or not at all. The default (a host
    /// without a transactional store) refuses.
    fn step_in_store<'a>(
        &'a self,
        name: &'a str,
        work: StoreWork,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        drop(work);
        Box::pin(std::future::ready(Err(ToolError::with_code(
            ErrorCode::Journal,
            format!(
                "step `{name}` writes to the store's database, which needs a runtime whose store runs steps in its transactions (the Postgres store); run the tool through such a runtime"
            ),
        ))))
    }
    /// The sandbox the host installed, if any. The default has none.
    fn sandbox(&self) -> Option<Arc<dyn Sandbox>> {
        None
    }
    /// The credential broker the host installed, if any (see [`crate::credentials`]). The
    /// default has none.
    fn credentials(&self) -> Option<Arc<dyn CredentialBroker>> {
        None
    }
    /// Now on the host's clock, in milliseconds since the Unix epoch: what a token's expiry is
    /// checked against. The default reads the system clock.
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
    /// The model this call's `ctx.model()` asks, if any (see [`ModelBackend`]). The default
    /// has none.
    fn model(&self) -> Option<Arc<dyn ModelBackend>> {
        None
    }
    /// The value of `key` in the session's persistent state. The default (a host without
    /// sessions) has none.
    fn session_state<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>> {
        let _ = key;
        Box::pin(std::future::ready(Ok(None)))
    }
    /// Sets (`Some`) or removes (`None`) `key` in the session's persistent state. The default
    /// (a host without sessions) refuses.
    fn set_session_state<'a>(
        &'a self,
        key: &'a str,
        value: Option<Value>,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        drop(value);
        Box::pin(std::future::ready(Err(ToolError::with_code(
            ErrorCode::Unavailable,
            format!(
                "session state `{key}` cannot be written: this host keeps no session state; run the tool through the runtime"
            ),
        ))))
    }
    /// Whether the run takes the code behind version marker `marker` (see
    /// `DurableContext::patched`). The default (a host without a journal) always does.
    fn patched<'a>(&'a self, marker: &'a str) -> BoxFuture<'a, Result<bool, ToolError>> {
        let _ = marker;
        Box::pin(std::future::ready(Ok(true)))
    }
    /// Makes hook `name` of a workflow body, whose deliveries are checked against `schema`;
    /// with `url`, a webhook with the host's URL (see [`WorkflowContext::hook`]). The default
    /// (a host without a store) refuses.
    fn create_hook<'a>(
        &'a self,
        name: &'a str,
        schema: Value,
        url: bool,
    ) -> BoxFuture<'a, Result<HookHandle, ToolError>> {
        let _ = (schema, url);
        Box::pin(std::future::ready(Err(ToolError::with_code(
            ErrorCode::Journal,
            format!(
                "hook `{name}` needs the runtime's store to wait on: run the workflow through the runtime"
            ),
        ))))
    }
    /// Waits for `hook`'s delivery, at most `timeout` from the first wait: the answer is
    /// [`AskAnswer::Received`], [`AskAnswer::Timeout`] or [`AskAnswer::Cancelled`]. The default
    /// (a host without a store) refuses.
    fn wait_hook<'a>(
        &'a self,
        hook: &'a HookHandle,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Result<AskAnswer, ToolError>> {
        let _ = timeout;
        Box::pin(std::future::ready(Err(ToolError::with_code(
            ErrorCode::Journal,
            format!(
                "waiting on hook `{}` needs the runtime's store: run the workflow through the runtime",
                hook.name
            ),
        ))))
    }
    /// The model input of the step that made the call. The default has none.
    fn messages(&self) -> BoxFuture<'_, Result<Messages, ToolError>> {
        Box::pin(std::future::ready(Ok(Messages::default())))
    }
    /// The model input of the step that made the `serve` call named `key`. The default is the
    /// call's own ([`CallHost::messages`]).
    fn serve_call_messages<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Messages, ToolError>> {
        let _ = key;
        self.messages()
    }
}

/// One call delivered to a `serve` task.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeIncoming {
    /// The call id.
    pub call_id: String,
    /// What names the call to the host: unique within the task, where call ids (chosen by the
    /// model) may repeat across turns.
    pub key: String,
    /// The validated input, without `task_id`.
    pub input: Value,
}

/// Proof that a person approved this call; approval is consent, not borrowed identity.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalGrant {
    /// Who approved.
    pub responder: Option<Principal>,
}

struct Scope {
    session: SessionSlot,
    call_id: CallId,
    /// Shared with the tool (and the runtime's host): `None` for a context built without one.
    tool_name: Option<Arc<str>>,
    caller: Caller,
    approval: Option<ApprovalGrant>,
    host: HostSlot,
    /// How many times the call asked the model so far: names its journal steps.
    model_calls: AtomicU64,
    /// What the call's asks used so far (touched only when a model answers).
    model_usage: std::sync::Mutex<Option<ModelUsage>>,
}

impl CallScope for Scope {
    fn backend(&self) -> Option<Arc<dyn ModelBackend>> {
        self.host.get().model()
    }

    fn tool_name(&self) -> &str {
        self.tool_name.as_deref().unwrap_or_default()
    }

    fn next_model_call(&self) -> u64 {
        self.model_calls.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn origin(&self, ordinal: u64, journaled: bool) -> ModelOrigin {
        ModelOrigin {
            caller: self.caller,
            journaled,
            ..ModelOrigin::new(
                self.session.get().clone(),
                self.call_id.get().to_owned(),
                CallScope::tool_name(self).to_owned(),
                ordinal,
            )
        }
    }

    fn spend(&self, usage: ModelUsage) {
        let mut sum = self
            .model_usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *sum.get_or_insert_with(ModelUsage::default) += usage;
    }

    fn journal<'a>(
        &'a self,
        name: &'a str,
        run: BoxFuture<'a, Result<Value, ToolError>>,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.host.get().step(name, run)
    }
}

/// A call's session: the one its builder was given (shared: the calls of one step see the same
/// session), or the detached default, shared by every detached call instead of built for each.
enum SessionSlot {
    Given(Arc<SessionInfo>),
    Detached,
}

impl SessionSlot {
    fn get(&self) -> &SessionInfo {
        static DETACHED: std::sync::LazyLock<SessionInfo> =
            std::sync::LazyLock::new(|| SessionInfo::new("detached", "turn-1"));
        match self {
            SessionSlot::Given(session) => session,
            SessionSlot::Detached => &DETACHED,
        }
    }
}

/// A call's id: the one its builder was given, or a process-unique number written out as
/// `call-N` the first time someone reads it (most direct calls never do).
enum CallId {
    /// Shared with the runtime's host.
    Given(Arc<str>),
    Numbered(u64, std::sync::OnceLock<String>),
}

impl CallId {
    fn get(&self) -> &str {
        match self {
            CallId::Given(id) => id,
            CallId::Numbered(n, text) => text.get_or_init(|| format!("call-{n}")),
        }
    }
}

/// A call's host: the one its builder was given, or a [`DetachedHost`] of its own, made the
/// first time the call reaches for it (a direct call that logs nothing never does).
#[allow(clippy::large_enum_variant)] // reason: one per context, inside its `Arc`; a box would be the allocation this saves
enum HostSlot {
    Given(Arc<dyn CallHost>),
    Detached(std::sync::OnceLock<DetachedHost>),
}

impl HostSlot {
    fn get(&self) -> &dyn CallHost {
        match self {
            HostSlot::Given(host) => &**host,
            HostSlot::Detached(host) => host.get_or_init(DetachedHost::default),
        }
    }
}

/// The untyped context of one call, built by the runtime (or [`CallContext::builder`]) and turned
/// into the typed context a tool takes. Cheap to clone.
#[derive(Clone)]
pub struct CallContext(Arc<Scope>);

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("session", &self.0.session.get().id)
            .field("turn", &self.0.session.get().turn_id)
            .field("call_id", &self.0.call_id.get())
            .field("tool_name", &self.tool_name())
            .field("caller", &self.0.caller)
            .finish_non_exhaustive()
    }
}

static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// Builds a [`CallContext`].
#[derive(Debug)]
pub struct CallContextBuilder {
    session: Option<Arc<SessionInfo>>,
    call_id: Option<Arc<str>>,
    tool_name: Option<Arc<str>>,
    caller: Caller,
    approval: Option<ApprovalGrant>,
    host: Option<Arc<dyn CallHost>>,
}

impl std::fmt::Debug for dyn CallHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallHost")
    }
}

impl CallContextBuilder {
    /// The session of the call.
    pub fn session(mut self, session: SessionInfo) -> Self {
        self.session = Some(Arc::new(session));
        self
    }

    /// The session of the call, shared with other calls (a runtime's calls of one step see
    /// the same session, built once).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolwright_core::{CallContext, SessionInfo};
    ///
    /// let session = Arc::new(SessionInfo::new("s-1", "t-1"));
    /// let first = CallContext::builder().shared_session(Arc::clone(&session)).build();
    /// let second = CallContext::builder().shared_session(session).build();
    /// assert_eq!(first.session(), second.session());
    /// ```
    pub fn shared_session(mut self, session: Arc<SessionInfo>) -> Self {
        self.session = Some(session);
        self
    }

    /// The call id (default: a process-unique `call-N`).
    pub fn call_id(mut self, id: impl Into<String>) -> Self {
        self.call_id = Some(Arc::from(id.into()));
        self
    }

    /// The call id, shared with whoever else holds it (the runtime's host does), not copied.
    pub fn shared_call_id(mut self, id: Arc<str>) -> Self {
        self.call_id = Some(id);
        self
    }

    /// The resolved tool name.
    pub fn tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = Some(Arc::from(name.into()));
        self
    }

    /// The resolved tool name, shared with the tool ([`Tool::shared_name`](crate::Tool::shared_name)),
    /// not copied: what the registry and the runtime set.
    pub fn shared_tool_name(mut self, name: Arc<str>) -> Self {
        self.tool_name = Some(name);
        self
    }

    /// Who issues the call, as set so far.
    pub(crate) fn current_caller(&self) -> Caller {
        self.caller
    }

    /// Who issued the call (default [`Caller::Model`]).
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// Marks the call as approved by `responder`.
    pub fn approved_by(mut self, responder: Option<Principal>) -> Self {
        self.approval = Some(ApprovalGrant { responder });
        self
    }

    /// The host behind the context (default: a fresh [`DetachedHost`]).
    pub fn host(mut self, host: Arc<dyn CallHost>) -> Self {
        self.host = Some(host);
        self
    }

    /// The current tool name, as set so far.
    pub fn current_tool_name(&self) -> &str {
        self.tool_name.as_deref().unwrap_or_default()
    }

    /// The context.
    pub fn build(self) -> CallContext {
        // A direct call pays for a session, an id and a host only where it uses them.
        let call_id = match self.call_id {
            Some(id) => CallId::Given(id),
            None => CallId::Numbered(
                NEXT_CALL.fetch_add(1, Ordering::Relaxed),
                std::sync::OnceLock::new(),
            ),
        };
        CallContext(Arc::new(Scope {
            session: self
                .session
                .map_or(SessionSlot::Detached, SessionSlot::Given),
            call_id,
            tool_name: self.tool_name,
            caller: self.caller,
            approval: self.approval,
            host: match self.host {
                Some(host) => HostSlot::Given(host),
                None => HostSlot::Detached(std::sync::OnceLock::new()),
            },
            model_calls: AtomicU64::new(0),
            model_usage: std::sync::Mutex::new(None),
        }))
    }
}

impl CallContext {
    /// A builder with a detached session (`detached`, turn `turn-1`), interactive, called by the
    /// model, on a fresh [`DetachedHost`].
    pub fn builder() -> CallContextBuilder {
        CallContextBuilder {
            session: None,
            call_id: None,
            tool_name: None,
            caller: Caller::Model,
            approval: None,
            host: None,
        }
    }

    /// The session.
    pub fn session(&self) -> &SessionInfo {
        self.0.session.get()
    }

    /// What the call's model asks used, summed (answers replayed from the journal count as
    /// they did when recorded); `None` when no backend said. The runtime puts it on the call's
    /// result, where the model loop counts it against the turn's budget.
    pub fn model_usage(&self) -> Option<ModelUsage> {
        *self
            .0
            .model_usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The call id.
    pub fn call_id(&self) -> &str {
        self.0.call_id.get()
    }

    /// The resolved tool name.
    pub fn tool_name(&self) -> &str {
        CallScope::tool_name(&*self.0)
    }

    /// Who issued the call.
    pub fn caller(&self) -> Caller {
        self.0.caller
    }

    /// The approval grant, on approved calls.
    pub fn approval(&self) -> Option<&ApprovalGrant> {
        self.0.approval.as_ref()
    }

    /// The host.
    pub fn host(&self) -> &dyn CallHost {
        self.0.host.get()
    }

    /// A stable idempotency key for this call: `<session id>:<call id>`. Pass it to upstream APIs
    /// so a re-run after a crash does not repeat a side effect.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.session().id, self.call_id())
    }

    fn state<T: Send + Sync + 'static>(&self) -> Result<State<T>, ToolError> {
        let any = self.host().state(TypeId::of::<T>()).ok_or_else(|| {
            ToolError::with_code(
                ErrorCode::MissingState,
                format!(
                    "the application state `{}` is not installed on the runtime; register it with \
                     the runtime builder's `.state(...)`",
                    std::any::type_name::<T>()
                ),
            )
        })?;
        any.downcast::<T>().map(State).map_err(|_| {
            ToolError::with_code(
                ErrorCode::MissingState,
                format!(
                    "the state registered for `{}` has another type",
                    std::any::type_name::<T>()
                ),
            )
        })
    }

    fn partial(&self, snapshot: &impl Serialize) {
        match serde_json::to_value(snapshot) {
            Ok(value) => self.host().partial(value),
            Err(error) => self.host().log(
                LogLevel::Warn,
                &format!("partial result dropped: it is not JSON: {error}"),
            ),
        }
    }

    async fn step_in_store<T>(&self, name: &str, work: StoreWork) -> Result<T, ToolError>
    where
        T: DeserializeOwned,
    {
        let recorded = self.host().step_in_store(name, work).await?;
        serde_json::from_value(recorded).map_err(|error| {
            ToolError::with_code(
                ErrorCode::Journal,
                format!("the value recorded for step `{name}` cannot be read: {error}"),
            )
        })
    }

    async fn step<T, F>(&self, name: &str, work: F) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: Future<Output = Result<T, ToolError>> + Send,
    {
        let run: BoxFuture<'_, Result<Value, ToolError>> = Box::pin(async move {
            let value = work.await?;
            serde_json::to_value(value).map_err(|error| {
                ToolError::with_code(
                    ErrorCode::Journal,
                    format!("step `{name}` returned a value that is not JSON: {error}"),
                )
            })
        });
        let recorded = self.host().step(name, run).await?;
        serde_json::from_value(recorded).map_err(|error| {
            ToolError::with_code(
                ErrorCode::Journal,
                format!(
                    "the journal holds a value for step `{name}` that does not fit `{}`: {error}; \
                     did the step's type change since it was recorded?",
                    std::any::type_name::<T>()
                ),
            )
        })
    }
}

/// How often a journaled step is tried before its error fails the call. The default is once
/// (no retry); an error made with [`ToolError::fatal`] is never retried.
///
/// ```
/// use std::time::Duration;
/// use toolwright_core::context::Retry;
/// let retry = Retry::attempts(4).backoff(Duration::from_millis(200));
/// assert_eq!(retry.delay_before(2), Duration::from_millis(200));
/// assert_eq!(retry.delay_before(3), Duration::from_millis(400));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    attempts: u32,
    backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry::none()
    }
}

impl Retry {
    /// One attempt.
    pub const fn none() -> Self {
        Retry {
            attempts: 1,
            backoff: Duration::ZERO,
        }
    }

    /// Up to `attempts` attempts (at least one), retrying at once unless a backoff is set.
    pub const fn attempts(attempts: u32) -> Self {
        Retry {
            attempts: if attempts == 0 { 1 } else { attempts },
            backoff: Duration::ZERO,
        }
    }

    /// Waits `initial` before the second attempt, doubling before each later one.
    pub const fn backoff(mut self, initial: Duration) -> Self {
        self.backoff = initial;
        self
    }

    /// How many attempts at most.
    pub const fn max_attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait before attempt `attempt` (1-based; none before the first).
    pub fn delay_before(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        self.backoff
            .saturating_mul(1u32.checked_shl(attempt - 2).unwrap_or(u32::MAX))
    }
}

impl CallContext {
    async fn step_retrying<T, F, Fut>(
        &self,
        name: &str,
        retry: Retry,
        mut work: F,
    ) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ToolError>> + Send,
    {
        let host = self.host();
        let attempts = async move {
            let mut attempt = 1;
            loop {
                match work().await {
                    Ok(value) => return Ok(value),
                    Err(error) if error.is_fatal() || attempt >= retry.max_attempts() => {
                        return Err(error);
                    }
                    Err(error) => {
                        host.log(
                            LogLevel::Warn,
                            &format!(
                                "step `{name}` failed (attempt {attempt} of {}): {error}; retrying",
                                retry.max_attempts()
                            ),
                        );
                        attempt += 1;
                        host.delay(retry.delay_before(attempt)).await;
                    }
                }
            }
        };
        self.step(name, attempts).await
    }
}

macro_rules! common_context_methods {
    () => {
        /// The session: ids, lineage and identities.
        pub fn session(&self) -> &SessionInfo {
            self.cx.session()
        }

        /// The session id.
        pub fn session_id(&self) -> &str {
            &self.cx.session().id
        }

        /// The current turn id.
        pub fn turn_id(&self) -> &str {
            &self.cx.session().turn_id
        }

        /// The parent session, in a subagent session.
        pub fn parent(&self) -> Option<&str> {
            self.cx.session().parent.as_deref()
        }

        /// Who is acting in this turn. Take identity from here, never from the input. May be
        /// `None` (anonymous calls, internal runs): check before use.
        pub fn current(&self) -> Option<&Principal> {
            self.cx.session().current.as_ref()
        }

        /// Who created the session.
        pub fn initiator(&self) -> Option<&Principal> {
            self.cx.session().initiator.as_ref()
        }

        /// Who issued this call.
        pub fn caller(&self) -> Caller {
            self.cx.caller()
        }

        /// This call's id.
        pub fn call_id(&self) -> &str {
            self.cx.call_id()
        }

        /// The resolved tool name (with its toolset prefix).
        pub fn tool_name(&self) -> &str {
            self.cx.tool_name()
        }

        /// `<session id>:<call id>`, stable across re-runs of this call: pass it upstream as an
        /// idempotency key.
        pub fn idempotency_key(&self) -> String {
            self.cx.idempotency_key()
        }

        /// Whether the call was cancelled.
        pub fn is_cancelled(&self) -> bool {
            self.cx.host().is_cancelled()
        }

        /// Completes when the call is cancelled; race long work against it.
        pub async fn cancelled(&self) {
            self.cx.host().cancelled().await
        }

        /// Logs a line as an event (never model-visible).
        pub fn log(&self, level: LogLevel, message: impl AsRef<str>) {
            self.cx.host().log(level, message.as_ref())
        }

        /// Logs progress.
        pub fn info(&self, message: impl AsRef<str>) {
            self.log(LogLevel::Info, message)
        }

        /// Logs a warning.
        pub fn warn(&self, message: impl AsRef<str>) {
            self.log(LogLevel::Warn, message)
        }

        /// Publishes a partial result: a complete snapshot that replaces the previous one, shown
        /// to the user and never entering the model's history.
        pub fn partial(&self, snapshot: &impl Serialize) {
            self.cx.partial(snapshot)
        }

        /// Typed application state registered on the runtime. Prefer a `State<T>` parameter: the
        /// runtime then checks at build time that `T` is registered.
        pub fn state<T: Send + Sync + 'static>(&self) -> Result<State<T>, ToolError> {
            self.cx.state::<T>()
        }
    };
}

/// The context of a plain tool.
///
/// ```
/// use toolwright_core::{CallContext, ToolContext, PlainParam};
/// let ctx = <ToolContext as PlainParam>::from_call(&CallContext::builder().call_id("c1").build()).unwrap();
/// assert_eq!(ctx.idempotency_key(), "detached:c1");
/// ```
#[derive(Clone, Debug)]
pub struct ToolContext {
    cx: CallContext,
}

impl ToolContext {
    common_context_methods!();

    /// The approval grant, only on calls a person approved: who approved (distinct from
    /// [`current`](Self::current): approval is consent, not borrowed identity).
    pub fn approval(&self) -> Option<&ApprovalGrant> {
        self.cx.approval()
    }

    /// The untyped call context.
    pub fn call_context(&self) -> &CallContext {
        &self.cx
    }

    /// The model handle: `ctx.model().prompt(..).text().await` asks the model the host
    /// installed (the MCP client's through sampling, or the runtime's). Answers are not
    /// journaled here; a `durable` tool's are (see [`DurableContext::model`]).
    pub fn model(&self) -> ModelHandle {
        ModelHandle::new(self.cx.0.clone(), false)
    }

    /// The sandbox the host installed: files and commands in one confined place. An error when
    /// the runtime has none. (A `durable` tool reaches it too; a workflow body does not: run
    /// commands through a plain tool.)
    pub fn sandbox(&self) -> Result<Arc<dyn Sandbox>, ToolError> {
        self.cx.host().sandbox().ok_or_else(|| {
            ToolError::with_code(
                ErrorCode::MissingState,
                format!(
                    "`{}` needs a sandbox, and none is installed; install one with `RuntimeBuilder::sandbox`",
                    self.cx.tool_name()
                ),
            )
        })
    }
}

/// The context of a `durable` tool: a [`ToolContext`] plus journaled steps.
#[derive(Clone, Debug)]
pub struct DurableContext {
    tool: ToolContext,
}

impl std::ops::Deref for DurableContext {
    type Target = ToolContext;
    fn deref(&self) -> &ToolContext {
        &self.tool
    }
}

impl DurableContext {
    /// Runs `work` as the step `name` inside the store's own database transaction: the step's
    /// writes to that database and its journal record commit together or not at all, so the
    /// step's effect happens exactly once, not at least once. Needs a store that supports it
    /// (the Postgres store; `toolwright::runtime::PgStep` gives a typed version of this call).
    /// Replays like [`step`](Self::step).
    pub async fn step_in_store<T>(
        &self,
        name: impl AsRef<str>,
        work: StoreWork,
    ) -> Result<T, ToolError>
    where
        T: DeserializeOwned,
    {
        self.tool.cx.step_in_store(name.as_ref(), work).await
    }

    /// The model handle, with each answer journaled as a step (`model#<n>` unless
    /// [`Prompt::step`](crate::model::Prompt::step) names it): a re-run of the call returns the
    /// recorded answer without asking again.
    pub fn model(&self) -> ModelHandle {
        ModelHandle::new(self.tool.cx.0.clone(), true)
    }

    /// Runs `work` as the step `name`, exactly once on record: if a previous run of this call
    /// recorded the step, its value returns without running `work`. Names must be deterministic
    /// (derive them from data, never from clocks or randomness) and unique within the call.
    /// Values are JSON; keep them small.
    pub async fn step<T, F>(&self, name: impl AsRef<str>, work: F) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: Future<Output = Result<T, ToolError>> + Send,
    {
        self.tool.cx.step(name.as_ref(), work).await
    }

    /// [`step`](Self::step) with retries: `work` makes the attempt's future, and an error is
    /// retried per `retry` (a [`ToolError::fatal`] error never is) before it fails the call. Only
    /// the final value is recorded.
    pub async fn step_retrying<T, F, Fut>(
        &self,
        name: impl AsRef<str>,
        retry: Retry,
        work: F,
    ) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ToolError>> + Send,
    {
        self.tool.cx.step_retrying(name.as_ref(), retry, work).await
    }
}

/// The context of a `workflow` tool body. It has no sandbox: run commands through a plain tool.
#[derive(Clone, Debug)]
pub struct WorkflowContext {
    cx: CallContext,
}

impl WorkflowContext {
    common_context_methods!();

    /// [`DurableContext::step_in_store`] for a workflow body.
    pub async fn step_in_store<T>(
        &self,
        name: impl AsRef<str>,
        work: StoreWork,
    ) -> Result<T, ToolError>
    where
        T: DeserializeOwned,
    {
        self.cx.step_in_store(name.as_ref(), work).await
    }

    /// Runs `work` as the journaled step `name` (see [`DurableContext::step`]).
    pub async fn step<T, F>(&self, name: impl AsRef<str>, work: F) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: Future<Output = Result<T, ToolError>> + Send,
    {
        self.cx.step(name.as_ref(), work).await
    }

    /// [`step`](Self::step) with retries (see [`DurableContext::step_retrying`]).
    pub async fn step_retrying<T, F, Fut>(
        &self,
        name: impl AsRef<str>,
        retry: Retry,
        work: F,
    ) -> Result<T, ToolError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ToolError>> + Send,
    {
        self.cx.step_retrying(name.as_ref(), retry, work).await
    }

    /// The model handle, with each answer journaled (see [`DurableContext::model`]).
    pub fn model(&self) -> ModelHandle {
        ModelHandle::new(self.cx.0.clone(), true)
    }

    /// The subagent `name`, to hand it work: `ctx.agent("reviewer").send("...").result::<T>()`
    /// runs it in a child session of this one, with the tools, instructions and budget the host
    /// gave it (the model loop's `Agent::subagent`), and journals its answer like a step
    /// (`agent:<name>#<n>`), so a replay does not run it again. Its approvals and questions
    /// reach this session's person. Fails when the host runs no subagents.
    pub fn agent(&self, name: impl Into<String>) -> AgentHandle {
        AgentHandle::new(self.model(), name.into())
    }

    /// Asks a person. An unanswered question parks the run; nothing waits in memory.
    pub async fn ask(&self, request: AskRequest) -> Result<AskAnswer, ToolError> {
        self.cx.host().ask(request).await
    }

    /// Sleeps durably: the timer fires after a restart, and a sleeping run holds no task.
    pub async fn sleep(&self, duration: Duration) -> Result<(), ToolError> {
        self.cx.host().sleep(duration).await
    }

    /// The untyped call context.
    pub fn call_context(&self) -> &CallContext {
        &self.cx
    }
}
