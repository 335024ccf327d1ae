//! The console over real HTTP, on a SQLite file: sign-in, CSRF and origin checks, who sees a
//! request's input, approve and deny through the forms (the call runs once; the note reaches
//! the model), first answer wins, bearer-token JSON, pages bounded by the store's listings,
//! cancelling a turn, and the console mounted under a path of a host's router.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use reqwest::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolwright::console::{Console, ConsoleServer};
use toolwright::mcp::{TokenError, TokenVerifier, VerifiedToken};
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall};
use toolwright::{Caller, Principal};

mod support;

use support::{client, get, post, sign_in};

/// The services `restart` ran for, in order: each test parks calls for services of its own,
/// so it counts its own runs while the others run in parallel.
static RESTARTED: Mutex<Vec<String>> = Mutex::new(Vec::new());
static SESSIONS: AtomicUsize = AtomicUsize::new(0);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RestartArgs {
    /// The service.
    service: String,
    /// The operator's one-time code.
    #[toolwright(sensitive)]
    code: String,
}

#[derive(Serialize, JsonSchema)]
struct Restarted {
    service: String,
}

/// Restarts a service.
#[tool(effect = write, approval(request = always, prompt = "Restart {service}?"))]
async fn restart(args: RestartArgs) -> Restarted {
    assert_eq!(
        args.code, "otp-4711",
        "the tool gets the real sensitive value"
    );
    RESTARTED.lock().unwrap().push(args.service.clone());
    Restarted {
        service: args.service,
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct StatusArgs {
    /// The service.
    service: String,
}

/// Tells whether a service is up.
#[tool(effect = read)]
async fn status(args: StatusArgs) -> String {
    format!("{} is up", args.service)
}

/// Tokens `alice-token` and `bob-token`.
struct Tokens;

impl TokenVerifier for Tokens {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            match token {
                "alice-token" => Ok(alice()),
                "bob-token" => Ok(Principal::user("test", "bob")),
                _ => Err("unknown token".into()),
            }
        })
    }
}

/// Tokens of one identity provider for two resources: `op-token` for the console with its
/// operator scope, `mcp-token` for the MCP server, `viewer-token` for the console without the
/// scope.
struct Provider;

impl TokenVerifier for Provider {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            self.verify_token(token)
                .await
                .map(|v| v.principal().clone())
                .map_err(|e| e.to_string())
        })
    }

    fn verify_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
        Box::pin(async move {
            let carol = VerifiedToken::new(Principal::user("sso", "carol"));
            match token {
                "op-token" => Ok(carol.audience("console").scopes(["console:operate"])),
                "mcp-token" => Ok(carol.audience("https://mcp.example/mcp").scopes(["tools"])),
                "viewer-token" => Ok(carol.audience("console")),
                _ => Err(TokenError::invalid("unknown token")),
            }
        })
    }
}

/// How many times `restart` ran for `service`.
fn runs(service: &str) -> usize {
    RESTARTED
        .lock()
        .unwrap()
        .iter()
        .filter(|s| *s == service)
        .count()
}

fn alice() -> Principal {
    Principal::user("test", "alice")
}

struct Setup {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    server: ConsoleServer,
}

impl Setup {
    async fn new(page_size: usize) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::from_tools([restart::TOOL, status::TOOL]).unwrap();
        let runtime = Runtime::builder(registry)
            .store(SqliteStore::open(dir.path().join("console.db")).unwrap())
            .build()
            .unwrap();
        let server = Console::new(runtime.clone(), Tokens)
            .page_size(page_size)
            .serve("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Setup {
            _dir: dir,
            runtime,
            server,
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr())
    }

    /// Parks one `restart` call for alice: its turn and request ids.
    async fn park(&self, service: &str) -> (String, String) {
        let session = self
            .runtime
            .open_session(
                SessionSpec::new(format!("s{}", SESSIONS.fetch_add(1, Ordering::SeqCst)))
                    .initiator(alice()),
            )
            .await
            .unwrap();
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let arguments = serde_json::json!({ "service": service, "code": "otp-4711" });
        match turn
            .step(vec![ToolCall::new("c1", "restart", arguments.to_string())])
            .await
            .unwrap()
        {
            StepOutcome::Waiting { requests, .. } => {
                (turn.id().to_owned(), requests[0].request_id.clone())
            }
            other => panic!("the call should wait for approval: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_takes_a_token_the_verifier_accepts() {
    let setup = Setup::new(50).await;
    let response = client().get(setup.url("/inbox")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/login?next=%2Finbox");

    let refused = client()
        .post(setup.url("/login"))
        .form(&[("token", "wrong")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("That token was refused")
    );

    // A `next` pointing at another site is not followed, also where a browser would make it
    // one by dropping a tab or a newline.
    for next in [
        "//evil.example/x",
        "/\t/evil.example",
        "/\n/evil.example",
        "/ /evil",
    ] {
        let response = client()
            .post(setup.url("/login"))
            .form(&[("token", "alice-token"), ("next", next)])
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["location"], "/", "{next:?}");
    }

    let (cookie, csrf) = sign_in(setup.addr(), "alice-token").await;
    let inbox = get(setup.addr(), &cookie, "/inbox").await;
    assert!(inbox.contains("Signed in as"), "{inbox}");
    assert!(inbox.contains("alice"), "{inbox}");

    // Signing out needs the CSRF token too, and ends the session.
    let response = post(setup.addr(), &cookie, "/logout", &[("csrf", &csrf)], None).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let response = client()
        .get(setup.url("/inbox"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "signed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_those_who_may_answer_see_the_input_and_the_form() {
    let setup = Setup::new(50).await;
    let (turn, request) = setup.park("payments-api").await;

    let (alice_cookie, _) = sign_in(setup.addr(), "alice-token").await;
    let page = get(setup.addr(), &alice_cookie, "/inbox").await;
    assert!(page.contains(&request), "{page}");
    assert!(page.contains("Restart payments-api?"), "the prompt: {page}");
    assert!(
        page.contains("[redacted]"),
        "the sensitive field, redacted: {page}"
    );
    assert!(
        !page.contains("otp-4711"),
        "never the sensitive value: {page}"
    );
    assert!(
        page.contains("value=\"approve\""),
        "alice may approve: {page}"
    );

    let (bob_cookie, _) = sign_in(setup.addr(), "bob-token").await;
    let page = get(setup.addr(), &bob_cookie, "/inbox").await;
    assert!(page.contains(&request), "bob sees that it waits: {page}");
    assert!(page.contains("restart"), "and on which tool: {page}");
    assert!(page.contains("alice"), "and who asked: {page}");
    assert!(!page.contains("payments-api"), "not the input: {page}");
    assert!(
        !page.contains("Restart payments-api?"),
        "nor the prompt: {page}"
    );
    assert!(!page.contains("value=\"approve\""), "nor a form: {page}");
    assert!(page.contains("You may not answer this"), "{page}");
    let mine = get(setup.addr(), &bob_cookie, "/inbox?mine=1").await;
    assert!(!mine.contains(&request), "not waiting on bob: {mine}");
    assert!(mine.contains("Nothing on this page waits on you"), "{mine}");
    let mine = get(setup.addr(), &alice_cookie, "/inbox?mine=1").await;
    assert!(mine.contains(&request), "waiting on alice: {mine}");
    // The turn page hides the waiting call's input from bob as well.
    let page = get(setup.addr(), &bob_cookie, &format!("/turns/{turn}")).await;
    assert!(!page.contains("payments-api"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_without_the_csrf_token_or_from_another_site_are_refused() {
    let setup = Setup::new(50).await;
    let (turn, request) = setup.park("search-api").await;
    let (cookie, csrf) = sign_in(setup.addr(), "alice-token").await;
    let path = format!("/requests/{request}/respond");

    let missing = post(
        setup.addr(),
        &cookie,
        &path,
        &[("decision", "approve")],
        None,
    )
    .await;
    assert_eq!(missing.status(), StatusCode::FORBIDDEN);
    let wrong = post(
        setup.addr(),
        &cookie,
        &path,
        &[("decision", "approve"), ("csrf", "forged")],
        None,
    )
    .await;
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let cross_site = post(
        setup.addr(),
        &cookie,
        &path,
        &[("decision", "approve"), ("csrf", &csrf)],
        Some("https://evil.example"),
    )
    .await;
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    let record = setup
        .runtime
        .turn(&turn)
        .await
        .unwrap()
        .record()
        .await
        .unwrap();
    assert!(
        record.request(&request).unwrap().is_pending(),
        "nothing was answered"
    );
    assert_eq!(runs("search-api"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_runs_the_call_once_and_the_first_answer_wins() {
    let setup = Setup::new(50).await;
    let (turn, request) = setup.park("billing-api").await;
    let (cookie, csrf) = sign_in(setup.addr(), "alice-token").await;
    let path = format!("/requests/{request}/respond");
    let origin = setup.url("");

    let (bob_cookie, bob_csrf) = sign_in(setup.addr(), "bob-token").await;
    let refused = post(
        setup.addr(),
        &bob_cookie,
        &path,
        &[("decision", "approve"), ("csrf", &bob_csrf)],
        None,
    )
    .await;
    assert_eq!(refused.status(), StatusCode::SEE_OTHER, "back to the inbox");
    assert_eq!(refused.headers()["location"], "/inbox");
    let inbox = get(setup.addr(), &bob_cookie, "/inbox").await;
    assert!(inbox.contains("Not accepted"), "bob is told why: {inbox}");

    let approved = post(
        setup.addr(),
        &cookie,
        &path,
        &[("decision", "approve"), ("csrf", &csrf), ("note", "")],
        Some(&origin),
    )
    .await;
    assert_eq!(approved.status(), StatusCode::SEE_OTHER);
    assert_eq!(approved.headers()["location"], format!("/turns/{turn}"));
    assert_eq!(runs("billing-api"), 1, "ran once");
    let page = get(setup.addr(), &cookie, &format!("/turns/{turn}")).await;
    assert!(
        page.contains("The turn resumed: restart ran"),
        "the notice: {page}"
    );
    assert!(
        page.contains("billing-api"),
        "the result on the timeline: {page}"
    );
    assert!(page.contains("action.result"), "and its event: {page}");

    let again = post(
        setup.addr(),
        &cookie,
        &path,
        &[("decision", "approve"), ("csrf", &csrf)],
        None,
    )
    .await;
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    let inbox = get(setup.addr(), &cookie, "/inbox").await;
    assert!(inbox.contains("already settled"), "{inbox}");
    assert_eq!(runs("billing-api"), 1, "still once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_with_a_note_reaches_the_model() {
    let setup = Setup::new(50).await;
    let (turn, request) = setup.park("ledger-api").await;
    let (cookie, csrf) = sign_in(setup.addr(), "alice-token").await;
    let denied = post(
        setup.addr(),
        &cookie,
        &format!("/requests/{request}/respond"),
        &[
            ("decision", "deny"),
            ("csrf", &csrf),
            ("note", "not during the quarter close"),
        ],
        None,
    )
    .await;
    assert_eq!(denied.status(), StatusCode::SEE_OTHER);
    assert_eq!(runs("ledger-api"), 0, "a denied call never runs");
    let last = setup
        .runtime
        .turn(&turn)
        .await
        .unwrap()
        .last_results()
        .await
        .unwrap()
        .expect("the step closed");
    let model_sees = serde_json::to_string(&last.results[0].model()).unwrap();
    assert!(
        model_sees.contains("not during the quarter close"),
        "the note is in what the model gets: {model_sees}"
    );
    let page = get(setup.addr(), &cookie, &format!("/turns/{turn}")).await;
    assert!(page.contains("not during the quarter close"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_get_json_and_listings_are_paged() {
    let setup = Setup::new(2).await;
    let mut requests = Vec::new();
    for n in 0..3 {
        requests.push(setup.park(&format!("svc-{n}")).await.1);
    }
    let json = |path: &str| {
        client()
            .get(setup.url(path))
            .header("authorization", "Bearer alice-token")
            .header("accept", "application/json")
            .send()
    };
    let first: Value = json("/inbox").await.unwrap().json_value().await;
    assert_eq!(first["requests"].as_array().unwrap().len(), 2, "{first}");
    let cursor = first["next_turns"].as_str().expect("a next page");
    let second: Value = json(&format!("/inbox?turns_after={cursor}"))
        .await
        .unwrap()
        .json_value()
        .await;
    assert_eq!(second["requests"].as_array().unwrap().len(), 1, "{second}");
    assert!(second["next_turns"].is_null());
    let mut seen: Vec<String> = first["requests"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["requests"].as_array().unwrap())
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    seen.sort();
    requests.sort();
    assert_eq!(seen, requests, "every request exactly once");

    let turns: Value = json("/turns?status=waiting")
        .await
        .unwrap()
        .json_value()
        .await;
    assert_eq!(turns["items"].as_array().unwrap().len(), 2);
    let bad = json("/turns?status=sleepy").await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let missing = json("/turns/turn_nope").await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    // A bearer token acts without a CSRF token (it is no ambient credential) and gets JSON.
    let approved = client()
        .post(setup.url(&format!("/requests/{}/respond", requests[0])))
        .header("authorization", "Bearer alice-token")
        .form(&[("decision", "approve")])
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), StatusCode::OK);
    let report: Value = approved.json_value().await;
    assert_eq!(report["accepted"], true, "{report}");
    let refused = client()
        .get(setup.url("/inbox"))
        .header("authorization", "Bearer forged")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_turn_revokes_its_requests() {
    let setup = Setup::new(50).await;
    let (turn, request) = setup.park("cache-api").await;
    let (cookie, csrf) = sign_in(setup.addr(), "alice-token").await;
    let response = post(
        setup.addr(),
        &cookie,
        &format!("/turns/{turn}/cancel"),
        &[("csrf", &csrf)],
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let page = get(setup.addr(), &cookie, &format!("/turns/{turn}")).await;
    assert!(page.contains("was cancelled"), "{page}");
    let inbox = get(setup.addr(), &cookie, "/inbox").await;
    assert!(!inbox.contains(&request), "no longer waiting: {inbox}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounted_under_a_path_in_a_host_router() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::from_tools([restart::TOOL]).unwrap();
    let runtime = Runtime::builder(registry)
        .store(SqliteStore::open(dir.path().join("host.db")).unwrap())
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/health", axum::routing::get(|| async { "ok" }))
        .merge(Console::new(runtime, Tokens).at("/ops/console/").router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let base = format!("http://{addr}");
    let health = client().get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");
    let response = client()
        .get(format!("{base}/ops/console/tools"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["location"],
        "/ops/console/login?next=%2Fops%2Fconsole%2Ftools"
    );
    let login = client()
        .post(format!("{base}/ops/console/login"))
        .form(&[("token", "alice-token"), ("next", "/ops/console/tools")])
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("Path=/ops/console"), "{cookie}");
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let tools = client()
        .get(format!("{base}/ops/console/tools"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        tools.contains("href=\"/ops/console/tools/restart"),
        "{tools}"
    );
    assert!(
        tools.contains("<td>write</td><td>always</td><td>—</td>"),
        "effect and approval: {tools}"
    );
}

/// `Response::json` needs reqwest's `json` feature; the text parsed here does the same.
trait JsonValue {
    fn json_value(self) -> BoxFuture<'static, Value>;
}

impl JsonValue for reqwest::Response {
    fn json_value(self) -> BoxFuture<'static, Value> {
        Box::pin(async move {
            let text = self.text().await.unwrap();
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_messages_from_the_conversation_are_on_its_page() {
    let setup = Setup::new(50).await;
    let (turn, _) = setup.park("queue-api").await;
    let session = setup
        .runtime
        .turn(&turn)
        .await
        .unwrap()
        .session_id()
        .to_owned();
    let messages = [
        serde_json::json!({ "role": "user", "content": "the queue is stuck, restart it" }),
        serde_json::json!({ "role": "assistant", "content": "Restarting queue-api." }),
    ];
    setup
        .runtime
        .store()
        .append_conversation(&session, &turn, 0, &messages)
        .await
        .unwrap();
    setup
        .runtime
        .store()
        .append_conversation(
            &session,
            "another-turn",
            2,
            &[serde_json::json!({ "role": "user", "content": "elsewhere" })],
        )
        .await
        .unwrap();
    let (cookie, _) = sign_in(setup.addr(), "alice-token").await;
    let page = get(setup.addr(), &cookie, &format!("/turns/{turn}")).await;
    assert!(page.contains("Messages of this turn"), "{page}");
    assert!(page.contains("the queue is stuck, restart it"), "{page}");
    assert!(
        !page.contains("elsewhere"),
        "another turn's message: {page}"
    );
    let journal = get(setup.addr(), &cookie, &format!("/journals/{turn}/c1")).await;
    assert!(journal.contains("No entries."), "{journal}");
    let json = |token: &'static str| {
        let url = setup.url(&format!("/turns/{turn}"));
        async move {
            client()
                .get(url)
                .header("authorization", format!("Bearer {token}"))
                .header("accept", "application/json")
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    let alices = json("alice-token").await;
    assert_eq!(alices["withheld"], false, "{alices}");
    assert!(
        alices["events"].as_array().is_some_and(|e| !e.is_empty()),
        "this process ran the step: its events are kept: {alices}"
    );

    // Bob may not answer the waiting call's request: the messages (which repeat the model's
    // call), the events (which carry its input) and the call's journal are not his to see.
    let (bob, _) = sign_in(setup.addr(), "bob-token").await;
    let page = get(setup.addr(), &bob, &format!("/turns/{turn}")).await;
    assert!(page.contains("is not yours to see"), "{page}");
    assert!(!page.contains("queue-api"), "{page}");
    assert!(!page.contains("the queue is stuck"), "{page}");
    let json = json("bob-token").await;
    assert_eq!(json["withheld"], true, "{json}");
    assert_eq!(json["messages"], serde_json::json!([]), "{json}");
    assert_eq!(json["events"], serde_json::json!([]), "{json}");
    assert!(!json.to_string().contains("queue-api"), "{json}");
    let journal = get(setup.addr(), &bob, &format!("/journals/{turn}/c1")).await;
    assert!(journal.contains("is not yours to see"), "{journal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_steps_are_paged_oldest_first_with_the_parked_one_last() {
    let setup = Setup::new(2).await;
    let session = setup
        .runtime
        .open_session(SessionSpec::new("many-steps").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    for (n, service) in ["alpha", "beta", "gamma"].into_iter().enumerate() {
        let input = serde_json::json!({ "service": service }).to_string();
        let outcome = turn
            .step(vec![ToolCall::new(format!("s{n}"), "status", input)])
            .await
            .unwrap();
        assert!(
            matches!(outcome, StepOutcome::Completed { .. }),
            "{outcome:?}"
        );
    }
    let input = serde_json::json!({ "service": "delta-api", "code": "otp-4711" }).to_string();
    let StepOutcome::Waiting { requests, .. } = turn
        .step(vec![ToolCall::new("r1", "restart", input)])
        .await
        .unwrap()
    else {
        panic!("restart waits for approval");
    };
    let (cookie, _) = sign_in(setup.addr(), "alice-token").await;

    let first = get(setup.addr(), &cookie, &format!("/turns/{}", turn.id())).await;
    assert!(
        first.contains("alpha is up") && first.contains("beta is up"),
        "{first}"
    );
    assert!(
        !first.contains("gamma is up"),
        "a page holds two steps: {first}"
    );
    assert!(
        !first.contains(&requests[0].request_id),
        "the parked step comes last: {first}"
    );
    let next = first
        .split("href=\"")
        .filter_map(|rest| rest.split('"').next())
        .find(|href| href.contains("steps_after="))
        .expect("a link to the later steps")
        .replace("&amp;", "&");
    let second = get(setup.addr(), &cookie, &next).await;
    assert!(second.contains("gamma is up"), "{second}");
    assert!(!second.contains("alpha is up"), "{second}");
    assert!(
        second.contains(&requests[0].request_id),
        "the parked step: {second}"
    );
    assert!(!second.contains("Later steps"), "{second}");
}

// A console sharing its verifier with the MCP server admits only the tokens meant for it: its
// audience and its scope, on sign-in and on each bearer request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_tokens_for_the_console_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Runtime::builder(Registry::from_tools([restart::TOOL, status::TOOL]).unwrap())
        .store(SqliteStore::open(dir.path().join("console.db")).unwrap())
        .build()
        .unwrap();
    let server = Console::new(runtime, Provider)
        .audience("console")
        .required_scopes(["console:operate"])
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let url = |path: &str| format!("http://{}{path}", server.addr());
    for (token, why) in [
        ("mcp-token", "the token was not issued for this console"),
        (
            "viewer-token",
            "the token lacks the scope `console:operate`",
        ),
    ] {
        let login = client()
            .post(url("/login"))
            .form(&[("token", token)])
            .send()
            .await
            .unwrap();
        assert_eq!(login.status(), StatusCode::UNAUTHORIZED, "{token}");
        assert!(login.text().await.unwrap().contains(why), "{token}");
        let bearer = client()
            .get(url("/inbox"))
            .header("authorization", format!("Bearer {token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(bearer.status(), StatusCode::UNAUTHORIZED, "{token}");
        assert!(bearer.text().await.unwrap().contains(why), "{token}");
    }
    let (cookie, _) = sign_in(server.addr(), "op-token").await;
    let inbox = get(server.addr(), &cookie, "/inbox").await;
    assert!(inbox.contains("carol"), "{inbox}");
    let bearer = client()
        .get(url("/inbox"))
        .header("authorization", "Bearer op-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
}
