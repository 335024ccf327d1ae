//! The registry: every `#[tool]` of the program, collected once, with schemas, validators and
//! model-facing lists computed once.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use futures_util::FutureExt;
use serde_json::Value;

use crate::approval::{ApprovalKey, ApprovalSpec};
use crate::context::{CallContext, CallContextBuilder, Requirement};
use crate::descriptor::{
    DescribeFn, EnabledFn, EndsTurn, LabelSpec, Location, Registration, ToolDescriptor, ToolKind,
};
use crate::effect::{Annotations, Effect};
use crate::error::{ErrorCode, InputError, ToolError};
use crate::export::{self, Format};
use crate::names;
use crate::output::CallOutput;
use crate::provider::ProviderTool;
use crate::remote::{RemoteDefinition, RemoteInvoke, RemotePolicy, RemoteTool};
use crate::schema::{self, InputValidator};
use crate::services::Services;
use crate::session::Caller;
use crate::workflow::Entry;

/// Who a tool list is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Audience {
    /// The model of a top-level session (and schedules, which see what it sees).
    Model,
    /// The model of a delegated (subagent) session.
    Subagent,
    /// A person in the user interface.
    User,
}

impl Audience {
    /// Every audience.
    pub const ALL: [Audience; 3] = [Audience::Model, Audience::Subagent, Audience::User];

    /// The audience of `caller`.
    pub const fn of(caller: Caller) -> Audience {
        match caller {
            Caller::Model | Caller::Schedule => Audience::Model,
            Caller::Subagent => Audience::Subagent,
            Caller::User => Audience::User,
        }
    }

    const fn index(self) -> usize {
        match self {
            Audience::Model => 0,
            Audience::Subagent => 1,
            Audience::User => 2,
        }
    }
}

/// The sentence appended to the model-facing description of an `ends_turn` tool.
pub const ENDS_TURN_SENTENCE: &str = "Calling this tool ends your turn.";
/// The sentence appended to the model-facing description of a `serve` tool.
pub const SERVE_SENTENCE: &str =
    "To send a follow-up to a running task, pass its `task_id`; leave it out to start a new task.";

/// Where a tool comes from.
#[derive(Clone, Debug)]
enum Origin {
    /// A `#[tool]` of this program (or a built-in).
    Local(&'static ToolDescriptor),
    /// A tool of a remote MCP server, through a connection.
    Remote(Box<RemoteTool>),
}

/// One collected tool: its descriptor (or remote definition) with schemas and validators
/// computed once.
pub struct Tool {
    origin: Origin,
    /// A provider-native tool's configuration, built once at collection.
    provider: Option<ProviderTool>,
    approval: Option<ApprovalSpec>,
    /// The text a `description = path` fn computed (`None` for other tools).
    described: Option<Arc<str>>,
    id: String,
    name: String,
    input_schema: Value,
    inlined_input_schema: Result<Value, String>,
    output_schema: Option<Value>,
    // Shared so a tool described again ([`Registry::describe`]) reuses the compiled validators.
    validator: Arc<InputValidator>,
    output_validator: Option<Arc<InputValidator>>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("effect", &self.effect())
            .finish_non_exhaustive()
    }
}

impl Tool {
    fn build(descriptor: &'static ToolDescriptor) -> Result<Tool, Vec<RegistryProblem>> {
        let mut problems = Vec::new();
        let id = descriptor.id();
        let name = descriptor.model_name();
        let at = descriptor.location;

        let mut parts_valid = true;
        for part in descriptor
            .toolset
            .into_iter()
            .chain(std::iter::once(descriptor.name))
        {
            if !names::is_valid_name(part) {
                parts_valid = false;
                problems.push(RegistryProblem::InvalidName {
                    name: part.to_owned(),
                    at,
                });
            }
        }
        // Valid parts can still make a model name over 64 characters; invalid parts were
        // reported above, and reporting their combination again would say the same thing twice.
        if parts_valid && !names::is_valid_name(&name) {
            problems.push(RegistryProblem::InvalidName {
                name: name.clone(),
                at,
            });
        }
        if names::is_reserved(&name)
            && !crate::builtin::is_ask_question(descriptor)
            && !crate::sandbox_tools::is_sandbox_tool(descriptor)
        {
            problems.push(RegistryProblem::Reserved {
                name: name.clone(),
                at,
            });
        }

        let generated = (descriptor.input.schema)(false);
        let mut input_schema = schema::model_facing(&generated);
        schema::close_objects(&mut input_schema);
        if !schema::is_object_schema(&input_schema) {
            problems.push(RegistryProblem::InputNotObject {
                tool: name.clone(),
                type_name: descriptor.input.type_name,
                at,
            });
        }
        let serve = descriptor.kind == ToolKind::Workflow(Entry::Serve);
        if serve {
            if descriptor.input.fields.contains(&"task_id")
                || input_schema.pointer("/properties/task_id").is_some()
            {
                problems.push(RegistryProblem::ServeTaskId {
                    tool: name.clone(),
                    at,
                });
            }
            input_schema = schema::with_task_id(input_schema);
        }
        let mut inlined = schema::model_facing(&(descriptor.input.schema)(true));
        schema::close_objects(&mut inlined);
        let inlined_input_schema = if schema::has_ref(&inlined) {
            Err(format!(
                "the input type `{}` is recursive, so its schema cannot be written without `$ref`",
                descriptor.input.type_name
            ))
        } else if serve {
            Ok(schema::with_task_id(inlined))
        } else {
            Ok(inlined)
        };

        let validator = match InputValidator::compile(&input_schema) {
            Ok(v) => Some(v),
            Err(error) => {
                problems.push(RegistryProblem::SchemaCompile {
                    tool: name.clone(),
                    which: "input",
                    error,
                    at,
                });
                None
            }
        };

        let mut output_schema = None;
        let mut output_validator = None;
        if let Some(output) = descriptor.output_schema {
            let value = schema::model_facing(&output(false));
            if !schema::is_object_schema(&value) {
                problems.push(RegistryProblem::OutputNotObject {
                    tool: name.clone(),
                    at,
                });
            }
            match InputValidator::compile(&value) {
                Ok(v) => output_validator = Some(v),
                Err(error) => problems.push(RegistryProblem::SchemaCompile {
                    tool: name.clone(),
                    which: "output",
                    error,
                    at,
                }),
            }
            output_schema = Some(value);
        }

        let provider = descriptor
            .provider
            .and_then(|build| provider_config(descriptor, build, &name, &mut problems));

        let described = descriptor.describe.and_then(|describe| {
            run_describe(descriptor, describe, &Services::none(), &name)
                .map_err(|problem| problems.push(problem))
                .ok()
        });

        match validator {
            Some(validator) if problems.is_empty() => Ok(Tool {
                origin: Origin::Local(descriptor),
                provider,
                approval: descriptor.approval,
                described,
                id,
                name,
                input_schema,
                inlined_input_schema,
                output_schema,
                validator: Arc::new(validator),
                output_validator: output_validator.map(Arc::new),
            }),
            _ => Err(problems),
        }
    }

    /// This tool with the description `text`; everything else shared or copied, nothing
    /// recomputed.
    fn described_as(&self, text: Arc<str>) -> Tool {
        Tool {
            origin: self.origin.clone(),
            provider: self.provider.clone(),
            approval: self.approval,
            described: Some(text),
            id: self.id.clone(),
            name: self.name.clone(),
            input_schema: self.input_schema.clone(),
            inlined_input_schema: self.inlined_input_schema.clone(),
            output_schema: self.output_schema.clone(),
            validator: Arc::clone(&self.validator),
            output_validator: self.output_validator.clone(),
        }
    }

    /// A tool of connection `connection`: named `<connection>__<tool>`, validated against the
    /// server's `inputSchema` (in the dialect its `$schema` names, 2020-12 by default) and its
    /// `structuredContent` against `outputSchema`, run through `invoker`.
    ///
    /// `withheld` is the pinned definition when the server changed it since (the tool is then
    /// listed nowhere until a person approves the change). Fails, with the reason the tool is
    /// unavailable, when the name cannot be a model-facing name or a schema does not compile:
    /// a remote tool is never run unvalidated.
    pub fn remote(
        connection: &str,
        definition: RemoteDefinition,
        policy: RemotePolicy,
        invoker: Arc<dyn RemoteInvoke>,
        withheld: Option<RemoteDefinition>,
    ) -> Result<Tool, String> {
        let name = names::model_name(Some(connection), &definition.name);
        if !names::is_valid_name(&name) {
            return Err(format!(
                "its name `{name}` does not match ^[a-zA-Z0-9_-]{{1,64}}$, so no model provider accepts it"
            ));
        }
        let input_schema = remote_schema(&definition.input_schema);
        if !schema::is_object_schema(&input_schema) {
            return Err(
                "its inputSchema does not describe a JSON object (`\"type\": \"object\"`)".into(),
            );
        }
        let validator = InputValidator::compile_dialect(&definition.input_schema)
            .map_err(|error| format!("its inputSchema does not compile: {error}"))?;
        let inlined_input_schema = if schema::has_ref(&input_schema) {
            Err(
                "the server's inputSchema uses `$ref`, which is not inlined for remote tools"
                    .to_owned(),
            )
        } else {
            Ok(input_schema.clone())
        };
        let (output_schema, output_validator) = match &definition.output_schema {
            None => (None, None),
            Some(output) => {
                let value = remote_schema(output);
                if !schema::is_object_schema(&value) {
                    return Err("its outputSchema does not describe a JSON object".into());
                }
                let validator = InputValidator::compile_dialect(output)
                    .map_err(|error| format!("its outputSchema does not compile: {error}"))?;
                (Some(value), Some(validator))
            }
        };
        let digest = definition.digest();
        Ok(Tool {
            provider: None,
            approval: policy.approval_spec(),
            described: None,
            origin: Origin::Remote(Box::new(RemoteTool {
                connection: connection.to_owned(),
                definition,
                digest,
                policy,
                invoker,
                withheld,
            })),
            id: names::tool_id(Some(connection), &name[connection.len() + 2..]),
            name,
            input_schema,
            inlined_input_schema,
            output_schema,
            validator: Arc::new(validator),
            output_validator: output_validator.map(Arc::new),
        })
    }

    /// The static descriptor of a `#[tool]` (`None` for a remote tool).
    pub fn descriptor(&self) -> Option<&'static ToolDescriptor> {
        match &self.origin {
            Origin::Local(descriptor) => Some(descriptor),
            Origin::Remote(_) => None,
        }
    }

    /// The remote part of a tool served by a connection (`None` for a `#[tool]`).
    pub fn remote_tool(&self) -> Option<&RemoteTool> {
        match &self.origin {
            Origin::Local(_) => None,
            Origin::Remote(remote) => Some(remote),
        }
    }

    /// The configuration of a provider-native tool (`#[tool(provider)]`): the model provider
    /// runs it, the runtime never does. `None` for every other tool.
    pub fn provider(&self) -> Option<&ProviderTool> {
        self.provider.as_ref()
    }

    /// Whether this is the built-in `ask_question`.
    pub fn is_ask_question(&self) -> bool {
        self.descriptor()
            .is_some_and(crate::builtin::is_ask_question)
    }

    /// What the tool does.
    pub fn effect(&self) -> Effect {
        match &self.origin {
            Origin::Local(d) => d.effect,
            Origin::Remote(r) => r.policy.effect,
        }
    }

    /// Whether its output is third-party text that taints the turn.
    pub fn is_untrusted(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.untrusted,
            Origin::Remote(r) => r.policy.untrusted,
        }
    }

    /// Whether only users may call it.
    pub fn is_user_only(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.user_only,
            Origin::Remote(r) => r.policy.user_only,
        }
    }

    /// Whether it is left out of the model's list, reached through `tool_search`.
    pub fn is_deferred(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.deferred,
            Origin::Remote(r) => r.policy.deferred,
        }
    }

    /// Whether subagent sessions get it.
    pub fn for_subagents(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.subagents,
            Origin::Remote(r) => r.policy.subagents,
        }
    }

    /// Approval settings; `None` means `never`.
    pub fn approval(&self) -> Option<ApprovalSpec> {
        self.approval
    }

    /// Whether success ends the turn (never, for remote tools).
    pub fn ends_turn(&self) -> EndsTurn {
        self.descriptor().map_or(EndsTurn::Never, |d| d.ends_turn)
    }

    /// Plain, durable or workflow (remote tools are plain).
    pub fn kind(&self) -> ToolKind {
        self.descriptor().map_or(ToolKind::Plain, |d| d.kind)
    }

    /// Activity labels (none for remote tools).
    pub fn label(&self) -> LabelSpec {
        self.descriptor().map(|d| d.label).unwrap_or_default()
    }

    /// The conditional-tool predicate.
    pub fn enabled(&self) -> Option<EnabledFn> {
        self.descriptor().and_then(|d| d.enabled)
    }

    /// Application state the tool's parameters need.
    pub fn requirements(&self) -> &'static [Option<Requirement>] {
        self.descriptor().map_or(&[], |d| d.requirements)
    }

    /// The user-facing title.
    pub fn title(&self) -> Option<&str> {
        match &self.origin {
            Origin::Local(d) => d.title,
            Origin::Remote(r) => r.definition.title.as_deref(),
        }
    }

    /// The one-line user-facing summary.
    pub fn summary(&self) -> Option<&str> {
        self.descriptor().and_then(|d| d.summary)
    }

    /// The name without toolset or connection (what fallback labels humanize).
    pub fn short_name(&self) -> &str {
        match &self.origin {
            Origin::Local(d) => d.name,
            Origin::Remote(r) => &r.definition.name,
        }
    }

    /// The description as written (no appended sentences); for a tool with a description fn
    /// (`description = path`), the text the fn returned when this registry was built or
    /// [described](Registry::describe). Every list and search reads it here, never from the
    /// descriptor.
    pub fn description(&self) -> &str {
        if let Some(text) = &self.described {
            return text;
        }
        match &self.origin {
            Origin::Local(d) => d.description,
            Origin::Remote(r) => r.definition.description.as_deref().unwrap_or_default(),
        }
    }

    /// The MCP annotations this tool is served with: derived from the effect, then the explicit
    /// overrides (local tools); the effect's hints (remote tools: the runtime's view, not the
    /// server's claims).
    pub fn annotations(&self) -> Annotations {
        match &self.origin {
            Origin::Local(d) => d.effective_annotations(),
            Origin::Remote(r) => r.policy.effect.annotations(),
        }
    }

    /// The hints the server sent with a remote tool, for approval policies (`None` for local
    /// tools and for servers that sent none).
    pub fn server_annotations(&self) -> Option<&Annotations> {
        self.remote_tool()
            .and_then(|r| r.definition.annotations.as_ref())
    }

    /// Whether the tool is withheld: a remote tool whose definition changed since it was pinned.
    pub fn is_withheld(&self) -> bool {
        self.remote_tool().is_some_and(|r| r.withheld.is_some())
    }

    /// The id: `toolset.name` or `name`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The model-facing name: `toolset__name` or `name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model-facing input schema (`$defs`/`$ref` kept, no `$schema`).
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The input schema with every `$ref` inlined, or why that is impossible (recursion).
    pub fn inlined_input_schema(&self) -> Result<&Value, &str> {
        self.inlined_input_schema.as_ref().map_err(String::as_str)
    }

    /// The published output schema, if `output_schema` is set.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    /// The description the model sees in `audience`: the tool's description, plus the sentence
    /// saying that calling it ends the turn (top-level model only: subagents must answer), and
    /// for `serve` tools how to continue a task.
    pub fn description_for(&self, audience: Audience) -> String {
        let mut text = self.description().trim_end().to_owned();
        if self.ends_turn() != EndsTurn::Never && audience == Audience::Model {
            text.push_str(if text.is_empty() { "" } else { " " });
            text.push_str(ENDS_TURN_SENTENCE);
        }
        if self.kind() == ToolKind::Workflow(Entry::Serve) {
            text.push_str(if text.is_empty() { "" } else { " " });
            text.push_str(SERVE_SENTENCE);
        }
        text
    }

    /// Whether `audience` may call this tool. A provider-native tool is the model's only: the
    /// provider runs it while answering, and a person has no way to.
    pub fn visible_to(&self, audience: Audience) -> bool {
        match audience {
            Audience::Model => !self.is_user_only(),
            Audience::Subagent => !self.is_user_only() && self.for_subagents(),
            Audience::User => self.provider.is_none(),
        }
    }

    /// Whether this tool appears in `audience`'s list (visible, not deferred for models, and not
    /// a remote tool withheld after its server changed it).
    pub fn listed_for(&self, audience: Audience) -> bool {
        self.visible_to(audience)
            && (audience == Audience::User || !self.is_deferred())
            && !self.is_withheld()
    }

    /// Validates `input` against the schema and applies defaults; the error lists every failing
    /// JSON pointer.
    pub fn validate(&self, input: Value) -> Result<Value, InputError> {
        self.validator.validate(&self.name, input)
    }

    /// The label shown when a call with `input` starts; falls back to the humanized name when the
    /// tool has no start label or it renders empty.
    pub fn start_label(&self, input: &Value) -> String {
        self.label()
            .start
            .and_then(|render| render(input))
            .filter(|label| !label.trim().is_empty())
            .unwrap_or_else(|| names::humanize(self.short_name()))
    }

    /// The label for a partial result, if the tool has a delta label that renders.
    pub fn delta_label(&self, input: &Value, partial: &Value) -> Option<String> {
        self.label()
            .delta
            .and_then(|render| render(input, partial))
            .filter(|label| !label.trim().is_empty())
    }

    /// The key `once` remembers an approval under: the tool name, a digest of the canonical
    /// validated input (`approval_key = input`), or the user's key fn.
    pub fn approval_key(&self, input: &Value) -> Result<String, ToolError> {
        let key = self
            .approval
            .map(|a| a.key)
            .unwrap_or(ApprovalKey::ToolName);
        match key {
            ApprovalKey::ToolName => Ok(self.name.clone()),
            ApprovalKey::Input => Ok(format!("{}#{}", self.name, input_digest(input))),
            ApprovalKey::Custom(key_fn) => key_fn(input).map(|key| format!("{}#{key}", self.name)),
        }
    }

    /// Runs the tool directly: validates and defaults `input`, executes with `cx`, catches a
    /// panic, and checks the output against the published output schema. No approval, taint or
    /// events: that is the runtime's pipeline.
    pub async fn call(&self, input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
        let mut input = self.validate(input).map_err(InputError::into_tool_error)?;
        if self.kind() == ToolKind::Workflow(Entry::Serve)
            && let Some(map) = input.as_object_mut()
        {
            map.remove("task_id");
        }
        self.invoke(input, cx).await
    }

    /// Executes the tool on input that is already validated and defaulted, catching a panic and
    /// checking the output schema.
    pub async fn invoke(&self, input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
        let run = match &self.origin {
            Origin::Local(d) => (d.invoke)(input, cx),
            Origin::Remote(r) => r.invoker.invoke(input, cx),
        };
        let output = match std::panic::AssertUnwindSafe(run).catch_unwind().await {
            Ok(result) => result?,
            Err(panic) => {
                let what = panic_message(panic.as_ref());
                return Err(ToolError::with_code(
                    ErrorCode::ToolPanicked,
                    format!(
                        "tool `{}` panicked: {what}; this is a bug in the tool, not in the input",
                        self.name
                    ),
                ));
            }
        };
        self.check_output(&output.value)?;
        Ok(output)
    }

    /// Checks `value` against the published output schema, if any.
    pub fn check_output(&self, value: &Value) -> Result<(), ToolError> {
        let Some(validator) = &self.output_validator else {
            return Ok(());
        };
        validator.check(&self.name, value).map_err(|error| {
            let problems: Vec<String> = error
                .problems
                .iter()
                .map(|p| {
                    format!(
                        "{}: {}",
                        if p.pointer.is_empty() {
                            "(root)"
                        } else {
                            &p.pointer
                        },
                        p.message
                    )
                })
                .collect();
            ToolError::with_code(
                ErrorCode::InvalidOutput,
                format!(
                    "tool `{}` returned output that does not match its output schema: {}",
                    self.name,
                    problems.join("; ")
                ),
            )
        })
    }
}

/// Builds a provider-native tool's configuration by calling `build` once, and checks it (and
/// the descriptor keys `#[tool]` refuses beside `provider`, for descriptors built by hand).
/// Every problem goes to `problems`.
fn provider_config(
    descriptor: &'static ToolDescriptor,
    build: crate::descriptor::ProviderFn,
    name: &str,
    problems: &mut Vec<RegistryProblem>,
) -> Option<ProviderTool> {
    let mut report = |problem: String| {
        problems.push(RegistryProblem::Provider {
            tool: name.to_owned(),
            problem,
            at: descriptor.location,
        });
    };
    if descriptor.deferred {
        report("it is `deferred`, but the provider only runs tools from the list it is sent, and a deferred tool is not in it; remove `deferred`".to_owned());
    }
    if descriptor.user_only {
        report(
            "it is `user_only`, but only the model can reach a provider tool; remove `user_only`"
                .to_owned(),
        );
    }
    // A user fn runs here, at collection: a panic in it becomes a problem naming the tool
    // instead of taking the whole program down without saying which tool failed.
    let config = match std::panic::catch_unwind(build) {
        Ok(config) => config,
        Err(panic) => {
            let what = panic_message(panic.as_ref());
            report(format!(
                "its fn panicked while building the configuration: {what}"
            ));
            return None;
        }
    };
    for problem in config.problems(name) {
        report(problem);
    }
    Some(config)
}

/// Calls the description fn of `descriptor` with `services`: the text, trimmed, or the problem
/// naming the tool when the fn panics or returns blank text.
fn run_describe(
    descriptor: &'static ToolDescriptor,
    describe: DescribeFn,
    services: &Services<'_>,
    name: &str,
) -> Result<Arc<str>, RegistryProblem> {
    let problem = |problem: String| RegistryProblem::Description {
        tool: name.to_owned(),
        problem,
        at: descriptor.location,
    };
    // Without a host is how every description fn is first called, at collection: a fn that
    // only works with its service must be told to handle the missing one.
    let without_host = services.is_none();
    const WITHOUT: &str = "when called without host services (`Services::none()`, as when the registry collects the tools, before any runtime exists)";
    // A user fn runs here: a panic becomes a problem naming the tool, as for provider fns. The
    // services are only read, and the registry is refused, so nothing sees a half-done call.
    let text = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| describe(services)))
        .map_err(|panic| {
            let what = panic_message(panic.as_ref());
            problem(if without_host {
                format!(
                    "its description fn panicked {WITHOUT}: {what}; return a fallback description when `services.get::<T>()` is `None`"
                )
            } else {
                format!(
                    "its description fn panicked: {what}; return a fallback description instead when a service is missing or cannot answer"
                )
            })
        })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(problem(if without_host {
            format!(
                "its description fn returned empty text {WITHOUT}; return a fallback description for that case: what the tool does, when to use it and what it returns"
            )
        } else {
            "its description fn returned empty text; the model needs a description: return what the tool does, when to use it and what it returns".to_owned()
        }));
    }
    Ok(Arc::from(text))
}

/// The message of a caught panic (`panic!` with a literal or a formatted string).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string payload".to_owned())
}

/// A remote schema in model-facing form: the server's schema without `$schema` (the dialect is
/// honoured by validation; providers do not want it).
fn remote_schema(schema: &Value) -> Value {
    let mut value = schema.clone();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
    }
    value
}

/// A hex SHA-256 digest of the canonical JSON of `value`: compact, object keys sorted at every
/// level, so `{"a":1,"b":2}` and `{"b":2,"a":1}` have the same digest.
pub fn input_digest(value: &Value) -> String {
    use sha2::Digest;
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    let digest = sha2::Sha256::digest(canonical.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `value` as compact JSON with sorted object keys. Sorting here instead of relying on
/// `serde_json::Map` being a `BTreeMap`: any crate in the program can enable serde_json's
/// `preserve_order` feature, which makes the map keep insertion order, and features unify.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A model-facing tool list, serialized once.
#[derive(Debug)]
pub struct ToolList {
    json: Box<str>,
    entries: Vec<ListEntry>,
    notes: Vec<String>,
}

/// One tool of a [`ToolList`], serialized alone (so a runtime can splice lists for conditional
/// tools without serializing again).
#[derive(Debug)]
pub struct ListEntry {
    /// The model-facing name (a meta-tool's name for `tool_search`/`tool_call`).
    pub name: String,
    /// Index into [`Registry::tools`], `None` for meta-tools.
    pub tool: Option<usize>,
    /// The serialized tool object.
    pub json: Box<serde_json::value::RawValue>,
}

impl ToolList {
    /// The whole list as a JSON array.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Each tool, serialized alone.
    pub fn entries(&self) -> &[ListEntry] {
        &self.entries
    }

    /// Remarks from the export (e.g. why a tool could not be made strict).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

struct Inner {
    tools: Vec<Arc<Tool>>,
    by_name: HashMap<String, usize>,
    by_id: HashMap<String, usize>,
    /// Remote tools that could not be made available, by model-facing name, with the reason.
    unavailable: HashMap<String, String>,
    /// Connections whose tools are missing altogether (down, refused), with the reason.
    offline: HashMap<String, String>,
    lists: [[OnceLock<ToolList>; Format::COUNT]; 3],
}

/// Every tool of the program, collected once. Cheap to clone (an `Arc`).
///
/// ```
/// # use toolwright_core::Registry;
/// let registry = Registry::from_tools([]).unwrap();
/// assert!(registry.tools().is_empty());
/// ```
#[derive(Clone)]
pub struct Registry(Arc<Inner>);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.tools.iter().map(|t| &t.name))
            .finish()
    }
}

/// One reason the registry refused its tools.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryProblem {
    /// Two tools share a model-facing name.
    #[error(
        "two tools are named `{name}`: one at {first}, one at {second}; rename one with `name = \"...\"` or put it in a `toolset`"
    )]
    DuplicateName {
        /// The name.
        name: String,
        /// The first definition.
        first: Location,
        /// The second definition.
        second: Location,
    },
    /// Two tools share an id.
    #[error("two tools have the id `{id}`: one at {first}, one at {second}; rename one")]
    DuplicateId {
        /// The id.
        id: String,
        /// The first definition.
        first: Location,
        /// The second definition.
        second: Location,
    },
    /// A reserved name.
    #[error(
        "tool `{name}` at {at} takes a name the runtime reserves for a meta-tool or built-in tool; choose another `name`"
    )]
    Reserved {
        /// The name.
        name: String,
        /// The definition.
        at: Location,
    },
    /// A name breaking `^[a-zA-Z0-9_-]{{1,64}}$`.
    #[error(
        "tool name `{name}` at {at} does not match ^[a-zA-Z0-9_-]{{1,64}}$ (toolset and name together must fit 64 characters)"
    )]
    InvalidName {
        /// The name.
        name: String,
        /// The definition.
        at: Location,
    },
    /// The argument type's schema is not an object.
    #[error(
        "tool `{tool}` at {at}: its argument type `{type_name}` is not described as a JSON object; use a struct with named fields"
    )]
    InputNotObject {
        /// The tool.
        tool: String,
        /// The argument type.
        type_name: &'static str,
        /// The definition.
        at: Location,
    },
    /// A `serve` tool's argument struct has a `task_id` (through `flatten`).
    #[error(
        "tool `{tool}` at {at} is a `serve` tool whose input has a `task_id` field; the runtime adds `task_id` itself, rename the field"
    )]
    ServeTaskId {
        /// The tool.
        tool: String,
        /// The definition.
        at: Location,
    },
    /// A description fn (`description = path`) that panicked or returned blank text.
    #[error("tool `{tool}` at {at}: {problem}")]
    Description {
        /// The tool.
        tool: String,
        /// What went wrong, and what to write instead.
        problem: String,
        /// The definition.
        at: Location,
    },
    /// A provider-native tool whose configuration or keys cannot work.
    #[error("provider tool `{tool}` at {at}: {problem}")]
    Provider {
        /// The tool.
        tool: String,
        /// What is wrong, and what to write instead.
        problem: String,
        /// The definition.
        at: Location,
    },
    /// The output schema is not an object.
    #[error(
        "tool `{tool}` at {at} publishes an output schema that is not a JSON object (MCP `outputSchema` must be); return a struct, or drop `output_schema`"
    )]
    OutputNotObject {
        /// The tool.
        tool: String,
        /// The definition.
        at: Location,
    },
    /// A schema that does not compile into a validator.
    #[error(
        "tool `{tool}` at {at}: its {which} schema cannot be compiled into a validator: {error}"
    )]
    SchemaCompile {
        /// The tool.
        tool: String,
        /// `input` or `output`.
        which: &'static str,
        /// The compiler's message.
        error: String,
        /// The definition.
        at: Location,
    },
}

/// The registry refused its tools; every problem is listed.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistryError {
    /// Each problem found.
    pub problems: Vec<RegistryProblem>,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the tool registry has {} problem(s):",
            self.problems.len()
        )?;
        for problem in &self.problems {
            write!(f, "\n- {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RegistryError {}

impl Registry {
    /// Every tool linked into the program through `#[tool]`.
    ///
    /// Fails, naming both definition sites, on duplicate names or ids, and on reserved names,
    /// invalid names and schemas that cannot be processed.
    ///
    /// Tools of another crate are collected when that crate is linked; a crate nothing else
    /// refers to may be dropped by the linker, so refer to it (`use other_tools as _;`).
    pub fn collect() -> Result<Registry, RegistryError> {
        Self::from_tools(inventory::iter::<Registration>.into_iter().map(|r| r.0))
    }

    /// A registry of exactly `tools` (e.g. `[read_logs::TOOL, restart_service::TOOL]`).
    pub fn from_tools(
        tools: impl IntoIterator<Item = &'static ToolDescriptor>,
    ) -> Result<Registry, RegistryError> {
        let mut descriptors: Vec<&'static ToolDescriptor> = tools.into_iter().collect();
        // Link order varies between builds; sort so lists and errors are deterministic.
        descriptors.sort_by_key(|d| (d.model_name(), d.location.file, d.location.line));
        descriptors.dedup_by(|a, b| std::ptr::eq(*a, *b));

        let mut problems = Vec::new();
        let mut built = Vec::with_capacity(descriptors.len());
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        let mut sites: Vec<Location> = Vec::new();
        for descriptor in descriptors {
            let name = descriptor.model_name();
            let id = descriptor.id();
            if let Some(&first) = by_name.get(&name) {
                problems.push(RegistryProblem::DuplicateName {
                    name,
                    first: sites[first],
                    second: descriptor.location,
                });
                continue;
            }
            if let Some(&first) = by_id.get(&id) {
                problems.push(RegistryProblem::DuplicateId {
                    id,
                    first: sites[first],
                    second: descriptor.location,
                });
                continue;
            }
            let index = sites.len();
            sites.push(descriptor.location);
            by_name.insert(name, index);
            by_id.insert(id, index);
            match Tool::build(descriptor) {
                Ok(tool) => built.push(tool),
                Err(mut found) => problems.append(&mut found),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }
        Ok(Self::assemble(
            built.into_iter().map(Arc::new).collect(),
            HashMap::new(),
            HashMap::new(),
        ))
    }

    fn assemble(
        tools: Vec<Arc<Tool>>,
        unavailable: HashMap<String, String>,
        offline: HashMap<String, String>,
    ) -> Registry {
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let by_id = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
        Registry(Arc::new(Inner {
            tools,
            by_name,
            by_id,
            unavailable,
            offline,
            lists: Default::default(),
        }))
    }

    /// This registry's own tools (shared, not rebuilt) joined by the tools of remote
    /// connections. `unavailable` names remote tools that could not be built, with the reason
    /// (a call to one fails with it); `offline` names connections that have no tools now, with
    /// the reason (a call to any `<connection>__...` name fails with it).
    ///
    /// A remote tool that takes the name or id of a tool already here (a local one, or an
    /// earlier remote one: a server listing a name twice) is left out and named unavailable:
    /// one server's mistake never holds back the others' lists.
    pub fn with_remote(
        &self,
        remote: impl IntoIterator<Item = Arc<Tool>>,
        unavailable: impl IntoIterator<Item = (String, String)>,
        offline: impl IntoIterator<Item = (String, String)>,
    ) -> Registry {
        let mut tools: Vec<Arc<Tool>> = self
            .0
            .tools
            .iter()
            .filter(|t| t.remote_tool().is_none())
            .cloned()
            .collect();
        let mut unavailable: HashMap<String, String> = unavailable.into_iter().collect();
        let mut names: std::collections::HashSet<String> =
            tools.iter().map(|t| t.name.clone()).collect();
        let mut ids: std::collections::HashSet<String> =
            tools.iter().map(|t| t.id.clone()).collect();
        for tool in remote {
            if names.contains(&tool.name) || ids.contains(&tool.id) {
                unavailable.insert(
                    tool.name.clone(),
                    "another tool has its name; its server lists it twice, or a local tool took it"
                        .into(),
                );
                continue;
            }
            names.insert(tool.name.clone());
            ids.insert(tool.id.clone());
            tools.push(tool);
        }
        // Deterministic order: lists are cached and compared across refreshes.
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Self::assemble(tools, unavailable, offline.into_iter().collect())
    }

    /// This registry with the description of each tool that has a description fn
    /// (`#[tool(description = path)]`) computed again from the host's `services`: what a runtime
    /// does once, when it is built, so the model sees text that fits the host. Other tools are
    /// shared as they are, remote tools included; the new registry builds and caches its own
    /// lists (this one's stay as they were).
    ///
    /// Fails, naming each tool, when a description fn panics or returns blank text.
    ///
    /// ```
    /// # use toolwright_core::{Registry, Services};
    /// let registry = Registry::from_tools([]).unwrap();
    /// let described = registry.describe(&Services::none()).unwrap();
    /// assert!(!described.same(&registry));
    /// ```
    pub fn describe(&self, services: &Services<'_>) -> Result<Registry, RegistryError> {
        let mut problems = Vec::new();
        let mut tools = Vec::with_capacity(self.0.tools.len());
        for tool in &self.0.tools {
            let Some((descriptor, describe)) = tool
                .descriptor()
                .and_then(|d| d.describe.map(|describe| (d, describe)))
            else {
                tools.push(Arc::clone(tool));
                continue;
            };
            match run_describe(descriptor, describe, services, &tool.name) {
                Ok(text) => tools.push(Arc::new(tool.described_as(text))),
                Err(problem) => problems.push(problem),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }
        // Same tools in the same order: only the lists, which hold descriptions, start afresh.
        Ok(Self::assemble(
            tools,
            self.0.unavailable.clone(),
            self.0.offline.clone(),
        ))
    }

    /// This registry's `#[tool]`s plus the built-in sandbox tools (`read`, `write`, `edit`,
    /// `bash`, `grep`, `glob`), each with the request policy `approvals` names for it (the last
    /// one given wins; otherwise `always` for `bash`, never for the others). What a runtime
    /// with a sandbox serves.
    pub fn with_sandbox_tools(
        &self,
        approvals: &[(&str, ApprovalSpec)],
    ) -> Result<Registry, RegistryError> {
        let descriptors = self
            .0
            .tools
            .iter()
            .filter_map(|t| t.descriptor())
            .chain(crate::sandbox_tools::sandbox_tools());
        let mut registry = Self::from_tools(descriptors)?;
        let inner = Arc::get_mut(&mut registry.0).expect("a registry just built is not shared");
        for tool in &mut inner.tools {
            // Rebuilding described every tool without host services: keep the text this
            // registry has, which [`Registry::describe`] may have computed from the host's.
            if let Some(text) = self.get(&tool.name).and_then(|t| t.described.clone())
                && let Some(tool) = Arc::get_mut(tool)
            {
                tool.described = Some(text);
            }
            // The last setting of a tool wins.
            let Some(&(_, approval)) = approvals.iter().rev().find(|(name, _)| *name == tool.name)
            else {
                continue;
            };
            if let Some(tool) = Arc::get_mut(tool)
                && tool
                    .descriptor()
                    .is_some_and(crate::sandbox_tools::is_sandbox_tool)
            {
                // `never` is no approval at all, as for `#[tool]`s.
                // The request policy is the host's; the prompt shows the call's command, file
                // or pattern unless the host gave one.
                let approval = crate::ApprovalSpec {
                    prompt: approval
                        .prompt
                        .or(Some(crate::sandbox_tools::approval_prompt)),
                    ..approval
                };
                tool.approval =
                    (!matches!(approval.request, crate::RequestPolicy::Never)).then_some(approval);
            }
        }
        Ok(registry)
    }

    /// Whether `self` and `other` are the same registry (clones of one build), not merely equal:
    /// what a cache built from a registry compares to know it is still current.
    pub fn same(&self, other: &Registry) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Every tool, sorted by model-facing name.
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.0.tools
    }

    /// Remote tools that are not available, with the reason, by model-facing name.
    pub fn unavailable(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .unavailable
            .iter()
            .map(|(name, reason)| (name.as_str(), reason.as_str()))
    }

    /// The tool with model-facing name `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.0.by_name.get(name).map(|&i| &*self.0.tools[i])
    }

    /// The position of tool `name` in [`Registry::tools`] (a hash lookup, not a scan).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.0.by_name.get(name).copied()
    }

    /// The tool with id `id` (`toolset.name`).
    pub fn by_id(&self, id: &str) -> Option<&Tool> {
        self.0.by_id.get(id).map(|&i| &*self.0.tools[i])
    }

    /// The tool `name` as `caller` may call it: an unknown name, or one not visible to the
    /// caller, is an error naming similar tools the caller can see.
    pub fn resolve(&self, name: &str, caller: Caller) -> Result<&Tool, ToolError> {
        let audience = Audience::of(caller);
        match self.get(name) {
            Some(tool) if tool.visible_to(audience) => Ok(tool),
            Some(tool) if audience == Audience::User && tool.provider().is_some() => {
                Err(ToolError::with_code(
                    ErrorCode::NotVisible,
                    format!(
                        "tool `{name}` is run by the model provider while it answers; it cannot be called directly"
                    ),
                ))
            }
            Some(tool) if audience == Audience::Subagent && !tool.is_user_only() => {
                Err(ToolError::with_code(
                    ErrorCode::NotVisible,
                    format!(
                        "tool `{name}` is not available in delegated sessions; ask the parent session to call it"
                    ),
                ))
            }
            _ => Err(self.unknown(name, audience)),
        }
    }

    fn unknown(&self, name: &str, audience: Audience) -> ToolError {
        if let Some(reason) = self.0.unavailable.get(name) {
            return ToolError::with_code(
                ErrorCode::UnknownTool,
                format!("tool `{name}` is not available: {reason}; use another tool"),
            );
        }
        if let Some((connection, reason)) = name
            .split_once(names::TOOLSET_SEPARATOR)
            .and_then(|(prefix, _)| self.0.offline.get_key_value(prefix))
        {
            return ToolError::with_code(
                ErrorCode::Unavailable,
                format!(
                    "tool `{name}` belongs to connection `{connection}`, which has no tools now: {reason}; try again later or use another tool"
                ),
            );
        }
        if !names::is_valid_name(name) {
            // No tool can have such a name; do not score (or echo) arbitrary text.
            let shown: String = name.chars().take(64).collect();
            return ToolError::with_code(
                ErrorCode::UnknownTool,
                format!(
                    "no tool named `{shown}`; tool names match ^[a-zA-Z0-9_-]{{1,64}}$, check the tool list"
                ),
            );
        }
        let visible = self
            .0
            .tools
            .iter()
            .filter(|t| t.visible_to(audience))
            .map(|t| t.name.as_str());
        let similar = names::similar(name, visible);
        let hint = match similar.as_slice() {
            [] => String::from("check the tool list for the right name"),
            [one] => format!("did you mean `{one}`?"),
            many => format!(
                "similar tools: {}",
                many.iter()
                    .take(5)
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        ToolError::with_code(
            ErrorCode::UnknownTool,
            format!("no tool named `{name}`; {hint}"),
        )
    }

    /// Calls tool `name` directly with `input` on a detached context (called by the model).
    ///
    /// For tests, examples and scripts: validation, defaults, execution and the output check,
    /// without the runtime's approvals, taint or events.
    pub async fn call(&self, name: &str, input: Value) -> Result<CallOutput, ToolError> {
        self.call_with(name, input, CallContext::builder()).await
    }

    /// Calls tool `name` with a context built from `context` (its tool name is set here).
    pub async fn call_with(
        &self,
        name: &str,
        input: Value,
        context: CallContextBuilder,
    ) -> Result<CallOutput, ToolError> {
        let probe = context.tool_name(name);
        let cx = probe.build();
        let tool = self.resolve(name, cx.caller())?;
        tool.call(input, cx).await
    }

    /// Deferred tools visible to `audience` that match `query` (words in the name, title or
    /// description), best first.
    pub fn search(&self, query: &str, audience: Audience) -> Vec<&Tool> {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let mut scored: Vec<(usize, &Tool)> = self
            .0
            .tools
            .iter()
            .filter(|t| t.is_deferred() && t.visible_to(audience) && !t.is_withheld())
            .filter_map(|t| {
                let haystack = format!(
                    "{} {} {}",
                    t.name.to_lowercase(),
                    t.title().unwrap_or_default().to_lowercase(),
                    t.description().to_lowercase()
                );
                let score = words
                    .iter()
                    .filter(|w| haystack.contains(w.as_str()))
                    .count();
                (score > 0 || words.is_empty()).then_some((score, &**t))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.name.cmp(&b.1.name)));
        scored.into_iter().map(|(_, t)| t).collect()
    }

    /// Whether `audience` has deferred tools (and so the `tool_search`/`tool_call` meta-tools).
    pub fn has_deferred(&self, audience: Audience) -> bool {
        audience != Audience::User
            && self
                .0
                .tools
                .iter()
                .any(|t| t.is_deferred() && t.visible_to(audience) && !t.is_withheld())
    }

    /// Whether `audience` can call `task` or `serve` workflow tools (and so the `task_wait` and
    /// `task_cancel` meta-tools).
    pub fn has_tasks(&self, audience: Audience) -> bool {
        audience != Audience::User
            && self.0.tools.iter().any(|t| {
                matches!(t.kind(), ToolKind::Workflow(Entry::Task | Entry::Serve))
                    && t.visible_to(audience)
            })
    }

    /// The tool list for `audience` in `format`, serialized on first use and cached.
    pub fn list(&self, audience: Audience, format: Format) -> &ToolList {
        self.0.lists[audience.index()][format.index()]
            .get_or_init(|| self.build_list(audience, format))
    }

    fn build_list(&self, audience: Audience, format: Format) -> ToolList {
        let mut entries = Vec::new();
        let mut notes = Vec::new();
        for (index, tool) in self.0.tools.iter().enumerate() {
            if !tool.listed_for(audience) {
                continue;
            }
            let (value, note) = export::export(tool, audience, format);
            if let Some(note) = note {
                notes.push(format!("{}: {note}", tool.name));
            }
            // A provider tool without a configuration for this provider has no entry here.
            let Some(value) = value else { continue };
            entries.push(ListEntry {
                name: tool.name.clone(),
                tool: Some(index),
                json: serde_json::value::to_raw_value(&value).expect("JSON values serialize"),
            });
        }
        let mut meta = Vec::new();
        if self.has_deferred(audience) {
            meta.extend(export::meta_tools(format));
        }
        if self.has_tasks(audience) {
            meta.extend(export::task_meta_tools(format));
        }
        {
            for (name, value) in meta {
                entries.push(ListEntry {
                    name: name.to_owned(),
                    tool: None,
                    json: serde_json::value::to_raw_value(&value).expect("JSON values serialize"),
                });
            }
        }
        let mut json = String::from("[");
        for (i, entry) in entries.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(entry.json.get());
        }
        json.push(']');
        ToolList {
            json: json.into_boxed_str(),
            entries,
            notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn web_search() -> ProviderTool {
        ProviderTool::web_search()
    }

    fn openai_only() -> ProviderTool {
        ProviderTool::new()
            .openai(json!({ "type": "code_interpreter", "container": { "type": "auto" } }))
    }

    fn nothing() -> ProviderTool {
        ProviderTool::new()
    }

    fn panics() -> ProviderTool {
        panic!("no API key configured")
    }

    const fn provider_tool(
        name: &'static str,
        build: crate::descriptor::ProviderFn,
    ) -> ToolDescriptor {
        let location = Location {
            file: file!(),
            line: line!(),
            column: column!(),
            module_path: module_path!(),
        };
        ToolDescriptor {
            untrusted: true,
            projected: false,
            provider: Some(build),
            ..ToolDescriptor::plain(
                name,
                "Runs at the provider.",
                Effect::Read,
                crate::private::PROVIDER_INPUT,
                crate::private::provider_invoke,
                location,
            )
        }
    }

    static WEB_SEARCH: ToolDescriptor = provider_tool("web_search", web_search);
    static RUN_CODE: ToolDescriptor = provider_tool("run_code", openai_only);
    static SEARCH: ToolDescriptor = provider_tool("search", web_search);
    static EMPTY: ToolDescriptor = provider_tool("empty", nothing);
    static PANICS: ToolDescriptor = provider_tool("panics", panics);
    static DEFERRED: ToolDescriptor = ToolDescriptor {
        deferred: true,
        ..provider_tool("deferred_search", openai_only)
    };

    fn problems(descriptor: &'static ToolDescriptor) -> Vec<String> {
        Registry::from_tools([descriptor])
            .expect_err("refused")
            .problems
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn provider_tools_are_listed_in_their_providers_format() {
        let registry = Registry::from_tools([&WEB_SEARCH, &RUN_CODE]).unwrap();
        let tool = registry.get("web_search").unwrap();
        assert_eq!(tool.provider(), Some(&ProviderTool::web_search()));
        assert!(tool.descriptor().is_some());

        let list = |format| -> Value {
            serde_json::from_str(registry.list(Audience::Model, format).json()).unwrap()
        };
        assert_eq!(
            list(Format::OpenAi),
            json!([
                { "type": "code_interpreter", "container": { "type": "auto" } },
                { "type": "web_search" }
            ])
        );
        assert_eq!(list(Format::OpenAiStrict), list(Format::OpenAi));
        assert_eq!(
            list(Format::Anthropic),
            json!([{ "type": "web_search_20250305", "name": "web_search" }])
        );
        assert_eq!(
            registry.list(Audience::Model, Format::Anthropic).notes(),
            ["run_code: not sent to Anthropic: no anthropic configuration"]
        );
        assert_eq!(list(Format::Mcp), json!([]));
        assert_eq!(registry.list(Audience::Model, Format::Mcp).notes().len(), 2);

        // Entries point at their tool, so a runtime can leave out a disabled one.
        let entries = registry.list(Audience::Model, Format::Anthropic).entries();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].tool, registry.index_of("web_search"));
    }

    #[test]
    fn provider_tools_are_the_models_only() {
        let registry = Registry::from_tools([&WEB_SEARCH]).unwrap();
        let tool = registry.get("web_search").unwrap();
        assert!(tool.visible_to(Audience::Model));
        assert!(tool.visible_to(Audience::Subagent));
        assert!(!tool.visible_to(Audience::User));
        for format in [Format::OpenAi, Format::Anthropic, Format::Mcp] {
            assert_eq!(registry.list(Audience::User, format).json(), "[]");
            assert!(registry.list(Audience::User, format).notes().is_empty());
        }
        let error = registry.resolve("web_search", Caller::User).unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotVisible);
        assert!(
            error.message().contains("run by the model provider"),
            "{error}"
        );
        assert!(registry.resolve("web_search", Caller::Model).is_ok());
    }

    #[test]
    fn the_runtime_cannot_run_a_provider_tool() {
        let registry = Registry::from_tools([&WEB_SEARCH]).unwrap();
        let error = registry
            .call("web_search", json!({}))
            .now_or_never()
            .expect("nothing to wait for")
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotVisible);
        assert!(
            error
                .message()
                .starts_with("tool `web_search` is run by the model provider"),
            "{error}"
        );
    }

    #[test]
    fn provider_configurations_that_cannot_work_are_refused() {
        let mismatch = problems(&SEARCH);
        assert_eq!(mismatch.len(), 1, "{mismatch:?}");
        assert!(
            mismatch[0].starts_with("provider tool `search` at "),
            "{mismatch:?}"
        );
        assert!(
            mismatch[0].contains("names the tool `web_search`, but the tool is named `search`"),
            "{mismatch:?}"
        );
        assert!(problems(&EMPTY)[0].contains("no configuration for any provider"));
        assert!(
            problems(&PANICS)[0]
                .contains("panicked while building the configuration: no API key configured")
        );
        assert!(problems(&DEFERRED)[0].contains("it is `deferred`"));
    }

    /// The component catalog of a device: the host service a description reads.
    struct Catalog(&'static str);

    fn describe_catalog(services: &Services<'_>) -> String {
        match services.get::<Catalog>() {
            Some(catalog) => format!("Shows a native UI. Components: {}.", catalog.0),
            None => "Shows a native UI.".to_owned(),
        }
    }

    fn blank_with_a_host(services: &Services<'_>) -> String {
        match services.get::<Catalog>() {
            Some(_) => " \n".to_owned(),
            None => "Shows a native UI.".to_owned(),
        }
    }

    fn panics_without_a_host(services: &Services<'_>) -> String {
        services.get::<Catalog>().expect("no catalog").0.to_owned()
    }

    /// A plain tool (`ask_question`'s schema, another name) with the description fn `describe`.
    fn described(name: &'static str, describe: DescribeFn) -> &'static ToolDescriptor {
        Box::leak(Box::new(ToolDescriptor {
            fn_name: name,
            name,
            description: "The doc comment.",
            describe: Some(describe),
            ..*crate::builtin::ask_question()
        }))
    }

    fn host() -> HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>> {
        let mut states: HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>> =
            HashMap::new();
        states.insert(
            std::any::TypeId::of::<Catalog>(),
            Arc::new(Catalog("card, list")),
        );
        states
    }

    #[test]
    fn describe_recomputes_only_the_tools_with_a_description_fn() {
        let ui = described("native_ui", describe_catalog);
        let registry = Registry::from_tools([ui, crate::builtin::ask_question()]).unwrap();
        let before = registry
            .list(Audience::Model, Format::Anthropic)
            .json()
            .to_owned();
        assert_eq!(
            registry.get("native_ui").unwrap().description(),
            "Shows a native UI."
        );

        let states = host();
        let described = registry.describe(&Services::new(&states)).unwrap();
        assert!(!described.same(&registry));
        let text = "Shows a native UI. Components: card, list.";
        assert_eq!(described.get("native_ui").unwrap().description(), text);
        assert!(
            described
                .list(Audience::Model, Format::Anthropic)
                .json()
                .contains(text)
        );
        // Tools without a fn are shared, not rebuilt; the old registry and its lists stay.
        assert!(Arc::ptr_eq(&registry.tools()[0], &described.tools()[0]));
        assert_eq!(registry.tools()[0].name(), "ask_question");
        assert_eq!(
            registry.list(Audience::Model, Format::Anthropic).json(),
            before
        );
        assert_eq!(
            registry.get("native_ui").unwrap().description(),
            "Shows a native UI."
        );
        // The descriptor keeps the literal (the doc comment); `Tool::description` is the text.
        assert_eq!(
            described
                .get("native_ui")
                .unwrap()
                .descriptor()
                .unwrap()
                .description,
            "The doc comment."
        );
    }

    #[test]
    fn described_texts_survive_adding_sandbox_tools_and_remote_tools() {
        let registry = Registry::from_tools([described("native_ui", describe_catalog)]).unwrap();
        let states = host();
        let described = registry.describe(&Services::new(&states)).unwrap();
        let text = "Shows a native UI. Components: card, list.";
        let sandboxed = described.with_sandbox_tools(&[]).unwrap();
        assert_eq!(sandboxed.get("native_ui").unwrap().description(), text);
        let joined = described.with_remote([], [], []);
        assert_eq!(joined.get("native_ui").unwrap().description(), text);
    }

    struct NoServer;

    impl RemoteInvoke for NoServer {
        fn invoke(
            &self,
            _: Value,
            _: CallContext,
        ) -> futures_util::future::BoxFuture<'static, Result<CallOutput, ToolError>> {
            Box::pin(async { Err(ToolError::new("not called in these tests")) })
        }
    }

    #[test]
    fn describe_keeps_remote_tools_and_the_reasons_others_are_missing() {
        let remote = Tool::remote(
            "srv",
            RemoteDefinition {
                name: "lookup".into(),
                title: None,
                description: Some("Looks a thing up.".into()),
                input_schema: json!({ "type": "object" }),
                output_schema: None,
                annotations: None,
            },
            RemotePolicy::UNTRUSTED,
            Arc::new(NoServer),
            None,
        )
        .unwrap();
        let registry = Registry::from_tools([described("native_ui", describe_catalog)])
            .unwrap()
            .with_remote(
                [Arc::new(remote)],
                [("srv__broken".to_owned(), "its schema is broken".to_owned())],
                [("down".to_owned(), "it is down".to_owned())],
            );
        let states = host();
        let described = registry.describe(&Services::new(&states)).unwrap();
        assert!(Arc::ptr_eq(&registry.tools()[1], &described.tools()[1]));
        assert_eq!(
            described.get("srv__lookup").unwrap().description(),
            "Looks a thing up."
        );
        assert_eq!(
            described.unavailable().collect::<Vec<_>>(),
            [("srv__broken", "its schema is broken")]
        );
        let error = described.resolve("down__x", Caller::Model).unwrap_err();
        assert_eq!(error.code(), ErrorCode::Unavailable);
    }

    #[test]
    fn description_fns_that_fail_name_their_tool() {
        let registry = Registry::from_tools([described("blank_ui", blank_with_a_host)]).unwrap();
        let states = host();
        let error = registry.describe(&Services::new(&states)).unwrap_err();
        assert_eq!(error.problems.len(), 1, "{error}");
        let message = error.problems[0].to_string();
        assert!(message.starts_with("tool `blank_ui` at "), "{message}");
        assert!(
            message.contains("its description fn returned empty text; the model needs"),
            "{message}"
        );

        let error =
            Registry::from_tools([described("fragile_ui", panics_without_a_host)]).unwrap_err();
        let message = error.problems[0].to_string();
        assert!(message.starts_with("tool `fragile_ui` at "), "{message}");
        assert!(
            message.contains("panicked when called without host services"),
            "{message}"
        );
        assert!(
            message.contains(": no catalog; return a fallback"),
            "{message}"
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let mut out = String::new();
        write_canonical(
            &json!({ "b": [ { "z": 1, "a": null } ], "a": "x\"y", "c": 1.5 }),
            &mut out,
        );
        assert_eq!(out, r#"{"a":"x\"y","b":[{"a":null,"z":1}],"c":1.5}"#);
        assert_eq!(
            input_digest(&json!({ "amount": 500, "to": "acct-1" })),
            "9b4ecaf278f99a53cf31770e2761ec89e08b9cad3a0aadf7a51886cdcebe65ae"
        );
    }
}
