//! Chat with a model from a terminal while it uses the seeds' tools (`examples/seed`): its text
//! streams as it is written, each tool shows a status line, and approvals and questions are
//! asked right here.
//!
//! ```sh
//! # OpenAI's Responses API, with OPENAI_API_KEY set:
//! cargo run --example agent --features agent -- --provider openai --model gpt-4.1
//! # Anthropic's Messages API, with ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) set:
//! cargo run --example agent --features agent -- --provider anthropic --model claude-sonnet-4-5
//! # Ollama, vLLM, llama.cpp's server or any other Chat Completions server (a key is optional):
//! cargo run --example agent --features agent -- \
//!     --provider openai-compatible --base-url http://127.0.0.1:11434/v1 --model llama3.1
//! ```
//!
//! Ask "payment-api is slow, what's going on?": the model reads the status and the logs, and a
//! restart waits for your `y`. Type `later` (or end the input with Ctrl-D) while a turn waits:
//! the process exits and leaves the turn parked in the SQLite file (`--db`, default
//! `toolwright-agent.db`); `--resume` answers it from a new process (the session's latest
//! waiting turn, or the one named) and the conversation goes on. Run it again without
//! `--resume` to continue the conversation (`--session` picks another one).

#[path = "agent/provider.rs"]
mod provider;
#[path = "seed/mod.rs"]
mod seed;
#[path = "agent/terminal.rs"]
mod terminal;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use toolwright::agent::{Agent, AgentError, AgentOutcome, AgentTurn, Budget, Limits};
use toolwright::runtime::{RespondOutcome, Runtime, SessionSpec, SqliteStore};
use toolwright::{Principal, Registry};

use provider::Provider;
use terminal::{Terminal, watching};

const INSTRUCTIONS: &str = "You are the operations assistant of a small company, talking to \
    an engineer in a terminal. Use the tools to look things up before you answer, and to act \
    when asked; keep answers short.";

#[derive(Parser)]
#[command(about = "Chat with a model that uses the seeds' tools; approvals are asked here")]
struct Cli {
    /// Who answers.
    #[arg(long, value_enum)]
    provider: Provider,
    /// The model, as the provider names it.
    #[arg(long)]
    model: String,
    /// The provider's URL, when it is not the default one (needed for openai-compatible unless
    /// OPENAI_BASE_URL is set).
    #[arg(long)]
    base_url: Option<String>,
    /// The SQLite file holding the conversation and waiting turns.
    #[arg(long, default_value = "toolwright-agent.db")]
    db: PathBuf,
    /// The conversation to continue.
    #[arg(long, default_value = "terminal")]
    session: String,
    /// Answer a waiting turn and go on: the one named, else the session's latest.
    #[arg(long, value_name = "TURN_ID")]
    resume: Option<Option<String>>,
    /// Model rounds a turn may take before you are asked whether it may go on.
    #[arg(long, default_value_t = 20)]
    max_steps: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match chat(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn chat(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let model = provider::model(cli.provider, &cli.model, cli.base_url.as_deref())?;
    let runtime = Runtime::builder(Registry::collect()?)
        .store(SqliteStore::open(&cli.db)?)
        .state(seed::ops::OpsBackend::default())
        .state(seed::release::Releases::default())
        .state(seed::treehole::Treehole::default())
        .state(seed::wallet::Wallet::default())
        .build()?;
    // This process is the only one on the file: a turn a killed run left running is settled.
    runtime.recover().await?;
    let you = Principal::user("terminal", "you");
    let session = runtime
        .open_session(SessionSpec::new(&cli.session).initiator(you.clone()))
        .await?;
    // A turn that keeps calling tools asks before it goes past its rounds (a session-limit
    // request, answered here like an approval: `y` allows as many again, `n` stops the turn).
    let budget = Budget::new().turn(Limits::new().steps(cli.max_steps));
    let agent = Agent::shared(runtime.clone(), model)
        .instructions(INSTRUCTIONS)
        .budget(budget);
    let mut chat = Chat {
        terminal: Terminal::new(you.clone()),
        agent,
        runtime,
    };

    println!(
        "session `{}`: type a message (Ctrl-D to quit)",
        session.id()
    );
    if let Some(named) = cli.resume {
        let turn_id = match named {
            Some(turn_id) => turn_id,
            None => chat.latest_waiting(session.id()).await?,
        };
        let run = chat.run(|agent| agent.resume(&turn_id)).await?;
        if !chat.settle(run).await? {
            return Ok(());
        }
    }
    while let Some(line) = chat.terminal.line("> ").await {
        if line.is_empty() {
            continue;
        }
        let run = chat
            .run(|agent| agent.send(&session, Some(you.clone()), &line))
            .await?;
        if !chat.settle(run).await? {
            return Ok(());
        }
    }
    Ok(())
}

/// The agent and the terminal it talks through.
struct Chat {
    terminal: Terminal,
    agent: Agent,
    runtime: Runtime,
}

impl Chat {
    /// Runs the loop (`send` or `resume`), showing its events as they come.
    async fn run<'a, F>(
        &'a mut self,
        start: impl FnOnce(&'a Agent) -> F,
    ) -> Result<AgentTurn, AgentError>
    where
        F: Future<Output = Result<AgentTurn, AgentError>>,
    {
        let Chat {
            terminal, agent, ..
        } = self;
        let mut events = agent.subscribe();
        watching(&mut events, |e| terminal.show_agent(e), start(agent)).await
    }

    /// Takes the turn to its end: answers the approvals and questions it waits on, then resumes
    /// it. `false` when the person left a request for later: the turn stays parked.
    async fn settle(&mut self, mut run: AgentTurn) -> Result<bool, Box<dyn std::error::Error>> {
        loop {
            let requests = match run.outcome {
                AgentOutcome::Waiting(requests) if !requests.is_empty() => requests,
                AgentOutcome::Waiting(_) => {
                    println!(
                        "turn {} waits on a workflow task; --resume it later",
                        run.turn_id
                    );
                    return Ok(false);
                }
                AgentOutcome::Stopped(_) => {
                    self.terminal.end_line();
                    println!("the turn stopped at its budget; send a new message to go on");
                    return Ok(true);
                }
                _ => {
                    self.terminal.end_line();
                    return Ok(true);
                }
            };
            for request in &requests {
                loop {
                    let Some(answer) = self.terminal.ask(request).await else {
                        println!(
                            "waiting: turn {0} (answer it later: the same flags and `--resume {0}`)",
                            run.turn_id
                        );
                        return Ok(false);
                    };
                    // The answer may run the parked calls: show their status lines too.
                    let mut events = self.runtime.subscribe();
                    let terminal = &mut self.terminal;
                    let respond = self.runtime.respond(answer);
                    match watching(&mut events, |e| terminal.show_runtime(e), respond).await? {
                        RespondOutcome::Rejected { reason } => println!("  not accepted: {reason}"),
                        _ => break,
                    }
                }
            }
            let turn_id = run.turn_id.clone();
            run = self.run(|agent| agent.resume(&turn_id)).await?;
        }
    }

    /// The session's most recent turn that waits for an answer.
    async fn latest_waiting(&self, session: &str) -> Result<String, Box<dyn std::error::Error>> {
        // Oldest first: the last one of the session is its latest.
        let mut latest = None;
        for turn_id in self.runtime.waiting_turns().await? {
            if self.runtime.turn(&turn_id).await?.session_id() == session {
                latest = Some(turn_id);
            }
        }
        latest.ok_or_else(|| format!("no turn of session `{session}` is waiting").into())
    }
}
