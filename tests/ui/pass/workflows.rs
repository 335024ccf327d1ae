//! `workflow = execute | task | serve` (serve with `ServeCalls<Args, Output>`), `durable` with
//! `DurableContext::step`, and a `serve` struct whose `task_id` is renamed away by `rename_all`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;
use toolwright::registry::{Entry, ToolKind};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Seed {
    project: String,
}

/// Seeds a project, asking before it overwrites anything.
#[tool(effect = write, workflow = execute)]
async fn seed_project(args: Seed, ctx: WorkflowContext) -> Result<String, ToolError> {
    let answer = ctx
        .ask(
            AskRequest::new(format!("Overwrite {}?", args.project))
                .option(AskOption::new("yes", "Yes")),
        )
        .await?;
    let created = ctx
        .step("create", async { Ok(answer.chose("yes")) })
        .await?;
    Ok(format!("{}: {created}", args.project))
}

/// Backfills a project in the background.
#[tool(effect = write, workflow = task)]
async fn backfill(
    args: Seed,
    ctx: WorkflowContext,
    _count: State<u32>,
) -> Result<String, ToolError> {
    let _ = ctx.turn_id();
    Ok(args.project)
}

/// A request to revise the plan. `task_id` is `taskId` in JSON, so it does not clash with the
/// `task_id` the runtime adds.
#[derive(Deserialize, JsonSchema, ToolInput)]
#[serde(rename_all = "camelCase")]
struct PlanRequest {
    goal: String,
    task_id: Option<String>,
}

#[derive(Clone, Serialize, JsonSchema)]
struct Plan {
    steps: Vec<String>,
}

/// Drafts a release plan and revises it on request.
#[tool(effect = write, workflow = serve, output_schema)]
async fn plan_release(
    mut calls: ServeCalls<PlanRequest, Plan>,
    ctx: WorkflowContext,
) -> Result<(), ToolError> {
    let _ = ctx.call_id();
    while let Some(call) = calls.next().await {
        let plan = Plan {
            steps: vec![call.input.goal.clone(), format!("{:?}", call.input.task_id)],
        };
        call.reply(plan);
    }
    Ok(())
}

/// Charges a card exactly once, even across a crash.
#[tool(effect = money, approval = always, durable)]
async fn charge(args: Seed, ctx: DurableContext) -> Result<u64, ToolError> {
    let cents = ctx
        .step(format!("charge:{}", args.project), async { Ok(500_u64) })
        .await?;
    let _ = ctx.idempotency_key();
    Ok(cents)
}

fn main() {
    let registry = Registry::from_tools([
        seed_project::TOOL,
        backfill::TOOL,
        plan_release::TOOL,
        charge::TOOL,
    ])
    .unwrap();
    let kind = |name: &str| registry.get(name).unwrap().descriptor().unwrap().kind;
    assert_eq!(kind("seed_project"), ToolKind::Workflow(Entry::Execute));
    assert_eq!(kind("backfill"), ToolKind::Workflow(Entry::Task));
    assert_eq!(kind("plan_release"), ToolKind::Workflow(Entry::Serve));
    assert_eq!(kind("charge"), ToolKind::Durable);
    assert_eq!(plan_release::TOOL.input.fields, &["goal", "taskId"]);
    assert!(
        registry
            .get("plan_release")
            .unwrap()
            .output_schema()
            .is_some()
    );

    futures_executor::block_on(async {
        let out = registry
            .call("charge", serde_json::json!({ "project": "p" }))
            .await
            .unwrap();
        assert_eq!(out.value, 500);
        let out = registry
            .call("seed_project", serde_json::json!({ "project": "p" }))
            .await
            .unwrap();
        assert_eq!(out.value, "p: false");
    });
}
