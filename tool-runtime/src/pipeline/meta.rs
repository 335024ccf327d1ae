//! The meta-tools a step answers itself: `tool_search` finds deferred tools, and
//! `ask_question` parks the call on a question to a person.

use std::sync::Arc;

use serde_json::{Value, json};
use toolwright_core::{ErrorCode, ModelOutput, Tool, ToolError};

use super::prepared::Prepared;
use super::scope::StepScope;
use super::validate::parse_arguments;
use crate::call::ToolCall;
use crate::record::{CallResult, InputRequest};

/// `tool_search`: up to ten deferred tools the caller may use that match the query, each with
/// its title in the session's locale (when it has one) for the host to show.
pub(super) fn tool_search(scope: &StepScope, call: &ToolCall) -> CallResult {
    let query = match parse_arguments("tool_search", &call.arguments) {
        Ok(Value::Object(map))
            if map.len() == 1
                && map
                    .get("query")
                    .and_then(Value::as_str)
                    .is_some_and(|q| !q.trim().is_empty()) =>
        {
            map["query"].as_str().unwrap_or_default().to_owned()
        }
        Ok(_) => {
            return CallResult::failed(
                &call.call_id,
                "tool_search",
                ToolError::with_code(
                    ErrorCode::InvalidInput,
                    "`tool_search` takes exactly {\"query\": \"<words describing the capability>\"}",
                ),
            );
        }
        Err(error) => return CallResult::failed(&call.call_id, "tool_search", error),
    };
    let default = scope.registry.default_locale();
    let locale = scope.session.locale.as_deref().unwrap_or(default);
    let found: Vec<Value> = scope
        .registry
        .search(&query, scope.audience)
        .into_iter()
        .filter(|t| {
            scope
                .registry
                .index_of(t.name())
                .is_none_or(|i| !scope.disabled.contains(&i))
        })
        .take(10)
        .map(|t| {
            let mut entry = json!({
                "name": t.name(),
                "description": t.description_for(scope.audience),
                "input_schema": t.input_schema(),
            });
            if let (Some(title), Some(map)) =
                (t.texts(locale, default).title, entry.as_object_mut())
            {
                map.insert("title".into(), Value::String(title));
            }
            entry
        })
        .collect();
    let output = json!({ "tools": found });
    answered(
        call,
        "tool_search",
        ModelOutput::Json(output.clone()),
        output,
    )
}

/// `ask_question`: parks the call on a question, or answers `unavailable` when nobody can be
/// asked.
pub(super) fn ask_question(
    scope: &StepScope,
    call: &ToolCall,
    tool: Arc<Tool>,
    input: Value,
) -> Prepared {
    let info = scope.info();
    if !info.interactive {
        let model = ModelOutput::Text(
            "No one can answer questions in this session. Do not ask again; continue on the most reasonable default.".into(),
        );
        let output = json!({ "status": "unavailable" });
        return Prepared::Done(Arc::new(answered(call, "ask_question", model, output)));
    }
    Prepared::Ask {
        call_id: Arc::from(call.call_id.as_str()),
        tool,
        request: Box::new(InputRequest::question(&info, &call.call_id, &input)),
        input,
    }
}

/// A meta-tool's successful result.
fn answered(call: &ToolCall, tool: &str, model: ModelOutput, output: Value) -> CallResult {
    let mut result = CallResult {
        model_usage: None,
        call_id: call.call_id.clone(),
        tool: tool.into(),
        is_error: false,
        projection: None,
        output,
        error: None,
        ends_turn: false,
        label: None,
    };
    result.set_model(model);
    result
}
