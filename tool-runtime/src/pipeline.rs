//! The call pipeline: resolve → visibility → parse and validate → approval decision → park or
//! run → execute → output check → projection → result; and the input protocol that resumes a
//! parked step.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    ApprovalCall, ApprovalDecision, AskAnswer, Audience, CallContext, Caller, ContentPart, Effect,
    EnabledContext, ErrorCode, Format, ModelOutput, NeverCancelled, Registry, RequestPolicy,
    ResponseCall, ResponseDecision, ResponseVerdict, SessionInfo, Tool, ToolError, names,
};
use tracing::Instrument;

use crate::call::{InputResponse, RespondOutcome, StepOutcome, ToolCall};
use crate::decider::{AutoRequest, AutoVerdict};
use crate::error::RuntimeError;
use crate::event::{CandidateStatus, CompletionReason, Event};
use crate::host::{Journal, RuntimeHost};
use crate::record::{
    Approver, CallResult, CallState, Decision, EntryKind, InputRequest, JournalEntry, Outcome,
    PendingCall, PendingStep, Permission, RequestKind, SessionRecord, TurnRecord, TurnStatus,
};
use crate::runtime::{Runtime, Turn};
use crate::store::{Claim, Lease, StoreError};
use crate::transition::answer::{
    answer_text, decision_of, question_answer, response_verdict, with_note, workflow_answer,
};
use crate::transition::request::ApprovalAsk;
use crate::transition::turn::{Cancellation, Settlement};
use crate::transition::{Parked, Suspension};

/// How one execution ended.
enum Executed {
    /// With a result.
    Done(CallResult),
    /// A workflow body waits for a person; the call parks.
    Suspended(Suspension),
}

/// What the pipeline decided for one call before anything ran.
enum Prepared {
    /// The call already has its result (an error, a denial, a meta-tool answer).
    Done(CallResult),
    /// A provider-native tool the model provider ran: its result came with the response; and
    /// whether the tool is `untrusted`.
    Provided(CallResult, bool),
    /// The call may run.
    Run {
        call_id: String,
        tool: Arc<Tool>,
        input: Value,
    },
    /// A task meta-tool (`task_wait`, `task_cancel`), run with the step's calls.
    Meta {
        call_id: String,
        name: &'static str,
        arguments: String,
    },
    /// The call waits for a person.
    Ask {
        call_id: String,
        tool: Arc<Tool>,
        input: Value,
        request: Box<InputRequest>,
    },
}

impl Prepared {
    /// The call as the step records it before anything runs.
    fn pending_call(&self) -> PendingCall {
        match self {
            Prepared::Done(result) | Prepared::Provided(result, _) => {
                PendingCall::finished(result.clone())
            }
            Prepared::Run {
                call_id,
                tool,
                input,
            } => PendingCall::running(call_id, tool.name(), input.clone()),
            Prepared::Meta { call_id, name, .. } => {
                PendingCall::running(call_id, name, Value::Null)
            }
            Prepared::Ask {
                call_id,
                tool,
                input,
                request,
            } => PendingCall::waiting(call_id, tool.name(), input.clone(), &request.request_id),
        }
    }
}

/// What one step works with, read once at its start.
struct StepScope {
    /// The tools as they were when the step began.
    registry: Registry,
    session: SessionRecord,
    turn: TurnRecord,
    approved: BTreeSet<String>,
    audience: Audience,
    /// Tools whose `enabled` predicate is false in this step.
    disabled: HashSet<usize>,
    /// Fires when the turn is cancelled; handed to asynchronous policies.
    cancel: TokenSignal,
}

/// The turn's cancellation token as the signal policies receive.
struct TokenSignal(CancellationToken);

impl toolwright_core::CancelSignal for TokenSignal {
    fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    fn cancelled(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(self.0.cancelled())
    }
}

impl StepScope {
    fn info(&self) -> SessionInfo {
        session_info(&self.session, &self.turn)
    }
}

fn session_info(session: &SessionRecord, turn: &TurnRecord) -> SessionInfo {
    SessionInfo {
        id: session.id.clone(),
        turn_id: turn.id.clone(),
        parent: session.parent.clone(),
        initiator: session.initiator.clone(),
        current: turn.current.clone(),
        interactive: session.interactive && turn.caller != Caller::Schedule,
    }
}

fn audience_of(turn: &TurnRecord) -> Audience {
    Audience::of(turn.caller)
}

/// Parses the model's arguments once, strictly: duplicate keys and numbers that cannot be
/// represented exactly are refused, so validation and execution see the same values.
fn parse_arguments(tool: &str, text: &str) -> Result<Value, ToolError> {
    toolwright_core::json::parse_arguments(tool, text).map_err(|error| error.into_tool_error())
}

impl Turn {
    /// Runs one step: the batch of calls from one model response, concurrently.
    ///
    /// Calls that need a person park the turn in the store (the returned
    /// [`StepOutcome::Waiting`] lists the requests); calls that may run, run now.
    pub async fn step(&self, calls: Vec<ToolCall>) -> Result<StepOutcome, RuntimeError> {
        // On its own task: once the step is recorded as running, a caller that stops waiting (a
        // client that disconnects) must not abandon its calls halfway and leave the turn stuck.
        let turn = self.clone();
        tokio::spawn(async move { turn.run_step(calls).await })
            .await
            .map_err(|error| RuntimeError::Task(error.to_string()))?
    }

    async fn run_step(&self, calls: Vec<ToolCall>) -> Result<StepOutcome, RuntimeError> {
        let rt = &self.runtime;
        let store = &rt.0.store;
        let (turn, version) = store
            .turn(&self.id)
            .await?
            .ok_or_else(|| RuntimeError::UnknownTurn(self.id.clone()))?;
        if turn.status != TurnStatus::Active {
            return Err(RuntimeError::TurnState {
                turn: self.id.clone(),
                status: turn.status,
                what: match turn.status {
                    TurnStatus::Waiting => "it waits for input; answer, message or cancel it first",
                    TurnStatus::Running => "its calls are running; wait for their results",
                    _ => "it has ended; begin a new turn",
                },
            });
        }
        let _running = rt.track(&self.id, &self.token);
        let (session, _) = store
            .session(&turn.session_id)
            .await?
            .ok_or_else(|| RuntimeError::UnknownSession(turn.session_id.clone()))?;
        // Only `once` and custom policies read the session's approvals: skip the store read
        // when no tool has one.
        let approved = if rt.0.reads_approvals {
            store.approvals(&session.id).await?
        } else {
            BTreeSet::new()
        };
        let audience = audience_of(&turn);
        let registry = rt.registry();
        let disabled = rt.disabled_tools(&registry, &session, &turn);
        let notices = rt.announce(&registry, &session, &turn, &disabled).await?;
        let mut scope = StepScope {
            registry,
            session,
            turn,
            approved,
            audience,
            disabled,
            cancel: TokenSignal(self.token.clone()),
        };

        // Results, approvals and resumption are keyed by call id: a step whose ids repeat could
        // run one call twice, so none of its calls run.
        let mut seen = HashSet::new();
        let repeated: Vec<&str> = calls
            .iter()
            .filter(|c| !seen.insert(c.call_id.as_str()))
            .map(|c| c.call_id.as_str())
            .collect();
        if !repeated.is_empty() {
            let results: Vec<CallResult> = calls
                .iter()
                .map(|call| {
                    CallResult::failed(
                        &call.call_id,
                        &call.name,
                        ToolError::with_code(
                            ErrorCode::InvalidInput,
                            format!(
                                "call ids must be unique within one response, and {} repeat; none of these calls ran, call them again with distinct ids",
                                repeated.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(", ")
                            ),
                        ),
                    )
                })
                .collect();
            for result in &results {
                rt.emit(Event::ActionResult {
                    session_id: scope.session.id.clone(),
                    turn_id: self.id.clone(),
                    result: result.clone(),
                });
            }
            scope.turn.refuse_step();
            store.put_turn(&scope.turn, Some(version)).await?;
            return Ok(StepOutcome::Completed {
                results,
                ends_turn: false,
                notices,
            });
        }

        let span = tracing::info_span!("step", turn_id = %self.id, calls = calls.len());
        let mut prepared = Vec::with_capacity(calls.len());
        for call in &calls {
            prepared.push(rt.prepare(&scope, call).instrument(span.clone()).await);
        }

        // Announce every call, then run what may run. Without subscribers nobody sees the
        // events, so their inputs are not cloned and their labels not rendered.
        let announced = rt.0.events.receiver_count() > 0;
        for (call, prep) in calls.iter().zip(&prepared).filter(|_| announced) {
            let (tool, input) = match prep {
                Prepared::Run { tool, input, .. } | Prepared::Ask { tool, input, .. } => {
                    (tool.name().to_owned(), input.clone())
                }
                Prepared::Done(result) | Prepared::Provided(result, _) => {
                    (result.tool.clone(), Value::String(call.arguments.clone()))
                }
                Prepared::Meta {
                    name, arguments, ..
                } => ((*name).to_owned(), Value::String(arguments.clone())),
            };
            let label = match prep {
                Prepared::Run { tool, input, .. } | Prepared::Ask { tool, input, .. } => {
                    start_label(tool, input)
                }
                Prepared::Done(result) | Prepared::Provided(result, _) => {
                    names::humanize(&result.tool)
                }
                Prepared::Meta { name, .. } => names::humanize(name),
            };
            rt.emit(Event::ActionRequested {
                session_id: scope.session.id.clone(),
                turn_id: self.id.clone(),
                call_id: call.call_id.clone(),
                tool,
                input,
                label,
                caller: scope.turn.caller,
                principal: scope.turn.current.clone(),
            });
        }

        let waiting = prepared.iter().any(|p| matches!(p, Prepared::Ask { .. }));
        let runs_something = prepared.iter().any(|p| {
            matches!(
                p,
                Prepared::Run { .. } | Prepared::Ask { .. } | Prepared::Meta { .. }
            )
        });
        let mut version = version;
        // The lease of the claim below, under which this step's writes and journal records go.
        let mut lease: Option<Lease> = None;
        if runs_something {
            // Record the step as running before anything runs: a second handle cannot step the
            // turn meanwhile, and after a crash `recover` re-runs durable calls from their
            // journals and settles the others as "result unknown" (never run twice).
            let calls = prepared.iter().map(Prepared::pending_call).collect();
            let requests = prepared
                .iter()
                .filter_map(|p| match p {
                    Prepared::Ask { request, .. } => Some((**request).clone()),
                    _ => None,
                })
                .collect();
            // `running` while the ready calls run: the requests are not announced yet, so no
            // answer can arrive before the step is parked below.
            scope.turn.begin_step(calls, requests);
            let written = store
                .write_turn(&scope.turn, Some(version), rt.take())
                .await?;
            version = written.version;
            _running.hold(written.lease.clone());
            lease = written.lease;
        }

        // Run the calls that may run, concurrently.
        let runs = prepared.iter().map(|p| async {
            match p {
                Prepared::Run {
                    call_id,
                    tool,
                    input,
                } => Some(
                    rt.execute(
                        &scope.session,
                        &scope.turn,
                        tool,
                        call_id,
                        input.clone(),
                        None,
                        &self.token,
                        lease.as_ref(),
                        false,
                    )
                    .await,
                ),
                Prepared::Meta {
                    call_id,
                    name,
                    arguments,
                } => Some(Executed::Done(
                    rt.task_meta(
                        &scope.session.id,
                        &self.id,
                        call_id,
                        name,
                        arguments,
                        &self.token,
                    )
                    .await,
                )),
                _ => None,
            }
        });
        let ran: Vec<Option<Executed>> = futures_util::future::join_all(runs).await;
        let mut results = Vec::new();
        let mut suspended = Vec::new();
        for (prep, ran) in prepared.iter().zip(ran) {
            let (result, invoked) = match (prep, ran) {
                (Prepared::Run { call_id, tool, .. }, Some(Executed::Suspended(suspension))) => {
                    let name = tool.name();
                    suspended.push(Parked::new(&scope.turn, call_id, name, suspension));
                    continue;
                }
                // Taint is decided by the tool that ran, not by what the registry holds now (a
                // server may have dropped the tool meanwhile).
                (Prepared::Run { tool, .. }, Some(Executed::Done(result))) => {
                    (result, tool.is_untrusted())
                }
                (_, Some(Executed::Done(result))) => (result, false),
                (Prepared::Done(result), None) => (result.clone(), false),
                // The provider ran it: its output is in the turn, and taints like any other.
                (Prepared::Provided(result, untrusted), None) => (result.clone(), *untrusted),
                _ => continue,
            };
            scope.turn.note_taint(&result.tool, invoked);
            rt.emit(Event::ActionResult {
                session_id: scope.session.id.clone(),
                turn_id: self.id.clone(),
                result: result.clone(),
            });
            results.push(result);
        }

        let parked: HashSet<String> = suspended.iter().map(|p| p.call_id.clone()).collect();
        if waiting || !suspended.is_empty() {
            if scope.turn.park(&results, suspended).is_none() {
                return Err(RuntimeError::Store(StoreError::Corrupt {
                    id: self.id.clone(),
                    error: "a running step has no record".into(),
                }));
            }
            let requests = scope
                .turn
                .pending
                .as_ref()
                .map(|step| step.requests.clone())
                .unwrap_or_default();
            match store
                .write_turn(&scope.turn, Some(version), keep(lease.as_ref()))
                .await
            {
                Ok(_) => {}
                // Cancelled while the ready calls ran: `cancel` closed the turn, and the requests,
                // never announced, will not be; the calls that waited on them are cancelled.
                Err(StoreError::Conflict(_)) if rt.cancelled_meanwhile(&self.id).await? => {
                    let mut ran = results.into_iter();
                    let mut all = Vec::with_capacity(prepared.len());
                    for prep in &prepared {
                        match prep {
                            Prepared::Ask { call_id, tool, .. }
                            | Prepared::Run { call_id, tool, .. }
                                if matches!(prep, Prepared::Ask { .. })
                                    || parked.contains(call_id) =>
                            {
                                let name = tool.name();
                                all.push(CallResult::failed(
                                    call_id,
                                    name,
                                    ToolError::with_code(
                                        ErrorCode::Cancelled,
                                        format!("`{name}` was cancelled with its turn"),
                                    ),
                                ));
                            }
                            _ => all.extend(ran.next()),
                        }
                    }
                    return Ok(StepOutcome::Completed {
                        results: all,
                        ends_turn: false,
                        notices,
                    });
                }
                Err(error) => return Err(error.into()),
            }
            for request in &requests {
                rt.emit(Event::InputRequested {
                    request: request.clone(),
                });
            }
            rt.emit(Event::TurnWaiting {
                session_id: scope.session.id.clone(),
                turn_id: self.id.clone(),
                on: "input".into(),
                requests: requests.iter().map(|r| r.request_id.clone()).collect(),
            });
            return Ok(StepOutcome::Waiting {
                results,
                requests,
                notices,
            });
        }

        // A turn cannot end while workflow tasks owe it results.
        let ends_turn =
            scope.turn.may_end(&results) && rt.owing(&scope.session.id, &self.id).await?.is_empty();
        scope.turn.close_step(&results, ends_turn);
        match store
            .write_turn(&scope.turn, Some(version), keep(lease.as_ref()))
            .await
        {
            Ok(_) => {}
            // Cancelled while the calls ran: `cancel` closed the turn; report what the calls did.
            Err(StoreError::Conflict(_)) if rt.cancelled_meanwhile(&self.id).await? => {
                return Ok(StepOutcome::Completed {
                    results,
                    ends_turn: false,
                    notices,
                });
            }
            Err(error) => return Err(error.into()),
        }
        if ends_turn {
            rt.emit(Event::TurnCompleted {
                session_id: scope.session.id.clone(),
                turn_id: self.id.clone(),
                reason: CompletionReason::EndsTurn,
            });
        }
        Ok(StepOutcome::Completed {
            results,
            ends_turn,
            notices,
        })
    }

    /// The model-facing tool list for the next model call of this turn, in `format`: the cached
    /// list of the turn's audience without the conditional tools whose predicate is now false.
    pub async fn tool_list(&self, format: Format) -> Result<String, RuntimeError> {
        let rt = &self.runtime;
        let turn = self.record().await?;
        let (session, _) =
            rt.0.store
                .session(&turn.session_id)
                .await?
                .ok_or_else(|| RuntimeError::UnknownSession(turn.session_id.clone()))?;
        let registry = rt.registry();
        let list = registry.list(audience_of(&turn), format);
        let disabled = rt.disabled_tools(&registry, &session, &turn);
        if disabled.is_empty() {
            return Ok(list.json().to_owned());
        }
        let mut json = String::from("[");
        for entry in list
            .entries()
            .iter()
            .filter(|e| e.tool.is_none_or(|i| !disabled.contains(&i)))
        {
            if json.len() > 1 {
                json.push(',');
            }
            json.push_str(entry.json.get());
        }
        json.push(']');
        Ok(json)
    }

    /// Names of the conditional tools (`enabled = ...`) whose predicate is false for this turn
    /// now: what [`Turn::tool_list`] leaves out. Empty, without reading the store, when no tool
    /// is conditional.
    pub async fn unavailable_tools(&self) -> Result<Vec<String>, RuntimeError> {
        let rt = &self.runtime;
        let registry = rt.registry();
        if !registry.tools().iter().any(|t| t.enabled().is_some()) {
            return Ok(Vec::new());
        }
        let turn = self.record().await?;
        let (session, _) =
            rt.0.store
                .session(&turn.session_id)
                .await?
                .ok_or_else(|| RuntimeError::UnknownSession(turn.session_id.clone()))?;
        let mut names: Vec<String> = rt
            .disabled_tools(&registry, &session, &turn)
            .into_iter()
            .map(|i| registry.tools()[i].name().to_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Ends the turn (the host's model answered without calling tools).
    ///
    /// Refused with [`RuntimeError::TasksOpen`] while workflow tasks owe the turn results (not
    /// produced yet, or not taken with [`Turn::task_results`]).
    pub async fn complete(&self) -> Result<(), RuntimeError> {
        let rt = &self.runtime;
        let owing = rt.owing(&self.session_id, &self.id).await?;
        if !owing.is_empty() {
            return Err(RuntimeError::TasksOpen {
                turn: self.id.clone(),
                tasks: owing
                    .iter()
                    .map(|t| format!("{} ({})", t.id, t.status.describe()))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        loop {
            let (mut turn, version) =
                rt.0.store
                    .turn(&self.id)
                    .await?
                    .ok_or_else(|| RuntimeError::UnknownTurn(self.id.clone()))?;
            if let Err(status) = turn.complete() {
                return Err(RuntimeError::TurnState {
                    turn: self.id.clone(),
                    status,
                    what: "only an active turn can be completed",
                });
            }
            match rt.0.store.put_turn(&turn, Some(version)).await {
                Ok(_) => break,
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        rt.emit(Event::TurnCompleted {
            session_id: self.session_id.clone(),
            turn_id: self.id.clone(),
            reason: CompletionReason::Host,
        });
        Ok(())
    }

    /// Cancels the turn: running calls see their cancellation token fire, pending requests are
    /// revoked (`cancelled`), and a later answer to them approves nothing.
    ///
    /// Workflow tasks the turn started are cancelled too, in the background: each body gets its
    /// cleanup window ([`crate::Options::task_cleanup`]).
    pub async fn cancel(&self) -> Result<(), RuntimeError> {
        self.token.cancel();
        self.runtime.cancel_turn(&self.id).await?;
        self.runtime
            .cancel_tasks_of_turn(&self.session_id, &self.id)
            .await;
        Ok(())
    }

    /// A plain message from the turn's caller while the turn waits: it answers the first
    /// unanswered question; with no question pending, it revokes pending approvals (`ignored`),
    /// and calls of the batch that were already approved still run.
    pub async fn message(&self, text: &str) -> Result<RespondOutcome, RuntimeError> {
        // A plain message answers the first unanswered question, in the turn's caller's name.
        let record = self.record().await?;
        if record.status == TurnStatus::Waiting
            && let Some(question) = record
                .pending
                .iter()
                .flat_map(|p| &p.requests)
                .find(|r| r.kind == RequestKind::Question && r.is_pending())
        {
            let response =
                InputResponse::answer(&question.request_id, record.current.clone(), text);
            return self.runtime.respond(response).await;
        }
        self.runtime.revoke(&self.id, Outcome::Ignored, text).await
    }
}

/// The record of a provider-native call: the provider's output as is (the model already has
/// it in the provider's own form), an error carrying the output's text when the provider says
/// the call failed.
fn provider_result(
    call: &ToolCall,
    tool: &Tool,
    provided: &crate::call::ProviderResult,
) -> CallResult {
    if provided.is_error {
        let text = match &provided.output {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        return CallResult::failed(
            &call.call_id,
            tool.name(),
            ToolError::with_code(
                ErrorCode::ToolFailed,
                format!("the provider's `{}` failed: {text}", tool.name()),
            ),
        );
    }
    CallResult {
        call_id: call.call_id.clone(),
        tool: tool.name().to_owned(),
        is_error: false,
        model: ModelOutput::Json(provided.output.clone()),
        output: provided.output.clone(),
        error: None,
        ends_turn: false,
        label: None,
    }
}

impl Runtime {
    /// Tools whose `enabled` predicate is false for `session` now.
    fn disabled_tools(
        &self,
        registry: &Registry,
        session: &SessionRecord,
        turn: &TurnRecord,
    ) -> HashSet<usize> {
        let info = session_info(session, turn);
        let cx = EnabledContext::new(&info, &session.state);
        registry
            .tools()
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                // A predicate that panics hides its tool: fail closed.
                t.enabled().is_some_and(|enabled| {
                    !std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| enabled(&cx)))
                        .unwrap_or(false)
                })
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Tells the model once when the set of conditional tools changed.
    async fn announce(
        &self,
        registry: &Registry,
        session: &SessionRecord,
        turn: &TurnRecord,
        disabled: &HashSet<usize>,
    ) -> Result<Vec<String>, RuntimeError> {
        let audience = audience_of(turn);
        // Borrowed names: the usual step finds the list unchanged and copies nothing.
        let now: Vec<&str> = registry
            .tools()
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                (t.enabled().is_some() || t.remote_tool().is_some())
                    && !disabled.contains(i)
                    && t.listed_for(audience)
            })
            .map(|(_, t)| t.name())
            .collect();
        // Per audience: a user's list and a model's list differ, and alternating between them
        // must not read as tools coming and going.
        let key = match audience {
            Audience::Model => "model",
            Audience::Subagent => "subagent",
            Audience::User => "user",
        };
        let before = session.announced.get(key);
        if before.is_some_and(|before| before.iter().eq(now.iter().copied())) {
            return Ok(Vec::new());
        }
        let before = before.cloned();
        let now: Vec<String> = now.into_iter().map(str::to_owned).collect();
        loop {
            let Some((mut stored, version)) = self.0.store.session(&session.id).await? else {
                return Err(RuntimeError::UnknownSession(session.id.clone()));
            };
            stored.announced.insert(key.to_owned(), now.clone());
            match self.0.store.put_session(&stored, Some(version)).await {
                Ok(_) => break,
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        let Some(before) = before else {
            // The first list the model sees already holds these tools.
            return Ok(Vec::new());
        };
        let added: Vec<String> = now
            .iter()
            .filter(|n| !before.contains(n))
            .cloned()
            .collect();
        let removed: Vec<String> = before
            .iter()
            .filter(|n| !now.contains(n))
            .cloned()
            .collect();
        self.emit(Event::ToolsChanged {
            session_id: session.id.clone(),
            turn_id: turn.id.clone(),
            added: added.clone(),
            removed: removed.clone(),
        });
        Ok(added
            .iter()
            .map(|n| format!("New tool available: {n}"))
            .chain(removed.iter().map(|n| {
                if registry.get(n).is_some_and(Tool::is_withheld) {
                    format!(
                        "Tool withheld: {n} (its server changed its definition; calling it asks the user to approve the change)"
                    )
                } else {
                    format!("Tool no longer available: {n}")
                }
            }))
            .collect())
    }

    /// Resolves, checks and decides one call; runs nothing.
    async fn prepare(&self, scope: &StepScope, call: &ToolCall) -> Prepared {
        let registry = &scope.registry;
        let fail = |tool: &str, error: ToolError| {
            Prepared::Done(CallResult::failed(&call.call_id, tool, error))
        };

        if registry.has_tasks(scope.audience) {
            for name in [crate::task::TASK_WAIT, crate::task::TASK_CANCEL] {
                if call.name == name {
                    return Prepared::Meta {
                        call_id: call.call_id.clone(),
                        name,
                        arguments: call.arguments.clone(),
                    };
                }
            }
        }
        let deferred = registry.has_deferred(scope.audience);
        if deferred && call.name == "tool_search" {
            return Prepared::Done(self.tool_search(scope, call));
        }
        let (name, arguments) = if deferred && call.name == "tool_call" {
            match parse_arguments("tool_call", &call.arguments) {
                Ok(Value::Object(map))
                    if map.keys().any(|k| k != "name" && k != "input")
                        || !map.get("name").is_some_and(Value::is_string)
                        || !map.get("input").is_some_and(Value::is_object) =>
                {
                    return fail(
                        "tool_call",
                        ToolError::with_code(
                            ErrorCode::InvalidInput,
                            "`tool_call` takes exactly {\"name\": \"<a tool found with tool_search>\", \"input\": {...}}; nothing else",
                        ),
                    );
                }
                Ok(Value::Object(mut map)) => {
                    let name = map
                        .remove("name")
                        .and_then(|n| n.as_str().map(str::to_owned));
                    let input = map.remove("input").unwrap_or_else(|| json!({}));
                    match name {
                        Some(name) => (name, Ok(input)),
                        None => {
                            return fail(
                                "tool_call",
                                ToolError::with_code(
                                    ErrorCode::InvalidInput,
                                    "`tool_call` needs `name` (a tool found with tool_search) and `input`",
                                ),
                            );
                        }
                    }
                }
                Ok(_) => {
                    return fail(
                        "tool_call",
                        ToolError::with_code(
                            ErrorCode::InvalidInput,
                            "`tool_call` takes an object: {\"name\": ..., \"input\": {...}}",
                        ),
                    );
                }
                Err(error) => return fail("tool_call", error),
            }
        } else {
            (
                call.name.clone(),
                parse_arguments(&call.name, &call.arguments),
            )
        };

        let tool = match registry.resolve(&name, scope.turn.caller) {
            Ok(tool) => tool,
            Err(error) => return fail(&name, error),
        };
        match (&call.provider_result, tool.provider().is_some()) {
            (Some(provided), true) => {
                return Prepared::Provided(
                    provider_result(call, tool, provided),
                    tool.is_untrusted(),
                );
            }
            (Some(_), false) => {
                return fail(
                    tool.name(),
                    ToolError::with_code(
                        ErrorCode::InvalidInput,
                        format!(
                            "`{}` is not a provider-native tool, so the provider cannot have run it; pass the call without a result and the runtime runs it",
                            tool.name()
                        ),
                    ),
                );
            }
            (None, true) => {
                return fail(
                    tool.name(),
                    ToolError::with_code(
                        ErrorCode::InvalidInput,
                        format!(
                            "`{}` is run by the model provider, which returns its result with the response; the host passes that result with `ToolCall::provider_result`",
                            tool.name()
                        ),
                    ),
                );
            }
            (None, false) => {}
        }
        let Some(index) = registry.index_of(tool.name()) else {
            return fail(
                &name,
                ToolError::with_code(ErrorCode::UnknownTool, format!("no tool named `{name}`")),
            );
        };
        let mut shared = Arc::clone(&registry.tools()[index]);
        if scope.disabled.contains(&index) {
            return fail(
                &name,
                ToolError::with_code(
                    ErrorCode::UnknownTool,
                    format!("tool `{name}` is not available at this point of the conversation"),
                ),
            );
        }
        let input = match arguments {
            Ok(input) => input,
            Err(error) => return fail(tool.name(), error),
        };
        // A withheld tool may have been approved by another instance since this one listed it.
        if shared.is_withheld()
            && self.pinned_meanwhile(&shared).await
            && let Some(fresh) = crate::runtime::find_tool(&self.registry(), shared.name())
        {
            shared = fresh;
        }
        let tool: &Tool = &shared;
        // Strict-mode providers send `null` for optional fields they were told are nullable.
        let mut input = input;
        toolwright_core::export::strip_strict_nulls(tool.input_schema(), &mut input);
        let input = match tool.validate(input) {
            Ok(input) => input,
            Err(error) => return fail(tool.name(), error.into_tool_error()),
        };

        if tool.is_ask_question() {
            return self.question(scope, call, Arc::clone(&shared), input);
        }
        let (mut decision, mut reasons, key) =
            self.decide(scope, tool, &input, &call.call_id).await;
        // A remote tool whose server changed its definition since it was approved runs only
        // after a person approves the new definition; a denial stays a denial.
        let change = crate::remote::definition_change(tool);
        if let Some(change) = &change {
            decision = decision.strictest(ApprovalDecision::UserApproval);
            reasons.insert(
                0,
                format!(
                    "the server of connection `{}` changed the {} of `{}` since it was approved",
                    change.connection,
                    change.changed_parts().join(", "),
                    tool.name()
                ),
            );
        }
        match decision {
            ApprovalDecision::NotApplicable | ApprovalDecision::Approved => Prepared::Run {
                call_id: call.call_id.clone(),
                tool: Arc::clone(&shared),
                input,
            },
            ApprovalDecision::Denied(reason) => fail(
                tool.name(),
                ToolError::with_code(
                    ErrorCode::Denied,
                    match reason {
                        Some(reason) => format!("`{}` was denied: {reason}", tool.name()),
                        None => format!(
                            "`{}` was denied by its approval policy; do not retry it with the same input",
                            tool.name()
                        ),
                    },
                ),
            ),
            ApprovalDecision::UserApproval if !scope.info().interactive && change.is_some() => {
                fail(
                    tool.name(),
                    ToolError::with_code(
                        ErrorCode::ApprovalUnavailable,
                        format!(
                            "`{}` is withheld: {}; a person must approve the new definition first, and this session cannot ask one (it runs unattended)",
                            tool.name(),
                            reasons[0]
                        ),
                    ),
                )
            }
            ApprovalDecision::UserApproval if !scope.info().interactive => fail(
                tool.name(),
                ToolError::with_code(
                    ErrorCode::ApprovalUnavailable,
                    format!(
                        "`{}` needs a person's approval ({}), and this session cannot ask one (it runs unattended); run it from an interactive session, or give the tool a policy that lets schedules through",
                        tool.name(),
                        policy_words(tool, &reasons)
                    ),
                ),
            ),
            ApprovalDecision::UserApproval => {
                let prompt = match &change {
                    Some(change) => format!(
                        "The server behind `{}` changed the tool `{}` ({}) since it was approved. Approve its new definition, and this call?",
                        change.connection,
                        tool.name(),
                        change.changed_parts().join(", ")
                    ),
                    None => self.prompt(scope, tool, &input, &call.call_id),
                };
                let request = InputRequest::approval(
                    &scope.info(),
                    ApprovalAsk {
                        call_id: call.call_id.clone(),
                        tool: tool.name().to_owned(),
                        input: input.clone(),
                        prompt,
                        reasons,
                        approval_key: key,
                        definition_change: change,
                    },
                );
                Prepared::Ask {
                    call_id: call.call_id.clone(),
                    tool: Arc::clone(&shared),
                    request: Box::new(request),
                    input,
                }
            }
        }
    }

    /// `ask_question`: parks the call on a question (or answers `unavailable` when nobody can
    /// be asked).
    fn question(
        &self,
        scope: &StepScope,
        call: &ToolCall,
        tool: Arc<Tool>,
        input: Value,
    ) -> Prepared {
        if !scope.info().interactive {
            let output = json!({ "status": "unavailable" });
            return Prepared::Done(CallResult {
                call_id: call.call_id.clone(),
                tool: "ask_question".into(),
                is_error: false,
                model: ModelOutput::Text(
                    "No one can answer questions in this session. Do not ask again; continue on the most reasonable default.".into(),
                ),
                output,
                error: None,
                ends_turn: false,
                label: None,
            });
        }
        Prepared::Ask {
            call_id: call.call_id.clone(),
            tool,
            request: Box::new(InputRequest::question(&scope.info(), &call.call_id, &input)),
            input,
        }
    }

    /// Policy, then the session's permission for the effect, then taint; the strictest wins and
    /// `denied` never becomes allowed. Returns the decision, the reasons beyond the policy, and
    /// the `once` memory key.
    async fn decide(
        &self,
        scope: &StepScope,
        tool: &Tool,
        input: &Value,
        call_id: &str,
    ) -> (ApprovalDecision, Vec<String>, Option<String>) {
        if scope.turn.caller == Caller::User {
            return (
                self.decide_for_user(scope, tool, input, call_id).await,
                Vec::new(),
                None,
            );
        }
        let effect = tool.effect();
        let mut reasons = Vec::new();
        let tainted = scope.turn.tainted_by.as_deref();
        let mut key = None;
        let policy = tool
            .approval()
            .map(|a| a.request)
            .unwrap_or(RequestPolicy::Never);
        let mut decision = match policy {
            RequestPolicy::Never => ApprovalDecision::NotApplicable,
            RequestPolicy::Always => ApprovalDecision::UserApproval,
            RequestPolicy::Once => match guarded_key(tool, input) {
                Ok(k) => {
                    let approved = scope.approved.contains(&k);
                    key = Some(k);
                    if approved {
                        ApprovalDecision::NotApplicable
                    } else {
                        ApprovalDecision::UserApproval
                    }
                }
                Err(error) => {
                    reasons.push(format!("its approval key failed: {error}"));
                    ApprovalDecision::UserApproval
                }
            },
            RequestPolicy::Auto { instructions } => {
                if tainted.is_some() {
                    ApprovalDecision::UserApproval
                } else {
                    self.auto(tool, input, instructions).await
                }
            }
            RequestPolicy::Custom(policy) => {
                custom_decision(scope, &scope.info(), tool, input, call_id, policy).await
            }
        };
        if scope.session.permission(effect) == Permission::Ask
            && matches!(
                decision,
                ApprovalDecision::NotApplicable | ApprovalDecision::Approved
            )
        {
            decision = decision.strictest(ApprovalDecision::UserApproval);
            reasons.push(format!(
                "this session asks before every `{}` action",
                effect
            ));
        }
        if let Some(source) = tainted
            && effect.is_guarded_by_taint()
        {
            decision = decision.strictest(ApprovalDecision::UserApproval);
            reasons.push(format!(
                "`{source}` returned untrusted third-party content earlier in this turn; confirm that this `{}` action is what you asked for",
                effect
            ));
        }
        (decision, reasons, key)
    }

    /// A call from the user interface is the user's own action: it needs no approval, so
    /// request policies that would ask a person let it through (a custom policy's denial
    /// stays a denial), and only a response policy, which says who may approve the tool, can
    /// stop it: the user must be someone it lets approve.
    async fn decide_for_user(
        &self,
        scope: &StepScope,
        tool: &Tool,
        input: &Value,
        call_id: &str,
    ) -> ApprovalDecision {
        let Some(approval) = tool.approval() else {
            return ApprovalDecision::NotApplicable;
        };
        let info = scope.info();
        let decision = match approval.request {
            RequestPolicy::Never => return ApprovalDecision::NotApplicable,
            RequestPolicy::Custom(policy) => {
                custom_decision(scope, &info, tool, input, call_id, policy).await
            }
            RequestPolicy::Always | RequestPolicy::Once | RequestPolicy::Auto { .. } => {
                ApprovalDecision::UserApproval
            }
        };
        match decision {
            ApprovalDecision::UserApproval => {}
            other => return other,
        }
        let Some(response) = approval.response else {
            return ApprovalDecision::Approved;
        };
        let user = scope.turn.current.as_ref();
        let call = ResponseCall::new(
            &info,
            "",
            call_id,
            tool.name(),
            input,
            user,
            ResponseDecision::Approve,
            user,
        );
        let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| response(&call)))
            .unwrap_or_else(|_| {
                ResponseVerdict::rejected(format!(
                    "the response policy of `{}` failed",
                    tool.name()
                ))
            });
        match verdict {
            ResponseVerdict::Allowed => ApprovalDecision::Approved,
            ResponseVerdict::Rejected(reason) => ApprovalDecision::denied(format!(
                "it needs an approval this user may not give ({reason}); someone its approvers include must run it"
            )),
        }
    }

    async fn auto(
        &self,
        tool: &Tool,
        input: &Value,
        instructions: Option<&'static str>,
    ) -> ApprovalDecision {
        let Some(decider) = &self.0.decider else {
            return ApprovalDecision::UserApproval;
        };
        let size = serde_json::to_vec(input)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > self.0.options.decider_max_input {
            return ApprovalDecision::UserApproval;
        }
        let request = AutoRequest {
            tool: tool.name(),
            input,
            instructions,
        };
        match tokio::time::timeout(self.0.options.decider_timeout, decider.decide(request)).await {
            Ok(Ok(AutoVerdict::Clear)) => ApprovalDecision::Approved,
            _ => ApprovalDecision::UserApproval,
        }
    }

    fn prompt(&self, scope: &StepScope, tool: &Tool, input: &Value, call_id: &str) -> String {
        let default = || match tool.remote_tool() {
            // Whoever approves should know a third-party server acts.
            Some(remote) => format!(
                "Approve {} (tool `{}` of the server behind connection `{}`)?",
                start_label(tool, input),
                remote.definition().name,
                remote.connection()
            ),
            None => format!("Approve {}?", start_label(tool, input)),
        };
        let Some(render) = tool.approval().and_then(|a| a.prompt) else {
            return default();
        };
        let info = scope.info();
        let call = ApprovalCall::new(
            &info,
            tool.name(),
            input,
            call_id,
            &scope.approved,
            &NeverCancelled,
        );
        // A prompt fn that fails, panics or renders nothing gets the default prompt.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render(&call))) {
            Ok(Ok(text)) if !text.trim().is_empty() => text,
            _ => default(),
        }
    }

    fn tool_search(&self, scope: &StepScope, call: &ToolCall) -> CallResult {
        let query = match parse_arguments("tool_search", &call.arguments) {
            Ok(Value::Object(map))
                if map.len() == 1
                    && map
                        .get("query")
                        .and_then(Value::as_str)
                        .is_some_and(|q| !q.trim().is_empty()) =>
            {
                map["query"].as_str().unwrap_or_default().to_owned()
            }
            Ok(_) => {
                return CallResult::failed(
                    &call.call_id,
                    "tool_search",
                    ToolError::with_code(
                        ErrorCode::InvalidInput,
                        "`tool_search` takes exactly {\"query\": \"<words describing the capability>\"}",
                    ),
                );
            }
            Err(error) => return CallResult::failed(&call.call_id, "tool_search", error),
        };
        let found: Vec<Value> = scope
            .registry
            .search(&query, scope.audience)
            .into_iter()
            .filter(|t| {
                scope
                    .registry
                    .index_of(t.name())
                    .is_none_or(|i| !scope.disabled.contains(&i))
            })
            .take(10)
            .map(|t| {
                json!({
                    "name": t.name(),
                    "description": t.description_for(scope.audience),
                    "input_schema": t.input_schema(),
                })
            })
            .collect();
        let output = json!({ "tools": found });
        CallResult {
            call_id: call.call_id.clone(),
            tool: "tool_search".into(),
            is_error: false,
            model: ModelOutput::Json(output.clone()),
            output,
            error: None,
            ends_turn: false,
            label: None,
        }
    }

    /// Executes one call: context, timeout, cancellation, panic capture (in `Tool::invoke`),
    /// output check and projection.
    #[allow(clippy::too_many_arguments)] // reason: the one place a call is run; each input is distinct
    async fn execute(
        &self,
        session: &SessionRecord,
        turn: &TurnRecord,
        tool: &Arc<Tool>,
        call_id: &str,
        input: Value,
        approved_by: Option<Approver>,
        token: &CancellationToken,
        lease: Option<&Lease>,
        cleanup: bool,
    ) -> Executed {
        // Cached reads of the toolset are stale from the moment a write may start until after
        // it ends, however it ends (a read that ran meanwhile may have seen half of it).
        let _writing = self.0.cache.writing(tool);
        if let toolwright_core::ToolKind::Workflow(
            toolwright_core::Entry::Task | toolwright_core::Entry::Serve,
        ) = tool.kind()
        {
            // The body runs as a task of its own; the call's result is the receipt.
            return Executed::Done(
                self.start_task(session, turn, tool, call_id, input, approved_by)
                    .await,
            );
        }
        let _permit = self.0.semaphore.acquire().await;
        let call_token = token.child_token();
        // A cancelled parked body runs once more with its token fired, only for its cleanup.
        let limit = if cleanup {
            call_token.cancel();
            self.0.options.task_cleanup.min(self.0.options.call_timeout)
        } else {
            self.0.options.call_timeout
        };
        let info = session_info(session, turn);
        let journal = if tool.kind().is_journaled() {
            let run_id = crate::ids::durable_run_id(&turn.id, call_id);
            let recorded = match self.0.store.journal(&run_id).await {
                Ok(recorded) => recorded,
                Err(error) => {
                    return Executed::Done(CallResult::failed(
                        call_id,
                        tool.name(),
                        ToolError::with_code(
                            ErrorCode::Journal,
                            format!(
                                "the journal of `{}` could not be read: {error}; the call can be retried",
                                tool.name()
                            ),
                        ),
                    ));
                }
            };
            Some(Journal {
                run_id,
                store: self.0.store.clone(),
                fence: lease.cloned(),
                recorded,
                cursor: std::sync::atomic::AtomicU32::new(0),
            })
        } else {
            None
        };
        let host = Arc::new(RuntimeHost {
            token: call_token.clone(),
            events: self.0.events.clone(),
            states: self.0.states.clone(),
            tool: Arc::clone(tool),
            sandbox: self.0.sandbox.clone(),
            session_id: session.id.clone(),
            turn_id: turn.id.clone(),
            call_id: call_id.to_owned(),
            // Only delta labels read the input back; other calls need not copy it.
            input: if tool.label().delta.is_some() {
                input.clone()
            } else {
                Value::Null
            },
            interactive: info.interactive,
            steps: toolwright_core::StepNames::default(),
            journal,
            suspended: std::sync::Mutex::new(None),
            parked: tokio::sync::Notify::new(),
            clock: self.0.options.clock.clone(),
            task: None,
        });
        let watch = Arc::clone(&host);
        let mut builder = CallContext::builder()
            .session(info)
            .call_id(call_id)
            .tool_name(tool.name())
            .caller(turn.caller)
            .host(host);
        if let Some(approver) = approved_by {
            builder = builder.approved_by(approver.principal);
        }
        let cx = builder.build();
        let span = tracing::info_span!("tool_call", tool = tool.name(), call_id);
        let run = tool.invoke(input, cx).instrument(span);
        let outcome = {
            // Pinned out here so the tool is dropped only after its token fired on a timeout:
            // its cleanup (drop guards, tasks watching `ctx.cancelled()`) sees the cancellation.
            let mut run = std::pin::pin!(run);
            tokio::select! {
                result = tokio::time::timeout(limit, run.as_mut()) => match result {
                    Ok(result) => result,
                    Err(_) => {
                        call_token.cancel();
                        Err(ToolError::with_code(
                            ErrorCode::Timeout,
                            format!("`{}` did not finish within {limit:?} and was cancelled; try a narrower request", tool.name()),
                        ))
                    }
                },
                () = token.cancelled() => Err(ToolError::with_code(ErrorCode::Cancelled, format!("`{}` was cancelled with its turn", tool.name()))),
                () = watch.parked.notified() => {
                    // The body waits for a person: drop it here; it replays from its journal
                    // once the answer is recorded.
                    let suspension = watch.suspended.lock().ok().and_then(|mut s| s.take());
                    match suspension {
                        Some(Suspension::Receive { .. }) | None => {}
                        Some(suspension) => return Executed::Suspended(suspension),
                    }
                    Err(ToolError::with_code(ErrorCode::Journal, "the body stopped without saying why"))
                }
            }
        };
        Executed::Done(self.call_result(&session.id, &turn.id, tool, call_id, outcome))
    }

    /// The result of one execution of `tool`, as the model and the events see it.
    pub(crate) fn call_result(
        &self,
        session_id: &str,
        turn_id: &str,
        tool: &Tool,
        call_id: &str,
        outcome: Result<toolwright_core::CallOutput, ToolError>,
    ) -> CallResult {
        match outcome {
            Ok(output) => {
                let model = output.for_model();
                self.check_files(session_id, turn_id, call_id, &model);
                let label = output.complete_label.clone().or_else(|| {
                    tool.label()
                        .complete
                        .then(|| names::humanize(tool.short_name()))
                });
                CallResult {
                    call_id: call_id.to_owned(),
                    tool: tool.name().to_owned(),
                    is_error: false,
                    output: output.value,
                    model,
                    error: None,
                    ends_turn: output.ends_turn,
                    label,
                }
            }
            Err(error) => CallResult::failed(call_id, tool.name(), error),
        }
    }

    /// A resumed step whose workflow bodies asked again: record what ran, park on the new
    /// questions.
    #[allow(clippy::too_many_arguments)] // reason: the parked step's parts and its claim
    async fn park_again(
        &self,
        session: SessionRecord,
        mut turn: TurnRecord,
        version: u64,
        step: PendingStep,
        ran: Vec<(CallResult, bool)>,
        parked: Vec<Parked>,
        lease: Option<&Lease>,
    ) -> Result<StepOutcome, RuntimeError> {
        let mut results = Vec::with_capacity(ran.len());
        for (result, invoked) in ran {
            turn.note_taint(&result.tool, invoked);
            results.push(result);
        }
        turn.pending = Some(step);
        let Some(asked) = turn.park(&results, parked) else {
            return Err(RuntimeError::Store(StoreError::Corrupt {
                id: turn.id.clone(),
                error: "a resumed step has no record".into(),
            }));
        };
        self.0
            .store
            .write_turn(&turn, Some(version), keep(lease))
            .await?;
        for result in &results {
            self.emit(Event::ActionResult {
                session_id: session.id.clone(),
                turn_id: turn.id.clone(),
                result: result.clone(),
            });
        }
        for request in &asked {
            self.emit(Event::InputRequested {
                request: request.clone(),
            });
        }
        self.emit(Event::TurnWaiting {
            session_id: session.id.clone(),
            turn_id: turn.id.clone(),
            on: if asked.is_empty() { "timer" } else { "input" }.into(),
            requests: asked.iter().map(|r| r.request_id.clone()).collect(),
        });
        Ok(StepOutcome::Waiting {
            results,
            requests: asked,
            notices: Vec::new(),
        })
    }

    /// Warns about files sent to the model that are large or not base64.
    fn check_files(&self, session_id: &str, turn_id: &str, call_id: &str, model: &ModelOutput) {
        let ModelOutput::Content(parts) = model else {
            return;
        };
        for part in parts {
            let ContentPart::File { data, media_type } = part else {
                continue;
            };
            let decoded = data.len() / 4 * 3;
            let message = if !data.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r')
            }) {
                Some(format!(
                    "a `{media_type}` file for the model is not base64; encode the bytes as base64"
                ))
            } else if decoded > self.0.options.file_warning_bytes {
                Some(format!(
                    "a `{media_type}` file of about {} KiB is sent to the model (over {} KiB)",
                    decoded / 1024,
                    self.0.options.file_warning_bytes / 1024
                ))
            } else {
                None
            };
            if let Some(message) = message {
                tracing::warn!(call_id, "{message}");
                self.emit(Event::Warning {
                    session_id: session_id.to_owned(),
                    turn_id: turn_id.to_owned(),
                    call_id: Some(call_id.to_owned()),
                    message,
                });
            }
        }
    }

    /// Answers an input request. The first valid answer wins: later ones are dropped. A response
    /// policy may reject an answer, which leaves the request pending for another approver. When
    /// the last pending request of the step settles, the step resumes here and its approved
    /// calls run (exactly once: the turn is claimed in the store first).
    pub async fn respond(&self, response: InputResponse) -> Result<RespondOutcome, RuntimeError> {
        // On its own task, like `Turn::step`: a resumed step must finish even if the caller
        // stops waiting.
        let runtime = self.clone();
        tokio::spawn(async move { runtime.settle(response).await })
            .await
            .map_err(|error| RuntimeError::Task(error.to_string()))?
    }

    async fn settle(&self, response: InputResponse) -> Result<RespondOutcome, RuntimeError> {
        let store = &self.0.store;
        let Some(turn_id) = store.turn_of_request(&response.request_id).await? else {
            // A question asked by a workflow task's body parks the task, not a turn.
            return match store.task_of_request(&response.request_id).await? {
                Some(task_id) => self.settle_task(&task_id, response).await,
                None => Err(RuntimeError::UnknownRequest(response.request_id.clone())),
            };
        };
        loop {
            let (mut turn, version) = store
                .turn(&turn_id)
                .await?
                .ok_or_else(|| RuntimeError::UnknownTurn(turn_id.clone()))?;
            let Some(session) = store.session(&turn.session_id).await?.map(|(s, _)| s) else {
                return Err(RuntimeError::UnknownSession(turn.session_id.clone()));
            };
            let info = session_info(&session, &turn);
            let Some(step) = turn.pending.as_mut() else {
                return Ok(RespondOutcome::Dropped);
            };
            let Some(request) = step
                .requests
                .iter()
                .find(|r| r.request_id == response.request_id)
                .cloned()
            else {
                return Ok(RespondOutcome::Dropped);
            };
            if !request.is_pending() || turn.status != TurnStatus::Waiting {
                return Ok(RespondOutcome::Dropped);
            }

            let registry = self.registry();
            let tool = request.tool.as_deref().and_then(|name| registry.get(name));
            let verdict = response_verdict(tool, &info, &request, &response);
            if let ResponseVerdict::Rejected(reason) = verdict {
                self.emit(Event::ApprovalCandidate {
                    session_id: session.id.clone(),
                    turn_id: turn.id.clone(),
                    request_id: request.request_id.clone(),
                    decision: response.decision,
                    responder: response.principal.clone(),
                    status: CandidateStatus::Rejected,
                    reason: Some(reason.clone()),
                });
                return Ok(RespondOutcome::Rejected { reason });
            }

            let decision = decision_of(response.decision);
            let question = request.kind == RequestKind::Question;
            let workflow_ask = request.journal_position;
            let answer = if let Some(position) = workflow_ask {
                // A workflow body's question: the answer goes into the call's journal (first
                // valid answer wins there too) and the body replays up to it.
                let mut answer = match workflow_answer(&request, &response) {
                    Ok(answer) => answer,
                    Err(reason) => return Ok(RespondOutcome::Rejected { reason }),
                };
                let call_id = request.call_id.as_deref().unwrap_or_default();
                let entry = JournalEntry {
                    position,
                    kind: EntryKind::Ask,
                    name: crate::ids::ask_name(position),
                    value: serde_json::to_value(&answer).unwrap_or(Value::Null),
                };
                let run = crate::ids::durable_run_id(&turn.id, call_id);
                match store.append_journal(&run, &entry).await {
                    Ok(()) => {}
                    // Already recorded: by this answer on an earlier try of this loop (the turn
                    // write raced another writer), or by another answer, perhaps from a process
                    // that died before settling the request. The first answer on record wins:
                    // the request is settled with it, so the body never waits on a question
                    // the journal has already answered.
                    Err(StoreError::Conflict(_)) => {
                        let recorded = store.journal(&run).await?;
                        let Some(entry) = recorded.iter().find(|e| e.position == position) else {
                            return Ok(RespondOutcome::Dropped);
                        };
                        match serde_json::from_value::<AskAnswer>(entry.value.clone()) {
                            Ok(recorded) => answer = recorded,
                            Err(_) => return Ok(RespondOutcome::Dropped),
                        }
                    }
                    Err(error) => return Err(error.into()),
                }
                answer_text(&answer)
            } else if question && decision == Decision::Approved {
                match question_answer(&request, &response) {
                    Ok(answer) => Some(answer),
                    Err(reason) => return Ok(RespondOutcome::Rejected { reason }),
                }
            } else {
                None
            };
            step.settle(
                &response.request_id,
                &Settlement {
                    decision,
                    responder: response.principal.clone(),
                    note: response.note.clone(),
                    answer,
                },
            );
            // Approving a changed remote definition pins it, for every session, before the turn
            // is claimed: a failure here leaves the request pending (answer again), never a
            // claimed call whose approval was lost. Pinning twice (a retry of this loop, a second
            // approver) is harmless.
            if decision == Decision::Approved
                && let Some(change) = &request.definition_change
            {
                self.approve_change(change, response.principal.clone())
                    .await?;
            }
            // `once` memory is written only when no request for the same key is still pending.
            let remember = step.settled_grants();
            let pending = step.pending_requests();
            // A sleeping workflow call holds the step until its timer is due.
            let claim = pending.is_empty() && !step.is_sleeping();
            let claimed = if claim { turn.claim_step() } else { Vec::new() };
            // Registered before the claim is written, so a cancel that lands right after it
            // still reaches the calls.
            let token = CancellationToken::new();
            let _running = claim.then(|| self.track(&turn.id, &token));
            let taking = if claim { self.take() } else { Claim::None };
            let (new_version, lease) = match store.write_turn(&turn, Some(version), taking).await {
                Ok(written) => {
                    if let Some(running) = &_running {
                        running.hold(written.lease.clone());
                    }
                    (written.version, written.lease)
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            };
            for key in remember {
                store.remember_approval(&session.id, &key).await?;
            }

            if !question {
                self.emit(Event::ApprovalCandidate {
                    session_id: session.id.clone(),
                    turn_id: turn.id.clone(),
                    request_id: request.request_id.clone(),
                    decision: response.decision,
                    responder: response.principal.clone(),
                    status: CandidateStatus::Pending,
                    reason: None,
                });
                self.emit(Event::ApprovalSettled {
                    session_id: session.id.clone(),
                    turn_id: turn.id.clone(),
                    request_id: request.request_id.clone(),
                    decision,
                });
            }
            self.emit(Event::InputResolved {
                session_id: session.id.clone(),
                turn_id: turn.id.clone(),
                request_id: request.request_id.clone(),
                outcome: Outcome::Answered,
            });
            if !claim {
                return Ok(RespondOutcome::Settled { pending });
            }
            let outcome = self
                .resume(session, turn, new_version, claimed, token, lease)
                .await?;
            return Ok(RespondOutcome::Resumed(outcome));
        }
    }

    /// Revokes every pending request of turn `turn_id` with `outcome`, then resumes the step so
    /// already-approved calls run (or, when cancelling, fails them).
    pub(crate) async fn revoke(
        &self,
        turn_id: &str,
        outcome: Outcome,
        text: &str,
    ) -> Result<RespondOutcome, RuntimeError> {
        let store = &self.0.store;
        loop {
            let (mut turn, version) = store
                .turn(turn_id)
                .await?
                .ok_or_else(|| RuntimeError::UnknownTurn(turn_id.to_owned()))?;
            if turn.status != TurnStatus::Waiting {
                return Ok(RespondOutcome::Dropped);
            }
            let Some(session) = store.session(&turn.session_id).await?.map(|(s, _)| s) else {
                return Err(RuntimeError::UnknownSession(turn.session_id.clone()));
            };
            let Some(step) = turn.pending.as_mut() else {
                return Err(RuntimeError::Store(StoreError::Corrupt {
                    id: turn_id.to_owned(),
                    error: "a waiting turn has no pending step".into(),
                }));
            };
            let revoked = step.revoke(outcome, text);
            // `once` grants of requests approved earlier in this step: with nothing pending
            // for their key any more, the memory is written now.
            let grants = step.settled_grants();
            let sleeping = step.is_sleeping();
            let claimed = turn.claim_step();
            let token = CancellationToken::new();
            let _running = self.track(&turn.id, &token);
            let taking = if turn.status == TurnStatus::Running {
                self.take()
            } else {
                Claim::None
            };
            let (new_version, lease) = match store.write_turn(&turn, Some(version), taking).await {
                Ok(written) => {
                    _running.hold(written.lease.clone());
                    (written.version, written.lease)
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            };
            for key in grants {
                store.remember_approval(&session.id, &key).await?;
            }
            for request_id in revoked {
                self.emit(Event::InputResolved {
                    session_id: session.id.clone(),
                    turn_id: turn.id.clone(),
                    request_id,
                    outcome,
                });
            }
            if sleeping {
                // The step goes on when the timer wakes it.
                return Ok(RespondOutcome::Settled {
                    pending: Vec::new(),
                });
            }
            let result = self
                .resume(session, turn, new_version, claimed, token, lease)
                .await?;
            return Ok(RespondOutcome::Resumed(result));
        }
    }

    pub(crate) async fn cancel_turn(&self, turn_id: &str) -> Result<(), RuntimeError> {
        // Calls of this turn running in this process see their tokens fire, whichever handle
        // started them.
        self.cancel_running(turn_id);
        let store = &self.0.store;
        loop {
            let (mut turn, version) = store
                .turn(turn_id)
                .await?
                .ok_or_else(|| RuntimeError::UnknownTurn(turn_id.to_owned()))?;
            if matches!(turn.status, TurnStatus::Completed | TurnStatus::Cancelled) {
                return Ok(());
            }
            let Cancellation {
                revoked,
                closed,
                bodies,
            } = turn.cancel();
            match store.put_turn(&turn, Some(version)).await {
                Ok(_) => {
                    for request_id in revoked {
                        self.emit(Event::InputResolved {
                            session_id: turn.session_id.clone(),
                            turn_id: turn.id.clone(),
                            request_id,
                            outcome: Outcome::Cancelled,
                        });
                    }
                    for result in closed {
                        self.emit(Event::ActionResult {
                            session_id: turn.session_id.clone(),
                            turn_id: turn.id.clone(),
                            result,
                        });
                    }
                    // A resumption that registered after the first look still sees the cancel.
                    self.cancel_running(turn_id);
                    if !bodies.is_empty() {
                        let runtime = self.clone();
                        let turn = turn.clone();
                        tokio::spawn(async move { runtime.clean_up(turn, bodies).await });
                    }
                    self.emit(Event::TurnCompleted {
                        session_id: turn.session_id.clone(),
                        turn_id: turn.id.clone(),
                        reason: CompletionReason::Cancelled,
                    });
                    return Ok(());
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Runs the claimed calls of a resumed step and closes the step.
    pub(crate) async fn resume(
        &self,
        session: SessionRecord,
        mut turn: TurnRecord,
        version: u64,
        claimed: Vec<(String, Option<Approver>)>,
        token: CancellationToken,
        lease: Option<Lease>,
    ) -> Result<StepOutcome, RuntimeError> {
        let Some(step) = turn.pending.clone() else {
            return Err(RuntimeError::Store(StoreError::Corrupt {
                id: turn.id.clone(),
                error: "a claimed turn has no pending step".into(),
            }));
        };
        let token = &token;
        let approved = if self.0.reads_approvals {
            self.0.store.approvals(&session.id).await?
        } else {
            BTreeSet::new()
        };
        let runs = step.calls.iter().filter_map(|call| {
            let (_, approved_by) = claimed.iter().find(|(id, _)| *id == call.call_id)?;
            let run = self.run_approved(
                &session,
                &turn,
                call,
                approved_by.clone(),
                &approved,
                token,
                lease.as_ref(),
            );
            Some(async move { (call, run.await) })
        });
        let executed = futures_util::future::join_all(runs).await;
        let mut ran: Vec<(CallResult, bool)> = Vec::new();
        let mut asked: Vec<Parked> = Vec::new();
        for (call, (execution, invoked)) in executed {
            match execution {
                Executed::Done(result) => ran.push((result, invoked)),
                Executed::Suspended(suspension) => {
                    asked.push(Parked::new(&turn, &call.call_id, &call.tool, suspension));
                }
            }
        }
        if !asked.is_empty() {
            return self
                .park_again(session, turn, version, step, ran, asked, lease.as_ref())
                .await;
        }
        let invoked: Vec<String> = ran
            .iter()
            .filter(|(_, invoked)| *invoked)
            .map(|(r, _)| r.call_id.clone())
            .collect();
        let mut ran: Vec<CallResult> = ran.into_iter().map(|(r, _)| r).collect();
        // A note sent with an approval reaches the model beside the result.
        for result in &mut ran {
            if let Some(note) = step.approver_note(&result.call_id) {
                result.model = with_note(&result.model, note);
            }
        }

        let mut results = Vec::with_capacity(step.calls.len());
        for call in &step.calls {
            let result = match (&call.state, ran.iter().find(|r| r.call_id == call.call_id)) {
                (_, Some(result)) => {
                    self.emit(Event::ActionResult {
                        session_id: session.id.clone(),
                        turn_id: turn.id.clone(),
                        result: result.clone(),
                    });
                    result.clone()
                }
                (CallState::Finished { result }, None) => {
                    // A call that waited on a request was settled (cancelled, revoked) while the
                    // turn was parked: its result is new. One that never waited had its result
                    // announced by the step itself.
                    if step.gated(&call.call_id) {
                        self.emit(Event::ActionResult {
                            session_id: session.id.clone(),
                            turn_id: turn.id.clone(),
                            result: result.clone(),
                        });
                    }
                    result.clone()
                }
                (CallState::Waiting { .. }, None) => CallResult::failed(
                    &call.call_id,
                    &call.tool,
                    ToolError::with_code(
                        ErrorCode::Cancelled,
                        format!(
                            "`{}` did not run: the process stopped before its approval was requested; call it again if it is still needed",
                            call.tool
                        ),
                    ),
                ),
                _ => CallResult::failed(
                    &call.call_id,
                    &call.tool,
                    ToolError::with_code(
                        ErrorCode::ResultUnknown,
                        format!(
                            "the process running `{}` stopped before it recorded a result; whether it took effect is unknown, so check before retrying",
                            call.tool
                        ),
                    ),
                ),
            };
            results.push(result);
        }
        for result in &results {
            turn.note_taint(&result.tool, invoked.contains(&result.call_id));
        }
        let cancelled = turn.status == TurnStatus::Cancelled;
        let ends = !cancelled
            && turn.may_end(&results)
            && self.owing(&session.id, &turn.id).await?.is_empty();
        turn.close_step(&results, ends);
        match self
            .0
            .store
            .write_turn(&turn, Some(version), keep(lease.as_ref()))
            .await
        {
            Ok(_) => {}
            // Cancelled while the approved calls ran: `cancel` closed the turn.
            Err(StoreError::Conflict(_)) if self.cancelled_meanwhile(&turn.id).await? => {
                return Ok(StepOutcome::Completed {
                    results,
                    ends_turn: false,
                    notices: Vec::new(),
                });
            }
            Err(error) => return Err(error.into()),
        }
        if ends {
            self.emit(Event::TurnCompleted {
                session_id: session.id.clone(),
                turn_id: turn.id.clone(),
                reason: CompletionReason::EndsTurn,
            });
        }
        Ok(StepOutcome::Completed {
            results,
            ends_turn: ends,
            notices: Vec::new(),
        })
    }

    /// Before an approved call runs: validate its input again and re-run a custom request
    /// policy; a `denied` now wins over the approval.
    #[allow(clippy::too_many_arguments)] // reason: as `execute`, plus the approval context
    async fn run_approved(
        &self,
        session: &SessionRecord,
        turn: &TurnRecord,
        call: &PendingCall,
        approved_by: Option<Approver>,
        approved: &BTreeSet<String>,
        token: &CancellationToken,
        lease: Option<&Lease>,
    ) -> (Executed, bool) {
        let registry = self.registry();
        let Some(tool) = crate::runtime::find_tool(&registry, &call.tool) else {
            // A remote tool whose connection is down says so; others are gone.
            let error = match registry.resolve(&call.tool, turn.caller) {
                Err(error) if error.code() == ErrorCode::Unavailable => error,
                _ => ToolError::with_code(
                    ErrorCode::UnknownTool,
                    format!("tool `{}` is no longer registered", call.tool),
                ),
            };
            return (
                Executed::Done(CallResult::failed(&call.call_id, &call.tool, error)),
                false,
            );
        };
        // The server changed the tool after this call was approved (or again after its change
        // was approved): what was approved is not what would run.
        if let Some(change) = crate::remote::definition_change(&tool) {
            let error = ToolError::with_code(
                ErrorCode::Denied,
                format!(
                    "`{}` did not run: the server of connection `{}` changed its {} after this call was approved; call it again to ask for approval of the new definition",
                    call.tool,
                    change.connection,
                    change.changed_parts().join(", ")
                ),
            );
            return (
                Executed::Done(CallResult::failed(&call.call_id, &call.tool, error)),
                false,
            );
        }
        let input = match tool.validate(call.input.clone()) {
            Ok(input) => input,
            Err(error) => {
                let error = error.into_tool_error();
                return (
                    Executed::Done(CallResult::failed(&call.call_id, &call.tool, error)),
                    false,
                );
            }
        };
        if let Some(RequestPolicy::Custom(policy)) = tool.approval().map(|a| a.request) {
            let info = session_info(session, turn);
            let signal = TokenSignal(token.clone());
            let mut approval =
                ApprovalCall::new(&info, tool.name(), &input, &call.call_id, approved, &signal);
            approval.annotations = tool.server_annotations();
            if let ApprovalDecision::Denied(reason) =
                guarded_policy(tool.name(), policy(&approval)).await
            {
                let error = ToolError::with_code(
                    ErrorCode::Denied,
                    format!(
                        "`{}` was approved, then denied by its policy: {}",
                        call.tool,
                        reason.unwrap_or_else(|| "no reason given".into())
                    ),
                );
                return (
                    Executed::Done(CallResult::failed(&call.call_id, &call.tool, error)),
                    false,
                );
            }
        }
        if turn.caller.is_model() && tool.effect() != Effect::Read {
            tracing::debug!(tool = tool.name(), "running an approved call");
        }
        let result = self
            .execute(
                session,
                turn,
                &tool,
                &call.call_id,
                input,
                approved_by,
                token,
                lease,
                false,
            )
            .await;
        (result, tool.is_untrusted())
    }
}

impl Runtime {
    /// Runs the cleanup of cancelled workflow bodies that were parked: each replays its journal
    /// with its token fired (`ask` answers `cancelled`, `sleep` fails at once) for at most
    /// [`crate::Options::task_cleanup`]. What they return is dropped: their calls are cancelled.
    async fn clean_up(&self, turn: TurnRecord, bodies: Vec<(String, String, Value)>) {
        let Ok(Some((session, _))) = self.0.store.session(&turn.session_id).await else {
            return;
        };
        let registry = self.registry();
        let runs = bodies.into_iter().filter_map(|(call_id, tool, input)| {
            let found = crate::runtime::find_tool(&registry, &tool)?;
            let (session, turn) = (&session, &turn);
            Some(async move {
                let token = CancellationToken::new();
                if let Executed::Done(result) = self
                    .execute(
                        session, turn, &found, &call_id, input, None, &token, None, true,
                    )
                    .await
                    && result.is_error
                {
                    tracing::debug!(
                        call_id,
                        tool,
                        "cleanup of a cancelled body: {}",
                        crate::record::model_text(&result.model)
                    );
                }
            })
        });
        futures_util::future::join_all(runs).await;
    }

    /// After a write lost to a concurrent writer: whether that writer cancelled turn `turn_id`.
    /// If so, the step the calls belonged to is closed in the cancelled record too, so none of
    /// its calls stays `running` (the results went to the caller; the turn takes no more steps).
    async fn cancelled_meanwhile(&self, turn_id: &str) -> Result<bool, RuntimeError> {
        loop {
            let Some((mut turn, version)) = self.0.store.turn(turn_id).await? else {
                return Ok(false);
            };
            if turn.status != TurnStatus::Cancelled {
                return Ok(false);
            }
            if !turn.close_cancelled_step() {
                return Ok(true);
            }
            match self.0.store.put_turn(&turn, Some(version)).await {
                Ok(_) => return Ok(true),
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }
}

/// The claim of a write by the holder of `lease` (a plain write when this process holds none).
pub(crate) fn keep(lease: Option<&Lease>) -> Claim<'_> {
    lease.map_or(Claim::None, Claim::Keep)
}

/// What the custom request policy `policy` of `tool` decides about the call `call_id`.
async fn custom_decision(
    scope: &StepScope,
    info: &SessionInfo,
    tool: &Tool,
    input: &Value,
    call_id: &str,
    policy: toolwright_core::approval::PolicyFn,
) -> ApprovalDecision {
    let mut call = ApprovalCall::new(
        info,
        tool.name(),
        input,
        call_id,
        &scope.approved,
        &scope.cancel,
    );
    call.annotations = tool.server_annotations();
    guarded_policy(tool.name(), policy(&call)).await
}

/// The start label of a call with `input`. A label callback that panics is a failing label: like
/// an empty one, it falls back to the humanized tool name instead of taking the step down.
fn start_label(tool: &Tool, input: &Value) -> String {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.start_label(input)))
        .unwrap_or_else(|_| names::humanize(tool.short_name()))
}

/// Runs a custom request policy; one that panics denies the call, saying so (fail closed).
async fn guarded_policy(
    tool: &str,
    decision: impl std::future::Future<Output = ApprovalDecision>,
) -> ApprovalDecision {
    use futures_util::FutureExt as _;
    std::panic::AssertUnwindSafe(decision)
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            ApprovalDecision::denied(format!(
                "the approval policy of `{tool}` failed on this input; this is a bug in the policy, not in the input"
            ))
        })
}

/// The `once` memory key; a key fn that panics is an error (the call then asks a person).
fn guarded_key(tool: &Tool, input: &Value) -> Result<String, ToolError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.approval_key(input)))
        .unwrap_or_else(|_| Err(ToolError::new("the approval key fn panicked")))
}

fn policy_words(tool: &Tool, reasons: &[String]) -> String {
    let policy = tool.approval().map(|a| a.request.name()).unwrap_or("never");
    if reasons.is_empty() {
        format!("approval policy `{policy}`")
    } else {
        format!("approval policy `{policy}`; {}", reasons.join("; "))
    }
}
