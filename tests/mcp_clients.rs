//! Real MCP clients against the example server (`examples/mcp_server.rs`, the seeds' tools on a
//! SQLite file): the official TypeScript SDKs (v1 and v2) from npm over stdio and over streamable
//! HTTP, the official Python SDK from PyPI over stdio and HTTP, and the MCP Inspector's CLI mode
//! on Node 22 over stdio and HTTP. `scripts/setup-clients` installs them (`scripts/test` runs it);
//! a missing client fails these tests rather than skipping them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

mod support;

use support::programs::{example, inspector_cli, python, root};

/// The example server's binary.
fn server_binary() -> PathBuf {
    example("mcp_server")
}

fn node_client() -> PathBuf {
    let dir = root().join("tests/mcp-clients/node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "the TypeScript MCP SDK is not installed; run `scripts/setup-clients` (`scripts/test` does)"
    );
    dir.join("client.mjs")
}

/// The JSON lines a client printed, by key.
fn findings(output: &std::process::Output) -> serde_json::Map<String, Value> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // A schema keyword a client's validator does not know is noise in every host's logs.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("unknown format"),
        "the client's validator met a format it does not know:\n{stderr}"
    );
    let mut found = serde_json::Map::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        if let Ok(Value::Object(map)) = serde_json::from_str(line) {
            found.extend(map);
        }
    }
    found
}

/// The example server over HTTP on a free loopback port, requiring `token`.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(db: &Path, token: &str) -> Self {
        let mut child = Command::new(server_binary())
            .args(["--addr", "127.0.0.1:0", "--token", token, "--db"])
            .arg(db)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_owned();
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn check_typescript_findings(found: &serde_json::Map<String, Value>, user: &str) {
    assert_eq!(found["server"]["name"], "toolwright");
    let tools: Vec<&str> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"restart_service") && tools.contains(&"tool_search"),
        "{tools:?}"
    );
    assert!(!tools.contains(&"freeze_deploys_user_only"), "{tools:?}");
    let status_tool = &found["status_tool"];
    assert_eq!(status_tool["title"], "Service status");
    assert_eq!(status_tool["annotations"]["readOnlyHint"], true);
    assert!(status_tool["outputSchema"].is_object());
    assert_eq!(
        found["status"]["structuredContent"]["service"],
        "payment-api"
    );
    assert_eq!(found["status"]["isError"], false);
    // The approval was asked through elicitation, with the call's input in full, accepted,
    // and the call ran as the user.
    let asked = found["asked"][0].as_str().unwrap();
    assert!(
        asked.starts_with(
            "Restart payment-api? Every instance rolls and is unavailable for 10-30 s. Reason: memory leak after the 2.3 deploy"
        ),
        "{asked}"
    );
    assert!(
        asked.contains("\"service\": \"payment-api\"")
            && asked.contains("\"reason\": \"memory leak after the 2.3 deploy\""),
        "{asked}"
    );
    assert_eq!(found["restart"]["structuredContent"]["restarted"], true);
    assert_eq!(
        found["restart"]["structuredContent"]["change"]["requested_by"],
        user
    );
    // Invalid input is an error result naming the field and what to do.
    assert_eq!(found["invalid"]["isError"], true);
    let message = found["invalid"]["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("/service") && message.contains("call `get_service_status` again"),
        "{message}"
    );
}

#[test]
fn the_typescript_sdk_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new("node")
        .arg(node_client())
        .arg("stdio")
        .arg(server_binary())
        .args(["--stdio", "--db"])
        .arg(dir.path().join("db"))
        .output()
        .unwrap();
    check_typescript_findings(&findings(&output), "you");
}

#[test]
fn the_typescript_sdk_over_streamable_http_with_a_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(&dir.path().join("db"), "s3cret");
    let output = Command::new("node")
        .arg(node_client())
        .args(["http", &server.url, "s3cret"])
        .output()
        .unwrap();
    let found = findings(&output);
    assert_eq!(found["protocol"], "2025-11-25");
    check_typescript_findings(&found, "mcp-user");

    // A wrong token is refused before any MCP message is read.
    let refused = Command::new("node")
        .arg(node_client())
        .args(["http", &server.url, "wrong"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("401"), "{stderr}");
}

#[test]
fn the_python_sdk_over_streamable_http_declining_an_approval() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(&dir.path().join("db"), "py-token");
    let output = Command::new(python())
        .arg(root().join("tests/mcp-clients/python/client.py"))
        .args([&server.url, "py-token", "decline"])
        .output()
        .unwrap();
    let found = findings(&output);
    assert_eq!(found["server"], "toolwright");
    assert_eq!(found["protocol"], "2025-11-25");
    assert_eq!(found["status"]["structuredContent"]["status"], "degraded");
    assert_eq!(found["asked"].as_array().unwrap().len(), 1);
    // Declined: an error result, and the restart did not happen.
    assert_eq!(found["restart"]["isError"], true);
    let message = found["restart"]["content"][0]["text"].as_str().unwrap();
    assert!(message.contains("declined `restart_service`"), "{message}");
}

#[test]
fn the_v2_typescript_sdk_on_2026_07_28_answers_through_input_required_results() {
    let script = node_client().with_file_name("client-v2.mjs");
    assert!(
        script
            .with_file_name("node_modules/@modelcontextprotocol/client")
            .exists(),
        "the v2 TypeScript MCP SDK is not installed; run `scripts/setup-clients`"
    );
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new("node")
        .arg(script)
        .arg(server_binary())
        .args(["--stdio", "--db"])
        .arg(dir.path().join("db"))
        .output()
        .unwrap();
    let found = findings(&output);
    // No `initialize`, no server-to-client requests: the approval came back in an
    // `input_required` result and the SDK called again with the answer.
    assert_eq!(found["protocol"], "2026-07-28");
    assert_eq!(
        found["status"]["structuredContent"]["service"],
        "payment-api"
    );
    assert_eq!(found["asked"].as_array().unwrap().len(), 1);
    assert_eq!(found["restart"]["structuredContent"]["restarted"], true);
}

/// What the taint scenario (`tests/mcp-clients/node/taint.mjs`) found: the recharge's request
/// showed its amount; after the untrusted read every write asked, in the same turn, after an
/// `ends_turn` tool, after an approval, and after a failed elicitation.
fn check_taint_findings(found: &serde_json::Map<String, Value>) {
    assert_eq!(
        found["recharge"]["isError"], false,
        "{:?}",
        found["recharge"]
    );
    assert_eq!(
        found["recharge"]["structuredContent"]["amount_cents"],
        50000
    );
    let recharge_asked = found["recharge_asked"].as_array().unwrap();
    assert_eq!(recharge_asked.len(), 1, "{recharge_asked:?}");
    let message = recharge_asked[0].as_str().unwrap();
    assert!(
        message.contains("\"amount_cents\": 50000") && message.contains("`wallet__recharge`"),
        "the person sees the amount: {message}"
    );

    assert_eq!(
        found["clean_asked"], 0,
        "a write before any untrusted output runs at once"
    );
    assert_eq!(found["clean_write"]["isError"], false);
    assert_eq!(found["read"]["isError"], false);

    let steps = found["steps"].as_array().unwrap();
    let step = |label: &str| {
        steps
            .iter()
            .find(|s| s["label"] == label)
            .unwrap_or_else(|| panic!("no step {label} in {steps:?}"))
    };
    for label in [
        "write_after_read",
        "ends_turn",
        "write_after_ends_turn",
        "write_failed_elicitation",
        "write_after_failed_elicitation",
    ] {
        assert_eq!(step(label)["asked"], 1, "{label} asked the user: {steps:?}");
    }
    for label in [
        "write_after_read",
        "ends_turn",
        "write_after_ends_turn",
        "write_after_failed_elicitation",
    ] {
        assert_eq!(
            step(label)["result"]["isError"],
            false,
            "{label} ran once approved: {steps:?}"
        );
    }
    // The failed elicitation approved nothing.
    let failed = &step("write_failed_elicitation")["result"];
    assert!(
        failed["isError"] == true || failed.get("thrown").is_some(),
        "{failed:?}"
    );
    // Each write's request names the untrusted source.
    let asked = found["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 5, "{asked:?}");
    for message in asked {
        assert!(
            message.as_str().unwrap().contains("treehole__read"),
            "{message}"
        );
    }
}

#[test]
fn taint_lasts_for_the_mcp_session_with_the_v1_sdk_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new("node")
        .arg(node_client())
        .arg("stdio")
        .arg(server_binary())
        .args(["--stdio", "--db"])
        .arg(dir.path().join("stdio-db"))
        .env("MCP_SCENARIO", "taint")
        .output()
        .unwrap();
    check_taint_findings(&findings(&output));

    let server = HttpServer::start(&dir.path().join("http-db"), "t0ken");
    let output = Command::new("node")
        .arg(node_client())
        .args(["http", &server.url, "t0ken"])
        .env("MCP_SCENARIO", "taint")
        .output()
        .unwrap();
    check_taint_findings(&findings(&output));
}

fn v2_client() -> PathBuf {
    let script = node_client().with_file_name("client-v2.mjs");
    assert!(
        script
            .with_file_name("node_modules/@modelcontextprotocol/client")
            .exists(),
        "the v2 TypeScript MCP SDK is not installed; run `scripts/setup-clients`"
    );
    script
}

#[test]
fn taint_lasts_across_the_stateless_requests_of_the_v2_sdk_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new("node")
        .arg(v2_client())
        .arg(server_binary())
        .args(["--stdio", "--db"])
        .arg(dir.path().join("stdio-db"))
        .env("MCP_SCENARIO", "taint")
        .output()
        .unwrap();
    let found = findings(&output);
    assert_eq!(found["protocol"], "2026-07-28");
    check_taint_findings(&found);

    // Over HTTP every request stands alone: they share a binding by principal and by the
    // host's `Toolwright-Session` header.
    let server = HttpServer::start(&dir.path().join("http-db"), "t0ken");
    let v2_http = |scenario: &str, conversation: &str| {
        let output = Command::new("node")
            .arg(v2_client())
            .args(["http", &server.url, "t0ken", conversation])
            .env("MCP_SCENARIO", scenario)
            .output()
            .unwrap();
        findings(&output)
    };
    let found = v2_http("taint", "chat-1");
    assert_eq!(found["protocol"], "2026-07-28");
    check_taint_findings(&found);
    // Another client process in the same conversation is still tainted: a model that drops
    // whatever it carried cannot shed the taint.
    let same = v2_http("write", "chat-1");
    assert_eq!(same["asked"].as_array().unwrap().len(), 1, "{same:?}");
    assert_eq!(same["write"]["isError"], false);
    // Another conversation of the same user starts clean.
    let other = v2_http("write", "chat-2");
    assert_eq!(other["asked"].as_array().unwrap().len(), 0, "{other:?}");
    assert_eq!(other["write"]["isError"], false);
}

#[test]
fn duplicate_keys_in_arguments_are_refused_over_stdio_as_in_process() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(server_binary())
        .args(["--stdio", "--db"])
        .arg(dir.path().join("db"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let arguments = r#"{"amount_cents": 100, "amount_cents": 50000}"#;
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"wallet__recharge","arguments":{arguments}}}}}"#
        ),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wallet__recharge","arguments":"50000"}}"#.to_owned(),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 3 {
        let line = lines.next().expect("the server answers").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = message["id"].as_i64() {
            answers.insert(id, message);
        }
    }
    drop(stdin);
    let _ = child.wait();
    // Refused as in process: an error result the model reads, with the parser's message.
    let duplicate = &answers[&2]["result"];
    assert_eq!(duplicate["isError"], true, "{:?}", answers[&2]);
    let in_process = toolwright::json::parse_arguments("wallet__recharge", arguments)
        .unwrap_err()
        .to_string();
    assert_eq!(duplicate["content"][0]["text"], in_process.as_str());
    let not_an_object = &answers[&3]["error"];
    assert_eq!(not_an_object["code"], -32602, "{not_an_object}");
    assert!(
        not_an_object["message"]
            .as_str()
            .unwrap()
            .contains("`arguments` must be a JSON object"),
        "{not_an_object}"
    );
}

#[test]
fn taint_lasts_for_the_mcp_session_with_the_python_sdk_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(python())
        .arg(root().join("tests/mcp-clients/python/client.py"))
        .args(["stdio", "accept"])
        .arg(server_binary())
        .args(["--stdio", "--db"])
        .arg(dir.path().join("stdio-db"))
        .env("MCP_SCENARIO", "taint")
        .output()
        .unwrap();
    let found = findings(&output);
    assert_eq!(found["protocol"], "2025-11-25");
    check_taint_findings(&found);

    let server = HttpServer::start(&dir.path().join("http-db"), "py-t0ken");
    let output = Command::new(python())
        .arg(root().join("tests/mcp-clients/python/client.py"))
        .args([&server.url, "py-t0ken", "accept"])
        .env("MCP_SCENARIO", "taint")
        .output()
        .unwrap();
    let found = findings(&output);
    assert_eq!(found["protocol"], "2025-11-25");
    check_taint_findings(&found);
}

/// What one run of the MCP Inspector's CLI printed: its exit code and its one JSON value.
fn inspect(home: &Path, target: &[&str], method: &[&str]) -> (i32, Value) {
    let output = inspector_cli(home)
        .args(target)
        .args(["--method"])
        .args(method)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the Inspector printed no JSON ({e}, {}):\n{stdout}\n{stderr}",
            output.status
        )
    });
    (output.status.code().unwrap_or(-1), value)
}

/// The Inspector's `tools/list` and `tools/call` of the main job, over one transport.
fn check_inspector(home: &Path, target: &[&str]) {
    // `--strict`: a schema problem the Inspector rates an error (not a portability warning)
    // exits 6.
    let (code, listed) = inspect(home, target, &["tools/list", "--strict"]);
    assert_eq!(code, 0, "{listed}");
    let tools = listed["result"]["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in the Inspector's list"))
    };
    for name in [
        "restart_service",
        "treehole__read",
        "wallet__recharge",
        "tool_search",
    ] {
        tool(name);
    }
    assert!(
        tools
            .iter()
            .all(|t| t["name"] != "freeze_deploys_user_only")
    );
    let status = tool("get_service_status");
    assert_eq!(status["title"], "Service status");
    assert_eq!(status["annotations"]["readOnlyHint"], true);
    assert_eq!(status["inputSchema"]["type"], "object");
    assert_eq!(
        status["inputSchema"]["required"],
        serde_json::json!(["service"])
    );
    assert_eq!(
        status["inputSchema"]["properties"]["service"]["type"],
        "string"
    );
    assert_eq!(status["outputSchema"]["type"], "object");

    let (code, called) = inspect(
        home,
        target,
        &[
            "tools/call",
            "--tool-name",
            "get_service_status",
            "--tool-arg",
            "service=payment-api",
        ],
    );
    assert_eq!(code, 0, "{called}");
    let result = &called["result"];
    assert_eq!(result["isError"], false, "{called}");
    assert_eq!(result["structuredContent"]["service"], "payment-api");
    assert_eq!(result["structuredContent"]["status"], "degraded");

    // The Inspector's CLI declares no elicitation: a call that needs the user's approval is
    // refused with the reason, and nothing runs (the CLI exits 5 on an error result).
    let (code, refused) = inspect(
        home,
        target,
        &[
            "tools/call",
            "--tool-name",
            "restart_service",
            "--tool-arg",
            "service=payment-api",
            "reason=memory leak after the 2.3 deploy",
        ],
    );
    assert_eq!(code, 5, "{refused}");
    let message = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("supports no elicitation") && message.contains("nothing ran"),
        "{message}"
    );
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_tools_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_binary();
    let db = dir.path().join("db");
    let target = [
        server.to_str().unwrap(),
        "--stdio",
        "--db",
        db.to_str().unwrap(),
    ];
    check_inspector(dir.path(), &target);
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_tools_over_streamable_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(&dir.path().join("db"), "insp3ctor");
    let target = [
        server.url.as_str(),
        "--header",
        "Authorization: Bearer insp3ctor",
    ];
    check_inspector(dir.path(), &target);
}

/// Each run of the Inspector's CLI is an MCP session of its own, so on 2025-11-25 taint cannot
/// carry from one run to the next; on 2026-07-28 its requests join the binding of their
/// principal and `Toolwright-Session`, which the v2 SDK's requests share.
#[test]
fn the_mcp_inspector_cli_is_one_session_a_run_and_joins_the_2026_07_28_binding() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(&dir.path().join("db"), "t0ken");
    let auth = "Authorization: Bearer t0ken";
    let read = ["tools/call", "--tool-name", "treehole__read"];
    let write = ["tools/call", "--tool-name", "treehole__send_code"];

    // 2025-11-25: the untrusted read's session ends with the run; the next run starts clean.
    let (code, found) = inspect(dir.path(), &[&server.url, "--header", auth], &read);
    assert_eq!(
        (code, &found["result"]["isError"]),
        (0, &Value::Bool(false))
    );
    let (code, found) = inspect(dir.path(), &[&server.url, "--header", auth], &write);
    assert_eq!(code, 0, "a new MCP session is not tainted: {found}");
    assert_eq!(found["result"]["structuredContent"]["sent"], true);

    // 2026-07-28: the Inspector's untrusted read taints the conversation `chat-1`, and the v2
    // SDK's write in it asks the user; `chat-2` is clean.
    let modern = [
        server.url.as_str(),
        "--protocol-era",
        "modern",
        "--header",
        auth,
        "--header",
        "Toolwright-Session: chat-1",
    ];
    let (code, found) = inspect(dir.path(), &modern, &read);
    assert_eq!(
        (code, &found["result"]["isError"]),
        (0, &Value::Bool(false))
    );
    let v2_write = |conversation: &str| {
        let output = Command::new("node")
            .arg(v2_client())
            .args(["http", &server.url, "t0ken", conversation])
            .env("MCP_SCENARIO", "write")
            .output()
            .unwrap();
        findings(&output)
    };
    let tainted = v2_write("chat-1");
    let asked = tainted["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{tainted:?}");
    assert!(
        asked[0].as_str().unwrap().contains("treehole__read"),
        "{asked:?}"
    );
    assert_eq!(tainted["write"]["isError"], false);
    let clean = v2_write("chat-2");
    assert_eq!(clean["asked"].as_array().unwrap().len(), 0, "{clean:?}");

    // The approval covered one call, not the taint: the Inspector's own write in `chat-1` needs
    // the user too, and the Inspector declares no elicitation, so it is told so and nothing runs.
    let (code, refused) = inspect(dir.path(), &modern, &write);
    assert_eq!(code, 5, "{refused}");
    let message = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("supports no elicitation") && message.contains("treehole__read"),
        "{message}"
    );
}
