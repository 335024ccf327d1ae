//! The loop: send the conversation, run the model's calls as a step of the turn, render the
//! results back, repeat until a final answer, a tool that ends the turn, or a park.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::broadcast;
use toolwright_core::{Audience, Caller, Principal};
use toolwright_runtime::{
    CallResult, Event, InputRequest, Runtime, RuntimeError, Session, StepOptions, StepOutcome,
    ToolCall, Turn, TurnStatus,
};

use crate::conversation::Conversation;
use crate::message::{Message, ToolUse};
use crate::model::{Model, ModelError, Request, Response, Settings, StreamEvent, ToolDefinitions};

/// How long a final answer waits for the results of workflow tasks the turn started.
const TASK_WAIT: Duration = Duration::from_secs(30);

/// An agent: a model driving turns of a runtime's sessions.
///
/// [`Agent::send`] begins a turn with the person's message and runs it; when it parks on
/// approvals or questions, answer them with [`Runtime::respond`] (in this process or any
/// other on the same store) and call [`Agent::resume`] with the turn id: the conversation is in
/// the store, nothing needs replaying.
#[derive(Clone)]
pub struct Agent {
    runtime: Runtime,
    model: Arc<dyn Model>,
    instructions: Option<String>,
    settings: Settings,
    events: broadcast::Sender<AgentEvent>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("instructions", &self.instructions)
            .field("settings", &self.settings)
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
    Ended(Vec<CallResult>),
    /// The turn is parked on these requests: answer them with
    /// [`Runtime::respond`](toolwright_runtime::Runtime::respond), then [`Agent::resume`].
    Waiting(Vec<InputRequest>),
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
            model,
            instructions: None,
            settings: Settings::default(),
            events: broadcast::channel(1024).0,
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
        let turn = session.begin_turn(current, Caller::Model).await?;
        let store = self.runtime.store();
        let mut conversation = Conversation::load(store, session.id()).await?;
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
                return Err(state(turn_id, "another process is running its calls"));
            }
            TurnStatus::Cancelled => return Err(state(turn_id, "it was cancelled")),
            TurnStatus::Active | TurnStatus::Completed => {}
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
            return match self.take(&turn, &mut conversation, outcome).await? {
                Some(outcome) => done(outcome),
                None => self.drive(&turn, conversation).await,
            };
        };
        let messages = step.results.iter().map(result_message).collect();
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
        loop {
            let response = self.ask(turn, conversation.messages()).await?;
            let mut message = response.message.clone();
            // The stored message is the budgets' ledger: it keeps what the response cost.
            message.usage = response.usage;
            message.model = (!response.model.is_empty()).then(|| response.model.clone());
            let calls = message.tool_calls.clone();
            if calls.is_empty() {
                conversation
                    .append(store, turn.id(), vec![Message::Assistant(message)])
                    .await?;
                let results = if turn.open_tasks().await?.is_empty() {
                    Vec::new()
                } else {
                    turn.wait_task_results(TASK_WAIT).await?
                };
                if results.is_empty() {
                    turn.complete().await?;
                    return done(AgentOutcome::Answered(response));
                }
                let delivered = results.iter().map(|r| Message::context(r.message()));
                conversation
                    .append(store, turn.id(), delivered.collect())
                    .await?;
                continue;
            }
            // The model's message with the calls is written with the step's first record: the
            // store never holds calls whose step was not recorded, nor the reverse.
            let carried = vec![Message::Assistant(message)];
            let outcome = self.step(turn, &calls, &mut conversation, carried).await?;
            if let Some(outcome) = self.take(turn, &mut conversation, outcome).await? {
                return done(outcome);
            }
        }
    }

    /// Stores what a step came to; the outcome when it ends the run (an ending tool, a park).
    async fn take(
        &self,
        turn: &Turn,
        conversation: &mut Conversation,
        outcome: StepOutcome,
    ) -> Result<Option<AgentOutcome>, AgentError> {
        let store = self.runtime.store();
        match outcome {
            StepOutcome::Completed {
                results,
                ends_turn,
                notices,
            } => {
                let mut messages: Vec<Message> = results.iter().map(result_message).collect();
                messages.extend(notices.into_iter().map(Message::context));
                let delivered = turn.task_results().await?;
                messages.extend(delivered.iter().map(|r| Message::context(r.message())));
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
    async fn ask(&self, turn: &Turn, messages: &[Message]) -> Result<Response, AgentError> {
        let tools = turn.tool_list(self.model.tool_format()).await?;
        let request = Request {
            instructions: self.system_prompt(),
            messages: messages.to_vec(),
            tools: ToolDefinitions::from_json(tools),
            tool_choice: Default::default(),
            settings: self.settings.clone(),
        };
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
        Err(ModelError::Protocol("the response ended before it completed".into()).into())
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
        let options = StepOptions::new().conversation(first, encoded);
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
        conversation.appended(carried);
        Ok(outcome)
    }

    fn relay(&self, turn: &Turn, event: Event) {
        if event.session_id() == Some(turn.session_id()) {
            let _ = self.events.send(AgentEvent::Runtime(event));
        }
    }

    /// The agent's instructions, then the toolsets': the same text at every request.
    fn system_prompt(&self) -> Option<String> {
        let toolsets = self.runtime.instructions(Audience::Model);
        match (&self.instructions, toolsets.is_empty()) {
            (Some(own), false) => Some(format!("{own}\n\n{toolsets}")),
            (Some(own), true) => Some(own.clone()),
            (None, false) => Some(toolsets.to_string()),
            (None, true) => None,
        }
    }
}

/// The calls of the conversation's last message, when it is the model's and no result follows.
fn unanswered_calls(messages: &[Message]) -> Option<Vec<ToolUse>> {
    let last = messages.last()?.as_assistant()?;
    (!last.tool_calls.is_empty()).then(|| last.tool_calls.clone())
}

fn result_message(result: &CallResult) -> Message {
    Message::ToolResult {
        call_id: result.call_id.clone(),
        name: result.tool.clone(),
        output: result.model.clone(),
        is_error: result.is_error,
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
