//! Records the store tests build by hand: an input request waiting for a person. Included with
//! `#[path]` as `records`.

use toolwright_runtime::{InputRequest, RequestKind, RequestStatus};

/// Question `request_id` of turn `turn_id` in session `session_id`, pending, asked by nobody
/// in particular.
pub(crate) fn question(request_id: String, session_id: &str, turn_id: &str) -> InputRequest {
    InputRequest {
        request_id,
        kind: RequestKind::Question,
        session_id: session_id.to_owned(),
        turn_id: turn_id.to_owned(),
        call_id: None,
        tool: None,
        input: None,
        prompt: "Which account?".to_owned(),
        reasons: Vec::new(),
        requester: None,
        approval_key: None,
        journal_position: None,
        task_id: None,
        deadline_ms: None,
        definition_change: None,
        status: RequestStatus::Pending,
    }
}
