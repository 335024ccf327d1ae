use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, durabel, ends_trun)]
async fn restart(args: Args) -> String {
    args.service
}

/// Restart a service, with typos inside the nested keys.
#[tool(
    effect = write,
    approval(requst = always),
    label(strat = "Restarting {service}"),
    annotations(idempotnt = true),
    i18n(en(titel = "Restart")),
    xyzzy = 1,
    retries = 3,
)]
async fn restart_nested(args: Args) -> String {
    args.service
}

fn main() {}
