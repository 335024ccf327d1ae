use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

fn restart_policy(service: &str) -> ApprovalDecision {
    let _ = service;
    ApprovalDecision::UserApproval
}

/// Restart a service.
#[tool(effect = write, approval = restart_policy)]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
