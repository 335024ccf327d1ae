use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

struct Restarted {
    service: String,
}

/// Restart a service.
#[tool(effect = write)]
async fn restart(args: Args) -> Result<Restarted, ToolError> {
    Ok(Restarted {
        service: args.service,
    })
}

/// Restart a service, returning the output bare.
#[tool(effect = write)]
async fn restart_bare(args: Args) -> Restarted {
    Restarted {
        service: args.service,
    }
}

fn main() {}
