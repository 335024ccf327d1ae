//! Stage 3 of a call: its parsed arguments stripped of the `null`s strict-mode providers send
//! for optional fields, validated against the tool's schema, and defaulted.

use serde_json::Value;
use toolwright_core::Tool;

use super::prepared::{Stage, refused};
use crate::call::ToolCall;

/// The input `call` gives `tool`, as its body will see it.
pub(super) fn input(call: &ToolCall, tool: &Tool, mut arguments: Value) -> Stage<Value> {
    // Strict-mode providers send `null` for optional fields they were told are nullable.
    toolwright_core::export::strip_strict_nulls(tool.input_schema(), &mut arguments);
    tool.validate(arguments)
        .map_err(|error| refused(&call.call_id, tool.name(), error.into_tool_error()))
}
