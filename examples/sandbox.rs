//! The built-in sandbox tools over a `LocalSandbox`, driven the way a model drives them: write a
//! file (parents created), edit it, read it back, grep and glob, run a command (approved first:
//! `bash` asks every time), and try to leave the root.
//!
//! ```sh
//! cargo run --example sandbox                 # in a fresh temporary directory
//! cargo run --example sandbox -- --dir ./work # in a directory of yours
//! ```

use std::sync::Arc;

use serde_json::{Value, json};
use toolwright::runtime::{
    CallResult, InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore, StepOutcome,
    ToolCall, Turn,
};
use toolwright::sandbox::LocalSandbox;
use toolwright::{Caller, ModelOutput, Principal, Registry};

/// What the model would read of a result.
fn shown(result: &CallResult) -> String {
    let text = match &*result.model() {
        ModelOutput::Text(text) => text.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    let mark = if result.is_error { "error" } else { "ok" };
    format!("[{} {mark}] {}", result.tool, text.trim_end())
}

async fn call(turn: &Turn, id: &str, tool: &str, input: Value) -> StepOutcome {
    turn.step(vec![ToolCall::new(id, tool, input.to_string())])
        .await
        .expect("the step runs")
}

fn results(outcome: StepOutcome) -> Vec<Arc<CallResult>> {
    match outcome {
        StepOutcome::Completed { results, .. } => results,
        StepOutcome::Waiting { .. } => panic!("unexpected request"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let scratch;
    let root = match args.iter().position(|a| a == "--dir") {
        Some(i) => {
            let dir = std::path::PathBuf::from(args.get(i + 1).ok_or("--dir needs a path")?);
            std::fs::create_dir_all(&dir)?;
            dir
        }
        None => {
            scratch = tempfile::tempdir()?;
            scratch.path().to_path_buf()
        }
    };
    println!("sandbox root: {}\n", root.display());

    // No `#[tool]`s of our own: the sandbox brings `read`, `write`, `edit`, `bash`, `grep`, `glob`.
    // The `bash` approval is answered in this run: a store in memory (gone at exit) is enough.
    let runtime = Runtime::builder(Registry::from_tools([])?)
        .store(SqliteStore::in_memory()?)
        .sandbox(LocalSandbox::open(&root)?)
        .build()?;
    let you = Principal::user("local", "you");
    let session = runtime
        .open_session(SessionSpec::new("sandbox-demo"))
        .await?;
    let turn = session.begin_turn(Some(you.clone()), Caller::Model).await?;

    let steps = [
        (
            "write",
            json!({ "path": "notes/plan.md", "content": "# Plan\n- draft the report\n- send it to Ana\n" }),
        ),
        (
            "edit",
            json!({ "path": "notes/plan.md", "old_text": "send it to Ana", "new_text": "send it to Ana on Friday" }),
        ),
        // Absent text is an error that says so.
        (
            "edit",
            json!({ "path": "notes/plan.md", "old_text": "Monday", "new_text": "Tuesday" }),
        ),
        ("read", json!({ "path": "notes/plan.md" })),
        ("grep", json!({ "pattern": "Ana|report" })),
        ("glob", json!({ "pattern": "**/*.md" })),
        // `..`, absolute paths and symlinks out are refused by every operation.
        ("read", json!({ "path": "../../etc/passwd" })),
    ];
    for (i, (tool, input)) in steps.into_iter().enumerate() {
        for result in results(call(&turn, &format!("c{i}"), tool, input).await) {
            println!("{}\n", shown(&result));
        }
    }

    // `bash` asks a person every time (a command runs with the host user's rights).
    let outcome = call(
        &turn,
        "c-bash",
        "bash",
        json!({ "command": "wc -l notes/plan.md && echo done" }),
    )
    .await;
    let StepOutcome::Waiting { requests, .. } = outcome else {
        return Err("bash asks first".into());
    };
    println!("approval requested: {}", requests[0].prompt);
    let outcome = runtime
        .respond(InputResponse::approve(&requests[0].request_id, Some(you)))
        .await?;
    if let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome {
        println!("approved\n{}", shown(&results[0]));
    }
    turn.complete().await?;
    Ok(())
}
