//! The seeds' tools served over the Model Context Protocol, on the embedded SQLite store.
//!
//! ```sh
//! cargo run --example mcp_server                      # streamable HTTP at http://127.0.0.1:8765/mcp
//! cargo run --example mcp_server -- --stdio           # stdio, for desktop assistants and IDEs
//! cargo run --example mcp_server -- --token s3cret    # require `Authorization: Bearer s3cret`
//! ```
//!
//! Point any MCP client at it (the MCP Inspector, a desktop assistant): the tools keep their
//! policies, so `restart_service` asks the user through elicitation before it runs, and a client
//! that cannot ask is told so instead of the call running. Parked calls and journals live in
//! `--db` (default `toolwright-mcp.db`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use toolwright::mcp::{McpHttp, McpServer, TokenVerifier};
use toolwright::runtime::{Runtime, SqliteStore};
use toolwright::{Principal, Registry};

#[path = "seed/mod.rs"]
mod seed;

#[derive(Parser)]
#[command(about = "Serve the seed tools over MCP")]
struct Cli {
    /// Serve over stdin/stdout instead of HTTP.
    #[arg(long)]
    stdio: bool,
    /// The HTTP address (loopback unless you mean to expose the tools).
    #[arg(long, default_value = "127.0.0.1:8765")]
    addr: SocketAddr,
    /// Require this bearer token; its holder acts as the user `mcp-user`.
    #[arg(long)]
    token: Option<String>,
    /// The SQLite file holding sessions, parked calls and journals.
    #[arg(long, default_value = "toolwright-mcp.db")]
    db: PathBuf,
    /// The most MCP sessions open at once over HTTP (more get `503`).
    #[arg(long, default_value_t = 1_000)]
    max_sessions: usize,
    /// The most MCP sessions one principal may have open over HTTP (more get `429`).
    #[arg(long, default_value_t = 100)]
    max_sessions_per_principal: usize,
}

/// One fixed token, for the demo; a real server checks tokens with its identity provider.
struct FixedToken(String);

impl TokenVerifier for FixedToken {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            if token == self.0 {
                Ok(Principal::user("demo", "mcp-user"))
            } else {
                Err("not the server's token".into())
            }
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let runtime = Runtime::builder(Registry::collect()?)
        .store(SqliteStore::open(&cli.db)?)
        .state(seed::ops::OpsBackend::default())
        .state(seed::release::Releases::default())
        .state(seed::treehole::Treehole::default())
        .state(seed::wallet::Wallet::default())
        .build()?;
    runtime.recover().await?;
    let server = McpServer::new(runtime).principal(Principal::user("local", "you"));
    if cli.stdio {
        toolwright::mcp::serve_stdio(server).await?;
        return Ok(());
    }
    let mut http = McpHttp::new(server)
        .bind(cli.addr)
        .max_sessions(cli.max_sessions)
        .max_sessions_per_principal(cli.max_sessions_per_principal);
    if let Some(token) = cli.token {
        http = http.verifier(FixedToken(token));
    }
    let handle = http.start().await?;
    println!(
        "MCP server at http://{}/mcp (Ctrl-C to stop)",
        handle.addr()
    );
    handle.wait().await;
    Ok(())
}
