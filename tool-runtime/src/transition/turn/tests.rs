//! The turn transitions, one test each; no store.

use std::sync::Arc;

use serde_json::json;
use toolwright_core::{AskRequest, Caller, ErrorCode, Principal, SessionInfo, ToolError};

use super::*;
use crate::transition::request::ApprovalAsk;

fn alice() -> Principal {
    Principal::user("test", "alice")
}

fn turn() -> TurnRecord {
    TurnRecord::begin(
        "t1".into(),
        "s1".into(),
        Some(alice()),
        Caller::Model,
        false,
    )
}

fn ok(call_id: &str, tool: &str) -> CallResult {
    CallResult {
        model_usage: None,
        call_id: call_id.into(),
        tool: tool.into(),
        is_error: false,
        output: json!(1),
        projection: None,
        error: None,
        ends_turn: false,
        label: None,
    }
}

fn info(turn: &TurnRecord) -> SessionInfo {
    SessionInfo {
        id: turn.session_id.clone(),
        turn_id: turn.id.clone(),
        parent: None,
        initiator: None,
        current: turn.current.clone(),
        interactive: true,
    }
}

fn approval(turn: &TurnRecord, call_id: &str, key: Option<&str>) -> InputRequest {
    InputRequest::approval(
        &info(turn),
        ApprovalAsk {
            call_id: call_id.into(),
            tool: "pay".into(),
            input: json!({}),
            prompt: "Pay?".into(),
            reasons: Vec::new(),
            approval_key: key.map(str::to_owned),
            definition_change: None,
        },
    )
}

/// A turn parked on an approval of `c1`, with `c2` finished.
fn parked() -> (TurnRecord, String) {
    let mut turn = turn();
    let request = approval(&turn, "c1", Some("pay"));
    let id = request.request_id.clone();
    turn.begin_step(
        vec![
            PendingCall::waiting("c1", "pay", json!({}), &id),
            PendingCall::finished(ok("c2", "read")),
        ],
        vec![request],
        None,
    );
    turn.park(&[], Vec::new()).unwrap();
    (turn, id)
}

fn state(turn: &TurnRecord, call_id: &str) -> CallState {
    let step = turn.pending.as_ref().unwrap();
    step.calls
        .iter()
        .find(|c| c.call_id == call_id)
        .unwrap()
        .state
        .clone()
}

fn settlement(decision: Decision) -> Settlement {
    Settlement {
        decision,
        responder: Some(alice()),
        note: None,
        answer: None,
    }
}

#[test]
fn a_turn_begins_active_with_no_step() {
    let turn = turn();
    assert_eq!(turn.status, TurnStatus::Active);
    assert_eq!((turn.steps, turn.pending.is_none()), (0, true));
    assert_eq!(turn.current, Some(alice()));
}

#[test]
fn a_refused_step_only_counts() {
    let mut turn = turn();
    turn.refuse_step();
    assert_eq!((turn.steps, turn.status), (1, TurnStatus::Active));
    assert!(turn.pending.is_none());
}

#[test]
fn a_step_is_recorded_running_before_its_calls_run() {
    let mut turn = turn();
    turn.refuse_step();
    turn.begin_step(
        vec![PendingCall::running("c1", "read", json!({}))],
        Vec::new(),
        None,
    );
    assert_eq!(turn.status, TurnStatus::Running);
    let step = turn.pending.as_ref().unwrap();
    assert_eq!(step.index, 1);
    assert_eq!(step.calls[0].state, CallState::Running);
}

#[test]
fn parking_records_results_and_parked_calls() {
    let mut turn = turn();
    turn.begin_step(
        vec![
            PendingCall::running("c1", "read", json!({})),
            PendingCall::running("c2", "deploy", json!({})),
            PendingCall::running("c3", "wait", json!({})),
        ],
        Vec::new(),
        None,
    );
    let ask = Parked::new(
        &turn,
        "c2",
        "deploy",
        Suspension::Ask {
            position: 3,
            request: AskRequest::new("Go?"),
            deadline_ms: None,
        },
    );
    let sleep = Parked::new(&turn, "c3", "wait", Suspension::Sleep { until_ms: 50 });
    let opened = turn
        .park(&[Arc::new(ok("c1", "read"))], vec![ask, sleep])
        .unwrap();
    assert_eq!(turn.status, TurnStatus::Waiting);
    assert!(matches!(state(&turn, "c1"), CallState::Finished { .. }));
    assert_eq!(state(&turn, "c3"), CallState::Sleeping { until_ms: 50 });
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].journal_position, Some(3));
    assert_eq!(
        state(&turn, "c2"),
        CallState::Waiting {
            request_id: opened[0].request_id.clone()
        }
    );
    assert_eq!(turn.pending.as_ref().unwrap().requests, opened);
    assert_eq!(turn.wake_at(), Some(50));
}

#[test]
fn parking_without_a_step_is_a_corrupt_record() {
    let mut turn = turn();
    assert_eq!(turn.park(&[], Vec::new()), None);
    assert_eq!(turn.status, TurnStatus::Active);
}

#[test]
fn a_parked_receive_keeps_the_call_running() {
    let turn = turn();
    let parked = Parked::new(&turn, "c1", "t", Suspension::Receive { index: 1 });
    assert_eq!((parked.state, parked.request), (CallState::Running, None));
}

#[test]
fn closing_a_step_keeps_its_results_and_takes_steps_again_or_ends() {
    let mut turn = turn();
    turn.begin_step(
        vec![PendingCall::running("c1", "read", json!({}))],
        Vec::new(),
        None,
    );
    turn.close_step(&[Arc::new(ok("c1", "read"))], false);
    assert_eq!((turn.status, turn.steps), (TurnStatus::Active, 1));
    assert!(turn.pending.is_none());
    let closed = turn.last_step.as_ref().unwrap();
    assert_eq!((closed.index, closed.results.len()), (0, 1));

    turn.begin_step(
        vec![PendingCall::running("c2", "end", json!({}))],
        Vec::new(),
        None,
    );
    turn.close_step(&[Arc::new(ok("c2", "end"))], true);
    assert_eq!((turn.status, turn.steps), (TurnStatus::Completed, 2));
}

#[test]
fn a_cancelled_turn_stays_cancelled_when_its_step_closes() {
    let (mut turn, _) = parked();
    turn.cancel();
    turn.close_step(&[], true);
    assert_eq!(turn.status, TurnStatus::Cancelled);
}

#[test]
fn a_write_lost_to_a_cancel_closes_the_cancelled_step_once() {
    let (mut turn, _) = parked();
    turn.cancel();
    assert!(turn.close_cancelled_step());
    assert_eq!((turn.steps, turn.pending.is_none()), (1, true));
    assert!(!turn.close_cancelled_step());
    assert_eq!(turn.steps, 1);
}

#[test]
fn a_stop_revokes_the_requests_of_a_running_step_and_the_closed_step_keeps_them_so() {
    let mut turn = turn();
    let request = approval(&turn, "c1", Some("pay"));
    let id = request.request_id.clone();
    turn.begin_step(
        vec![PendingCall::waiting("c1", "pay", json!({}), &id)],
        vec![request],
        None,
    );
    turn.revoke_unannounced();
    turn.close_step(&[], true);
    let closed = turn.last_step.as_ref().unwrap();
    assert_eq!(
        closed.requests[0].status,
        RequestStatus::Revoked {
            outcome: Outcome::Cancelled
        }
    );
    assert_eq!(turn.status, TurnStatus::Completed);
}

#[test]
fn only_an_active_turn_completes() {
    let mut turn = turn();
    assert_eq!(turn.complete(), Ok(()));
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.complete(), Err(TurnStatus::Completed));
    let (mut waiting, _) = parked();
    assert_eq!(waiting.complete(), Err(TurnStatus::Waiting));
}

#[test]
fn an_approval_makes_the_call_ready_with_its_approver_and_claiming_runs_it() {
    let (mut turn, id) = parked();
    assert!(
        turn.claim_step().is_empty(),
        "a pending request holds the step"
    );
    let step = turn.pending.as_mut().unwrap();
    assert!(step.settle(&id, &settlement(Decision::Approved)));
    assert!(
        !step.settle(&id, &settlement(Decision::Cancelled)),
        "first answer wins"
    );
    let approver = Some(Approver {
        principal: Some(alice()),
    });
    assert_eq!(
        state(&turn, "c1"),
        CallState::Ready {
            approved_by: approver.clone()
        }
    );
    assert_eq!(turn.claim_step(), vec![("c1".to_owned(), approver)]);
    assert_eq!(turn.status, TurnStatus::Running);
    assert_eq!(state(&turn, "c1"), CallState::Running);
}

#[test]
fn a_decline_finishes_the_call_as_denied_with_the_note() {
    let (mut turn, id) = parked();
    let step = turn.pending.as_mut().unwrap();
    let declined = Settlement {
        note: Some("too much".into()),
        ..settlement(Decision::Cancelled)
    };
    assert!(step.settle(&id, &declined));
    let CallState::Finished { result } = state(&turn, "c1") else {
        panic!("not finished");
    };
    let error = result.error.unwrap();
    assert_eq!(error.code(), ErrorCode::Denied);
    assert_eq!(
        error.message(),
        "the user declined `pay`; their note: too much"
    );
    let request = &turn.pending.as_ref().unwrap().requests[0];
    assert!(matches!(
        &request.status,
        RequestStatus::Settled { decision: Decision::Cancelled, note: Some(note), .. } if note == "too much"
    ));
}

#[test]
fn an_answered_question_finishes_its_call_and_a_workflow_answer_readies_it() {
    let mut turn = turn();
    let question = InputRequest::question(&info(&turn), "q", &json!({ "question": "Which?" }));
    assert_eq!(question.prompt, "Which?");
    let ask = InputRequest::workflow_ask(&turn, "w", "deploy", 0, &AskRequest::new("Go?"), None);
    let (q, w) = (question.request_id.clone(), ask.request_id.clone());
    turn.begin_step(
        vec![
            PendingCall::waiting("q", "ask_question", json!({}), &q),
            PendingCall::waiting("w", "deploy", json!({}), &w),
        ],
        vec![question, ask],
        None,
    );
    let step = turn.pending.as_mut().unwrap();
    let answered = Settlement {
        answer: Some("blue".into()),
        ..settlement(Decision::Approved)
    };
    assert!(step.settle(&q, &answered));
    assert!(step.settle(&w, &settlement(Decision::Approved)));
    let CallState::Finished { result } = state(&turn, "q") else {
        panic!("not finished");
    };
    assert_eq!(
        result.output,
        json!({ "status": "answered", "answer": "blue" })
    );
    assert_eq!(state(&turn, "w"), CallState::Ready { approved_by: None });
}

#[test]
fn a_message_revokes_pending_requests_and_fails_their_calls_only() {
    let mut turn = turn();
    let first = approval(&turn, "c1", None);
    let second = approval(&turn, "c2", None);
    let (a, b) = (first.request_id.clone(), second.request_id.clone());
    turn.begin_step(
        vec![
            PendingCall::waiting("c1", "pay", json!({}), &a),
            PendingCall::waiting("c2", "pay", json!({}), &b),
        ],
        vec![first, second],
        None,
    );
    let step = turn.pending.as_mut().unwrap();
    step.settle(&a, &settlement(Decision::Approved));
    assert_eq!(step.revoke(Outcome::Ignored, "stop"), vec![b.clone()]);
    assert!(matches!(state(&turn, "c1"), CallState::Ready { .. }));
    let CallState::Finished { result } = state(&turn, "c2") else {
        panic!("not finished");
    };
    assert_eq!(
        result.error.unwrap().message(),
        "`pay` was not approved: the user sent a new message instead (\"stop\")"
    );
    let step = turn.pending.as_ref().unwrap();
    assert_eq!(
        step.requests[1].status,
        RequestStatus::Revoked {
            outcome: Outcome::Ignored
        }
    );
    assert!(step.pending_requests().is_empty());
}

#[test]
fn revoking_quotes_a_bounded_prefix_of_the_users_message() {
    let mut turn = turn();
    let request = approval(&turn, "c1", None);
    let id = request.request_id.clone();
    turn.begin_step(
        vec![PendingCall::waiting("c1", "pay", json!({}), &id)],
        vec![request],
        None,
    );
    let long = "x".repeat(100_000);
    let step = turn.pending.as_mut().unwrap();
    assert_eq!(step.revoke(Outcome::Ignored, &long), vec![id]);
    let CallState::Finished { result } = state(&turn, "c1") else {
        panic!("not finished");
    };
    let message = result.error.unwrap().message().to_owned();
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(message.contains("99800 more characters"), "{message}");
}

#[test]
fn once_grants_are_written_only_when_no_request_for_the_key_is_pending() {
    let mut turn = turn();
    let first = approval(&turn, "c1", Some("pay"));
    let second = approval(&turn, "c2", Some("pay"));
    let third = approval(&turn, "c3", Some("refund"));
    let ids: Vec<String> = [&first, &second, &third]
        .iter()
        .map(|r| r.request_id.clone())
        .collect();
    turn.begin_step(Vec::new(), vec![first, second, third], None);
    let step = turn.pending.as_mut().unwrap();
    let alice = requester_key(Some(&alice()));
    let grant = |key: &str| (alice.clone(), key.to_owned());
    step.settle(&ids[0], &settlement(Decision::Approved));
    assert!(step.grants_completed_by(&ids[..1]).is_empty(), "c2 waits");
    step.settle(&ids[2], &settlement(Decision::Approved));
    assert_eq!(step.grants_completed_by(&ids[2..]), vec![grant("refund")]);
    step.settle(&ids[1], &settlement(Decision::Cancelled));
    assert_eq!(
        step.grants_completed_by(&ids[1..2]),
        vec![grant("pay")],
        "the last request for `pay` settled; c1 approved it"
    );
    assert_eq!(
        step.grants_completed_by(&ids),
        vec![grant("pay"), grant("refund")]
    );
}

#[test]
fn a_grant_belongs_to_the_requester_of_the_approved_call() {
    let mut turn = turn();
    let alices = approval(&turn, "c1", Some("pay"));
    turn.current = Some(Principal::user("test", "bob"));
    let bobs = approval(&turn, "c2", Some("pay"));
    let (a, b) = (alices.request_id.clone(), bobs.request_id.clone());
    turn.begin_step(Vec::new(), vec![alices, bobs], None);
    let step = turn.pending.as_mut().unwrap();
    step.settle(&a, &settlement(Decision::Approved));
    assert_eq!(
        step.grants_completed_by(std::slice::from_ref(&a)),
        vec![(requester_key(Some(&alice())), "pay".to_owned())],
        "bob's pending request for the same key does not hold alice's grant"
    );
    step.settle(&b, &settlement(Decision::Cancelled));
    assert!(step.grants_completed_by(&[b]).is_empty(), "bob declined");
}

#[test]
fn an_approvers_note_is_found_by_call() {
    let (mut turn, id) = parked();
    let step = turn.pending.as_mut().unwrap();
    let noted = Settlement {
        note: Some("once only".into()),
        ..settlement(Decision::Approved)
    };
    step.settle(&id, &noted);
    assert_eq!(step.approver_note("c1"), Some("once only"));
    assert_eq!(step.approver_note("c2"), None);
}

#[test]
fn sleeping_calls_hold_the_step_until_their_timer_is_due() {
    let mut turn = turn();
    turn.begin_step(
        vec![
            PendingCall::running("c1", "wait", json!({})),
            PendingCall::running("c2", "wait", json!({})),
        ],
        Vec::new(),
        None,
    );
    let sleeps = vec![
        Parked::new(&turn, "c1", "wait", Suspension::Sleep { until_ms: 10 }),
        Parked::new(&turn, "c2", "wait", Suspension::Sleep { until_ms: 20 }),
    ];
    turn.park(&[], sleeps).unwrap();
    assert!(turn.claim_step().is_empty());
    assert!(!turn.wake_sleepers(5));
    assert!(turn.wake_sleepers(10));
    assert_eq!(state(&turn, "c1"), CallState::Ready { approved_by: None });
    assert!(turn.claim_step().is_empty(), "c2 still sleeps");
    assert!(turn.wake_sleepers(20));
    let claimed: Vec<String> = turn.claim_step().into_iter().map(|(id, _)| id).collect();
    assert_eq!(claimed, ["c1", "c2"]);
    assert!(
        !turn.wake_sleepers(30),
        "a running turn has no sleepers to wake"
    );
}

#[test]
fn the_first_untrusted_tool_that_ran_taints_the_turn() {
    let mut turn = turn();
    turn.note_taint("lookup", false);
    assert_eq!(turn.tainted_by, None);
    turn.note_taint("treehole", true);
    turn.note_taint("inbox", true);
    assert_eq!(turn.tainted_by.as_deref(), Some("treehole"));
}

#[test]
fn a_step_may_end_the_turn_only_when_every_call_succeeded_and_may_end_it() {
    let ending = CallResult {
        model_usage: None,
        ends_turn: true,
        ..ok("c1", "react")
    };
    let ending = Arc::new(ending);
    let failed = Arc::new(CallResult::failed("c2", "react", ToolError::new("no")));
    let turn = turn();
    assert!(turn.may_end(std::slice::from_ref(&ending)));
    assert!(!turn.may_end(&[]));
    assert!(!turn.may_end(&[Arc::clone(&ending), Arc::new(ok("c3", "read"))]));
    assert!(!turn.may_end(&[Arc::clone(&ending), failed]));
    let subagent = TurnRecord::begin("t".into(), "s".into(), None, Caller::Subagent, false);
    assert!(!subagent.may_end(std::slice::from_ref(&ending)));
    let structured = TurnRecord::begin("t".into(), "s".into(), None, Caller::Model, true);
    assert!(!structured.may_end(&[ending]));
}

#[test]
fn cancelling_a_parked_turn_revokes_its_requests_and_fails_its_calls() {
    let mut turn = turn();
    let request = approval(&turn, "c1", None);
    let ask = InputRequest::workflow_ask(&turn, "c3", "deploy", 2, &AskRequest::new("Go?"), None);
    let (id, asked) = (request.request_id.clone(), ask.request_id.clone());
    turn.begin_step(
        vec![
            PendingCall::waiting("c1", "pay", json!({}), &id),
            PendingCall::finished(ok("c2", "read")),
            PendingCall::waiting("c3", "deploy", json!({ "v": 1 }), &asked),
            PendingCall::running("c4", "wait", json!({})),
        ],
        vec![request, ask],
        None,
    );
    let sleep = Parked::new(&turn, "c4", "wait", Suspension::Sleep { until_ms: 9 });
    turn.park(&[], vec![sleep]).unwrap();
    let cancellation = turn.cancel();
    assert_eq!(turn.status, TurnStatus::Cancelled);
    assert_eq!(cancellation.revoked, vec![id, asked]);
    let closed: Vec<&str> = cancellation
        .closed
        .iter()
        .map(|r| r.call_id.as_str())
        .collect();
    assert_eq!(closed, ["c1", "c3"], "calls that waited on a request");
    assert_eq!(
        cancellation.bodies,
        vec![
            ("c3".to_owned(), "deploy".to_owned(), json!({ "v": 1 })),
            ("c4".to_owned(), "wait".to_owned(), json!({})),
        ]
    );
    let CallState::Finished { result } = state(&turn, "c4") else {
        panic!("not finished");
    };
    assert_eq!(result.error.unwrap().code(), ErrorCode::Cancelled);
    assert!(matches!(state(&turn, "c2"), CallState::Finished { result } if !result.is_error));
}

#[test]
fn cancelling_a_running_turn_leaves_its_calls_to_finish() {
    let mut turn = turn();
    turn.begin_step(
        vec![PendingCall::running("c1", "read", json!({}))],
        Vec::new(),
        None,
    );
    assert_eq!(turn.cancel(), Cancellation::default());
    assert_eq!(turn.status, TurnStatus::Cancelled);
    assert_eq!(state(&turn, "c1"), CallState::Running);
}

#[test]
fn an_answers_patch_turns_the_step_before_it_into_the_step_after_it() {
    let mut before = turn();
    let (a, b) = (
        approval(&before, "c1", Some("pay")),
        approval(&before, "c2", None),
    );
    let (a_id, b_id) = (a.request_id.clone(), b.request_id.clone());
    before.begin_step(
        vec![
            PendingCall::waiting("c1", "pay", json!({ "cents": 1 }), &a_id),
            PendingCall::waiting("c2", "pay", json!({ "cents": 2 }), &b_id),
            PendingCall::finished(ok("c3", "read")),
        ],
        vec![a, b],
        None,
    );
    before.park(&[], Vec::new()).unwrap();
    for (id, decision) in [(&a_id, Decision::Approved), (&b_id, Decision::Cancelled)] {
        let mut after = before.clone();
        let step = after.pending.as_mut().unwrap();
        assert!(step.settle(id, &settlement(decision)));
        let patch = step.patch(id).unwrap();
        assert_eq!(patch.calls.len(), 1, "only the gated call: {patch:?}");
        let mut patched = before.clone();
        assert!(patched.apply(&patch));
        assert_eq!(patched, after, "{decision:?}");
    }
    assert!(before.pending.as_ref().unwrap().patch("nope").is_none());
    let mut other_step = before.clone();
    other_step.pending.as_mut().unwrap().index = 7;
    let patch = before.pending.as_ref().unwrap().patch(&a_id).unwrap();
    assert!(
        !other_step.apply(&patch),
        "a patch of step 0 does not apply to step 7"
    );
}

fn limit(turn: &TurnRecord) -> InputRequest {
    InputRequest::session_limit(turn, "Allow 5 more steps?".into(), json!({ "steps": 5 }))
}

fn settled(decision: Decision) -> Settlement {
    Settlement {
        decision,
        responder: Some(alice()),
        note: None,
        answer: None,
    }
}

#[test]
fn an_active_turn_parks_on_a_limit_as_a_step_without_calls() {
    let mut turn = turn();
    let request = limit(&turn);
    turn.park_on_limit(request.clone()).unwrap();
    assert_eq!(turn.status, TurnStatus::Waiting);
    let step = turn.pending.as_ref().unwrap();
    assert!(step.calls.is_empty());
    assert_eq!(step.requests, vec![request]);
    assert_eq!(step.requests[0].kind, RequestKind::SessionLimit);
    assert_eq!(step.requests[0].requester, Some(alice()));
    // Parked already: a second limit is refused with the turn's status.
    assert_eq!(turn.park_on_limit(limit(&turn)), Err(TurnStatus::Waiting));
    let mut running = self::turn();
    running.begin_step(Vec::new(), Vec::new(), None);
    assert_eq!(
        running.park_on_limit(limit(&running)),
        Err(TurnStatus::Running)
    );
}

#[test]
fn only_an_approved_limit_lets_the_turn_go_on() {
    for (decision, stops) in [(Decision::Approved, false), (Decision::Cancelled, true)] {
        let mut turn = turn();
        let request = limit(&turn);
        turn.park_on_limit(request.clone()).unwrap();
        let step = turn.pending.as_mut().unwrap();
        assert!(step.stops_at_limit(), "a pending limit is not approved yet");
        assert!(step.settle(&request.request_id, &settled(decision)));
        assert_eq!(step.stops_at_limit(), stops, "{decision:?}");
    }
    let mut turn = turn();
    turn.park_on_limit(limit(&turn)).unwrap();
    let step = turn.pending.as_mut().unwrap();
    step.revoke(Outcome::Ignored, "never mind");
    assert!(step.stops_at_limit(), "a revoked limit stops the turn");
}

#[test]
fn a_closed_step_keeps_its_requests_as_they_ended() {
    let mut turn = turn();
    let request = limit(&turn);
    turn.park_on_limit(request.clone()).unwrap();
    let step = turn.pending.as_mut().unwrap();
    step.settle(&request.request_id, &settled(Decision::Approved));
    turn.claim_step();
    turn.close_step(&[], false);
    assert_eq!(turn.status, TurnStatus::Active);
    let closed = turn.last_step.as_ref().unwrap();
    let kept = closed.session_limit().expect("the limit request is kept");
    assert!(matches!(
        kept.status,
        RequestStatus::Settled {
            decision: Decision::Approved,
            ..
        }
    ));
    assert_eq!(turn.steps, 1);
}
