use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Not an error type `ToolError` converts from.
struct Oops;

/// Restart a service.
#[tool(effect = write)]
async fn restart(args: Args) -> Result<String, Oops> {
    Ok(args.service)
}

/// Restart a service, without waiting.
#[tool(effect = write)]
fn restart_now(args: Args) -> Result<String, Oops> {
    Ok(args.service)
}

fn main() {}
