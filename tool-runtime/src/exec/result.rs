//! A body's outcome as the model and the events see it: the output, its projection for the
//! model, the completion label, and warnings about files sent to the model.

use toolwright_core::{CallOutput, ContentPart, ModelOutput, Tool, ToolError, names};

use crate::engine::Engine;
use crate::event::Event;
use crate::record::CallResult;

/// The result of one execution of `tool` for call `call_id` of turn `turn_id` in session
/// `session_id`.
pub(crate) fn call_result(
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
            check_files(engine, session_id, turn_id, call_id, &model);
            let label = output.complete_label.clone().or_else(|| {
                tool.label()
                    .complete
                    .then(|| names::humanize(tool.short_name()))
            });
            CallResult {
                model_usage: None,
                call_id: call_id.to_owned(),
                tool: tool.name().to_owned(),
                is_error: false,
                output: output.value,
                model,
                error: None,
                ends_turn: output.ends_turn,
                label,
            }
        }
        Err(error) => CallResult::failed(call_id, tool.name(), error),
    }
}

/// Warns about files sent to the model that are large or not base64.
fn check_files(
    engine: &Engine,
    session_id: &str,
    turn_id: &str,
    call_id: &str,
    model: &ModelOutput,
) {
    let ModelOutput::Content(parts) = model else {
        return;
    };
    let limit = engine.options().file_warning_bytes;
    for part in parts {
        let ContentPart::File { data, media_type } = part else {
            continue;
        };
        let decoded = data.len() / 4 * 3;
        let message = if !data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r'))
        {
            Some(format!(
                "a `{media_type}` file for the model is not base64; encode the bytes as base64"
            ))
        } else if decoded > limit {
            Some(format!(
                "a `{media_type}` file of about {} KiB is sent to the model (over {} KiB)",
                decoded / 1024,
                limit / 1024
            ))
        } else {
            None
        };
        if let Some(message) = message {
            tracing::warn!(call_id, "{message}");
            engine.emit(Event::Warning {
                session_id: session_id.to_owned(),
                turn_id: turn_id.to_owned(),
                call_id: Some(call_id.to_owned()),
                message,
            });
        }
    }
}
