//! The static descriptor each `#[tool]` records, and the registration submitted to `inventory`.
//!
//! Everything here is a constant expression (`&'static str`, enums, fn pointers) so the macro can
//! build it in a `const`; anything costly (schemas, validators) is computed once by the registry.

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};

use crate::approval::ApprovalSpec;
use crate::context::{CallContext, Requirement};
use crate::effect::{Annotations, Effect};
use crate::error::ToolError;
use crate::guardrail::{GuardrailSpec, PrepareFn};
use crate::output::CallOutput;
use crate::provider::ProviderTool;
use crate::services::Services;
use crate::session::SessionInfo;
use crate::workflow::Entry;

/// Where a tool is defined, for messages that name both sites of a conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// `file!()` of the definition.
    pub file: &'static str,
    /// `line!()` of the definition.
    pub line: u32,
    /// `column!()` of the definition.
    pub column: u32,
    /// `module_path!()` of the definition.
    pub module_path: &'static str,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// User-facing text in one locale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocaleText {
    /// The locale, e.g. `en`.
    pub locale: &'static str,
    /// The title in that locale.
    pub title: Option<&'static str>,
    /// The summary in that locale.
    pub summary: Option<&'static str>,
}

/// The kind of a tool, which decides its context type and how the runtime runs it.
///
/// Serialized as `"plain"`, `"durable"` or `{"workflow": "execute" | "task" | "serve"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// A plain tool: runs within the step that called it.
    Plain,
    /// A plain tool whose side effects go through journaled steps.
    Durable,
    /// A workflow tool: a durable body with `ask`, `sleep` and steps.
    Workflow(Entry),
}

impl ToolKind {
    /// Whether calls run from a journal (durable and workflow tools).
    pub const fn is_journaled(self) -> bool {
        !matches!(self, ToolKind::Plain)
    }
}

/// Whether a successful call ends the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndsTurn {
    /// Never (the default).
    Never,
    /// Always.
    Always,
    /// Decided by a fn of the output (evaluated in the call adapter).
    ByOutput,
}

/// Label renderer over the JSON input.
pub type LabelFn = fn(&Value) -> Option<String>;
/// Label renderer over the JSON input and a partial snapshot.
pub type DeltaFn = fn(&Value, &Value) -> Option<String>;
/// Conditional tool predicate.
pub type EnabledFn = fn(&EnabledContext<'_>) -> bool;
/// Erased call adapter: input already validated and defaulted.
pub type InvokeFn = fn(Value, CallContext) -> BoxFuture<'static, Result<CallOutput, ToolError>>;
/// JSON Schema generator: `true` asks for a schema without `$ref`s.
pub type SchemaFn = fn(bool) -> schemars::Schema;
/// Builds a provider-native tool's configuration; the registry calls it once, at collection.
pub type ProviderFn = fn() -> ProviderTool;
/// Computes a tool's description from the host's services (`#[tool(description = path)]`).
///
/// The registry calls it with [`Services::none`] at collection and with the host's services in
/// [`crate::Registry::describe`]; it must return a description in both cases (a fallback text
/// when a service is missing), never panic, and never return empty text.
pub type DescribeFn = fn(&Services<'_>) -> String;

/// User-facing activity text.
#[derive(Clone, Copy, Debug, Default)]
pub struct LabelSpec {
    /// Shown when the call starts.
    pub start: Option<LabelFn>,
    /// Shown for each partial result.
    pub delta: Option<DeltaFn>,
    /// Whether a completion label is rendered by the adapter (into [`CallOutput::complete_label`]).
    pub complete: bool,
}

/// What an `enabled = path` predicate sees: the session and its persistent state.
#[derive(Debug)]
#[non_exhaustive]
pub struct EnabledContext<'a> {
    /// The session.
    pub session: &'a SessionInfo,
    /// The session's persistent key-value state.
    pub state: &'a Map<String, Value>,
}

impl<'a> EnabledContext<'a> {
    /// The view of `session` with `state`.
    pub fn new(session: &'a SessionInfo, state: &'a Map<String, Value>) -> Self {
        EnabledContext { session, state }
    }

    /// Whether the state key `key` holds `true`.
    pub fn flag(&self, key: &str) -> bool {
        self.state
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The value of `key`, if the state holds one that reads as a `T` (a value of another
    /// shape reads as `None`, so a predicate never fails).
    pub fn get<T: serde::de::DeserializeOwned>(
        &self,
        key: &crate::session::StateKey<T>,
    ) -> Option<T> {
        T::deserialize(self.state.get(key.name())?).ok()
    }
}

/// The argument struct's part of a descriptor.
#[derive(Clone, Copy, Debug)]
pub struct InputSpec {
    /// The schema generator.
    pub schema: SchemaFn,
    /// The JSON names of the struct's fields.
    pub fields: &'static [&'static str],
    /// The JSON names of the fields marked `#[toolwright(sensitive)]`.
    pub sensitive: &'static [&'static str],
    /// The Rust type name, for messages.
    pub type_name: &'static str,
}

/// Everything `#[tool]` knows about one tool, as constants.
#[derive(Clone, Copy, Debug)]
pub struct ToolDescriptor {
    /// The Rust fn name.
    pub fn_name: &'static str,
    /// The model-facing name without toolset.
    pub name: &'static str,
    /// The toolset, if any.
    pub toolset: Option<&'static str>,
    /// The description for the model. With [`ToolDescriptor::describe`] set, the fn's doc
    /// comment (or empty): the text the model sees is the one the fn computes.
    pub description: &'static str,
    /// The fn computing the description from host services (`description = path`), which then
    /// replaces `description`. Read the text through [`crate::Tool::description`], which holds
    /// what the fn returned.
    pub describe: Option<DescribeFn>,
    /// The user-facing title.
    pub title: Option<&'static str>,
    /// The one-line user-facing summary.
    pub summary: Option<&'static str>,
    /// Per-locale user-facing text.
    pub i18n: &'static [LocaleText],
    /// What the tool does.
    pub effect: Effect,
    /// Whether its output is third-party text that taints the turn.
    pub untrusted: bool,
    /// Whether only users may call it.
    pub user_only: bool,
    /// Whether it is left out of the model's list, reached through `tool_search`.
    pub deferred: bool,
    /// Whether subagent sessions get it.
    pub subagents: bool,
    /// Approval settings; `None` means `never`.
    pub approval: Option<ApprovalSpec>,
    /// Whether success ends the turn.
    pub ends_turn: EndsTurn,
    /// How many times the model loop lets the model correct a call whose input failed
    /// validation before the turn fails, from 0 to [`ToolDescriptor::MAX_INPUT_RETRIES`]
    /// (`#[tool(input_retries = N)]`); `None` leaves it to the loop's default. The registry
    /// refuses a larger value.
    pub input_retries: Option<u8>,
    /// Activity labels.
    pub label: LabelSpec,
    /// Explicit MCP annotation overrides.
    pub annotations: Annotations,
    /// The published output schema, if `output_schema` is set.
    pub output_schema: Option<SchemaFn>,
    /// Whether `to_model_output` projects the output.
    pub projected: bool,
    /// Plain, durable or workflow.
    pub kind: ToolKind,
    /// The conditional-tool predicate.
    pub enabled: Option<EnabledFn>,
    /// The tool's own input and output guardrails (`#[tool(guardrails(...))]`).
    pub guardrails: GuardrailSpec,
    /// The fn that may hide the tool or change its description for a step
    /// (`#[tool(prepare = path)]`).
    pub prepare: Option<PrepareFn>,
    /// For a provider-native tool (`#[tool(provider)]`), the fn building its per-provider
    /// configuration. The model provider runs such a tool: `input` is then empty and `invoke`
    /// only reports that the runtime cannot run it.
    pub provider: Option<ProviderFn>,
    /// The argument struct.
    pub input: InputSpec,
    /// Application state the tool's parameters need.
    pub requirements: &'static [Option<Requirement>],
    /// The call adapter.
    pub invoke: InvokeFn,
    /// Where it is defined.
    pub location: Location,
}

impl ToolDescriptor {
    /// The largest [`ToolDescriptor::input_retries`]: `#[tool(input_retries = N)]` takes 0 to
    /// this. A model that has not produced valid input after this many corrections is not
    /// going to; more attempts only spend the turn's tokens.
    pub const MAX_INPUT_RETRIES: u8 = 10;

    /// A plain tool written by hand (the built-ins, fallbacks, tests): every key at its
    /// `#[tool]` default (no toolset, title, approval or labels; subagents allowed; output
    /// projected). Change what differs with struct update syntax:
    /// `ToolDescriptor { title: Some("..."), ..ToolDescriptor::plain(..) }`.
    #[doc(hidden)]
    pub const fn plain(
        name: &'static str,
        description: &'static str,
        effect: Effect,
        input: InputSpec,
        invoke: InvokeFn,
        location: Location,
    ) -> ToolDescriptor {
        ToolDescriptor {
            fn_name: name,
            name,
            toolset: None,
            description,
            describe: None,
            title: None,
            summary: None,
            i18n: &[],
            effect,
            untrusted: false,
            user_only: false,
            deferred: false,
            subagents: true,
            approval: None,
            ends_turn: EndsTurn::Never,
            input_retries: None,
            label: LabelSpec {
                start: None,
                delta: None,
                complete: false,
            },
            annotations: Annotations::NONE,
            output_schema: None,
            projected: true,
            kind: ToolKind::Plain,
            enabled: None,
            guardrails: GuardrailSpec::NONE,
            prepare: None,
            provider: None,
            input,
            requirements: &[],
            invoke,
            location,
        }
    }

    /// The model-facing name: `toolset__name` or `name`.
    pub fn model_name(&self) -> String {
        crate::names::model_name(self.toolset, self.name)
    }

    /// The id: `toolset.name` or `name`.
    pub fn id(&self) -> String {
        crate::names::tool_id(self.toolset, self.name)
    }

    /// The MCP annotations: derived from the effect, then the explicit overrides.
    pub fn effective_annotations(&self) -> Annotations {
        self.effect.annotations().overridden_by(self.annotations)
    }
}

/// What each `#[tool]` registers with `inventory`; [`crate::Registry::collect`] gathers them.
/// The node a `#[tool]` submits holds the tool's own struct, `repr(transparent)` over one of these
/// and submitted through this type's `ErasedNode` impl (see the macro's `expand` module), so
/// `inventory::iter::<Registration>` reads it as a `Registration`: an upgrade of the pinned
/// `inventory` must keep that true.
#[derive(Debug)]
pub struct Registration(pub &'static ToolDescriptor);

inventory::collect!(Registration);
