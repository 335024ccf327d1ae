//! A [`Model`] as the backend of the model handle tools use (`ctx.model()`), so that the
//! agent's model also answers the tools it runs.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use toolwright_core::{
    ErrorCode, MessageRole, ModelBackend, ModelReply, ModelRequest, StopReason, ToolError,
};

use tracing::Instrument;

use crate::budget::Budget;
use crate::message::{AssistantMessage, Message};
use crate::model::{FinishReason, Model, ModelError, Request, Settings, complete};
use crate::telemetry;

/// A [`Model`] as tool-core's [`ModelBackend`]: give it to the runtime's builder
/// (`RuntimeBuilder::model`) and `ctx.model()` inside tools asks the same model the
/// [`Agent`](crate::Agent) drives.
///
/// One tool request is one model request without tools: a request that names tools for a
/// scratch session is refused ([`ModelRequest::refuse_tools`]), and a structured result is
/// asked for in the system prompt ([`ModelRequest::system_with_result_instruction`]); the
/// handle checks the answer against the schema.
///
/// ```
/// use std::sync::Arc;
/// use toolwright_agent::{Backend, Reply, ScriptedModel};
/// let model = Arc::new(ScriptedModel::new([Reply::text("three steps")]));
/// let backend = Backend::shared(model.clone());
/// // Runtime::builder(registry).model(backend) ... Agent::shared(runtime, model)
/// # let _ = backend;
/// ```
#[derive(Clone)]
pub struct Backend {
    model: Arc<dyn Model>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").finish_non_exhaustive()
    }
}

impl Backend {
    /// `model` as a backend.
    pub fn new(model: impl Model) -> Self {
        Self::shared(Arc::new(model))
    }

    /// [`Backend::new`] with a model already shared (the agent's).
    pub fn shared(model: Arc<dyn Model>) -> Self {
        Backend { model }
    }
}

impl ModelBackend for Backend {
    fn complete(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
        Box::pin(async move {
            request.refuse_tools(
                "this backend answers in one request; install the agent as the runtime's model \
                 (`Agent::install`) for sessions with tools and subagents",
            )?;
            one_shot(self.model.as_ref(), &request, None).await
        })
    }
}

/// One request to `model` for a tool's `request`, without tools: the reply with what it used
/// (its cost too, when `priced` has a price for the model that answered).
pub(crate) async fn one_shot(
    model: &dyn Model,
    request: &ModelRequest,
    priced: Option<&Budget>,
) -> Result<ModelReply, ToolError> {
    let request = to_request(request);
    // Inside the runtime's span of the tool call that asked.
    let span = telemetry::request_span(model, &request);
    let answer = complete(model, request).instrument(span.clone()).await;
    match &answer {
        Ok(response) => telemetry::record_response(&span, response),
        Err(error) => telemetry::record_error(&span, error),
    }
    let response = answer.map_err(to_tool_error)?;
    let message = response.message;
    if let Some(refusal) = message.refusal.filter(|_| message.text.is_empty()) {
        return Err(ToolError::with_code(
            ErrorCode::ToolFailed,
            format!("the model refused: {refusal}"),
        ));
    }
    let usage = response.usage.unwrap_or_default();
    let cost = priced
        .and_then(|budget| budget.price_of(&response.model))
        .map_or(0.0, |price| price.cost(&usage));
    let reply = ModelReply::new(response.model, message.text).usage(usage.spent(1, 0, cost));
    Ok(reply.stop_reason(stop_reason(response.finish_reason)))
}

/// The loop's request for a tool's: its messages, system prompt and settings, no tools.
fn to_request(request: &ModelRequest) -> Request {
    let messages = request
        .messages
        .iter()
        .map(|m| match m.role {
            MessageRole::User => Message::user(m.text.clone()),
            MessageRole::Assistant => Message::Assistant(AssistantMessage::text(m.text.clone())),
        })
        .collect();
    let mut settings = Settings::new().max_output_tokens(request.max_tokens);
    settings.temperature = request.temperature;
    settings.stop = request.stop.clone();
    Request {
        instructions: request.system_with_result_instruction(),
        settings,
        ..Request::new(messages)
    }
}

fn stop_reason(reason: FinishReason) -> StopReason {
    match reason {
        FinishReason::Stop => StopReason::EndTurn,
        FinishReason::Length => StopReason::MaxTokens,
        FinishReason::ToolCalls => StopReason::ToolUse,
        FinishReason::ContentFilter => StopReason::Other("content_filter".into()),
        FinishReason::Other(other) => StopReason::Other(other),
    }
}

/// A provider that cannot be reached or answers with an error is unavailable to the tool; an
/// answer that cannot be read is a failure.
pub(crate) fn to_tool_error(error: ModelError) -> ToolError {
    let code = match error {
        ModelError::Protocol(_) => ErrorCode::ToolFailed,
        _ => ErrorCode::Unavailable,
    };
    ToolError::with_code(code, error.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolwright_core::ModelMessage;

    use super::*;
    use crate::scripted::{Reply, ScriptedModel};

    #[tokio::test]
    async fn a_tools_request_becomes_one_model_request_without_tools() {
        let model = ScriptedModel::new([Reply::text("{\"steps\": 3}")]);
        let backend = Backend::new(model.clone());
        let mut request = ModelRequest::conversation(vec![
            ModelMessage::user("plan it"),
            ModelMessage::assistant("how many steps?"),
            ModelMessage::user("as few as you can"),
        ]);
        request.system = Some("You plan releases.".into());
        request.max_tokens = 200;
        request.temperature = Some(0.2);
        request.result_schema = Some(json!({ "type": "object" }));
        let reply = backend.complete(request).await.unwrap();
        assert_eq!(reply.text, "{\"steps\": 3}");
        assert_eq!(reply.stop_reason, Some(StopReason::EndTurn));

        let sent = &model.requests()[0];
        assert_eq!(sent.messages.len(), 3);
        assert_eq!(sent.messages[2], Message::user("as few as you can"));
        assert_eq!(
            sent.messages[1],
            Message::Assistant(AssistantMessage::text("how many steps?"))
        );
        let instructions = sent.instructions.as_deref().unwrap();
        assert!(instructions.starts_with("You plan releases."));
        assert!(instructions.contains("JSON Schema"), "{instructions}");
        assert_eq!(sent.settings.max_output_tokens, Some(200));
        assert_eq!(sent.settings.temperature, Some(0.2));
        assert!(sent.tools.is_empty());
    }

    #[tokio::test]
    async fn tools_and_failures_are_tool_errors() {
        let model = ScriptedModel::new([Reply::fail(ModelError::Transport("refused".into()))]);
        let backend = Backend::new(model.clone());
        let mut with_tools = ModelRequest::new("go");
        with_tools.tools = vec!["search".into()];
        assert!(backend.complete(with_tools).await.is_err());
        assert!(model.requests().is_empty(), "refused before any request");

        let error = backend.complete(ModelRequest::new("go")).await.unwrap_err();
        assert_eq!(error.code(), ErrorCode::Unavailable, "{error:?}");
    }
}
