use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service, with other keys but no effect.
#[tool(name = "restart_all")]
async fn restart_all(args: Args) -> String {
    args.service
}

fn main() {}
