//! What the console shows, read from a runtime and its store for one principal: the inbox of
//! pending requests, sessions, turns with their steps, calls, requests and journals, tasks,
//! remote connections and the tool catalog. Each view serializes to JSON (the console's
//! `Accept: application/json` answers and a CLI's `--json`).
//!
//! Who sees what: a request's prompt, input (sensitive values redacted), reasons and options
//! are filled in only for a principal [`Runtime::may_respond`] allows to answer it (and, once
//! it is settled, for its requester and its responder); everyone else gets its tool, status,
//! kind and requester. A call whose pending request the principal may not answer shows no
//! input either. Outputs are shown with their sensitive values redacted.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use toolwright_core::{Audience, Caller, Catalog, Principal, ResponseVerdict, ToolError};
use toolwright_runtime::{
    CallResult, CallState, ConversationEntry, Cursor, DefinitionChange, InputRequest,
    InputResponse, JournalEntry, Page, PageRequest, PinRecord, RequestKind, RequestStatus, Runtime,
    RuntimeError, SessionSummary, TaskFilter, TaskRecord, TaskStatus, TaskSummary, TurnFilter,
    TurnRecord, TurnStatus, TurnSummary, remote::ConnectionState,
};

/// A pending or past input request, as one principal may see it.
#[derive(Clone, Debug, Serialize)]
pub struct RequestView {
    /// The request's id (what an answer names).
    pub request_id: String,
    /// Approval, question, session limit or hook.
    pub kind: RequestKind,
    /// Its session.
    pub session_id: String,
    /// Its turn (for a task's question, the turn of the task's starting call).
    pub turn_id: String,
    /// The task whose body asked, for a task's question.
    pub task_id: Option<String>,
    /// The call it is about.
    pub call_id: Option<String>,
    /// The tool it is about.
    pub tool: Option<String>,
    /// Who asked: the person the call was made for.
    pub requester: Option<Principal>,
    /// Pending, settled (by whom, with what note) or revoked.
    pub status: RequestStatus,
    /// When it expires unanswered (Unix milliseconds).
    pub deadline_ms: Option<u64>,
    /// Whether this principal may answer it now.
    pub may_answer: bool,
    /// Why not, when it is pending and this principal may not answer it.
    pub refusal: Option<String>,
    /// Whether the fields below were filled in for this principal.
    pub shown: bool,
    /// The prompt (only when shown).
    pub prompt: Option<String>,
    /// The input, sensitive values redacted (only when shown): the call's input for an
    /// approval, the question for a question.
    pub input: Option<Value>,
    /// Why it asks (only when shown).
    pub reasons: Vec<String>,
    /// A question's options, `(id, label)` (only when shown).
    pub options: Vec<(String, String)>,
    /// Whether a question takes an answer in the person's own words (only when shown).
    pub allow_freeform: bool,
    /// A form question's schema (only when shown).
    pub form: Option<Value>,
    /// A remote tool's definition change this approval is about (only when shown).
    pub definition_change: Option<DefinitionChange>,
}

/// The inbox: the pending requests of one page of waiting turns and one page of open tasks.
#[derive(Clone, Debug, Serialize)]
pub struct Inbox {
    /// The pending requests, turns' first, then tasks'.
    pub requests: Vec<RequestView>,
    /// The cursor of the next page of waiting turns.
    pub next_turns: Option<Cursor>,
    /// The cursor of the next page of open tasks.
    pub next_tasks: Option<Cursor>,
}

/// A call's result, sensitive values redacted.
#[derive(Clone, Debug, Serialize)]
pub struct ResultView {
    /// Whether the call failed.
    pub is_error: bool,
    /// The output.
    pub output: Value,
    /// The error, when it failed (`RESULT_UNKNOWN`: a crash cut it; it is never run again).
    pub error: Option<ToolError>,
    /// The result's label.
    pub label: Option<String>,
}

/// One call of a turn's step.
#[derive(Clone, Debug, Serialize)]
pub struct CallView {
    /// The step it belongs to.
    pub step: u32,
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// `ready`, `waiting`, `running`, `sleeping` or `finished`.
    pub state: &'static str,
    /// Who approved it, when it was approved.
    pub approved_by: Option<Principal>,
    /// The request it waits on.
    pub request_id: Option<String>,
    /// When its durable timer ends (Unix milliseconds), while it sleeps.
    pub sleeps_until: Option<u64>,
    /// Its input, sensitive values redacted; `None` when hidden from this principal (or not
    /// kept: a closed step keeps results only).
    pub input: Option<Value>,
    /// Its result, once it has one.
    pub result: Option<ResultView>,
    /// The id of its journal, when it ran durably and recorded steps.
    pub journal: Option<String>,
}

/// A journal of a durable call or a workflow body.
#[derive(Clone, Debug, Serialize)]
pub struct JournalView {
    /// The journal's id (`<turn>/<call>`).
    pub run_id: String,
    /// Its entries: steps, asks, sleeps, hooks, deliveries, in order. A run replays them
    /// without running again.
    pub entries: Vec<JournalEntry>,
}

/// A turn: its status, taint and steps.
#[derive(Clone, Debug, Serialize)]
pub struct TurnView {
    /// The turn id.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Its status.
    pub status: TurnStatus,
    /// The record's version.
    pub version: u64,
    /// Who issues its calls.
    pub caller: Caller,
    /// Who acts in it.
    pub current: Option<Principal>,
    /// The untrusted tool whose output tainted it (its write calls then need approval).
    pub tainted_by: Option<String>,
    /// How many steps it ran.
    pub steps: u32,
    /// The calls of its last closed step, then of its pending step.
    pub calls: Vec<CallView>,
    /// The requests of its last closed step and its pending step.
    pub requests: Vec<RequestView>,
    /// The journals its calls recorded.
    pub journals: Vec<JournalView>,
    /// The tasks its calls started.
    pub tasks: Vec<TaskSummary>,
    /// Its messages in the session's conversation (kept by the agent loop; none for turns
    /// driven otherwise), at most [`MESSAGES_PER_TURN`], the latest.
    pub messages: Vec<ConversationEntry>,
}

/// The most conversation messages a turn view holds.
pub const MESSAGES_PER_TURN: usize = 200;

/// A workflow task.
#[derive(Clone, Debug, Serialize)]
pub struct TaskView {
    /// The task id.
    pub id: String,
    /// Its tool.
    pub tool: String,
    /// Its session.
    pub session_id: String,
    /// The turn of its starting call.
    pub turn_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// Whether a cancel was asked for (its body may still be in its cleanup window).
    pub cancel_requested: bool,
    /// Who acts in it.
    pub current: Option<Principal>,
    /// The calls it serves, with their results once delivered.
    pub calls: Vec<CallView>,
    /// Its questions.
    pub requests: Vec<RequestView>,
    /// Its journal.
    pub journal: JournalView,
}

/// A session with a page of its turns and its tasks.
#[derive(Clone, Debug, Serialize)]
pub struct SessionView {
    /// The session id.
    pub id: String,
    /// The parent session (for a subagent's).
    pub parent: Option<String>,
    /// Who opened it.
    pub initiator: Option<Principal>,
    /// Whether a person is there to answer.
    pub interactive: bool,
    /// Whether it ended.
    pub ended: bool,
    /// The tools it is limited to.
    pub tools: Option<Vec<String>>,
    /// Its turns, newest first.
    pub turns: Page<TurnSummary>,
    /// Its tasks, oldest first.
    pub tasks: Page<TaskSummary>,
}

/// A withheld remote tool and the change that withheld it.
#[derive(Clone, Debug, Serialize)]
pub struct WithheldView {
    /// The tool's name (`<connection>__<tool>`).
    pub name: String,
    /// The pinned definition and the one the server lists now.
    pub change: Option<DefinitionChange>,
}

/// A remote connection.
#[derive(Clone, Debug, Serialize)]
pub struct ConnectionView {
    /// Its name.
    pub name: String,
    /// Where it is.
    pub state: ConnectionState,
    /// Its tools as registered.
    pub tools: Vec<String>,
    /// Its tools withheld until a person approves their changed definitions.
    pub withheld: Vec<WithheldView>,
    /// Its tools the server does not offer, with why.
    pub unavailable: Vec<(String, String)>,
    /// The definitions pinned for it, with who approved each.
    pub pins: Vec<PinRecord>,
}

/// How many of a session's tasks a turn page reads to find the turn's own.
const TASKS_PER_TURN_PAGE: usize = 100;

/// What a listing page of the console asks the store for.
pub fn page(after: Option<&str>, limit: usize) -> PageRequest {
    match after {
        Some(cursor) if !cursor.is_empty() => PageRequest::after(Cursor::new(cursor), limit),
        _ => PageRequest::first(limit),
    }
}

/// Whether `principal` may answer `request` (and why not), as [`Runtime::respond`] would
/// decide. A request no longer pending is nobody's to answer.
async fn verdict(
    runtime: &Runtime,
    principal: Option<&Principal>,
    request: &InputRequest,
) -> (bool, Option<String>) {
    if !request.is_pending() {
        return (false, None);
    }
    let probe = InputResponse::approve(request.request_id.clone(), principal.cloned());
    match runtime.may_respond(&probe).await {
        Ok(ResponseVerdict::Allowed) => (true, None),
        Ok(ResponseVerdict::Rejected(reason)) => (false, Some(reason)),
        Err(error) => (false, Some(error.to_string())),
    }
}

/// Whether `principal` took part in settled `request` (asked or answered it).
fn took_part(principal: Option<&Principal>, request: &InputRequest) -> bool {
    let Some(principal) = principal else {
        return false;
    };
    let same = |other: &Principal| {
        other.authenticator == principal.authenticator
            && other.issuer == principal.issuer
            && other.principal_id == principal.principal_id
    };
    request.requester.as_ref().is_some_and(same)
        || matches!(&request.status, RequestStatus::Settled { responder: Some(r), .. } if same(r))
}

/// `request` as `principal` may see it.
pub async fn request_view(
    runtime: &Runtime,
    principal: Option<&Principal>,
    request: &InputRequest,
) -> RequestView {
    let (may_answer, refusal) = verdict(runtime, principal, request).await;
    let shown = may_answer || (!request.is_pending() && took_part(principal, request));
    let mut view = RequestView {
        request_id: request.request_id.clone(),
        kind: request.kind,
        session_id: request.session_id.clone(),
        turn_id: request.turn_id.clone(),
        task_id: request.task_id.clone(),
        call_id: request.call_id.clone(),
        tool: request.tool.clone(),
        requester: request.requester.clone(),
        status: request.status.clone(),
        deadline_ms: request.deadline_ms,
        may_answer,
        refusal,
        shown,
        prompt: None,
        input: None,
        reasons: Vec::new(),
        options: Vec::new(),
        allow_freeform: false,
        form: None,
        definition_change: None,
    };
    if shown {
        view.prompt = Some(request.prompt.clone());
        view.input = request
            .input
            .as_ref()
            .map(|input| redacted_input(runtime, request, input));
        view.reasons = request.reasons.clone();
        view.definition_change = request.definition_change.as_deref().cloned();
        if request.kind == RequestKind::Question
            && let Some(input) = &request.input
        {
            question_parts(&mut view, input);
        }
    }
    view
}

/// An approval's input with the tool's sensitive values redacted (it is stored redacted;
/// this keeps it so whatever wrote it).
fn redacted_input(runtime: &Runtime, request: &InputRequest, input: &Value) -> Value {
    match (request.kind, request.tool.as_deref()) {
        (RequestKind::ToolApproval, Some(tool)) => redact_input(runtime, tool, input),
        _ => input.clone(),
    }
}

/// A question's options, free-form flag and form, from its input (an `ask_question` call's
/// input or a workflow body's `AskRequest`).
fn question_parts(view: &mut RequestView, input: &Value) {
    if let Some(options) = input.get("options").and_then(Value::as_array) {
        view.options = options
            .iter()
            .filter_map(|o| match o {
                Value::String(label) => Some((label.clone(), label.clone())),
                Value::Object(fields) => {
                    let label = fields.get("label")?.as_str()?.to_owned();
                    let id = fields
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| label.clone(), str::to_owned);
                    Some((id, label))
                }
                _ => None,
            })
            .collect();
    }
    view.allow_freeform = input
        .get("allow_freeform")
        .and_then(Value::as_bool)
        .unwrap_or(view.options.is_empty());
    view.form = input.get("form").cloned();
}

/// `input` of tool `tool` with its sensitive values redacted.
fn redact_input(runtime: &Runtime, tool: &str, input: &Value) -> Value {
    match runtime.registry().get(tool) {
        Some(tool) => tool.sensitivity().input.redacted(input).into_owned(),
        None => input.clone(),
    }
}

/// `result` with the tool's sensitive output values redacted.
fn result_view(runtime: &Runtime, result: &CallResult) -> ResultView {
    let output = match runtime.registry().get(&result.tool) {
        Some(tool) => tool
            .sensitivity()
            .output
            .redacted(&result.output)
            .into_owned(),
        None => result.output.clone(),
    };
    ResultView {
        is_error: result.is_error,
        output,
        error: result.error.clone(),
        label: result.label.clone(),
    }
}

/// The pending requests of one page of waiting turns and one page of open tasks, as
/// `principal` may see them. Hooks' waits are left out: an outside system answers those.
pub async fn inbox(
    runtime: &Runtime,
    principal: Option<&Principal>,
    turns: PageRequest,
    tasks: PageRequest,
) -> Result<Inbox, RuntimeError> {
    let store = runtime.store();
    let waiting = store
        .list_turns(&TurnFilter::default().status(TurnStatus::Waiting), &turns)
        .await?;
    let mut requests = Vec::new();
    for summary in &waiting.items {
        let Some((record, _)) = store.turn(&summary.id).await? else {
            continue;
        };
        for request in record.pending.iter().flat_map(|p| &p.requests) {
            if request.is_pending() && request.kind != RequestKind::Hook {
                requests.push(request_view(runtime, principal, request).await);
            }
        }
    }
    let open = store
        .list_tasks(&TaskFilter::default().open(), &tasks)
        .await?;
    for summary in &open.items {
        if summary.status != TaskStatus::Waiting {
            continue;
        }
        let Some((task, _)) = store.task(&summary.id).await? else {
            continue;
        };
        for request in &task.requests {
            if request.is_pending() && request.kind != RequestKind::Hook {
                requests.push(request_view(runtime, principal, request).await);
            }
        }
    }
    Ok(Inbox {
        requests,
        next_turns: waiting.next,
        next_tasks: open.next,
    })
}

/// The turn and the request `request_id` it holds, or the task and its request.
pub async fn find_request(
    runtime: &Runtime,
    request_id: &str,
) -> Result<InputRequest, RuntimeError> {
    let store = runtime.store();
    if let Some(turn_id) = store.turn_of_request(request_id).await?
        && let Some((turn, _)) = store.turn(&turn_id).await?
        && let Some(request) = turn.request(request_id).cloned().or_else(|| {
            turn.last_step
                .iter()
                .flat_map(|s| &s.requests)
                .find(|r| r.request_id == request_id)
                .cloned()
        })
    {
        return Ok(request);
    }
    if let Some(task_id) = store.task_of_request(request_id).await?
        && let Some((task, _)) = store.task(&task_id).await?
        && let Some(request) = task.requests.iter().find(|r| r.request_id == request_id)
    {
        return Ok(request.clone());
    }
    Err(RuntimeError::UnknownRequest(request_id.to_owned()))
}

fn state_name(state: &CallState) -> &'static str {
    match state {
        CallState::Ready { .. } => "ready",
        CallState::Waiting { .. } => "waiting",
        CallState::Running => "running",
        CallState::Sleeping { .. } => "sleeping",
        CallState::Finished { .. } => "finished",
    }
}

/// Turn `id` as `principal` may see it.
pub async fn turn(
    runtime: &Runtime,
    principal: Option<&Principal>,
    id: &str,
) -> Result<TurnView, RuntimeError> {
    let store = runtime.store();
    let (record, version) = store
        .turn(id)
        .await?
        .ok_or_else(|| RuntimeError::UnknownTurn(id.to_owned()))?;
    let mut requests = Vec::new();
    let all_requests = record
        .last_step
        .iter()
        .flat_map(|s| &s.requests)
        .chain(record.pending.iter().flat_map(|p| &p.requests));
    for request in all_requests {
        requests.push(request_view(runtime, principal, request).await);
    }
    let calls = turn_calls(runtime, &record, &requests);
    let mut journals = Vec::new();
    for call in &calls {
        let run_id = record.journal_id(&call.call_id);
        if journals.iter().any(|j: &JournalView| j.run_id == run_id) {
            continue;
        }
        let entries = store.journal(&run_id).await?;
        if !entries.is_empty() {
            journals.push(JournalView { run_id, entries });
        }
    }
    let calls = calls
        .into_iter()
        .map(|mut call| {
            let run_id = record.journal_id(&call.call_id);
            call.journal = journals
                .iter()
                .any(|j| j.run_id == run_id)
                .then_some(run_id);
            call
        })
        .collect();
    let tasks = store
        .list_tasks(
            &TaskFilter::default().session(&record.session_id),
            &PageRequest::first(TASKS_PER_TURN_PAGE),
        )
        .await
        .map(|page| page.items)
        .unwrap_or_default();
    let mut turn_tasks = Vec::new();
    for summary in tasks {
        if let Some((task, _)) = store.task(&summary.id).await?
            && task.turn_id == record.id
        {
            turn_tasks.push(summary);
        }
    }
    let mut messages: Vec<ConversationEntry> = store
        .conversation(&record.session_id)
        .await?
        .into_iter()
        .filter(|m| m.turn_id == record.id)
        .collect();
    if messages.len() > MESSAGES_PER_TURN {
        messages.drain(..messages.len() - MESSAGES_PER_TURN);
    }
    Ok(TurnView {
        messages,
        id: record.id.clone(),
        session_id: record.session_id.clone(),
        status: record.status,
        version,
        caller: record.caller,
        current: record.current.clone(),
        tainted_by: record.tainted_by.clone(),
        steps: record.steps,
        calls,
        requests,
        journals,
        tasks: turn_tasks,
    })
}

/// The calls of `record`'s last closed step and pending step; a pending call's input is shown
/// unless it waits on a request in `requests` that is not shown.
fn turn_calls(runtime: &Runtime, record: &TurnRecord, requests: &[RequestView]) -> Vec<CallView> {
    let mut calls = Vec::new();
    if let Some(last) = &record.last_step {
        for result in &last.results {
            calls.push(CallView {
                step: last.index,
                call_id: result.call_id.clone(),
                tool: result.tool.clone(),
                state: "finished",
                approved_by: None,
                request_id: None,
                sleeps_until: None,
                input: None,
                result: Some(result_view(runtime, result)),
                journal: None,
            });
        }
    }
    if let Some(pending) = &record.pending {
        for call in &pending.calls {
            let request = requests
                .iter()
                .find(|r| r.call_id.as_deref() == Some(call.call_id.as_str()) && r.is_pending());
            let hidden = request.is_some_and(|r| !r.shown);
            let (approved_by, request_id, result) = match &call.state {
                CallState::Ready { approved_by } => (
                    approved_by.as_ref().and_then(|a| a.principal.clone()),
                    None,
                    None,
                ),
                CallState::Waiting { request_id } => (None, Some(request_id.clone()), None),
                CallState::Finished { result } => (None, None, Some(result_view(runtime, result))),
                CallState::Running | CallState::Sleeping { .. } => (None, None, None),
            };
            calls.push(CallView {
                step: pending.index,
                call_id: call.call_id.clone(),
                tool: call.tool.clone(),
                state: state_name(&call.state),
                approved_by,
                request_id,
                sleeps_until: match call.state {
                    CallState::Sleeping { until_ms } => Some(until_ms),
                    _ => None,
                },
                input: (!hidden).then(|| redact_input(runtime, &call.tool, &call.input)),
                result,
                journal: None,
            });
        }
    }
    calls
}

impl RequestView {
    /// Whether it still waits for an answer.
    pub fn is_pending(&self) -> bool {
        matches!(self.status, RequestStatus::Pending)
    }
}

/// Task `id` as `principal` may see it.
pub async fn task(
    runtime: &Runtime,
    principal: Option<&Principal>,
    id: &str,
) -> Result<TaskView, RuntimeError> {
    let task: TaskRecord = runtime.task(id).await?;
    let mut requests = Vec::new();
    for request in &task.requests {
        requests.push(request_view(runtime, principal, request).await);
    }
    let calls = task
        .calls
        .iter()
        .map(|call| CallView {
            step: call.step,
            call_id: call.call_id.clone(),
            tool: task.tool.clone(),
            state: if call.result.is_some() {
                "finished"
            } else {
                "running"
            },
            approved_by: None,
            request_id: None,
            sleeps_until: None,
            input: Some(redact_input(runtime, &task.tool, &call.input)),
            result: call.result.as_ref().map(|r| result_view(runtime, r)),
            journal: None,
        })
        .collect();
    let run_id = task.run_id();
    let entries = runtime.store().journal(&run_id).await?;
    Ok(TaskView {
        id: task.id.clone(),
        tool: task.tool.clone(),
        session_id: task.session_id.clone(),
        turn_id: task.turn_id.clone(),
        status: task.status,
        cancel_requested: task.cancel_requested,
        current: task.current.clone(),
        calls,
        requests,
        journal: JournalView { run_id, entries },
    })
}

/// Session `id` with a page of its turns (newest first) and of its tasks.
pub async fn session(
    runtime: &Runtime,
    id: &str,
    turns: PageRequest,
    tasks: PageRequest,
) -> Result<SessionView, RuntimeError> {
    let store = runtime.store();
    let (record, _) = store
        .session(id)
        .await?
        .ok_or_else(|| RuntimeError::UnknownSession(id.to_owned()))?;
    let turns = store
        .list_turns(&TurnFilter::default().session(id), &turns)
        .await?;
    let tasks = store
        .list_tasks(&TaskFilter::default().session(id), &tasks)
        .await?;
    Ok(SessionView {
        id: record.id,
        parent: record.parent,
        initiator: record.initiator,
        interactive: record.interactive,
        ended: record.ended,
        tools: record.tools,
        turns,
        tasks,
    })
}

/// A page of sessions, newest write first.
pub async fn sessions(
    runtime: &Runtime,
    page: PageRequest,
) -> Result<Page<SessionSummary>, RuntimeError> {
    Ok(runtime.store().list_sessions(&page).await?)
}

/// A page of turns, newest write first.
pub async fn turns(
    runtime: &Runtime,
    filter: TurnFilter,
    page: PageRequest,
) -> Result<Page<TurnSummary>, RuntimeError> {
    Ok(runtime.store().list_turns(&filter, &page).await?)
}

/// A page of tasks, in creation order.
pub async fn tasks(
    runtime: &Runtime,
    filter: TaskFilter,
    page: PageRequest,
) -> Result<Page<TaskSummary>, RuntimeError> {
    Ok(runtime.store().list_tasks(&filter, &page).await?)
}

/// The journal `run_id`.
pub async fn journal(runtime: &Runtime, run_id: &str) -> Result<JournalView, RuntimeError> {
    Ok(JournalView {
        run_id: run_id.to_owned(),
        entries: runtime.store().journal(run_id).await?,
    })
}

/// The tools `audience` may use, described in `locale` (the registry's default when `None`).
pub fn catalog(runtime: &Runtime, audience: Audience, locale: Option<&str>) -> Arc<Catalog> {
    let registry = runtime.registry();
    let locale = locale
        .unwrap_or_else(|| registry.default_locale())
        .to_owned();
    runtime.catalog(audience, &locale)
}

/// Every declared connection, with its withheld tools' changes and its pins.
pub async fn connections(runtime: &Runtime) -> Result<Vec<ConnectionView>, RuntimeError> {
    let mut views = Vec::new();
    for status in runtime.connections() {
        let pins = runtime.store().pins(&status.name).await?;
        let withheld = status
            .withheld
            .iter()
            .map(|name| WithheldView {
                name: name.clone(),
                change: runtime.definition_change(name),
            })
            .collect();
        views.push(ConnectionView {
            name: status.name,
            state: status.state,
            tools: status.tools,
            withheld,
            unavailable: status.unavailable,
            pins,
        });
    }
    Ok(views)
}

impl ConnectionView {
    /// Why it is down or refused, when it is.
    pub fn state_error(&self) -> Option<&str> {
        match &self.state {
            ConnectionState::Down { error, .. } | ConnectionState::Refused { error } => Some(error),
            _ => None,
        }
    }
}
