//! Serve a toolwright [`Runtime`] over the Model Context Protocol, through `rmcp`.
//!
//! [`McpServer`] is an `rmcp` server handler built once from a runtime: the model-facing tool list
//! (titles, annotations derived from effects, output schemas, the `tool_search`/`tool_call` and
//! `task_wait`/`task_cancel` meta-tools) is converted once and served in pages; every
//! `tools/call` runs through the runtime's pipeline with its policies, in one toolwright session
//! per MCP session.
//!
//! - Taint: once an `untrusted` tool returned in an MCP session, its `write`, `money` and
//!   `public` calls need the user's confirmation for the rest of the MCP session, on every
//!   protocol version: when a turn ends (an `ends_turn` tool), is cancelled or is left waiting,
//!   the session's next turn begins tainted, and approving one call does not clear it. The
//!   2026-07-28 revision has no sessions, so over HTTP its requests share a binding by who sends
//!   them: the principal of the bearer token (the server's own without a verifier) and the
//!   optional [`SESSION_HEADER`] the host sets per conversation, which the model cannot set.
//!   Over stdio the process is the session.
//! - Approvals and questions: a call that needs a person asks the client through elicitation
//!   (form mode) when the client declared it; accept / decline / cancel become approve / deny /
//!   cancel through the same input protocol and response policies as in process. A client that
//!   cannot ask gets an `isError` result naming the policy; nothing runs, nothing is approved
//!   silently.
//! - Sampling: a tool's `ctx.model()` asks the client's model. A 2025-11-25 client that declared
//!   `sampling` gets `sampling/createMessage`; a 2026-07-28 client gets it in an input-required
//!   result and calls again with the answer, and the tool runs again from its start with the
//!   answers recorded so far (so such a tool's side effects belong after its asks). Tools in the
//!   model's session are offered only to clients that declared `sampling.tools`. A client that
//!   declared no sampling gets an `isError` result saying so, unless the runtime has a model of
//!   its own (`RuntimeBuilder::model`), which then answers.
//! - Progress: partial snapshots become `notifications/progress` when the request carries a
//!   progress token. Cancellation: `notifications/cancelled` cancels the call's turn, which fires
//!   the tool's cancellation token; a call waiting for its user's answer stops waiting, and its
//!   request is settled as cancelled.
//! - Identity: over stdio, the principal given to [`McpServer::principal`]; over HTTP, the
//!   principal a [`TokenVerifier`] returns for the request's bearer token. An MCP session is bound
//!   to the principal that opened it: a request from another principal is refused. A server
//!   declared a [`ProtectedResource`] is an OAuth 2.1 resource server as the MCP authorization
//!   spec describes: it publishes its RFC 9728 metadata, points clients at it in every `401`,
//!   and accepts only tokens issued for it.
//! - Limits over HTTP: sessions are capped in all and per principal and closed when idle (see
//!   [`McpHttp`]); `tools/call` arguments are parsed strictly, as in process (duplicate keys are
//!   refused with the in-process error result, over stdio too).
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

mod binding;
mod changes;
mod client;
mod compose;
mod convert;
mod error;
mod guard;
mod http_server;
mod input;
mod limits;
mod listing;
mod notify;
mod oauth;
mod progress;
mod raw;
mod sampling;
mod server;
mod tasks;
mod webhook;

pub use binding::SESSION_HEADER;
pub use client::{AuthResolver, McpConnector};
pub use error::McpError;
pub use http_server::{HttpHandle, McpHttp};
pub use oauth::{
    IntrospectionVerifier, ProtectedResource, TokenError, TokenVerifier, VerifiedToken,
};
pub use raw::serve_io;
/// The `rmcp` crate this server is built on: its [`ServerHandler`](rmcp::ServerHandler) and
/// model types, for handlers composed into [`McpServer::compose`].
pub use rmcp;
pub use server::{McpServer, serve_stdio};
pub use webhook::{WEBHOOK_BODY_LIMIT, webhook_router, webhook_router_with_limit};
