//! Conversions from toolwright's results and errors to MCP's.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;
use toolwright_core::{ContentPart, ModelOutput};
use toolwright_runtime::{CallResult, RuntimeError};

use crate::McpServer;

impl McpServer {
    /// A toolwright result as an MCP `CallToolResult`.
    pub(crate) fn to_mcp(&self, result: &CallResult) -> CallToolResult {
        let content = content_of(&result.model);
        if result.is_error {
            return CallToolResult::error(content);
        }
        let listing = self.listing();
        let has_output_schema = listing
            .tool(&result.tool)
            .is_some_and(|tool| tool.output_schema.is_some());
        let mut mcp = CallToolResult::success(content);
        if has_output_schema && result.output.is_object() {
            mcp.structured_content = Some(result.output.clone());
        }
        mcp
    }
}

pub(crate) fn internal(error: RuntimeError) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}

pub(crate) fn first(results: Vec<CallResult>, call_id: &str) -> Result<CallResult, ErrorData> {
    results
        .into_iter()
        .find(|r| r.call_id == call_id)
        .ok_or_else(|| ErrorData::internal_error("the step returned no result for the call", None))
}

fn content_of(model: &ModelOutput) -> Vec<ContentBlock> {
    match model {
        ModelOutput::Text(text) => vec![ContentBlock::text(text.clone())],
        // A string is its text, not a quoted JSON string.
        ModelOutput::Json(Value::String(text)) => vec![ContentBlock::text(text.clone())],
        ModelOutput::Json(value) => vec![ContentBlock::text(value.to_string())],
        ModelOutput::Content(parts) => parts
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => ContentBlock::text(text.clone()),
                ContentPart::File { data, media_type } if media_type.starts_with("image/") => {
                    ContentBlock::image(data.clone(), media_type.clone())
                }
                ContentPart::File { media_type, .. } => {
                    ContentBlock::text(format!("[a {media_type} file]"))
                }
            })
            .collect(),
    }
}
