use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(
    effect = write,
    summary = "Restarts every instance of one service, which makes it unavailable for ten to thirty seconds",
)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
