use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, durabel)]
async fn restart(args: Args) -> String {
    args.service
}

/// A second tool referring to the first, which still type-checks.
#[tool(effect = write, approval = always)]
async fn restart_twice(args: Args) -> String {
    let first = restart(Args {
        service: args.service.clone(),
    })
    .await;
    first + &args.service
}

#[allow(dead_code)]
fn descriptor_is_still_named() -> &'static toolwright::registry::ToolDescriptor {
    restart::TOOL
}

fn main() {}
