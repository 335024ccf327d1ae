use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    path: String,
}

/// Clean a folder, as a workflow: its body replays from a journal, so it cannot run commands;
/// a plain or durable tool does that.
#[tool(effect = write, workflow = execute)]
async fn clean(args: Args, ctx: WorkflowContext) -> String {
    let _ = ctx.sandbox();
    args.path
}

fn main() {}
