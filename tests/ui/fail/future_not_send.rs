use std::rc::Rc;

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

async fn settle() {}

/// Restart a service, holding something that cannot cross threads over an `.await`.
#[tool(effect = write)]
async fn restart(args: Args) -> String {
    let shared = Rc::new(args.service);
    settle().await;
    shared.to_string()
}

fn main() {}
