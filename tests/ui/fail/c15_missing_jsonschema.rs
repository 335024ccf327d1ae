use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
