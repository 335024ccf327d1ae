use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Login {
    user: String,
    #[toolwright(sensitive)]
    password: String,
}

/// Logs a user in.
#[tool(
    effect = write,
    label(start = "Logging in {user} with {password}", complete = "Logged in {user}"),
)]
async fn login(args: Login) -> String {
    format!("{} {}", args.user, args.password.len())
}

/// Logs users in one after another.
#[tool(effect = write, workflow = serve, label(start = "Logging in {user} ({password})"))]
async fn logins(mut calls: ServeCalls<Login, String>, ctx: WorkflowContext) {
    let _ = ctx.call_id();
    while let Some(call) = calls.next().await {
        let reply = call.input.user.clone();
        call.reply(reply);
    }
}

fn main() {}
