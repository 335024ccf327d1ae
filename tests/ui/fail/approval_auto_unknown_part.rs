use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Refund {
    amount: u64,
}

/// Misspelt parts of `auto(...)` and of `criteria(...)`.
#[tool(
    effect = money,
    approval = auto(instruction = "Judge the refund.", critera(clear = "Under 50 EUR.")),
)]
async fn a(args: Refund) -> u64 {
    args.amount
}

/// A misspelt criterion in the object form, and a part no decider knows.
#[tool(
    effect = money,
    approval(request = auto(criteria(clera = "Under 50 EUR."), temperature = "0")),
)]
async fn b(args: Refund) -> u64 {
    args.amount
}

/// Parts given twice.
#[tool(
    effect = money,
    approval = auto(
        model = "small",
        criteria(clear = "Under 50 EUR.", clear = "Under 20 EUR."),
        model = "large",
    ),
)]
async fn c(args: Refund) -> u64 {
    args.amount
}

fn main() {}
