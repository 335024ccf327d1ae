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

use serde::Serialize;
use serde_json::Value;
use toolwright_core::{Principal, ResponseVerdict};
use toolwright_runtime::{
    Cursor, DefinitionChange, InputRequest, InputResponse, PageRequest, RequestKind, RequestStatus,
    Runtime, RuntimeError, TaskFilter, TaskStatus, TurnFilter, TurnStatus,
};

mod work;

pub use work::{
    CallView, ConnectionView, JournalView, MESSAGES_PER_TURN, ResultView, SessionView, TaskView,
    TurnView, WithheldView, catalog, connections, journal, session, sessions, task, tasks, turn,
    turns,
};

/// A pending or past input request, as one principal may see it.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct Inbox {
    /// The pending requests, turns' first, then tasks'.
    pub requests: Vec<RequestView>,
    /// The cursor of the next page of waiting turns.
    pub next_turns: Option<Cursor>,
    /// The cursor of the next page of open tasks.
    pub next_tasks: Option<Cursor>,
}

/// What a listing page of the console asks the store for.
pub fn page(after: Option<&str>, limit: usize) -> PageRequest {
    match after {
        Some(cursor) if !cursor.is_empty() => PageRequest::after(Cursor::new(cursor), limit),
        _ => PageRequest::first(limit),
    }
}

/// The turn status named `name` (`active`, `waiting`, `running`, `completed`, `cancelled`),
/// as listings filter by it; an unknown name is refused with the names that exist.
pub fn turn_status(name: &str) -> Result<TurnStatus, String> {
    serde_json::from_value(Value::String(name.to_owned())).map_err(|_| {
        format!(
            "unknown turn status `{name}`: use active, waiting, running, completed or cancelled"
        )
    })
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
    let same = |other: &Principal| other.same_as(principal);
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
pub(crate) fn redact_input(runtime: &Runtime, tool: &str, input: &Value) -> Value {
    match runtime.registry().get(tool) {
        Some(tool) => tool.sensitivity().input.redacted(input).into_owned(),
        None => input.clone(),
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

impl RequestView {
    /// Whether it still waits for an answer.
    pub fn is_pending(&self) -> bool {
        matches!(self.status, RequestStatus::Pending)
    }
}
