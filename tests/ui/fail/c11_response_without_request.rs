use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

fn ops_only(cx: &ResponseContext<'_, Args>) -> ResponseVerdict {
    let _ = cx.input;
    ResponseVerdict::Allowed
}

/// Restart a service.
#[tool(effect = write, approval(response = ops_only))]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service; a prompt alone asks nothing.
#[tool(effect = write, approval(prompt = "Restart {service}?"))]
async fn restart_prompted(args: Args) -> String {
    args.service
}

fn main() {}
