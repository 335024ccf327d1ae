use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

#[tool(effect = read)]
async fn restart(args: Args) -> String {
    args.service
}

#[tool(effect = read, description = "  ")]
async fn restart_blank(args: Args) -> String {
    args.service
}

fn main() {}
