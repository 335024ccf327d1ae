//! The pause/resume protocol through the runtime: first answer wins, several requests per turn,
//! messages and cancellation revoking requests, the stable event names (with a snapshot of a full
//! sequence), and what each audience is offered: subagent-only-top-level tools, deferred tools
//! behind `tool_search`/`tool_call`, and conditional tools announced once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::registry::Format;
use toolwright::runtime::{
    CompletionReason, Decision, Event, InputResponse, Outcome, RequestKind, RespondOutcome,
    Runtime, SessionSpec, ToolCall, TurnStatus,
};
use toolwright::{Caller, ErrorCode};

use crate::support::{
    alice, builder, call, code, completed_with_notices, drain, model_text, resumed, turn_in,
    waiting,
};

// ---------------------------------------------------------------------------------------------
// Helpers.

/// Which tools ran, in order, per runtime.
#[derive(Clone, Debug, Default)]
struct Runs(Arc<Mutex<Vec<String>>>);

impl Runs {
    fn record(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn runtime() -> (Runtime, Runs) {
    let runs = Runs::default();
    let rt = builder([
        check_status::TOOL,
        restart::TOOL,
        finish::TOOL,
        open_incident::TOOL,
        export_ledger::TOOL,
        export_invoices::TOOL,
        find_runbook::TOOL,
        publish_release::TOOL,
        pay::TOOL,
    ])
    .state(runs.clone())
    .build()
    .unwrap();
    (rt, runs)
}

fn restart_call(id: &str, service: &str) -> ToolCall {
    call(id, "restart", json!({ "service": service }))
}

fn event_type(event: &Event) -> String {
    serde_json::to_value(event).unwrap()["type"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `(request_id, outcome)` of every `input.resolved`.
fn resolutions(events: &[Event]) -> Vec<(String, Outcome)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::InputResolved {
                request_id,
                outcome,
                ..
            } => Some((request_id.clone(), *outcome)),
            _ => None,
        })
        .collect()
}

/// How many `action.requested` and `action.result` events each call got.
fn lifecycle(events: &[Event]) -> BTreeMap<String, (usize, usize)> {
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for event in events {
        match event {
            Event::ActionRequested { call_id, .. } => {
                counts.entry(call_id.clone()).or_default().0 += 1
            }
            Event::ActionResult { result, .. } => {
                counts.entry(result.call_id.clone()).or_default().1 += 1;
            }
            _ => {}
        }
    }
    counts
}

fn once_each(events: &[Event], calls: &[&str]) {
    let counts = lifecycle(events);
    let expected: BTreeMap<String, (usize, usize)> =
        calls.iter().map(|c| ((*c).to_owned(), (1, 1))).collect();
    assert_eq!(
        counts, expected,
        "each call is requested once and has one result"
    );
}

// ---------------------------------------------------------------------------------------------
// Tools.

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ServiceArgs {
    /// Service name.
    service: String,
}

/// Current health of one service.
#[tool(effect = read, label(start = "Checking {service}"))]
async fn check_status(args: ServiceArgs, ctx: ToolContext, runs: State<Runs>) -> String {
    ctx.info(format!("probing {}", args.service));
    ctx.partial(&json!({ "probed": 1, "of": 2 }));
    runs.record(format!("check_status:{}", args.service));
    format!("{} is healthy", args.service)
}

/// Restarts one service.
#[tool(
    effect = write,
    approval(request = always, prompt = "Restart {service}?"),
    label(start = "Restarting {service}"),
)]
async fn restart(args: ServiceArgs, runs: State<Runs>) -> String {
    runs.record(format!("restart:{}", args.service));
    format!("{} restarted", args.service)
}

/// Sends the final answer.
#[tool(effect = read, ends_turn)]
async fn finish(_: NoInput) -> bool {
    true
}

/// Opens an incident across every team; only the top-level coordinator may.
#[tool(effect = write, subagents = false)]
async fn open_incident(args: ServiceArgs) -> String {
    format!("INC for {}", args.service)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct MonthArgs {
    /// The month, as YYYY-MM.
    month: String,
}

/// Exports the ledger of one month as a CSV file.
#[tool(effect = write, deferred, approval(request = always, prompt = "Export the {month} ledger?"))]
async fn export_ledger(args: MonthArgs, ctx: ToolContext, runs: State<Runs>) -> Value {
    runs.record(format!("export_ledger:{}", args.month));
    json!({ "path": format!("exports/ledger-{}.csv", args.month), "tool_name": ctx.tool_name() })
}

/// Exports every invoice of one month as PDF files.
#[tool(effect = write, deferred)]
async fn export_invoices(args: MonthArgs) -> String {
    format!("exports/invoices-{}.zip", args.month)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct AlertArgs {
    /// The alert name.
    alert: String,
}

/// Finds the runbook for an alert.
#[tool(effect = read, deferred)]
async fn find_runbook(args: AlertArgs) -> String {
    format!("runbooks/{}.md", args.alert)
}

fn release_approved(cx: &EnabledContext<'_>) -> bool {
    cx.flag("release_approved")
}

#[derive(Serialize, Deserialize, JsonSchema, ToolInput)]
struct NotesArgs {
    /// Release notes.
    notes: String,
}

/// Publishes the approved release.
#[tool(effect = public, approval = never, enabled = release_approved)]
async fn publish_release(args: NotesArgs) -> String {
    args.notes
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PayArgs {
    /// Amount in cents.
    amount: u64,
}

fn pay_policy(cx: &ApprovalContext<'_, PayArgs>) -> ApprovalDecision {
    if cx.input.amount > 1000 {
        ApprovalDecision::denied("payments over 1000 need a purchase order")
    } else {
        ApprovalDecision::UserApproval
    }
}

/// Pays a supplier.
#[tool(effect = money, approval = pay_policy)]
async fn pay(args: PayArgs, runs: State<Runs>) -> u64 {
    runs.record(format!("pay:{}", args.amount));
    args.amount
}

// ---------------------------------------------------------------------------------------------
// Answers.

#[tokio::test]
async fn the_first_valid_answer_wins() {
    let (rt, runs) = runtime();
    let turn = turn_in(&rt, "s-first", Some(alice())).await;
    let (_, requests) = waiting(turn.step(vec![restart_call("c1", "api")]).await.unwrap());
    assert_eq!(requests[0].kind, RequestKind::ToolApproval);
    let id = &requests[0].request_id;
    resumed(
        rt.respond(InputResponse::approve(id, Some(alice())))
            .await
            .unwrap(),
    );
    for late in [
        InputResponse::approve(id, Some(alice())),
        InputResponse::cancel(id, Some(alice())),
    ] {
        assert_eq!(rt.respond(late).await.unwrap(), RespondOutcome::Dropped);
    }
    assert_eq!(runs.all(), ["restart:api"]);
}

#[tokio::test]
async fn cancel_then_approve_stays_cancelled_and_the_note_reaches_the_model() {
    let (rt, runs) = runtime();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-cancel-note", Some(alice())).await;
    let (_, requests) = waiting(turn.step(vec![restart_call("c1", "api")]).await.unwrap());
    let id = &requests[0].request_id;
    let results = resumed(
        rt.respond(
            InputResponse::cancel(id, Some(alice()))
                .note("only restart the canary, not all of api"),
        )
        .await
        .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::Denied);
    assert!(
        model_text(&results[0]).contains("only restart the canary, not all of api"),
        "{}",
        model_text(&results[0])
    );
    // A double click on Approve after Cancel changes nothing.
    assert_eq!(
        rt.respond(InputResponse::approve(id, Some(alice())))
            .await
            .unwrap(),
        RespondOutcome::Dropped
    );
    assert!(runs.all().is_empty());
    let events = drain(&mut events);
    let settled: Vec<Decision> = events
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalSettled { decision, .. } => Some(*decision),
            _ => None,
        })
        .collect();
    assert_eq!(settled, [Decision::Cancelled]);
    assert_eq!(resolutions(&events), [(id.clone(), Outcome::Answered)]);
    once_each(&events, &["c1"]);
}

#[tokio::test]
async fn a_turn_waits_on_several_requests_and_resumes_when_all_settle() {
    let (rt, runs) = runtime();
    let turn = turn_in(&rt, "s-several", Some(alice())).await;
    let (results, requests) = waiting(
        turn.step(vec![
            restart_call("c1", "api"),
            call("c2", "check_status", json!({ "service": "db" })),
            restart_call("c3", "worker"),
        ])
        .await
        .unwrap(),
    );
    assert_eq!(results.len(), 1, "the read ran at once");
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].prompt, "Restart api?");
    assert_eq!(requests[1].prompt, "Restart worker?");

    // Answering the second first: the turn keeps waiting on the other one.
    let outcome = rt
        .respond(InputResponse::approve(
            &requests[1].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        RespondOutcome::Settled {
            pending: vec![requests[0].request_id.clone()]
        }
    );
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Waiting);
    assert_eq!(rt.waiting_turns().await.unwrap(), [turn.id().to_owned()]);
    assert_eq!(
        runs.all(),
        ["check_status:db"],
        "approved calls wait for the whole step"
    );

    let results = resumed(
        rt.respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap(),
    );
    let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(
        ids,
        ["c1", "c2", "c3"],
        "the whole batch, in the model's order"
    );
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    let mut ran = runs.all();
    ran.sort();
    assert_eq!(ran, ["check_status:db", "restart:api", "restart:worker"]);
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
    assert!(rt.waiting_turns().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_message_revokes_pending_approvals_and_approved_calls_still_run() {
    let (rt, runs) = runtime();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-message", Some(alice())).await;
    let (_, requests) = waiting(
        turn.step(vec![restart_call("c1", "api"), restart_call("c2", "db")])
            .await
            .unwrap(),
    );
    rt.respond(InputResponse::approve(
        &requests[0].request_id,
        Some(alice()),
    ))
    .await
    .unwrap();
    let results = resumed(turn.message("actually, leave db alone").await.unwrap());
    assert!(!results[0].is_error, "the approved call ran: {results:?}");
    assert_eq!(code(&results[1]), ErrorCode::Denied);
    assert!(
        model_text(&results[1]).contains("leave db alone"),
        "{}",
        model_text(&results[1])
    );
    assert_eq!(runs.all(), ["restart:api"]);

    let events = drain(&mut events);
    assert_eq!(
        resolutions(&events),
        [
            (requests[0].request_id.clone(), Outcome::Answered),
            (requests[1].request_id.clone(), Outcome::Ignored)
        ]
    );
    once_each(&events, &["c1", "c2"]);
    // The revoked request cannot be answered any more.
    assert_eq!(
        rt.respond(InputResponse::approve(
            &requests[1].request_id,
            Some(alice())
        ))
        .await
        .unwrap(),
        RespondOutcome::Dropped
    );
    assert_eq!(runs.all(), ["restart:api"]);
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
}

#[tokio::test]
async fn cancelling_the_turn_revokes_its_requests_and_a_later_answer_runs_nothing() {
    let (rt, runs) = runtime();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-cancel", Some(alice())).await;
    let (_, requests) = waiting(
        turn.step(vec![
            restart_call("c1", "api"),
            restart_call("c2", "db"),
            call("c3", "check_status", json!({ "service": "api" })),
        ])
        .await
        .unwrap(),
    );
    // One approval is already in when the turn is cancelled (from another handle, as a new
    // process would hold).
    rt.respond(InputResponse::approve(
        &requests[0].request_id,
        Some(alice()),
    ))
    .await
    .unwrap();
    rt.turn(turn.id()).await.unwrap().cancel().await.unwrap();
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Cancelled);
    assert!(rt.waiting_turns().await.unwrap().is_empty());
    for request in &requests {
        assert_eq!(
            rt.respond(InputResponse::approve(&request.request_id, Some(alice())))
                .await
                .unwrap(),
            RespondOutcome::Dropped
        );
    }
    assert_eq!(
        turn.message("hello?").await.unwrap(),
        RespondOutcome::Dropped
    );
    assert_eq!(
        runs.all(),
        ["check_status:api"],
        "no approved call of a cancelled turn runs"
    );

    let events = drain(&mut events);
    assert_eq!(
        resolutions(&events),
        [
            (requests[0].request_id.clone(), Outcome::Answered),
            (requests[1].request_id.clone(), Outcome::Cancelled)
        ]
    );
    assert!(events.iter().any(|e| matches!(
        e,
        Event::TurnCompleted {
            reason: CompletionReason::Cancelled,
            ..
        }
    )));
    once_each(&events, &["c1", "c2", "c3"]);
    let results: Vec<(String, ErrorCode)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ActionResult { result, .. } if result.is_error => {
                Some((result.call_id.clone(), code(result)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("c1".to_owned(), ErrorCode::Cancelled),
            ("c2".to_owned(), ErrorCode::Cancelled)
        ]
    );
}

#[tokio::test]
async fn a_call_denied_beside_a_parked_one_has_one_result() {
    let (rt, runs) = runtime();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-denied-beside", Some(alice())).await;
    let (results, requests) = waiting(
        turn.step(vec![
            call("c1", "pay", json!({ "amount": 5000 })),
            call("c2", "pay", json!({ "amount": 10 })),
        ])
        .await
        .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::Denied);
    assert!(model_text(&results[0]).contains("purchase order"));
    assert_eq!(requests.len(), 1);
    let results = resumed(
        rt.respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::Denied);
    assert!(!results[1].is_error);
    assert_eq!(runs.all(), ["pay:10"]);
    once_each(&drain(&mut events), &["c1", "c2"]);
}

// ---------------------------------------------------------------------------------------------
// Event names: a full sequence, snapshotted.

#[tokio::test]
async fn a_full_event_sequence_keeps_its_json_names() {
    let (rt, _) = runtime();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-snapshot", Some(alice())).await;
    let (_, requests) = waiting(
        turn.step(vec![
            call("c1", "check_status", json!({ "service": "db" })),
            restart_call("c2", "api"),
        ])
        .await
        .unwrap(),
    );
    resumed(
        rt.respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap(),
    );
    let (_, _) = completed_with_notices(
        turn.step(vec![call("c3", "finish", json!({}))])
            .await
            .unwrap(),
    );
    let events = drain(&mut events);

    let names: Vec<String> = events.iter().map(event_type).collect();
    assert_eq!(
        names,
        [
            "turn.started",
            "action.requested",
            "action.requested",
            "action.log",
            "action.partial",
            "action.result",
            "input.requested",
            "turn.waiting",
            "approval.candidate",
            "approval.settled",
            "input.resolved",
            "action.result",
            "action.requested",
            "action.result",
            "turn.completed",
        ]
    );

    // Ids are random: name them by role before comparing.
    let text = serde_json::to_string(&events)
        .unwrap()
        .replace(turn.id(), "[turn]")
        .replace(&requests[0].request_id, "[request]");
    let sequence: Value = serde_json::from_str(&text).unwrap();
    insta::assert_json_snapshot!("approval_event_sequence", sequence);
}

// ---------------------------------------------------------------------------------------------
// What each audience is offered.

fn listed_names(list: &str) -> Vec<String> {
    let list: Value = serde_json::from_str(list).expect("the tool list is JSON");
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn top_level_only_tools_are_absent_in_subagent_sessions_and_fail_there() {
    let (rt, _) = runtime();
    let root = turn_in(&rt, "s-root", Some(alice())).await;
    assert!(
        listed_names(&root.tool_list(Format::OpenAi).await.unwrap())
            .contains(&"open_incident".to_owned())
    );

    let child = rt
        .open_session(
            SessionSpec::new("s-sub")
                .parent("s-root")
                .initiator(alice()),
        )
        .await
        .unwrap();
    let turn = child
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let names = listed_names(&turn.tool_list(Format::OpenAi).await.unwrap());
    assert!(!names.contains(&"open_incident".to_owned()), "{names:?}");
    assert!(names.contains(&"check_status".to_owned()), "{names:?}");
    let (results, _) = completed_with_notices(
        turn.step(vec![call(
            "c1",
            "open_incident",
            json!({ "service": "api" }),
        )])
        .await
        .unwrap(),
    );
    assert!(results[0].is_error);
    assert_eq!(code(&results[0]), ErrorCode::NotVisible);
    assert!(
        model_text(&results[0]).contains("delegated"),
        "{}",
        model_text(&results[0])
    );

    let (results, _) = completed_with_notices(
        root.step(vec![call(
            "c1",
            "open_incident",
            json!({ "service": "api" }),
        )])
        .await
        .unwrap(),
    );
    assert!(!results[0].is_error);
}

#[tokio::test]
async fn deferred_tools_are_found_with_tool_search_and_called_with_tool_call() {
    let (rt, runs) = runtime();
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-deferred", Some(alice())).await;
    let names = listed_names(&turn.tool_list(Format::OpenAi).await.unwrap());
    for deferred in ["export_ledger", "export_invoices", "find_runbook"] {
        assert!(!names.contains(&deferred.to_owned()), "{names:?}");
    }
    assert!(names.contains(&"tool_search".to_owned()) && names.contains(&"tool_call".to_owned()));

    // Ranked: both words match the ledger export, one matches the invoice export.
    let (results, _) = completed_with_notices(
        turn.step(vec![call(
            "s1",
            "tool_search",
            json!({ "query": "export ledger" }),
        )])
        .await
        .unwrap(),
    );
    let found = results[0].output["tools"].as_array().unwrap().clone();
    let found_names: Vec<&str> = found.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(found_names, ["export_ledger", "export_invoices"]);
    assert_eq!(
        found[0]["input_schema"]["properties"]["month"]["type"], "string",
        "results carry the input schema: {}",
        found[0]
    );
    assert!(found[0]["description"].as_str().unwrap().contains("ledger"));

    // Called through `tool_call`: the approval, events and result use the real name.
    let (_, requests) = waiting(
        turn.step(vec![call(
            "c1",
            "tool_call",
            json!({ "name": "export_ledger", "input": { "month": "2026-03" } }),
        )])
        .await
        .unwrap(),
    );
    assert_eq!(requests[0].tool.as_deref(), Some("export_ledger"));
    assert_eq!(requests[0].prompt, "Export the 2026-03 ledger?");
    let results = resumed(
        rt.respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap(),
    );
    assert_eq!(results[0].tool, "export_ledger");
    assert_eq!(
        results[0].output,
        json!({ "path": "exports/ledger-2026-03.csv", "tool_name": "export_ledger" })
    );
    assert_eq!(runs.all(), ["export_ledger:2026-03"]);
    let events = drain(&mut events);
    let named: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ActionRequested { call_id, tool, .. } => Some((call_id.clone(), tool.clone())),
            Event::ActionResult { result, .. } => {
                Some((result.call_id.clone(), result.tool.clone()))
            }
            _ => None,
        })
        .filter(|(id, _)| id == "c1")
        .collect();
    assert_eq!(
        named,
        [
            ("c1".to_owned(), "export_ledger".to_owned()),
            ("c1".to_owned(), "export_ledger".to_owned())
        ]
    );

    // A bad `tool_call` is an error result, not a crash.
    let (results, _) = completed_with_notices(
        turn.step(vec![call("c2", "tool_call", json!({ "input": {} }))])
            .await
            .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::InvalidInput);
}

#[tokio::test]
async fn a_conditional_tool_appears_at_the_next_step_and_is_announced_once() {
    let (rt, _) = runtime();
    let session = rt
        .open_session(SessionSpec::new("s-enabled").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let notes = json!({ "notes": "v2.14: faster checkout" });

    assert!(
        !listed_names(&turn.tool_list(Format::OpenAi).await.unwrap())
            .contains(&"publish_release".to_owned())
    );
    let (results, notices) = completed_with_notices(
        turn.step(vec![call("c1", "publish_release", notes.clone())])
            .await
            .unwrap(),
    );
    assert!(notices.is_empty(), "{notices:?}");
    assert_eq!(code(&results[0]), ErrorCode::UnknownTool);

    session.set_state("release_approved", true).await.unwrap();
    assert!(
        listed_names(&turn.tool_list(Format::OpenAi).await.unwrap())
            .contains(&"publish_release".to_owned())
    );
    let (results, notices) = completed_with_notices(
        turn.step(vec![call("c2", "publish_release", notes.clone())])
            .await
            .unwrap(),
    );
    assert_eq!(notices, ["New tool available: publish_release"]);
    assert!(!results[0].is_error, "{results:?}");

    // Told once: the next step says nothing.
    let (_, notices) = completed_with_notices(
        turn.step(vec![call(
            "c3",
            "check_status",
            json!({ "service": "api" }),
        )])
        .await
        .unwrap(),
    );
    assert!(notices.is_empty(), "{notices:?}");

    // And it goes away again when the predicate turns false.
    session.set_state("release_approved", false).await.unwrap();
    let (results, notices) = completed_with_notices(
        turn.step(vec![call("c4", "publish_release", notes)])
            .await
            .unwrap(),
    );
    assert_eq!(notices, ["Tool no longer available: publish_release"]);
    assert_eq!(code(&results[0]), ErrorCode::UnknownTool);
}
