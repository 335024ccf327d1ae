//! Two instances on one PostgreSQL database: stop one, watch the other finish its work.
//!
//! ```sh
//! export DATABASE_URL="$(scripts/postgres start)"       # or any Postgres you own
//! cargo run --example instances -- --name a --start 3    # terminal 1: starts three slow runs
//! cargo run --example instances -- --name b              # terminal 2: a second instance
//! # press Ctrl-C in terminal 1 while the runs are going: within --lease seconds, b takes the
//! # runs over and finishes them; steps a recorded are not run again.
//! ```
//!
//! Each step prints `[<instance>] <run> step <k>` only when it really runs there.

use std::time::Duration;

use clap::Parser;
use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::runtime::{Event, Options, PostgresStore, Runtime, SessionSpec, ToolCall};

/// This instance's name, printed beside each step it runs.
struct Name(String);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Run {
    /// The run's name.
    run: String,
}

/// Five slow steps, each recorded once in the shared database.
#[tool(effect = write, durable)]
async fn slow_run(args: Run, ctx: DurableContext, name: State<Name>) -> Result<String, ToolError> {
    for k in 1..=5 {
        ctx.step(format!("step-{k}"), async {
            println!("[{}] {} step {k}", name.0.0, args.run);
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(())
        })
        .await?;
    }
    Ok(format!("{} done", args.run))
}

#[derive(Parser)]
struct Args {
    /// The database (default: `$DATABASE_URL`).
    #[arg(long)]
    postgres: Option<String>,
    /// This instance's name.
    #[arg(long, default_value = "a")]
    name: String,
    /// How many runs to start here (0: only help with the work of others).
    #[arg(long, default_value_t = 0)]
    start: u32,
    /// Seconds a claim lasts without renewal: how soon a stopped instance's work moves.
    #[arg(long, default_value_t = 5)]
    lease: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let url = match args.postgres.clone() {
        Some(url) => url,
        None => std::env::var("DATABASE_URL")
            .map_err(|_| "give the database with --postgres URL or DATABASE_URL")?,
    };
    let store = PostgresStore::connect(&url).await?;
    let rt = Runtime::builder(Registry::from_tools([slow_run::TOOL])?)
        .store(store)
        .state(Name(args.name.clone()))
        .options(Options {
            instance: args.name.clone(),
            lease: Duration::from_secs(args.lease),
            ..Default::default()
        })
        .build()?;
    // Takes over the work of stopped instances, wakes timers, renews this instance's claims.
    let _worker = rt.run_worker(Duration::from_secs(1));
    let mut events = rt.subscribe();
    let session = rt.open_session(SessionSpec::new("instances-demo")).await?;
    for n in 0..args.start {
        let turn = session.begin_turn(None, Caller::Model).await?;
        let call = ToolCall::new(
            "c1",
            "slow_run",
            format!(r#"{{"run": "{}-run-{n}"}}"#, args.name),
        );
        tokio::spawn(async move { turn.step(vec![call]).await });
    }
    println!(
        "[{}] working; Ctrl-C to stop this instance (its claims expire after {} s)",
        args.name, args.lease
    );
    loop {
        match events.recv().await {
            Ok(Event::ActionResult { result, .. }) => {
                println!("[{}] finished: {}", args.name, result.output);
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}
