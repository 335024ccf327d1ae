//! One collected tool: a `#[tool]`'s descriptor or a remote server's definition, with its
//! schemas and validators computed once, and who may see and call it.

use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::Value;

use crate::approval::{ApprovalKey, ApprovalSpec};
use crate::context::{CallContext, Requirement};
use crate::descriptor::{
    DescribeFn, EnabledFn, EndsTurn, LabelSpec, LocaleText, ProviderFn, ToolDescriptor, ToolKind,
};
use crate::digest::input_digest;
use crate::effect::{Annotations, Effect};
use crate::error::{ErrorCode, InputError, ToolError};
use crate::locale::{BaseTexts, ToolTexts};
use crate::names;
use crate::output::CallOutput;
use crate::problem::RegistryProblem;
use crate::provider::ProviderTool;
use crate::remote::{RemoteDefinition, RemoteInvoke, RemotePolicy, RemoteTool};
use crate::schema::{self, InputValidator};
use crate::sensitive::{self, SensitivePaths};
use crate::services::Services;
use crate::session::Caller;
use crate::workflow::Entry;

mod dynamic;

pub use dynamic::{DefinitionError, DynamicTool};

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

    pub(crate) const fn index(self) -> usize {
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
    /// A tool defined from data at run time.
    Dynamic(Arc<DynamicTool>),
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
    /// Shared with every call's context (a clone is a count, not a copy).
    name: Arc<str>,
    input_schema: Value,
    inlined_input_schema: Result<Value, String>,
    output_schema: Option<Value>,
    // Shared so a tool described again ([`Registry::describe`]) reuses the compiled validators.
    validator: Arc<InputValidator>,
    output_validator: Option<Arc<InputValidator>>,
    /// Where its sensitive values are, from the schemas (shared like the validators).
    sensitive: Arc<Sensitivity>,
}

/// Where a tool's sensitive values are: in its input, from the input schema, and in its
/// structured output, from the published output schema (see [`crate::sensitive`]).
#[derive(Debug, Default)]
pub struct Sensitivity {
    /// In the input.
    pub input: SensitivePaths,
    /// In the raw output.
    pub output: SensitivePaths,
}

impl Sensitivity {
    pub(crate) fn of(input: &Value, output: Option<&Value>) -> Arc<Sensitivity> {
        Arc::new(Sensitivity {
            input: SensitivePaths::of_schema(input),
            output: output.map(SensitivePaths::of_schema).unwrap_or_default(),
        })
    }
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
    /// The tool of `descriptor`, or every problem found with it: its names checked, its schemas
    /// made model-facing and compiled into validators, its provider and description fns run
    /// once.
    pub(crate) fn build(descriptor: &'static ToolDescriptor) -> Result<Tool, Vec<RegistryProblem>> {
        let mut problems = Vec::new();
        let name = descriptor.model_name();
        check_names(descriptor, &name, &mut problems);
        check_input_retries(descriptor, &name, &mut problems);
        let input = LocalInput::build(descriptor, &name, &mut problems);
        let (output_schema, output_validator) = local_output(descriptor, &name, &mut problems);
        let provider = descriptor
            .provider
            .and_then(|build| provider_config(descriptor, build, &name, &mut problems));
        let described = descriptor.describe.and_then(|describe| {
            run_describe(descriptor, describe, &Services::none(), &name)
                .map_err(|problem| problems.push(problem))
                .ok()
        });

        let sensitive = Sensitivity::of(&input.schema, output_schema.as_ref());
        match input.validator {
            Some(validator) if problems.is_empty() => Ok(Tool {
                sensitive,
                origin: Origin::Local(descriptor),
                provider,
                approval: descriptor.approval,
                described,
                id: descriptor.id(),
                name: name.into(),
                input_schema: input.schema,
                inlined_input_schema: input.inlined,
                output_schema,
                validator: Arc::new(validator),
                output_validator: output_validator.map(Arc::new),
            }),
            _ => Err(problems),
        }
    }

    /// This tool with the description `text`; everything else shared or copied, nothing
    /// recomputed.
    pub(crate) fn described_as(&self, text: Arc<str>) -> Tool {
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
            sensitive: Arc::clone(&self.sensitive),
        }
    }

    /// The text the description fn (`description = path`) computed; `None` for other tools.
    pub(crate) fn described_text(&self) -> Option<&Arc<str>> {
        self.described.as_ref()
    }

    /// Keeps `text` as the computed description: what a tool rebuilt without host services
    /// takes over from the tool it replaces.
    pub(crate) fn keep_description(&mut self, text: Arc<str>) {
        self.described = Some(text);
    }

    /// Replaces the approval settings (`None` means `never`).
    pub(crate) fn set_approval(&mut self, approval: Option<ApprovalSpec>) {
        self.approval = approval;
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
            sensitive: Sensitivity::of(&input_schema, output_schema.as_ref()),
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
            name: name.into(),
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
            Origin::Remote(_) | Origin::Dynamic(_) => None,
        }
    }

    /// The remote part of a tool served by a connection (`None` for a `#[tool]`).
    pub fn remote_tool(&self) -> Option<&RemoteTool> {
        match &self.origin {
            Origin::Remote(remote) => Some(remote),
            Origin::Local(_) | Origin::Dynamic(_) => None,
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
            Origin::Dynamic(d) => d.effect(),
        }
    }

    /// Whether its output is third-party text that taints the turn.
    pub fn is_untrusted(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.untrusted,
            Origin::Remote(r) => r.policy.untrusted,
            Origin::Dynamic(d) => d.is_untrusted(),
        }
    }

    /// Whether only users may call it.
    pub fn is_user_only(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.user_only,
            Origin::Remote(r) => r.policy.user_only,
            Origin::Dynamic(d) => d.is_user_only(),
        }
    }

    /// Whether it is left out of the model's list, reached through `tool_search`.
    pub fn is_deferred(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.deferred,
            Origin::Remote(r) => r.policy.deferred,
            Origin::Dynamic(d) => d.is_deferred(),
        }
    }

    /// Whether subagent sessions get it.
    pub fn for_subagents(&self) -> bool {
        match &self.origin {
            Origin::Local(d) => d.subagents,
            Origin::Remote(r) => r.policy.subagents,
            Origin::Dynamic(d) => d.for_subagents(),
        }
    }

    /// Approval settings; `None` means `never`.
    pub fn approval(&self) -> Option<ApprovalSpec> {
        self.approval
    }

    /// Whether success ends the turn (never, for remote tools).
    pub fn ends_turn(&self) -> EndsTurn {
        match &self.origin {
            Origin::Local(d) => d.ends_turn,
            Origin::Dynamic(d) if d.is_ending() => EndsTurn::Always,
            Origin::Remote(_) | Origin::Dynamic(_) => EndsTurn::Never,
        }
    }

    /// How many times the model may correct a call of this tool whose input failed validation
    /// before the turn fails: `#[tool(input_retries = N)]`, from 0 (the first invalid input
    /// fails the turn) to [`ToolDescriptor::MAX_INPUT_RETRIES`]. The model loop shows the model
    /// each validation error and lets it call again until the limit is spent.
    ///
    /// `None` when the tool does not set it, so the loop's default applies; always `None` for
    /// remote tools.
    pub fn input_retries(&self) -> Option<u8> {
        self.descriptor().and_then(|d| d.input_retries)
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

    /// The tool's own guardrails (none for a remote tool).
    pub fn guardrails(&self) -> crate::guardrail::GuardrailSpec {
        self.descriptor()
            .map_or(crate::guardrail::GuardrailSpec::NONE, |d| d.guardrails)
    }

    /// The tool's `prepare` fn, if it has one.
    pub fn prepare(&self) -> Option<crate::guardrail::PrepareFn> {
        self.descriptor().and_then(|d| d.prepare)
    }

    /// This tool described as `text` instead: what a `prepare` fn's
    /// [`Preparation::Describe`](crate::guardrail::Preparation::Describe) lists for one step
    /// (export it with [`crate::export::export`]).
    pub fn described_for_step(&self, text: &str) -> Tool {
        self.described_as(Arc::from(text))
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
            Origin::Dynamic(d) => d.title_text(),
        }
    }

    /// The one-line user-facing summary.
    pub fn summary(&self) -> Option<&str> {
        match &self.origin {
            Origin::Local(d) => d.summary,
            Origin::Dynamic(d) => d.summary_text(),
            Origin::Remote(_) => None,
        }
    }

    /// The texts of the tool's other locales (`#[tool(i18n(...))]`; none for a remote tool).
    pub fn i18n(&self) -> &'static [LocaleText] {
        self.descriptor().map_or(&[], |d| d.i18n)
    }

    /// The title and summary a person reading `locale` sees, when the tool's own `title` and
    /// `summary` are in `default_locale` (the registry's: [`Registry::texts`](crate::Registry::texts)
    /// passes it). The rule is the [`locale`](crate::locale) module's: the locale's title, else
    /// the base title; the locale's summary, the base summary only in the default locale,
    /// otherwise none. A remote tool has only its definition's title (no summary).
    ///
    /// ```
    /// # use toolwright_core::Registry;
    /// let registry = Registry::from_tools([toolwright_core::ask_question()]).unwrap();
    /// let tool = registry.get("ask_question").unwrap();
    /// assert_eq!(tool.texts("de-AT", "en").summary, None);
    /// ```
    pub fn texts(&self, locale: &str, default_locale: &str) -> ToolTexts {
        crate::locale::resolve(self.base_texts(), locale, default_locale)
    }

    /// The texts [`Tool::texts`] resolves from.
    pub(crate) fn base_texts(&self) -> BaseTexts<'_> {
        BaseTexts {
            title: self.title(),
            summary: self.summary(),
            i18n: self.i18n(),
        }
    }

    /// The name without toolset or connection (what fallback labels humanize).
    pub fn short_name(&self) -> &str {
        match &self.origin {
            Origin::Local(d) => d.name,
            Origin::Remote(r) => &r.definition.name,
            Origin::Dynamic(d) => d.name(),
        }
    }

    /// The description as written (no appended sentences); for a tool with a description fn
    /// (`description = path`), the text the fn returned when this registry was built or
    /// [described](crate::Registry::describe). Every list and search reads it here, never from
    /// the descriptor.
    pub fn description(&self) -> &str {
        if let Some(text) = &self.described {
            return text;
        }
        match &self.origin {
            Origin::Local(d) => d.description,
            Origin::Remote(r) => r.definition.description.as_deref().unwrap_or_default(),
            Origin::Dynamic(d) => d.description_text(),
        }
    }

    /// The MCP annotations this tool is served with: derived from the effect, then the explicit
    /// overrides (local tools); the effect's hints (remote tools: the runtime's view, not the
    /// server's claims).
    pub fn annotations(&self) -> Annotations {
        match &self.origin {
            Origin::Local(d) => d.effective_annotations(),
            Origin::Remote(r) => r.policy.effect.annotations(),
            Origin::Dynamic(d) => d.effect().annotations(),
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

    /// [`Tool::name`], shared: what a call's context holds (cloning it copies nothing).
    pub fn shared_name(&self) -> Arc<str> {
        Arc::clone(&self.name)
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

    /// Where its sensitive values are: computed once from the schemas, empty for most tools.
    pub fn sensitivity(&self) -> &Sensitivity {
        &self.sensitive
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
        // The validator's messages quote the failing value: a sensitive one is left out.
        self.validator
            .validate_hiding(&self.name, input, &self.sensitive.input)
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
    /// validated input with its sensitive values redacted (`approval_key = input`), or the
    /// user's key fn.
    pub fn approval_key(&self, input: &Value) -> Result<String, ToolError> {
        let key = self
            .approval
            .map(|a| a.key)
            .unwrap_or(ApprovalKey::ToolName);
        match key {
            ApprovalKey::ToolName => Ok(self.name.to_string()),
            // The digest is of the input the approver saw: sensitive values redacted, so the
            // store never holds a digest a short secret could be guessed back from, and a
            // remembered approval covers the call whatever the secret.
            ApprovalKey::Input => Ok(format!(
                "{}#{}",
                self.name,
                input_digest(&self.sensitive.input.redacted(input))
            )),
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
            Origin::Dynamic(d) => d.invoke(input, cx),
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
        let hiding = &self.sensitive.output;
        validator
            .check_hiding(&self.name, value, hiding)
            .map_err(|error| {
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

/// Checks the names of `descriptor`, whose model-facing name is `name`: each part valid, the
/// joined name valid too, and not a name the runtime reserves (unless the descriptor is the
/// built-in tool that holds it).
fn check_names(
    descriptor: &'static ToolDescriptor,
    name: &str,
    problems: &mut Vec<RegistryProblem>,
) {
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
    if parts_valid && !names::is_valid_name(name) {
        problems.push(RegistryProblem::InvalidName {
            name: name.to_owned(),
            at,
        });
    }
    if names::is_reserved(name)
        && !crate::builtin::is_ask_question(descriptor)
        && !crate::builtin::is_task(descriptor)
        && !crate::sandbox_tools::is_sandbox_tool(descriptor)
    {
        problems.push(RegistryProblem::Reserved {
            name: name.to_owned(),
            at,
        });
    }
}

/// A hand-built descriptor can hold any `u8`; `#[tool]` refuses the same values at compile time
/// (C20), so the limit the getter documents holds for every tool.
fn check_input_retries(
    descriptor: &'static ToolDescriptor,
    name: &str,
    problems: &mut Vec<RegistryProblem>,
) {
    if let Some(retries) = descriptor.input_retries
        && retries > ToolDescriptor::MAX_INPUT_RETRIES
    {
        problems.push(RegistryProblem::InputRetries {
            tool: name.to_owned(),
            retries,
            at: descriptor.location,
        });
    }
}

/// The input side of a `#[tool]`: its model-facing schema, the same with every `$ref` inlined
/// (or why that is impossible), and the validator compiled from the first (`None` when it does
/// not compile; a problem then says why).
struct LocalInput {
    schema: Value,
    inlined: Result<Value, String>,
    validator: Option<InputValidator>,
}

impl LocalInput {
    /// The input side of `descriptor`, named `name`; every problem goes to `problems`.
    fn build(
        descriptor: &'static ToolDescriptor,
        name: &str,
        problems: &mut Vec<RegistryProblem>,
    ) -> LocalInput {
        let at = descriptor.location;
        let generated = (descriptor.input.schema)(false);
        let mut input_schema = schema::model_facing(&generated);
        schema::close_objects(&mut input_schema);
        sensitive::mark_properties(&mut input_schema, descriptor.input.sensitive);
        if !schema::is_object_schema(&input_schema) {
            problems.push(RegistryProblem::InputNotObject {
                tool: name.to_owned(),
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
                    tool: name.to_owned(),
                    at,
                });
            }
            input_schema = schema::with_task_id(input_schema);
        }
        let mut inlined = schema::model_facing(&(descriptor.input.schema)(true));
        schema::close_objects(&mut inlined);
        sensitive::mark_properties(&mut inlined, descriptor.input.sensitive);
        let inlined = if schema::has_ref(&inlined) {
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
                    tool: name.to_owned(),
                    which: "input",
                    error,
                    at,
                });
                None
            }
        };
        LocalInput {
            schema: input_schema,
            inlined,
            validator,
        }
    }
}

/// The published output schema of `descriptor`, named `name`, and its validator (both `None`
/// without `output_schema`; the validator `None` when it does not compile). Every problem goes
/// to `problems`.
fn local_output(
    descriptor: &'static ToolDescriptor,
    name: &str,
    problems: &mut Vec<RegistryProblem>,
) -> (Option<Value>, Option<InputValidator>) {
    let Some(output) = descriptor.output_schema else {
        return (None, None);
    };
    let at = descriptor.location;
    let value = schema::model_facing(&output(false));
    if !schema::is_object_schema(&value) {
        problems.push(RegistryProblem::OutputNotObject {
            tool: name.to_owned(),
            at,
        });
    }
    let validator = match InputValidator::compile(&value) {
        Ok(v) => Some(v),
        Err(error) => {
            problems.push(RegistryProblem::SchemaCompile {
                tool: name.to_owned(),
                which: "output",
                error,
                at,
            });
            None
        }
    };
    (Some(value), validator)
}

/// Builds a provider-native tool's configuration by calling `build` once, and checks it (and
/// the descriptor keys `#[tool]` refuses beside `provider`, for descriptors built by hand).
/// Every problem goes to `problems`.
fn provider_config(
    descriptor: &'static ToolDescriptor,
    build: ProviderFn,
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
    if descriptor.input_retries.is_some() {
        report("it sets `input_retries`, but the provider runs the call and the runtime never validates its input; remove `input_retries`".to_owned());
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
pub(crate) fn run_describe(
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
