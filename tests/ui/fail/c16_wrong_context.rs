use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// A plain tool taking a workflow's context.
#[tool(effect = write)]
async fn plain_with_workflow(args: Args, ctx: WorkflowContext) -> String {
    let _ = ctx.call_id();
    args.service
}

/// A workflow tool taking a plain tool's context.
#[tool(effect = write, workflow = execute)]
async fn workflow_with_plain(args: Args, ctx: ToolContext) -> String {
    let _ = ctx.call_id();
    args.service
}

/// A plain tool taking a durable tool's context.
#[tool(effect = write)]
async fn plain_with_durable(args: Args, ctx: DurableContext) -> String {
    let _ = ctx.call_id();
    args.service
}

fn main() {}
