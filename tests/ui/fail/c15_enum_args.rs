use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
enum Args {
    One { service: String },
    All,
}

/// Restart services.
#[tool(effect = write)]
async fn restart(args: Args) -> String {
    match args {
        Args::One { service } => service,
        Args::All => String::new(),
    }
}

fn main() {}
