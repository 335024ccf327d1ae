//! Serve a toolwright [`Runtime`] over the Model Context Protocol, through `rmcp`.
//!
//! [`McpServer`] is an `rmcp` server handler built once from a runtime: the model-facing tool list
//! (titles, annotations derived from effects, output schemas, the `tool_search`/`tool_call` and
//! `task_wait`/`task_cancel` meta-tools) is converted once and served in pages; every
//! `tools/call` runs through the runtime's pipeline with its policies, in one toolwright session
//! and turn per MCP session, so taint from `untrusted` tools carries across the session's calls.
//!
//! - Approvals and questions: a call that needs a person asks the client through elicitation
//!   (form mode) when the client declared it; accept / decline / cancel become approve / deny /
//!   cancel through the same input protocol and response policies as in process. A client that
//!   cannot ask gets an `isError` result naming the policy; nothing runs, nothing is approved
//!   silently.
//! - Progress: partial snapshots become `notifications/progress` when the request carries a
//!   progress token. Cancellation: `notifications/cancelled` cancels the call's turn, which fires
//!   the tool's cancellation token.
//! - Identity: over stdio, the principal given to [`McpServer::principal`]; over HTTP, the
//!   principal a [`TokenVerifier`] returns for the request's bearer token. An MCP session is bound
//!   to the principal that opened it: a request from another principal is refused.
//!
//! ```no_run
//! # async fn demo(runtime: toolwright_runtime::Runtime) -> Result<(), toolwright_mcp::McpError> {
//! let server = toolwright_mcp::McpServer::new(runtime);
//! toolwright_mcp::serve_stdio(server).await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`Runtime`]: toolwright_runtime::Runtime

#![warn(missing_docs)]

mod client;
mod convert;
mod error;
mod http_server;
mod input;
mod listing;
mod server;
mod tasks;

pub use client::{AuthResolver, McpConnector};
pub use error::McpError;
pub use http_server::{HttpHandle, McpHttp, TokenVerifier};
pub use server::{McpServer, serve_stdio};
