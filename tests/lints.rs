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
