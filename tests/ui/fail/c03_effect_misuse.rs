use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Effect as a string.
#[tool(effect = "read")]
async fn quoted(args: Args) -> String {
    args.service
}

/// Misspelt effect.
#[tool(effect = reed)]
async fn misspelt(args: Args) -> String {
    args.service
}

/// Effect without a value.
#[tool(effect)]
async fn bare(args: Args) -> String {
    args.service
}

fn main() {}
