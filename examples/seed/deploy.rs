//! Deploy tools from the eve seed (chapter 11): a rollback only on-call engineers may approve (a
//! response policy), a deploy workflow that asks and sleeps durably, and a freeze that only the
//! top-level session may start.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::approval::ResponseDecision;
use toolwright::prelude::*;

use super::ops::{Change, OpsBackend};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RollbackArgs {
    /// Service to roll back, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
    /// Earlier release to return to, as `v<major>.<minor>.<patch>`, e.g. v2.13.2.
    #[schemars(regex(pattern = r"^v\d+\.\d+\.\d+$"))]
    version: String,
}

#[derive(Serialize, JsonSchema)]
struct RolledBack {
    service: String,
    version: String,
    /// The change-log entry of this rollback.
    change: Change,
    /// Who approved the rollback (the on-call engineer), when a person did.
    approved_by: Option<String>,
}

/// Who may answer a rollback request: approving takes the `oncall` role; anyone may cancel, so a
/// rollback never runs without an on-call engineer's consent.
fn on_call_only(cx: &ResponseContext<'_, RollbackArgs>) -> ResponseVerdict {
    let on_call = cx
        .responder
        .is_some_and(|principal| principal.has_in("roles", "oncall"));
    if on_call || cx.decision == ResponseDecision::Cancel {
        ResponseVerdict::Allowed
    } else {
        ResponseVerdict::rejected("only on-call may approve rollbacks")
    }
}

/// Rolls one service back to an earlier release; traffic moves to the old release at once. Use
/// when the user asks for a rollback, or a deploy went bad and the user agrees to undo it. Not for
/// shipping new code: use `deploy_service`. The request waits for an on-call engineer's approval.
/// Returns the release now live, the change-log entry and who approved.
#[tool(
    effect = write,
    approval(
        request = always,
        prompt = "Roll {service} back to {version}? Traffic moves to the old release at once.",
        response = on_call_only,
    ),
    label(start = "Rolling {service} back to {version}"),
    output_schema,
)]
async fn rollback_deploy(
    args: RollbackArgs,
    ctx: ToolContext,
    ops: State<OpsBackend>,
) -> Result<RolledBack, ToolError> {
    let service = ops.service(&args.service)?;
    if !service.releases[1..].contains(&args.version.as_str()) {
        return Err(ToolError::new(format!(
            "{} has no earlier release {}; earlier releases: {}",
            service.name,
            args.version,
            service.releases[1..].join(", ")
        )));
    }
    let change = ops.record_change(
        &format!("rollback:{}", ctx.idempotency_key()),
        format!("roll {} back to {}", service.name, args.version),
        ctx.current(),
    );
    let approved_by = ctx
        .approval()
        .and_then(|grant| grant.responder.as_ref())
        .map(|responder| responder.principal_id.clone());
    Ok(RolledBack {
        service: args.service,
        version: args.version,
        change,
        approved_by,
    })
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Environment {
    Preview,
    Production,
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Environment::Preview => "preview",
            Environment::Production => "production",
        })
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct DeployArgs {
    /// Service to deploy, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
    /// Where to deploy.
    environment: Environment,
    /// Release to deploy, as `v<major>.<minor>.<patch>`.
    #[schemars(regex(pattern = r"^v\d+\.\d+\.\d+$"))]
    version: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
struct Health {
    ok: bool,
    /// Failed requests after the deploy, in percent.
    error_rate_percent: f64,
}

#[derive(Serialize)]
struct Phase {
    phase: &'static str,
}

#[derive(Serialize, JsonSchema)]
struct Deployment {
    service: String,
    environment: Environment,
    version: String,
    deployed: bool,
    rolled_back: bool,
    /// The change-log entry of the rollout, once it started.
    change: Option<Change>,
    /// Why the release is not live, when `deployed` is false.
    reason: Option<String>,
    /// Health measured five minutes after the deploy.
    health: Option<Health>,
}

impl Deployment {
    fn new(args: DeployArgs) -> Self {
        Deployment {
            service: args.service,
            environment: args.environment,
            version: args.version,
            deployed: false,
            rolled_back: false,
            change: None,
            reason: None,
            health: None,
        }
    }

    fn stopped(args: DeployArgs, reason: &str) -> Self {
        Deployment {
            reason: Some(reason.to_owned()),
            ..Deployment::new(args)
        }
    }
}

/// Deploys one release of a service to preview or production. The deploy waits for approval,
/// shows the operator a plan to confirm, rolls the release out, watches metrics for five minutes
/// and offers a rollback if errors rise. Use when the user asks to ship a release. Not for undoing
/// a release: use `rollback_deploy`. Returns whether the release is live, the measured health, and
/// why not when it is not.
#[tool(
    effect = write,
    workflow = execute,
    approval(request = always, prompt = "Deploy {service}@{version} to {environment}?"),
    label(
        start = "Deploying {service}@{version} to {environment}",
        delta = deploy_phase,
    ),
    output_schema,
)]
async fn deploy_service(
    args: DeployArgs,
    ctx: WorkflowContext,
    ops: State<OpsBackend>,
) -> Result<Deployment, ToolError> {
    ctx.partial(&Phase { phase: "planning" });
    let plan: String = ctx
        .step("plan", async {
            let service = ops.service(&args.service)?;
            Ok(format!(
                "roll {} instances of {} from {} to {} in {}, one at a time",
                service.instances,
                service.name,
                service.releases[0],
                args.version,
                args.environment
            ))
        })
        .await?;

    let start = ctx
        .ask(
            AskRequest::new(format!("Deploy plan:\n{plan}\n\nStart the deploy?"))
                .display(AskDisplay::Confirmation)
                .option(AskOption::new("go", "Start deploy").style(OptionStyle::Primary))
                .option(AskOption::new("stop", "Cancel").style(OptionStyle::Danger)),
        )
        .await?;
    if !start.chose("go") {
        return Ok(Deployment::stopped(
            args,
            "the operator did not confirm the plan",
        ));
    }

    ctx.partial(&Phase { phase: "deploying" });
    let change: Change = ctx
        .step("apply", async {
            Ok(ops.record_change(
                &format!("deploy:{}", ctx.idempotency_key()),
                plan.clone(),
                ctx.current(),
            ))
        })
        .await?;

    ctx.partial(&Phase {
        phase: "watching metrics",
    });
    ctx.sleep(Duration::from_secs(5 * 60)).await?;
    let health: Health = ctx
        .step("health", async {
            let service = ops.service(&args.service)?;
            Ok(Health {
                ok: service.healthy(),
                error_rate_percent: service.error_rate_percent(),
            })
        })
        .await?;

    if !health.ok {
        let answer = ctx
            .ask(
                AskRequest::new(format!(
                    "{} serves {}% errors after the deploy. Roll back?",
                    args.service, health.error_rate_percent
                ))
                .display(AskDisplay::Confirmation)
                .option(AskOption::new("rollback", "Roll back").style(OptionStyle::Danger))
                .option(AskOption::new("keep", "Keep watching")),
            )
            .await?;
        if answer.chose("rollback") {
            let rollback: Change = ctx
                .step("rollback", async {
                    Ok(ops.record_change(
                        &format!("deploy-rollback:{}", ctx.idempotency_key()),
                        format!("roll {} back after the deploy", args.service),
                        ctx.current(),
                    ))
                })
                .await?;
            return Ok(Deployment {
                rolled_back: true,
                change: Some(rollback),
                reason: Some("rolled back after errors rose".to_owned()),
                health: Some(health),
                ..Deployment::new(args)
            });
        }
    }

    Ok(Deployment {
        deployed: true,
        change: Some(change),
        health: Some(health),
        ..Deployment::new(args)
    })
}

fn deploy_phase(_: &DeployArgs, partial: &serde_json::Value) -> String {
    partial["phase"].as_str().unwrap_or_default().to_owned()
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct FreezeArgs {
    /// Environment whose deploys stop.
    environment: Environment,
    /// Why; shown to everyone whose deploy is blocked.
    #[schemars(length(min = 10, max = 500))]
    reason: String,
}

#[derive(Serialize, JsonSchema)]
struct Frozen {
    environment: Environment,
    /// The change-log entry of the freeze.
    change: Change,
}

fn freeze_key(args: &FreezeArgs) -> String {
    args.environment.to_string()
}

/// Freezes all deploys to one environment, across every service, until an engineer lifts the
/// freeze. Use only when the user asks to stop deploys (an incident, a holiday). Not for stopping
/// a single deploy in flight. Returns the change-log entry of the freeze.
#[tool(
    effect = write,
    subagents = false,
    approval = once,
    approval_key = freeze_key,
    label(start = "Freezing deploys to {environment}"),
    output_schema,
)]
async fn freeze_deploys(
    args: FreezeArgs,
    ctx: ToolContext,
    ops: State<OpsBackend>,
) -> Result<Frozen, ToolError> {
    let change = ops.record_change(
        &format!("freeze:{}", ctx.idempotency_key()),
        format!("freeze deploys to {}: {}", args.environment, args.reason),
        ctx.current(),
    );
    Ok(Frozen {
        environment: args.environment,
        change,
    })
}
