use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, title = "", i18n(de(title = " ")))]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
