//! The built-in sandbox tools through the runtime, on a real directory with real processes:
//! offered only with a sandbox, Flue's semantics (read truncates at 2000 lines / 50 KB and says
//! how to go on, write creates parents, edit replaces exact text and says when it is absent or
//! not unique), bash's exit code, output and timeout, grep and glob, host-set approvals, and the
//! sandbox reached from a user's plain and durable tools.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolwright::approval::RequestPolicy;
use toolwright::prelude::*;
use toolwright::registry::Format;
use toolwright::runtime::{
    CallResult, InputResponse, RespondOutcome, Runtime, SessionSpec, StepOutcome, ToolCall, Turn,
};
use toolwright::sandbox::LocalSandbox;
use toolwright::{Caller, ErrorCode};

use crate::support::{alice, builder, open_turn, text};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Notes {
    /// Which notes file.
    name: String,
}

/// Counts the lines of a notes file in the sandbox.
#[tool(effect = read)]
async fn count_lines(args: Notes, ctx: ToolContext) -> Result<usize, ToolError> {
    let sandbox = ctx.sandbox()?;
    let chunk = sandbox.read(&args.name, 0, 1 << 20).await?;
    Ok(chunk.data.iter().filter(|&&b| b == b'\n').count())
}

/// Archives a notes file in a journaled step.
#[tool(effect = write, durable)]
async fn archive(args: Notes, ctx: DurableContext) -> Result<String, ToolError> {
    let sandbox = ctx.sandbox()?;
    let target = format!("archive/{}", args.name);
    let written = ctx
        .step("copy", async {
            let chunk = sandbox.read(&args.name, 0, 1 << 20).await?;
            sandbox.write(&target, chunk.data).await?;
            Ok(target.clone())
        })
        .await?;
    Ok(written)
}

fn runtime(root: &Path) -> Runtime {
    // `bash` asks every time by default; the host relaxes `grep` to show the last setting wins.
    builder([count_lines::TOOL, archive::TOOL])
        .sandbox(LocalSandbox::open(root).unwrap())
        .sandbox_approval("grep", RequestPolicy::Always)
        .sandbox_approval("grep", RequestPolicy::Never)
        .build()
        .unwrap()
}

/// Approves the single request of `outcome` and returns the results of the resumed step.
async fn approved(rt: &Runtime, outcome: StepOutcome) -> Vec<CallResult> {
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("expected a request, got {outcome:?}");
    };
    let outcome = rt
        .respond(InputResponse::approve(
            &requests[0].request_id,
            Some(alice()),
        ))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("expected the approved call to run, got {outcome:?}");
    };
    results
        .into_iter()
        .map(std::sync::Arc::unwrap_or_clone)
        .collect()
}

async fn turn(rt: &Runtime) -> Turn {
    open_turn(rt, SessionSpec::new("s"), Some(alice()), Caller::Model).await
}

async fn run(turn: &Turn, name: &str, arguments: Value) -> CallResult {
    let call = ToolCall::new("c", name, arguments.to_string());
    match turn.step(vec![call]).await.unwrap() {
        StepOutcome::Completed { mut results, .. } => {
            std::sync::Arc::unwrap_or_clone(results.remove(0))
        }
        other => panic!("expected `{name}` to complete, got {other:?}"),
    }
}

#[tokio::test]
async fn the_builtin_tools_are_offered_only_with_a_sandbox() {
    let plain = builder([count_lines::TOOL]).build().unwrap();
    let list = turn(&plain)
        .await
        .tool_list(Format::Anthropic)
        .await
        .unwrap();
    assert!(!list.contains("\"bash\""), "{list}");
    // And a tool asking for the sandbox says there is none.
    let result = run(&turn(&plain).await, "count_lines", json!({ "name": "a" })).await;
    assert_eq!(
        result.error.as_ref().unwrap().code(),
        ErrorCode::MissingState
    );

    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let list: Value =
        serde_json::from_str(&turn(&rt).await.tool_list(Format::Anthropic).await.unwrap()).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for builtin in ["read", "write", "edit", "bash", "grep", "glob"] {
        assert!(names.contains(&builtin), "{names:?}");
    }
    let registry = rt.registry();
    let policy = |name: &str| {
        registry
            .get(name)
            .unwrap()
            .approval()
            .map(|a| a.request.name())
    };
    assert_eq!(policy("bash"), Some("always"));
    assert_eq!(policy("grep"), None, "the last setting wins");
    assert_eq!(policy("write"), None);
    assert_eq!(
        registry.get("read").unwrap().effect(),
        toolwright::Effect::Read
    );
    assert_eq!(
        registry.get("edit").unwrap().effect(),
        toolwright::Effect::Write
    );
    assert_eq!(
        registry.get("bash").unwrap().effect(),
        toolwright::Effect::Write
    );

    // Approvals name built-in tools only.
    let error = builder([])
        .sandbox(LocalSandbox::open(dir.path()).unwrap())
        .sandbox_approval("rm", RequestPolicy::Always)
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("`sandbox_approval(\"rm\""),
        "{error}"
    );
}

#[tokio::test]
async fn read_truncates_at_2000_lines_or_50_kb_and_says_how_to_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (1..=3000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("long.txt"), lines).unwrap();
    std::fs::write(
        dir.path().join("wide.txt"),
        "x".repeat(300) + "\n" + &"y".repeat(60_000),
    )
    .unwrap();
    std::fs::write(dir.path().join("blob.bin"), [0u8, 159, 146, 150, 0, 1, 2]).unwrap();
    let rt = runtime(dir.path());
    let turn = turn(&rt).await;

    let first = run(&turn, "read", json!({ "path": "long.txt" })).await;
    let body = text(&first);
    assert!(body.starts_with("line 1\nline 2\n"), "{}", &body[..40]);
    assert!(
        body.contains("line 2000\n\n[Showing lines 1-2000"),
        "{}",
        &body[body.len() - 200..]
    );
    assert!(
        body.contains("offset=2001"),
        "{}",
        &body[body.len() - 200..]
    );
    assert!(!body.contains("line 2001"));

    let rest = text(&run(&turn, "read", json!({ "path": "long.txt", "offset": 2001 })).await);
    assert!(
        rest.starts_with("line 2001\n") && rest.ends_with("line 3000"),
        "{}",
        &rest[rest.len() - 30..]
    );

    let window = text(
        &run(
            &turn,
            "read",
            json!({ "path": "long.txt", "offset": 10, "limit": 2 }),
        )
        .await,
    );
    assert!(
        window.starts_with("line 10\nline 11\n\n[Showing lines 10-11"),
        "{window}"
    );

    let wide = text(&run(&turn, "read", json!({ "path": "wide.txt" })).await);
    assert!(
        wide.contains("cut at 50 KB") && wide.contains("offset=2"),
        "{}",
        &wide[..wide.len().min(400)]
    );
    assert!(wide.len() < 51 * 1024);

    let binary = text(&run(&turn, "read", json!({ "path": "blob.bin" })).await);
    assert!(binary.contains("binary file"), "{binary}");

    // Exactly one line more than the limit: the notice, not a silently dropped line.
    std::fs::write(dir.path().join("four.txt"), "a\nb\nc\nd\n").unwrap();
    let three = text(&run(&turn, "read", json!({ "path": "four.txt", "limit": 3 })).await);
    assert!(
        three.starts_with("a\nb\nc\n\n[Showing lines 1-3") && three.contains("offset=4"),
        "{three}"
    );
    let all = text(&run(&turn, "read", json!({ "path": "four.txt", "limit": 4 })).await);
    assert_eq!(all, "a\nb\nc\nd");

    // One line over 50 KB: shown in part, saying so.
    std::fs::write(
        dir.path().join("one.txt"),
        "z".repeat(80_000) + "\nnext\r\n",
    )
    .unwrap();
    let long = text(&run(&turn, "read", json!({ "path": "one.txt" })).await);
    assert!(
        long.contains("Line 1 is 80000 bytes") && long.contains("offset=2"),
        "{}",
        &long[long.len() - 200..]
    );
    let next = text(&run(&turn, "read", json!({ "path": "one.txt", "offset": 2 })).await);
    assert_eq!(next, "next", "the CR of a CRLF line end is not shown");

    let escape = run(&turn, "read", json!({ "path": "../etc/passwd" })).await;
    assert!(
        escape.is_error && text(&escape).contains("outside the sandbox"),
        "{}",
        text(&escape)
    );
}

#[tokio::test]
async fn write_creates_parents_and_edit_replaces_exact_unique_text() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let turn = turn(&rt).await;
    let written = run(
        &turn,
        "write",
        json!({ "path": "docs/guide/intro.md", "content": "# Intro\nHello world.\nHello again.\n" }),
    )
    .await;
    assert!(!written.is_error, "{}", text(&written));
    let path = dir.path().join("docs/guide/intro.md");
    assert!(path.exists());

    let absent = run(
        &turn,
        "edit",
        json!({ "path": "docs/guide/intro.md", "old_text": "Goodbye", "new_text": "x" }),
    )
    .await;
    assert!(absent.is_error);
    assert!(text(&absent).contains("was not found"), "{}", text(&absent));
    let twice = run(
        &turn,
        "edit",
        json!({ "path": "docs/guide/intro.md", "old_text": "Hello", "new_text": "Hi" }),
    )
    .await;
    assert!(twice.is_error);
    assert!(text(&twice).contains("appears 2 times"), "{}", text(&twice));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# Intro\nHello world.\nHello again.\n"
    );

    std::fs::write(dir.path().join("aaa.txt"), "aaa").unwrap();
    let overlapping = run(
        &turn,
        "edit",
        json!({ "path": "aaa.txt", "old_text": "aa", "new_text": "b" }),
    )
    .await;
    assert!(
        text(&overlapping).contains("appears 2 times"),
        "{}",
        text(&overlapping)
    );

    let once = run(
        &turn,
        "edit",
        json!({ "path": "docs/guide/intro.md", "old_text": "Hello again.", "new_text": "Bye." }),
    )
    .await;
    assert!(!once.is_error, "{}", text(&once));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# Intro\nHello world.\nBye.\n"
    );
}

#[tokio::test]
async fn bash_reports_exit_code_output_and_timeout_and_asks_as_the_host_set() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let turn = turn(&rt).await;
    let call = |id: &str, command: &str, timeout: u64| {
        ToolCall::new(
            id,
            "bash",
            json!({ "command": command, "timeout_seconds": timeout }).to_string(),
        )
    };
    // `bash` asks first, every time, showing the command.
    let outcome = turn
        .step(vec![call("b1", "echo out; echo err >&2; exit 3", 30)])
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = &outcome else {
        panic!("bash asks first: {outcome:?}");
    };
    assert_eq!(
        requests[0].prompt,
        "Run the command \"echo out; echo err >&2; exit 3\" in the sandbox?"
    );
    let results = approved(&rt, outcome).await;
    let body = text(&results[0]);
    // A command cannot write its own prompt: line breaks and quotes show. A long one is never
    // cut in the middle (the cut could hide `rm -rf ~`): the prompt shows its start and says the
    // whole command is in the request's input, which holds it in full.
    let sneaky = format!(
        "ls\" in the sandbox? (read-only)\n{}rm -rf ~",
        " ".repeat(600)
    );
    let outcome = turn.step(vec![call("b0", &sneaky, 30)]).await.unwrap();
    let StepOutcome::Waiting { requests, .. } = &outcome else {
        panic!("bash asks first: {outcome:?}");
    };
    let prompt = &requests[0].prompt;
    assert!(
        prompt.starts_with("Run the command \"ls\\\" in the sandbox? (read-only)\\n   "),
        "{prompt}"
    );
    let total = sneaky.chars().count();
    assert!(
        prompt.ends_with(&format!(
            "{}…\" (too long to show here: the full command, {total} characters, is in the \
             request's input) in the sandbox?",
            " ".repeat(300 - "ls\" in the sandbox? (read-only)\n".len())
        )),
        "{prompt}"
    );
    assert!(!prompt.contains("rm -rf"), "{prompt}");
    assert_eq!(requests[0].input.as_ref().unwrap()["command"], sneaky);
    turn.cancel().await.unwrap();
    let turn = self::turn(&rt).await;
    assert!(
        body.contains("Exit code: 3")
            && body.contains("stdout:\nout")
            && body.contains("stderr:\nerr"),
        "{body}"
    );
    assert_eq!(results[0].output["exit_code"], 3);

    let outcome = turn.step(vec![call("b2", "sleep 30", 1)]).await.unwrap();
    let results = approved(&rt, outcome).await;
    assert!(
        text(&results[0]).contains("ran past 1s and was killed"),
        "{}",
        text(&results[0])
    );
    assert_eq!(results[0].output["timed_out"], true);

    // A policy the host sets keeps the prompt that shows what the call does.
    let rt = builder([])
        .sandbox(LocalSandbox::open(dir.path()).unwrap())
        .sandbox_approval("write", RequestPolicy::Always)
        .build()
        .unwrap();
    let turn = self::turn(&rt).await;
    let outcome = turn
        .step(vec![ToolCall::new(
            "w1",
            "write",
            json!({ "path": "a.txt", "content": "hello" }).to_string(),
        )])
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = &outcome else {
        panic!("write asks as the host set: {outcome:?}");
    };
    assert_eq!(
        requests[0].prompt,
        "Write 5 bytes to \"a.txt\" in the sandbox?"
    );
}

#[tokio::test]
async fn grep_and_glob_find_lines_and_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
    std::fs::write(
        dir.path().join("src/main.rs"),
        "fn main() {\n    follow_up()\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("src/deep/lib.rs"),
        "// Follow-up: later\npub fn f() {}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "follow-up list\n").unwrap();
    let rt = runtime(dir.path());
    let turn = turn(&rt).await;

    let found = run(
        &turn,
        "grep",
        json!({ "pattern": "follow.up", "case_insensitive": true, "glob": "*.rs" }),
    )
    .await;
    assert_eq!(
        text(&found),
        "src/deep/lib.rs:1: // Follow-up: later\nsrc/main.rs:2:     follow_up()"
    );
    let none = run(&turn, "grep", json!({ "pattern": "absent_word" })).await;
    assert!(text(&none).contains("No line matches"), "{}", text(&none));

    let files = run(&turn, "glob", json!({ "pattern": "**/*.rs" })).await;
    assert_eq!(text(&files), "src/deep/lib.rs\nsrc/main.rs");
}

#[tokio::test]
async fn user_tools_reach_the_sandbox_from_plain_and_durable_contexts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "a\nb\nc\n").unwrap();
    let rt = runtime(dir.path());
    let turn = turn(&rt).await;
    let counted = run(&turn, "count_lines", json!({ "name": "notes.txt" })).await;
    assert_eq!(counted.output, json!(3));
    let archived = run(&turn, "archive", json!({ "name": "notes.txt" })).await;
    assert!(!archived.is_error, "{}", text(&archived));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("archive/notes.txt")).unwrap(),
        "a\nb\nc\n"
    );
}

#[tokio::test]
async fn edits_of_one_file_in_one_step_both_land() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("list.txt"), "alpha\nbeta\n").unwrap();
    let rt = runtime(dir.path());
    let turn = turn(&rt).await;
    let edit = |id: &str, old: &str, new: &str| {
        ToolCall::new(
            id,
            "edit",
            json!({ "path": "list.txt", "old_text": old, "new_text": new }).to_string(),
        )
    };
    // The calls of a step run at once; neither may start from the original and undo the other.
    let outcome = turn
        .step(vec![
            edit("e1", "alpha", "ALPHA"),
            edit("e2", "beta", "BETA"),
        ])
        .await
        .unwrap();
    let StepOutcome::Completed { results, .. } = outcome else {
        panic!("expected both edits to run, got {outcome:?}");
    };
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("list.txt")).unwrap(),
        "ALPHA\nBETA\n"
    );
}

/// Sandbox errors quote at most a bounded prefix of a path or pattern the model sent: a 100 kB
/// path comes back as its first 200 characters and a count, through the built-in tools and
/// through a tool of the user's that passes the path on.
#[tokio::test]
async fn sandbox_errors_quote_a_bounded_prefix_of_a_100_kb_path() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let turn = turn(&rt).await;
    let path = "ab/".repeat(33_334);
    let cases = [
        ("read", json!({ "path": path })),
        ("read", json!({ "path": format!("/{path}") })),
        ("read", json!({ "path": format!("../{path}") })),
        ("count_lines", json!({ "name": path })),
        ("glob", json!({ "pattern": format!("[{path}") })),
        ("grep", json!({ "pattern": format!("({path}") })),
    ];
    for (tool, arguments) in cases {
        let result = run(&turn, tool, arguments).await;
        let message = text(&result);
        assert!(result.is_error, "{tool}: {message}");
        assert!(
            message.chars().count() < 1_000,
            "{tool}: a {} character message: {}…",
            message.chars().count(),
            message.chars().take(300).collect::<String>()
        );
        assert!(message.contains("more characters)"), "{tool}: {message}");
    }

    // The sandbox's own errors, as a host's code sees them.
    let sandbox = LocalSandbox::open(dir.path()).unwrap();
    let error = toolwright::sandbox::Sandbox::read(&sandbox, &path, 0, 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("`{}… (99802 more characters)`", &path[..200])),
        "{}",
        &error[..400.min(error.len())]
    );
}
