use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args;

/// Restart everything.
#[tool(effect = write)]
async fn restart(_: Args) -> String {
    String::new()
}

fn main() {}
