//! The operator console in headless Chromium, over the seeds' tools on a SQLite file: sign in
//! through the form; a parked `restart_service` call approved in the browser runs once and
//! the turn's timeline shows its result; a denial with a note reaches the model; a workflow's
//! question is answered by its option and its journal shows the steps. A screenshot of every
//! page is written under `target/console-screenshots/` for a reviewer (`inbox.png` is the
//! README's). `scripts/setup-clients` installs Chromium and chromedriver.

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::broadcast;
use toolwright::console::{Console, ConsoleServer};
use toolwright::mcp::TokenVerifier;
use toolwright::runtime::{Event, Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall};
use toolwright::{Caller, Principal, Registry};

#[path = "../examples/seed/mod.rs"]
#[allow(dead_code)] // reason: the test drives two seed tools; the fakes' other helpers go unused
mod seed;

#[path = "support/browser.rs"]
mod browser;

use browser::Browser;

const TOKEN: &str = "console-test-token";

fn you() -> Principal {
    Principal::user("local", "you")
}

struct OneToken;

impl TokenVerifier for OneToken {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            (token == TOKEN)
                .then(you)
                .ok_or_else(|| "not this console's token".to_owned())
        })
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    server: ConsoleServer,
}

impl Setup {
    async fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let runtime = Runtime::builder(Registry::collect().expect("the seed tools collect"))
            .store(SqliteStore::open(dir.path().join("toolwright-mcp.db")).unwrap())
            .state(seed::ops::OpsBackend::default())
            .state(seed::release::Releases::default())
            .state(seed::treehole::Treehole::default())
            .state(seed::wallet::Wallet::default())
            .build()
            .unwrap();
        let server = Console::new(runtime.clone(), OneToken)
            .serve("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Setup {
            _dir: dir,
            runtime,
            server,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr())
    }

    /// Starts a turn for `you` in a session of its own whose one call to `tool` waits for
    /// approval: the turn and request ids.
    async fn park(
        &self,
        session: &str,
        tool: &str,
        arguments: serde_json::Value,
    ) -> (String, String) {
        let session = self
            .runtime
            .open_session(SessionSpec::new(session).initiator(you()))
            .await
            .unwrap();
        let turn = session
            .begin_turn(Some(you()), Caller::Model)
            .await
            .unwrap();
        match turn
            .step(vec![ToolCall::new("call-1", tool, arguments.to_string())])
            .await
            .unwrap()
        {
            StepOutcome::Waiting { requests, .. } => {
                (turn.id().to_owned(), requests[0].request_id.clone())
            }
            other => panic!("{tool} waits for approval: {other:?}"),
        }
    }
}

/// Signs in through the login form, starting from `path` (the console sends the browser
/// there after).
async fn sign_in(browser: &Browser, setup: &Setup, path: &str) {
    browser.goto(&setup.url(path)).await;
    browser.wait_for_url("/login").await;
    browser.wait_for("input[name=token]").await;
    browser.screenshot("login").await;
    browser.fill("input[name=token]", TOKEN).await;
    browser.submit("form.act").await;
    browser.wait_for_url(path).await;
    browser.wait_for_text("header .who", "you").await;
}

/// How many `action.result` events `events` holds for `tool` in `turn`.
fn results_of(events: &mut broadcast::Receiver<Event>, turn: &str, tool: &str) -> usize {
    let mut count = 0;
    while let Ok(event) = events.try_recv() {
        if let Event::ActionResult {
            turn_id, result, ..
        } = &event
            && turn_id == turn
            && result.tool == tool
        {
            count += 1;
        }
    }
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_in_the_browser_then_the_timeline_shows_the_one_run() {
    let setup = Setup::new().await;
    let mut events = setup.runtime.subscribe();
    let (turn, request) = setup
        .park(
            "ops-chat",
            "restart_service",
            json!({ "service": "payment-api", "reason": "stuck after the 14:00 deploy" }),
        )
        .await;
    let browser = Browser::start().await;
    sign_in(&browser, &setup, "/inbox").await;

    let card = format!("#request-{request}");
    let text = browser.wait_for_text(&card, "Restart payment-api?").await;
    assert!(
        text.contains("stuck after the 14:00 deploy"),
        "the input: {text}"
    );
    assert!(text.contains("Asked by user you (local)"), "{text}");
    browser.screenshot("inbox").await;

    browser
        .click(&format!("{card} button[value=approve]"))
        .await;
    browser.wait_for_url(&format!("/turns/{turn}")).await;
    let notice = browser
        .wait_for_text(".notice", "The turn resumed: restart_service ran")
        .await;
    assert!(notice.contains("restart_service ran"), "{notice}");
    let timeline = browser.text(".timeline").await;
    assert!(timeline.contains("restart_service"), "{timeline}");
    assert!(timeline.contains("finished"), "{timeline}");
    assert!(timeline.contains("payment-api"), "the result: {timeline}");
    assert!(
        timeline.contains("approved by user you (local)"),
        "who settled it: {timeline}"
    );
    let events_seen = browser.text("ol.events").await;
    assert!(events_seen.contains("action.result"), "{events_seen}");
    browser.screenshot("turn").await;

    // The call ran once: one result event, and the inbox no longer offers it.
    assert_eq!(results_of(&mut events, &turn, "restart_service"), 1);
    browser.goto(&setup.url("/inbox")).await;
    browser
        .wait_for_text("main", "Nothing waits on anyone")
        .await;
    assert_eq!(results_of(&mut events, &turn, "restart_service"), 0);

    // Every other page, for the reviewer.
    for (path, name, expect) in [
        ("/sessions", "sessions", "ops-chat"),
        ("/sessions/ops-chat", "session", "Turns"),
        ("/turns", "turns", &*turn),
        (&*format!("/requests/{request}"), "request", "approved by"),
        ("/tasks", "tasks", "Tasks"),
        ("/tools", "tools", "restart_service"),
        ("/tools/restart_service", "tool", "Input schema"),
        ("/connections", "connections", "no remote connection"),
    ] {
        browser.goto(&setup.url(path)).await;
        browser.wait_for_text("main", expect).await;
        browser.screenshot(name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_with_a_note_in_the_browser_reaches_the_model() {
    let setup = Setup::new().await;
    let (turn, request) = setup
        .park(
            "ops-chat",
            "restart_service",
            json!({ "service": "search-api", "reason": "memory climbing since noon" }),
        )
        .await;
    let browser = Browser::start().await;
    sign_in(&browser, &setup, "/inbox").await;
    let card = format!("#request-{request}");
    browser.wait_for_text(&card, "Restart search-api?").await;
    browser
        .fill(
            &format!("{card} textarea[name=note]"),
            "not during the sale",
        )
        .await;
    browser.click(&format!("{card} button[value=deny]")).await;
    browser.wait_for_url(&format!("/turns/{turn}")).await;
    let page = browser.wait_for_text("main", "not during the sale").await;
    assert!(page.contains("cancelled by user you (local)"), "{page}");
    browser.screenshot("denied").await;

    let last = setup
        .runtime
        .turn(&turn)
        .await
        .unwrap()
        .last_results()
        .await
        .unwrap()
        .expect("the denied step closed");
    assert!(last.results[0].is_error, "a denied call does not run");
    let model = serde_json::to_string(&last.results[0].model()).unwrap();
    assert!(
        model.contains("not during the sale"),
        "the model reads the note: {model}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflows_question_is_answered_and_its_journal_shown() {
    let setup = Setup::new().await;
    let (turn, approval) = setup
        .park(
            "release-chat",
            "deploy_service",
            json!({ "service": "payment-api", "environment": "preview", "version": "v2.4.1" }),
        )
        .await;
    let browser = Browser::start().await;
    sign_in(&browser, &setup, "/inbox").await;
    let card = format!("#request-{approval}");
    browser
        .wait_for_text(&card, "Deploy payment-api@v2.4.1 to preview?")
        .await;
    browser
        .click(&format!("{card} button[value=approve]"))
        .await;
    browser.wait_for_url(&format!("/turns/{turn}")).await;
    // The body planned, then asked: its question is on the turn's timeline with its options.
    let question = browser
        .wait_for_text(".timeline", "Start the deploy?")
        .await;
    assert!(
        question.contains("roll"),
        "the plan step's value: {question}"
    );
    browser.screenshot("question").await;
    browser
        .click(".timeline button[value='Start deploy']")
        .await;
    browser.wait_for_url(&format!("/turns/{turn}")).await;
    browser.wait_for_text(".notice", "Recorded").await;
    // Now it sleeps on its durable timer; the journal holds the plan, the answer and the change.
    let journal = format!("/journals/{turn}/call-1");
    browser.goto(&setup.url(&journal)).await;
    let entries = browser.wait_for_text("table.journal", "apply").await;
    for name in ["plan", "apply"] {
        assert!(entries.contains(name), "{name} in the journal: {entries}");
    }
    browser.screenshot("journal").await;
    let status = tokio::time::timeout(Duration::from_secs(10), async {
        setup
            .runtime
            .turn(&turn)
            .await
            .unwrap()
            .record()
            .await
            .unwrap()
            .status
    })
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(status).unwrap(),
        "waiting",
        "the body sleeps on its timer"
    );
}
