use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
