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
    name = "restart",
    name = "restart_service",
    untrusted,
    untrusted,
    approval = always,
    approval = once,
    input_retries = 2,
    input_retries = 3,
    label(start = "Restarting {service}", start = "Restart {service}"),
    i18n(en(title = "Restart"), en(title = "Restart again")),
)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
