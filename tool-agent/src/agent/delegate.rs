//! Models inside tools: the agent as the runtime's model ([`Agent::install`]). A tool's
//! `ctx.model()` ask without tools is one request to the agent's model; an ask with tools runs
//! in a scratch session of the call; a workflow body's `ctx.agent(name)` and the built-in
//! `task` tool run a [`Subagent`] in a session of its own. Each such session is a child of the
//! caller's (its turns `Caller::Subagent`, so tools with `subagents = false` stay out), its
//! approvals and questions go to the caller's person, what it used is counted against the
//! parent turn's budget, and delegation stops at [`Agent::max_depth`].
//!
//! A child session's id is derived from the call (session, turn, call id) and the ask, and
//! the turn each ask began is kept in the child's session state: a durable call run again
//! after a crash finds the subagent's turn where it was (answered, waiting for a person,
//! half-way) instead of starting another.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::broadcast;
use toolwright_core::{
    Caller, ErrorCode, GENERAL_AGENT, ModelBackend, ModelOrigin, ModelReply, ModelRequest,
    ModelUsage, StopReason, ToolError, error::quoted_prefix,
};
use toolwright_runtime::{
    Runtime, RuntimeError, Session, SessionSpec, Turn, TurnStatus, WeakRuntime,
};

use super::limits::Ledger;
use super::{Agent, AgentError, AgentOutcome, AgentTurn};
use crate::backend::one_shot;
use crate::budget::Budget;
use crate::conversation::Conversation;
use crate::message::Message;
use crate::model::Model;

/// How deep delegation goes by default: a session's subagent may start a subagent of its own,
/// whose asks with tools may open one more session, and no further.
pub const MAX_DEPTH: u32 = 3;

/// The session-state key under which a child session keeps the turn of its `n`-th ask.
const ASK_KEY: &str = "toolwright.ask#";

/// How often a call waiting for a subagent's person looks at the subagent's turn when no
/// event says it changed (an answer given in another process).
const WAIT_POLL: Duration = Duration::from_millis(500);

/// A subagent: a named profile the model hands work to through the built-in `task` tool, and
/// a workflow body through `ctx.agent(name)`. It works in a session of its own, a child of the
/// caller's, with its instructions, its tools and its budget, and answers with its final
/// message.
///
/// ```
/// use toolwright_agent::{Budget, Limits, Subagent};
/// let researcher = Subagent::new("researcher", "Finds and summarizes sources on a question.")
///     .instructions("You research. Cite every source you use.")
///     .tools(["web_search", "fetch_page"])
///     .budget(Budget::new().turn(Limits::new().steps(12)));
/// # let _ = researcher;
/// ```
#[derive(Clone)]
pub struct Subagent {
    name: String,
    description: String,
    instructions: Option<String>,
    tools: Option<Vec<String>>,
    budget: Option<Budget>,
    model: Option<Arc<dyn Model>>,
}

impl std::fmt::Debug for Subagent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subagent")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("instructions", &self.instructions)
            .field("tools", &self.tools)
            .field("budget", &self.budget)
            .field("model", &self.model.as_ref().map(|m| m.model_name()))
            .finish()
    }
}

impl Subagent {
    /// A subagent `name`, described to the model by `description` (what it is for, when to
    /// hand it work). With no other setting it has every tool subagents may use, the agent's
    /// model and the parent turn's remaining budget.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Subagent {
            name: name.into(),
            description: description.into(),
            instructions: None,
            tools: None,
            budget: None,
            model: None,
        }
    }

    /// Its system prompt.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// The only tools it may use (registry names); tools with `subagents = false` stay out
    /// whatever is listed.
    pub fn tools<I>(mut self, names: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Its own limits, per turn (one piece of work) and per session; each turn's are capped
    /// by what the parent turn has left.
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Another model than the agent's (e.g. a smaller one for searches).
    pub fn model(mut self, model: impl Model) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The subagents an agent can delegate to, and how deep delegation may go.
#[derive(Clone, Debug)]
pub(crate) struct Team {
    subagents: BTreeMap<String, Subagent>,
    max_depth: u32,
    /// Whether the system prompt lists the subagents (not in a session without `task`).
    listed: bool,
}

impl Default for Team {
    fn default() -> Self {
        Team {
            subagents: BTreeMap::new(),
            max_depth: MAX_DEPTH,
            listed: true,
        }
    }
}

impl Team {
    pub(crate) fn add(&mut self, subagent: Subagent) {
        self.subagents.insert(subagent.name.clone(), subagent);
    }

    pub(crate) fn set_max_depth(&mut self, depth: u32) {
        self.max_depth = depth;
    }

    /// The section of the system prompt that tells the model which subagents `task` reaches.
    pub(crate) fn prompt(&self) -> String {
        let mut text = String::from(
            "## Subagents\n\nThe `task` tool hands work to a subagent. Name one with `agent`, \
             or leave it out for a general-purpose subagent.\n",
        );
        for subagent in self.subagents.values() {
            text.push_str(&format!(
                "\n- `{}`: {}",
                subagent.name,
                subagent.description.trim()
            ));
        }
        text
    }
}

/// What a child session is for.
struct Profile {
    /// The child session's id.
    session_id: String,
    instructions: Option<String>,
    tools: Option<Vec<String>>,
    budget: Option<Budget>,
    model: Option<Arc<dyn Model>>,
    /// What to call it in messages.
    label: String,
}

/// The instructions of the general-purpose subagent.
const GENERAL_INSTRUCTIONS: &str = "You are a subagent: another agent handed you the task \
    below. Do it with your tools, then answer with the result. Whoever reads your answer did \
    not see your work: say what you found or did, and what you could not do.";

impl Agent {
    /// `self` able to hand work to `subagent` (through the built-in `task` tool and a workflow
    /// body's `ctx.agent(name)`), once installed as the runtime's model
    /// ([`Agent::install`]).
    pub fn subagent(mut self, subagent: Subagent) -> Self {
        Arc::make_mut(&mut self.team).add(subagent);
        self
    }

    /// `self` letting delegation go `depth` sessions deep ([`MAX_DEPTH`] by default): a
    /// subagent, or a tool's ask with tools, whose session would be deeper fails with an
    /// error the model sees.
    pub fn max_depth(mut self, depth: u32) -> Self {
        Arc::make_mut(&mut self.team).set_max_depth(depth);
        self
    }

    /// Installs this agent as the runtime's model for tools: `ctx.model()` asks its model (an
    /// ask with tools in a scratch session of the call), the `task` tool and a workflow
    /// body's `ctx.agent(name)` run its [`Subagent`]s, and what they use counts against the
    /// calling turn's budget. The runtime keeps the agent's settings as they are now; it does
    /// not keep the runtime alive. Fails when the runtime has a model already
    /// ([`RuntimeError::ModelInstalled`]).
    pub fn install(&self) -> Result<(), AgentError> {
        let delegate = Delegate {
            runtime: self.runtime.downgrade(),
            agent: Unbound::of(self),
        };
        self.runtime.install_model(delegate)?;
        Ok(())
    }

    /// Whether the registry has the built-in `task` tool, whose subagents the system prompt
    /// lists.
    pub(crate) fn team_prompt(&self) -> Option<String> {
        let registry = self.runtime.registry();
        registry
            .tools()
            .iter()
            .any(|tool| {
                tool.descriptor()
                    .is_some_and(toolwright_core::builtin::is_task)
            })
            .then(|| self.team.prompt())
            .filter(|_| self.team.listed)
    }
}

/// An agent without its runtime: what the installed model keeps (the runtime holds it, so
/// it must not hold the runtime).
#[derive(Clone)]
struct Unbound {
    inner: Arc<dyn Model>,
    model: Arc<dyn Model>,
    instructions: Option<String>,
    settings: crate::model::Settings,
    budget: Budget,
    input_retries: u32,
    events: broadcast::Sender<super::AgentEvent>,
    team: Arc<Team>,
}

impl Unbound {
    fn of(agent: &Agent) -> Self {
        Unbound {
            inner: Arc::clone(&agent.inner),
            model: Arc::clone(&agent.model),
            instructions: agent.instructions.clone(),
            settings: agent.settings.clone(),
            budget: agent.budget.clone(),
            input_retries: agent.input_retries,
            events: agent.events.clone(),
            team: Arc::clone(&agent.team),
        }
    }

    fn bind(&self, runtime: Runtime) -> Agent {
        let this = self.clone();
        Agent {
            runtime,
            inner: this.inner,
            model: this.model,
            instructions: this.instructions,
            settings: this.settings,
            budget: this.budget,
            input_retries: this.input_retries,
            events: this.events,
            team: this.team,
        }
    }
}

/// The installed model (see [`Agent::install`]).
struct Delegate {
    runtime: WeakRuntime,
    agent: Unbound,
}

impl ModelBackend for Delegate {
    fn complete(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
        Box::pin(self.answer(request))
    }
}

impl Delegate {
    async fn answer(&self, request: ModelRequest) -> Result<ModelReply, ToolError> {
        let runtime = self.runtime.upgrade().ok_or_else(|| {
            ToolError::with_code(ErrorCode::Unavailable, "the runtime was shut down")
        })?;
        let parent = self.agent.bind(runtime);
        if request.agent.is_none() && request.tools.is_empty() {
            let priced = parent.budget.has_prices().then_some(&parent.budget);
            return one_shot(parent.inner.as_ref(), &request, priced).await;
        }
        let Some(origin) = request.origin.clone() else {
            return Err(ToolError::with_code(
                ErrorCode::MissingState,
                "a session for the model was asked for outside a tool call; ask through a \
                 tool's `ctx.model()` or `ctx.agent(..)`",
            ));
        };
        let depth = depth_of(&parent.runtime, &origin.session.id).await?;
        if depth >= parent.team.max_depth {
            return Err(ToolError::with_code(
                ErrorCode::LimitReached,
                format!(
                    "delegation is limited to {} sessions deep, and this call runs {depth} deep; \
                     do the work here instead of handing it on",
                    parent.team.max_depth
                ),
            ));
        }
        let profile = parent.profile(&request, &origin)?;
        // The child's calls need places among the runtime's concurrent calls, and its person
        // may take hours: waiting for them, this call gives its place up and its timeout's
        // clock stands still.
        toolwright_runtime::waiting_on_calls(parent.delegate(&request, &origin, profile)).await
    }
}

impl Agent {
    /// What the child session of `request` is: a named subagent's, or the call's scratch
    /// session for an ask with tools.
    fn profile(&self, request: &ModelRequest, origin: &ModelOrigin) -> Result<Profile, ToolError> {
        let base = format!(
            "{}/{}/{}",
            origin.session.id, origin.session.turn_id, origin.call_id
        );
        let registry = self.runtime.registry();
        let unknown: Vec<&String> = request
            .tools
            .iter()
            .filter(|name| registry.get(name).is_none())
            .collect();
        if !unknown.is_empty() {
            let names: Vec<String> = unknown
                .iter()
                .map(|n| format!("`{}`", quoted_prefix(n)))
                .collect();
            return Err(ToolError::with_code(
                ErrorCode::UnknownTool,
                format!(
                    "the model was asked to use tools the registry does not have: {}",
                    names.join(", ")
                ),
            ));
        }
        let asked = (!request.tools.is_empty()).then(|| request.tools.clone());
        let Some(name) = &request.agent else {
            return Ok(Profile {
                session_id: format!("{base}/scratch"),
                instructions: request.system.clone(),
                tools: asked,
                budget: None,
                model: None,
                label: "the scratch session".into(),
            });
        };
        let subagent = match self.team.subagents.get(name) {
            Some(subagent) => subagent.clone(),
            None if name == GENERAL_AGENT => {
                Subagent::new(GENERAL_AGENT, "").instructions(GENERAL_INSTRUCTIONS)
            }
            None => {
                let mut known: Vec<String> = self
                    .team
                    .subagents
                    .keys()
                    .map(|n| format!("`{n}`"))
                    .collect();
                known.push(format!("`{GENERAL_AGENT}`"));
                return Err(ToolError::with_code(
                    ErrorCode::InvalidInput,
                    format!(
                        "there is no subagent `{}`; the subagents are {}",
                        quoted_prefix(name),
                        known.join(", ")
                    ),
                ));
            }
        };
        // The ask may narrow the subagent's tools, never widen them.
        let tools = match (subagent.tools, asked) {
            (Some(own), Some(asked)) => {
                Some(own.into_iter().filter(|t| asked.contains(t)).collect())
            }
            (own, asked) => own.or(asked),
        };
        let instructions = match (subagent.instructions, &request.system) {
            (Some(own), Some(extra)) => Some(format!("{own}\n\n{extra}")),
            (own, extra) => own.or_else(|| extra.clone()),
        };
        Ok(Profile {
            session_id: format!("{base}/{name}#{}", origin.ordinal),
            instructions,
            tools,
            budget: subagent.budget,
            model: subagent.model,
            label: format!("subagent `{name}`"),
        })
    }

    /// Runs `request` in its child session and returns the final answer.
    async fn delegate(
        &self,
        request: &ModelRequest,
        origin: &ModelOrigin,
        profile: Profile,
    ) -> Result<ModelReply, ToolError> {
        let runtime = &self.runtime;
        let key = format!("{ASK_KEY}{}", origin.ordinal);
        let (session, found) = open_child(runtime, origin, &profile, &key)
            .await
            .map_err(failing(&profile.label))?;
        let child = self.child(origin, request, &profile).await?;
        let (turn, mut outcome) = match found {
            Some(turn_id) => {
                let turn = runtime
                    .turn(&turn_id)
                    .await
                    .map_err(failing(&profile.label))?;
                let outcome = child.attach(&turn).await;
                (turn, outcome)
            }
            None => {
                let (turn, conversation) = child
                    .begin_child(&session, origin, &key, request)
                    .await
                    .map_err(failing(&profile.label))?;
                let outcome = child.drive(&turn, conversation).await;
                (turn, outcome)
            }
        };
        // Cancelling the call (a timeout, the turn cancelled) stops the subagent's turn too.
        let mut guard = CancelOnDrop(Some(turn.clone()));
        loop {
            let done = outcome.map_err(failing(&profile.label))?;
            match done.outcome {
                AgentOutcome::Waiting(_) => {
                    wait_answered(runtime, &turn)
                        .await
                        .map_err(failing(&profile.label))?;
                    outcome = child.resume_when_free(&turn).await;
                }
                AgentOutcome::Answered(response) => {
                    guard.0 = None;
                    let usage = child.spent(&turn).await?;
                    let reply = ModelReply::new(response.model, response.message.text)
                        .stop_reason(StopReason::EndTurn)
                        .usage(usage)
                        .session(session.id());
                    return Ok(reply);
                }
                AgentOutcome::Ended(results) => {
                    guard.0 = None;
                    let usage = child.spent(&turn).await?;
                    let text: Vec<String> = results.iter().map(|r| r.model().to_text()).collect();
                    let model = child.inner.model_name().to_owned();
                    return Ok(ModelReply::new(model, text.join("\n\n"))
                        .stop_reason(StopReason::EndTurn)
                        .usage(usage)
                        .session(session.id()));
                }
                AgentOutcome::Stopped(request) => {
                    guard.0 = None;
                    let usage = child.spent(&turn).await?;
                    return Err(usage.attach(ToolError::with_code(
                        ErrorCode::LimitReached,
                        format!(
                            "{} stopped before it finished: {} The person did not extend its \
                             budget.",
                            profile.label, request.prompt
                        ),
                    )));
                }
            }
        }
    }

    /// The agent that runs the child session of `profile`.
    async fn child(
        &self,
        origin: &ModelOrigin,
        request: &ModelRequest,
        profile: &Profile,
    ) -> Result<Agent, ToolError> {
        let left = if self.budget.is_limited() {
            let conversation = Conversation::load(self.runtime.store(), &origin.session.id)
                .await
                .map_err(failing(&profile.label))?;
            let ledger = Ledger::of(&conversation, &origin.session.turn_id, &self.budget)
                .map_err(failing(&profile.label))?;
            ledger.remaining(&self.budget)
        } else {
            crate::budget::Limits::default()
        };
        let mut child = self.clone();
        if let Some(model) = &profile.model {
            child = Agent {
                model: Arc::new(crate::retry::Retrying::new(
                    Arc::clone(model),
                    crate::retry::RetryPolicy::default(),
                )),
                inner: Arc::clone(model),
                ..child
            };
        }
        child.budget = self.budget.for_child(profile.budget.as_ref(), &left);
        if profile
            .tools
            .as_ref()
            .is_some_and(|tools| !tools.iter().any(|t| t == "task"))
        {
            Arc::make_mut(&mut child.team).listed = false;
        }
        let result = request.result_instruction();
        child.instructions = match (profile.instructions.clone(), result) {
            (Some(own), Some(result)) => Some(format!("{own}\n\n{result}")),
            (own, result) => own.or(result),
        };
        if request.max_tokens > 0 && child.settings.max_output_tokens.is_none() {
            child.settings.max_output_tokens = Some(request.max_tokens);
        }
        Ok(child)
    }

    /// Begins the child's turn for ask `key`, records it in the child session's state
    /// before anything runs, and appends the ask's messages: the turn and the conversation
    /// the loop goes on with.
    async fn begin_child(
        &self,
        session: &Session,
        origin: &ModelOrigin,
        key: &str,
        request: &ModelRequest,
    ) -> Result<(Turn, Conversation), AgentError> {
        let store = self.runtime.store();
        let mut conversation = Conversation::load(store, session.id()).await?;
        self.close_dangling_calls(&mut conversation).await?;
        let current = origin.session.current.clone();
        let tainted = self
            .runtime
            .turn(&origin.session.turn_id)
            .await?
            .record()
            .await?
            .tainted_by;
        let turn = match tainted {
            Some(source) => {
                session
                    .begin_tainted_turn(current, Caller::Model, source)
                    .await?
            }
            None => session.begin_turn(current, Caller::Model).await?,
        };
        session.set_state(key, turn.id()).await?;
        // One user message opens the turn (what the loop counts steered messages after): a
        // request of several messages is written out in it, oldest first.
        let text = match request.messages.as_slice() {
            [only] => only.text.clone(),
            messages => messages
                .iter()
                .map(|m| match m.role {
                    toolwright_core::MessageRole::User => format!("user: {}", m.text),
                    toolwright_core::MessageRole::Assistant => format!("assistant: {}", m.text),
                })
                .collect::<Vec<_>>()
                .join("\n\n"),
        };
        let last_user = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == toolwright_core::MessageRole::User)
            .map_or("", |m| m.text.as_str());
        let mut opening = vec![Message::user(text)];
        if let Some(context) = turn.context(last_user).await?.render() {
            opening.push(Message::context(context));
        }
        conversation.append(store, turn.id(), opening).await?;
        Ok((turn, conversation))
    }

    /// Goes on with a turn an earlier run of the same ask began.
    async fn attach(&self, turn: &Turn) -> Result<AgentTurn, AgentError> {
        let record = turn.record().await?;
        match record.status {
            TurnStatus::Completed => {
                let conversation =
                    Conversation::load(self.runtime.store(), turn.session_id()).await?;
                let last = conversation
                    .by_turn()
                    .filter(|(id, _)| *id == turn.id())
                    .filter_map(|(_, m)| m.as_assistant())
                    .last()
                    .cloned()
                    .unwrap_or_default();
                let mut response = crate::model::Response::new(last);
                response.model = response.message.model.clone().unwrap_or_default();
                response.usage = response.message.usage;
                Ok(AgentTurn {
                    turn_id: turn.id().to_owned(),
                    outcome: AgentOutcome::Answered(response),
                })
            }
            _ => self.resume_when_free(turn).await,
        }
    }

    /// Resumes the child's turn once no run holds it. The answer that lets it go on runs the
    /// approved calls itself (here or in another process): a resume that finds them running,
    /// however recently the turn was seen waiting, waits for that run and tries again.
    async fn resume_when_free(&self, turn: &Turn) -> Result<AgentTurn, AgentError> {
        loop {
            match self.resume(turn.id()).await {
                Err(AgentError::TurnState { why, .. }) if why == super::RUNNING_ELSEWHERE => {
                    wait_answered(&self.runtime, turn).await?;
                }
                outcome => return outcome,
            }
        }
    }

    /// What the child's turn used, as the parent's call counts it.
    async fn spent(&self, turn: &Turn) -> Result<ModelUsage, ToolError> {
        let conversation = Conversation::load(self.runtime.store(), turn.session_id())
            .await
            .map_err(failing("the subagent"))?;
        // Cost is counted whenever the models that answered have prices (the parent may
        // limit it); without a price for one of them, the tokens still count.
        let ledger = Ledger::count(&conversation, turn.id(), &self.budget, true)
            .or_else(|_| Ledger::count(&conversation, turn.id(), &self.budget, false))
            .map_err(failing("the subagent"))?;
        Ok(ledger.turn_usage())
    }
}

/// Opens the child session of `profile`, or finds it (an earlier ask, an earlier run) with
/// the turn an earlier run of ask `key` began in it, if any.
async fn open_child(
    runtime: &Runtime,
    origin: &ModelOrigin,
    profile: &Profile,
    key: &str,
) -> Result<(Session, Option<String>), RuntimeError> {
    if let Some((record, _)) = runtime.store().session(&profile.session_id).await? {
        let found = record
            .state
            .get(key)
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        return Ok((runtime.session(&profile.session_id).await?, found));
    }
    let (parent, _) = runtime
        .store()
        .session(&origin.session.id)
        .await?
        .ok_or_else(|| RuntimeError::UnknownSession(origin.session.id.clone()))?;
    let mut spec = SessionSpec::new(&profile.session_id).parent(&parent.id);
    if let Some(initiator) = parent.initiator.clone() {
        spec = spec.initiator(initiator);
    }
    if !parent.interactive {
        spec = spec.non_interactive();
    }
    for (effect, permission) in &parent.permissions {
        spec = spec.permission(*effect, *permission);
    }
    if let Some(tools) = &profile.tools {
        spec = spec.tools(tools.iter().cloned());
    }
    Ok((runtime.open_session(spec).await?, None))
}

/// How many sessions above `session_id` there are.
async fn depth_of(runtime: &Runtime, session_id: &str) -> Result<u32, ToolError> {
    let mut depth = 0;
    let mut id = session_id.to_owned();
    // Bounded: a cycle of parents (a hand-written store) must not loop forever.
    while depth < 64 {
        let found = runtime
            .store()
            .session(&id)
            .await
            .map_err(|e| ToolError::with_code(ErrorCode::Unavailable, e.to_string()))?;
        match found.and_then(|(record, _)| record.parent) {
            Some(parent) => {
                depth += 1;
                id = parent;
            }
            None => break,
        }
    }
    Ok(depth)
}

/// Waits until `turn` no longer waits for a person (or another process's calls).
async fn wait_answered(runtime: &Runtime, turn: &Turn) -> Result<(), AgentError> {
    let mut events = runtime.subscribe();
    loop {
        let status = turn.record().await?.status;
        if !matches!(status, TurnStatus::Waiting | TurnStatus::Running) {
            return Ok(());
        }
        // An event of the child's session may be the answer; the poll catches an answer given
        // in another process.
        let _ = tokio::time::timeout(WAIT_POLL, async {
            loop {
                match events.recv().await {
                    Ok(event) if event.session_id() == Some(turn.session_id()) => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => {
                        std::future::pending::<()>().await;
                    }
                }
            }
        })
        .await;
    }
}

/// Cancels a child's turn when the call that waits for it goes away before it finished.
struct CancelOnDrop(Option<Turn>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(turn) = self.0.take() else {
            return;
        };
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = turn.cancel().await;
            });
        }
    }
}

/// A failure of `what` as the tool's error.
fn failed(what: &str, why: &str) -> ToolError {
    ToolError::with_code(ErrorCode::Unavailable, format!("{what} failed: {why}"))
}

/// [`failed`] as an error mapper: `.map_err(failing(label))`.
fn failing<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> ToolError + '_ {
    move |error| failed(what, &error.to_string())
}
