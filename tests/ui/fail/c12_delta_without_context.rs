use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

fn progress(args: &Args, partial: &serde_json::Value) -> String {
    format!("{} {partial}", args.service)
}

/// Restart a service.
#[tool(effect = write, label(delta = progress))]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
