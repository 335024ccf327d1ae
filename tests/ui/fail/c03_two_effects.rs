use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = read | write)]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service, the effect given twice.
#[tool(effect = read, effect = write)]
async fn restart_twice(args: Args) -> String {
    args.service
}

fn main() {}
