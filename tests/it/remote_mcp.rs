//! Tools of remote MCP servers through the runtime's connections, against real servers: the
//! official reference servers `@modelcontextprotocol/server-everything` and
//! `@modelcontextprotocol/server-filesystem` (npm, pinned in tests/mcp-clients/node) over stdio,
//! and a Python server written with the official `mcp` package (tests/mcp-servers/fixture.py)
//! over streamable HTTP with a bearer token; and, for servers that misbehave in ways those cannot,
//! a stdio server written by hand whose tool list pages badly (tests/mcp-servers/paging.py).
//! `scripts/setup-clients` installs all of them
//! (`scripts/test` runs it); a missing server fails these tests rather than skipping them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use toolwright::approval::{ApprovalCall, RequestPolicy};
use toolwright::mcp::McpConnector;
use toolwright::registry::Format;
use toolwright::runtime::{
    CallResult, Connection, ConnectionState, Event, InputRequest, InputResponse, Runtime,
    SessionSpec, SqliteStore, StepOutcome, ToolCall, ToolOverride, Turn,
};
use toolwright::{ApprovalDecision, Caller, Effect, ErrorCode, Registry};

use crate::support::programs::{python, root};
use crate::support::{
    alice, builder, builder_over, call, code, completed, open_turn, resumed, text, waiting,
};

// ---------------------------------------------------------------------------------------------
// The servers.

/// The entry point of an npm reference server, installed by `scripts/setup-clients`.
fn npm_server(package: &str) -> PathBuf {
    let path = root()
        .join("tests/mcp-clients/node/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        path.exists(),
        "{} is missing; run `scripts/setup-clients` (`scripts/test` does)",
        path.display()
    );
    path
}

/// server-everything over stdio.
fn everything() -> McpConnector {
    McpConnector::stdio("node").args([
        npm_server("server-everything").as_os_str(),
        "stdio".as_ref(),
    ])
}

/// The Python fixture server over streamable HTTP, its token in a file the tests rotate.
pub(crate) struct Fixture {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn start() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "token-1").unwrap();
        let (child, port) = Self::spawn(dir.path(), 0);
        Fixture { child, port, dir }
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server: a stopped server keeps its connections
    /// open and answers nothing.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Starts the server again on the same port, with the same token, log and state.
    fn restart(&mut self) {
        let (child, _) = Self::spawn(self.dir.path(), self.port);
        self.child = child;
    }

    fn spawn(dir: &Path, port: u16) -> (Child, u16) {
        let mut child = Command::new(python())
            .arg(root().join("tests/mcp-servers/fixture.py"))
            .args(["--port", &port.to_string()])
            .arg("--token-file")
            .arg(dir.join("token"))
            .arg("--log")
            .arg(dir.join("log.jsonl"))
            .arg("--state-file")
            .arg(dir.join("state"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("LISTENING ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the fixture did not start: {line:?}"));
        (child, port)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn token_file(&self) -> PathBuf {
        self.dir.path().join("token")
    }

    /// A connector whose resolver reads the token file at every request.
    pub(crate) fn connector(&self) -> McpConnector {
        let file = self.token_file();
        McpConnector::http(self.url()).auth(move || {
            let file = file.clone();
            async move {
                std::fs::read_to_string(&file)
                    .map(|t| Some(t.trim().to_owned()))
                    .map_err(|e| e.to_string())
            }
        })
    }

    /// What the fixture logged, one JSON object per line.
    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The tools the fixture ran, in order.
    fn calls(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter(|e| e["kind"] == "call")
            .map(|e| e["tool"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// The runtime.

fn store(dir: &Path) -> SqliteStore {
    SqliteStore::open(dir.join("toolwright.db")).unwrap()
}

pub(crate) fn runtime(dir: &Path, connections: Vec<Connection>) -> Runtime {
    let mut builder = builder([]).store(store(dir));
    for connection in connections {
        builder = builder.connection(connection);
    }
    builder.build().unwrap()
}

pub(crate) async fn turn(rt: &Runtime, session: SessionSpec) -> Turn {
    open_turn(rt, session, Some(alice()), Caller::Model).await
}

/// Settings for a fixture tool that changes nothing worth asking about.
pub(crate) fn harmless() -> ToolOverride {
    ToolOverride::new()
        .effect(Effect::Read)
        .approval(RequestPolicy::Never)
}

/// Runs a step that must complete.
pub(crate) async fn run(turn: &Turn, calls: Vec<ToolCall>) -> Vec<CallResult> {
    completed(turn.step(calls).await.unwrap())
}

/// Runs a step that must wait for a person.
async fn wait(turn: &Turn, calls: Vec<ToolCall>) -> Vec<InputRequest> {
    waiting(turn.step(calls).await.unwrap()).1
}

/// Alice approves `request`; the turn must resume and complete.
async fn approve(rt: &Runtime, request: &InputRequest) -> Vec<CallResult> {
    resumed(
        rt.respond(InputResponse::approve(&request.request_id, Some(alice())))
            .await
            .unwrap(),
    )
}

/// Waits (at most 20 s) for an event matching `want`.
pub(crate) async fn event(
    events: &mut broadcast::Receiver<Event>,
    want: impl Fn(&Event) -> bool,
) -> Event {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Ok(event)) if want(&event) => return event,
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(error)) => panic!("the event channel closed: {error}"),
            Err(_) => panic!("no such event within 20 s"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Connecting, naming, listing.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_of_an_allowed_server_join_the_registry_under_the_connection_name() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![Connection::new("everything", everything()).allow(["echo", "get-sum"])],
    );
    rt.connect().await.unwrap();
    let registry = rt.registry();
    let names: Vec<&str> = registry.tools().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["everything__echo", "everything__get-sum"]);
    let echo = registry.get("everything__echo").unwrap();
    // Untrusted by default, whatever the server's `readOnlyHint` says.
    assert_eq!(echo.effect(), Effect::Write);
    assert!(echo.is_untrusted());
    assert!(matches!(
        echo.approval().map(|a| a.request),
        Some(RequestPolicy::Once)
    ));
    assert_eq!(
        echo.server_annotations().and_then(|a| a.read_only),
        Some(true)
    );
    let list: Value = serde_json::from_str(
        registry
            .list(toolwright::registry::Audience::Model, Format::Anthropic)
            .json(),
    )
    .unwrap();
    assert_eq!(list[0]["name"], "everything__echo");
    assert_eq!(list[0]["input_schema"]["required"], json!(["message"]));
    assert!(list[0].get("$schema").is_none());
    let status = &rt.connections()[0];
    assert_eq!(status.state, ConnectionState::Up);
}

/// A runtime with one connection, named `mode`, to a server whose tool list pages badly
/// (tests/mcp-servers/paging.py: `endless`, `repeating` or `restless`), all its tools allowed;
/// and the file that holds the number of listings the server answered. A failed connection is
/// not retried within the test (a new server would start counting again).
fn paging(mode: &str, dir: &Path) -> (Runtime, PathBuf) {
    let pages = dir.join(format!("{mode}-pages"));
    let script = root().join("tests/mcp-servers/paging.py");
    let connector =
        McpConnector::stdio(python()).args([script.as_os_str(), mode.as_ref(), pages.as_os_str()]);
    let connection = Connection::new(mode, connector)
        .allow_all()
        .backoff(Duration::from_secs(600), Duration::from_secs(600));
    (runtime(dir, vec![connection]), pages)
}

// A server whose cursor never ends is followed for 100 pages, not until the connect timeout
// (each page may be 16 MiB), and the connection fails saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_that_never_ends_fails_the_connection_after_100_pages() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, pages) = paging("endless", dir.path());
    let error = rt.connect().await.unwrap_err().to_string();
    assert!(error.contains("did not end within 100 pages"), "{error}");
    assert_eq!(std::fs::read_to_string(&pages).unwrap(), "100");
    assert!(matches!(
        rt.connections()[0].state,
        ConnectionState::Down { .. }
    ));
}

// A server that gives the same cursor again would be listed forever: the second time ends the
// listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_whose_cursor_repeats_fails_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, pages) = paging("repeating", dir.path());
    let error = rt.connect().await.unwrap_err().to_string();
    assert!(
        error.contains("gave the cursor `again` a second time"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&pages).unwrap(), "2");
}

// A server that says its tools changed every time it has listed them is listed again at most
// once a second, not back to back for as long as it keeps saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_announcing_changes_without_pause_is_listed_at_most_once_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, pages) = paging("restless", dir.path());
    rt.connect().await.unwrap();
    let listed = || {
        std::fs::read_to_string(&pages)
            .unwrap()
            .parse::<u32>()
            .unwrap()
    };
    // The first list change is acted on (after the second since the first listing).
    let deadline = Instant::now() + Duration::from_secs(60);
    while listed() < 2 {
        assert!(
            Instant::now() < deadline,
            "the list change was never acted on"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let start = Instant::now();
    let before = listed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (count, seconds) = (listed() - before, start.elapsed().as_secs_f64());
    // Back to back, this is hundreds; once a second, about one a second (a listing that
    // reaches the server late may be counted with the next).
    assert!(
        f64::from(count) <= seconds + 2.0,
        "{count} listings in {seconds:.1} s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowlisted_name_the_server_does_not_expose_fails_the_connection_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![Connection::new("everything", everything()).allow(["echo", "delete_everything"])],
    );
    let error = rt.connect().await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`delete_everything`"), "{message}");
    assert!(
        message.contains("get-sum"),
        "the message lists what the server has: {message}"
    );
    assert!(matches!(
        rt.connections()[0].state,
        ConnectionState::Refused { .. }
    ));
    // Its tools are not there, and a call says why.
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let results = run(
        &turn,
        vec![call("c1", "everything__echo", json!({"message": "x"}))],
    )
    .await;
    assert!(results[0].is_error);
    assert!(
        text(&results[0]).contains("refused"),
        "{}",
        text(&results[0])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_tool_asks_once_then_taints_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![Connection::new("everything", everything()).allow(["echo"])],
    );
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let requests = wait(
        &turn,
        vec![call("c1", "everything__echo", json!({"message": "hi"}))],
    )
    .await;
    assert_eq!(requests[0].tool.as_deref(), Some("everything__echo"));
    let results = approve(&rt, &requests[0]).await;
    assert_eq!(text(&results[0]), "Echo: hi");
    let record = turn.record().await.unwrap();
    assert_eq!(record.tainted_by.as_deref(), Some("everything__echo"));
    // `once` remembered the grant, but the turn is tainted now: a `write` call asks again.
    let requests = wait(
        &turn,
        vec![call("c2", "everything__echo", json!({"message": "again"}))],
    )
    .await;
    assert!(
        requests[0].reasons.iter().any(|r| r.contains("untrusted")),
        "{:?}",
        requests[0].reasons
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_tools_once_grant_covers_only_the_input_approved() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![Connection::new("everything", everything()).allow(["echo"])],
    );
    rt.connect().await.unwrap();
    let first = turn(&rt, SessionSpec::new("s")).await;
    let requests = wait(
        &first,
        vec![call(
            "c1",
            "everything__echo",
            json!({"message": "5 cents"}),
        )],
    )
    .await;
    assert_eq!(text(&approve(&rt, &requests[0]).await[0]), "Echo: 5 cents");
    // A later turn (untainted): the same input runs on the grant...
    let second = turn(&rt, SessionSpec::new("s")).await;
    assert_eq!(second.record().await.unwrap().tainted_by, None);
    let results = run(
        &second,
        vec![call(
            "c2",
            "everything__echo",
            json!({"message": "5 cents"}),
        )],
    )
    .await;
    assert_eq!(text(&results[0]), "Echo: 5 cents");
    // ...and any other input asks again.
    let third = turn(&rt, SessionSpec::new("s")).await;
    let requests = wait(
        &third,
        vec![call(
            "c3",
            "everything__echo",
            json!({"message": "99999 cents"}),
        )],
    )
    .await;
    assert_eq!(requests[0].tool.as_deref(), Some("everything__echo"));
    // The grant it would record is for this input, not for the tool.
    assert_ne!(
        requests[0].approval_key.as_deref(),
        Some("everything__echo"),
        "{:?}",
        requests[0].approval_key
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_annotations_map_to_effects_and_overrides_win() {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("hello.txt"), "line1\nline2\n").unwrap();
    let root_dir = files.path().canonicalize().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new(
                "fs",
                McpConnector::stdio("node").args([
                    npm_server("server-filesystem").as_os_str(),
                    root_dir.as_os_str(),
                ]),
            )
            .allow([
                "read_text_file",
                "write_file",
                "create_directory",
                "list_directory",
            ])
            .trusted()
            .tool(
                "list_directory",
                ToolOverride::new().approval(RequestPolicy::Always),
            ),
        ],
    );
    rt.connect().await.unwrap();
    let registry = rt.registry();
    let effect = |name: &str| registry.get(name).unwrap().effect();
    let policy = |name: &str| {
        registry
            .get(name)
            .unwrap()
            .approval()
            .map(|a| a.request.name())
    };
    // readOnlyHint → read, no approval; destructive → write with approval; closed-world,
    // non-destructive → write without; an override replaces the policy.
    assert_eq!(effect("fs__read_text_file"), Effect::Read);
    assert_eq!(policy("fs__read_text_file"), None);
    assert_eq!(effect("fs__write_file"), Effect::Write);
    assert_eq!(policy("fs__write_file"), Some("once"));
    assert_eq!(effect("fs__create_directory"), Effect::Write);
    assert_eq!(policy("fs__create_directory"), None);
    assert_eq!(policy("fs__list_directory"), Some("always"));
    assert!(!registry.get("fs__read_text_file").unwrap().is_untrusted());

    let turn = turn(&rt, SessionSpec::new("s")).await;
    let path = root_dir.join("hello.txt");
    let results = run(
        &turn,
        vec![
            call("c1", "fs__read_text_file", json!({ "path": path })),
            // Outside the served directory: the server's error reaches the model.
            call("c2", "fs__read_text_file", json!({ "path": "/etc/passwd" })),
        ],
    )
    .await;
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(text(&results[0]), "line1\nline2\n");
    // structuredContent is the output, checked against the server's outputSchema.
    assert_eq!(results[0].output, json!({ "content": "line1\nline2\n" }));
    assert!(results[1].is_error);
    assert!(
        text(&results[1]).contains("Access denied"),
        "{}",
        text(&results[1])
    );
    assert!(turn.record().await.unwrap().tainted_by.is_none());

    let requests = wait(
        &turn,
        vec![call(
            "c3",
            "fs__write_file",
            json!({ "path": root_dir.join("new.txt"), "content": "written" }),
        )],
    )
    .await;
    assert!(
        !root_dir.join("new.txt").exists(),
        "nothing runs before the approval"
    );
    let results = approve(&rt, &requests[0]).await;
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(
        std::fs::read_to_string(root_dir.join("new.txt")).unwrap(),
        "written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_is_validated_against_the_server_schema_before_the_call() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["add", "bad_output"])
                .trusted()
                // It has no annotations: MCP's defaults make it open-world and destructive.
                .tool("bad_output", harmless()),
        ],
    );
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let results = run(
        &turn,
        vec![
            call("c1", "fixture__add", json!({ "a": "two", "b": 3 })),
            call("c2", "fixture__add", json!({ "a": 2 })),
        ],
    )
    .await;
    for result in &results {
        assert_eq!(code(result), ErrorCode::InvalidInput, "{result:?}");
    }
    assert!(text(&results[0]).contains("/a"), "{}", text(&results[0]));
    assert!(text(&results[1]).contains("b"), "{}", text(&results[1]));
    assert!(
        fixture.calls().is_empty(),
        "the server never saw them: {:?}",
        fixture.calls()
    );

    let results = run(
        &turn,
        vec![
            call("c3", "fixture__add", json!({ "a": 2, "b": 3 })),
            // Its structuredContent breaks its own outputSchema: an error, not data.
            call("c4", "fixture__bad_output", json!({})),
        ],
    )
    .await;
    assert_eq!(results[0].output, json!({ "sum": 5 }));
    assert_eq!(
        code(&results[1]),
        ErrorCode::InvalidOutput,
        "{:?}",
        results[1]
    );
    // The calls of one step run concurrently.
    let mut calls = fixture.calls();
    calls.sort();
    assert_eq!(calls, ["add", "bad_output"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_resolver_runs_for_every_request() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["echo"])
                .trusted(),
        ],
    );
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let echo = |id: &str| call(id, "fixture__echo", json!({ "text": id }));
    assert_eq!(text(&run(&turn, vec![echo("one")]).await[0]), "one");
    // The server now accepts only the new token; the same session goes on with it.
    std::fs::write(fixture.token_file(), "token-2").unwrap();
    assert_eq!(text(&run(&turn, vec![echo("two")]).await[0]), "two");
    let headers: Vec<String> = fixture
        .log()
        .iter()
        .filter(|e| e["kind"] == "http")
        .map(|e| e["authorization"].as_str().unwrap_or("none").to_owned())
        .collect();
    assert!(headers.iter().all(|h| h != "none"), "{headers:?}");
    assert!(
        headers.contains(&"Bearer token-1".to_owned()),
        "{headers:?}"
    );
    assert_eq!(
        headers.last().map(String::as_str),
        Some("Bearer token-2"),
        "{headers:?}"
    );
    assert!(
        fixture
            .log()
            .iter()
            .all(|e| e["kind"] != "http" || e["accepted"] == true)
    );

    // A resolver that fails: the call fails saying so, and the server saw no request without
    // a token.
    std::fs::remove_file(fixture.token_file()).unwrap();
    let result = &run(&turn, vec![echo("three")]).await[0];
    assert!(result.is_error);
    assert!(
        text(result).contains("nothing was sent"),
        "{}",
        text(result)
    );
    assert_eq!(fixture.calls(), ["echo", "echo"]);
}

/// A policy that reads the server's annotations: destructive tools are denied.
fn no_destruction<'a>(
    call: &'a ApprovalCall<'a>,
) -> futures_util::future::BoxFuture<'a, ApprovalDecision> {
    Box::pin(async move {
        if call.annotations.and_then(|a| a.destructive) == Some(true) {
            ApprovalDecision::denied("the server says this tool destroys data")
        } else {
            ApprovalDecision::NotApplicable
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_annotations_reach_custom_policies_and_unattended_sessions_run_no_untrusted_write() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["echo", "delete_note"])
                .tool(
                    "delete_note",
                    ToolOverride::new().approval(RequestPolicy::Custom(no_destruction)),
                )
                .tool(
                    "echo",
                    ToolOverride::new().approval(RequestPolicy::Custom(no_destruction)),
                ),
        ],
    );
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let results = run(
        &turn,
        vec![
            call("c1", "fixture__delete_note", json!({ "id": "n1" })),
            call("c2", "fixture__echo", json!({ "text": "hi" })),
        ],
    )
    .await;
    assert_eq!(code(&results[0]), ErrorCode::Denied);
    assert!(
        text(&results[0]).contains("destroys data"),
        "{}",
        text(&results[0])
    );
    assert!(!results[1].is_error, "{results:?}");
    assert_eq!(fixture.calls(), ["echo"]);

    // An untrusted tool with its default policy (`once`) in a session nobody watches: refused,
    // never run.
    let rt = runtime(
        tempfile::tempdir().unwrap().path(),
        vec![Connection::new("fixture", fixture.connector()).allow(["delete_note"])],
    );
    rt.connect().await.unwrap();
    let turn = self::turn(&rt, SessionSpec::new("cron").non_interactive()).await;
    let results = run(
        &turn,
        vec![call("c1", "fixture__delete_note", json!({ "id": "n1" }))],
    )
    .await;
    assert_eq!(code(&results[0]), ErrorCode::ApprovalUnavailable);
    assert_eq!(fixture.calls(), ["echo"]);
}

// ---------------------------------------------------------------------------------------------
// Definition pinning.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_definition_is_withheld_until_a_person_approves_it() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let connection = || {
        Connection::new("fixture", fixture.connector())
            .allow(["echo", "mutate"])
            .trusted()
            .tool("mutate", harmless())
    };
    let rt = runtime(dir.path(), vec![connection()]);
    let mut events = rt.subscribe();
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let first = run(
        &turn,
        vec![call("c1", "fixture__echo", json!({ "text": "a" }))],
    )
    .await;
    assert_eq!(text(&first[0]), "a");

    // The server changes `echo` (a prompt injection in its description, a new parameter) and
    // says its list changed.
    // A step that resolved its tools before the change arrives (held here as a registry
    // snapshot taken now).
    let before = rt.registry();
    let mutated = run(&turn, vec![call("c2", "fixture__mutate", json!({}))]).await;
    assert!(!mutated[0].is_error, "{mutated:?}");
    let changed = event(&mut events, |e| {
        matches!(e, Event::ToolDefinitionChanged { .. })
    })
    .await;
    let Event::ToolDefinitionChanged {
        name,
        pinned_digest,
        digest,
        ..
    } = changed
    else {
        unreachable!()
    };
    assert_eq!(name, "fixture__echo");
    assert_ne!(pinned_digest, digest);
    assert!(rt.registry().get("fixture__echo").unwrap().is_withheld());
    assert_eq!(rt.connections()[0].withheld, ["fixture__echo"]);
    // Its old, approved tool object no longer reaches the server either.
    let stale = before
        .call("fixture__echo", json!({ "text": "stale" }))
        .await
        .unwrap_err();
    assert_eq!(stale.code(), ErrorCode::Denied, "{}", stale.message());
    assert!(
        stale.message().contains("changed its definition"),
        "{}",
        stale.message()
    );
    let list = turn.tool_list(Format::OpenAi).await.unwrap();
    assert!(
        !list.contains("fixture__echo"),
        "withheld from the list: {list}"
    );
    assert!(!list.contains("IGNORE PREVIOUS INSTRUCTIONS"), "{list}");

    // Called anyway: a person sees both definitions; nothing runs before the approval.
    let outcome = turn
        .step(vec![call("c3", "fixture__echo", json!({ "text": "b" }))])
        .await
        .unwrap();
    let StepOutcome::Waiting {
        requests, notices, ..
    } = outcome
    else {
        panic!("expected an approval request, got {outcome:?}");
    };
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("Tool withheld: fixture__echo")),
        "{notices:?}"
    );
    let change = requests[0]
        .definition_change
        .as_ref()
        .expect("the change is shown");
    assert_eq!(change.changed_parts(), ["description", "inputSchema"]);
    assert!(
        !change
            .pinned
            .description
            .as_deref()
            .unwrap_or_default()
            .contains("IGNORE")
    );
    assert!(
        change
            .listed
            .description
            .as_deref()
            .unwrap_or_default()
            .contains("IGNORE")
    );
    assert!(
        requests[0]
            .prompt
            .contains("changed the tool `fixture__echo`"),
        "{}",
        requests[0].prompt
    );
    assert_eq!(fixture.calls(), ["echo", "mutate"]);

    let results = approve(&rt, &requests[0]).await;
    assert_eq!(text(&results[0]), "b");
    assert_eq!(fixture.calls(), ["echo", "mutate", "echo"]);
    assert!(!rt.registry().get("fixture__echo").unwrap().is_withheld());
    let pins = rt.store().pins("fixture").await.unwrap();
    let echo = pins.iter().find(|p| p.tool == "echo").unwrap();
    assert_eq!(echo.digest, change.digest);
    assert_eq!(echo.approved_by, Some(alice()));

    // Another runtime on the same store (a restart): the approved definition is the pinned one.
    drop(rt);
    let rt = runtime(dir.path(), vec![connection()]);
    rt.connect().await.unwrap();
    assert!(!rt.registry().get("fixture__echo").unwrap().is_withheld());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withheld_tool_asks_before_its_new_definition_sees_the_input() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["echo", "mutate"])
                .trusted()
                .tool("mutate", harmless()),
        ],
    );
    let mut events = rt.subscribe();
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    run(&turn, vec![call("c1", "fixture__mutate", json!({}))]).await;
    event(&mut events, |e| {
        matches!(e, Event::ToolDefinitionChanged { .. })
    })
    .await;
    // Input the new schema refuses (its new parameter `shout` is a boolean): the call asks a
    // person first, and nothing the model gets back names the new definition's text.
    let outcome = turn
        .step(vec![call(
            "c2",
            "fixture__echo",
            json!({ "text": "b", "shout": "loud" }),
        )])
        .await
        .unwrap();
    let shown = format!("{:?}", outcome_for_the_model(&outcome));
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("expected an approval request, got {outcome:?}");
    };
    assert!(requests[0].definition_change.is_some());
    for text in ["shout", "IGNORE PREVIOUS INSTRUCTIONS", "boolean"] {
        assert!(!shown.contains(text), "`{text}` reached the model: {shown}");
    }
    assert_eq!(fixture.calls(), ["mutate"]);
    // Approved: the definition is now the approved one, and the input is checked against it.
    let results = approve(&rt, &requests[0]).await;
    assert_eq!(code(&results[0]), ErrorCode::InvalidInput, "{results:?}");
    assert!(text(&results[0]).contains("shout"), "{}", text(&results[0]));
    assert_eq!(fixture.calls(), ["mutate"]);
    assert!(!rt.registry().get("fixture__echo").unwrap().is_withheld());
}

/// What a waiting step gives the model: its results and notices (requests go to a person).
fn outcome_for_the_model(outcome: &StepOutcome) -> (Vec<CallResult>, Vec<String>) {
    match outcome {
        StepOutcome::Waiting {
            results, notices, ..
        }
        | StepOutcome::Completed {
            results, notices, ..
        } => (
            results.iter().map(|r| CallResult::clone(r)).collect(),
            notices.clone(),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_that_changed_while_the_runtime_was_away_is_withheld_at_connect() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let connection = || {
        Connection::new("fixture", fixture.connector())
            .allow(["echo"])
            .trusted()
    };
    let rt = runtime(dir.path(), vec![connection()]);
    rt.connect().await.unwrap();
    assert!(!rt.registry().get("fixture__echo").unwrap().is_withheld());
    drop(rt);
    // Changed behind its back (another client calls `mutate`).
    let other = runtime(
        tempfile::tempdir().unwrap().path(),
        vec![
            Connection::new("other", fixture.connector())
                .allow(["mutate"])
                .trusted()
                .tool("mutate", harmless()),
        ],
    );
    other.connect().await.unwrap();
    let t = turn(&other, SessionSpec::new("o")).await;
    run(&t, vec![call("m", "other__mutate", json!({}))]).await;

    let rt = runtime(dir.path(), vec![connection()]);
    rt.connect().await.unwrap();
    let echo = rt.registry();
    let echo = echo.get("fixture__echo").unwrap();
    assert!(echo.is_withheld());
    // An unattended session cannot approve it: refused, not run.
    let t = turn(&rt, SessionSpec::new("cron").non_interactive()).await;
    let results = run(&t, vec![call("c", "fixture__echo", json!({ "text": "x" }))]).await;
    assert_eq!(code(&results[0]), ErrorCode::ApprovalUnavailable);
    assert!(
        text(&results[0]).contains("withheld"),
        "{}",
        text(&results[0])
    );
    assert!(!fixture.calls().contains(&"echo".to_owned()));
    // Approved outside any turn (an admin page): available again.
    let change = rt.definition_change("fixture__echo").unwrap();
    assert_eq!(change.changed_parts(), ["description", "inputSchema"]);
    assert!(
        rt.approve_definition("fixture__echo", Some(alice()))
            .await
            .unwrap()
    );
    assert!(!rt.registry().get("fixture__echo").unwrap().is_withheld());
}

// ---------------------------------------------------------------------------------------------
// Servers that go away.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_stdio_server_is_restarted_and_its_calls_fail_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "echo $$ >> '{}'; exec node '{}' stdio",
        pids.display(),
        npm_server("server-everything").display()
    );
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new(
                "everything",
                McpConnector::stdio("sh").args(["-c", &script]),
            )
            .allow(["echo"])
            .trusted()
            // Long enough that the test sees the server down.
            .backoff(Duration::from_secs(2), Duration::from_secs(2)),
        ],
    );
    let mut events = rt.subscribe();
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let echo = |id: &str| call(id, "everything__echo", json!({ "message": id }));
    assert_eq!(text(&run(&turn, vec![echo("one")]).await[0]), "Echo: one");

    let first = std::fs::read_to_string(&pids).unwrap();
    let pid = first.lines().next().unwrap().trim().to_owned();
    assert!(
        Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap()
            .success()
    );
    event(&mut events, |e| {
        matches!(
            e,
            Event::ConnectionChanged {
                state: ConnectionState::Down { .. },
                ..
            }
        )
    })
    .await;
    let down = &run(&turn, vec![echo("two")]).await[0];
    assert_eq!(code(down), ErrorCode::Unavailable, "{down:?}");
    assert!(text(down).contains("reconnects"), "{}", text(down));
    // Nothing else waits on it: the tool is still listed, the turn goes on.
    assert!(
        turn.tool_list(Format::OpenAi)
            .await
            .unwrap()
            .contains("everything__echo")
    );

    event(&mut events, |e| {
        matches!(
            e,
            Event::ConnectionChanged {
                state: ConnectionState::Up,
                ..
            }
        )
    })
    .await;
    assert_eq!(
        text(&run(&turn, vec![echo("three")]).await[0]),
        "Echo: three"
    );
    assert_eq!(std::fs::read_to_string(&pids).unwrap().lines().count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_http_server_is_reached_again() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["echo"])
                .trusted()
                .backoff(Duration::from_millis(100), Duration::from_millis(500)),
        ],
    );
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let echo = |id: &str| call(id, "fixture__echo", json!({ "text": id }));
    assert_eq!(text(&run(&turn, vec![echo("one")]).await[0]), "one");

    let mut fixture = fixture;
    fixture.kill();
    let down = &run(&turn, vec![echo("two")]).await[0];
    assert!(down.is_error, "{down:?}");
    fixture.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let result = &run(&turn, vec![echo("three")]).await[0];
        if !result.is_error {
            assert_eq!(text(result), "three");
            break;
        }
        assert!(Instant::now() < deadline, "never reached again: {result:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(fixture.calls().contains(&"echo".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_is_marked_down_then_reached_again() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["echo", "slow"])
                .trusted()
                .tool("slow", harmless())
                .connect_timeout(Duration::from_secs(2))
                .backoff(Duration::from_millis(100), Duration::from_millis(500))
                .liveness(Duration::from_millis(200), Duration::from_secs(2)),
        ],
    );
    rt.connect().await.unwrap();
    let mut events = rt.subscribe();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let echo = |id: &str| call(id, "fixture__echo", json!({ "text": id }));
    assert_eq!(text(&run(&turn, vec![echo("one")]).await[0]), "one");

    // A call is waiting on the server when it freezes (stopped, not exited).
    let waiting = {
        let turn = turn.clone();
        tokio::spawn(async move {
            turn.step(vec![call("c1", "fixture__slow", json!({ "seconds": 60 }))])
                .await
        })
    };
    let started = || {
        fixture
            .log()
            .iter()
            .any(|e| e["kind"] == "slow" && e["event"] == "started")
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started() {
        assert!(Instant::now() < deadline, "the call never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fixture.signal("STOP");
    let is_down = |e: &Event| {
        matches!(
            e,
            Event::ConnectionChanged {
                state: ConnectionState::Down { .. },
                ..
            }
        )
    };
    let Event::ConnectionChanged {
        state: ConnectionState::Down { error, .. },
        ..
    } = event(&mut events, is_down).await
    else {
        unreachable!()
    };
    assert!(error.contains("stopped answering"), "{error}");
    // The waiting call fails with UNAVAILABLE (long before its 60 s), and so does a new one.
    let results = completed(waiting.await.unwrap().unwrap());
    assert_eq!(code(&results[0]), ErrorCode::Unavailable, "{results:?}");
    assert!(text(&results[0]).contains("whether it acted is unknown"));
    let down = &run(&turn, vec![echo("two")]).await[0];
    assert_eq!(code(down), ErrorCode::Unavailable, "{down:?}");

    // Once it answers again, the connection comes back.
    fixture.signal("CONT");
    event(&mut events, |e| {
        matches!(
            e,
            Event::ConnectionChanged {
                state: ConnectionState::Up,
                ..
            }
        )
    })
    .await;
    assert_eq!(text(&run(&turn, vec![echo("three")]).await[0]), "three");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_turn_cancels_the_remote_call_on_the_server() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["slow"])
                .tool("slow", ToolOverride::new().approval(RequestPolicy::Never)),
        ],
    );
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let running = {
        let turn = turn.clone();
        tokio::spawn(async move {
            turn.step(vec![call("c1", "fixture__slow", json!({ "seconds": 30 }))])
                .await
        })
    };
    let slow = |event: &str| {
        fixture
            .log()
            .iter()
            .any(|e| e["kind"] == "slow" && e["event"] == event)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !slow("started") {
        assert!(Instant::now() < deadline, "the call never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    turn.cancel().await.unwrap();
    let results = completed(running.await.unwrap().unwrap());
    assert_eq!(code(&results[0]), ErrorCode::Cancelled, "{results:?}");
    while !slow("cancelled") {
        assert!(
            Instant::now() < deadline,
            "the server was not told: {:?}",
            fixture.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!slow("finished"));
}

// ---------------------------------------------------------------------------------------------
// Declarations.

mod local {
    use toolwright::prelude::*;

    /// Looks up an invoice.
    #[tool(toolset = "billing", effect = read)]
    pub(crate) async fn lookup(_: NoInput) -> String {
        String::new()
    }
}

#[test]
fn declarations_that_cannot_work_are_refused_when_the_runtime_is_built() {
    let registry = || Registry::from_tools([local::lookup::TOOL]).unwrap();
    let refused = |connections: Vec<Connection>| {
        let mut builder = builder_over(registry());
        for connection in connections {
            builder = builder.connection(connection);
        }
        builder.build().unwrap_err().to_string()
    };
    let plain = |name: &str| Connection::new(name, everything()).allow(["echo"]);

    let message = refused(vec![plain("billing")]);
    assert!(message.contains("billing__lookup"), "{message}");
    let message = refused(vec![plain("a__b")]);
    assert!(message.contains("without `__`"), "{message}");
    let message = refused(vec![plain("same"), plain("same")]);
    assert!(
        message.contains("two connections are named `same`"),
        "{message}"
    );
    for pair in [["crm", "crm_"], ["crm_", "crm"]] {
        let message = refused(vec![plain(pair[0]), plain(pair[1])]);
        assert!(message.contains("differ by a trailing `_`"), "{message}");
    }
    let message = refused(vec![Connection::new("srv", everything())]);
    assert!(message.contains(".allow([...])"), "{message}");
    let message = refused(vec![
        plain("srv").tool("get-sum", ToolOverride::new().effect(Effect::Read)),
    ]);
    assert!(
        message.contains("`get-sum`") && message.contains("allowlist"),
        "{message}"
    );
}

/// HTTPS is compiled in (the default `tls` feature): an `https://` URL gets as far as a TLS
/// handshake, which a plain-HTTP server fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_url_is_spoken_to_over_tls() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let https = McpConnector::http(format!("https://127.0.0.1:{}/mcp", fixture.port));
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("secure", https)
                .allow(["echo"])
                .connect_timeout(Duration::from_secs(5)),
        ],
    );
    let error = rt.connect().await.unwrap_err().to_string();
    assert!(error.contains("connection `secure` failed"), "{error}");
    // rustls's word for a peer that answered the ClientHello with plain HTTP.
    assert!(error.contains("InvalidContentType"), "{error}");
    // The plain-HTTP server saw bytes it could not parse as HTTP, never a request.
    assert!(
        fixture.log().iter().all(|e| e["kind"] != "http"),
        "{:?}",
        fixture.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_progress_becomes_partial_results() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("everything", everything())
                .allow(["trigger-long-running-operation"])
                .trusted(),
        ],
    );
    rt.connect().await.unwrap();
    let mut events = rt.subscribe();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let results = run(
        &turn,
        vec![call(
            "c1",
            "everything__trigger-long-running-operation",
            json!({ "duration": 1, "steps": 2 }),
        )],
    )
    .await;
    assert!(!results[0].is_error, "{results:?}");
    let mut snapshots = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let Event::ActionPartial {
            call_id, snapshot, ..
        } = event
        {
            assert_eq!(call_id, "c1");
            snapshots.push(snapshot);
        }
    }
    assert!(!snapshots.is_empty(), "no progress arrived");
    assert_eq!(snapshots[0]["total"], 2.0, "{snapshots:?}");
}

// A server's progress message is a status line: one of a megabyte is cut as quoted texts are,
// to 200 characters (the runtime's event channel keeps its last 1,024 events, so a server could
// pin 16 GiB with 16 MiB messages).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_message_is_cut_to_a_status_line() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["chatty"])
                .trusted()
                .tool("chatty", harmless()),
        ],
    );
    rt.connect().await.unwrap();
    let mut events = rt.subscribe();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    // The tool holds until the notice has arrived: a notification and the result right after
    // it are handled on their own, so a notice sent just before the result may come after it.
    let hold = dir.path().join("hold");
    let arguments = json!({ "chars": 1_000_000, "hold_file": hold });
    let step = run(&turn, vec![call("c1", "fixture__chatty", arguments)]);
    let notice = async {
        let message = loop {
            let event = tokio::time::timeout(Duration::from_secs(60), events.recv())
                .await
                .expect("a progress notice within 60 s");
            match event {
                Ok(Event::ActionPartial { snapshot, .. }) => {
                    if let Some(message) = snapshot["message"].as_str() {
                        break message.to_owned();
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(error) => panic!("{error}"),
            }
        };
        std::fs::write(&hold, "").unwrap();
        message
    };
    let (results, message) = tokio::join!(step, notice);
    assert!(!results[0].is_error, "{results:?}");
    let kept = "x".repeat(200);
    assert_eq!(message, format!("{kept}… (999800 more characters)"));
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event, Event::ActionPartial { .. }),
            "one progress notice: {event:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_approved_by_another_instance_is_seen_without_asking_again() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let connection = || {
        Connection::new("fixture", fixture.connector())
            .allow(["echo", "mutate"])
            .trusted()
            .tool("mutate", harmless())
    };
    // Two instances on one store.
    let a = runtime(dir.path(), vec![connection()]);
    let b = runtime(dir.path(), vec![connection()]);
    a.connect().await.unwrap();
    b.connect().await.unwrap();
    let on_a = turn(&a, SessionSpec::new("a")).await;
    run(&on_a, vec![call("m", "fixture__mutate", json!({}))]).await;
    // `b` lists again on reconnect or list change; here it learns from its own connection.
    let mut events = b.subscribe();
    let on_b = turn(&b, SessionSpec::new("b")).await;
    run(&on_b, vec![call("m2", "fixture__mutate", json!({}))]).await;
    event(&mut events, |e| {
        matches!(e, Event::ToolDefinitionChanged { .. })
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !a.registry().get("fixture__echo").unwrap().is_withheld() {
        assert!(Instant::now() < deadline, "`a` never saw the change");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        a.approve_definition("fixture__echo", Some(alice()))
            .await
            .unwrap()
    );
    // `b` still holds the tool withheld, finds the pin moved on, and runs the call.
    assert!(b.registry().get("fixture__echo").unwrap().is_withheld());
    let results = run(
        &on_b,
        vec![call(
            "e",
            "fixture__echo",
            json!({ "text": "x", "shout": true }),
        )],
    )
    .await;
    assert_eq!(text(&results[0]), "X", "{results:?}");
    assert!(!b.registry().get("fixture__echo").unwrap().is_withheld());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_remote_tools_are_found_and_called_through_the_meta_tools() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new("everything", everything())
                .allow(["echo", "get-sum"])
                .tool("get-sum", ToolOverride::new().deferred(true)),
        ],
    );
    rt.connect().await.unwrap();
    let turn = turn(&rt, SessionSpec::new("s")).await;
    let list = turn.tool_list(Format::OpenAi).await.unwrap();
    assert!(
        !list.contains("everything__get-sum") && list.contains("tool_search"),
        "{list}"
    );
    let found = run(
        &turn,
        vec![call("s", "tool_search", json!({ "query": "sum numbers" }))],
    )
    .await;
    assert!(
        serde_json::to_string(&found[0].output)
            .unwrap()
            .contains("everything__get-sum")
    );
    // Still untrusted: found or not, it asks before it runs.
    let requests = wait(
        &turn,
        vec![call(
            "c",
            "tool_call",
            json!({ "name": "everything__get-sum", "input": { "a": 1, "b": 2 } }),
        )],
    )
    .await;
    assert_eq!(requests[0].tool.as_deref(), Some("everything__get-sum"));
    let results = approve(&rt, &requests[0]).await;
    assert_eq!(text(&results[0]), "The sum of 1 and 2 is 3.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_runtime_stops_its_stdio_servers() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // Through a shell that stays as the parent: the whole process group must go.
    let script = format!(
        "echo $$ >> '{}'; node '{}' stdio",
        pids.display(),
        npm_server("server-everything").display()
    );
    let rt = runtime(
        dir.path(),
        vec![
            Connection::new(
                "everything",
                McpConnector::stdio("sh").args(["-c", &script]),
            )
            .allow(["echo"]),
        ],
    );
    rt.connect().await.unwrap();
    let pid = std::fs::read_to_string(&pids).unwrap().trim().to_owned();
    let alive = |pid: &str| {
        Command::new("kill")
            .args(["-0", pid])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(alive(&pid));
    drop(rt);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(&pid) {
        assert!(Instant::now() < deadline, "the server outlived its runtime");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // No grandchild left in its group either.
    let group = Command::new("pgrep").args(["-g", &pid]).output().unwrap();
    assert!(
        group.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&group.stdout)
    );
}

/// A runtime serving its tools over MCP serves its remote ones too, and tells its clients when
/// they change: here a second runtime is that client, through its own connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_serving_mcp_relays_its_remote_tools_and_their_changes() {
    let fixture = Fixture::start();
    let dir = tempfile::tempdir().unwrap();
    let upstream = runtime(
        dir.path(),
        vec![
            Connection::new("fixture", fixture.connector())
                .allow(["echo", "mutate"])
                .trusted()
                .tool("mutate", harmless()),
        ],
    );
    // The server is built before the connection lists: its list follows the registry.
    let server = toolwright::mcp::McpServer::new(upstream.clone());
    upstream.connect().await.unwrap();
    let http = toolwright::mcp::McpHttp::new(server).start().await.unwrap();

    let downstream_dir = tempfile::tempdir().unwrap();
    let downstream = runtime(
        downstream_dir.path(),
        vec![
            Connection::new(
                "up",
                McpConnector::http(format!("http://{}/mcp", http.addr())),
            )
            .allow_all()
            .trusted()
            .tool("fixture__mutate", harmless()),
        ],
    );
    downstream.connect().await.unwrap();
    let names: Vec<String> = downstream
        .registry()
        .tools()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(names, ["up__fixture__echo", "up__fixture__mutate"]);

    let turn = turn(&downstream, SessionSpec::new("s")).await;
    run(&turn, vec![call("m", "up__fixture__mutate", json!({}))]).await;
    // Upstream withholds the changed `echo` (it leaves upstream's list), and its MCP clients
    // are told its list changed: downstream lists again and loses it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while downstream.registry().get("up__fixture__echo").is_some() {
        assert!(
            Instant::now() < deadline,
            "downstream never heard of the change"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let results = run(
        &turn,
        vec![call("e", "up__fixture__echo", json!({ "text": "x" }))],
    )
    .await;
    assert!(results[0].is_error, "withheld upstream: {results:?}");
    assert!(!fixture.calls().contains(&"echo".to_owned()));
}
