use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Keys that need a value, without one.
#[tool(effect = read, name, approval_key, to_model_output, label(start, delta), approval(request, prompt))]
async fn restart(args: Args) -> String {
    args.service
}

/// `crate` without a path.
#[tool(effect = read, crate)]
async fn restart_crate(args: Args) -> String {
    args.service
}

fn main() {}
