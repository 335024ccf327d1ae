//! Tools of a remote MCP server under toolwright's policies: the official reference server
//! `@modelcontextprotocol/server-everything` over stdio, as an untrusted connection with one
//! tool overridden.
//!
//! ```sh
//! cargo run --example remote_tools
//! ```
//!
//! It runs the server installed by `scripts/setup-clients` when it is there, else through
//! `npx -y @modelcontextprotocol/server-everything@2026.8.31` (Node.js needed either way).

use std::path::Path;

use serde_json::json;
use toolwright::approval::RequestPolicy;
use toolwright::mcp::McpConnector;
use toolwright::registry::Format;
use toolwright::runtime::{
    Connection, InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore, StepOutcome,
    ToolCall, ToolOverride,
};
use toolwright::{Caller, Effect, Principal, Registry};

fn everything() -> McpConnector {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/mcp-clients/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    if installed.exists() {
        McpConnector::stdio("node").args([installed.as_os_str(), "stdio".as_ref()])
    } else {
        McpConnector::stdio("npx").args([
            "-y",
            "@modelcontextprotocol/server-everything@2026.8.31",
            "stdio",
        ])
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Untrusted (the default): every tool is `write`, taints the turn, and asks `once` per input —
    // whatever the server's annotations say. `get-sum` is overridden: a pure function.
    let connection = Connection::new("everything", everything())
        .allow(["echo", "get-sum"])
        .tool(
            "get-sum",
            ToolOverride::new()
                .effect(Effect::Read)
                .untrusted(false)
                .approval(RequestPolicy::Never),
        );
    // The approval below is answered in this run: a store in memory (gone at exit) is enough.
    let runtime = Runtime::builder(Registry::from_tools([])?)
        .store(SqliteStore::in_memory()?)
        .connection(connection)
        .build()?;
    runtime.connect().await?;

    let session = runtime.open_session(SessionSpec::new("demo")).await?;
    let you = Principal::user("local", "you");
    let turn = session.begin_turn(Some(you.clone()), Caller::Model).await?;
    println!(
        "tools for the model: {}\n",
        turn.tool_list(Format::Anthropic).await?
    );

    let sum = ToolCall::new(
        "c1",
        "everything__get-sum",
        json!({ "a": 2, "b": 3 }).to_string(),
    );
    if let StepOutcome::Completed { results, .. } = turn.step(vec![sum]).await? {
        println!("everything__get-sum ran at once: {:?}", results[0].model());
    }

    let echo = ToolCall::new(
        "c2",
        "everything__echo",
        json!({ "message": "hello" }).to_string(),
    );
    let StepOutcome::Waiting { requests, .. } = turn.step(vec![echo]).await? else {
        return Err("an untrusted tool asks first".into());
    };
    println!(
        "\napproval requested: {} ({:?})",
        requests[0].prompt, requests[0].reasons
    );
    let outcome = runtime
        .respond(InputResponse::approve(&requests[0].request_id, Some(you)))
        .await?;
    if let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome {
        println!(
            "approved; everything__echo returned {:?}",
            results[0].model()
        );
    }
    let record = turn.record().await?;
    println!(
        "\nthe turn is now tainted by {:?}: its `write` calls ask again",
        record.tainted_by
    );
    Ok(())
}
