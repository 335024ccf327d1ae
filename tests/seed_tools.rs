//! The seeds' tools (`examples/seed`) called through the registry: defaults and validation,
//! policies, turn control, durable steps, identities, status objects and visibility.

use std::collections::HashSet;
use std::sync::Arc;

use futures_executor::block_on;
use serde_json::{Value, json};
use toolwright::approval::{ApprovalCall, RequestPolicy, ResponseCall, ResponseDecision};
use toolwright::context::{CallContext, CallOutput, HostEvent, SessionInfo};
use toolwright::registry::{Audience, EndsTurn, Format};
use toolwright::testing::{CallContextBuilder, DetachedHost};
use toolwright::{
    ApprovalDecision, Caller, ErrorCode, ModelOutput, Principal, Registry, ResponseVerdict,
    ToolError,
};
use toolwright_core::approval::NeverCancelled;

#[path = "../examples/seed/mod.rs"]
mod seed;

use seed::ops::OpsBackend;
use seed::release::Releases;
use seed::treehole::{SMS_CODE, Treehole};
use seed::wallet::Wallet;

fn registry() -> Registry {
    Registry::collect().expect("the seed tools collect")
}

fn user(id: &str) -> Principal {
    Principal::user("oidc", id)
}

fn session_of(current: Option<Principal>) -> SessionInfo {
    SessionInfo {
        current,
        ..SessionInfo::new("s-1", "t-1")
    }
}

fn signed_in(principal: Principal) -> CallContextBuilder {
    CallContext::builder().session(session_of(Some(principal)))
}

fn call(name: &str, input: Value, context: CallContextBuilder) -> Result<CallOutput, ToolError> {
    block_on(registry().call_with(name, input, context))
}

fn with_ops() -> CallContextBuilder {
    CallContext::builder().host(Arc::new(
        DetachedHost::default().with_state(OpsBackend::default()),
    ))
}

#[test]
fn every_seed_tool_is_collected() {
    let registry = registry();
    for name in [
        "get_service_status",
        "read_logs",
        "restart_service",
        "compute_error_budget",
        "list_my_incidents",
        "react",
        "generate_report",
        "export_report",
        "refund_charge",
        "rollback_deploy",
        "deploy_service",
        "freeze_deploys",
        "provision_workspace",
        "record_approval",
        "publish_release",
        "wallet__card_balance",
        "wallet__recharge",
        "treehole__read",
        "treehole__send_code",
        "treehole__post",
    ] {
        assert!(registry.get(name).is_some(), "`{name}` is not registered");
    }
    assert_eq!(
        registry.by_id("wallet.card_balance").map(|t| t.name()),
        Some("wallet__card_balance")
    );
}

#[test]
fn read_logs_applies_defaults_and_the_limit_plus_one_trick() {
    let out = call("read_logs", json!({ "service": "payment-api" }), with_ops()).unwrap();
    assert_eq!(out.value["window"], "1h");
    assert_eq!(out.value["level"], "error");
    let lines = out.value["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 50);
    assert!(
        lines
            .iter()
            .all(|l| l.as_str().unwrap().contains(" ERROR "))
    );
    assert_eq!(out.value["truncated"], true);

    let few = call(
        "read_logs",
        json!({ "service": "payment-api", "window": "5m" }),
        with_ops(),
    )
    .unwrap();
    assert_eq!(few.value["lines"].as_array().unwrap().len(), 5);
    assert_eq!(few.value["truncated"], false);
}

#[test]
fn read_logs_projects_a_summary_for_the_model() {
    let out = call("read_logs", json!({ "service": "payment-api" }), with_ops()).unwrap();
    let ModelOutput::Text(summary) = out.for_model() else {
        panic!("expected a text projection, got {:?}", out.for_model());
    };
    assert!(summary.starts_with("50 error lines from payment-api in the last hour (more matched"));
    assert_eq!(summary.lines().count(), 4, "{summary}");
}

#[test]
fn read_logs_rejects_a_limit_over_200() {
    let err = call(
        "read_logs",
        json!({ "service": "payment-api", "limit": 500 }),
        with_ops(),
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidInput);
    assert!(err.message().contains("/limit"), "{}", err.message());
}

#[test]
fn read_logs_names_the_known_services_for_an_unknown_one() {
    let err = call("read_logs", json!({ "service": "payment-ap" }), with_ops()).unwrap_err();
    assert!(
        err.message().contains("known services: payment-api"),
        "{}",
        err.message()
    );
}

#[test]
fn a_tool_without_its_state_fails_clearly() {
    let err = call(
        "get_service_status",
        json!({ "service": "payment-api" }),
        CallContext::builder(),
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::MissingState);
}

#[test]
fn restart_service_reuses_the_change_of_a_rerun_call() {
    let ops = Arc::new(DetachedHost::default().with_state(OpsBackend::default()));
    let input = json!({ "service": "search-api", "reason": "stuck after the config push" });
    let run = |call_id: &str| {
        call(
            "restart_service",
            input.clone(),
            signed_in(user("u_ada")).call_id(call_id).host(ops.clone()),
        )
        .unwrap()
        .value
    };
    let first = run("c-1");
    assert_eq!(first["change"]["id"], "chg-0001");
    assert_eq!(first["change"]["requested_by"], "u_ada");
    assert_eq!(run("c-1")["change"]["id"], "chg-0001");
    assert_eq!(run("c-2")["change"]["id"], "chg-0002");
}

#[test]
fn restart_service_asks_always_with_a_prompt_naming_the_service() {
    let registry = registry();
    let tool = registry.get("restart_service").unwrap();
    let approval = tool.approval().expect("restart_service has a policy");
    assert!(matches!(approval.request, RequestPolicy::Always));
    let input = json!({ "service": "payment-api", "reason": "connection pool exhausted" });
    let session = session_of(None);
    let approved = HashSet::new();
    let prompt = (approval.prompt.unwrap())(&ApprovalCall::new(
        &session,
        tool.name(),
        &input,
        "c-1",
        &approved,
        &NeverCancelled,
    ))
    .unwrap();
    assert!(prompt.starts_with("Restart payment-api?"), "{prompt}");
    assert_eq!(tool.start_label(&input), "Restarting payment-api");
}

fn refund_decision(caller: Option<Principal>, input: Value) -> ApprovalDecision {
    let registry = registry();
    let tool = registry.get("refund_charge").unwrap();
    let Some(RequestPolicy::Custom(policy)) = tool.approval().map(|a| a.request) else {
        panic!("refund_charge has a custom request policy");
    };
    let input = tool.validate(input).unwrap();
    let session = session_of(caller);
    let approved = HashSet::new();
    block_on(policy(&ApprovalCall::new(
        &session,
        tool.name(),
        &input,
        "c-1",
        &approved,
        &NeverCancelled,
    )))
}

fn acme_user() -> Principal {
    user("u_ada").with_attribute("tenant_id", "tn_acme")
}

#[test]
fn refund_policy_denies_other_tenants_with_a_reason() {
    let decision = refund_decision(
        Some(acme_user()),
        json!({ "tenant_id": "tn_globex", "charge_id": "ch_5TzWr1", "amount": 10.0 }),
    );
    let ApprovalDecision::Denied(Some(reason)) = decision else {
        panic!("expected a denial with a reason, got {decision:?}");
    };
    assert!(
        reason.contains("no access to tenant `tn_globex`"),
        "{reason}"
    );

    let anonymous = refund_decision(
        None,
        json!({ "tenant_id": "tn_acme", "charge_id": "ch_9LmQe7", "amount": 10.0 }),
    );
    assert!(matches!(anonymous, ApprovalDecision::Denied(Some(_))));
}

#[test]
fn refund_policy_asks_above_1000_only() {
    let large = json!({ "tenant_id": "tn_acme", "charge_id": "ch_3PaXk2", "amount": 1500.0 });
    assert_eq!(
        refund_decision(Some(acme_user()), large),
        ApprovalDecision::UserApproval
    );
    let small = json!({ "tenant_id": "tn_acme", "charge_id": "ch_9LmQe7", "amount": 120.0 });
    assert_eq!(
        refund_decision(Some(acme_user()), small),
        ApprovalDecision::NotApplicable
    );
}

#[test]
fn refund_charge_takes_the_tenant_from_the_session() {
    let refund = call(
        "refund_charge",
        json!({ "tenant_id": "tn_acme", "charge_id": "ch_9LmQe7", "amount": 120.0 }),
        signed_in(acme_user()),
    )
    .unwrap();
    assert_eq!(refund.value["status"], "succeeded");
    assert_eq!(refund.value["currency"], "EUR");

    let other = call(
        "refund_charge",
        json!({ "tenant_id": "tn_globex", "charge_id": "ch_5TzWr1", "amount": 10.0 }),
        signed_in(acme_user()),
    )
    .unwrap_err();
    assert!(
        other
            .message()
            .contains("tenant `tn_acme` has no charge `ch_5TzWr1`")
    );
}

fn rollback_verdict(responder: Principal, decision: ResponseDecision) -> ResponseVerdict {
    let registry = registry();
    let tool = registry.get("rollback_deploy").unwrap();
    let response = tool
        .approval()
        .and_then(|a| a.response)
        .expect("rollback_deploy has a response policy");
    let input = tool
        .validate(json!({ "service": "payment-api", "version": "v2.13.2" }))
        .unwrap();
    let session = session_of(Some(user("u_ada")));
    let requester = user("u_ada");
    response(&ResponseCall::new(
        &session,
        "req-1",
        "c-1",
        tool.name(),
        &input,
        Some(&requester),
        decision,
        Some(&responder),
    ))
}

#[test]
fn only_on_call_may_approve_a_rollback() {
    let on_call = user("u_grace").with_attribute("roles", json!(["sre", "oncall"]));
    assert_eq!(
        rollback_verdict(on_call, ResponseDecision::Approve),
        ResponseVerdict::Allowed
    );
    assert_eq!(
        rollback_verdict(user("u_ada"), ResponseDecision::Approve),
        ResponseVerdict::rejected("only on-call may approve rollbacks")
    );
    assert_eq!(
        rollback_verdict(user("u_ada"), ResponseDecision::Cancel),
        ResponseVerdict::Allowed
    );
}

#[test]
fn rollback_deploy_validates_the_version_and_records_the_approver() {
    let err = call(
        "rollback_deploy",
        json!({ "service": "payment-api", "version": "2.13" }),
        with_ops(),
    )
    .unwrap_err();
    assert!(err.message().contains("/version"), "{}", err.message());

    let on_call = user("u_grace").with_attribute("roles", json!(["oncall"]));
    let out = call(
        "rollback_deploy",
        json!({ "service": "payment-api", "version": "v2.13.2" }),
        with_ops().approved_by(Some(on_call)),
    )
    .unwrap();
    assert_eq!(out.value["approved_by"], "u_grace");
}

#[test]
fn react_ends_the_turn() {
    let registry = registry();
    let tool = registry.get("react").unwrap();
    assert_eq!(tool.ends_turn(), EndsTurn::Always);
    assert!(
        tool.description_for(Audience::Model)
            .ends_with("Calling this tool ends your turn.")
    );
    let out = call("react", json!({ "emoji": "👍" }), CallContext::builder()).unwrap();
    assert!(out.ends_turn);
    assert_eq!(out.value, json!({ "emoji": "👍" }));
}

#[test]
fn export_report_is_found_through_search_only() {
    let registry = registry();
    let list = registry.list(Audience::Model, Format::Anthropic);
    assert!(list.entries().iter().all(|e| e.name != "export_report"));
    let found = registry.search("export pdf", Audience::Model);
    assert_eq!(found.first().map(|t| t.name()), Some("export_report"));
}

#[test]
fn generate_report_streams_phases_and_labels_them() {
    let host = Arc::new(DetachedHost::default());
    let input = json!({ "project": "storefront" });
    let out = call(
        "generate_report",
        input.clone(),
        CallContext::builder().host(host.clone()),
    )
    .unwrap();
    assert_eq!(
        out.complete_label.as_deref(),
        Some("Report ready: 3 sections")
    );
    let registry = registry();
    let tool = registry.get("generate_report").unwrap();
    let phases: Vec<String> = host
        .events()
        .iter()
        .filter_map(|event| match event {
            HostEvent::Partial(snapshot) => tool.delta_label(&input, snapshot),
            _ => None,
        })
        .collect();
    assert_eq!(phases, ["collecting sources", "writing"]);
}

#[test]
fn provision_workspace_runs_its_steps_in_order() {
    let host = Arc::new(DetachedHost::default());
    let out = call(
        "provision_workspace",
        json!({ "customer_id": "cus_1042" }),
        CallContext::builder().host(host.clone()),
    )
    .unwrap();
    assert_eq!(out.value["tenant_id"], "tn_1042");
    let steps: Vec<String> = host
        .events()
        .into_iter()
        .filter_map(|event| match event {
            HostEvent::Step(name) => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        [
            "create-tenant",
            "seed:handbook",
            "seed:roadmap",
            "seed:support"
        ]
    );
}

#[test]
fn deploy_service_stops_when_nobody_can_confirm_the_plan() {
    let host = Arc::new(DetachedHost::default().with_state(OpsBackend::default()));
    let out = call(
        "deploy_service",
        json!({ "service": "search-api", "environment": "production", "version": "v5.3.0" }),
        CallContext::builder().host(host.clone()),
    )
    .unwrap();
    assert_eq!(out.value["deployed"], false);
    assert_eq!(out.value["reason"], "the operator did not confirm the plan");
    assert!(host.events().contains(&HostEvent::Step("plan".to_owned())));
    assert!(!host.events().contains(&HostEvent::Step("apply".to_owned())));
}

#[test]
fn list_my_incidents_needs_a_signed_in_user() {
    let err = call("list_my_incidents", json!({}), CallContext::builder()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ToolFailed);
    assert!(
        err.message().contains("signed-in user"),
        "{}",
        err.message()
    );

    let schedule = call("list_my_incidents", json!({}), signed_in(Principal::app())).unwrap_err();
    assert!(schedule.message().contains("signed-in user"));

    let mine = call("list_my_incidents", json!({}), signed_in(user("u_ada"))).unwrap();
    let ids: Vec<&str> = mine.value["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["INC-2041", "INC-2037"]);
}

fn treehole_user() -> CallContextBuilder {
    signed_in(user("u_lin"))
}

#[test]
fn treehole_post_asks_for_verification_with_a_status_object() {
    let host = Arc::new(DetachedHost::default().with_state(Treehole::default()));
    let post = |input: Value| {
        call("treehole__post", input, treehole_user().host(host.clone()))
            .unwrap()
            .value
    };
    let status = post(json!({ "text": "Free piano in the music building tonight" }));
    assert_eq!(status["status"], "verification_required");
    assert_eq!(status["kind"], "login");
    assert_eq!(status["methods"], json!(["sms"]));
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("treehole__send_code")
    );

    call(
        "treehole__send_code",
        json!({}),
        treehole_user().host(host.clone()),
    )
    .unwrap();
    let posted =
        post(json!({ "text": "Free piano in the music building tonight", "code": SMS_CODE }));
    assert_eq!(posted["text"], "Free piano in the music building tonight");

    let feed = call(
        "treehole__read",
        json!({ "query": "piano" }),
        treehole_user().host(host.clone()),
    )
    .unwrap();
    assert_eq!(feed.value["posts"].as_array().unwrap().len(), 1);
}

#[test]
fn wallet_tools_share_the_card() {
    let host = Arc::new(DetachedHost::default().with_state(Wallet::default()));
    let student = || signed_in(user("u_lin")).host(host.clone());
    let before = call("wallet__card_balance", json!({}), student()).unwrap();
    assert_eq!(before.value["balance_cents"], 5230);
    let recharged = call(
        "wallet__recharge",
        json!({ "amount_cents": 5000 }),
        student(),
    )
    .unwrap();
    assert_eq!(recharged.value["balance_cents"], 10230);
    let after = call("wallet__card_balance", json!({}), student()).unwrap();
    assert_eq!(after.value["balance_cents"], 10230);
}

#[test]
fn record_approval_is_for_users_only() {
    let registry = registry();
    let hidden = registry
        .resolve("record_approval", Caller::Model)
        .unwrap_err();
    assert_eq!(hidden.code(), ErrorCode::UnknownTool);
    assert!(
        registry
            .resolve("record_approval", Caller::Schedule)
            .is_err()
    );
    assert!(registry.resolve("record_approval", Caller::User).is_ok());

    let host = Arc::new(DetachedHost::default().with_state(Releases::default()));
    let operator = || {
        signed_in(user("u_ops"))
            .caller(Caller::User)
            .host(host.clone())
    };
    let out = call("record_approval", json!({ "code": "REL-7Q2K" }), operator()).unwrap();
    assert_eq!(out.value["approved"], true);
    let from_model = call(
        "record_approval",
        json!({ "code": "REL-7Q2K" }),
        operator().caller(Caller::Model),
    )
    .unwrap_err();
    assert_eq!(from_model.code(), ErrorCode::UnknownTool);
}
