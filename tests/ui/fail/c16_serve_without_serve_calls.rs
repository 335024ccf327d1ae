use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Plans a release; a `serve` tool takes its calls as a stream.
#[tool(effect = write, workflow = serve)]
async fn plan(args: Args, ctx: WorkflowContext) -> String {
    let _ = ctx.call_id();
    args.service
}

fn main() {}
