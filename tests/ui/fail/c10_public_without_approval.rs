use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Post a status update in public.
#[tool(effect = public)]
async fn post_status(args: Args) -> String {
    args.service
}

fn main() {}
