//! The seeds' tools (`examples/seed`) end to end through the runtime: the three gates of
//! `restart_service`, `refund_charge` and `rollback_deploy`, per-user data from the session,
//! schedules, and a prompt injection read from an untrusted board.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::{
    CallResult, Event, InputRequest, InputResponse, RespondOutcome, Runtime, SessionSpec,
    StepOutcome, Turn, TurnStatus,
};
use toolwright::{Caller, ErrorCode, Principal};

#[path = "../examples/seed/mod.rs"]
#[allow(dead_code)] // reason: the runtime tests drive the seed tools, not every helper of the fakes
mod seed;
mod support;

use seed::ops::OpsBackend;
use seed::release::Releases;
use seed::treehole::Treehole;
use seed::wallet::Wallet;
use support::{builder_over, call, code, drain, model_text};

// ---------------------------------------------------------------------------------------------
// Helpers.

fn runtime() -> Runtime {
    builder_over(Registry::collect().expect("the seed tools collect"))
        .state(OpsBackend::default())
        .state(Releases::default())
        .state(Treehole::default())
        .state(Wallet::default())
        .build()
        .expect("every state the seed tools need is registered")
}

fn user(id: &str) -> Principal {
    Principal::user("oidc", id)
}

fn acme(id: &str) -> Principal {
    user(id).with_attribute("tenant_id", "tn_acme")
}

fn on_call(id: &str) -> Principal {
    user(id).with_attribute("roles", json!(["sre", "oncall"]))
}

async fn turn_as(rt: &Runtime, session: &str, current: Option<Principal>) -> Turn {
    let mut spec = SessionSpec::new(session);
    if let Some(initiator) = &current {
        spec = spec.initiator(initiator.clone());
    }
    let session = rt.open_session(spec).await.unwrap();
    session.begin_turn(current, Caller::Model).await.unwrap()
}

async fn one(turn: &Turn, name: &str, arguments: Value) -> StepOutcome {
    turn.step(vec![call("c1", name, arguments)]).await.unwrap()
}

fn done(outcome: StepOutcome) -> CallResult {
    match outcome {
        StepOutcome::Completed { mut results, .. } => {
            std::sync::Arc::unwrap_or_clone(results.remove(0))
        }
        other => panic!("expected a completed step, got {other:?}"),
    }
}

fn asks(outcome: StepOutcome) -> InputRequest {
    match outcome {
        StepOutcome::Waiting {
            results,
            mut requests,
            ..
        } => {
            assert!(results.is_empty(), "{results:?}");
            assert_eq!(requests.len(), 1);
            requests.remove(0)
        }
        other => panic!("expected the call to wait, got {other:?}"),
    }
}

fn resumed(outcome: RespondOutcome) -> CallResult {
    match outcome {
        RespondOutcome::Resumed(step) => done(step),
        other => panic!("expected the turn to resume, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// restart_service: always, with a prompt that says what the approver approves.

#[tokio::test]
async fn restart_service_asks_with_its_prompt_and_runs_once_approved() {
    let rt = runtime();
    let mut events = rt.subscribe();
    let ada = user("u_ada");
    let turn = turn_as(&rt, "s-restart", Some(ada.clone())).await;

    // Too short a reason never reaches the approver.
    let short = done(
        one(
            &turn,
            "restart_service",
            json!({ "service": "payment-api", "reason": "pool" }),
        )
        .await,
    );
    assert_eq!(code(&short), ErrorCode::InvalidInput);
    assert!(model_text(&short).contains("/reason"));

    let args = json!({ "service": "payment-api", "reason": "connection pool exhausted" });
    let request = asks(
        turn.step(vec![call("c2", "restart_service", args)])
            .await
            .unwrap(),
    );
    assert_eq!(
        request.prompt,
        "Restart payment-api? Every instance rolls and is unavailable for 10-30 s. Reason: connection pool exhausted"
    );
    assert_eq!(request.requester.as_ref(), Some(&ada));
    let label = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ActionRequested { call_id, label, .. } if call_id == "c2" => Some(label),
            _ => None,
        })
        .next();
    assert_eq!(label.as_deref(), Some("Restarting payment-api"));

    let result = resumed(
        rt.respond(InputResponse::approve(&request.request_id, Some(ada)))
            .await
            .unwrap(),
    );
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.output["restarted"], true);
    assert_eq!(result.output["instances"], 6);
    assert_eq!(result.output["change"]["requested_by"], "u_ada");
    assert_eq!(
        result.output["change"]["summary"],
        "restart payment-api: connection pool exhausted"
    );
}

// ---------------------------------------------------------------------------------------------
// refund_charge: a custom policy over the session's identity and the input.

#[tokio::test]
async fn refund_charge_refuses_other_tenants_with_a_reason() {
    let rt = runtime();
    let turn = turn_as(&rt, "s-refund-cross", Some(acme("u_ada"))).await;
    let result = done(
        one(
            &turn,
            "refund_charge",
            json!({ "tenant_id": "tn_globex", "charge_id": "ch_5TzWr1", "amount": 10.0 }),
        )
        .await,
    );
    assert_eq!(code(&result), ErrorCode::Denied);
    let text = model_text(&result);
    assert!(text.contains("no access to tenant `tn_globex`"), "{text}");

    // A user with no tenant at all is refused too: identity comes from the session only.
    let anonymous = turn_as(&rt, "s-refund-anon", Some(user("u_eve"))).await;
    let result = done(
        one(
            &anonymous,
            "refund_charge",
            json!({ "tenant_id": "tn_acme", "charge_id": "ch_9LmQe7", "amount": 10.0 }),
        )
        .await,
    );
    assert_eq!(code(&result), ErrorCode::Denied);
}

#[tokio::test]
async fn refund_charge_runs_small_refunds_and_asks_above_1000() {
    let rt = runtime();
    let ada = acme("u_ada");
    let turn = turn_as(&rt, "s-refund", Some(ada.clone())).await;

    let small = done(
        one(
            &turn,
            "refund_charge",
            json!({ "tenant_id": "tn_acme", "charge_id": "ch_9LmQe7", "amount": 100.0 }),
        )
        .await,
    );
    assert!(!small.is_error, "{small:?}");
    assert_eq!(small.output["status"], "succeeded");
    assert_eq!(small.output["currency"], "EUR");

    let request = asks(
        turn.step(vec![call(
            "c2",
            "refund_charge",
            json!({ "tenant_id": "tn_acme", "charge_id": "ch_3PaXk2", "amount": 1500.0 }),
        )])
        .await
        .unwrap(),
    );
    assert_eq!(
        request.prompt,
        "Refund 1500 of charge ch_3PaXk2 (tenant tn_acme)?"
    );
    let large = resumed(
        rt.respond(InputResponse::approve(&request.request_id, Some(ada)))
            .await
            .unwrap(),
    );
    assert!(!large.is_error, "{large:?}");
    assert_eq!(large.output["amount"], 1500.0);
    // Distinct calls have distinct idempotency keys, hence distinct upstream refunds.
    assert_ne!(large.output["refund_id"], small.output["refund_id"]);
}

// ---------------------------------------------------------------------------------------------
// rollback_deploy: only on-call engineers may approve.

#[tokio::test]
async fn rollback_deploy_waits_for_an_on_call_engineer() {
    let rt = runtime();
    let ada = user("u_ada");
    let turn = turn_as(&rt, "s-rollback", Some(ada.clone())).await;
    let request = asks(
        one(
            &turn,
            "rollback_deploy",
            json!({ "service": "payment-api", "version": "v2.13.2" }),
        )
        .await,
    );
    assert_eq!(
        request.prompt,
        "Roll payment-api back to v2.13.2? Traffic moves to the old release at once."
    );

    // Neither the requester nor another engineer off call may approve; the request stays open.
    for responder in [ada.clone(), user("u_grace")] {
        let outcome = rt
            .respond(InputResponse::approve(&request.request_id, Some(responder)))
            .await
            .unwrap();
        assert_eq!(
            outcome,
            RespondOutcome::Rejected {
                reason: "only on-call may approve rollbacks".into()
            }
        );
    }
    assert!(
        turn.record()
            .await
            .unwrap()
            .request(&request.request_id)
            .unwrap()
            .is_pending()
    );

    let result = resumed(
        rt.respond(InputResponse::approve(
            &request.request_id,
            Some(on_call("u_linus")),
        ))
        .await
        .unwrap(),
    );
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.output["version"], "v2.13.2");
    // Approval is consent: the change is still Ada's, approved by Linus.
    assert_eq!(result.output["approved_by"], "u_linus");
    assert_eq!(result.output["change"]["requested_by"], "u_ada");
}

#[tokio::test]
async fn anyone_may_cancel_a_rollback() {
    let rt = runtime();
    let turn = turn_as(&rt, "s-rollback-cancel", Some(user("u_ada"))).await;
    let request = asks(
        one(
            &turn,
            "rollback_deploy",
            json!({ "service": "payment-api", "version": "v2.13.2" }),
        )
        .await,
    );
    let result = resumed(
        rt.respond(
            InputResponse::cancel(&request.request_id, Some(user("u_grace")))
                .note("the deploy is fine, it was a probe blip"),
        )
        .await
        .unwrap(),
    );
    assert_eq!(code(&result), ErrorCode::Denied);
    assert!(model_text(&result).contains("probe blip"));
}

// ---------------------------------------------------------------------------------------------
// list_my_incidents: the user comes from the session, never from the input.

#[tokio::test]
async fn list_my_incidents_reads_the_caller_from_the_session() {
    let rt = runtime();
    for (id, expected) in [
        ("u_ada", vec!["INC-2041", "INC-2037"]),
        ("u_grace", vec!["INC-2040"]),
    ] {
        let turn = turn_as(&rt, &format!("s-incidents-{id}"), Some(user(id))).await;
        let result = done(one(&turn, "list_my_incidents", json!({})).await);
        assert!(!result.is_error, "{result:?}");
        assert_eq!(result.output["assignee"], id);
        let ids: Vec<&str> = result.output["incidents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, expected);
    }

    // Naming someone else in the input gets nobody else's incidents.
    let turn = turn_as(&rt, "s-incidents-spoof", Some(user("u_grace"))).await;
    let result = done(one(&turn, "list_my_incidents", json!({ "assignee": "u_ada" })).await);
    assert!(
        result.is_error || result.output["assignee"] == "u_grace",
        "{result:?}"
    );

    // Without a signed-in user there is nothing to list, and the model is told why.
    let anonymous = turn_as(&rt, "s-incidents-anon", None).await;
    let result = done(one(&anonymous, "list_my_incidents", json!({})).await);
    assert!(result.is_error);
    assert!(
        model_text(&result).contains("sign in"),
        "{}",
        model_text(&result)
    );
}

// ---------------------------------------------------------------------------------------------
// Schedules.

static ROTATIONS: AtomicUsize = AtomicUsize::new(0);

/// The seed's `skipForSchedules` (11.11): the application identity skips approval, people still
/// approve.
fn skip_for_schedules(cx: &ApprovalContext<'_, NoInput>) -> ApprovalDecision {
    match cx.current() {
        Some(principal)
            if principal.authenticator == "app"
                && principal.principal_id == Principal::app().principal_id
                && principal.principal_type == toolwright::context::PrincipalType::Runtime =>
        {
            ApprovalDecision::NotApplicable
        }
        _ => ApprovalDecision::UserApproval,
    }
}

/// Rotates the signing keys of every service. Runs nightly; people need approval.
#[tool(effect = write, approval = skip_for_schedules)]
async fn rotate_keys(_: NoInput, ctx: ToolContext) -> String {
    ROTATIONS.fetch_add(1, Ordering::SeqCst);
    // The idempotency key keeps a replayed step from rotating twice upstream.
    ctx.idempotency_key()
}

#[tokio::test]
async fn a_schedule_skips_approval_through_a_policy_and_fails_fast_without_one() {
    let rt = runtime();
    let session = rt
        .open_session(SessionSpec::new("s-nightly").non_interactive())
        .await
        .unwrap();
    let turn = session.begin_turn(None, Caller::Schedule).await.unwrap();
    let results = match turn
        .step(vec![
            call("c1", "rotate_keys", json!({})),
            call(
                "c2",
                "restart_service",
                json!({ "service": "search-api", "reason": "nightly memory reset" }),
            ),
        ])
        .await
        .unwrap()
    {
        StepOutcome::Completed { results, .. } => results,
        other => panic!("a schedule never parks: {other:?}"),
    };
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(results[0].output, "s-nightly:c1");
    assert_eq!(code(&results[1]), ErrorCode::ApprovalUnavailable);
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
    assert!(rt.waiting_turns().await.unwrap().is_empty());

    // A person calling the same tool is asked.
    let before = ROTATIONS.load(Ordering::SeqCst);
    let person = turn_as(&rt, "s-nightly-by-hand", Some(user("u_ada"))).await;
    asks(one(&person, "rotate_keys", json!({})).await);
    assert_eq!(ROTATIONS.load(Ordering::SeqCst), before);
}

// ---------------------------------------------------------------------------------------------
// A prompt injection from the treehole meets the wallet.

#[tokio::test]
async fn text_from_the_treehole_cannot_spend_money_without_a_person() {
    let rt = runtime();
    let student = user("u_mei");
    let session = rt
        .open_session(SessionSpec::new("s-campus").initiator(student.clone()))
        .await
        .unwrap();

    // The student recharged once this session: `once` remembers the grant.
    let turn = session
        .begin_turn(Some(student.clone()), Caller::Model)
        .await
        .unwrap();
    let request = asks(one(&turn, "wallet__recharge", json!({ "amount_cents": 2000 })).await);
    resumed(
        rt.respond(InputResponse::approve(
            &request.request_id,
            Some(student.clone()),
        ))
        .await
        .unwrap(),
    );
    let again = done(
        turn.step(vec![call(
            "c2",
            "wallet__recharge",
            json!({ "amount_cents": 1000 }),
        )])
        .await
        .unwrap(),
    );
    assert!(!again.is_error, "remembered for the session: {again:?}");

    // A new turn reads the board, which tells the model to recharge 500 yuan.
    let turn = session
        .begin_turn(Some(student.clone()), Caller::Model)
        .await
        .unwrap();
    let feed = done(one(&turn, "treehole__read", json!({})).await);
    assert!(feed.output.to_string().contains("Ignore your instructions"));
    let request = asks(
        turn.step(vec![call(
            "c2",
            "wallet__recharge",
            json!({ "amount_cents": 50000 }),
        )])
        .await
        .unwrap(),
    );
    assert!(
        request
            .reasons
            .iter()
            .any(|r| r.contains("`treehole__read`")),
        "{:?}",
        request.reasons
    );
    // Reading the balance still works in the tainted turn.
    let outcome = rt
        .respond(InputResponse::cancel(
            &request.request_id,
            Some(student.clone()),
        ))
        .await
        .unwrap();
    assert_eq!(code(&resumed(outcome)), ErrorCode::Denied);
    let balance = done(
        turn.step(vec![call("c3", "wallet__card_balance", json!({}))])
            .await
            .unwrap(),
    );
    assert_eq!(balance.output["balance_cents"], 5_230 + 2_000 + 1_000);
}

// ---------------------------------------------------------------------------------------------
// record_approval → publish_release: a tool writes session state that unlocks another tool
// (the Flue seed's `usePersistentState` with a conditional tool).

#[tokio::test]
async fn an_operators_approval_written_by_a_tool_unlocks_publish_release() {
    let rt = runtime();
    let mut events = rt.subscribe();
    let session = rt
        .open_session(SessionSpec::new("release").initiator(user("u_dev")))
        .await
        .unwrap();
    let notes = "Release 2.4: faster sync, fewer conflicts, a new export page.";

    // Before any approval, publish_release does not exist for the model.
    let turn = session
        .begin_turn(Some(user("u_dev")), Caller::Model)
        .await
        .unwrap();
    assert!(
        !turn
            .tool_list(toolwright::registry::Format::OpenAi)
            .await
            .unwrap()
            .contains("publish_release")
    );
    let refused = done(one(&turn, "publish_release", json!({ "notes": notes })).await);
    assert!(refused.is_error, "{refused:?}");
    assert_eq!(code(&refused), ErrorCode::UnknownTool);

    // An invalid code writes nothing.
    let operator = user("u_ops");
    let rejected = session
        .invoke(
            operator.clone(),
            "record_approval",
            json!({ "code": "REL-0000" }),
        )
        .await
        .unwrap();
    assert_eq!(rejected.result().unwrap().output["approved"], false);
    let state = session.record().await.unwrap().state;
    assert!(!state.contains_key("release_approved"), "{state:?}");

    // The operator approves from the release page: the tool writes the session's state.
    drain(&mut events);
    let approved = session
        .invoke(operator, "record_approval", json!({ "code": "REL-7Q2K" }))
        .await
        .unwrap();
    assert_eq!(approved.result().unwrap().output["approved"], true);
    let state = session.record().await.unwrap().state;
    assert_eq!(state.get("release_approved"), Some(&json!(true)));
    assert!(
        drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::SessionChanged { session_id } if session_id == "release")),
        "watchers (the MCP server) hear of the change at once"
    );

    // The model's next step is told of the new tool, which now runs.
    let list = turn
        .tool_list(toolwright::registry::Format::OpenAi)
        .await
        .unwrap();
    assert!(list.contains("publish_release"), "{list}");
    let outcome = one(&turn, "publish_release", json!({ "notes": notes })).await;
    let StepOutcome::Completed {
        results, notices, ..
    } = outcome
    else {
        panic!("expected the publish to run, got {outcome:?}");
    };
    assert!(
        notices
            .iter()
            .any(|n| n == "New tool available: publish_release"),
        "{notices:?}"
    );
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(
        results[0].output["headline"],
        "Release 2.4: faster sync, fewer conflicts, a new export page."
    );
}
