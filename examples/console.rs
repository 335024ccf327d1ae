//! The operator console over the store the example MCP server uses: in a browser, or from the
//! terminal and scripts.
//!
//! ```sh
//! cargo run --example console -- --db toolwright-mcp.db          # http://127.0.0.1:8766/, prints a sign-in token
//! cargo run --example console -- --db toolwright-mcp.db list inbox
//! cargo run --example console -- --db toolwright-mcp.db list turns --status waiting --json
//! cargo run --example console -- --db toolwright-mcp.db show turn turn_…
//! cargo run --example console -- --db toolwright-mcp.db approve req_… --note "go ahead"
//! cargo run --example console -- --db toolwright-mcp.db deny req_… --note "not during the sale"
//! cargo run --example console -- --db toolwright-mcp.db answer req_… "staging first"
//! cargo run --example console -- --db toolwright-mcp.db cancel task deploy-…
//! ```
//!
//! Everyone acts as `--as` (default `local/you`, the user the example MCP server serves), so
//! the tools' response policies decide what that user may answer, as in the MCP server. An
//! approved call runs in this process, once, with the same tools and backends. With `--json`
//! every command prints the views the web console serves; a refused or dropped action exits
//! with status 2.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;
use toolwright::console::actions::{self, ActionReport, Answer};
use toolwright::console::{Console, views};
use toolwright::mcp::TokenVerifier;
use toolwright::registry::Audience;
use toolwright::runtime::{Runtime, SqliteStore, TaskFilter, TurnFilter};
use toolwright::{Principal, Registry};

#[path = "seed/mod.rs"]
mod seed;

#[derive(Parser)]
#[command(about = "See and act on parked turns, approvals, tasks and journals")]
struct Cli {
    /// The SQLite file the runtime keeps its state in (the example MCP server's default).
    #[arg(long, default_value = "toolwright-mcp.db", global = true)]
    db: PathBuf,
    /// Who acts, `authenticator/user-id`.
    #[arg(long = "as", default_value = "local/you", global = true)]
    principal: String,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the web console (the default).
    Serve {
        /// The address (loopback unless you put it behind HTTPS and an identity provider).
        #[arg(long, default_value = "127.0.0.1:8766")]
        addr: SocketAddr,
        /// The sign-in token (default: `TOOLWRIGHT_CONSOLE_TOKEN`, else a random one, printed
        /// at start).
        #[arg(long)]
        token: Option<String>,
    },
    /// List pending requests, sessions, turns, tasks, tools or connections.
    List {
        /// What to list.
        what: Listing,
        /// Turns: only those with this status (active, waiting, running, completed, cancelled).
        #[arg(long)]
        status: Option<String>,
        /// Turns and tasks: only those of this session.
        #[arg(long)]
        session: Option<String>,
        /// Tasks: only open ones.
        #[arg(long)]
        open: bool,
        /// The cursor a previous page printed (for the inbox: of its waiting turns).
        #[arg(long)]
        after: Option<String>,
        /// The inbox: the cursor of its open tasks a previous page printed.
        #[arg(long)]
        tasks_after: Option<String>,
        /// Rows per page.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Tools: the locale of titles and summaries.
        #[arg(long)]
        locale: Option<String>,
    },
    /// Show one turn, task, session, request, journal or tool.
    Show {
        /// What to show.
        what: Shown,
        /// Its id (a journal's is `<turn>/<call>`; a tool's is its name).
        id: String,
    },
    /// Approve a pending approval.
    Approve {
        /// The request id.
        request_id: String,
        /// A note for the model.
        #[arg(long)]
        note: Option<String>,
    },
    /// Deny a pending approval (or decline a question), with a note the model sees.
    Deny {
        /// The request id.
        request_id: String,
        /// Why.
        #[arg(long)]
        note: Option<String>,
    },
    /// Answer a question: in your own words, by an option's label, or with a form's fields.
    Answer {
        /// The request id.
        request_id: String,
        /// The answer (an option's label picks that option).
        text: Option<String>,
        /// Choose the option with this label.
        #[arg(long, conflicts_with = "text")]
        option: Option<String>,
        /// A form question's fields, as a JSON object.
        #[arg(long, conflicts_with_all = ["text", "option"])]
        fields: Option<String>,
    },
    /// Cancel a task (its body gets its cleanup window) or a turn.
    Cancel {
        /// A task or a turn.
        what: Cancelled,
        /// Its id.
        id: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Listing {
    Inbox,
    Sessions,
    Turns,
    Tasks,
    Tools,
    Connections,
}

#[derive(Clone, Copy, ValueEnum)]
enum Shown {
    Turn,
    Task,
    Session,
    Request,
    Journal,
    Tool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Cancelled {
    Task,
    Turn,
}

/// The one token this console accepts; its holder acts as the `--as` principal.
struct OneToken {
    token: String,
    principal: Principal,
}

impl TokenVerifier for OneToken {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            // Compared whole; a demo token, so timing does not matter here.
            if token == self.token {
                Ok(self.principal.clone())
            } else {
                Err("not this console's token".into())
            }
        })
    }
}

fn principal(spec: &str) -> Result<Principal, String> {
    match spec.split_once('/') {
        Some((authenticator, id)) if !authenticator.is_empty() && !id.is_empty() => {
            Ok(Principal::user(authenticator, id))
        }
        _ => Err(format!(
            "--as takes `authenticator/user-id` (like `local/you`), not `{spec}`"
        )),
    }
}

/// A fresh random token (two v4 UUIDs: 244 random bits from the OS's generator).
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let principal = principal(&cli.principal)?;
    let runtime = Runtime::builder(Registry::collect()?)
        .store(SqliteStore::open(&cli.db)?)
        .state(seed::ops::OpsBackend::default())
        .state(seed::release::Releases::default())
        .state(seed::treehole::Treehole::default())
        .state(seed::wallet::Wallet::default())
        .build()?;
    let json = cli.json;
    match cli.command.unwrap_or(Command::Serve {
        addr: "127.0.0.1:8766".parse()?,
        token: None,
    }) {
        Command::Serve { addr, token } => {
            let token = token.or_else(|| std::env::var("TOOLWRIGHT_CONSOLE_TOKEN").ok());
            serve(runtime, principal, addr, token).await
        }
        Command::List {
            what,
            status,
            session,
            open,
            after,
            tasks_after,
            limit,
            locale,
        } => {
            let page = views::page(after.as_deref(), limit);
            match what {
                Listing::Inbox => {
                    let tasks = views::page(tasks_after.as_deref(), limit);
                    let inbox = views::inbox(&runtime, Some(&principal), page, tasks).await?;
                    print(json, &inbox, |inbox| {
                        for r in &inbox.requests {
                            let may = if r.may_answer {
                                "you may answer"
                            } else {
                                "not yours to answer"
                            };
                            println!(
                                "{}  {:?}  {}  turn {}  {may}{}",
                                r.request_id,
                                r.kind,
                                r.tool.as_deref().unwrap_or("-"),
                                r.turn_id,
                                r.prompt
                                    .as_deref()
                                    .map(|p| format!(": {p}"))
                                    .unwrap_or_default()
                            );
                        }
                        if let Some(next) = &inbox.next_turns {
                            println!("more waiting turns: --after {}", next.as_str());
                        }
                        if let Some(next) = &inbox.next_tasks {
                            println!("more open tasks: --tasks-after {}", next.as_str());
                        }
                    });
                }
                Listing::Sessions => {
                    let page = views::sessions(&runtime, page).await?;
                    print(json, &page, |page| {
                        for s in &page.items {
                            println!("{}  version {}", s.id, s.version);
                        }
                        next_hint(page.next.as_ref());
                    });
                }
                Listing::Turns => {
                    let mut filter = TurnFilter::default();
                    if let Some(session) = session {
                        filter = filter.session(session);
                    }
                    if let Some(status) = status {
                        filter = filter.status(views::turn_status(&status)?);
                    }
                    let page = views::turns(&runtime, filter, page).await?;
                    print(json, &page, |page| {
                        for t in &page.items {
                            println!("{}  {:?}  session {}", t.id, t.status, t.session_id);
                        }
                        next_hint(page.next.as_ref());
                    });
                }
                Listing::Tasks => {
                    let mut filter = TaskFilter::default();
                    if let Some(session) = session {
                        filter = filter.session(session);
                    }
                    if open {
                        filter = filter.open();
                    }
                    let page = views::tasks(&runtime, filter, page).await?;
                    print(json, &page, |page| {
                        for t in &page.items {
                            println!(
                                "{}  {}  session {}",
                                t.id,
                                t.status.describe(),
                                t.session_id
                            );
                        }
                        next_hint(page.next.as_ref());
                    });
                }
                Listing::Tools => {
                    let catalog = views::catalog(&runtime, Audience::Model, locale.as_deref());
                    if json {
                        println!("{}", catalog.json());
                    } else {
                        for t in catalog.entries() {
                            println!(
                                "{}  {:?}  approval {:?}  {}",
                                t.name,
                                t.effect,
                                t.approval,
                                t.texts.title.as_deref().unwrap_or("")
                            );
                        }
                    }
                }
                Listing::Connections => {
                    let connections = views::connections(&runtime).await?;
                    print(json, &connections, |connections| {
                        if connections.is_empty() {
                            println!("no remote connection is declared");
                        }
                        for c in connections {
                            println!(
                                "{}  {:?}  withheld: {:?}",
                                c.name,
                                c.state,
                                c.withheld.iter().map(|w| &w.name).collect::<Vec<_>>()
                            );
                        }
                    });
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { what, id } => {
            show(&runtime, &principal, json, what, &id).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Approve { request_id, note } => {
            let report =
                actions::respond(&runtime, &principal, &request_id, Answer::Approve, note).await?;
            Ok(report_out(json, &report))
        }
        Command::Deny { request_id, note } => {
            let report =
                actions::respond(&runtime, &principal, &request_id, Answer::Deny, note).await?;
            Ok(report_out(json, &report))
        }
        Command::Answer {
            request_id,
            text,
            option,
            fields,
        } => {
            let answer = match (text, option, fields) {
                (_, Some(label), _) => Answer::Choose(label),
                (_, _, Some(fields)) => Answer::Fill(
                    serde_json::from_str(&fields)
                        .map_err(|e| format!("--fields is not JSON: {e}"))?,
                ),
                (Some(text), _, _) => Answer::Text(text),
                (None, None, None) => return Err("give the answer, --option or --fields".into()),
            };
            let report = actions::respond(&runtime, &principal, &request_id, answer, None).await?;
            Ok(report_out(json, &report))
        }
        Command::Cancel { what, id } => {
            let report = match what {
                Cancelled::Task => actions::cancel_task(&runtime, &id).await?,
                Cancelled::Turn => actions::cancel_turn(&runtime, &id).await?,
            };
            Ok(report_out(json, &report))
        }
    }
}

async fn serve(
    runtime: Runtime,
    principal: Principal,
    addr: SocketAddr,
    token: Option<String>,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    // No `recover()` here: the console runs beside the process that owns the store (the MCP
    // server), and recovering would settle the calls that process is running.
    let token = token.unwrap_or_else(random_token);
    if !addr.ip().is_loopback() {
        eprintln!(
            "warning: serving the console on {addr}, which is not a loopback address: anyone who \
             reaches it can try the token. Put it behind HTTPS and an identity provider."
        );
    }
    let console = Console::new(
        runtime,
        OneToken {
            token: token.clone(),
            principal,
        },
    );
    let server = console.serve(addr).await?;
    println!("console at http://{}/ (Ctrl-C to stop)", server.addr());
    println!("sign in with the token: {token}");
    server.wait().await;
    Ok(ExitCode::SUCCESS)
}

async fn show(
    runtime: &Runtime,
    principal: &Principal,
    json: bool,
    what: Shown,
    id: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let first = views::page(None, 50);
    match what {
        Shown::Turn => {
            let steps = views::page(None, toolwright::runtime::MAX_PAGE_LIMIT);
            let turn = views::turn(runtime, Some(principal), id, steps).await?;
            print(json, &turn, |t| {
                println!(
                    "turn {}  {:?}  session {}  steps {}",
                    t.id, t.status, t.session_id, t.steps
                );
                if let Some(source) = &t.tainted_by {
                    println!("tainted by the output of {source}");
                }
                for c in &t.calls {
                    let result = c.result.as_ref().map(|r| {
                        if r.is_error {
                            format!(" error: {}", r.output)
                        } else {
                            format!(" result: {}", r.output)
                        }
                    });
                    println!(
                        "  step {} call {} {} [{}]{}",
                        c.step,
                        c.call_id,
                        c.tool,
                        c.state,
                        result.unwrap_or_default()
                    );
                }
                for r in &t.requests {
                    println!("  request {} {:?} {:?}", r.request_id, r.kind, r.status);
                }
                for j in &t.journals {
                    println!("  journal {} ({} entries)", j.run_id, j.entries.len());
                }
                if let Some(next) = &t.steps_next {
                    println!(
                        "  more steps after step {} (the web console pages through them)",
                        next.as_str()
                    );
                }
            });
        }
        Shown::Task => {
            let task = views::task(runtime, Some(principal), id).await?;
            print(json, &task, |t| {
                println!(
                    "task {}  {}  tool {}  turn {}",
                    t.id,
                    t.status.describe(),
                    t.tool,
                    t.turn_id
                );
                for r in &t.requests {
                    println!("  question {} {:?}", r.request_id, r.status);
                }
                println!(
                    "  journal {} ({} entries)",
                    t.journal.run_id,
                    t.journal.entries.len()
                );
            });
        }
        Shown::Session => {
            let session = views::session(runtime, id, first.clone(), first).await?;
            print(json, &session, |s| {
                println!("session {}  ended {}", s.id, s.ended);
                for t in &s.turns.items {
                    println!("  turn {} {:?}", t.id, t.status);
                }
                for t in &s.tasks.items {
                    println!("  task {} {}", t.id, t.status.describe());
                }
            });
        }
        Shown::Request => {
            let request = views::find_request(runtime, id).await?;
            let view = views::request_view(runtime, Some(principal), &request).await;
            print(json, &view, |r| {
                println!("request {}  {:?}  {:?}", r.request_id, r.kind, r.status);
                if let Some(prompt) = &r.prompt {
                    println!("  {prompt}");
                }
                if let Some(input) = &r.input {
                    println!("  input: {input}");
                }
                match (&r.refusal, r.may_answer) {
                    (_, true) => println!("  you may answer it"),
                    (Some(why), false) => println!("  you may not answer it: {why}"),
                    (None, false) => {}
                }
            });
        }
        Shown::Journal => {
            let journal = views::journal(runtime, Some(principal), id).await?;
            print(json, &journal, |j| {
                for e in &j.entries {
                    println!("{:>4}  {:?}  {}  {}", e.position, e.kind, e.name, e.value);
                }
            });
        }
        Shown::Tool => {
            let catalog = views::catalog(runtime, Audience::Model, None);
            let tool = catalog
                .get(id)
                .ok_or_else(|| format!("no tool `{id}`; `list tools` lists them"))?;
            print(json, tool, |t| {
                println!("{}  {:?}  approval {:?}", t.name, t.effect, t.approval);
                println!(
                    "{}",
                    serde_json::to_string_pretty(&t.input_schema).unwrap_or_default()
                );
            });
        }
    }
    Ok(())
}

fn print<T: Serialize + ?Sized>(json: bool, value: &T, text: impl FnOnce(&T)) {
    if json {
        match serde_json::to_string_pretty(value) {
            Ok(out) => println!("{out}"),
            Err(error) => eprintln!("error: {error}"),
        }
    } else {
        text(value);
    }
}

fn next_hint(next: Option<&toolwright::runtime::Cursor>) {
    if let Some(next) = next {
        println!("more: --after {}", next.as_str());
    }
}

fn report_out(json: bool, report: &ActionReport) -> ExitCode {
    print(json, report, |r| {
        println!("{}", r.message);
        for (tool, is_error, output) in &r.results {
            let how = if *is_error { "failed" } else { "ran" };
            println!("  {tool} {how}: {output}");
        }
    });
    if report.accepted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}
