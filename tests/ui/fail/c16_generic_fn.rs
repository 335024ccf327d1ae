use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write)]
async fn restart<T: Default>(args: Args) -> String {
    let _ = T::default();
    args.service
}

fn main() {}
