use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Refund a payment.
#[tool(effect = money)]
async fn refund(args: Args) -> String {
    args.service
}

fn main() {}
