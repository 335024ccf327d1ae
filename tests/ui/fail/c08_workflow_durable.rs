use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service, as a workflow.
#[tool(effect = write, workflow = execute, durable)]
async fn restart(args: Args, ctx: WorkflowContext) -> String {
    let _ = ctx.call_id();
    args.service
}

fn main() {}
