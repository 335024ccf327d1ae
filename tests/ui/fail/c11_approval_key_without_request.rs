use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, approval_key = input)]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service; `always` keeps no memory to key.
#[tool(effect = write, approval = always, approval_key = input)]
async fn restart_always(args: Args) -> String {
    args.service
}

fn main() {}
