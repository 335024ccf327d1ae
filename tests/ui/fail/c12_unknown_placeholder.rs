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
    label(start = "Restarting {servce}", complete = "Restarted {name}"),
    approval(request = always, prompt = "Restart {service} in {region}?"),
)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
