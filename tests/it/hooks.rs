//! Hooks and webhooks: workflow bodies that wait on an outside system, resumed by a delivery
//! to the hook's token from any process (or over HTTP), checked against the payload's schema,
//! recorded once, kept when it arrives before the wait, raced by a deadline on a test clock.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    EntryKind, HookRefused, InputResponse, RequestKind, RespondOutcome, Runtime, RuntimeError,
    SessionSpec, SqliteStore, StepOutcome, TaskStatus, Turn,
};
use toolwright::{Caller, HookEvent, Registry};

use crate::support::clock::ManualClock;
use crate::support::{alice, call, completed, waiting};

#[derive(Debug, Deserialize, JsonSchema)]
struct Payment {
    amount: u64,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Order {
    /// The order, which names the hook.
    order: String,
}

/// What each order's body handed out (its hook's token or URL), and how often each order
/// shipped.
fn outbox() -> &'static Mutex<HashMap<String, String>> {
    static OUTBOX: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    OUTBOX.get_or_init(Mutex::default)
}

fn shipped() -> &'static Mutex<HashMap<String, u32>> {
    static SHIPPED: OnceLock<Mutex<HashMap<String, u32>>> = OnceLock::new();
    SHIPPED.get_or_init(Mutex::default)
}

fn handed_out(order: &str) -> String {
    outbox()
        .lock()
        .unwrap()
        .get(order)
        .cloned()
        .expect("handed out")
}

/// The body both entries share: a hook, its token handed out in a step, a `sleep` first when
/// the order says so, then a wait of one minute; shipping happens once, after the payment.
async fn pay(ctx: &WorkflowContext, order: &str, url: bool) -> Result<String, ToolError> {
    let hook = if url {
        ctx.webhook::<Payment>(format!("payment-{order}")).await?
    } else {
        ctx.hook::<Payment>(format!("payment-{order}")).await?
    };
    let address = hook.url().unwrap_or(hook.token()).to_owned();
    let key = order.to_owned();
    ctx.step("hand-out", async move {
        outbox().lock().unwrap().insert(key, address);
        Ok(())
    })
    .await?;
    if order.starts_with("slow") {
        ctx.sleep(Duration::from_secs(10)).await?;
    }
    match ctx.wait_hook_for(&hook, Duration::from_secs(60)).await? {
        HookEvent::Received(payment) => {
            let key = order.to_owned();
            ctx.step("ship", async move {
                *shipped().lock().unwrap().entry(key).or_default() += 1;
                Ok(())
            })
            .await?;
            Ok(format!("paid {}", payment.amount))
        }
        HookEvent::Timeout => Ok("timeout".into()),
        HookEvent::Cancelled => Ok("cancelled".into()),
    }
}

/// Waits for the payment inside the turn.
#[tool(effect = write, workflow = execute)]
async fn await_payment(args: Order, ctx: WorkflowContext) -> Result<String, ToolError> {
    pay(&ctx, &args.order, false).await
}

/// Waits for the payment on a task of its own.
#[tool(effect = write, workflow = task)]
async fn await_payment_later(args: Order, ctx: WorkflowContext) -> Result<String, ToolError> {
    pay(&ctx, &args.order, false).await
}

/// Waits for the payment at a URL, on a task of its own.
#[tool(effect = write, workflow = task)]
async fn await_webhook(args: Order, ctx: WorkflowContext) -> Result<String, ToolError> {
    pay(&ctx, &args.order, true).await
}

const START: u64 = 5_000_000;

fn registry() -> Registry {
    Registry::from_tools([
        await_payment::TOOL,
        await_payment_later::TOOL,
        await_webhook::TOOL,
    ])
    .unwrap()
}

fn runtime(path: &Path, clock: &ManualClock) -> Runtime {
    Runtime::builder(registry())
        .store(SqliteStore::open(path).unwrap())
        .options(clock.options())
        .build()
        .unwrap()
}

async fn turn(runtime: &Runtime, session: &str) -> Turn {
    runtime
        .open_session(SessionSpec::new(session).initiator(alice()))
        .await
        .unwrap()
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap()
}

/// Waits until the only task of `session` has `status`.
async fn task_reaches(runtime: &Runtime, session: &str, status: TaskStatus) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(task) = runtime.tasks(session).await.unwrap().into_iter().next()
            && task.status == status
        {
            return task.id;
        }
        assert!(std::time::Instant::now() < deadline, "never {status:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn refused(result: Result<toolwright::runtime::HookDelivery, RuntimeError>) -> HookRefused {
    match result {
        Err(RuntimeError::Hook(refused)) => refused,
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_turn_waits_on_a_hook_and_a_delivery_from_another_process_resumes_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let clock = ManualClock::at(START);
    let first = runtime(&path, &clock);
    let turn = turn(&first, "hooked").await;
    let (_, requests) = waiting(
        turn.step(vec![call("c1", "await_payment", json!({ "order": "o1" }))])
            .await
            .unwrap(),
    );
    let request = &requests[0];
    assert_eq!(request.kind, RequestKind::Hook);
    assert_eq!(request.deadline_ms, Some(START + 60_000));
    assert!(request.prompt.contains("payment-o1"), "{}", request.prompt);
    let token = handed_out("o1");
    // The request names the hook by its id, never by its secret.
    let id = request.input.as_ref().unwrap()["hook"]["id"]
        .as_str()
        .unwrap();
    assert!(!serde_json::to_string(&requests).unwrap().contains(&token));
    // A person cannot answer a hook's wait.
    let person = InputResponse::approve(&request.request_id, Some(alice()));
    let RespondOutcome::Rejected { reason } = first.respond(person).await.unwrap() else {
        panic!("a person settled a hook's wait");
    };
    assert!(reason.contains("resume_hook"), "{reason}");
    drop(first);

    // Another process on the same store delivers.
    let second = runtime(&path, &clock);
    let invalid = refused(
        second
            .resume_hook(&token, json!({ "amount": "thirty" }))
            .await,
    );
    let HookRefused::Invalid { problems, .. } = &invalid else {
        panic!("{invalid:?}");
    };
    assert!(problems.contains("/amount"), "{problems}");
    assert_eq!(
        refused(
            second
                .resume_hook("twh_not-a-token", json!({ "amount": 1 }))
                .await
        ),
        HookRefused::Unknown
    );
    let delivered = second
        .resume_hook(&token, json!({ "amount": 30 }))
        .await
        .unwrap();
    assert_eq!(delivered.hook_id, id);
    assert_eq!(delivered.name, "payment-o1");
    let Some(RespondOutcome::Resumed(StepOutcome::Completed { results, .. })) = delivered.outcome
    else {
        panic!("{delivered:?}");
    };
    assert_eq!(results[0].output, json!("paid 30"));
    assert_eq!(shipped().lock().unwrap()["o1"], 1);
    // Journaled: a second delivery is refused, and the run's journal holds the wait.
    assert!(matches!(
        refused(second.resume_hook(&token, json!({ "amount": 31 })).await),
        HookRefused::Delivered { .. }
    ));
    let journal = second
        .store()
        .journal(&format!("{}/c1", turn.id()))
        .await
        .unwrap();
    let wait = journal
        .iter()
        .find(|e| e.kind == EntryKind::HookWait)
        .unwrap();
    assert_eq!(
        wait.value,
        json!({ "status": "received", "payload": { "amount": 30 } })
    );
    let made = journal.iter().find(|e| e.kind == EntryKind::Hook).unwrap();
    assert_eq!(made.value["id"], json!(id));
    assert!(
        second.wake_due().await.unwrap().is_empty(),
        "no deadline left"
    );
    assert_eq!(shipped().lock().unwrap()["o1"], 1, "shipped once");
}

#[tokio::test]
async fn a_delivery_before_the_wait_is_kept_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(START);
    let runtime = runtime(&dir.path().join("store.db"), &clock);
    let turn = turn(&runtime, "early-delivery").await;
    completed(
        turn.step(vec![call(
            "c1",
            "await_payment_later",
            json!({ "order": "slow-2" }),
        )])
        .await
        .unwrap(),
    );
    // The body sleeps between handing the token out and waiting.
    task_reaches(
        &runtime,
        "early-delivery",
        TaskStatus::Sleeping {
            until_ms: START + 10_000,
        },
    )
    .await;
    let delivered = runtime
        .resume_hook(&handed_out("slow-2"), json!({ "amount": 7 }))
        .await
        .unwrap();
    assert_eq!(delivered.outcome, None, "nobody waits yet: kept");
    clock.advance(10_000);
    runtime.wake_due().await.unwrap();
    let results = turn
        .wait_task_results(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(results[0].result.output, json!("paid 7"));
    assert_eq!(shipped().lock().unwrap()["slow-2"], 1);
}

#[tokio::test]
async fn a_wait_times_out_at_its_deadline_and_a_hook_of_an_ended_run_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let clock = ManualClock::at(START);
    let runtime = runtime(&path, &clock);
    let turn = turn(&runtime, "late").await;
    completed(
        turn.step(vec![call(
            "c1",
            "await_payment_later",
            json!({ "order": "o3" }),
        )])
        .await
        .unwrap(),
    );
    task_reaches(&runtime, "late", TaskStatus::Waiting).await;
    clock.advance(59_999);
    runtime.wake_due().await.unwrap();
    assert_eq!(
        runtime.tasks("late").await.unwrap()[0].status,
        TaskStatus::Waiting
    );
    clock.advance(1);
    runtime.wake_due().await.unwrap();
    let results = turn
        .wait_task_results(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(results[0].result.output, json!("timeout"));
    let closed = refused(
        runtime
            .resume_hook(&handed_out("o3"), json!({ "amount": 1 }))
            .await,
    );
    assert!(
        matches!(&closed, HookRefused::Closed { ended, .. } if ended.contains("ended")),
        "{closed:?}"
    );
    assert!(
        closed.to_string().contains("nothing would read"),
        "{closed}"
    );
    assert!(!shipped().lock().unwrap().contains_key("o3"));
}

#[tokio::test]
async fn cancelling_the_turn_withdraws_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(START);
    let runtime = runtime(&dir.path().join("store.db"), &clock);
    let turn = turn(&runtime, "cancelled").await;
    waiting(
        turn.step(vec![call("c1", "await_payment", json!({ "order": "o4" }))])
            .await
            .unwrap(),
    );
    turn.cancel().await.unwrap();
    let closed = refused(
        runtime
            .resume_hook(&handed_out("o4"), json!({ "amount": 1 }))
            .await,
    );
    assert!(matches!(closed, HookRefused::Closed { .. }), "{closed:?}");
}

#[tokio::test]
async fn a_webhook_is_delivered_over_http_with_its_token_as_the_only_secret() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(START);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/hooks", listener.local_addr().unwrap());
    let runtime = Runtime::builder(registry())
        .store(SqliteStore::open(dir.path().join("store.db")).unwrap())
        .options(clock.options())
        .webhook_url(&base)
        .build()
        .unwrap();
    let app = axum::Router::new().nest("/hooks", toolwright::mcp::webhook_router(runtime.clone()));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let turn = turn(&runtime, "webhook").await;
    completed(
        turn.step(vec![call("c1", "await_webhook", json!({ "order": "o5" }))])
            .await
            .unwrap(),
    );
    task_reaches(&runtime, "webhook", TaskStatus::Waiting).await;
    let url = handed_out("o5");
    assert!(url.starts_with(&format!("{base}/twh_")), "{url}");
    let post = |url: String, body: &'static str| post_json(url, body);
    let (status, body) = post(url.clone(), "not json").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = post(url.clone(), r#"{"amount": -1}"#).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("/amount"),
        "{body}"
    );
    let (status, _) = post(format!("{base}/twh_unknown"), r#"{"amount": 1}"#).await;
    assert_eq!(status, 404);
    let (status, body) = post(url.clone(), r#"{"amount": 12}"#).await;
    assert_eq!(
        (status, body),
        (202, json!({ "status": "delivered", "hook": "payment-o5" }))
    );
    let (status, _) = post(url.clone(), r#"{"amount": 12}"#).await;
    assert_eq!(status, 409, "a second delivery is refused");
    let results = turn
        .wait_task_results(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(results[0].result.output, json!("paid 12"));
    server.abort();
}

#[tokio::test]
async fn a_webhook_needs_the_runtimes_url() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(START);
    let runtime = runtime(&dir.path().join("store.db"), &clock);
    let turn = turn(&runtime, "no-url").await;
    completed(
        turn.step(vec![call("c1", "await_webhook", json!({ "order": "o6" }))])
            .await
            .unwrap(),
    );
    let results = turn
        .wait_task_results(Duration::from_secs(20))
        .await
        .unwrap();
    let error = results[0].result.error.as_ref().unwrap();
    assert!(error.message().contains("webhook_url"), "{error:?}");
    let refused = Runtime::builder(registry())
        .store(SqliteStore::in_memory().unwrap())
        .webhook_url("ftp://example.com/hooks")
        .build()
        .unwrap_err();
    assert!(
        refused.to_string().contains("not an http(s) URL"),
        "{refused}"
    );
}

/// A plain HTTP/1.1 `POST` of `body` to `url` (an `http://host:port/path` on loopback): the
/// status and the JSON answer.
async fn post_json(url: String, body: &str) -> (u16, serde_json::Value) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer[9..12].parse().unwrap();
    let (_, json) = answer.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(json).unwrap())
}
