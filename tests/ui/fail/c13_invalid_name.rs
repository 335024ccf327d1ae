use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, name = "restart service")]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service.
#[tool(effect = write, name = "")]
async fn restart_empty(args: Args) -> String {
    args.service
}

/// Restart a service.
#[tool(effect = write, name = "restart_a_service_with_a_name_far_longer_than_any_provider_accepts")]
async fn restart_long(args: Args) -> String {
    args.service
}

fn main() {}
