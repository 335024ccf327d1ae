use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// A number where a template goes, and a string where a fn goes.
#[tool(effect = read, label(start = 42, delta = "Restarting"), approval(request = always, prompt = 7))]
async fn restart(args: Args, ctx: ToolContext) -> String {
    let _ = ctx.call_id();
    args.service
}

/// `label` written as a string.
#[tool(effect = read, label = "Restarting {service}")]
async fn restart_plain(args: Args) -> String {
    args.service
}

/// Braces that are not placeholders.
#[tool(effect = read, label(start = "Restarting {service", complete = "Done {}"))]
async fn restart_braces(args: Args) -> String {
    args.service
}

fn main() {}
