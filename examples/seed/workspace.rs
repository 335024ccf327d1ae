//! `provision_workspace` from the Flue seed: a durable tool whose side effects each run as a
//! journaled step, so a resumed call skips what already happened.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

#[derive(Debug)]
struct DefaultProject {
    name: &'static str,
    template: &'static str,
}

const DEFAULT_PROJECTS: &[DefaultProject] = &[
    DefaultProject {
        name: "handbook",
        template: "docs",
    },
    DefaultProject {
        name: "roadmap",
        template: "board",
    },
    DefaultProject {
        name: "support",
        template: "inbox",
    },
];

#[derive(Serialize, Deserialize)]
struct Tenant {
    id: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct SeededProject {
    id: String,
    name: String,
    template: String,
}

async fn create_tenant(customer_id: &str) -> Result<Tenant, ToolError> {
    Ok(Tenant {
        id: format!("tn_{}", customer_id.trim_start_matches("cus_")),
    })
}

async fn seed_project(
    tenant: &Tenant,
    project: &DefaultProject,
) -> Result<SeededProject, ToolError> {
    Ok(SeededProject {
        id: format!("{}/{}", tenant.id, project.name),
        name: project.name.to_owned(),
        template: project.template.to_owned(),
    })
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ProvisionArgs {
    /// Customer to provision for, e.g. cus_1042.
    #[schemars(regex(pattern = r"^cus_[A-Za-z0-9]{1,32}$"))]
    customer_id: String,
}

#[derive(Serialize, JsonSchema)]
struct Provisioned {
    tenant_id: String,
    /// The default projects, seeded in order.
    projects: Vec<SeededProject>,
}

/// Provisions a workspace for a new customer: creates the tenant, then seeds each default project
/// (handbook, roadmap, support). Use once per customer, when the user asks to set up a workspace;
/// if it fails, report the error rather than calling it again. Not for adding a project to an
/// existing workspace. Returns the tenant id and the seeded projects.
#[tool(
    effect = write,
    durable,
    label(start = "Provisioning a workspace for {customer_id}"),
    output_schema,
)]
async fn provision_workspace(
    args: ProvisionArgs,
    ctx: DurableContext,
) -> Result<Provisioned, ToolError> {
    let tenant = ctx
        .step("create-tenant", create_tenant(&args.customer_id))
        .await?;
    let mut projects = Vec::with_capacity(DEFAULT_PROJECTS.len());
    for project in DEFAULT_PROJECTS {
        let seeded = ctx
            .step(
                format!("seed:{}", project.name),
                seed_project(&tenant, project),
            )
            .await?;
        projects.push(seeded);
    }
    Ok(Provisioned {
        tenant_id: tenant.id,
        projects,
    })
}
