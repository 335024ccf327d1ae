//! Real MCP clients against the example server (`examples/mcp_server.rs`, the seeds' tools on a
//! SQLite file): the official TypeScript SDK from npm over stdio and over streamable HTTP, and the
//! official Python SDK from PyPI over streamable HTTP. `scripts/setup-clients` installs both
//! (`scripts/test` runs it); a missing client fails these tests rather than skipping them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

mod support;

use support::programs::{example, python, root};

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
    // The approval was asked through elicitation, accepted, and the call ran as the user.
    assert_eq!(
        found["asked"][0],
        "Restart payment-api? Every instance rolls and is unavailable for 10-30 s. Reason: memory leak after the 2.3 deploy"
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
