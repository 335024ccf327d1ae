//! Stage 3 of a call: its arguments parsed strictly, then stripped of the `null`s strict-mode providers send
//! for optional fields, validated against the tool's schema, and defaulted.

use serde_json::Value;
use toolwright_core::{ErrorCode, Tool, ToolError};

use super::prepared::{Stage, refused};
use crate::call::ToolCall;
use crate::sealing::{SealScope, Sealing};

/// Parses the model's arguments once, strictly: duplicate keys and numbers that cannot be
/// represented exactly are refused, so validation and execution see the same values.
pub(super) fn parse_arguments(tool: &str, text: &str) -> Result<Value, ToolError> {
    toolwright_core::json::parse_arguments(tool, text).map_err(|error| error.into_tool_error())
}

/// The input `call` gives `tool`, as its body will see it.
pub(super) fn input(
    sealing: &Sealing,
    session: &str,
    call: &ToolCall,
    tool: &Tool,
    mut arguments: Value,
) -> Stage<Value> {
    // Arguments from a stored conversation carry their sensitive values sealed (see
    // `Runtime::seal_arguments`): opened here, or the call is refused saying why.
    sealing
        .open(
            &tool.sensitivity().input,
            SealScope {
                tool: tool.name(),
                session,
            },
            &mut arguments,
        )
        .map_err(|unsealable| {
            let error =
                ToolError::with_code(ErrorCode::Unavailable, unsealable.message(tool.name()));
            refused(&call.call_id, tool.name(), error)
        })?;
    // Strict-mode providers send `null` for optional fields they were told are nullable
    // (input without any `null` has nothing to strip: the schema is not walked).
    if holds_null(&arguments) {
        toolwright_core::export::strip_strict_nulls(tool.input_schema(), &mut arguments);
    }
    tool.validate(arguments)
        .map_err(|error| refused(&call.call_id, tool.name(), error.into_tool_error()))
}

/// Whether `value` is or holds a `null` at any depth.
fn holds_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(holds_null),
        Value::Object(object) => object.values().any(holds_null),
        _ => false,
    }
}
