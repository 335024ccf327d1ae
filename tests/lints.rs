//! Tools of every kind expanded in a crate that denies the strictest lints: the code `#[tool]`
//! and `#[derive(ToolInput)]` generate must not trip a lint in a user's crate. Compiled by
//! `cargo clippy --all-targets -- -D warnings` and by `cargo test`.
//!
//! Every listed lint is denied; none had to be dropped.

#![deny(
    unused_qualifications,
    unused_imports,
    unused_results,
    non_camel_case_types,
    dead_code,
    missing_docs,
    clippy::all,
    clippy::pedantic
)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

/// Arguments of the deploy tools.
#[derive(Debug, Deserialize, JsonSchema, ToolInput)]
pub struct Deploy {
    /// The service to deploy.
    pub service: String,
    /// The version to deploy.
    pub version: String,
}

/// The result of a deploy.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deployed {
    /// The deployed service.
    pub service: String,
    /// Whether it came up healthy.
    pub healthy: bool,
}

/// Deploys a version and reports progress.
///
/// # Errors
///
/// Never; the signature shows the usual shape.
#[tool(
    effect = write,
    title = "Deploy",
    summary = "Deploys one version of a service",
    approval(request = once, prompt = "Deploy {service} {version}?", response = ops_only),
    approval_key = input,
    label(start = "Deploying {service}", delta = progress, complete = "Deployed {service}"),
    ends_turn = unhealthy,
    output_schema,
    to_model_output = summarize,
    annotations(idempotent = true),
)]
pub async fn deploy(args: Deploy, ctx: ToolContext) -> Result<Deployed, ToolError> {
    ctx.partial(&serde_json::json!({ "percent": 50 }));
    std::future::ready(()).await;
    Ok(Deployed {
        service: format!("{}@{}", args.service, args.version),
        healthy: true,
    })
}

fn ops_only(cx: &ResponseContext<'_, Deploy>) -> ResponseVerdict {
    if cx.responder.is_some() {
        ResponseVerdict::Allowed
    } else {
        ResponseVerdict::rejected("sign in")
    }
}

fn progress(args: &Deploy, partial: &serde_json::Value) -> String {
    format!("Deploying {}: {}%", args.service, partial["percent"])
}

fn unhealthy(out: &Deployed) -> bool {
    !out.healthy
}

fn summarize(out: &Deployed) -> ModelOutput {
    ModelOutput::text(out.service.clone())
}

/// Refunds a charge after a policy fn decided.
#[tool(effect = money, approval = refund_policy, toolset = "wallet", i18n(en(title = "Refund")))]
#[must_use]
pub fn refund(args: Deploy) -> u64 {
    let Deploy { service, version } = args;
    u64::try_from(service.len() + version.len()).unwrap_or_default()
}

async fn refund_policy(cx: &ApprovalContext<'_, Deploy>) -> ApprovalDecision {
    std::future::ready(()).await;
    if cx.input.service.is_empty() {
        ApprovalDecision::denied("no service")
    } else {
        ApprovalDecision::UserApproval
    }
}

/// Rolls back with journaled steps.
///
/// # Errors
///
/// When the journal cannot record the step.
#[tool(effect = write, durable, deferred, subagents = false, label(start = starting, complete = finished))]
pub async fn rollback(args: Deploy, ctx: DurableContext) -> Result<String, ToolError> {
    let version = ctx
        .step("previous", async { Ok(format!("{}-1", args.version)) })
        .await?;
    Ok(format!("{} {version}", args.service))
}

fn starting(args: &Deploy) -> String {
    format!("Rolling back {}", args.service)
}

fn finished(args: &Deploy, out: &String) -> String {
    format!("Rolled back {}: {out}", args.service)
}

/// Counters shared by the tools.
#[derive(Debug)]
pub struct Counters {
    /// Calls so far.
    pub calls: u64,
}

/// Seeds a project as a workflow, asking first.
///
/// # Errors
///
/// When no person can be asked.
#[tool(effect = write, workflow = execute, enabled = beta, approval = once, approval_key = key_of)]
pub async fn seed(
    args: Deploy,
    ctx: WorkflowContext,
    counters: State<Counters>,
) -> Result<u64, ToolError> {
    let answer = ctx
        .ask(AskRequest::new(format!("Seed {}?", args.service)))
        .await?;
    Ok(if answer.chose("yes") {
        counters.calls
    } else {
        0
    })
}

fn beta(cx: &EnabledContext<'_>) -> bool {
    cx.flag("beta")
}

fn key_of(args: &Deploy) -> String {
    args.version.clone()
}

/// A revision request for the serve tool.
#[derive(Debug, Deserialize, JsonSchema, ToolInput)]
pub struct Revise {
    /// What to change.
    pub goal: String,
}

/// A plan.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Plan {
    /// Its steps.
    pub steps: Vec<String>,
}

/// Drafts a plan and revises it on request.
#[tool(effect = read, workflow = serve, output_schema, untrusted)]
pub async fn plan(mut calls: ServeCalls<Revise, Plan>, ctx: WorkflowContext) {
    while let Some(call) = calls.next().await {
        let steps = vec![call.input.goal.clone(), ctx.call_id().to_owned()];
        call.reply(Plan { steps });
    }
}

/// The time, as a plain value.
#[tool(effect = read, user_only)]
#[must_use]
pub fn now(_: NoInput) -> u64 {
    42
}

mod private {
    use toolwright::prelude::*;

    /// A crate-private tool in a private module, taking no context.
    #[tool(effect = read, name = "ping")]
    pub(crate) fn ping(_: NoInput) -> &'static str {
        "pong"
    }
}

#[test]
fn the_registry_collects_them() {
    let registry = Registry::from_tools([
        deploy::TOOL,
        refund::TOOL,
        rollback::TOOL,
        seed::TOOL,
        plan::TOOL,
        now::TOOL,
        private::ping::TOOL,
    ])
    .expect("valid tools");
    assert_eq!(registry.tools().len(), 7);
    assert!(registry.get("wallet__refund").is_some());
    assert_eq!(now(NoInput {}), 42);
}

/// The structure checks read the workspace's sources; their reader is shared with
/// `tests/layers.rs`, which uses other parts of it.
#[allow(dead_code)]
mod source;

/// The most lines of code a fn in `tool-core` or `tool-runtime` may have, counted as
/// `tests/source/mod.rs` says: lines that are neither blank nor comments, from the `fn` line to
/// the closing brace, `#[cfg(test)]` items left out.
const MAX_FN_LINES: usize = 120;
/// The most lines of code a source file of `tool-core` or `tool-runtime` may have, counted the
/// same way (test modules left out).
const MAX_FILE_LINES: usize = 800;

/// The sources the size limits apply to.
const LIMITED: [&str; 2] = ["tool-core/src/lib.rs", "tool-runtime/src/lib.rs"];

fn workspace() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_fn_is_over_120_lines_of_code_and_no_file_over_800() {
    let mut problems = Vec::new();
    let mut files = std::collections::BTreeSet::new();
    for lib in LIMITED {
        for module in source::modules(&workspace().join(lib)) {
            let text = std::fs::read_to_string(&module.file).expect("readable");
            for function in source::fns(&module, &text) {
                if function.lines > MAX_FN_LINES {
                    problems.push(format!(
                        "{}:{}: `{}` has {} lines of code (at most {MAX_FN_LINES}); split it into steps that each do one thing",
                        module.file.display(),
                        function.line,
                        function.name,
                        function.lines
                    ));
                }
            }
            if files.insert(module.file.clone()) {
                let lines = source::file_lines(&text);
                if lines > MAX_FILE_LINES {
                    problems.push(format!(
                        "{}: {lines} lines of code (at most {MAX_FILE_LINES}); split it along a real seam",
                        module.file.display()
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn only_the_transition_module_assigns_turn_call_request_and_task_states() {
    let mut problems = Vec::new();
    for module in source::modules(&workspace().join("tool-runtime/src/lib.rs")) {
        // The transition module owns these writes. The store conformance suite builds records
        // in every state to test a store's indexes and claims: it makes no transition.
        let exempt = ["transition", "store::conformance"];
        if exempt
            .iter()
            .any(|e| module.path == *e || module.path.starts_with(&format!("{e}::")))
        {
            continue;
        }
        for (line, text) in source::state_writes(&module) {
            problems.push(format!(
                "{}:{line}: `{text}` changes a persisted state outside `transition`; add a transition there (with its unit test) and call it",
                module.file.display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_structure_checks_find_what_they_look_for() {
    let text = r"
        fn park(turn: &mut TurnRecord) {
            // a comment
            turn.status = TurnStatus::Waiting;

            let call = PendingCall { state: CallState::Running, ..call() };
            task.status = next;
            record.version = 2;
        }

        #[cfg(test)]
        mod tests {
            fn set() { turn.status = TurnStatus::Active; }
        }
    ";
    let modules = source::modules_of(text, std::path::Path::new("lib.rs"));
    let root = modules
        .iter()
        .find(|m| m.path.is_empty())
        .expect("the root");
    let writes: Vec<usize> = source::state_writes(root)
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    assert_eq!(writes, [4, 6, 7], "the test module's write is left out");
    let fns = source::fns(root, text);
    assert_eq!(fns.len(), 1);
    assert_eq!((fns[0].name.as_str(), fns[0].lines), ("park", 6));
    assert_eq!(source::file_lines(text), 6, "the test module is left out");
}
