//! A body's outcome as the model and the events see it: the output, its projection for the
//! model, the completion label, and its files stored once (see [`crate::attachments`]).

use toolwright_core::{CallOutput, Tool, ToolError, names};

use crate::attachments::{self, Origin};
use crate::engine::Engine;
use crate::record::CallResult;

/// The result of one execution of `tool` for call `call_id` of turn `turn_id` in session
/// `session_id`, its files stored once.
pub(crate) async fn call_result(
    engine: &Engine,
    session_id: &str,
    turn_id: &str,
    tool: &Tool,
    call_id: &str,
    outcome: Result<CallOutput, ToolError>,
) -> CallResult {
    match outcome {
        Ok(output) => {
            let model = output.for_model();
            let label = output.complete_label.clone().or_else(|| {
                tool.label()
                    .complete
                    .then(|| names::humanize(tool.short_name()))
            });
            let mut result = CallResult {
                model_usage: None,
                call_id: call_id.to_owned(),
                tool: tool.name().to_owned(),
                is_error: false,
                output: output.value,
                model,
                error: None,
                ends_turn: output.ends_turn,
                label,
            };
            let origin = Origin {
                session_id,
                turn_id,
                call_id,
            };
            attachments::keep(engine, origin, &mut result).await;
            result
        }
        Err(error) => CallResult::failed(call_id, tool.name(), error),
    }
}
