use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Plain {
    goal: String,
    task_id: String,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Renamed {
    goal: String,
    #[serde(rename = "task_id")]
    id: String,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
#[serde(rename_all = "snake_case")]
struct RenamedAll {
    goal: String,
    task_id: String,
}

/// Plans a release.
#[tool(effect = write, workflow = serve)]
async fn plan(mut calls: ServeCalls<Plain, String>, ctx: WorkflowContext) {
    let _ = ctx.call_id();
    while let Some(call) = calls.next().await {
        let reply = format!("{} {}", call.input.goal, call.input.task_id);
        call.reply(reply);
    }
}

/// Plans a release.
#[tool(effect = write, workflow = serve)]
async fn plan_renamed(mut calls: ServeCalls<Renamed, String>, ctx: WorkflowContext) {
    let _ = ctx.call_id();
    while let Some(call) = calls.next().await {
        let reply = format!("{} {}", call.input.goal, call.input.id);
        call.reply(reply);
    }
}

/// Plans a release.
#[tool(effect = write, workflow = serve)]
async fn plan_renamed_all(mut calls: ServeCalls<RenamedAll, String>, ctx: WorkflowContext) {
    let _ = ctx.call_id();
    while let Some(call) = calls.next().await {
        let reply = format!("{} {}", call.input.goal, call.input.task_id);
        call.reply(reply);
    }
}

fn main() {}
