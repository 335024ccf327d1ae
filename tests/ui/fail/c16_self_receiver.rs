use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

struct Ops;

impl Ops {
    /// Restart a service.
    #[tool(effect = write)]
    async fn restart(&self, args: Args) -> String {
        args.service
    }
}

fn main() {}
