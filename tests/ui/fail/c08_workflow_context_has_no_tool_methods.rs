use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service, as a workflow; a workflow body has no approval grant (and no sandbox).
#[tool(effect = write, workflow = execute)]
async fn restart(args: Args, ctx: WorkflowContext) -> String {
    let _ = ctx.approval();
    args.service
}

fn main() {}
