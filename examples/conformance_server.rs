//! PLACEHOLDER until the real conformance server lands: the seeds' tools over streamable HTTP,
//! with the command line `tests/mcp_conformance.rs` drives, so the suite's harness can be built
//! and run. The real server serves the conformance suite's fixture tools, prompts, resources and
//! completions.
//!
//! ```sh
//! cargo run --example conformance_server -- --addr 127.0.0.1:0
//! ```

use std::net::SocketAddr;

use clap::Parser;
use toolwright::mcp::{McpHttp, McpServer};
use toolwright::runtime::{Runtime, SqliteStore};
use toolwright::{Principal, Registry};

#[path = "seed/mod.rs"]
mod seed;

#[derive(Parser)]
#[command(about = "Serve MCP for the conformance suite")]
struct Cli {
    /// The HTTP address; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8766")]
    addr: SocketAddr,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let runtime = Runtime::builder(Registry::collect()?)
        .store(SqliteStore::in_memory()?)
        .state(seed::ops::OpsBackend::default())
        .state(seed::release::Releases::default())
        .state(seed::treehole::Treehole::default())
        .state(seed::wallet::Wallet::default())
        .build()?;
    let server = McpServer::new(runtime).principal(Principal::user("local", "you"));
    let handle = McpHttp::new(server).bind(cli.addr).start().await?;
    println!("listening on http://{}/mcp", handle.addr());
    handle.wait().await;
    Ok(())
}
