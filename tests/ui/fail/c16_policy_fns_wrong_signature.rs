use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

fn prompt(args: &Args) -> String {
    args.service.clone()
}

fn key(args: Args) -> String {
    args.service
}

fn done(out: &String) -> String {
    out.clone()
}

/// Restart a service; every fn has the wrong shape.
#[tool(
    effect = write,
    approval(request = once, prompt = prompt),
    approval_key = key,
    ends_turn = done,
)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}

fn project(out: &String) -> u32 {
    u32::try_from(out.len()).unwrap_or_default()
}

fn beta(flag: bool) -> bool {
    flag
}

fn who(cx: &ResponseContext<'_, Args>) -> bool {
    cx.responder.is_some()
}

fn complete(args: &Args) -> String {
    args.service.clone()
}

/// Restart a service; more fns with the wrong shape.
#[tool(
    effect = write,
    approval(request = always, response = who),
    to_model_output = project,
    enabled = beta,
    label(complete = complete),
)]
async fn restart_more(args: Args) -> String {
    args.service
}
