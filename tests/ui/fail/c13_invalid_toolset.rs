use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, toolset = "ops.tools")]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service.
#[tool(effect = write, toolset = "operations_and_infrastructure_maintenance", name = "restart_every_service_now")]
async fn restart_long(args: Args) -> String {
    args.service
}

fn main() {}
