use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// One over the limit.
#[tool(effect = read, input_retries = 11)]
async fn a(args: Args) -> String {
    args.service
}

/// Far over, past what a `u8` holds.
#[tool(effect = read, input_retries = 1000)]
async fn b(args: Args) -> String {
    args.service
}

fn main() {}
