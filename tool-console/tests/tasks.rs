//! Workflow tasks in the console: a task's question in the inbox, answered with an option
//! through the form (the task runs on and its journal shows its steps), and a parked task
//! cancelled from its page (its body's cleanup runs, its question is revoked); a question whose
//! deadline no HTTP date can say still shows.

use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::console::{Console, ConsoleServer};
use toolwright::mcp::TokenVerifier;
use toolwright::prelude::*;
use toolwright::runtime::{
    Options, Runtime, SessionSpec, SqliteStore, StepOutcome, TaskRecord, TaskStatus, ToolCall,
};
use toolwright::{Caller, Principal};

mod support;

use support::{client, get, post, sign_in};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct MigrateArgs {
    /// The table.
    table: String,
    /// How long the question stays open, in seconds (none: until answered).
    #[serde(default)]
    wait_secs: Option<u64>,
}

/// Copies a table, asks before switching over, and undoes the copy when cancelled.
#[tool(effect = write, workflow = task)]
async fn migrate(args: MigrateArgs, ctx: WorkflowContext) -> Result<String, ToolError> {
    ctx.step("copy", async { Ok(format!("copied {}", args.table)) })
        .await?;
    let mut question = AskRequest::new(format!("Copied {}. Switch over?", args.table))
        .option(AskOption::new("switch", "Switch"))
        .option(AskOption::new("keep", "Keep the old table"));
    if let Some(secs) = args.wait_secs {
        question = question.timeout(Duration::from_secs(secs));
    }
    let go = ctx.ask(question).await?;
    if matches!(go, AskAnswer::Cancelled) {
        ctx.step("undo-copy", async { Ok(true) }).await?;
        return Err(ToolError::new("cancelled"));
    }
    let switched = go.chose("switch");
    ctx.step("switch", async { Ok(switched) }).await?;
    Ok(if switched { "switched" } else { "kept" }.to_owned())
}

struct Alice;

impl TokenVerifier for Alice {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            (token == "alice-token")
                .then(alice)
                .ok_or_else(|| "unknown token".to_owned())
        })
    }
}

fn alice() -> Principal {
    Principal::user("test", "alice")
}

async fn start(dir: &tempfile::TempDir) -> (Runtime, ConsoleServer) {
    let runtime = Runtime::builder(Registry::from_tools([migrate::TOOL]).unwrap())
        .store(SqliteStore::open(dir.path().join("tasks.db")).unwrap())
        .options(Options {
            task_cleanup: Duration::from_secs(5),
            ..Options::default()
        })
        .build()
        .unwrap();
    let server = Console::new(runtime.clone(), Alice)
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (runtime, server)
}

/// Starts a `migrate` task for alice and waits until it asks its question: the task.
async fn parked_task(runtime: &Runtime, table: &str) -> TaskRecord {
    parked_task_with(runtime, table, serde_json::json!({ "table": table })).await
}

/// [`parked_task`] with the `migrate` call's `input`, in a session named after `table`.
async fn parked_task_with(runtime: &Runtime, table: &str, input: serde_json::Value) -> TaskRecord {
    let session = runtime
        .open_session(SessionSpec::new(format!("s-{table}")).initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let outcome = turn
        .step(vec![ToolCall::new("c1", "migrate", input.to_string())])
        .await
        .unwrap();
    assert!(
        matches!(outcome, StepOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let task = turn.open_tasks().await.unwrap().remove(0);
    wait_for(runtime, &task.id, |t| t.status == TaskStatus::Waiting).await
}

/// The task once `done` holds for it (bounded: a task that never gets there fails the test).
async fn wait_for(runtime: &Runtime, id: &str, done: impl Fn(&TaskRecord) -> bool) -> TaskRecord {
    for _ in 0..500 {
        let task = runtime.task(id).await.unwrap();
        if done(&task) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "task {id} never got there: {:?}",
        runtime.task(id).await.unwrap().status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_question_is_answered_from_the_inbox() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, server) = start(&dir).await;
    let task = parked_task(&runtime, "orders").await;
    let question = task.requests[0].request_id.clone();
    let (cookie, csrf) = sign_in(server.addr(), "alice-token").await;

    let inbox = get(server.addr(), &cookie, "/inbox").await;
    assert!(inbox.contains("Copied orders. Switch over?"), "{inbox}");
    assert!(inbox.contains(&format!("/tasks/{}", task.id)), "{inbox}");
    assert!(
        inbox.contains("value=\"Switch\""),
        "the options as buttons: {inbox}"
    );

    let response = client()
        .post(format!(
            "http://{}/requests/{question}/respond",
            server.addr()
        ))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str()), ("option", "Switch")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        response.headers()["location"],
        format!("/tasks/{}", task.id),
        "on to the task the answer moved"
    );
    let done = wait_for(&runtime, &task.id, |t| t.status == TaskStatus::Finished).await;
    assert_eq!(done.calls[0].result.as_ref().unwrap().output, "switched");

    let page = get(server.addr(), &cookie, &format!("/tasks/{}", task.id)).await;
    for step in ["copy", "switch"] {
        assert!(
            page.contains(&format!("<code>{step}</code>")),
            "step {step} in the journal: {page}"
        );
    }
    assert!(page.contains("badge finished"), "{page}");
    assert!(
        !page.contains("Cancel this task"),
        "a finished task offers no cancel: {page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_task_is_cancelled_with_its_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, server) = start(&dir).await;
    let task = parked_task(&runtime, "invoices").await;
    let (cookie, csrf) = sign_in(server.addr(), "alice-token").await;

    let page = get(server.addr(), &cookie, &format!("/tasks/{}", task.id)).await;
    assert!(page.contains("Cancel this task"), "{page}");
    let status = post(
        server.addr(),
        &cookie,
        &format!("/tasks/{}/cancel", task.id),
        &[("csrf", &csrf)],
        None,
    )
    .await
    .status();
    assert_eq!(status, StatusCode::SEE_OTHER);

    let after = wait_for(&runtime, &task.id, |t| t.status.is_over()).await;
    assert_eq!(after.status, TaskStatus::Cancelled);
    let page = get(server.addr(), &cookie, &format!("/tasks/{}", task.id)).await;
    assert!(page.contains("was cancelled"), "the notice: {page}");
    assert!(
        page.contains("<code>undo-copy</code>"),
        "the cleanup's step: {page}"
    );
    assert!(
        !page.contains("value=\"Switch\""),
        "the question is revoked: {page}"
    );
    let inbox = get(server.addr(), &cookie, "/inbox").await;
    assert!(!inbox.contains("Copied invoices"), "{inbox}");
}

// A tool may take a question's timeout from its arguments, and a model may ask for any: the
// deadline (saturated at the largest millisecond) is past what an HTTP date can say, and the
// pages showing it once panicked while the question was open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_open_past_the_year_9999_still_shows() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, server) = start(&dir).await;
    let input = serde_json::json!({ "table": "forever", "wait_secs": u64::MAX });
    let task = parked_task_with(&runtime, "forever", input).await;
    assert_eq!(task.requests[0].deadline_ms, Some(u64::MAX));
    let (cookie, _) = sign_in(server.addr(), "alice-token").await;
    for path in ["/inbox".to_owned(), format!("/tasks/{}", task.id)] {
        let page = get(server.addr(), &cookie, &path).await;
        assert!(
            page.contains("Copied forever. Switch over?"),
            "{path}: {page}"
        );
        assert!(
            page.contains("expires after the year 9999"),
            "{path}: {page}"
        );
    }
}
