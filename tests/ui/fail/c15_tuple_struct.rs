use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args(String);

/// Restart a service.
#[tool(effect = write)]
async fn restart(args: Args) -> String {
    args.0
}

fn main() {}
