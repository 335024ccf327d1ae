//! Records the parts write: minimal ones, and values a backend could mangle.

use serde_json::{Map, Value, json};
use toolwright_core::{Caller, Principal, PrincipalType};

use crate::record::{
    CallState, InputRequest, PendingCall, PendingStep, RequestKind, RequestStatus, TaskCall,
    TaskRecord, TaskStatus, TurnRecord, TurnStatus,
};

/// A turn of `session` in `status` whose pending step waits on `requests`.
pub(in crate::store) fn turn(
    id: &str,
    session: &str,
    status: TurnStatus,
    requests: &[&str],
) -> TurnRecord {
    TurnRecord {
        id: id.to_owned(),
        session_id: session.to_owned(),
        current: None,
        caller: Caller::Model,
        structured_output: false,
        tainted_by: None,
        status,
        steps: 1,
        last_step: None,
        pending: Some(PendingStep {
            index: 0,
            calls: requests
                .iter()
                .enumerate()
                .map(|(n, request)| PendingCall {
                    call_id: format!("call-{n}"),
                    tool: "todo.add".to_owned(),
                    input: json!({ "title": format!("item {n}") }),
                    state: CallState::Waiting {
                        request_id: (*request).to_owned(),
                    },
                })
                .collect(),
            requests: requests
                .iter()
                .enumerate()
                .map(|(n, request)| InputRequest {
                    request_id: (*request).to_owned(),
                    kind: RequestKind::ToolApproval,
                    session_id: session.to_owned(),
                    turn_id: id.to_owned(),
                    call_id: Some(format!("call-{n}")),
                    tool: Some("todo.add".to_owned()),
                    input: None,
                    prompt: "Add this item?".to_owned(),
                    reasons: Vec::new(),
                    requester: None,
                    approval_key: None,
                    journal_position: None,
                    task_id: None,
                    deadline_ms: None,
                    definition_change: None,
                    status: RequestStatus::Pending,
                })
                .collect(),
            input: None,
        }),
    }
}

/// Values a backend could mangle: NUL, escapes, non-BMP characters, integers at the edges of
/// 64 bits, exact floats, empty containers, deep nesting.
pub(super) fn awkward_json() -> Value {
    json!({
        "text": "nul:\u{0} quote:\" backslash:\\ newline:\n tab:\t emoji:🦀 rtl:שלום",
        "max_u64": u64::MAX,
        "min_i64": i64::MIN,
        "float": 0.5,
        "negative": -1.25e10,
        "empty_object": {},
        "empty_array": [],
        "null": null,
        "nested": { "a": [1, { "b": [true, false, null] }, "c"] },
    })
}

pub(super) fn principal(kind: PrincipalType, id: &str) -> Principal {
    let mut attributes = Map::new();
    attributes.insert("tenant".into(), json!("acme"));
    attributes.insert("roles".into(), json!(["admin", "approver"]));
    attributes.insert("limits".into(), json!({ "daily": 500, "currency": "EUR" }));
    attributes.insert("revoked".into(), Value::Null);
    Principal {
        authenticator: "oidc".to_owned(),
        issuer: Some("https://id.example/realms/main".to_owned()),
        principal_type: kind,
        principal_id: id.to_owned(),
        attributes,
    }
}

pub(super) fn minimal_task(id: &str, session: &str) -> TaskRecord {
    TaskRecord {
        id: id.to_owned(),
        tool: "render".to_owned(),
        entry: toolwright_core::Entry::Task,
        session_id: session.to_owned(),
        turn_id: format!("{id}-turn"),
        caller: Caller::Model,
        current: None,
        approved_by: None,
        status: TaskStatus::Running,
        cancel_requested: false,
        calls: vec![TaskCall {
            call_id: "call-1".to_owned(),
            turn_id: format!("{id}-turn"),
            step: 0,
            input: json!({}),
            result: None,
            delivered: false,
            cancelled: false,
            step_input: None,
        }],
        requests: Vec::new(),
        answers: Default::default(),
    }
}
