//! # toolwright
//!
//! Define the tools LLM agents call as ordinary Rust fns, with every definition checked at
//! compile time, and run them with a runtime that validates input, applies approval policies,
//! tracks taint, projects output for the model and serves the same tools over MCP.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use toolwright::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema, ToolInput)]
//! struct StatusArgs {
//!     /// Service name, e.g. payment-api.
//!     service: String,
//! }
//!
//! #[derive(Serialize)]
//! struct Status {
//!     service: String,
//!     healthy: bool,
//! }
//!
//! /// Current health of one service. Use when the user asks whether a service is up.
//! #[tool(effect = read)]
//! async fn get_service_status(args: StatusArgs) -> Result<Status, ToolError> {
//!     Ok(Status { service: args.service, healthy: true })
//! }
//!
//! # futures_executor::block_on(async {
//! let registry = Registry::from_tools([get_service_status::TOOL]).unwrap();
//! let out = registry
//!     .call("get_service_status", serde_json::json!({ "service": "payment-api" }))
//!     .await
//!     .unwrap();
//! assert_eq!(out.value["healthy"], true);
//! # });
//! ```
//!
//! See the README for the attribute table, the compile-time rules and the quick start.
//!
//! ## Features
//!
//! Without default features (`default-features = false`) toolwright is the lean core: `#[tool]`,
//! the registry, schemas, validation with defaults, the provider exports and direct calls like
//! the one above, with no async runtime, database or server. The features add the rest:
//!
//! | feature | what it adds | default |
//! |---|---|---|
//! | `runtime` | [`runtime`]: sessions, turns, approvals, durable steps, the embedded SQLite store (tokio) | yes |
//! | `mcp` | [`mcp`]: serving tools over MCP (stdio, streamable HTTP) and remote MCP servers' tools (rmcp, axum); implies `runtime` | yes |
//! | `tls` | HTTPS to remote MCP servers (rustls with ring); implies `mcp` | yes |
//! | `sandbox` | [`sandbox::LocalSandbox`]: files, search and processes confined to a directory; implies `runtime` | yes |
//! | `agent` | [`agent`]: the model loop: the `Model` trait, the Chat Completions, Responses and Anthropic Messages adapters, the `Agent` that drives a runtime turn within a budget, retrying what a provider fails for now; implies `runtime` | no |
//! | `agent-loopback` | `agent::LoopbackProvider`: a model provider on `127.0.0.1` answering a script in each adapter's wire format, for tests (axum); implies `agent` | no |
//! | `postgres` | [`runtime::PostgresStore`], for several instances sharing one database; implies `runtime` | no |
//!
//! The default is what the README's quick start needs (the example MCP server on the embedded
//! SQLite store); PostgreSQL is for deployments that run several instances.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(inline)]
pub use toolwright_macros::ToolInput;
#[doc = include_str!("../tool-macros/docs/tool.md")]
#[doc(inline)]
pub use toolwright_macros::tool;

#[doc(inline)]
pub use toolwright_core::{
    ApprovalContext, ApprovalDecision, AskAnswer, AskDisplay, AskOption, AskRequest, Caller,
    ContentPart, DurableContext, DynamicTool, Effect, EnabledContext, ErrorCode, Hook, HookEvent,
    ModelOutput, NoInput, OptionStyle, Principal, PromptContext, ProviderTool, Registry,
    ResponseContext, ResponseVerdict, Retry, Sensitive, ServeCalls, Services, State, Status, Token,
    TokenError, ToolContext, ToolError, ToolInput, WorkflowContext,
};
#[doc(inline)]
pub use toolwright_core::{
    GuardrailStage, InputCheck, InputVerdict, OutputCheck, OutputVerdict, Preparation,
    PrepareContext,
};

/// Guardrails and per-step tool preparation in full: what `#[tool(guardrails(...))]` and
/// `#[tool(prepare = ...)]` name, the traits a runtime's own guardrails implement, and the
/// erased fn types the descriptor holds.
pub mod guardrail {
    #[doc(inline)]
    pub use toolwright_core::guardrail::{
        GuardrailSpec, InputGuardrail, InputGuardrailFn, IntoInputVerdict, IntoOutputVerdict,
        OutputGuardrail, OutputGuardrailFn, PrepareFn, PrepareTools,
    };
}

/// Credentials: the broker a host installs to hand out tokens of connected services, the
/// tokens, and why one cannot be had (a status the user can fix).
pub mod credentials {
    #[doc(inline)]
    pub use toolwright_core::credentials::{
        AuthReason, AuthorizationRequired, CredentialBroker, Token, TokenError, TokenHolder,
    };
}

/// Approval policies in full: the request and response policies a `#[tool]` names, what they
/// receive, the memory of `once` approvals, and the decisions of the people who answer.
pub mod approval {
    #[doc(inline)]
    pub use toolwright_core::approval::{
        ApprovalCall, ApprovalKey, ApprovalSpec, ApprovedTools, AutoCriteria, AutoSpec,
        CancelSignal, IntoDecision, KeyFn, NeverCancelled, PolicyFn, PromptFn, RequestPolicy,
        ResponseCall, ResponseDecision, ResponseFn,
    };
    #[doc(inline)]
    pub use toolwright_core::context::ApprovalGrant;
}

/// What a tool's body runs with: its context and what the context reaches (the session, logs,
/// the outputs it returns), and the host interface a runtime implements behind it.
pub mod context {
    #[doc(inline)]
    pub use toolwright_core::context::{
        CallContext, CallHost, DurableParam, HookHandle, HostEvent, LogLevel, Messages, PlainParam,
        Requirement, ServeIncoming, StepNames, StoreWork, WorkflowParam,
    };
    #[doc(inline)]
    pub use toolwright_core::input::{ServeCall, ServeInput};
    #[doc(inline)]
    pub use toolwright_core::output::CallOutput;
    #[doc(inline)]
    pub use toolwright_core::session::{PrincipalType, RESERVED_STATE_PREFIX, SessionInfo};
}

/// The registry and its tools: what a tool is (its descriptor, written by `#[tool]` or by
/// hand), the lists sent to models per audience and format, and why a registry refuses a
/// tool.
pub mod registry {
    #[doc(inline)]
    pub use toolwright_core::descriptor::{
        DeltaFn, DescribeFn, EnabledFn, EndsTurn, InputSpec, InvokeFn, LabelFn, LabelSpec,
        LocaleText, Location, ProviderFn, SchemaFn, ToolDescriptor, ToolKind,
    };
    #[doc(inline)]
    pub use toolwright_core::effect::Annotations;
    #[doc(inline)]
    pub use toolwright_core::error::{InputError, InputProblem};
    #[doc(inline)]
    pub use toolwright_core::sensitive::{REDACTED, SensitivePaths, mark_properties};
    #[doc(inline)]
    pub use toolwright_core::workflow::Entry;
    #[doc(inline)]
    pub use toolwright_core::{
        ApprovalPolicy, Audience, Catalog, CatalogEntry, DefinitionError, DynamicTool, Format,
        RegistryError, RegistryProblem, Sensitivity, Tool, ToolList, ToolOrigin, Visibility,
        registry::ListEntry,
    };
    #[doc(inline)]
    pub use toolwright_core::{GENERAL_AGENT, TaskArgs, ask_question, task};
}

/// Locales: how a tool's `title`, `summary` and `i18n(...)` texts resolve for a person reading
/// a given language (the fallback rule), and the tags it compares.
pub mod locale {
    #[doc(inline)]
    pub use toolwright_core::locale::{
        DEFAULT_LOCALE, ToolTexts, fallbacks, is_locale, normalized, same_locale,
    };
}

/// The model handle: a tool asks a model through `ctx.model()` (the MCP client's through
/// sampling, or one installed on the runtime), for text or for a result checked against a Rust
/// type, and the backend trait a host implements behind it.
pub mod model {
    #[doc(inline)]
    pub use toolwright_core::model::{
        AgentHandle, DEFAULT_MAX_TOKENS, MessageRole, ModelBackend, ModelHandle, ModelMessage,
        ModelOrigin, ModelReply, ModelRequest, ModelUsage, Prompt, StopReason,
    };
}

/// Test hosts: run a tool's body directly, outside any runtime, with a context built by hand.
pub mod testing {
    #[doc(inline)]
    pub use toolwright_core::context::{CallContextBuilder, DetachedHost};
}

/// Provider exports of single tools and schema helpers.
pub mod export {
    #[doc(inline)]
    pub use toolwright_core::export::{
        anthropic, mcp, mcp_titled, meta_tools, openai, openai_strict, provider_entry,
        strict_schema, strip_strict_nulls,
    };
    #[doc(inline)]
    pub use toolwright_core::schema::{InputValidator, schema_of};
}

/// Strict parsing of the raw JSON arguments a model sends.
pub mod json {
    #[doc(inline)]
    pub use toolwright_core::json::{MAX_ARGUMENT_BYTES, MAX_DEPTH, parse_arguments};
}

/// Names: the rule, reserved names and the humanized label fallback.
pub mod names {
    #[doc(inline)]
    pub use toolwright_core::names::{
        MAX_NAME_LEN, RESERVED_NAMES, humanize, is_reserved, is_valid_name,
    };
}

/// The runtime: sessions, turns, the call pipeline, approvals and the stores that let a parked
/// turn outlive its process.
#[cfg(feature = "runtime")]
pub mod runtime {
    #[doc(inline)]
    pub use toolwright_core::remote::{
        RemoteDefinition, RemoteInvoke, RemotePolicy, RemoteTool, ToolOverride,
    };
    #[doc(inline)]
    pub use toolwright_runtime::attachments::{self, Attachment};
    #[doc(inline)]
    pub use toolwright_runtime::record::{
        Approver, AttachmentPlace, AttachmentRecord, CallResult, CallState, ClosedStep,
        ConversationEntry, Decision, EntryKind, InputRequest, JournalEntry, Outcome, PendingCall,
        PendingStep, Permission, RequestKind, RequestStatus, SessionRecord, StepInput, StepPatch,
        TaskCall, TaskRecord, TaskResult, TaskStatus, TurnRecord, TurnStatus,
    };
    #[doc(inline)]
    pub use toolwright_runtime::record::{DefinitionChange, PinRecord};
    #[doc(inline)]
    pub use toolwright_runtime::remote::{
        ConnectError, Connection, ConnectionState, ConnectionStatus, Connector, ListChanged,
        RemoteSession,
    };
    /// The store test suite every backend passes.
    pub use toolwright_runtime::store::conformance;
    #[doc(inline)]
    pub use toolwright_runtime::store::{ANONYMOUS_REQUESTER, UNKNOWN_REQUESTER, requester_key};
    #[doc(inline)]
    pub use toolwright_runtime::toolset::{
        CONTEXT_PREAMBLE, ContextEntry, ContextFuture, ContextRequest, SkippedContext, Toolset,
        TurnContext,
    };
    #[doc(inline)]
    pub use toolwright_runtime::{
        Appended, AutoRequest, AutoVerdict, CandidateStatus, ChangeMark, Claim, Clock,
        CompletionReason, Decider, Deleted, Event, GuardrailAction, HookDelivery, HookRefused,
        InputResponse, Invoked, Lease, LeaseKind, Options, ProviderResult, RespondOutcome,
        Retention, Runtime, RuntimeBuilder, RuntimeError, Sealing, SealingKeyError, Session,
        SessionSpec, Since, SqliteStore, Steered, StepOptions, StepOutcome, StepProgress,
        StepSince, Store, StoreError, Swept, SystemClock, ToolCall, Turn, TurnRetention,
        WeakRuntime, Written, waiting_on_calls,
    };
    #[cfg(feature = "postgres")]
    #[doc(inline)]
    pub use toolwright_runtime::{PgStep, PostgresStore, store::postgres_sql};
    // The paged listings of a store (`Store::list_sessions`, `list_turns`, `list_tasks`).
    #[doc(inline)]
    pub use toolwright_runtime::{
        Cursor, MAX_PAGE_LIMIT, Page, PageRequest, SessionSummary, TaskFilter, TaskSummary,
        TurnFilter, TurnSummary,
    };
}

/// The sandbox a host installs: files and commands in one confined place, reached through
/// `ToolContext::sandbox`, with the built-in tools `read`, `write`, `edit`, `bash`, `grep` and
/// `glob` over it.
pub mod sandbox {
    #[doc(inline)]
    pub use toolwright_core::sandbox::{
        DirEntry, EntryKind, ExecOutput, ExecRequest, FileChunk, Found, GrepMatch, GrepRequest,
        Sandbox, SandboxError,
    };
    #[doc(inline)]
    pub use toolwright_core::sandbox_tools::{
        BASH_MAX_TIMEOUT, EDIT_MAX_BYTES, FIND_MAX, READ_MAX_BYTES, READ_MAX_LINES,
    };
    #[cfg(feature = "sandbox")]
    #[doc(inline)]
    pub use toolwright_runtime::LocalSandbox;
}

/// Serving the runtime over the Model Context Protocol (stdio and streamable HTTP), through rmcp.
#[cfg(feature = "mcp")]
pub mod mcp {
    #[doc(inline)]
    pub use toolwright_mcp::{
        AuthResolver, HttpHandle, IntrospectionVerifier, McpConnector, McpError, McpHttp,
        McpServer, ProtectedResource, SESSION_HEADER, TokenError, TokenVerifier, VerifiedToken,
        WEBHOOK_BODY_LIMIT, serve_io, serve_stdio, webhook_router, webhook_router_with_limit,
    };

    /// `rmcp`, the MCP SDK the server is built on: the [`ServerHandler`](rmcp::ServerHandler)
    /// a handler composed with [`McpServer::compose`] implements, the protocol's model types and
    /// the request context, at the version the server uses.
    #[doc(no_inline)]
    pub use toolwright_mcp::rmcp;
}

/// The model loop: a provider-neutral [`Model`](agent::Model), the Chat Completions adapter
/// (also for OpenAI-compatible servers), the OpenAI Responses API and Anthropic Messages API
/// adapters, a scripted model
/// for tests (served over HTTP in each adapter's wire format by `LoopbackProvider`, with
/// `agent-loopback`), and the
/// [`Agent`](agent::Agent) that drives a runtime turn until a final answer, an ending tool or
/// a park, with the conversation stored beside the turn, within a [`Budget`](agent::Budget)
/// whose limits park the turn on a session-limit request, retrying model requests per a
/// [`RetryPolicy`](agent::RetryPolicy); [`Backend`](agent::Backend) lends the same model to the
/// tools (`ctx.model()`).
#[cfg(feature = "agent")]
pub mod agent {
    #[doc(inline)]
    pub use toolwright_agent::*;
}

/// The operator console: a runtime's parked turns, pending approvals and questions, tasks,
/// journals and remote connections in a browser (server-rendered HTML on axum, no script
/// needed), with the actions an operator takes on them: approve or deny with a note, answer,
/// cancel a task, approve a remote tool's changed definition. People sign in through a
/// [`TokenVerifier`](crate::mcp::TokenVerifier); every form carries a CSRF token; response
/// policies apply exactly as in [`Runtime::respond`](crate::runtime::Runtime::respond).
/// [`Console::router`](console::Console::router) mounts it in a host's axum router;
/// [`views`](console::views) gives the same data to a CLI.
#[cfg(feature = "console")]
pub mod console {
    #[doc(inline)]
    pub use toolwright_console::*;
}

/// Everything a tool definition usually needs: `use toolwright::prelude::*;`.
pub mod prelude {
    #[doc(inline)]
    pub use toolwright_core::{
        ApprovalContext, ApprovalDecision, AskAnswer, AskDisplay, AskOption, AskRequest,
        ContentPart, DurableContext, EnabledContext, Hook, HookEvent, ModelOutput, NoInput,
        OptionStyle, PromptContext, ProviderTool, Registry, ResponseContext, ResponseVerdict,
        Retry, Sensitive, ServeCalls, Services, State, StateKey, Status, Token, TokenError,
        ToolContext, ToolError, ToolInput, WorkflowContext,
    };
    #[doc(inline)]
    pub use toolwright_core::{
        InputCheck, InputVerdict, OutputCheck, OutputVerdict, Preparation, PrepareContext,
    };
    #[doc(inline)]
    pub use toolwright_macros::{ToolInput, tool};
}

#[doc(hidden)]
pub mod __private {
    pub use toolwright_core::private::*;
}

// The README's examples use the runtime, MCP, the sandbox, PostgreSQL, the agent loop and the
// console.
#[cfg(all(
    doctest,
    feature = "mcp",
    feature = "console",
    feature = "sandbox",
    feature = "postgres",
    feature = "agent"
))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
