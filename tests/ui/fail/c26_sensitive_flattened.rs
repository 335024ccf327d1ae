use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct Credentials {
    user: String,
    password: String,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Login {
    #[serde(flatten)]
    #[toolwright(sensitive)]
    credentials: Credentials,
    remember: bool,
}

/// Logs a user in.
#[tool(effect = write)]
async fn login(args: Login) -> String {
    let Credentials { user, password } = args.credentials;
    format!("{user} {} {}", password.len(), args.remember)
}

fn main() {}
