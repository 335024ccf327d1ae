use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Search tools.
#[tool(effect = read, name = "tool_search")]
async fn search(args: Args) -> String {
    args.service
}

/// Run a command.
#[tool(effect = write)]
async fn bash(args: Args) -> String {
    args.service
}

/// Hand work to someone.
#[tool(effect = write, name = "task")]
async fn delegate(args: Args) -> String {
    args.service
}

fn main() {}
