use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Login {
    user: String,
    #[serde(alias = "pwd")]
    #[toolwright(sensitive)]
    password: String,
}

/// Logs a user in.
#[tool(effect = write)]
async fn login(args: Login) -> String {
    format!("{} {}", args.user, args.password.len())
}

fn main() {}
