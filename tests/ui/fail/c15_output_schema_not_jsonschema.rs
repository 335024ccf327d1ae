use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;
#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

#[derive(Serialize)]
struct Restarted {
    service: String,
}

/// Restart a service.
#[tool(effect = write, output_schema)]
async fn restart(args: Args) -> Result<Restarted, ToolError> {
    Ok(Restarted {
        service: args.service,
    })
}

fn main() {}
