//! Host integration: toolset instructions for the system prompt, a per-turn context provider (and
//! one that is too slow, skipped), a description computed from a host service, and a page that
//! calls tools as the user through the shared result cache.
//!
//! ```sh
//! cargo run --example host
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::registry::Audience;
use toolwright::runtime::{Invoked, Runtime, SessionSpec, SqliteStore, Toolset};
use toolwright::{Caller, Principal, Services};

/// The device's catalog of native UI components (a host service).
struct Components(Vec<&'static str>);

/// The focus timer's backend (a host service), counting reads to show the cache at work.
#[derive(Default)]
struct FocusLog {
    minutes: AtomicU64,
    reads: AtomicUsize,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Card {
    /// The component to show, one of the catalog's.
    component: String,
}

/// Its description lists the components this device has: computed when the list is built.
#[tool(toolset = "genui", effect = read, description = describe_show)]
async fn show(args: Card) -> Result<String, ToolError> {
    Ok(format!("showing {}", args.component))
}

fn describe_show(services: &Services<'_>) -> String {
    let catalog = services
        .get::<Components>()
        .map(|c| c.0.join(", "))
        .unwrap_or_else(|| "none on this device".to_owned());
    format!("Show a native UI card in the chat. Components: {catalog}.")
}

/// Minutes of focus today.
#[tool(toolset = "focus", effect = read)]
async fn today(_args: NoInput, log: State<Arc<FocusLog>>) -> Result<u64, ToolError> {
    log.reads.fetch_add(1, Ordering::SeqCst);
    Ok(log.minutes.load(Ordering::SeqCst))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Start {
    /// What the session is for.
    label: String,
}

/// Starts a 25-minute focus session (from pages only).
#[tool(toolset = "focus", effect = write, user_only)]
async fn start(
    args: Start,
    ctx: ToolContext,
    log: State<Arc<FocusLog>>,
) -> Result<String, ToolError> {
    log.minutes.fetch_add(25, Ordering::SeqCst);
    Ok(format!(
        "started `{}` for {:?}, as {:?}",
        args.label,
        ctx.session().current.as_ref().map(|p| &p.principal_id),
        ctx.caller()
    ))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log = Arc::new(FocusLog::default());
    let runtime = Runtime::builder(Registry::from_tools([
        show::TOOL,
        today::TOOL,
        start::TOOL,
    ])?)
    // A demo of one run: nothing parks, so a store in memory (gone at exit) is enough.
    .store(SqliteStore::in_memory()?)
    .state(Components(vec!["chart", "timer", "map"]))
    .state(Arc::clone(&log))
    .toolset(
        Toolset::new("focus")
            .instructions("Focus minutes come from the timer; never estimate them.")
            .context(|request| async move {
                let log = request.service::<Arc<FocusLog>>().ok_or("no focus log")?;
                let minutes = log.minutes.load(Ordering::Relaxed);
                Ok((minutes > 0).then(|| format!("The user focused {minutes} minutes today.")))
            }),
    )
    .toolset(Toolset::new("genui").context(|_| async {
        // Too slow: the turn goes on without it after 800 ms.
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(Some("never seen".to_owned()))
    }))
    .build()?;

    println!(
        "system prompt instructions:\n{}\n",
        runtime.instructions(Audience::Model)
    );
    let registry = runtime.registry();
    let show = registry
        .get("genui__show")
        .ok_or("genui__show is registered")?;
    println!(
        "`genui__show` as the model sees it: {}\n",
        show.description()
    );

    // A page: the user starts a timer (user-only, no approval prompt), and three views read
    // today's minutes through the cache.
    let alice = Principal::user("local", "alice");
    let page = runtime
        .open_session(SessionSpec::new("ui:alice").initiator(alice.clone()))
        .await?;
    if let Invoked::Done { result, .. } = page
        .invoke(alice.clone(), "focus.start", json!({ "label": "calculus" }))
        .await?
    {
        println!("page invoked focus.start: {}", result.output);
    }
    for view in ["header", "sidebar", "widget"] {
        let data = page
            .tool_data(
                alice.clone(),
                "focus__today",
                json!({}),
                Duration::from_secs(60),
            )
            .await?;
        println!("{view} reads focus__today: {}", data.output);
    }
    println!(
        "focus__today ran {} time(s) for the three views",
        log.reads.load(Ordering::SeqCst)
    );

    // The chat: the context provider says what it knows, marked as data; the slow one is
    // skipped.
    let chat = runtime.open_session(SessionSpec::new("chat:alice")).await?;
    let turn = chat.begin_turn(Some(alice), Caller::Model).await?;
    let context = turn.context("how long did I focus today?").await?;
    println!(
        "\ncontext for the turn:\n{}",
        context.render().unwrap_or_default()
    );
    for skipped in &context.skipped {
        println!("skipped `{}`: {}", skipped.toolset, skipped.reason);
    }
    turn.complete().await?;
    Ok(())
}
