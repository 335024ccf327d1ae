use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

fn check(args: &Args) -> InputVerdict {
    let _ = args;
    InputVerdict::Allow
}

fn scan(_: &OutputCheck<'_>) -> bool {
    true
}

fn prepare(_: &PrepareContext<'_>) -> bool {
    true
}

/// Restart a service; every guardrail fn has the wrong shape.
#[tool(effect = write, guardrails(input = check, output = scan), prepare = prepare)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
