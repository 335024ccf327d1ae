//! The streamable HTTP transport: `rmcp`'s service behind a bearer-token check, bound to
//! loopback unless told otherwise.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use toolwright_core::Principal;

use crate::{McpError, McpServer};

/// Checks a request's bearer token and says who it belongs to. Return `Err` with a reason to
/// refuse the request (the client gets `401`).
pub trait TokenVerifier: Send + Sync + 'static {
    /// The principal `token` authenticates.
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>>;
}

/// Serving `McpServer` over streamable HTTP.
///
/// ```no_run
/// # async fn demo(server: toolwright_mcp::McpServer, verifier: impl toolwright_mcp::TokenVerifier) -> Result<(), toolwright_mcp::McpError> {
/// let handle = toolwright_mcp::McpHttp::new(server)
///     .verifier(verifier)
///     .start()
///     .await?;
/// println!("MCP at http://{}/mcp", handle.addr());
/// # Ok(())
/// # }
/// ```
pub struct McpHttp {
    server: McpServer,
    addr: SocketAddr,
    verifier: Option<Arc<dyn TokenVerifier>>,
    allowed_hosts: Vec<String>,
}

impl std::fmt::Debug for McpHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttp")
            .field("addr", &self.addr)
            .field("verifier", &self.verifier.is_some())
            .field("allowed_hosts", &self.allowed_hosts)
            .finish_non_exhaustive()
    }
}

impl McpHttp {
    /// Serves `server` at `127.0.0.1` on a port the system picks, path `/mcp`.
    pub fn new(server: McpServer) -> Self {
        McpHttp {
            server,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            verifier: None,
            allowed_hosts: Vec::new(),
        }
    }

    /// Binds `addr` instead. An address that is not loopback exposes the tools to the network:
    /// the server logs a warning, and without a [`McpHttp::verifier`] anyone who reaches it acts
    /// as the server's own principal.
    #[must_use]
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Checks every request's `Authorization: Bearer` token; the principal it returns is the
    /// caller of the request's calls.
    #[must_use]
    pub fn verifier(mut self, verifier: impl TokenVerifier) -> Self {
        self.verifier = Some(Arc::new(verifier));
        self
    }

    /// Also accepts requests whose `Host` is `host` (loopback names are always accepted; others
    /// are refused with `403`, against DNS rebinding).
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Binds and serves on a task of its own until the handle is shut down.
    pub async fn start(self) -> Result<HttpHandle, McpError> {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .map_err(|e| McpError::Transport(format!("cannot bind {}: {e}", self.addr)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| McpError::Transport(e.to_string()))?;
        if !addr.ip().is_loopback() {
            tracing::warn!(
                %addr,
                authenticated = self.verifier.is_some(),
                "the MCP server listens beyond loopback: anyone who reaches {addr} can call its tools{}",
                if self.verifier.is_some() { " with a valid token" } else { " as the server's own principal; add a token verifier" }
            );
        }
        let shutdown = CancellationToken::new();
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        hosts.extend(self.allowed_hosts);
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(shutdown.child_token())
            .with_allowed_hosts(hosts);
        let server = self.server;
        // Each MCP session gets its own binding (toolwright session, turn, principal); rmcp
        // generates the session ids (random UUIDs) and refuses unknown ones.
        let service = StreamableHttpService::new(
            move || Ok(server.for_new_session()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let verifier = self.verifier;
        let router =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(move |request, next| {
                    authenticate(verifier.clone(), request, next)
                }));
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!("the MCP HTTP server stopped: {error}");
            }
        });
        Ok(HttpHandle {
            addr,
            shutdown,
            task,
        })
    }
}

/// Refuses requests without a valid bearer token (when a verifier is set) and hands the
/// principal to the handler through the request's extensions.
async fn authenticate(
    verifier: Option<Arc<dyn TokenVerifier>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let Some(verifier) = verifier else {
        return next.run(request).await;
    };
    let token = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let refused = |reason: String| {
        axum::response::Response::builder()
            .status(http::StatusCode::UNAUTHORIZED)
            .header(http::header::WWW_AUTHENTICATE, "Bearer")
            .body(axum::body::Body::from(reason))
            .unwrap_or_default()
    };
    let Some(token) = token else {
        return refused("an `Authorization: Bearer <token>` header is required".into());
    };
    match verifier.verify(&token).await {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(reason) => refused(format!("the token was refused: {reason}")),
    }
}

/// A running HTTP server.
#[derive(Debug)]
pub struct HttpHandle {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl HttpHandle {
    /// Where it listens (the MCP endpoint is `http://{addr}/mcp`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes the sessions, and waits for the server to stop.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }

    /// Waits until the server stops (it runs until shut down).
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}
