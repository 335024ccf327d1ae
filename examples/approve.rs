//! Park a call on approval, stop the process, approve it from a second run.
//!
//! ```sh
//! cargo run --example approve -- park             # parks `restart_service`, prints the request id
//! cargo run --example approve -- list             # what is waiting
//! cargo run --example approve -- approve <id>     # a new process approves; the tool runs once
//! cargo run --example approve -- cancel <id> "not now"
//! ```
//!
//! State lives in one SQLite file (`--db`, default `toolwright-demo.db`); no process waits in
//! between.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, RespondOutcome, Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall,
};
use toolwright::{Caller, Principal};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RestartArgs {
    /// Service to restart, e.g. payment-api.
    #[schemars(length(min = 1, max = 64))]
    service: String,
    /// Why; recorded in the change log.
    #[schemars(length(min = 10))]
    reason: String,
}

#[derive(Serialize, JsonSchema)]
struct Restarted {
    service: String,
    restarted: bool,
    change_log: String,
    approved_by: Option<String>,
}

/// Restart every instance of one service (10-30 s of unavailability). Use only when the user
/// asks for a restart.
#[tool(
    effect = write,
    approval(request = always, prompt = "Restart {service}? All instances roll; 10-30 s unavailable."),
    label(start = "Restarting {service}"),
)]
async fn restart_service(args: RestartArgs, ctx: ToolContext) -> Restarted {
    Restarted {
        service: args.service.clone(),
        restarted: true,
        change_log: format!("restart requested: {}", args.reason),
        approved_by: ctx
            .approval()
            .and_then(|grant| grant.responder.as_ref())
            .map(|p| p.principal_id.clone()),
    }
}

#[derive(Parser)]
#[command(about = "Park a tool call on approval in one process, answer it from another")]
struct Cli {
    /// The SQLite file holding sessions and parked turns.
    #[arg(long, default_value = "toolwright-demo.db")]
    db: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a turn whose call to `restart_service` waits for approval, then exit.
    Park {
        /// The service to restart.
        #[arg(default_value = "payment-api")]
        service: String,
    },
    /// List parked turns and their pending requests.
    List,
    /// Approve a pending request (as alice, who made it).
    Approve {
        /// The request id `park` printed.
        request_id: String,
    },
    /// Cancel a pending request, with a note the model sees.
    Cancel {
        /// The request id.
        request_id: String,
        /// Why.
        note: Option<String>,
    },
}

fn alice() -> Principal {
    Principal::user("demo", "alice")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let registry = Registry::from_tools([restart_service::TOOL])?;
    let runtime = Runtime::builder(registry)
        .store(SqliteStore::open(&cli.db)?)
        .build()?;
    match cli.command {
        Command::Park { service } => {
            let session = runtime
                .open_session(
                    SessionSpec::new(format!("demo-{}", std::process::id())).initiator(alice()),
                )
                .await?;
            let turn = session.begin_turn(Some(alice()), Caller::Model).await?;
            let arguments =
                serde_json::json!({ "service": service, "reason": "stuck after the 14:00 deploy" });
            match turn
                .step(vec![ToolCall::new(
                    "call-1",
                    "restart_service",
                    arguments.to_string(),
                )])
                .await?
            {
                StepOutcome::Waiting { requests, .. } => {
                    for request in requests {
                        println!("turn {} is parked", request.turn_id);
                        println!("  request {}: {}", request.request_id, request.prompt);
                    }
                    println!("this process exits now; approve from another run:");
                    println!("  cargo run --example approve -- approve <request id>");
                }
                other => println!("nothing to approve: {other:?}"),
            }
        }
        Command::List => {
            for turn_id in runtime.waiting_turns().await? {
                let record = runtime.turn(&turn_id).await?.record().await?;
                for request in record.pending.iter().flat_map(|p| &p.requests) {
                    if request.is_pending() {
                        println!("{turn_id}  {}  {}", request.request_id, request.prompt);
                    }
                }
            }
        }
        Command::Approve { request_id } => {
            let outcome = runtime
                .respond(InputResponse::approve(request_id, Some(alice())))
                .await?;
            report(outcome);
        }
        Command::Cancel { request_id, note } => {
            let mut response = InputResponse::cancel(request_id, Some(alice()));
            if let Some(note) = note {
                response = response.note(note);
            }
            report(runtime.respond(response).await?);
        }
    }
    Ok(())
}

fn report(outcome: RespondOutcome) {
    match outcome {
        RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) => {
            for result in results {
                let status = if result.is_error { "failed" } else { "ran" };
                println!("{} {status}: {}", result.tool, result.output);
            }
        }
        RespondOutcome::Rejected { reason } => println!("not accepted: {reason}"),
        RespondOutcome::Dropped => println!("that request was already settled; nothing ran"),
        other => println!("{other:?}"),
    }
}
