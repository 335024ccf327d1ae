//! The views of the work the runtime keeps: turns with their steps, tasks, sessions,
//! journals, the catalog and remote connections.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use toolwright_core::{Audience, Caller, Catalog, Principal, ToolError};
use toolwright_runtime::{
    CallResult, CallState, ClosedStep, ConversationEntry, Cursor, DefinitionChange, JournalEntry,
    Page, PageRequest, PendingStep, PinRecord, Runtime, RuntimeError, SessionSummary, TaskFilter,
    TaskRecord, TaskStatus, TaskSummary, TurnFilter, TurnRecord, TurnStatus, TurnSummary,
    remote::ConnectionState,
};

use super::{RequestView, redact_input, request_view};

/// A call's result, sensitive values redacted.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
pub struct JournalView {
    /// The journal's id (`<turn>/<call>`).
    pub run_id: String,
    /// Its entries: steps, asks, sleeps, hooks, deliveries, in order. A run replays them
    /// without running again. None when [`JournalView::withheld`].
    pub entries: Vec<JournalEntry>,
    /// Whether the journal belongs to a call or task with a request that is not the viewer's
    /// to see ([`RequestView::shown`]): the journal holds what answered it, so its entries are
    /// left out.
    pub withheld: bool,
}

/// A turn: its status, taint and steps.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
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
    /// The calls of the closed steps on this page (oldest first), then, on the last page, of
    /// its pending step.
    pub calls: Vec<CallView>,
    /// The requests of those steps.
    pub requests: Vec<RequestView>,
    /// The cursor of the next page of its closed steps, when there are more.
    pub steps_next: Option<Cursor>,
    /// The journals its calls recorded.
    pub journals: Vec<JournalView>,
    /// The tasks its calls started.
    pub tasks: Vec<TaskSummary>,
    /// Its messages in the session's conversation (kept by the agent loop; none for turns
    /// driven otherwise), at most [`MESSAGES_PER_TURN`], the latest; none when
    /// [`TurnView::withheld`].
    pub messages: Vec<ConversationEntry>,
    /// Whether a request of the turn is not the viewer's to see ([`RequestView::shown`]): its
    /// call's input and journal are left out, and so are the turn's messages and events, which
    /// repeat the model's calls and what answered them.
    pub withheld: bool,
}

/// The most conversation messages a turn view holds.
pub const MESSAGES_PER_TURN: usize = 200;

/// A workflow task.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
pub struct WithheldView {
    /// The tool's name (`<connection>__<tool>`).
    pub name: String,
    /// The pinned definition and the one the server lists now.
    pub change: Option<DefinitionChange>,
}

/// A remote connection.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
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

fn state_name(state: &CallState) -> &'static str {
    match state {
        CallState::Ready { .. } => "ready",
        CallState::Waiting { .. } => "waiting",
        CallState::Running => "running",
        CallState::Sleeping { .. } => "sleeping",
        CallState::Finished { .. } => "finished",
    }
}

/// Turn `id` as `principal` may see it, with one page of its closed steps (oldest first, from
/// the store's step history); the parked step comes with the last page.
pub async fn turn(
    runtime: &Runtime,
    principal: Option<&Principal>,
    id: &str,
    steps: PageRequest,
) -> Result<TurnView, RuntimeError> {
    let store = runtime.store();
    let (record, version) = store
        .turn(id)
        .await?
        .ok_or_else(|| RuntimeError::UnknownTurn(id.to_owned()))?;
    let history = store.turn_steps(id, &steps).await?;
    let pending = history
        .next
        .is_none()
        .then_some(record.pending.as_ref())
        .flatten();
    let mut requests = Vec::new();
    let all_requests = history
        .items
        .iter()
        .flat_map(|s| &s.requests)
        .chain(pending.iter().flat_map(|p| &p.requests));
    for request in all_requests {
        requests.push(request_view(runtime, principal, request).await);
    }
    let mut calls = turn_calls(runtime, &history.items, pending, &requests);
    let hidden: Vec<&str> = requests
        .iter()
        .filter(|r| !r.shown)
        .filter_map(|r| r.call_id.as_deref())
        .collect();
    let withheld = requests.iter().any(|r| !r.shown);
    let journals = turn_journals(runtime, &record, &mut calls, &hidden).await?;
    Ok(TurnView {
        messages: if withheld {
            Vec::new()
        } else {
            turn_messages(runtime, &record).await?
        },
        withheld,
        tasks: turn_tasks(runtime, &record).await?,
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
        steps_next: history.next,
        journals,
    })
}

/// The journals `calls` recorded, each read once; each call gets its journal's id. The calls
/// whose request is `hidden` from the viewer get none: a journal holds what answered them.
async fn turn_journals(
    runtime: &Runtime,
    record: &TurnRecord,
    calls: &mut [CallView],
    hidden: &[&str],
) -> Result<Vec<JournalView>, RuntimeError> {
    let mut journals: Vec<JournalView> = Vec::new();
    for call in calls.iter_mut() {
        if hidden.contains(&call.call_id.as_str()) {
            continue;
        }
        let run_id = record.journal_id(&call.call_id);
        if !journals.iter().any(|j| j.run_id == run_id) {
            let entries = runtime.store().journal(&run_id).await?;
            if entries.is_empty() {
                continue;
            }
            journals.push(JournalView {
                run_id: run_id.clone(),
                entries,
                withheld: false,
            });
        }
        call.journal = Some(run_id);
    }
    Ok(journals)
}

/// The tasks `record`'s calls started, among the first [`TASKS_PER_TURN_PAGE`] of its
/// session.
async fn turn_tasks(
    runtime: &Runtime,
    record: &TurnRecord,
) -> Result<Vec<TaskSummary>, RuntimeError> {
    let store = runtime.store();
    let tasks = store
        .list_tasks(
            &TaskFilter::default().session(&record.session_id),
            &PageRequest::first(TASKS_PER_TURN_PAGE),
        )
        .await?
        .items;
    let mut turn_tasks = Vec::new();
    for summary in tasks {
        if let Some((task, _)) = store.task(&summary.id).await?
            && task.turn_id == record.id
        {
            turn_tasks.push(summary);
        }
    }
    Ok(turn_tasks)
}

/// `record`'s messages in its session's conversation, the latest [`MESSAGES_PER_TURN`].
async fn turn_messages(
    runtime: &Runtime,
    record: &TurnRecord,
) -> Result<Vec<ConversationEntry>, RuntimeError> {
    let mut messages: Vec<ConversationEntry> = runtime
        .store()
        .conversation(&record.session_id)
        .await?
        .into_iter()
        .filter(|m| m.turn_id == record.id)
        .collect();
    if messages.len() > MESSAGES_PER_TURN {
        messages.drain(..messages.len() - MESSAGES_PER_TURN);
    }
    Ok(messages)
}

/// The calls of the closed steps `closed` and of the parked step `pending`; a parked call's
/// input is shown unless it waits on a request in `requests` that is not shown.
fn turn_calls(
    runtime: &Runtime,
    closed: &[ClosedStep],
    pending: Option<&PendingStep>,
    requests: &[RequestView],
) -> Vec<CallView> {
    let mut calls = Vec::new();
    for step in closed {
        for result in &step.results {
            calls.push(CallView {
                step: step.index,
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
    if let Some(pending) = pending {
        for call in &pending.calls {
            calls.push(pending_call(runtime, pending.index, call, requests));
        }
    }
    calls
}

/// A call of the parked step `step`.
fn pending_call(
    runtime: &Runtime,
    step: u32,
    call: &toolwright_runtime::PendingCall,
    requests: &[RequestView],
) -> CallView {
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
    CallView {
        step,
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
    let journal = journal(runtime, principal, &task.run_id()).await?;
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
        journal,
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

/// Journal `run_id` as `principal` may see it: its entries are left out when it is the journal
/// of a call (`<turn>/<call>`), or of the task a call started, with a request not shown to them.
pub async fn journal(
    runtime: &Runtime,
    principal: Option<&Principal>,
    run_id: &str,
) -> Result<JournalView, RuntimeError> {
    let mut withheld = false;
    for request in journal_requests(runtime, run_id).await? {
        if !request_view(runtime, principal, &request).await.shown {
            withheld = true;
            break;
        }
    }
    let entries = if withheld {
        Vec::new()
    } else {
        runtime.store().journal(run_id).await?
    };
    Ok(JournalView {
        run_id: run_id.to_owned(),
        entries,
        withheld,
    })
}

/// The requests of journal `run_id`'s call (`<turn>/<call>`: its turn's, in every step) and of
/// the task that call started, if any.
async fn journal_requests(
    runtime: &Runtime,
    run_id: &str,
) -> Result<Vec<toolwright_runtime::InputRequest>, RuntimeError> {
    let store = runtime.store();
    let Some((turn_id, call_id)) = run_id.split_once('/') else {
        return Ok(Vec::new());
    };
    let Some((record, _)) = store.turn(turn_id).await? else {
        return Ok(Vec::new());
    };
    let mut requests: Vec<toolwright_runtime::InputRequest> = record
        .pending
        .iter()
        .flat_map(|step| step.requests.iter().cloned())
        .collect();
    let mut steps = PageRequest::first(toolwright_runtime::store::MAX_PAGE_LIMIT);
    loop {
        let page = store.turn_steps(turn_id, &steps).await?;
        requests.extend(page.items.iter().flat_map(|s| s.requests.iter().cloned()));
        match page.next {
            Some(next) => steps = PageRequest::after(next, steps.limit),
            None => break,
        }
    }
    requests.retain(|r| r.call_id.as_deref() == Some(call_id));
    for summary in turn_tasks(runtime, &record).await? {
        if let Some((task, _)) = store.task(&summary.id).await?
            && task.run_id() == run_id
        {
            requests.extend(task.requests);
        }
    }
    Ok(requests)
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
