use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Login {
    user: String,
    #[serde(skip)]
    #[toolwright(sensitive)]
    session: String,
    #[serde(default, skip_deserializing)]
    #[toolwright(sensitive)]
    token: String,
}

/// Logs a user in.
#[tool(effect = write)]
async fn login(args: Login) -> String {
    format!("{} {} {}", args.user, args.session, args.token)
}

fn main() {}
