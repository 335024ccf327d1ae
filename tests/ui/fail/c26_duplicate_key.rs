use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Login {
    user: String,
    #[toolwright(sensitive, sensitive)]
    password: String,
    #[toolwright(sensitive)]
    #[toolwright(sensitive)]
    otp: String,
}

/// Logs a user in.
#[tool(effect = write)]
async fn login(args: Login) -> String {
    format!("{} {} {}", args.user, args.password.len(), args.otp.len())
}

fn main() {}
