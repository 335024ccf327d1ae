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

#![warn(missing_docs)]

#[doc(inline)]
pub use toolwright_macros::ToolInput;
#[doc = include_str!("../tool-macros/docs/tool.md")]
#[doc(inline)]
pub use toolwright_macros::tool;

#[doc(inline)]
pub use toolwright_core::Services;
#[doc(inline)]
pub use toolwright_core::{
    Annotations, ApprovalCall, ApprovalContext, ApprovalDecision, ApprovalGrant, ApprovalKey,
    ApprovalSpec, ApprovedTools, AskAnswer, AskDisplay, AskOption, AskRequest, Audience,
    CallContext, CallContextBuilder, CallHost, CallOutput, Caller, CancelSignal, ContentPart,
    DetachedHost, DurableContext, DurableParam, Effect, EnabledContext, EndsTurn, Entry, ErrorCode,
    Format, HostEvent, InputError, InputProblem, Location, LogLevel, ModelOutput, NeverCancelled,
    NoInput, OptionStyle, PlainParam, Principal, PrincipalType, PromptContext, ProviderTool,
    Registry, RegistryError, RegistryProblem, RequestPolicy, Requirement, ResponseCall,
    ResponseContext, ResponseDecision, ResponseVerdict, Retry, ServeCall, ServeCalls,
    ServeIncoming, ServeInput, SessionInfo, State, Status, Tool, ToolContext, ToolDescriptor,
    ToolError, ToolInput, ToolKind, ToolList, WorkflowContext, WorkflowParam, ask_question,
};

/// Provider exports of single tools and schema helpers.
pub mod export {
    #[doc(inline)]
    pub use toolwright_core::export::{
        anthropic, mcp, meta_tools, openai, openai_strict, provider_entry, strict_schema,
        strip_strict_nulls,
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
pub mod runtime {
    #[doc(inline)]
    pub use toolwright_core::remote::{
        RemoteDefinition, RemoteInvoke, RemotePolicy, RemoteTool, ToolOverride,
    };
    #[doc(inline)]
    pub use toolwright_runtime::record::{
        Approver, CallResult, CallState, ClosedStep, Decision, EntryKind, InputRequest,
        JournalEntry, Outcome, PendingCall, PendingStep, Permission, RequestKind, RequestStatus,
        SessionRecord, TaskCall, TaskRecord, TaskResult, TaskStatus, TurnRecord, TurnStatus,
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
    pub use toolwright_runtime::toolset::{
        CONTEXT_PREAMBLE, ContextEntry, ContextFuture, ContextRequest, SkippedContext, Toolset,
        TurnContext,
    };
    #[doc(inline)]
    pub use toolwright_runtime::{
        AutoRequest, AutoVerdict, CandidateStatus, Claim, Clock, CompletionReason, Decider, Event,
        InputResponse, Invoked, Lease, LeaseKind, Options, RespondOutcome, Runtime, RuntimeBuilder,
        RuntimeError, Session, SessionSpec, SqliteStore, StepOutcome, Store, StoreError,
        SystemClock, ToolCall, Turn, Written,
    };
    #[cfg(feature = "postgres")]
    #[doc(inline)]
    pub use toolwright_runtime::{PgStep, PostgresStore, store::postgres_sql};
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
    #[doc(inline)]
    pub use toolwright_runtime::LocalSandbox;
}

/// Serving the runtime over the Model Context Protocol (stdio and streamable HTTP), through rmcp.
pub mod mcp {
    #[doc(inline)]
    pub use toolwright_mcp::{
        AuthResolver, HttpHandle, McpConnector, McpError, McpHttp, McpServer, TokenVerifier,
        serve_stdio,
    };
}

/// Everything a tool definition usually needs: `use toolwright::prelude::*;`.
pub mod prelude {
    #[doc(inline)]
    pub use toolwright_core::{
        ApprovalContext, ApprovalDecision, AskAnswer, AskDisplay, AskOption, AskRequest,
        ContentPart, DurableContext, EnabledContext, ModelOutput, NoInput, OptionStyle,
        PromptContext, ProviderTool, Registry, ResponseContext, ResponseVerdict, Retry, ServeCalls,
        Services, State, Status, ToolContext, ToolError, ToolInput, WorkflowContext,
    };
    #[doc(inline)]
    pub use toolwright_macros::{ToolInput, tool};
}

#[doc(hidden)]
pub mod __private {
    pub use toolwright_core::private::*;
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
