use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

#[tool(
    effect = reed,
    name = "restart service",
    durabel,
    user_only,
    deferred,
    summary = "Restarts every instance of one service, which makes it unavailable for ten to thirty seconds",
    workflow = execute,
    ends_turn,
)]
fn restart<T>(args: Args) -> String {
    args.service
}

fn main() {}
