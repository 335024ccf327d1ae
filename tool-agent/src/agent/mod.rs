//! The loop: send the conversation, run the model's calls as a step of the turn, render the
//! results back, repeat until a final answer, a tool that ends the turn, or a park. Budgets
//! are checked in [`limits`] before each model request and before a response's calls run.

mod delegate;
mod limits;
mod steer;

pub use delegate::{MAX_DEPTH, Subagent};

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::broadcast;
use toolwright_core::{Audience, Caller, ErrorCode, ModelOutput, Principal, ToolError};
use toolwright_runtime::{
    CallResult, Event, InputRequest, Runtime, RuntimeError, Session, StepOptions, StepOutcome,
    ToolCall, Turn, TurnRecord, TurnStatus,
};
use tracing::Instrument;

use crate::budget::Budget;
use crate::conversation::Conversation;
use crate::files::Files;
use crate::message::{Message, ToolUse};
use crate::model::{
    FinishReason, Model, ModelError, Request, Response, Settings, StreamEvent, ToolDefinitions,
};
use crate::retry::{RetryPolicy, Retrying};
use crate::telemetry;
use limits::{Ledger, answer_message, answered, input_retries_exhausted, request_of};

/// How many times in a row the model may retry a tool's invalid input, unless the tool says
/// otherwise (`#[tool(input_retries = N)]`) or [`Agent::input_retries`] changed it.
const INPUT_RETRIES: u32 = 1;

/// How many times in a row a paused response (`pause_turn`) is sent again before the loop
/// takes it as the answer (a budget's step limit stops it sooner).
const MAX_PAUSES: u32 = 10;

/// How long a final answer waits for the results of workflow tasks the turn started.
const TASK_WAIT: Duration = Duration::from_secs(30);

/// Why [`Agent::resume`] refuses a turn whose calls a run (here or in another process) is
/// executing: a subagent's wait recognises it and waits for that run.
pub(super) const RUNNING_ELSEWHERE: &str = "another process is running its calls";

/// An agent: a model driving turns of a runtime's sessions.
///
/// [`Agent::send`] begins a turn with the person's message and runs it; when it parks on
/// approvals or questions, answer them with [`Runtime::respond`] (in this process or any
/// other on the same store) and call [`Agent::resume`] with the turn id: the conversation is in
/// the store, nothing needs replaying.
#[derive(Clone)]
pub struct Agent {
    runtime: Runtime,
    /// The model as given.
    inner: Arc<dyn Model>,
    /// The model as asked: `inner`, retried per the agent's policy.
    model: Arc<dyn Model>,
    instructions: Option<String>,
    settings: Settings,
    budget: Budget,
    input_retries: u32,
    events: broadcast::Sender<AgentEvent>,
    /// The subagents it delegates to, once installed as the runtime's model.
    team: Arc<delegate::Team>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("instructions", &self.instructions)
            .field("settings", &self.settings)
            .field("budget", &self.budget)
            .field("input_retries", &self.input_retries)
            .finish_non_exhaustive()
    }
}

/// How a run of the loop ended.
#[allow(clippy::large_enum_variant)]
// reason: one outcome per run, returned once; boxing would only cost the caller a deref
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AgentOutcome {
    /// The model answered without calling tools; the turn is completed.
    Answered(Response),
    /// A tool that ends the turn succeeded (every call of its step could end it).
    Ended(Vec<Arc<CallResult>>),
    /// The turn is parked on these requests: answer them with
    /// [`Runtime::respond`](toolwright_runtime::Runtime::respond), then [`Agent::resume`].
    /// A [`RequestKind::SessionLimit`](toolwright_runtime::RequestKind::SessionLimit)
    /// request means the turn reached a limit of its [`Budget`]: approving it extends the
    /// limit, cancelling it stops the turn.
    Waiting(Vec<InputRequest>),
    /// The turn reached a limit of its budget and the host did not extend it: the turn is
    /// over. The request, as it was answered.
    Stopped(InputRequest),
}

/// A turn the loop ran, and how it ended.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentTurn {
    /// The turn id (the same across park and resume).
    pub turn_id: String,
    /// How it ended.
    pub outcome: AgentOutcome,
}

/// What the loop streams to the host while it runs (see [`Agent::subscribe`]).
#[allow(clippy::large_enum_variant)]
// reason: events are built once and moved into the channel, like the runtime's own events
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// The model's output as it arrives: text, refusals, tool calls being written, usage.
    Model {
        /// The turn.
        turn_id: String,
        /// What arrived.
        event: StreamEvent,
    },
    /// An event of the turn's session while a step runs: tool labels (`ActionRequested`,
    /// `ActionPartial`, `ActionResult`), approvals and questions (`InputRequested`), ...
    Runtime(Event),
}

/// Why the loop failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model request failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The turn cannot be run in its state (cancelled, or running in another process).
    #[error("turn `{turn}` cannot be run: {why}")]
    TurnState {
        /// The turn.
        turn: String,
        /// Why.
        why: String,
    },
    /// A stored message could not be read.
    #[error("the stored conversation cannot be read: {0}")]
    Corrupt(String),
    /// The budget cannot be counted (e.g. a cost limit without a price for the model).
    #[error("{0}")]
    Budget(String),
    /// The model gave a tool invalid input more times in a row than the tool allows; the turn
    /// was cancelled.
    #[error(
        "the model gave `{tool}` invalid input {attempts} times in a row, more than it may \
         retry ({allowed}); the turn was cancelled. Last error: {message}"
    )]
    InvalidInput {
        /// The tool.
        tool: String,
        /// The invalid calls in a row.
        attempts: u32,
        /// The retries allowed.
        allowed: u32,
        /// The last validation message the model saw.
        message: String,
    },
}

impl Agent {
    /// An agent driving `runtime`'s turns with `model`.
    pub fn new(runtime: Runtime, model: impl Model) -> Self {
        Self::shared(runtime, Arc::new(model))
    }

    /// [`Agent::new`] with a model already shared.
    pub fn shared(runtime: Runtime, model: Arc<dyn Model>) -> Self {
        Agent {
            runtime,
            model: Arc::new(Retrying::new(Arc::clone(&model), RetryPolicy::default())),
            inner: model,
            instructions: None,
            settings: Settings::default(),
            budget: Budget::default(),
            input_retries: INPUT_RETRIES,
            events: broadcast::channel(1024).0,
            team: Arc::default(),
        }
    }

    /// `self` with a system prompt; the toolsets' instructions follow it.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// `self` sending `settings` with every request.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// `self` limiting turns and sessions to `budget`: reaching a limit parks the turn on a
    /// session-limit request ([`AgentOutcome::Waiting`]); the host approves it to extend the
    /// limit by its configured amount, or cancels it to stop the turn
    /// ([`AgentOutcome::Stopped`] on [`Agent::resume`]). The ledger is the stored
    /// conversation, so limits hold across processes and restarts.
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// `self` letting the model retry a tool's invalid input `retries` times in a row, one by
    /// default, before the turn fails with [`AgentError::InvalidInput`]; a tool's own
    /// `#[tool(input_retries = N)]` takes precedence. Each invalid call's validation message
    /// reaches the model as the call's result.
    pub fn input_retries(mut self, retries: u32) -> Self {
        self.input_retries = retries;
        self
    }

    /// `self` retrying model requests per `policy` (default: [`RetryPolicy::default`]; no
    /// retries with [`RetryPolicy::none`]). Between attempts the loop's subscribers get
    /// [`StreamEvent::Retrying`].
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.model = Arc::new(Retrying::new(Arc::clone(&self.inner), policy));
        self
    }

    /// The loop's events from now on, for a user interface.
    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.events.subscribe()
    }

    /// Begins a turn of `session` with the message `text` from `current` and runs it.
    pub async fn send(
        &self,
        session: &Session,
        current: Option<Principal>,
        text: &str,
    ) -> Result<AgentTurn, AgentError> {
        let span = telemetry::agent_span(session.id(), None);
        self.begin(session, current, text).instrument(span).await
    }

    async fn begin(
        &self,
        session: &Session,
        current: Option<Principal>,
        text: &str,
    ) -> Result<AgentTurn, AgentError> {
        let store = self.runtime.store();
        let mut conversation = Conversation::load(store, session.id()).await?;
        self.close_dangling_calls(&mut conversation).await?;
        // A budget that cannot be counted fails before the turn begins.
        if self.budget.is_limited() {
            Ledger::of(&conversation, "", &self.budget)?;
        }
        let turn = session.begin_turn(current, Caller::Model).await?;
        tracing::Span::current().record("turn_id", turn.id());
        let mut opening = vec![Message::user(text)];
        if let Some(context) = turn.context(text).await?.render() {
            opening.push(Message::context(context));
        }
        conversation.append(store, turn.id(), opening).await?;
        self.drive(&turn, conversation).await
    }

    /// Runs turn `turn_id` on from where it stopped: after [`Runtime::respond`] settled its
    /// requests (in any process), the results of the resumed step go to the model and the loop
    /// goes on. A turn still waiting returns its open requests again.
    pub async fn resume(&self, turn_id: &str) -> Result<AgentTurn, AgentError> {
        let turn = self.runtime.turn(turn_id).await?;
        let span = telemetry::agent_span(turn.session_id(), Some(turn_id));
        self.go_on(turn).instrument(span).await
    }

    async fn go_on(&self, turn: Turn) -> Result<AgentTurn, AgentError> {
        let turn_id = turn.id();
        let record = turn.record().await?;
        let store = self.runtime.store();
        let mut conversation = Conversation::load(store, turn.session_id()).await?;
        let done = |outcome| {
            Ok(AgentTurn {
                turn_id: turn_id.to_owned(),
                outcome,
            })
        };
        match record.status {
            TurnStatus::Waiting => return done(AgentOutcome::Waiting(open_requests(&record))),
            TurnStatus::Running => {
                return Err(state(turn_id, RUNNING_ELSEWHERE));
            }
            TurnStatus::Cancelled => return Err(state(turn_id, "it was cancelled")),
            TurnStatus::Active | TurnStatus::Completed => {}
        }
        if let Some(limit) = record.last_step.as_ref().and_then(|s| s.session_limit())
            && (!answered(&conversation, &limit.request_id) || !approved(limit))
        {
            let limit = limit.clone();
            return self.after_limit(&turn, &record, conversation, limit).await;
        }
        let Some(calls) = unanswered_calls(conversation.messages()) else {
            if record.status == TurnStatus::Completed {
                return Err(state(turn_id, "it is completed"));
            }
            return self.drive(&turn, conversation).await;
        };
        let closed = record.last_step.filter(|step| {
            step.results.len() == calls.len()
                && step
                    .results
                    .iter()
                    .zip(&calls)
                    .all(|(r, c)| r.call_id == c.call_id)
        });
        let Some(step) = closed else {
            // The calls are stored with their step, but the step closed without a record of
            // results: it was refused before anything ran (its call ids repeat), and the
            // process stopped before the refusals were stored. Running it again refuses it
            // again; its message is stored already.
            let outcome = self
                .step(&turn, &calls, &mut conversation, Vec::new())
                .await?;
            return match self
                .take(&turn, &mut conversation, outcome, Vec::new())
                .await?
            {
                Some(outcome) => done(outcome),
                None => self.drive(&turn, conversation).await,
            };
        };
        let messages = step.results.iter().map(|r| result_message(r)).collect();
        conversation.append(store, turn_id, messages).await?;
        if record.status == TurnStatus::Completed {
            return done(AgentOutcome::Ended(step.results));
        }
        self.drive(&turn, conversation).await
    }

    /// The loop proper, from a conversation whose last message awaits the model's answer.
    async fn drive(
        &self,
        turn: &Turn,
        mut conversation: Conversation,
    ) -> Result<AgentTurn, AgentError> {
        let done = |outcome| {
            Ok(AgentTurn {
                turn_id: turn.id().to_owned(),
                outcome,
            })
        };
        let store = self.runtime.store();
        let mut paused = 0;
        let mut files = Files::default();
        loop {
            self.deliver_steering(turn, &mut conversation).await?;
            self.check_inputs(turn, &conversation).await?;
            let ledger = self.ledger(turn, &conversation)?;
            let reached = ledger.before_request(&self.budget);
            if !reached.is_empty() {
                let parked = self.park(turn, &mut conversation, &reached, Vec::new());
                return done(parked.await?);
            }
            let messages = files.outgoing(turn, conversation.messages()).await;
            let response = self.ask(turn, messages).await?;
            let mut message = response.message.clone();
            // The stored message is the budgets' ledger: it keeps what the response cost.
            message.usage = response.usage;
            message.model = (!response.model.is_empty()).then(|| response.model.clone());
            let calls = message.tool_calls.clone();
            if calls.is_empty() {
                conversation
                    .append(store, turn.id(), vec![Message::Assistant(message)])
                    .await?;
                if response.finish_reason == FinishReason::Other("pause_turn".into())
                    && paused < MAX_PAUSES
                {
                    // Anthropic paused a long turn of its server tools: sending the
                    // conversation again, the paused message last, lets it go on.
                    paused += 1;
                    continue;
                }
                let results = if turn.open_tasks().await?.is_empty() {
                    Vec::new()
                } else {
                    turn.wait_task_results(TASK_WAIT).await?
                };
                if results.is_empty() {
                    let delivered = steer::delivered(&conversation, turn.id());
                    let steered = turn.complete_after(delivered).await?;
                    if steered.is_empty() {
                        return done(AgentOutcome::Answered(response));
                    }
                    self.append_steered(turn, &mut conversation, steered)
                        .await?;
                    continue;
                }
                let delivered = results.iter().map(|r| Message::context(r.message()));
                conversation
                    .append(store, turn.id(), delivered.collect())
                    .await?;
                continue;
            }
            // The model's message with the calls is written with the step's first record: the
            // store never holds calls whose step was not recorded, nor the reverse. Its calls'
            // sensitive values are kept sealed; the step runs with them as the model sent them.
            crate::conversation::seal_calls(&self.runtime, turn.session_id(), &mut message);
            let carried = vec![Message::Assistant(message)];
            let reached = ledger.before_calls(&self.budget, calls.len());
            if !reached.is_empty() {
                // The calls wait for the extension with the message that made them: they run
                // when the request is approved (see `after_limit`).
                let parked = self.park(turn, &mut conversation, &reached, carried);
                return done(parked.await?);
            }
            let outcome = self.step(turn, &calls, &mut conversation, carried).await?;
            let taken = self.take(turn, &mut conversation, outcome, Vec::new());
            if let Some(outcome) = taken.await? {
                return done(outcome);
            }
        }
    }

    /// Stores what a step came to, `then` after its results; the outcome when it ends the run
    /// (an ending tool, a park).
    async fn take(
        &self,
        turn: &Turn,
        conversation: &mut Conversation,
        outcome: StepOutcome,
        then: Vec<Message>,
    ) -> Result<Option<AgentOutcome>, AgentError> {
        let store = self.runtime.store();
        match outcome {
            StepOutcome::Completed {
                results,
                ends_turn,
                notices,
            } => {
                let mut messages: Vec<Message> =
                    results.iter().map(|r| result_message(r)).collect();
                messages.extend(notices.into_iter().map(Message::context));
                let delivered = turn.task_results().await?;
                messages.extend(delivered.iter().map(|r| Message::context(r.message())));
                messages.extend(then);
                conversation.append(store, turn.id(), messages).await?;
                Ok(ends_turn.then_some(AgentOutcome::Ended(results)))
            }
            // The step's results are written with it when it closes; the resume reads them
            // there, so nothing of a parked step is stored here. Its notices are announced
            // again at the next step.
            StepOutcome::Waiting { requests, .. } => Ok(Some(AgentOutcome::Waiting(requests))),
        }
    }

    /// One model request, its events streamed to subscribers.
    async fn ask(&self, turn: &Turn, messages: Vec<Message>) -> Result<Response, AgentError> {
        let tools = turn.tool_list(self.model.tool_format()).await?;
        let request = Request {
            instructions: self.system_prompt(),
            messages,
            tools: ToolDefinitions::from_json(tools),
            tool_choice: Default::default(),
            settings: self.settings.clone(),
        };
        let span = telemetry::request_span(self.inner.as_ref(), &request);
        let answer = self.answer(turn, request).instrument(span.clone()).await;
        match &answer {
            Ok(response) => telemetry::record_response(&span, response),
            Err(error) => telemetry::record_error(&span, error),
        }
        Ok(answer?)
    }

    /// The model's answer to `request`, its events streamed to subscribers.
    async fn answer(&self, turn: &Turn, request: Request) -> Result<Response, ModelError> {
        let mut stream = self.model.stream(request).await?;
        while let Some(event) = stream.next().await {
            let event = event?;
            if let StreamEvent::Completed(response) = event {
                return Ok(response);
            }
            // No subscriber is fine: the events are for a user interface, if there is one.
            let _ = self.events.send(AgentEvent::Model {
                turn_id: turn.id().to_owned(),
                event,
            });
        }
        Err(ModelError::Protocol(
            "the response ended before it completed".into(),
        ))
    }

    /// Runs `calls` as a step, `carried` appended to the conversation in the transaction that
    /// records it, relaying the session's runtime events while it runs.
    async fn step(
        &self,
        turn: &Turn,
        calls: &[ToolUse],
        conversation: &mut Conversation,
        carried: Vec<Message>,
    ) -> Result<StepOutcome, AgentError> {
        let calls = calls
            .iter()
            .map(|c| ToolCall::new(&c.call_id, &c.name, &c.arguments))
            .collect();
        let (first, encoded) = conversation.encode(&carried)?;
        let options = StepOptions::new()
            .conversation(first, encoded)
            .steering(steer::delivered(conversation, turn.id()));
        let mut events = self.runtime.subscribe();
        let step = turn.step_with(calls, options);
        tokio::pin!(step);
        let outcome = loop {
            tokio::select! {
                outcome = &mut step => break outcome?,
                event = events.recv() => match event {
                    Ok(event) => self.relay(turn, event),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break step.await?,
                },
            }
        };
        while let Ok(event) = events.try_recv() {
            self.relay(turn, event);
        }
        conversation.appended(turn.id(), carried);
        Ok(outcome)
    }

    /// What the turn and its session used, when the budget limits anything.
    fn ledger(&self, turn: &Turn, conversation: &Conversation) -> Result<Ledger, AgentError> {
        if !self.budget.is_limited() {
            return Ok(Ledger::default());
        }
        Ledger::of(conversation, turn.id(), &self.budget)
    }

    /// Parks the turn on a session-limit request for `reached`, `carried` appended with it.
    async fn park(
        &self,
        turn: &Turn,
        conversation: &mut Conversation,
        reached: &[crate::budget::LimitReached],
        carried: Vec<Message>,
    ) -> Result<AgentOutcome, AgentError> {
        let (prompt, details) = request_of(reached);
        let (first, encoded) = conversation.encode(&carried)?;
        let options = StepOptions::new().conversation(first, encoded);
        let mut events = self.runtime.subscribe();
        let request = turn.park_on_limit(prompt, details, options).await?;
        conversation.appended(turn.id(), carried);
        while let Ok(event) = events.try_recv() {
            self.relay(turn, event);
        }
        Ok(AgentOutcome::Waiting(vec![request]))
    }

    /// Goes on after the session-limit request the turn's last step parked on was answered:
    /// extended, the calls that waited run and the loop goes on; else the turn is over.
    async fn after_limit(
        &self,
        turn: &Turn,
        record: &TurnRecord,
        mut conversation: Conversation,
        request: InputRequest,
    ) -> Result<AgentTurn, AgentError> {
        let store = self.runtime.store();
        let done = |outcome| {
            Ok(AgentTurn {
                turn_id: turn.id().to_owned(),
                outcome,
            })
        };
        let answer = answer_message(&request);
        let extended = approved(&request);
        // Only this turn's calls: another turn of the session may have gone on since.
        let calls = unanswered_calls(conversation.messages())
            .filter(|_| conversation.last_turn() == Some(turn.id()));
        if !extended {
            // Tasks that still owed the turn results kept it open: stop them with it, before
            // anything is written, so a stop is never taken back by a crash in between.
            if record.status == TurnStatus::Active {
                turn.cancel().await?;
            }
            if !answered(&conversation, &request.request_id) {
                let mut messages = known_results(record, calls.as_deref().unwrap_or_default());
                messages.push(answer);
                conversation.append(store, turn.id(), messages).await?;
            }
            return done(AgentOutcome::Stopped(request));
        }
        let Some(calls) = calls else {
            conversation.append(store, turn.id(), vec![answer]).await?;
            return self.drive(turn, conversation).await;
        };
        // The calls parked before they ran: they run now, and the answer follows their
        // results (a provider takes nothing between calls and their results). Should the step
        // park on an approval, the answer is not kept: the ledger then counts the limit as
        // not extended, and the next check asks again rather than spend past it.
        let outcome = self
            .step(turn, &calls, &mut conversation, Vec::new())
            .await?;
        match self
            .take(turn, &mut conversation, outcome, vec![answer])
            .await?
        {
            Some(outcome) => done(outcome),
            None => self.drive(turn, conversation).await,
        }
    }

    /// Before a new turn: calls of an earlier turn that ended without their results (it was
    /// cancelled while they waited, or stopped at its budget before the loop resumed it) get
    /// a result saying they did not run, since a provider refuses calls without results.
    async fn close_dangling_calls(
        &self,
        conversation: &mut Conversation,
    ) -> Result<(), AgentError> {
        let Some(calls) = unanswered_calls(conversation.messages()) else {
            return Ok(());
        };
        let Some(owner) = conversation.last_turn().map(str::to_owned) else {
            return Ok(());
        };
        let record = self.runtime.turn(&owner).await?.record().await?;
        if matches!(record.status, TurnStatus::Waiting | TurnStatus::Running) {
            return Err(state(
                &owner,
                "it still waits on its calls: answer and resume it, or cancel it, before the \
                 session's next turn",
            ));
        }
        let results = known_results(&record, &calls);
        conversation
            .append(self.runtime.store(), &owner, results)
            .await
    }

    /// Fails the turn when the model retried a tool's invalid input more than it may.
    async fn check_inputs(
        &self,
        turn: &Turn,
        conversation: &Conversation,
    ) -> Result<(), AgentError> {
        let registry = self.runtime.registry();
        let retries_of = |name: &str| {
            registry
                .get(name)
                .and_then(|tool| tool.input_retries())
                .map_or(self.input_retries, u32::from)
        };
        let Some((tool, attempts, message)) =
            input_retries_exhausted(conversation, turn.id(), retries_of)
        else {
            return Ok(());
        };
        let allowed = retries_of(&tool);
        turn.cancel().await?;
        Err(AgentError::InvalidInput {
            tool,
            attempts,
            allowed,
            message,
        })
    }

    fn relay(&self, turn: &Turn, event: Event) {
        if event.session_id() == Some(turn.session_id()) {
            let _ = self.events.send(AgentEvent::Runtime(event));
        }
    }

    /// The agent's instructions, then the toolsets': the same text at every request.
    fn system_prompt(&self) -> Option<String> {
        let toolsets = self.runtime.instructions(Audience::Model);
        let parts: Vec<&str> = [
            self.instructions.as_deref(),
            (!toolsets.is_empty()).then_some(&*toolsets),
        ]
        .into_iter()
        .flatten()
        .collect();
        let team = self.team_prompt();
        let parts: Vec<&str> = parts.into_iter().chain(team.as_deref()).collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

/// The calls of the conversation's last message, when it is the model's and no result follows.
fn unanswered_calls(messages: &[Message]) -> Option<Vec<ToolUse>> {
    let last = messages.last()?.as_assistant()?;
    (!last.tool_calls.is_empty()).then(|| last.tool_calls.clone())
}

fn result_message(result: &CallResult) -> Message {
    Message::ToolResult {
        usage: result.model_usage,
        call_id: result.call_id.clone(),
        name: result.tool.clone(),
        output: result.model().into_owned(),
        is_error: result.is_error,
        error: result.error.as_ref().map(ToolError::code),
    }
}

/// Whether a session-limit request was approved.
fn approved(request: &InputRequest) -> bool {
    matches!(
        request.status,
        toolwright_runtime::RequestStatus::Settled {
            decision: toolwright_runtime::Decision::Approved,
            ..
        }
    )
}

/// The results of `calls` as `record` knows them (its last closed step, or a parked step's
/// finished calls): a call with none on record never ran.
fn known_results(record: &TurnRecord, calls: &[ToolUse]) -> Vec<Message> {
    let closed = record
        .last_step
        .iter()
        .flat_map(|step| step.results.iter().map(|r| &**r));
    let parked = record
        .pending
        .iter()
        .flat_map(|step| &step.calls)
        .filter_map(|call| match &call.state {
            toolwright_runtime::CallState::Finished { result } => Some(result),
            _ => None,
        });
    let known: Vec<&CallResult> = closed.chain(parked).collect();
    calls
        .iter()
        .map(
            |call| match known.iter().find(|r| r.call_id == call.call_id) {
                Some(result) => result_message(result),
                None => not_run(call, "its turn ended before it ran"),
            },
        )
        .collect()
}

/// The result of a call that never ran, for `reason`.
fn not_run(call: &ToolUse, reason: &str) -> Message {
    Message::ToolResult {
        usage: None,
        call_id: call.call_id.clone(),
        name: call.name.clone(),
        output: ModelOutput::text(format!("`{}` did not run: {reason}.", call.name)),
        is_error: true,
        error: Some(ErrorCode::Cancelled),
    }
}

fn open_requests(record: &toolwright_runtime::TurnRecord) -> Vec<InputRequest> {
    record
        .pending
        .iter()
        .flat_map(|p| &p.requests)
        .filter(|r| r.is_pending())
        .cloned()
        .collect()
}

fn state(turn: &str, why: &str) -> AgentError {
    AgentError::TurnState {
        turn: turn.to_owned(),
        why: why.to_owned(),
    }
}
