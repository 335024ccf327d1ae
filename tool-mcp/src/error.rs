//! [`McpError`]: why serving failed.

use toolwright_runtime::RuntimeError;

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The transport failed (stdio closed, a socket could not be bound).
    #[error("MCP transport: {0}")]
    Transport(String),
    /// The server was configured wrongly.
    #[error("MCP server configuration: {0}")]
    Config(String),
    /// The runtime refused something.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}
