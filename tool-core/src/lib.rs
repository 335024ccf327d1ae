//! Definitions and policy types of toolwright: tool descriptors, effects, approvals, errors,
//! names, the `inventory` registry, schema processing and provider exports.
//!
//! Most users depend on the `toolwright` facade crate instead, which re-exports this crate
//! together with the `#[tool]` macro and the runtime. This crate has no async runtime and no MCP
//! types.

#![warn(missing_docs)]

pub mod approval;
pub mod builtin;
pub mod context;
pub mod credentials;
pub mod descriptor;
pub mod effect;
pub mod error;
pub mod export;
pub mod guardrail;
pub mod input;
pub mod json;
pub mod locale;
pub mod model;
pub mod names;
pub mod output;
pub mod provider;
pub mod registry;
pub mod remote;
pub mod sandbox;
pub mod sandbox_tools;
pub mod schema;
pub mod sensitive;
pub mod services;
pub mod session;
pub mod workflow;

// The parts of the registry, each imported only by the ones after it:
// `digest ← remote ← tool ← export ← list ← catalog ← registry`, with `problem` and `locale`
// below `tool`. `registry` re-exports their public items, so the paths under `registry::` stay
// what they were.
mod catalog;
mod digest;
mod list;
mod problem;
mod tool;

#[doc(hidden)]
pub mod private;

pub use approval::{
    ApprovalCall, ApprovalContext, ApprovalDecision, ApprovalKey, ApprovalSpec, ApprovedTools,
    AutoCriteria, AutoSpec, CancelSignal, NeverCancelled, PromptContext, RequestPolicy,
    ResponseCall, ResponseContext, ResponseDecision, ResponseVerdict,
};
pub use builtin::{GENERAL_AGENT, TaskArgs, ask_question, task};
pub use catalog::{ApprovalPolicy, Catalog, CatalogEntry, ToolOrigin, Visibility};
pub use context::{
    ApprovalGrant, CallContext, CallContextBuilder, CallHost, DetachedHost, DurableContext,
    DurableParam, Hook, HookEvent, HookHandle, HostEvent, LogLevel, Messages, PlainParam,
    Requirement, Retry, ServeIncoming, State, StepNames, StoreWork, ToolContext, WorkflowContext,
    WorkflowParam,
};
pub use credentials::{
    AuthReason, AuthorizationRequired, CredentialBroker, Token, TokenError, TokenHolder,
};
pub use descriptor::{DescribeFn, EnabledContext, EndsTurn, Location, ToolDescriptor, ToolKind};
pub use effect::{Annotations, Effect};
pub use error::{ErrorCode, InputError, InputProblem, ToolError};
pub use export::Format;
pub use guardrail::{
    GuardrailSpec, GuardrailStage, InputCheck, InputGuardrail, InputVerdict, OutputCheck,
    OutputGuardrail, OutputVerdict, Preparation, PrepareContext, PrepareTools,
};
pub use input::{NoInput, ServeCall, ServeCalls, ServeInput, ToolInput};
pub use list::ToolList;
pub use locale::ToolTexts;
pub use model::{
    AgentHandle, MessageRole, ModelBackend, ModelHandle, ModelMessage, ModelOrigin, ModelReply,
    ModelRequest, ModelUsage, Prompt, StopReason,
};
pub use output::{CallOutput, ContentPart, ModelOutput, Status};
pub use problem::{RegistryError, RegistryProblem};
pub use provider::ProviderTool;
pub use registry::Registry;
pub use remote::{RemoteDefinition, RemoteInvoke, RemotePolicy, RemoteTool, ToolOverride};
pub use sandbox::{
    DirEntry, EntryKind, ExecOutput, ExecRequest, FileChunk, Found, GrepMatch, GrepRequest,
    Sandbox, SandboxError,
};
pub use sensitive::Sensitive;
pub use services::Services;
pub use session::{Caller, Principal, PrincipalType, SessionInfo, StateKey};
pub use tool::{Audience, DefinitionError, DynamicTool, Sensitivity, Tool};
pub use workflow::{AskAnswer, AskDisplay, AskOption, AskRequest, Entry, OptionStyle};
