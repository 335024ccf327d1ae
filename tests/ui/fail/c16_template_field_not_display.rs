use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Batch {
    services: Vec<String>,
}

/// Restart services.
#[tool(effect = write, label(start = "Restarting {services}"))]
async fn restart(args: Batch) -> usize {
    args.services.len()
}

fn main() {}
