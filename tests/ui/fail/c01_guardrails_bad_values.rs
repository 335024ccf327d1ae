use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(
    effect = write,
    guardrails(inptu = check, output = |c| c, output = scan),
    prepare,
    input_guardrail = check,
)]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service.
#[tool(effect = write, guardrails = check, prepare = |cx| cx)]
async fn restart_again(args: Args) -> String {
    args.service
}

/// Restart a service.
#[tool(effect = write, guardrails())]
async fn restart_once_more(args: Args) -> String {
    args.service
}

fn main() {}
