//! The seeds' tools served over the Model Context Protocol, on the embedded SQLite store.
//!
//! ```sh
//! cargo run --example mcp_server                      # streamable HTTP at http://127.0.0.1:8765/mcp
//! cargo run --example mcp_server -- --stdio           # stdio, for desktop assistants and IDEs
//! cargo run --example mcp_server -- --token s3cret    # require `Authorization: Bearer s3cret`
//! # an OAuth protected resource of an authorization server, tokens checked by introspection:
//! cargo run --example mcp_server -- --authorization-server https://auth.example.com \
//!     --introspection https://auth.example.com/oauth2/introspect \
//!     --introspection-client mcp-server:its-secret --scope mcp:tools
//! ```
//!
//! Point any MCP client at it (the MCP Inspector, a desktop assistant): the tools keep their
//! policies, so `restart_service` asks the user through elicitation before it runs, and a client
//! that cannot ask is told so instead of the call running. Parked calls and journals live in
//! `--db` (default `toolwright-mcp.db`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use toolwright::mcp::{
    IntrospectionVerifier, McpHttp, McpServer, ProtectedResource, TokenVerifier,
};
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
    #[arg(long, conflicts_with = "authorization_server")]
    token: Option<String>,
    /// Act as an OAuth protected resource whose tokens this authorization server issues (its
    /// issuer URL): clients find it through `/.well-known/oauth-protected-resource`.
    #[arg(long, requires = "introspection")]
    authorization_server: Option<String>,
    /// The authorization server's token introspection endpoint (RFC 7662), which checks tokens.
    #[arg(long, requires = "authorization_server")]
    introspection: Option<String>,
    /// This server's credentials at the introspection endpoint, `client_id:client_secret`.
    #[arg(long, requires = "introspection")]
    introspection_client: Option<String>,
    /// The MCP endpoint's URL as clients reach it (default `http://<addr>/mcp`).
    #[arg(long, requires = "authorization_server")]
    resource: Option<String>,
    /// A scope every token must grant (repeat for several).
    #[arg(long = "scope", requires = "authorization_server")]
    scopes: Vec<String>,
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
    if let (Some(issuer), Some(endpoint)) = (cli.authorization_server, cli.introspection) {
        let mut resource = ProtectedResource::new(issuer)
            .required_scopes(cli.scopes)
            .resource_name("toolwright seed tools");
        if let Some(uri) = cli.resource {
            resource = resource.resource(uri);
        }
        let mut verifier = IntrospectionVerifier::new(endpoint);
        if let Some(client) = cli.introspection_client {
            let (id, secret) = client
                .split_once(':')
                .ok_or("--introspection-client takes `client_id:client_secret`")?;
            verifier = verifier.client_credentials(id, secret);
        }
        http = http.protected_resource(resource).verifier(verifier);
    }
    let handle = http.start().await?;
    println!(
        "MCP server at http://{}/mcp (Ctrl-C to stop)",
        handle.addr()
    );
    handle.wait().await;
    Ok(())
}
