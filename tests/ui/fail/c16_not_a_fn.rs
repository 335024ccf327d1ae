use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write)]
struct Restart {
    service: String,
}

fn main() {}
