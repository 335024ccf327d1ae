//! A durable tool you can interrupt with Ctrl-C and resume.
//!
//! ```sh
//! cargo run --example provision            # creates a tenant, then seeds three projects, slowly
//! # press Ctrl-C while it seeds, then run it again:
//! cargo run --example provision            # resumes: recorded steps are not run again
//! ```
//!
//! Each step prints `ran <step>` only when it really runs. State lives in one SQLite file
//! (`--db`, default `toolwright-provision.db`); delete it to start over.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall};
use toolwright::{Caller, Principal};

/// How long each step takes, in milliseconds.
struct StepTime(u64);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Customer {
    /// The customer to provision.
    id: String,
}

#[derive(Serialize, JsonSchema)]
struct Workspace {
    tenant: String,
    projects: Vec<String>,
}

/// Provisions a customer workspace: creates the tenant, then seeds each default project.
#[tool(effect = write, durable)]
async fn provision_workspace(
    args: Customer,
    ctx: DurableContext,
    time: State<StepTime>,
) -> Result<Workspace, ToolError> {
    let pause = Duration::from_millis(time.0.0);
    let tenant: String = ctx
        .step("create-tenant", async {
            tokio::time::sleep(pause).await;
            println!("ran create-tenant");
            Ok(format!("tn_{}", args.id))
        })
        .await?;
    let mut projects = Vec::new();
    for project in ["docs", "billing", "analytics"] {
        let seeded: String = ctx
            .step(format!("seed:{project}"), async {
                tokio::time::sleep(pause).await;
                println!("ran seed:{project}");
                Ok(format!("{tenant}/{project}"))
            })
            .await?;
        projects.push(seeded);
    }
    Ok(Workspace { tenant, projects })
}

#[derive(Parser)]
#[command(about = "Provision a workspace durably; interrupt it with Ctrl-C and run it again")]
struct Cli {
    /// The SQLite file holding the journal.
    #[arg(long, default_value = "toolwright-provision.db")]
    db: PathBuf,
    /// How long each step takes, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    step_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let runtime = Runtime::builder(Registry::from_tools([provision_workspace::TOOL])?)
        .store(SqliteStore::open(&cli.db)?)
        .state(StepTime(cli.step_ms))
        .build()?;

    // A call interrupted by a stopped process runs again from its journal.
    let recovered = runtime.recover().await?;
    if let Some((turn, outcome)) = recovered.into_iter().next() {
        println!("resumed the interrupted call of {turn}");
        report(&outcome);
        return Ok(());
    }

    let me = Principal::user("demo", "you");
    let session = runtime
        .open_session(SessionSpec::new(format!("provision-{}", uuid_like())).initiator(me.clone()))
        .await?;
    let turn = session.begin_turn(Some(me), Caller::Model).await?;
    println!("provisioning (press Ctrl-C to interrupt, then run again)");
    let outcome = turn
        .step(vec![ToolCall::new(
            "call-1",
            "provision_workspace",
            r#"{"id":"acme"}"#,
        )])
        .await?;
    report(&outcome);
    Ok(())
}

fn report(outcome: &StepOutcome) {
    if let StepOutcome::Completed { results, .. } = outcome {
        for result in results {
            println!("done: {}", result.output);
        }
    }
}

/// A session id unique enough for a demo.
fn uuid_like() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
