//! `ends_turn` (flag, `= path`, `= false`), every part of `label` in template and fn form,
//! `output_schema` and `to_model_output`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Deploy {
    service: String,
    version: String,
}

#[derive(Serialize, JsonSchema)]
struct Deployed {
    service: String,
    healthy: bool,
}

/// Hands the conversation back to the user.
#[tool(effect = read, ends_turn)]
async fn hand_back(_: NoInput) -> &'static str {
    "handed back"
}

fn unhealthy(out: &Deployed) -> bool {
    !out.healthy
}

/// Deploys a version; the turn ends when the deploy left the service unhealthy.
#[tool(
    effect = write,
    ends_turn = unhealthy,
    label(start = "Deploying {service} {version}", delta = progress, complete = "Deployed {service}"),
    output_schema,
)]
async fn deploy(args: Deploy, ctx: ToolContext) -> Result<Deployed, ToolError> {
    ctx.partial(&serde_json::json!({ "percent": 50 }));
    Ok(Deployed {
        service: args.service,
        healthy: false,
    })
}

fn progress(args: &Deploy, partial: &serde_json::Value) -> String {
    format!("Deploying {}: {}%", args.service, partial["percent"])
}

fn starting(args: &Deploy) -> String {
    format!("Rolling back {}", args.service)
}

fn finished(args: &Deploy, out: &Deployed) -> String {
    format!("Rolled back {} (healthy: {})", args.service, out.healthy)
}

fn for_model(out: &Deployed) -> String {
    format!("{} is back", out.service)
}

/// Rolls a service back.
#[tool(effect = write, ends_turn = false, label(start = starting, complete = finished), to_model_output = for_model)]
async fn rollback(args: Deploy) -> Deployed {
    Deployed {
        service: args.service,
        healthy: true,
    }
}

fn main() {
    use toolwright::registry::EndsTurn;

    let registry = Registry::from_tools([hand_back::TOOL, deploy::TOOL, rollback::TOOL]).unwrap();
    let input = serde_json::json!({ "service": "api", "version": "1.2" });

    assert_eq!(hand_back::TOOL.ends_turn, EndsTurn::Always);
    assert_eq!(rollback::TOOL.ends_turn, EndsTurn::Never);

    let deploy_tool = registry.get("deploy").unwrap();
    assert_eq!(
        deploy_tool.descriptor().unwrap().ends_turn,
        EndsTurn::ByOutput
    );
    assert_eq!(deploy_tool.start_label(&input), "Deploying api 1.2");
    assert_eq!(
        deploy_tool
            .delta_label(&input, &serde_json::json!({ "percent": 50 }))
            .as_deref(),
        Some("Deploying api: 50%")
    );
    assert!(deploy_tool.output_schema().is_some());

    let rollback_tool = registry.get("rollback").unwrap();
    assert_eq!(rollback_tool.start_label(&input), "Rolling back api");
    assert!(rollback_tool.descriptor().unwrap().projected);

    futures_executor::block_on(async {
        let out = registry.call("deploy", input.clone()).await.unwrap();
        assert!(out.ends_turn);
        assert_eq!(out.complete_label.as_deref(), Some("Deployed api"));
        let out = registry.call("rollback", input.clone()).await.unwrap();
        assert!(!out.ends_turn);
        assert_eq!(
            out.complete_label.as_deref(),
            Some("Rolled back api (healthy: true)")
        );
        assert_eq!(out.model, Some(ModelOutput::text("api is back")));
        let out = registry
            .call("hand_back", serde_json::json!({}))
            .await
            .unwrap();
        assert!(out.ends_turn);
    });
}
