use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Refund {
    amount: u64,
}

const SMALL: &str = "small";

/// A model named by a path, and instructions that are not text.
#[tool(effect = money, approval = auto(model = SMALL, instructions = 42))]
async fn a(args: Refund) -> u64 {
    args.amount
}

/// Empty and blank strings.
#[tool(effect = money, approval = auto(instructions = "", criteria(caution = "  ")))]
async fn b(args: Refund) -> u64 {
    args.amount
}

/// Criteria without any criterion.
#[tool(effect = money, approval = auto(criteria()))]
async fn c(args: Refund) -> u64 {
    args.amount
}

/// Criteria written as a string.
#[tool(effect = money, approval(request = auto(criteria = "Under 50 EUR.")))]
async fn d(args: Refund) -> u64 {
    args.amount
}

/// A part without a value, and a string that is no part.
#[tool(effect = money, approval = auto(model, "Judge the refund."))]
async fn e(args: Refund) -> u64 {
    args.amount
}

fn main() {
    let _ = SMALL;
}
