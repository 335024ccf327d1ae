//! The console's CLI (`examples/console.rs`) on a SQLite file where the seeds' `restart_service`
//! parked two calls for `local/you`: `list inbox` shows them in full to you and not to
//! another user, another user's approval is refused (exit 2), your approval runs the call once,
//! a second approval is dropped (exit 2), a denial's note reaches the model, and the waiting
//! listing ends empty. Every command runs as a process of its own, as from a terminal.
//!
//! And the main job with the console beside it: the example MCP server asks the official Python
//! MCP SDK's client to approve a call; while the client's user takes their time, the CLI approves
//! it from another process; the call runs once, the client's `tools/call` returns its result
//! with the note, and the client's late answer is dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall};
use toolwright::{Caller, Principal, Registry};

#[path = "../examples/seed/mod.rs"]
#[allow(dead_code)] // reason: the test parks one seed tool; the fakes' other helpers go unused
mod seed;
mod support;

use support::programs::{example, python, root};

fn you() -> Principal {
    Principal::user("local", "you")
}

fn runtime(db: &Path) -> Runtime {
    Runtime::builder(Registry::collect().expect("the seed tools collect"))
        .store(SqliteStore::open(db).unwrap())
        .state(seed::ops::OpsBackend::default())
        .state(seed::release::Releases::default())
        .state(seed::treehole::Treehole::default())
        .state(seed::wallet::Wallet::default())
        .build()
        .unwrap()
}

/// Parks one `restart_service` call for `you`: its turn and request ids.
async fn park(rt: &Runtime, n: usize) -> (String, String) {
    let session = rt
        .open_session(SessionSpec::new(format!("cli-{n}")).initiator(you()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(you()), Caller::Model)
        .await
        .unwrap();
    let arguments = json!({ "service": "payment-api", "reason": "stuck after the 14:00 deploy" });
    match turn
        .step(vec![ToolCall::new(
            "c1",
            "restart_service",
            arguments.to_string(),
        )])
        .await
        .unwrap()
    {
        StepOutcome::Waiting { requests, .. } => {
            (turn.id().to_owned(), requests[0].request_id.clone())
        }
        other => panic!("restart_service waits for approval: {other:?}"),
    }
}

/// Runs the console with `args` on `db`.
fn console(db: &Path, args: &[&str]) -> Output {
    Command::new(example("console"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

/// Runs the console with `--json`, expecting exit status `code`: what it printed.
fn console_json(db: &Path, args: &[&str], code: i32) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let output = console(db, &all);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_approves_and_denies() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("toolwright-mcp.db");
    let (first_turn, first) = park(&runtime(&db), 1).await;
    let (second_turn, second) = park(&runtime(&db), 2).await;

    let inbox = console_json(&db, &["list", "inbox"], 0);
    let requests = inbox["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "{inbox}");
    for request in requests {
        assert_eq!(request["may_answer"], true, "{request}");
        assert_eq!(request["input"]["service"], "payment-api", "{request}");
    }
    let theirs = console_json(&db, &["--as", "local/mallory", "list", "inbox"], 0);
    for request in theirs["requests"].as_array().unwrap() {
        assert_eq!(request["may_answer"], false, "{request}");
        assert!(
            request["input"].is_null(),
            "not shown to mallory: {request}"
        );
        assert!(request["prompt"].is_null(), "{request}");
        assert_eq!(request["requester"]["principal_id"], "you");
    }

    let refused = console_json(&db, &["--as", "local/mallory", "approve", &first], 2);
    assert_eq!(refused["accepted"], false);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("Not accepted"),
        "{refused}"
    );

    let approved = console_json(&db, &["approve", &first, "--note", "go ahead"], 0);
    assert_eq!(approved["accepted"], true, "{approved}");
    let results = approved["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "ran once: {approved}");
    assert_eq!(results[0][0], "restart_service");
    assert_eq!(results[0][1], false, "it succeeded: {approved}");

    let again = console_json(&db, &["approve", &first], 2);
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("already settled"),
        "{again}"
    );

    let denied = console_json(&db, &["deny", &second, "--note", "not during the sale"], 0);
    assert_eq!(denied["accepted"], true, "{denied}");
    let rt = runtime(&db);
    let last = rt
        .turn(&second_turn)
        .await
        .unwrap()
        .last_results()
        .await
        .unwrap()
        .expect("the denied step closed");
    let model = serde_json::to_string(&last.results[0].model()).unwrap();
    assert!(
        model.contains("not during the sale"),
        "the model reads the note: {model}"
    );

    let turn = console_json(&db, &["show", "turn", &first_turn], 0);
    assert_eq!(turn["status"], "active", "{turn}");
    assert_eq!(turn["calls"][0]["tool"], "restart_service");
    assert_eq!(turn["calls"][0]["result"]["is_error"], false, "{turn}");
    let waiting = console_json(&db, &["list", "turns", "--status", "waiting"], 0);
    assert_eq!(
        waiting["items"],
        json!([]),
        "nothing waits any more: {waiting}"
    );

    // Text output for people, and a usage error for a bad status.
    let text = console(&db, &["list", "tools"]);
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).contains("restart_service"));
    let bad = console(&db, &["list", "turns", "--status", "sleepy"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown turn status `sleepy`"));
}

/// A child process killed when dropped (a failed assertion leaves nothing running).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The next line `reader` gives, or a failure naming `what` was awaited.
fn line(reader: &mut impl BufRead, what: &str) -> String {
    let mut line = String::new();
    let read = reader.read_line(&mut line).unwrap();
    assert!(read > 0, "the process ended before {what}");
    line
}

#[test]
fn an_approval_from_the_console_answers_an_mcp_client_still_asking() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("toolwright-mcp.db");
    let mut server = Running(
        Command::new(example("mcp_server"))
            .args(["--addr", "127.0.0.1:0", "--db"])
            .arg(&db)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut server_out = BufReader::new(server.0.stdout.take().unwrap());
    let started = line(&mut server_out, "the server said where it listens");
    let url = started
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {started:?}"))
        .to_owned();

    let go = dir.path().join("go");
    let mut client = Running(
        Command::new(python())
            .arg(root().join("tests/mcp-clients/python/approve_elsewhere.py"))
            .arg(&url)
            .arg(&go)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut client_out = BufReader::new(client.0.stdout.take().unwrap());
    assert_eq!(
        line(&mut client_out, "the approval request").trim(),
        "ELICITED"
    );

    // The client's user has not answered: the turn waits in the store, and the inbox says so.
    let inbox = console_json(&db, &["list", "inbox"], 0);
    let requests = inbox["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1, "{inbox}");
    assert_eq!(requests[0]["tool"], "restart_service");
    let request = requests[0]["request_id"].as_str().unwrap().to_owned();
    let approved = console_json(
        &db,
        &["approve", &request, "--note", "approved from the console"],
        0,
    );
    assert_eq!(
        approved["results"].as_array().unwrap().len(),
        1,
        "ran once: {approved}"
    );

    // Now the user answers too; their answer comes second and is dropped.
    std::fs::write(&go, "").unwrap();
    let result = line(&mut client_out, "the call's result");
    let result: serde_json::Value = serde_json::from_str(
        result
            .strip_prefix("RESULT ")
            .unwrap_or_else(|| panic!("not a result: {result}")),
    )
    .unwrap();
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structuredContent"]["service"], "payment-api",
        "{result}"
    );
    // The result is the console's run: it carries the console's note (an approval by the
    // client would have none), and the turn holds that one result.
    let text = result["content"].to_string();
    assert!(
        text.contains("approved from the console"),
        "the note reaches the client: {text}"
    );
    let turn_id = requests[0]["turn_id"].as_str().unwrap();
    let turn = console_json(&db, &["show", "turn", turn_id], 0);
    let calls = turn["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{turn}");
    assert_eq!(
        calls[0]["result"]["output"], result["structuredContent"],
        "{turn}"
    );
    assert!(client.0.wait().unwrap().success());
}

#[test]
fn serving_beyond_loopback_warns_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("toolwright-mcp.db");
    let mut console = Running(
        Command::new(example("console"))
            .arg("--db")
            .arg(&db)
            .args(["serve", "--addr", "0.0.0.0:0", "--token", "t"])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Read on a thread of its own: without the warning the console would serve silently, and
    // the test must fail, not wait forever.
    let mut stderr = BufReader::new(console.0.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = stderr.read_line(&mut first);
        let _ = tx.send(first);
    });
    let warning = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the console warned of nothing before serving beyond loopback");
    assert!(warning.contains("not a loopback address"), "{warning}");
}
