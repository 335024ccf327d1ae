//! Tools defined from data at run time ([`DynamicTool`]): a name, a description, a JSON Schema,
//! an effect, policies and an async handler, checked when they are built into a [`Tool`] by the
//! rules `#[tool]` applies at compile time.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{Origin, Tool, remote_schema};
use crate::approval::{ApprovalKey, ApprovalSpec, RequestPolicy};
use crate::context::{CallContext, PlainParam, ToolContext};
use crate::descriptor::Location;
use crate::effect::Effect;
use crate::error::ToolError;
use crate::names;
use crate::output::CallOutput;
use crate::schema::{self, InputValidator};

/// The erased handler of a [`DynamicTool`]: validated, defaulted input and the call's context.
type Handler =
    Arc<dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;

/// A tool defined from data at run time — a query tool whose parameters come from a table's
/// columns, an endpoint of an API described at run time — where `#[tool]` needs the types at
/// compile time. Register it on the runtime builder or a live runtime; it then goes through
/// the same validation, approval policies, taint, events and exports as a `#[tool]`.
///
/// What `#[tool]` checks at compile time is checked when it is built into a [`Tool`]
/// ([`Tool::dynamic`], which registration calls): a name matching the name rule and not
/// reserved, a description, an input schema describing a JSON object that compiles (JSON Schema
/// 2020-12 unless its `$schema` names another draft; a schema that cannot be evaluated is
/// refused, never passed through unvalidated), a policy stated for `money` and `public`, and
/// the approval settings' combinations. Every problem is reported at once.
///
/// ```
/// use serde_json::json;
/// use toolwright_core::{DynamicTool, Effect, Tool};
///
/// let columns = ["id", "status"];
/// let query = DynamicTool::new("query_orders", Effect::Read)
///     .description("Finds orders by column values.")
///     .input_schema(json!({
///         "type": "object",
///         "properties": {
///             "column": { "enum": columns },
///             "value": { "type": "string" }
///         },
///         "required": ["column", "value"]
///     }))
///     .handler(|input, _ctx| async move {
///         Ok(json!({ "matched": input["column"] }))
///     });
/// let tool = Tool::dynamic(query).unwrap();
/// assert_eq!(tool.name(), "query_orders");
/// assert!(tool.validate(json!({ "column": "price", "value": "1" })).is_err());
/// ```
#[derive(Clone)]
pub struct DynamicTool {
    name: String,
    description: Option<String>,
    title: Option<String>,
    summary: Option<String>,
    effect: Effect,
    untrusted: bool,
    user_only: bool,
    deferred: bool,
    subagents: bool,
    ends_turn: bool,
    /// `Some` once a policy is stated (`never` included).
    approval: Option<ApprovalSpec>,
    input_schema: Option<Value>,
    output_schema: Option<Value>,
    handler: Option<Handler>,
    at: Location,
}

impl std::fmt::Debug for DynamicTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicTool")
            .field("name", &self.name)
            .field("effect", &self.effect)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

impl DynamicTool {
    /// A tool named `name` (the model-facing name) with `effect`; everything else at the
    /// defaults of `#[tool]`: no approval, trusted output, visible to models and subagents.
    /// Where this is called is the location errors name.
    #[track_caller]
    pub fn new(name: impl Into<String>, effect: Effect) -> DynamicTool {
        let caller = std::panic::Location::caller();
        DynamicTool {
            name: name.into(),
            description: None,
            title: None,
            summary: None,
            effect,
            untrusted: false,
            user_only: false,
            deferred: false,
            subagents: true,
            ends_turn: false,
            approval: None,
            input_schema: None,
            output_schema: None,
            handler: None,
            at: Location {
                file: caller.file(),
                line: caller.line(),
                column: caller.column(),
                module_path: "",
            },
        }
    }

    /// The description the model reads: what it does, when to use it, what it returns.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// The user-facing title.
    pub fn title(mut self, text: impl Into<String>) -> Self {
        self.title = Some(text.into());
        self
    }

    /// The one-line user-facing summary (at most 80 characters).
    pub fn summary(mut self, text: impl Into<String>) -> Self {
        self.summary = Some(text.into());
        self
    }

    /// The JSON Schema of the input: an object schema. Defaults in it are applied to absent
    /// fields before the handler runs.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// The JSON Schema the output is checked against and published with (an object schema).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The approval settings; `ApprovalSpec::new(RequestPolicy::Never)` states that calls run
    /// without asking (what `money` and `public` tools must say explicitly).
    pub fn approval(mut self, approval: ApprovalSpec) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Whether the output is third-party text that taints the turn.
    pub fn untrusted(mut self, untrusted: bool) -> Self {
        self.untrusted = untrusted;
        self
    }

    /// Whether only users may call it (models never see it).
    pub fn user_only(mut self, user_only: bool) -> Self {
        self.user_only = user_only;
        self
    }

    /// Whether it is left out of the model's list, reached through `tool_search`.
    pub fn deferred(mut self, deferred: bool) -> Self {
        self.deferred = deferred;
        self
    }

    /// Whether subagent sessions get it (default `true`).
    pub fn subagents(mut self, subagents: bool) -> Self {
        self.subagents = subagents;
        self
    }

    /// Whether a successful call ends the turn.
    pub fn ends_turn(mut self, ends_turn: bool) -> Self {
        self.ends_turn = ends_turn;
        self
    }

    /// The handler: it receives the validated, defaulted input and the call's context, and
    /// returns the output as JSON.
    pub fn handler<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.handler = Some(Arc::new(move |input, ctx| Box::pin(handler(input, ctx))));
        self
    }

    /// The model-facing name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the tool does.
    pub fn effect(&self) -> Effect {
        self.effect
    }

    pub(super) fn is_untrusted(&self) -> bool {
        self.untrusted
    }

    pub(super) fn is_user_only(&self) -> bool {
        self.user_only
    }

    pub(super) fn is_deferred(&self) -> bool {
        self.deferred
    }

    pub(super) fn for_subagents(&self) -> bool {
        self.subagents
    }

    pub(super) fn is_ending(&self) -> bool {
        self.ends_turn
    }

    pub(super) fn title_text(&self) -> Option<&str> {
        self.title.as_deref()
    }

    pub(super) fn summary_text(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    pub(super) fn description_text(&self) -> &str {
        self.description.as_deref().unwrap_or_default()
    }

    /// Runs the handler on validated input.
    pub(super) fn invoke(
        &self,
        input: Value,
        cx: CallContext,
    ) -> BoxFuture<'static, Result<CallOutput, ToolError>> {
        let Some(handler) = self.handler.clone() else {
            // Refused when built: a tool without a handler never reaches a registry.
            return Box::pin(std::future::ready(Err(ToolError::new(format!(
                "tool `{}` has no handler",
                self.name
            )))));
        };
        let ends_turn = self.ends_turn;
        Box::pin(async move {
            let ctx = <ToolContext as PlainParam>::from_call(&cx)?;
            let value = handler(input, ctx).await?;
            Ok(CallOutput {
                value,
                ends_turn,
                model: None,
                complete_label: None,
            })
        })
    }

    /// Every way this definition breaks the rules `#[tool]` checks at compile time.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !names::is_valid_name(&self.name) {
            let fixed: String = self
                .name
                .chars()
                .take(64)
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            problems.push(format!(
                "its name does not match ^[a-zA-Z0-9_-]{{1,64}}$, so no model provider accepts it; e.g. `{fixed}`"
            ));
        } else if names::is_reserved(&self.name) {
            problems.push("its name is one the runtime reserves for a meta-tool or built-in tool; choose another".into());
        }
        if self
            .description
            .as_deref()
            .is_none_or(|d| d.trim().is_empty())
        {
            problems.push("it has no description; say what it does, when to use it and what it returns with `.description(..)`".into());
        }
        if self.title.as_deref().is_some_and(|t| t.trim().is_empty()) {
            problems.push("its title is empty; give a title or leave it out".into());
        }
        if let Some(summary) = &self.summary
            && summary.chars().count() > 80
        {
            problems.push(format!(
                "its summary has {} characters; keep it to one line of at most 80",
                summary.chars().count()
            ));
        }
        if self.handler.is_none() {
            problems.push(
                "it has no handler; give one with `.handler(|input, ctx| async move { .. })`"
                    .into(),
            );
        }
        self.approval_problems(&mut problems);
        problems
    }

    /// The approval rules: C9, C10, C11 and C24 of `#[tool]`.
    fn approval_problems(&self, problems: &mut Vec<String>) {
        let asks = self
            .approval
            .is_some_and(|a| !matches!(a.request, RequestPolicy::Never));
        if self.approval.is_none()
            && matches!(self.effect, Effect::Money | Effect::Public)
            && !self.user_only
        {
            problems.push(format!(
                "effect `{}` needs an explicit approval policy: `.approval(ApprovalSpec::new(RequestPolicy::Always))` (or `Once`, `Auto`, a policy fn), or `RequestPolicy::Never` to run without asking",
                self.effect.as_str()
            ));
        }
        if self.user_only {
            for (set, what) in [
                (self.deferred, "`deferred`"),
                (self.ends_turn, "`ends_turn`"),
                (asks, "an approval policy"),
                (!self.subagents, "`subagents(false)`"),
            ] {
                if set {
                    problems.push(format!("{what} with `user_only`: the model never sees a `user_only` tool; remove one"));
                }
            }
        }
        let Some(approval) = self.approval else {
            return;
        };
        if !asks {
            if approval.response.is_some()
                || approval.require_auth.is_some()
                || approval.prompt.is_some()
            {
                problems.push("its approval settings decide how a person is asked, and `RequestPolicy::Never` asks nobody; use `Always` (or `Once`, `Auto`, a policy fn)".into());
            }
            if !matches!(approval.key, ApprovalKey::ToolName) {
                problems.push("an approval key keys the memory of `Once`, and `Never` keeps none; use `RequestPolicy::Once`".into());
            }
        } else if !matches!(approval.key, ApprovalKey::ToolName)
            && !matches!(
                approval.request,
                RequestPolicy::Once | RequestPolicy::Custom(_)
            )
        {
            problems.push(format!(
                "an approval key keys the memory of `Once`, and `{}` keeps no memory; use `RequestPolicy::Once`",
                approval.request.name()
            ));
        }
        if let Some(provider) = approval.require_auth
            && !is_provider_name(provider)
        {
            let what = if provider.is_empty() {
                "it is empty".to_owned()
            } else {
                format!(
                    "`{provider}` is not a provider name (1 to 64 letters, digits, `_`, `-` or `.`)"
                )
            };
            problems.push(format!(
                "`require_auth` names the provider whose token an approver must hold; {what}"
            ));
        }
    }
}

/// Whether `provider` can name a provider of tokens: 1 to 64 ASCII letters, digits, `_`, `-`
/// or `.` (what `#[tool(approval(require_auth = ..))]` accepts).
fn is_provider_name(provider: &str) -> bool {
    (1..=64).contains(&provider.len())
        && provider
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// A [`DynamicTool`] that breaks the rules, with every problem found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}` defined at {at} is refused:{}", list(.problems))]
pub struct DefinitionError {
    /// The tool's name.
    pub tool: String,
    /// Where it was defined ([`DynamicTool::new`]'s caller).
    pub at: Location,
    /// Each problem, in words saying what to change.
    pub problems: Vec<String>,
}

fn list(problems: &[String]) -> String {
    problems.iter().map(|p| format!("\n- {p}")).collect()
}

impl Tool {
    /// The tool of `definition`, checked by the rules `#[tool]` applies at compile time, with
    /// its schemas compiled into validators once. Fails with every problem found.
    pub fn dynamic(definition: DynamicTool) -> Result<Tool, DefinitionError> {
        let mut problems = definition.problems();
        let (input_schema, validator) = match &definition.input_schema {
            None => {
                problems.push("it has no input schema; give one with `.input_schema(json!({\"type\": \"object\", ..}))` (`{\"type\": \"object\"}` for no arguments)".into());
                (Value::Null, None)
            }
            Some(given) => compile(given, "input", &mut problems),
        };
        let (output_schema, output_validator) = match &definition.output_schema {
            None => (None, None),
            Some(given) => {
                let (schema, validator) = compile(given, "output", &mut problems);
                (Some(schema), validator)
            }
        };
        let (Some(validator), true) = (validator, problems.is_empty()) else {
            return Err(DefinitionError {
                tool: definition.name.clone(),
                at: definition.at,
                problems,
            });
        };
        let inlined_input_schema = if schema::has_ref(&input_schema) {
            Err("the tool's input schema uses `$ref`, which is not inlined for tools defined at run time".to_owned())
        } else {
            Ok(input_schema.clone())
        };
        let approval = definition
            .approval
            .filter(|a| !matches!(a.request, RequestPolicy::Never));
        Ok(Tool {
            sensitive: super::Sensitivity::of(&input_schema, output_schema.as_ref()),
            provider: None,
            approval,
            described: None,
            id: definition.name.clone(),
            name: Arc::from(definition.name.as_str()),
            input_schema,
            inlined_input_schema,
            output_schema,
            validator: Arc::new(validator),
            output_validator: output_validator.map(Arc::new),
            origin: Origin::Dynamic(Arc::new(definition)),
        })
    }

    /// The definition of a tool defined at run time (`None` for other tools).
    pub fn dynamic_tool(&self) -> Option<&DynamicTool> {
        match &self.origin {
            Origin::Dynamic(definition) => Some(definition),
            _ => None,
        }
    }
}

/// `given` as a model-facing schema (`$schema` dropped) and its validator (`None`, with a
/// problem, when it is not an object schema or does not compile).
fn compile(
    given: &Value,
    which: &str,
    problems: &mut Vec<String>,
) -> (Value, Option<InputValidator>) {
    let model_facing = remote_schema(given);
    if !schema::is_object_schema(&model_facing) {
        problems.push(format!(
            "its {which} schema does not describe a JSON object (`\"type\": \"object\"`)"
        ));
        return (model_facing, None);
    }
    match InputValidator::compile_dialect(given) {
        Ok(validator) => (model_facing, Some(validator)),
        Err(error) => {
            problems.push(format!("its {which} schema does not compile: {error}"));
            (model_facing, None)
        }
    }
}
