//! The input requests the runtime opens: each starts `pending`.

use serde_json::Value;
use toolwright_core::{AskRequest, SessionInfo};

use super::HookRef;
use crate::ids::new_id;
use crate::record::{
    DefinitionChange, InputRequest, RequestKind, RequestStatus, TaskRecord, TurnRecord,
};

/// What a tool-approval request asks a person about.
#[derive(Debug)]
pub(crate) struct ApprovalAsk {
    /// The call it gates.
    pub(crate) call_id: String,
    /// The call's resolved tool name.
    pub(crate) tool: String,
    /// The validated input.
    pub(crate) input: Value,
    /// What the approver reads.
    pub(crate) prompt: String,
    /// Why approval is needed beyond the policy.
    pub(crate) reasons: Vec<String>,
    /// The `once` memory key the approval grants.
    pub(crate) approval_key: Option<String>,
    /// The changed remote definition the approval also approves.
    pub(crate) definition_change: Option<Box<DefinitionChange>>,
}

impl InputRequest {
    /// A person's approval of a call, asked in the turn `info` describes.
    pub(crate) fn approval(info: &SessionInfo, ask: ApprovalAsk) -> InputRequest {
        InputRequest {
            request_id: new_id("req"),
            kind: RequestKind::ToolApproval,
            session_id: info.id.clone(),
            turn_id: info.turn_id.clone(),
            call_id: Some(ask.call_id),
            tool: Some(ask.tool),
            input: Some(ask.input),
            prompt: ask.prompt,
            reasons: ask.reasons,
            requester: info.current.clone(),
            approval_key: ask.approval_key,
            journal_position: None,
            task_id: None,
            deadline_ms: None,
            definition_change: ask.definition_change,
            status: RequestStatus::Pending,
        }
    }

    /// A request to let `turn` go past a limit: `prompt` says which, `details` is what the
    /// host's client shows (the limits, what was used). It gates no call.
    pub(crate) fn session_limit(turn: &TurnRecord, prompt: String, details: Value) -> InputRequest {
        InputRequest {
            request_id: new_id("req"),
            kind: RequestKind::SessionLimit,
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            call_id: None,
            tool: None,
            input: Some(details),
            prompt,
            reasons: Vec::new(),
            requester: turn.current.clone(),
            approval_key: None,
            journal_position: None,
            task_id: None,
            deadline_ms: None,
            definition_change: None,
            status: RequestStatus::Pending,
        }
    }

    /// The question of an `ask_question` call `call_id` with (validated) `input`.
    pub(crate) fn question(info: &SessionInfo, call_id: &str, input: &Value) -> InputRequest {
        let prompt = input
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        InputRequest {
            request_id: new_id("req"),
            kind: RequestKind::Question,
            session_id: info.id.clone(),
            turn_id: info.turn_id.clone(),
            call_id: Some(call_id.to_owned()),
            tool: Some("ask_question".into()),
            input: Some(input.clone()),
            prompt,
            reasons: Vec::new(),
            requester: info.current.clone(),
            approval_key: None,
            journal_position: None,
            task_id: None,
            deadline_ms: None,
            definition_change: None,
            status: RequestStatus::Pending,
        }
    }

    /// The question a workflow body of call `call_id` in `turn` asked at journal `position`.
    pub(crate) fn workflow_ask(
        turn: &TurnRecord,
        call_id: &str,
        tool: &str,
        position: u32,
        ask: &AskRequest,
        deadline_ms: Option<u64>,
    ) -> InputRequest {
        InputRequest {
            request_id: new_id("req"),
            kind: RequestKind::Question,
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            call_id: Some(call_id.to_owned()),
            tool: Some(tool.to_owned()),
            prompt: ask.prompt.clone(),
            input: serde_json::to_value(ask).ok(),
            reasons: Vec::new(),
            requester: turn.current.clone(),
            approval_key: None,
            journal_position: Some(position),
            task_id: None,
            deadline_ms,
            definition_change: None,
            status: RequestStatus::Pending,
        }
    }

    /// The wait of workflow call `call_id` of `tool` in `turn` on `hook`, at journal
    /// `position`: a request no person answers, settled by a delivery to the hook.
    pub(crate) fn hook_wait(
        turn: &TurnRecord,
        call_id: &str,
        tool: &str,
        position: u32,
        hook: &HookRef,
        deadline_ms: Option<u64>,
    ) -> InputRequest {
        let asked = AskRequest::new(hook.prompt());
        InputRequest {
            kind: RequestKind::Hook,
            input: Some(hook.input()),
            ..InputRequest::workflow_ask(turn, call_id, tool, position, &asked, deadline_ms)
        }
    }

    /// The wait of the body of workflow task `task` on `hook`, at journal `position`.
    pub(crate) fn task_hook_wait(
        task: &TaskRecord,
        position: u32,
        hook: &HookRef,
        deadline_ms: Option<u64>,
    ) -> InputRequest {
        let asked = AskRequest::new(hook.prompt());
        InputRequest {
            kind: RequestKind::Hook,
            input: Some(hook.input()),
            ..InputRequest::task_ask(task, position, &asked, deadline_ms)
        }
    }

    /// The question the body of workflow task `task` asked at journal `position`.
    pub(crate) fn task_ask(
        task: &TaskRecord,
        position: u32,
        ask: &AskRequest,
        deadline_ms: Option<u64>,
    ) -> InputRequest {
        InputRequest {
            request_id: new_id("req"),
            kind: RequestKind::Question,
            session_id: task.session_id.clone(),
            turn_id: task.turn_id.clone(),
            call_id: task.calls.first().map(|c| c.call_id.clone()),
            tool: Some(task.tool.clone()),
            input: serde_json::to_value(ask).ok(),
            prompt: ask.prompt.clone(),
            reasons: Vec::new(),
            requester: task.current.clone(),
            approval_key: None,
            journal_position: Some(position),
            task_id: Some(task.id.clone()),
            deadline_ms,
            definition_change: None,
            status: RequestStatus::Pending,
        }
    }
}
