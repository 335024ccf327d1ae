use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

const MAX_RETRIES: u8 = 3;

/// The number in quotes.
#[tool(effect = read, input_retries = "3")]
async fn a(args: Args) -> String {
    args.service
}

/// A const: the macro cannot read its value.
#[tool(effect = read, input_retries = MAX_RETRIES)]
async fn b(args: Args) -> String {
    args.service
}

/// A negative number.
#[tool(effect = read, input_retries = -1)]
async fn c(args: Args) -> String {
    args.service
}

/// A float.
#[tool(effect = read, input_retries = 2.5)]
async fn d(args: Args) -> String {
    args.service
}

/// A word.
#[tool(effect = read, input_retries = "many")]
async fn e(args: Args) -> String {
    args.service
}

/// The key alone, as if it were a flag.
#[tool(effect = read, input_retries)]
async fn f(args: Args) -> String {
    args.service
}

fn main() {
    let _ = MAX_RETRIES;
}
