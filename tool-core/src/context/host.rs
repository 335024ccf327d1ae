//! Hosts: the step-name rule every host applies, and [`DetachedHost`], the host of direct calls
//! outside the runtime.

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};

use super::{CallHost, LogLevel, Messages, ServeIncoming};
use crate::credentials::CredentialBroker;
use crate::error::{ErrorCode, ToolError};
use crate::model::ModelBackend;
use crate::output::CallOutput;
use crate::sandbox::Sandbox;
use crate::workflow::{AskAnswer, AskRequest};

/// The step names used so far in one call: names must be non-empty and unique within a call,
/// or a replay could hand one step another's recorded value.
#[derive(Debug, Default)]
pub struct StepNames(Mutex<HashSet<String>>);

impl StepNames {
    /// Records `name`, or says why it cannot be used.
    pub fn claim(&self, name: &str) -> Result<(), ToolError> {
        if name.is_empty() {
            return Err(ToolError::with_code(
                ErrorCode::Journal,
                "a step needs a non-empty name",
            ));
        }
        let fresh = self
            .0
            .lock()
            .map(|mut names| names.insert(name.to_owned()))
            .unwrap_or(false);
        if fresh {
            Ok(())
        } else {
            Err(ToolError::with_code(
                ErrorCode::Journal,
                format!(
                    "step name `{name}` is used twice in one call; derive unique names from the \
                     data, e.g. `seed:{{project}}`"
                ),
            ))
        }
    }
}

/// What a [`DetachedHost`] saw during a call.
#[derive(Clone, Debug, PartialEq)]
pub enum HostEvent {
    /// A log line.
    Log(LogLevel, String),
    /// A partial result.
    Partial(Value),
    /// A step that ran.
    Step(String),
    /// A `serve` reply: the call's key (`#0` for the first call, see [`ServeIncoming::key`]) and
    /// its output or error message.
    Reply(String, Result<Value, String>),
}

/// A host for direct calls outside the runtime (tests, examples, scripts).
///
/// It records logs, partials and steps as [`HostEvent`]s, keeps a session state in memory
/// ([`DetachedHost::with_session_state`], [`DetachedHost::session_state_now`]), serves the
/// messages given with [`DetachedHost::with_messages`], serves typed state added with
/// [`DetachedHost::with_state`] (and a sandbox and a model backend added with
/// [`DetachedHost::with_sandbox`], [`DetachedHost::with_model`] and
/// [`DetachedHost::with_credentials`]), runs steps directly (refusing a repeated name, as the journal
/// does) and records nothing durably; `ask` answers `unavailable` (no person can be asked) and
/// `sleep` fails, since durable waiting needs the runtime's store.
#[derive(Default)]
pub struct DetachedHost {
    events: Mutex<Vec<HostEvent>>,
    steps: StepNames,
    states: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    cancelled: AtomicBool,
    sandbox: Option<Arc<dyn Sandbox>>,
    model: Option<Arc<dyn ModelBackend>>,
    credentials: Option<Arc<dyn CredentialBroker>>,
    session_state: Mutex<Map<String, Value>>,
    messages: Messages,
}

impl std::fmt::Debug for DetachedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetachedHost")
            .field("events", &self.events())
            .finish_non_exhaustive()
    }
}

impl DetachedHost {
    /// `self` serving `state` to `State<T>` parameters and `ctx.state::<T>()`.
    pub fn with_state<T: Send + Sync + 'static>(mut self, state: T) -> Self {
        self.states.insert(TypeId::of::<T>(), Arc::new(state));
        self
    }

    /// `self` serving `sandbox` to `ctx.sandbox()`.
    pub fn with_sandbox(mut self, sandbox: impl Sandbox) -> Self {
        self.sandbox = Some(Arc::new(sandbox));
        self
    }

    /// `self` serving `backend` to `ctx.model()`.
    pub fn with_model(mut self, backend: impl ModelBackend) -> Self {
        self.model = Some(Arc::new(backend));
        self
    }

    /// `self` handing out tokens from `broker` to `ctx.token(..)` and `ctx.approver_token(..)`.
    pub fn with_credentials(mut self, broker: impl CredentialBroker) -> Self {
        self.credentials = Some(Arc::new(broker));
        self
    }

    /// `self` with `key` set to `value` in the session state `ctx.session_state(..)` reads.
    pub fn with_session_state(self, key: impl Into<String>, value: Value) -> Self {
        if let Ok(mut state) = self.session_state.lock() {
            state.insert(key.into(), value);
        }
        self
    }

    /// `self` serving `messages` to `ctx.messages()`.
    pub fn with_messages(mut self, messages: Vec<Value>) -> Self {
        self.messages = Messages::new(messages);
        self
    }

    /// The session state as the call left it.
    pub fn session_state_now(&self) -> Map<String, Value> {
        self.session_state
            .lock()
            .map(|state| state.clone())
            .unwrap_or_default()
    }

    /// Marks the call cancelled ([`ToolContext::is_cancelled`](crate::ToolContext::is_cancelled) then returns true).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// What happened so far.
    pub fn events(&self) -> Vec<HostEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    fn push(&self, event: HostEvent) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
        }
    }
}

impl CallHost for DetachedHost {
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }

    fn log(&self, level: LogLevel, message: &str) {
        self.push(HostEvent::Log(level, message.to_owned()));
    }

    fn partial(&self, snapshot: Value) {
        self.push(HostEvent::Partial(snapshot));
    }

    fn sandbox(&self) -> Option<Arc<dyn Sandbox>> {
        self.sandbox.clone()
    }

    fn model(&self) -> Option<Arc<dyn ModelBackend>> {
        self.model.clone()
    }

    fn credentials(&self) -> Option<Arc<dyn CredentialBroker>> {
        self.credentials.clone()
    }

    fn state(&self, type_id: TypeId) -> Option<Arc<dyn Any + Send + Sync>> {
        self.states.get(&type_id).cloned()
    }

    fn session_state<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>> {
        let value = self
            .session_state
            .lock()
            .ok()
            .and_then(|state| state.get(key).cloned());
        Box::pin(std::future::ready(Ok(value)))
    }

    fn set_session_state<'a>(
        &'a self,
        key: &'a str,
        value: Option<Value>,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        if let Ok(mut state) = self.session_state.lock() {
            match value {
                Some(value) => state.insert(key.to_owned(), value),
                None => state.remove(key),
            };
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn messages(&self) -> BoxFuture<'_, Result<Messages, ToolError>> {
        Box::pin(std::future::ready(Ok(self.messages.clone())))
    }

    fn step<'a>(
        &'a self,
        name: &'a str,
        run: BoxFuture<'a, Result<Value, ToolError>>,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            self.steps.claim(name)?;
            self.push(HostEvent::Step(name.to_owned()));
            run.await
        })
    }

    fn ask(&self, _request: AskRequest) -> BoxFuture<'_, Result<AskAnswer, ToolError>> {
        Box::pin(std::future::ready(Ok(AskAnswer::Unavailable)))
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(std::future::ready(Err(ToolError::with_code(
            ErrorCode::Journal,
            format!(
                "a durable sleep of {duration:?} needs the runtime's store; a detached call \
                 cannot wait"
            ),
        ))))
    }

    fn serve_next(&self) -> BoxFuture<'_, Option<ServeIncoming>> {
        Box::pin(std::future::ready(None))
    }

    fn serve_reply(&self, key: &str, output: Result<CallOutput, ToolError>) {
        let value = output.map(|o| o.value).map_err(|e| e.message().to_owned());
        self.push(HostEvent::Reply(key.to_owned(), value));
    }
}
