//! Stages 1 and 2 of a call: route meta-tools, unwrap `tool_call`, resolve the name and check
//! that the caller may see the tool now (visibility, `enabled`), and take over a
//! provider-native tool's result.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};
use toolwright_core::error::quoted_prefix;
use toolwright_core::{ErrorCode, Tool, ToolError};

use super::meta;
use super::prepared::{Prepared, Stage, refused};
use super::scope::StepScope;
use super::validate::parse_arguments;
use crate::call::{ProviderResult, ToolCall};
use crate::engine::{Engine, find_tool};
use crate::record::CallResult;
use crate::task::meta::{TASK_CANCEL, TASK_WAIT};

/// The name a call resolves and its arguments, parsed (their error is reported once the tool
/// is known).
pub(super) struct Routed<'a> {
    /// The call's own name, or the one a `tool_call` names.
    pub(super) name: Cow<'a, str>,
    pub(super) arguments: Result<Value, ToolError>,
}

/// Routes the meta-tools (`task_wait`, `task_cancel`, `tool_search`) and unwraps `tool_call`,
/// where the caller has them; any other call goes on under its own name.
pub(super) fn route<'a>(scope: &StepScope, call: &'a ToolCall) -> Stage<Routed<'a>> {
    let registry = &scope.registry;
    if registry.has_tasks(scope.audience) {
        for name in [TASK_WAIT, TASK_CANCEL] {
            if call.name == name {
                return Err(Box::new(Prepared::Meta {
                    call_id: call.call_id.clone(),
                    name,
                    arguments: call.arguments.clone(),
                }));
            }
        }
    }
    let deferred = registry.has_deferred(scope.audience);
    if deferred && call.name == "tool_search" {
        return Err(Box::new(Prepared::Done(Arc::new(meta::tool_search(
            scope, call,
        )))));
    }
    if deferred && call.name == "tool_call" {
        return unwrap_tool_call(call);
    }
    Ok(Routed {
        name: Cow::Borrowed(&call.name),
        arguments: parse_arguments(&call.name, &call.arguments),
    })
}

/// The tool and input a `tool_call` names.
fn unwrap_tool_call(call: &ToolCall) -> Stage<Routed<'static>> {
    let invalid = |message: &str| {
        refused(
            &call.call_id,
            "tool_call",
            ToolError::with_code(ErrorCode::InvalidInput, message),
        )
    };
    match parse_arguments("tool_call", &call.arguments) {
        Ok(Value::Object(map))
            if map.keys().any(|k| k != "name" && k != "input")
                || !map.get("name").is_some_and(Value::is_string)
                || !map.get("input").is_some_and(Value::is_object) =>
        {
            Err(invalid(
                "`tool_call` takes exactly {\"name\": \"<a tool found with tool_search>\", \"input\": {...}}; nothing else",
            ))
        }
        Ok(Value::Object(mut map)) => {
            let name = match map.remove("name") {
                Some(Value::String(name)) => Some(name),
                _ => None,
            };
            let input = map.remove("input").unwrap_or_else(|| json!({}));
            match name {
                Some(name) => Ok(Routed {
                    name: Cow::Owned(name),
                    arguments: Ok(input),
                }),
                None => Err(invalid(
                    "`tool_call` needs `name` (a tool found with tool_search) and `input`",
                )),
            }
        }
        Ok(_) => Err(invalid(
            "`tool_call` takes an object: {\"name\": ..., \"input\": {...}}",
        )),
        Err(error) => Err(refused(&call.call_id, "tool_call", error)),
    }
}

/// The tool `routed` names, as the caller may call it now: resolved and visible, not switched
/// off, not provider-native (whose result the provider returned: that is the call's result).
/// A withheld remote tool is looked up again, since another instance may have approved it.
pub(super) fn target(scope: &StepScope, call: &ToolCall, name: &str) -> Stage<Arc<Tool>> {
    let registry = &scope.registry;
    let (index, tool) = match registry.resolve_indexed(name, scope.turn.caller) {
        Ok(found) => found,
        Err(error) => return Err(refused(&call.call_id, name, error)),
    };
    provider_native(call, tool)?;
    if !scope.session.allows(tool.name()) {
        return Err(refused(
            &call.call_id,
            name,
            ToolError::with_code(
                ErrorCode::UnknownTool,
                format!(
                    "no tool named `{}` in this session; it may use only: {}",
                    quoted_prefix(name),
                    scope
                        .session
                        .tools
                        .as_deref()
                        .unwrap_or_default()
                        .join(", ")
                ),
            ),
        ));
    }
    if scope.disabled.contains(&index) {
        return Err(refused(
            &call.call_id,
            name,
            ToolError::with_code(
                ErrorCode::UnknownTool,
                format!(
                    "tool `{}` is not available at this point of the conversation",
                    quoted_prefix(name)
                ),
            ),
        ));
    }
    Ok(Arc::clone(&registry.tools()[index]))
}

/// A withheld tool may have been approved by another instance since this one listed it: the
/// tool as the registry holds it now, if so.
pub(super) async fn refreshed(engine: &Engine, tool: Arc<Tool>) -> Arc<Tool> {
    if tool.is_withheld()
        && engine.remote().pinned_meanwhile(&tool).await
        && let Some(fresh) = find_tool(&engine.registry(), tool.name())
    {
        return fresh;
    }
    tool
}

/// A provider-native tool is run by the model provider: the call carries its result, which is
/// the call's result. Any other tool must not carry one.
fn provider_native(call: &ToolCall, tool: &Tool) -> Stage<()> {
    let invalid = |message: String| {
        refused(
            &call.call_id,
            tool.name(),
            ToolError::with_code(ErrorCode::InvalidInput, message),
        )
    };
    match (&call.provider_result, tool.provider().is_some()) {
        (Some(provided), true) => Err(Box::new(Prepared::Provided(
            Arc::new(provider_result(call, tool, provided)),
            tool.is_untrusted(),
        ))),
        (Some(_), false) => Err(invalid(format!(
            "`{}` is not a provider-native tool, so the provider cannot have run it; pass the call without a result and the runtime runs it",
            tool.name()
        ))),
        (None, true) => Err(invalid(format!(
            "`{}` is run by the model provider, which returns its result with the response; the host passes that result with `ToolCall::provider_result`",
            tool.name()
        ))),
        (None, false) => Ok(()),
    }
}

/// The record of a provider-native call: the provider's output as is (the model already has
/// it in the provider's own form), an error carrying the output's text when the provider says
/// the call failed.
fn provider_result(call: &ToolCall, tool: &Tool, provided: &ProviderResult) -> CallResult {
    if provided.is_error {
        let text = match &provided.output {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        return CallResult::failed(
            &call.call_id,
            tool.name(),
            ToolError::with_code(
                ErrorCode::ToolFailed,
                format!("the provider's `{}` failed: {text}", tool.name()),
            ),
        );
    }
    CallResult {
        model_usage: None,
        call_id: call.call_id.clone(),
        tool: tool.name().to_owned(),
        is_error: false,
        projection: None,
        output: provided.output.clone(),
        error: None,
        ends_turn: false,
        label: None,
    }
}
