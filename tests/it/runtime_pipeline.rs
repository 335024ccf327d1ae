//! The call pipeline through the runtime, in the order the spec gives it: resolve → visibility →
//! validate → decide → run → output check → projection → result; what a tool's context carries;
//! activity labels; and when a step ends the turn.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::context::LogLevel;
use toolwright::prelude::*;
use toolwright::runtime::{
    CallResult, CompletionReason, Event, InputResponse, Options, RespondOutcome, Runtime,
    RuntimeError, SessionSpec, StepOutcome, ToolCall, Turn, TurnStatus,
};
use toolwright::{Caller, ContentPart, ErrorCode, Principal};

use crate::support::{
    alice, builder, builder_over, call, code, completed_ending, drain, model_text, runtime, turn_in,
};

// ---------------------------------------------------------------------------------------------
// Helpers.

async fn run_one(turn: &Turn, name: &str, arguments: Value) -> CallResult {
    let (mut results, _) =
        completed_ending(turn.step(vec![call("c1", name, arguments)]).await.unwrap());
    assert_eq!(results.len(), 1);
    results.remove(0)
}

// ---------------------------------------------------------------------------------------------
// Tools.

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ServiceArgs {
    /// Service name, e.g. payment-api.
    service: String,
}

/// Current health of one service.
#[tool(effect = read)]
async fn get_service_status(args: ServiceArgs) -> String {
    format!("{} is healthy", args.service)
}

/// Recent log lines of one service.
#[tool(effect = read)]
async fn read_service_logs(args: ServiceArgs) -> Vec<String> {
    vec![format!("{} ERROR upstream timeout", args.service)]
}

/// Clears every cache of the platform. Operators run it from the admin page.
#[tool(effect = write, user_only)]
async fn wipe_cache(_: NoInput) -> bool {
    true
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ScaleArgs {
    /// Service to scale.
    #[schemars(length(min = 1))]
    service: String,
    /// How many replicas, 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    replicas: u32,
}

/// Scales one service.
#[tool(effect = write)]
async fn scale_service(args: ScaleArgs) -> String {
    format!("{} runs {} replicas", args.service, args.replicas)
}

/// Looks up an account in the ledger.
#[tool(effect = read)]
async fn lookup_account(_: NoInput) -> Result<u8, ToolError> {
    Err(ToolError::new(
        "the ledger API returned 404 for `acct-9`; list accounts with `list_accounts` first",
    ))
}

/// Reconciles the ledger.
#[tool(effect = read)]
async fn reconcile(_: NoInput) -> u32 {
    panic!("the ledger is inconsistent")
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TallyArgs {
    count: u32,
}

#[derive(Serialize, JsonSchema)]
struct Tally {
    /// At most 10.
    #[schemars(range(max = 10))]
    count: u32,
}

/// Counts open tickets.
#[tool(effect = read, output_schema)]
async fn tally(args: TallyArgs) -> Tally {
    Tally { count: args.count }
}

#[derive(Serialize)]
struct Detail {
    service: String,
    status: &'static str,
    instances: u32,
    error_rate: f64,
    regions: Vec<&'static str>,
}

fn detail_summary(detail: &Detail) -> String {
    format!(
        "{} is {}, {} instances, {}% errors",
        detail.service, detail.status, detail.instances, detail.error_rate
    )
}

/// Full detail of one service.
#[tool(effect = read, to_model_output = detail_summary)]
async fn service_detail(args: ServiceArgs) -> Detail {
    Detail {
        service: args.service,
        status: "degraded",
        instances: 6,
        error_rate: 0.65,
        regions: vec!["eu-west-1", "us-east-1"],
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct CaptureArgs {
    /// Length of the base64 text to produce.
    chars: usize,
}

#[derive(Serialize)]
struct Screenshot {
    path: String,
    base64: String,
}

fn screenshot_for_model(shot: &Screenshot) -> ModelOutput {
    ModelOutput::content([
        ContentPart::text(format!("Saved to {}:", shot.path)),
        ContentPart::file(shot.base64.clone(), "image/png"),
    ])
}

/// Takes a screenshot of a page.
#[tool(effect = read, to_model_output = screenshot_for_model)]
async fn capture_page(args: CaptureArgs) -> Screenshot {
    Screenshot {
        path: "shots/page.png".to_owned(),
        base64: "A".repeat(args.chars),
    }
}

/// What a hanging tool saw of its cancellation.
#[derive(Clone, Debug, Default)]
struct Hang {
    started: Arc<AtomicBool>,
    /// How many times `note_start` started.
    noted: Arc<AtomicUsize>,
    cancelled_at_drop: Arc<Mutex<Option<bool>>>,
    watcher: Arc<tokio::sync::Notify>,
}

struct DropProbe {
    ctx: ToolContext,
    hang: Hang,
}

impl Drop for DropProbe {
    fn drop(&mut self) {
        *self.hang.cancelled_at_drop.lock().unwrap() = Some(self.ctx.is_cancelled());
    }
}

/// Waits for an upstream that never answers.
#[tool(effect = read)]
async fn wait_forever(_: NoInput, ctx: ToolContext, hang: State<Hang>) -> u8 {
    let watcher = ctx.clone();
    let notify = hang.watcher.clone();
    tokio::spawn(async move {
        watcher.cancelled().await;
        notify.notify_one();
    });
    hang_until_dropped(ctx, &hang).await
}

/// Never finishes; notes whether the call was cancelled when the body is dropped.
async fn hang_until_dropped(ctx: ToolContext, hang: &Hang) -> u8 {
    let _probe = DropProbe {
        ctx,
        hang: hang.clone(),
    };
    hang.started.store(true, Ordering::SeqCst);
    std::future::pending::<()>().await;
    0
}

// ---------------------------------------------------------------------------------------------
// Pipeline order.

#[tokio::test]
async fn an_unknown_tool_is_an_error_result_naming_similar_tools() {
    let rt = runtime([get_service_status::TOOL, read_service_logs::TOOL]);
    let turn = turn_in(&rt, "s-unknown", Some(alice())).await;
    let result = run_one(&turn, "get_service_stats", json!({ "service": "api" })).await;
    assert!(result.is_error);
    assert_eq!(code(&result), ErrorCode::UnknownTool);
    let text = model_text(&result);
    assert!(text.contains("get_service_stats"), "{text}");
    assert!(text.contains("`get_service_status`"), "{text}");
    // The turn goes on: the model can correct itself in the next step.
    let fixed = run_one(&turn, "get_service_status", json!({ "service": "api" })).await;
    assert!(!fixed.is_error, "{fixed:?}");
}

#[tokio::test]
async fn a_user_only_tool_is_rejected_for_the_model_and_schedules_but_not_the_user() {
    let rt = runtime([wipe_cache::TOOL, get_service_status::TOOL]);
    for caller in [Caller::Model, Caller::Schedule] {
        let session = rt
            .open_session(SessionSpec::new(format!("s-user-only-{caller:?}")).non_interactive())
            .await
            .unwrap();
        let turn = session.begin_turn(Some(alice()), caller).await.unwrap();
        let result = run_one(&turn, "wipe_cache", json!({})).await;
        assert!(result.is_error, "{caller:?}: {result:?}");
        assert_eq!(code(&result), ErrorCode::UnknownTool, "{caller:?}");
        assert_eq!(
            result.output,
            serde_json::to_value(result.error.as_ref().unwrap()).unwrap()
        );
    }
    let session = rt
        .open_session(SessionSpec::new("s-user-only-ui"))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::User)
        .await
        .unwrap();
    let result = run_one(&turn, "wipe_cache", json!({})).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.output, json!(true));
}

#[tokio::test]
async fn invalid_input_lists_every_failing_pointer() {
    let rt = runtime([scale_service::TOOL]);
    let turn = turn_in(&rt, "s-invalid", Some(alice())).await;
    let result = run_one(
        &turn,
        "scale_service",
        json!({ "service": "", "replicas": 50 }),
    )
    .await;
    assert!(result.is_error);
    assert_eq!(code(&result), ErrorCode::InvalidInput);
    let text = model_text(&result);
    assert!(text.contains("/service"), "{text}");
    assert!(text.contains("/replicas"), "{text}");
    assert!(
        text.contains("50 is greater than the maximum of 10"),
        "{text}"
    );
    let details = result.error.as_ref().unwrap().details_value().unwrap();
    let pointers: Vec<&str> = details
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pointer"].as_str().unwrap())
        .collect();
    assert!(
        pointers.contains(&"/service") && pointers.contains(&"/replicas"),
        "{pointers:?}"
    );

    // Arguments that are not JSON fail the same way, without reaching the tool.
    let (results, _) = completed_ending(
        turn.step(vec![ToolCall::new("c2", "scale_service", "{\"service\": ")])
            .await
            .unwrap(),
    );
    assert_eq!(code(&results[0]), ErrorCode::InvalidInput);
}

#[tokio::test]
async fn a_tool_error_reaches_the_model_with_its_message() {
    let rt = runtime([lookup_account::TOOL]);
    let turn = turn_in(&rt, "s-err", Some(alice())).await;
    let result = run_one(&turn, "lookup_account", json!({})).await;
    assert!(result.is_error);
    assert_eq!(code(&result), ErrorCode::ToolFailed);
    assert_eq!(
        model_text(&result),
        "the ledger API returned 404 for `acct-9`; list accounts with `list_accounts` first"
    );
}

#[tokio::test]
async fn a_panicking_tool_is_an_error_and_the_runtime_keeps_running() {
    let rt = runtime([reconcile::TOOL, get_service_status::TOOL]);
    let turn = turn_in(&rt, "s-panic", Some(alice())).await;
    let (results, ends) = completed_ending(
        turn.step(vec![
            call("c1", "reconcile", json!({})),
            call("c2", "get_service_status", json!({ "service": "api" })),
        ])
        .await
        .unwrap(),
    );
    assert!(!ends);
    assert_eq!(code(&results[0]), ErrorCode::ToolPanicked);
    assert!(model_text(&results[0]).contains("the ledger is inconsistent"));
    // The other call of the batch is unaffected, and the next step works.
    assert!(!results[1].is_error);
    let next = run_one(&turn, "get_service_status", json!({ "service": "db" })).await;
    assert_eq!(next.output, json!("db is healthy"));
}

#[tokio::test]
async fn output_not_matching_the_published_schema_is_invalid_output() {
    let rt = runtime([tally::TOOL]);
    let turn = turn_in(&rt, "s-output", Some(alice())).await;
    let bad = run_one(&turn, "tally", json!({ "count": 50 })).await;
    assert!(bad.is_error);
    assert_eq!(code(&bad), ErrorCode::InvalidOutput);
    assert!(model_text(&bad).contains("/count"), "{}", model_text(&bad));
    let good = run_one(&turn, "tally", json!({ "count": 5 })).await;
    assert!(!good.is_error, "{good:?}");
    assert_eq!(good.output, json!({ "count": 5 }));
}

#[tokio::test]
async fn the_model_sees_the_projection_and_the_event_carries_the_raw_output() {
    let rt = runtime([service_detail::TOOL]);
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-projection", Some(alice())).await;
    let result = run_one(&turn, "service_detail", json!({ "service": "payment-api" })).await;
    assert_eq!(
        *result.model(),
        ModelOutput::Text("payment-api is degraded, 6 instances, 0.65% errors".into())
    );
    let raw = json!({
        "service": "payment-api",
        "status": "degraded",
        "instances": 6,
        "error_rate": 0.65,
        "regions": ["eu-west-1", "us-east-1"],
    });
    assert_eq!(result.output, raw);
    let event = drain(&mut events)
        .into_iter()
        .find_map(|e| match e {
            Event::ActionResult { result, .. } => Some(result),
            _ => None,
        })
        .expect("an action.result event");
    assert_eq!(event.output, raw);
    assert_eq!(event.projection, result.projection);
    assert!(
        result.projection.is_some(),
        "a projection is kept beside the output"
    );
}

#[tokio::test]
async fn a_file_over_3_mib_for_the_model_raises_a_warning() {
    let rt = runtime([capture_page::TOOL]);
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-file", Some(alice())).await;
    let warnings = |events: Vec<Event>| -> Vec<(Option<String>, String)> {
        events
            .into_iter()
            .filter_map(|e| match e {
                Event::Warning {
                    call_id, message, ..
                } => Some((call_id, message)),
                _ => None,
            })
            .collect()
    };

    // 4 KiB of base64: no warning.
    let small = run_one(&turn, "capture_page", json!({ "chars": 4096 })).await;
    assert!(!small.is_error);
    assert!(warnings(drain(&mut events)).is_empty());

    // 4.5 Mi base64 characters decode to about 3.4 MiB.
    let (results, _) = completed_ending(
        turn.step(vec![call(
            "big",
            "capture_page",
            json!({ "chars": 4_718_592 }),
        )])
        .await
        .unwrap(),
    );
    assert!(!results[0].is_error);
    let model = results[0].model();
    let ModelOutput::Content(parts) = &*model else {
        panic!("expected content parts")
    };
    assert_eq!(parts.len(), 2);
    let found = warnings(drain(&mut events));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0.as_deref(), Some("big"));
    assert!(found[0].1.contains("image/png"), "{}", found[0].1);
}

/// Runs hanging tool `name` past a 50 ms timeout: the call failed with `Timeout`, and the tool
/// saw itself cancelled when it was dropped.
async fn time_out(tool: &'static toolwright::registry::ToolDescriptor, name: &str) -> Hang {
    let hang = Hang::default();
    let rt = builder([tool])
        .state(hang.clone())
        .options(Options {
            call_timeout: Duration::from_millis(50),
            ..Options::default()
        })
        .build()
        .unwrap();
    let turn = turn_in(&rt, &format!("s-timeout-{name}"), Some(alice())).await;
    let result = run_one(&turn, name, json!({})).await;
    assert!(hang.started.load(Ordering::SeqCst));
    assert!(result.is_error);
    assert_eq!(code(&result), ErrorCode::Timeout);
    assert!(model_text(&result).contains(name));
    assert_eq!(
        *hang.cancelled_at_drop.lock().unwrap(),
        Some(true),
        "the tool is cancelled before it is dropped"
    );
    hang
}

#[tokio::test]
async fn a_call_past_its_timeout_fails_with_timeout_and_its_context_is_cancelled() {
    let hang = time_out(wait_forever::TOOL, "wait_forever").await;
    // The token fired: a task watching it wakes.
    tokio::time::timeout(Duration::from_secs(10), hang.watcher.notified())
        .await
        .expect("the call's cancellation token fires on timeout");
}

/// Waits for an upstream that never answers, and looks at its cancellation only when dropped.
#[tool(effect = read)]
async fn wait_quietly(_: NoInput, ctx: ToolContext, hang: State<Hang>) -> u8 {
    hang_until_dropped(ctx, &hang).await
}

#[tokio::test]
async fn a_timed_out_body_that_never_asked_for_its_token_is_cancelled_when_dropped() {
    // The call's own token is made only when something asks for it: a timeout makes it fired.
    time_out(wait_quietly::TOOL, "wait_quietly").await;
}

/// Runs a step of `calls` on `turn`, cancels the turn once a hanging body started, and returns
/// what the step reported (bounded: a step that does not return fails the test).
async fn cancel_once_started(turn: &Turn, calls: Vec<ToolCall>, hang: &Hang) -> StepOutcome {
    let stepping = {
        let turn = turn.clone();
        tokio::spawn(async move { turn.step(calls).await })
    };
    while !hang.started.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    turn.cancel().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), stepping)
        .await
        .expect("the step returns once cancelled")
        .unwrap()
        .expect("the step reports its cancelled calls")
}

#[tokio::test]
async fn cancelling_a_running_step_cancels_its_calls() {
    let hang = Hang::default();
    let rt = builder([wait_forever::TOOL])
        .state(hang.clone())
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-cancel-running", Some(alice())).await;
    let calls = vec![call("c1", "wait_forever", json!({}))];
    let (results, ends) = completed_ending(cancel_once_started(&turn, calls, &hang).await);
    assert!(!ends);
    assert_eq!(code(&results[0]), ErrorCode::Cancelled);
    assert_eq!(*hang.cancelled_at_drop.lock().unwrap(), Some(true));
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Cancelled);
    let again = turn.step(vec![call("c2", "wait_forever", json!({}))]).await;
    assert!(
        matches!(again, Err(RuntimeError::TurnState { .. })),
        "{again:?}"
    );
}

/// Notes that it started, and ends at once.
#[tool(effect = read)]
async fn note_start(_: NoInput, hang: State<Hang>) -> u8 {
    hang.noted.fetch_add(1, Ordering::SeqCst);
    1
}

// A call waiting for a place among the concurrent calls (`Options::concurrency`) when its turn
// is cancelled never starts: it once got the place the cancelled call gave up and ran its body
// for a cancelled turn.
#[tokio::test]
async fn a_call_waiting_for_a_place_never_starts_once_its_turn_is_cancelled() {
    let hang = Hang::default();
    let rt = builder([wait_forever::TOOL, note_start::TOOL])
        .state(hang.clone())
        .options(Options {
            concurrency: 1,
            ..Options::default()
        })
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-cancel-queued", Some(alice())).await;
    let calls = vec![
        call("c1", "wait_forever", json!({})),
        call("c2", "note_start", json!({})),
    ];
    let (results, _) = completed_ending(cancel_once_started(&turn, calls, &hang).await);
    assert_eq!(code(&results[0]), ErrorCode::Cancelled);
    assert_eq!(code(&results[1]), ErrorCode::Cancelled);
    assert!(model_text(&results[1]).contains("note_start"));
    assert_eq!(
        hang.noted.load(Ordering::SeqCst),
        0,
        "the waiting call never started"
    );
}

/// The calls of one step that meet: each waits until all of them have arrived.
#[derive(Clone)]
struct Meeting(Arc<tokio::sync::Barrier>);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct MeetArgs {
    /// What the call returns once everyone arrived.
    n: u32,
}

/// Waits for the other `meet` calls of its step.
#[tool(effect = read)]
async fn meet(args: MeetArgs, meeting: State<Meeting>) -> u32 {
    meeting.0.0.wait().await;
    args.n
}

// A step's calls run concurrently: calls that wait (here, for each other) run on together while
// calls that end when first polled settle between them, and the results keep the model's order.
// Run one after another, the first `meet` would wait forever.
#[tokio::test]
async fn a_steps_calls_run_concurrently_and_keep_the_models_order() {
    let meeting = Meeting(Arc::new(tokio::sync::Barrier::new(3)));
    let rt = builder([meet::TOOL, get_service_status::TOOL])
        .state(meeting)
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-meet", Some(alice())).await;
    let calls = vec![
        call("c1", "meet", json!({"n": 1})),
        call("c2", "get_service_status", json!({"service": "a"})),
        call("c3", "meet", json!({"n": 3})),
        call("c4", "get_service_status", json!({"service": "b"})),
        call("c5", "meet", json!({"n": 5})),
    ];
    let step = tokio::time::timeout(Duration::from_secs(60), turn.step(calls))
        .await
        .expect("the calls that wait for each other ran together");
    let (results, _) = completed_ending(step.unwrap());
    let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5"]);
    let outputs: Vec<&Value> = results.iter().map(|r| &r.output).collect();
    assert_eq!(
        outputs,
        [
            &json!(1),
            &json!("a is healthy"),
            &json!(3),
            &json!("b is healthy"),
            &json!(5)
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The context.

#[derive(Serialize)]
struct Seen {
    session_id: String,
    turn_id: String,
    parent: Option<String>,
    current: Option<String>,
    initiator: Option<String>,
    caller: Caller,
    call_id: String,
    tool_name: String,
    idempotency_key: String,
    approved: bool,
    approver: Option<String>,
}

fn seen(ctx: &ToolContext) -> Seen {
    Seen {
        session_id: ctx.session_id().to_owned(),
        turn_id: ctx.turn_id().to_owned(),
        parent: ctx.parent().map(str::to_owned),
        current: ctx.current().map(|p| p.principal_id.clone()),
        initiator: ctx.initiator().map(|p| p.principal_id.clone()),
        caller: ctx.caller(),
        call_id: ctx.call_id().to_owned(),
        tool_name: ctx.tool_name().to_owned(),
        idempotency_key: ctx.idempotency_key(),
        approved: ctx.approval().is_some(),
        approver: ctx
            .approval()
            .and_then(|grant| grant.responder.as_ref())
            .map(|p| p.principal_id.clone()),
    }
}

/// Reports what its context says.
#[tool(effect = read, toolset = "probe")]
async fn whoami(_: NoInput, ctx: ToolContext) -> Seen {
    seen(&ctx)
}

fn on_call(cx: &ResponseContext<'_, NoInput>) -> ResponseVerdict {
    if cx.responder.is_some_and(|p| p.has_in("roles", "oncall")) {
        ResponseVerdict::Allowed
    } else {
        ResponseVerdict::rejected("only on-call may answer")
    }
}

/// Reports what its context says, after an on-call engineer approved.
#[tool(effect = write, approval(request = always, response = on_call))]
async fn approved_whoami(_: NoInput, ctx: ToolContext) -> Seen {
    seen(&ctx)
}

#[tokio::test]
async fn the_context_carries_ids_identities_and_the_resolved_name() {
    let rt = runtime([whoami::TOOL, approved_whoami::TOOL]);
    let bob = Principal::user("oidc", "bob");
    let session = rt
        .open_session(SessionSpec::new("s-ctx").initiator(bob.clone()))
        .await
        .unwrap();
    // Alice speaks in Bob's session: she is `current`, he stays the initiator.
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let result = run_one(&turn, "probe__whoami", json!({})).await;
    assert_eq!(
        result.output,
        json!({
            "session_id": "s-ctx",
            "turn_id": turn.id(),
            "parent": null,
            "current": "alice",
            "initiator": "bob",
            "caller": "model",
            "call_id": "c1",
            "tool_name": "probe__whoami",
            "idempotency_key": "s-ctx:c1",
            "approved": false,
            "approver": null,
        })
    );
    assert_eq!(result.tool, "probe__whoami");
}

#[tokio::test]
async fn a_subagent_session_has_its_parent_and_the_subagent_caller() {
    let rt = runtime([whoami::TOOL]);
    let child = rt
        .open_session(
            SessionSpec::new("s-child")
                .parent("s-root")
                .initiator(alice()),
        )
        .await
        .unwrap();
    let turn = child
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let result = run_one(&turn, "probe__whoami", json!({})).await;
    assert_eq!(result.output["parent"], "s-root");
    assert_eq!(result.output["caller"], "subagent");
    assert_eq!(result.output["idempotency_key"], "s-child:c1");
}

#[tokio::test]
async fn an_approved_call_knows_its_approver_apart_from_the_caller() {
    let rt = runtime([approved_whoami::TOOL]);
    let turn = turn_in(&rt, "s-approver", Some(alice())).await;
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![call("c7", "approved_whoami", json!({}))])
        .await
        .unwrap()
    else {
        panic!("expected the call to wait")
    };
    let carol = Principal::user("oidc", "carol").with_attribute("roles", json!(["oncall"]));
    let outcome = rt
        .respond(InputResponse::approve(&requests[0].request_id, Some(carol)))
        .await
        .unwrap();
    let RespondOutcome::Resumed(step) = outcome else {
        panic!("expected the turn to resume, got {outcome:?}")
    };
    let (results, _) = completed_ending(step);
    let out = &results[0].output;
    assert_eq!(out["approved"], true);
    assert_eq!(out["approver"], "carol");
    // Approval is consent, not borrowed identity.
    assert_eq!(out["current"], "alice");
    assert_eq!(out["call_id"], "c7");
    assert_eq!(out["turn_id"], turn.id());
    assert_eq!(out["idempotency_key"], "s-approver:c7");
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ProjectArgs {
    /// Project to report on.
    project: String,
}

#[derive(Serialize)]
struct Report {
    sections: Vec<&'static str>,
}

fn report_phase(_: &ProjectArgs, partial: &Value) -> String {
    partial["phase"].as_str().unwrap_or_default().to_owned()
}

fn report_done(args: &ProjectArgs, report: &Report) -> String {
    format!(
        "{} report ready: {} sections",
        args.project,
        report.sections.len()
    )
}

/// Writes a project report, streaming its progress.
#[tool(
    effect = read,
    label(start = "Writing the {project} report", delta = report_phase, complete = report_done),
)]
async fn write_report(args: ProjectArgs, ctx: ToolContext) -> Report {
    ctx.info(format!("collecting sources for {}", args.project));
    ctx.partial(&json!({ "phase": "collecting", "sections": [] }));
    ctx.partial(&json!({ "phase": "writing", "sections": ["Delivery"] }));
    ctx.warn("the risk register is a week old");
    Report {
        sections: vec!["Delivery", "Risks", "Next"],
    }
}

#[tokio::test]
async fn partials_and_logs_become_events_with_labels() {
    let rt = runtime([write_report::TOOL]);
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-partial", Some(alice())).await;
    let result = run_one(&turn, "write_report", json!({ "project": "storefront" })).await;
    assert!(!result.is_error);
    assert_eq!(
        result.label.as_deref(),
        Some("storefront report ready: 3 sections")
    );
    // The partials never reach the model: only the final output does, held once.
    assert_eq!(
        *result.model(),
        ModelOutput::Json(json!({ "sections": ["Delivery", "Risks", "Next"] }))
    );
    assert_eq!(
        result.projection, None,
        "no copy of the output for the model"
    );

    let events = drain(&mut events);
    let requested: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ActionRequested { label, .. } => Some(label.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(requested, ["Writing the storefront report"]);
    let partials: Vec<(Value, Option<&str>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ActionPartial {
                call_id,
                tool,
                snapshot,
                label,
                ..
            } => {
                assert_eq!((call_id.as_str(), tool.as_str()), ("c1", "write_report"));
                Some((snapshot["phase"].clone(), label.as_deref()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        partials,
        [
            (json!("collecting"), Some("collecting")),
            (json!("writing"), Some("writing"))
        ]
    );
    let logs: Vec<(LogLevel, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ActionLog { level, message, .. } => Some((*level, message.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        logs,
        [
            (LogLevel::Info, "collecting sources for storefront"),
            (LogLevel::Warn, "the risk register is a week old")
        ]
    );
    let json_types: Vec<String> = events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        json_types,
        [
            "turn.started",
            "action.requested",
            "action.log",
            "action.partial",
            "action.partial",
            "action.log",
            "action.result"
        ]
    );
}

#[test]
fn a_build_without_a_store_fails_naming_both_choices() {
    let registry = Registry::from_tools([ledger_balance::TOOL]).unwrap();
    // Refused before anything else is checked: the missing state would fail the build too.
    let error = Runtime::builder(registry).build().unwrap_err();
    assert!(matches!(error, RuntimeError::NoStore), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("SqliteStore::open(") && message.contains("SqliteStore::in_memory()"),
        "{message}"
    );
    assert!(message.contains("lost when the process exits"), "{message}");
}

#[derive(Debug)]
struct Ledger {
    balance_cents: u64,
}

/// The ledger's balance.
#[tool(effect = read)]
async fn ledger_balance(_: NoInput, ledger: State<Ledger>) -> u64 {
    ledger.balance_cents
}

#[tokio::test]
async fn typed_state_reaches_the_tool_and_a_missing_one_fails_the_build() {
    let registry = Registry::from_tools([ledger_balance::TOOL]).unwrap();
    let error = builder_over(registry.clone()).build().unwrap_err();
    let RuntimeError::MissingState { tool, type_name } = &error else {
        panic!("expected MissingState, got {error:?}")
    };
    assert_eq!(tool, "ledger_balance");
    assert!(type_name.ends_with("Ledger"), "{type_name}");
    let message = error.to_string();
    assert!(
        message.contains("ledger_balance") && message.contains("Ledger"),
        "{message}"
    );

    let rt = builder_over(registry)
        .state(Ledger {
            balance_cents: 5_230,
        })
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-state", Some(alice())).await;
    let result = run_one(&turn, "ledger_balance", json!({})).await;
    assert_eq!(result.output, json!(5_230));
}

// ---------------------------------------------------------------------------------------------
// Labels.

#[derive(Deserialize, JsonSchema, ToolInput)]
struct AccountArgs {
    /// The account to sync.
    account: String,
}

/// Syncs one account.
#[tool(effect = write, label(start = "Syncing {account}", complete = "Synced {account}"))]
async fn sync_account(args: AccountArgs) -> String {
    args.account
}

fn blank_label(_: &AccountArgs) -> String {
    "   ".to_owned()
}

/// Syncs every account.
#[tool(effect = write, label(start = blank_label))]
async fn sync_accounts(args: AccountArgs) -> String {
    args.account
}

fn broken_label(args: &AccountArgs) -> String {
    assert!(
        args.account.is_empty(),
        "the label callback fails for `{}`",
        args.account
    );
    String::new()
}

/// Syncs one account's invoices.
#[tool(effect = write, label(start = broken_label))]
async fn sync_invoices(args: AccountArgs) -> String {
    args.account
}

/// Syncs one account's contacts.
#[tool(effect = write)]
async fn sync_contacts(args: AccountArgs) -> String {
    args.account
}

#[tokio::test]
async fn start_labels_come_from_the_template_or_fall_back_to_the_humanized_name() {
    let rt = runtime([
        sync_account::TOOL,
        sync_accounts::TOOL,
        sync_invoices::TOOL,
        sync_contacts::TOOL,
    ]);
    let mut events = rt.subscribe();
    let turn = turn_in(&rt, "s-labels", Some(alice())).await;
    let args = json!({ "account": "acme" });
    let (results, _) = completed_ending(
        turn.step(vec![
            call("c1", "sync_account", args.clone()),
            call("c2", "sync_accounts", args.clone()),
            call("c3", "sync_invoices", args.clone()),
            call("c4", "sync_contacts", args.clone()),
        ])
        .await
        .expect("a failing label callback does not fail the step"),
    );
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    let labels: Vec<(String, String)> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ActionRequested { call_id, label, .. } => Some((call_id, label)),
            _ => None,
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("c1".to_owned(), "Syncing acme".to_owned()),
            ("c2".to_owned(), "Sync accounts".to_owned()),
            ("c3".to_owned(), "Sync invoices".to_owned()),
            ("c4".to_owned(), "Sync contacts".to_owned()),
        ]
    );
    // The complete label is on the result; tools without one have none.
    assert_eq!(results[0].label.as_deref(), Some("Synced acme"));
    assert_eq!(results[3].label, None);
}

// ---------------------------------------------------------------------------------------------
// Ending the turn.

#[derive(Deserialize, JsonSchema, ToolInput)]
struct EmojiArgs {
    /// One emoji.
    emoji: String,
}

/// Reacts to the user's message; the reaction is the whole answer.
#[tool(effect = write, ends_turn)]
async fn react(args: EmojiArgs) -> String {
    args.emoji
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct FailArgs {
    fail: bool,
}

/// Sends the final answer, which may fail.
#[tool(effect = write, ends_turn)]
async fn send_answer(args: FailArgs) -> Result<bool, ToolError> {
    if args.fail {
        Err(ToolError::new("the chat API is down; try again"))
    } else {
        Ok(true)
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PostArgs {
    /// Whether the channel accepts the post.
    accepted: bool,
}

#[derive(Serialize)]
struct Posted {
    posted: bool,
}

fn was_posted(out: &Posted) -> bool {
    out.posted
}

/// Posts to the channel; a successful post ends the turn.
#[tool(effect = write, ends_turn = was_posted)]
async fn post_message(args: PostArgs) -> Posted {
    Posted {
        posted: args.accepted,
    }
}

fn end_tools() -> Runtime {
    runtime([
        react::TOOL,
        send_answer::TOOL,
        post_message::TOOL,
        get_service_status::TOOL,
    ])
}

#[tokio::test]
async fn a_step_ends_the_turn_only_when_every_call_may_end_it_and_all_succeeded() {
    let rt = end_tools();
    let thumbs = json!({ "emoji": "👍" });

    // An ending call next to one that does not end: the turn goes on.
    let turn = turn_in(&rt, "s-end-mixed", Some(alice())).await;
    let (_, ends) = completed_ending(
        turn.step(vec![
            call("c1", "react", thumbs.clone()),
            call("c2", "get_service_status", json!({ "service": "api" })),
        ])
        .await
        .unwrap(),
    );
    assert!(!ends);
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);

    // Two ending calls, one failing: the turn goes on.
    let (_, ends) = completed_ending(
        turn.step(vec![
            call("c3", "react", thumbs.clone()),
            call("c4", "send_answer", json!({ "fail": true })),
        ])
        .await
        .unwrap(),
    );
    assert!(!ends);

    // Every call ends the turn and all succeeded: it ends.
    let mut events = rt.subscribe();
    let (results, ends) = completed_ending(
        turn.step(vec![
            call("c5", "react", thumbs.clone()),
            call("c6", "send_answer", json!({ "fail": false })),
        ])
        .await
        .unwrap(),
    );
    assert!(ends);
    assert!(results.iter().all(|r| r.ends_turn));
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Completed);
    assert!(drain(&mut events).iter().any(|e| matches!(
        e,
        Event::TurnCompleted {
            reason: CompletionReason::EndsTurn,
            ..
        }
    )));
    let after = turn.step(vec![call("c7", "react", thumbs)]).await;
    assert!(
        matches!(after, Err(RuntimeError::TurnState { .. })),
        "{after:?}"
    );
}

#[tokio::test]
async fn ends_turn_by_output_follows_the_output() {
    let rt = end_tools();
    let turn = turn_in(&rt, "s-end-path", Some(alice())).await;
    let (results, ends) = completed_ending(
        turn.step(vec![call(
            "c1",
            "post_message",
            json!({ "accepted": false }),
        )])
        .await
        .unwrap(),
    );
    assert!(!ends);
    assert!(!results[0].ends_turn);
    let (results, ends) = completed_ending(
        turn.step(vec![call(
            "c2",
            "post_message",
            json!({ "accepted": true }),
        )])
        .await
        .unwrap(),
    );
    assert!(ends);
    assert!(results[0].ends_turn);
}

#[tokio::test]
async fn ends_turn_is_ignored_in_subagent_sessions_and_structured_output_turns() {
    let rt = end_tools();
    let thumbs = json!({ "emoji": "👍" });

    let child = rt
        .open_session(SessionSpec::new("s-end-child").parent("s-end-root"))
        .await
        .unwrap();
    let turn = child
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let (_, ends) = completed_ending(
        turn.step(vec![call("c1", "react", thumbs.clone())])
            .await
            .unwrap(),
    );
    assert!(!ends, "a subagent must answer its parent");
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);

    let session = rt
        .open_session(SessionSpec::new("s-end-structured"))
        .await
        .unwrap();
    let turn = session
        .begin_structured_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let (_, ends) = completed_ending(
        turn.step(vec![call("c1", "react", thumbs.clone())])
            .await
            .unwrap(),
    );
    assert!(!ends, "a structured-output turn must produce its output");
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);

    // The same call in a plain top-level turn ends it.
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let (_, ends) = completed_ending(turn.step(vec![call("c1", "react", thumbs)]).await.unwrap());
    assert!(ends);
}

/// Counts how often the runtime ran a tool.
#[derive(Clone, Debug, Default)]
struct Runs(Arc<AtomicUsize>);

/// Finishes the job after approval; success ends the turn.
#[tool(effect = write, ends_turn, approval = always)]
async fn finish_job(_: NoInput, runs: State<Runs>) -> bool {
    let Runs(count) = &*runs;
    count.fetch_add(1, Ordering::SeqCst);
    true
}

#[tokio::test]
async fn an_approved_ending_call_ends_the_turn_when_it_resumes() {
    let runs = Runs::default();
    let rt = builder([finish_job::TOOL])
        .state(runs.clone())
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-end-approved", Some(alice())).await;
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![call("c1", "finish_job", json!({}))])
        .await
        .unwrap()
    else {
        panic!("expected the call to wait")
    };
    let outcome = rt
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(step) = outcome else {
        panic!("{outcome:?}")
    };
    let (_, ends) = completed_ending(step);
    assert!(ends);
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Completed);
}
