//! The [`CallHost`] the runtime installs behind every call's context: events, state, the
//! sandbox, and the journal of durable and workflow bodies.

use std::any::{Any, TypeId};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    AskAnswer, AskRequest, CallHost, CallOutput, CredentialBroker, ErrorCode, LogLevel, Messages,
    ModelBackend, Sandbox, ServeIncoming, SessionInfo, StepNames, Tool, ToolError,
};

pub(crate) mod hook;
mod journal;
mod session;
mod token;

pub(crate) use journal::Journal;
use journal::answer_at;
pub(crate) use session::StepMessages;
pub(crate) use token::CallToken;

use crate::event::{Event, StepProgress};
use crate::record::{EntryKind, JournalEntry, TaskCall};
use crate::transition::Suspension;

pub(crate) struct RuntimeHost {
    pub(crate) token: CallToken,
    pub(crate) events: broadcast::Sender<Event>,
    pub(crate) states: Arc<crate::services::States>,
    /// The tool being called (a snapshot: the registry may change while the call runs).
    pub(crate) tool: Arc<Tool>,
    /// The sandbox the host installed on the runtime.
    pub(crate) sandbox: Option<Arc<dyn Sandbox>>,
    /// The model `ctx.model()` asks: the step's, else the runtime's.
    pub(crate) model: Option<Arc<dyn ModelBackend>>,
    /// The broker of tokens the host installed on the runtime.
    pub(crate) credentials: Option<Arc<dyn CredentialBroker>>,
    /// The call's session and turn, as its context sees them (shared by a step's calls).
    pub(crate) session: Arc<SessionInfo>,
    pub(crate) call_id: Arc<str>,
    pub(crate) input: Value,
    pub(crate) interactive: bool,
    pub(crate) steps: StepNames,
    /// The journal of a durable or workflow call; `None` for plain calls (their steps just run).
    pub(crate) journal: Option<Journal>,
    /// Set when the body waits for something that outlives this run (a person's answer): the
    /// runtime then drops the body and parks the call; the answer is recorded in the journal
    /// and the body replays up to it on the next run.
    pub(crate) suspended: std::sync::Mutex<Option<Suspension>>,
    pub(crate) parked: tokio::sync::Notify,
    pub(crate) clock: Arc<dyn crate::options::Clock>,
    /// For the body of a `task` or `serve` workflow: its calls and where its replies go.
    pub(crate) task: Option<TaskLink>,
    /// The store: the session's state is read and written there.
    pub(crate) store: Arc<dyn crate::store::Store>,
    /// The model input of the step that made the call.
    pub(crate) messages: StepMessages,
    /// How many journaled steps run now (their work, not a replay): what a body does inside
    /// one is covered by that step's record, so it takes no journal position of its own.
    pub(crate) in_step: std::sync::atomic::AtomicUsize,
    /// Where the host serves webhooks (`RuntimeBuilder::webhook_url`), if it does.
    pub(crate) webhook_url: Option<Arc<str>>,
}

/// What the body of a workflow task reaches through its host.
pub(crate) struct TaskLink {
    /// The task's id.
    pub(crate) task_id: String,
    /// The task's calls as stored when this run started. A call that already has its result was
    /// replied to by an earlier run: replaying it does not send the reply again.
    pub(crate) calls: Vec<TaskCall>,
    /// The index of the call `serve_next` hands out next (the first call is the body's input).
    pub(crate) next: std::sync::atomic::AtomicUsize,
    /// Replies (by call index), recorded by the task's runner in the order they are sent.
    pub(crate) replies: tokio::sync::mpsc::UnboundedSender<(usize, Result<CallOutput, ToolError>)>,
    /// Answers settled on the task record but perhaps not journaled yet (the process that
    /// settled them may have stopped in between), by journal position.
    pub(crate) answers: std::collections::BTreeMap<u32, AskAnswer>,
    /// Set when the runner drops the body (it parked, or its cleanup window ended): calls the
    /// body held are not failed by being dropped.
    pub(crate) discarding: std::sync::atomic::AtomicBool,
    /// The cancellation of each call the body received (shared with the runner's registration,
    /// where cancelling one call fires its token).
    pub(crate) call_tokens: Arc<crate::engine::work::CallTokens>,
}

impl TaskLink {
    /// The token of the call named `key` (`#<index>`), made as the body receives it: fired
    /// already for a call cancelled on its own before.
    fn call_token(&self, key: &str, parent: &CancellationToken) -> Option<CancellationToken> {
        let index = key.strip_prefix('#')?.parse::<usize>().ok()?;
        let cancelled = self.calls.get(index).is_some_and(|c| c.cancelled);
        Some(self.call_tokens.token(index, parent, cancelled))
    }
}

impl RuntimeHost {
    fn tool_name(&self) -> &str {
        self.tool.name()
    }

    /// Runs a step's work, counted as inside a step while it runs.
    async fn within_step<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        use std::sync::atomic::Ordering;
        self.in_step.fetch_add(1, Ordering::SeqCst);
        let done = work.await;
        self.in_step.fetch_sub(1, Ordering::SeqCst);
        done
    }

    /// The journal a body's own reads and writes of its session go through: none inside a
    /// running step (the step's record covers them, and a replay skips the step whole).
    pub(crate) fn journal_outside_steps(&self) -> Option<&Journal> {
        let inside = self.in_step.load(std::sync::atomic::Ordering::SeqCst) > 0;
        self.journal.as_ref().filter(|_| !inside)
    }

    /// Tells the session what happened to journaled step `name`.
    fn step_progress(&self, name: &str, position: u32, progress: StepProgress) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let _ = self.events.send(Event::ActionStep {
            session_id: self.session.id.clone(),
            turn_id: self.session.turn_id.clone(),
            call_id: self.call_id.to_string(),
            tool: self.tool_name().to_owned(),
            step: name.to_owned(),
            position,
            progress,
            label: progress.label(name),
        });
    }
}

impl CallHost for RuntimeHost {
    fn sandbox(&self) -> Option<Arc<dyn Sandbox>> {
        self.sandbox.clone()
    }

    fn model(&self) -> Option<Arc<dyn ModelBackend>> {
        self.model.clone()
    }

    fn credentials(&self) -> Option<Arc<dyn CredentialBroker>> {
        self.credentials.clone()
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.token.token().cancelled())
    }

    fn log(&self, level: LogLevel, message: &str) {
        tracing::event!(tracing::Level::DEBUG, call_id = %self.call_id, ?level, "{message}");
        let _ = self.events.send(Event::ActionLog {
            session_id: self.session.id.clone(),
            turn_id: self.session.turn_id.clone(),
            call_id: self.call_id.to_string(),
            tool: self.tool_name().to_owned(),
            level,
            message: message.to_owned(),
        });
    }

    fn partial(&self, snapshot: Value) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let tool = &self.tool;
        // A delta label callback that panics means no label, not a failed call.
        let label = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tool.delta_label(&self.input, &snapshot)
        }))
        .ok()
        .flatten();
        let _ = self.events.send(Event::ActionPartial {
            session_id: self.session.id.clone(),
            turn_id: self.session.turn_id.clone(),
            call_id: self.call_id.to_string(),
            tool: tool.name().to_owned(),
            snapshot,
            label,
        });
    }

    fn state(&self, type_id: TypeId) -> Option<Arc<dyn Any + Send + Sync>> {
        self.states.get(&type_id).cloned()
    }

    fn session_state<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>> {
        self.session_state_op(key)
    }

    fn set_session_state<'a>(
        &'a self,
        key: &'a str,
        value: Option<Value>,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        self.set_session_state_op(key, value)
    }

    fn messages(&self) -> BoxFuture<'_, Result<Messages, ToolError>> {
        self.messages_op()
    }

    fn serve_call_messages<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Messages, ToolError>> {
        self.serve_call_messages_op(key)
    }

    fn create_hook<'a>(
        &'a self,
        name: &'a str,
        schema: Value,
        url: bool,
    ) -> BoxFuture<'a, Result<toolwright_core::HookHandle, ToolError>> {
        self.create_hook_op(name, schema, url)
    }

    fn wait_hook<'a>(
        &'a self,
        hook: &'a toolwright_core::HookHandle,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Result<AskAnswer, ToolError>> {
        self.wait_hook_op(hook, timeout)
    }

    fn patched<'a>(&'a self, marker: &'a str) -> BoxFuture<'a, Result<bool, ToolError>> {
        Box::pin(async move {
            let Some(journal) = &self.journal else {
                // A plain body has no journal to be recorded in: it runs the newest code.
                return Ok(true);
            };
            let settled = |position| {
                self.task
                    .as_ref()
                    .is_some_and(|task| task.answers.contains_key(&position))
            };
            journal.patched(marker, settled).await
        })
    }

    fn step<'a>(
        &'a self,
        name: &'a str,
        run: BoxFuture<'a, Result<Value, ToolError>>,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            // A durable call replays and records its steps; a plain call just runs them, held
            // to the same naming rules.
            self.steps.claim(name)?;
            // A step inside a running step is part of it: the outer step's record covers it,
            // and a replay that returns the outer value skips both.
            if let Some(journal) = self.journal_outside_steps() {
                let progress = |position, progress| self.step_progress(name, position, progress);
                let run = Box::pin(self.within_step(run));
                return journal.step(name, run, &progress).await;
            }
            run.await
        })
    }

    fn step_in_store<'a>(
        &'a self,
        name: &'a str,
        work: toolwright_core::StoreWork,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            self.steps.claim(name)?;
            let Some(journal) = &self.journal else {
                return Err(ToolError::with_code(
                    ErrorCode::Journal,
                    format!(
                        "step `{name}` commits with the journal, and only `durable` and `workflow` tools have one"
                    ),
                ));
            };
            let progress = |position, progress| self.step_progress(name, position, progress);
            journal.step_in_store(name, work, &progress).await
        })
    }

    fn ask(&self, request: AskRequest) -> BoxFuture<'_, Result<AskAnswer, ToolError>> {
        Box::pin(async move {
            let Some(journal) = &self.journal else {
                return Err(ToolError::with_code(
                    ErrorCode::Journal,
                    "only a `workflow` tool can ask a person from its body; give a plain tool an approval policy instead",
                ));
            };
            let position = journal.next_position();
            let name = crate::ids::ask_name(position);
            if let Some(entry) = journal.recorded_at(position) {
                return answer_at(position, journal.replayed_as(entry, EntryKind::Ask, &name)?);
            }
            // Checked once, when the question is first asked; a replay returns the answer.
            check_form(&request)?;
            // Settled on the task, not journaled yet: the answer goes into the journal now.
            let settled = self
                .task
                .as_ref()
                .and_then(|task| task.answers.get(&position).cloned());
            // The call is cancelled: the question is withdrawn, and the body goes on to its
            // cleanup with `cancelled`. Nobody can answer: `unavailable`, and the body continues
            // on its default path. Either is recorded, so every replay goes the same way (if
            // another run recorded this position first, its answer stands).
            let decided = settled.or_else(|| {
                if self.token.is_cancelled() {
                    Some(AskAnswer::Cancelled)
                } else if !self.interactive {
                    Some(AskAnswer::Unavailable)
                } else {
                    None
                }
            });
            if let Some(answer) = decided {
                let recorded = journal
                    .record(JournalEntry {
                        position,
                        kind: EntryKind::Ask,
                        name,
                        value: serde_json::to_value(&answer).unwrap_or(Value::Null),
                    })
                    .await?;
                return answer_at(position, recorded);
            }
            if let Ok(mut suspended) = self.suspended.lock() {
                // The deadline counts from now: a question already open keeps its own (the
                // request recorded it when it was first asked).
                let deadline_ms = request
                    .timeout_ms
                    .map(|timeout| self.clock.now_ms().saturating_add(timeout));
                *suspended = Some(Suspension::Ask {
                    position,
                    request,
                    deadline_ms,
                });
            }
            self.parked.notify_one();
            // The runtime drops the body now; nothing waits in memory for the answer.
            std::future::pending().await
        })
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(async move {
            let Some(journal) = &self.journal else {
                return Err(ToolError::with_code(
                    ErrorCode::Journal,
                    "only a `workflow` tool can sleep durably; a plain tool should return and let the model call again later",
                ));
            };
            let position = journal.next_position();
            let name = crate::ids::sleep_name(position);
            // The end of the sleep is recorded the first time, so every replay waits for the
            // same moment however late it runs.
            let until = match journal.recorded_at(position) {
                Some(entry) => journal.replayed_as(entry, EntryKind::Sleep, &name)?,
                None => {
                    let until = self
                        .clock
                        .now_ms()
                        .saturating_add(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
                    journal
                        .record(JournalEntry {
                            position,
                            kind: EntryKind::Sleep,
                            name,
                            value: serde_json::json!({ "until_ms": until }),
                        })
                        .await?
                }
            };
            let until_ms = until["until_ms"].as_u64().unwrap_or(0);
            if self.clock.now_ms() >= until_ms {
                return Ok(());
            }
            if self.token.is_cancelled() {
                return Err(ToolError::with_code(
                    ErrorCode::Cancelled,
                    format!(
                        "the sleep of `{}` was cut short: the call was cancelled",
                        self.tool_name()
                    ),
                ));
            }
            if let Ok(mut suspended) = self.suspended.lock() {
                *suspended = Some(Suspension::Sleep { until_ms });
            }
            self.parked.notify_one();
            // A sleeping run holds no task: the runtime drops the body and its timer wakes it.
            std::future::pending().await
        })
    }

    fn delay(&self, duration: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(duration) => {}
                () = self.token.token().cancelled() => {}
            }
        })
    }

    fn serve_next(&self) -> BoxFuture<'_, Option<ServeIncoming>> {
        Box::pin(async move {
            let task = self.task.as_ref()?;
            let index = task.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let call = task.calls.get(index);
            // A cancelled task still replays the calls it answered (so the body reaches the
            // same state), then takes no more: its loop ends and its cleanup runs.
            if self.token.is_cancelled() && call.is_none_or(|c| c.result.is_none()) {
                return None;
            }
            if let Some(call) = call {
                return Some(ServeIncoming {
                    call_id: call.call_id.clone(),
                    key: format!("#{index}"),
                    input: call.input.clone(),
                });
            }
            if let Ok(mut suspended) = self.suspended.lock() {
                *suspended = Some(Suspension::Receive { index });
            }
            self.parked.notify_one();
            // An idle task holds no task: the runtime drops the body and replays it when the
            // next call arrives.
            std::future::pending().await
        })
    }

    fn serve_call_is_cancelled<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, ToolError>> {
        Box::pin(async move {
            let live = self
                .task
                .as_ref()
                .and_then(|task| task.call_token(key, self.token.token()))
                .is_some_and(|token| token.is_cancelled());
            let Some(journal) = self.journal_outside_steps() else {
                return Ok(live);
            };
            // Recorded, so every replay takes the branch the first run took.
            let name = format!("toolwright.serve.cancelled:{key}");
            let observed = Box::pin(std::future::ready(Ok(Value::Bool(live))));
            let recorded = journal.step(&name, observed, &|_, _| {}).await?;
            Ok(recorded.as_bool().unwrap_or(false))
        })
    }

    fn serve_call_cancelled<'a>(&'a self, key: &'a str) -> BoxFuture<'a, ()> {
        let token = self
            .task
            .as_ref()
            .and_then(|task| task.call_token(key, self.token.token()));
        Box::pin(async move {
            match token {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        })
    }

    fn serve_reply(&self, key: &str, output: Result<CallOutput, ToolError>) {
        let index = key.strip_prefix('#').and_then(|n| n.parse::<usize>().ok());
        let (Some(task), Some(index)) = (&self.task, index) else {
            if let Err(error) = output {
                self.log(
                    LogLevel::Error,
                    &format!("serve call {key} failed: {error}"),
                );
            }
            return;
        };
        if task.discarding.load(std::sync::atomic::Ordering::SeqCst)
            || task.calls.get(index).is_some_and(|c| c.result.is_some())
        {
            // Dropped with a parked body, or replied to by an earlier run (this is a replay).
            return;
        }
        let _ = task.replies.send((index, output));
    }
}

/// A form question's schema must be a JSON Schema object a person can fill in: refused before
/// anything is recorded, since no answer could ever pass a broken form.
fn check_form(request: &AskRequest) -> Result<(), ToolError> {
    let Some(form) = &request.form else {
        return Ok(());
    };
    if !toolwright_core::schema::is_object_schema(form) {
        return Err(ToolError::with_code(
            ErrorCode::InvalidInput,
            "a form question's schema must be a JSON Schema of `type: object` with its fields as `properties`",
        ));
    }
    toolwright_core::schema::InputValidator::compile(form)
        .map(drop)
        .map_err(|e| {
            ToolError::with_code(
                ErrorCode::InvalidInput,
                format!("the form question's schema is not a valid JSON Schema: {e}"),
            )
        })
}
