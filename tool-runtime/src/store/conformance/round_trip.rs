//! The part `round_trip`, with the fullest records it writes.

use serde_json::json;
use toolwright_core::{
    Caller, ContentPart, Effect, ErrorCode, ModelOutput, Principal, PrincipalType, ToolError,
};

use super::fixtures::{awkward_json, principal, turn};
use super::part::Part;
use crate::record::{
    Approver, CallResult, CallState, Decision, EntryKind, InputRequest, JournalEntry, Outcome,
    PendingCall, PendingStep, Permission, RequestKind, RequestStatus, SessionRecord, StepInput,
    TurnRecord, TurnStatus,
};
use crate::store::Store;

/// Records come back exactly as written: every optional field set and unset, principals with
/// attributes, a pending step with every call state and request status, odd ids and text.
pub async fn round_trip(store: &dyn Store) {
    let part = Part::new("round_trip");

    let minimal = SessionRecord::new(part.id("minimal"));
    let full = full_session(part.id("full, with 'quotes'; -- and ünïcødé"));
    let mut empty_list = SessionRecord::new(part.id("announced-empty"));
    empty_list.announced.insert("model".to_owned(), Vec::new());
    for record in [minimal, full, empty_list] {
        part.ok(
            "inserting a session",
            store.put_session(&record, None).await,
        );
        let read = part.ok("reading a session", store.session(&record.id).await);
        assert_eq!(
            read,
            Some((record.clone(), 1)),
            "{part}: a session must read back exactly as written"
        );
    }

    let session = part.id("session");
    let callers = [
        Caller::Model,
        Caller::Subagent,
        Caller::User,
        Caller::Schedule,
    ];
    let statuses = [
        TurnStatus::Active,
        TurnStatus::Waiting,
        TurnStatus::Running,
        TurnStatus::Completed,
        TurnStatus::Cancelled,
    ];
    for (n, status) in statuses.into_iter().enumerate() {
        let mut record = turn(&part.id(&format!("minimal-{n}")), &session, status, &[]);
        record.pending = None;
        record.caller = callers[n % callers.len()];
        part.ok(
            "inserting a minimal turn",
            store.put_turn(&record, None).await,
        );
        let read = part.ok("reading a minimal turn", store.turn(&record.id).await);
        assert_eq!(
            read,
            Some((record, 1)),
            "{part}: a minimal turn must read back exactly as written"
        );
    }

    let record = full_turn(&part.id("full"), &session, &part.id("request"));
    part.ok("inserting a full turn", store.put_turn(&record, None).await);
    let read = part.ok("reading a full turn", store.turn(&record.id).await);
    assert_eq!(
        read,
        Some((record.clone(), 1)),
        "{part}: a turn with every field set must read back exactly as written"
    );
    for request in record.request_ids() {
        assert_eq!(
            part.ok("looking up a request", store.turn_of_request(request).await)
                .as_ref(),
            Some(&record.id),
            "{part}: every request of the full turn is indexed"
        );
    }

    // A journal with an entry of every kind, version markers included.
    let run = part.id("run");
    let entries: Vec<JournalEntry> = [
        (EntryKind::Step, "copy", awkward_json()),
        (EntryKind::Patch, "add-audit", json!(true)),
        (EntryKind::Ask, "ask#2", json!({ "status": "timeout" })),
        (
            EntryKind::Sleep,
            "sleep#3",
            json!({ "until_ms": 1_700_000_000_000_u64 }),
        ),
        (
            EntryKind::Hook,
            "hook:payment",
            json!({ "token": "twh_x", "id": "hook_0123", "name": "payment" }),
        ),
        (
            EntryKind::HookWait,
            "wait:payment",
            json!({ "status": "received", "payload": awkward_json() }),
        ),
        (EntryKind::Delivery, "delivery", awkward_json()),
    ]
    .into_iter()
    .zip(0..)
    .map(|((kind, name, value), position)| JournalEntry {
        position,
        kind,
        name: name.to_owned(),
        value,
    })
    .collect();
    for entry in &entries {
        part.ok(
            "appending a journal entry",
            store.append_journal(&run, entry).await,
        );
    }
    assert_eq!(
        part.ok("reading a journal", store.journal(&run).await),
        entries,
        "{part}: journal entries of every kind read back exactly as written"
    );
}

fn full_session(id: String) -> SessionRecord {
    let mut record = SessionRecord::new(id);
    record.parent = Some("parent-session".to_owned());
    record.initiator = Some(principal(PrincipalType::User, "u_42"));
    record.interactive = false;
    record.permissions = [
        (Effect::Read, Permission::Allow),
        (Effect::Write, Permission::Ask),
        (Effect::Money, Permission::Ask),
        (Effect::Public, Permission::Allow),
    ]
    .into_iter()
    .collect();
    record.state.insert("awkward".into(), awkward_json());
    record.state.insert("count".into(), json!(3));
    record.ended = true;
    record.locale = Some("zh-Hans-CN".to_owned());
    record.announced.insert(
        "model".to_owned(),
        vec!["wallet.pay".to_owned(), "todo.add".to_owned()],
    );
    record
}

/// A turn with every field set and a pending step holding every call state, request kind and
/// request status.
fn full_turn(id: &str, session: &str, request_prefix: &str) -> TurnRecord {
    let user = principal(PrincipalType::User, "u_42");
    TurnRecord {
        id: id.to_owned(),
        session_id: session.to_owned(),
        current: Some(principal(PrincipalType::Runtime, "toolwright:app")),
        caller: Caller::Subagent,
        structured_output: true,
        tainted_by: Some("web.fetch".to_owned()),
        status: TurnStatus::Waiting,
        steps: u32::MAX,
        last_step: None,
        pending: Some(PendingStep {
            index: 7,
            calls: every_call_state(&user, request_prefix),
            requests: every_request_status(id, session, request_prefix, &user),
            input: Some(StepInput::Messages(
                vec![
                    awkward_json(),
                    json!({ "role": "user", "content": "ünïcødé" }),
                ]
                .into(),
            )),
        }),
    }
}

/// Calls in every state: ready with and without an approver, waiting on the request
/// `{request_prefix}-0`, running, and finished with every kind of result.
fn every_call_state(user: &Principal, request_prefix: &str) -> Vec<PendingCall> {
    let request_id = |n: usize| format!("{request_prefix}-{n}");
    let ok_result = CallResult {
        model_usage: None,
        call_id: "call-ready".to_owned(),
        tool: "wallet.balance".to_owned(),
        is_error: false,
        output: awkward_json(),
        projection: Some(ModelOutput::content([
            ContentPart::text("balance: 12.50 EUR"),
            ContentPart::file("iVBORw0KGgo=", "image/png"),
        ])),
        error: None,
        ends_turn: true,
        label: Some("Checked the balance".to_owned()),
    };
    let failed = CallResult::failed(
        "call-failed",
        "logs.search",
        ToolError::with_code(ErrorCode::ResultUnknown, "the process stopped mid-call")
            .details(json!({ "attempt": 2 })),
    );
    let fatal = CallResult::failed(
        "call-fatal",
        "logs.search",
        ToolError::fatal("no service named `payment-ap`"),
    );
    let json_output = CallResult {
        model_usage: None,
        projection: Some(ModelOutput::Json(json!({ "items": [1, 2, 3] }))),
        ..ok_result.clone()
    };
    // The model saw the output itself: it is held and written once.
    let output_itself = CallResult {
        projection: None,
        ..ok_result.clone()
    };
    let text_output = CallResult {
        model_usage: None,
        projection: Some(ModelOutput::text("done")),
        ends_turn: false,
        label: None,
        ..ok_result.clone()
    };
    let call = |call_id: &str, state: CallState| PendingCall {
        call_id: call_id.to_owned(),
        tool: "wallet.pay".to_owned(),
        input: json!({ "amount": 12.5, "to": "shop", "note": "nul:\u{0}" }),
        state,
    };
    vec![
        call("call-0", CallState::Ready { approved_by: None }),
        call(
            "call-1",
            CallState::Ready {
                approved_by: Some(Approver {
                    principal: Some(user.clone()),
                }),
            },
        ),
        call(
            "call-2",
            CallState::Ready {
                approved_by: Some(Approver { principal: None }),
            },
        ),
        call(
            "call-3",
            CallState::Waiting {
                request_id: request_id(0),
            },
        ),
        call("call-4", CallState::Running),
        call("call-5", CallState::Finished { result: ok_result }),
        call("call-6", CallState::Finished { result: failed }),
        call("call-7", CallState::Finished { result: fatal }),
        call(
            "call-8",
            CallState::Finished {
                result: json_output,
            },
        ),
        call(
            "call-9",
            CallState::Finished {
                result: text_output,
            },
        ),
        call(
            "call-10",
            CallState::Finished {
                result: output_itself,
            },
        ),
    ]
}

/// Requests `{request_prefix}-0` to `-6` of turn `id`, of every kind and status, with every
/// optional field set or none.
fn every_request_status(
    id: &str,
    session: &str,
    request_prefix: &str,
    user: &Principal,
) -> Vec<InputRequest> {
    let request_id = |n: usize| format!("{request_prefix}-{n}");
    let service = principal(PrincipalType::Service, "svc_billing");
    let request = |n: usize, kind: RequestKind, status: RequestStatus| InputRequest {
        request_id: request_id(n),
        kind,
        session_id: session.to_owned(),
        turn_id: id.to_owned(),
        call_id: Some(format!("call-{n}")),
        tool: Some("wallet.pay".to_owned()),
        input: Some(awkward_json()),
        prompt: "Pay 12.50 EUR to shop?".to_owned(),
        reasons: vec![
            "the turn read untrusted output from web.fetch".to_owned(),
            "the session asks before money calls".to_owned(),
        ],
        requester: Some(user.clone()),
        approval_key: Some("input:sha256:abc".to_owned()),
        journal_position: None,
        task_id: None,
        deadline_ms: Some(4_102_444_800_000),
        definition_change: None,
        status,
    };
    let bare = |n: usize, kind: RequestKind, status: RequestStatus| InputRequest {
        request_id: request_id(n),
        kind,
        session_id: session.to_owned(),
        turn_id: id.to_owned(),
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
        status,
    };
    vec![
        request(0, RequestKind::ToolApproval, RequestStatus::Pending),
        request(
            1,
            RequestKind::ToolApproval,
            RequestStatus::Settled {
                decision: Decision::Approved,
                responder: Some(service.clone()),
                note: Some("ok, but only this once".to_owned()),
            },
        ),
        bare(
            2,
            RequestKind::ToolApproval,
            RequestStatus::Settled {
                decision: Decision::Cancelled,
                responder: None,
                note: None,
            },
        ),
        bare(3, RequestKind::Question, RequestStatus::Pending),
        bare(
            4,
            RequestKind::Question,
            RequestStatus::Revoked {
                outcome: Outcome::Ignored,
            },
        ),
        bare(
            5,
            RequestKind::SessionLimit,
            RequestStatus::Revoked {
                outcome: Outcome::Cancelled,
            },
        ),
        bare(
            6,
            RequestKind::SessionLimit,
            RequestStatus::Revoked {
                outcome: Outcome::Answered,
            },
        ),
        InputRequest {
            input: Some(json!({ "hook": { "id": "hook_0123", "name": "payment" } })),
            journal_position: Some(4),
            deadline_ms: Some(1_700_000_060_000),
            ..bare(7, RequestKind::Hook, RequestStatus::Pending)
        },
    ]
}
