use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, user_only, input_retries = 2)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
