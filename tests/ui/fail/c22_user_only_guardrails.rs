use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

fn scan(_: &OutputCheck<'_>) -> OutputVerdict {
    OutputVerdict::Pass
}

fn prepare(_: &PrepareContext<'_>) -> Preparation {
    Preparation::Keep
}

/// Restart a service from the admin page.
#[tool(effect = write, user_only, guardrails(output = scan), prepare = prepare)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
