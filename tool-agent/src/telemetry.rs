//! The span of each model request, named and shaped after the OpenTelemetry semantic
//! conventions for generative AI client spans (`gen_ai.*`): operation `chat`, the provider
//! and model, the request's settings, the response's id, model and finish reason, and the
//! token usage. A host that exports `tracing` spans to OpenTelemetry
//! (`tracing-opentelemetry`) gets them named `chat {model}` through `otel.name`.

use tracing::Span;
use tracing::field::Empty;

use crate::model::{FinishReason, Model, ModelError, Request, Response};

/// The span of one run of the loop on a turn of session `session_id` (`invoke_agent`); the
/// model requests and the runtime's steps of the run are inside it.
pub(crate) fn agent_span(session_id: &str, turn_id: Option<&str>) -> Span {
    tracing::info_span!(
        "invoke_agent",
        "otel.kind" = "internal",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.conversation.id" = session_id,
        "turn_id" = turn_id,
    )
}

/// The span of one request of `request` to `model`; its response fields are recorded by
/// [`record_response`] or [`record_error`].
pub(crate) fn request_span(model: &dyn Model, request: &Request) -> Span {
    let name = model.model_name();
    tracing::info_span!(
        "chat",
        "otel.name" = %format_args!("chat {name}"),
        "otel.kind" = "client",
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = model.provider(),
        "gen_ai.request.model" = name,
        "gen_ai.request.max_tokens" = request.settings.max_output_tokens,
        "gen_ai.request.temperature" = request.settings.temperature,
        "gen_ai.request.top_p" = request.settings.top_p,
        "gen_ai.response.id" = Empty,
        "gen_ai.response.model" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
        "error.type" = Empty,
    )
}

/// Records what `response` says on `span`.
pub(crate) fn record_response(span: &Span, response: &Response) {
    span.record("gen_ai.response.id", response.id.as_str());
    span.record("gen_ai.response.model", response.model.as_str());
    span.record(
        "gen_ai.response.finish_reasons",
        finish_reason(&response.finish_reason),
    );
    if let Some(usage) = &response.usage {
        span.record("gen_ai.usage.input_tokens", usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        span.record(
            "gen_ai.usage.cache_read.input_tokens",
            usage.cached_input_tokens,
        );
        span.record(
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_write_input_tokens,
        );
    }
}

/// Records the failure of the request on `span`.
pub(crate) fn record_error(span: &Span, error: &ModelError) {
    span.record("error.type", error_kind(error).as_str());
}

/// What kind of failure `error` is, without its message (which may quote the model's or the
/// provider's words): an HTTP status, a provider's error code, `transport`, `protocol`.
pub(crate) fn error_kind(error: &ModelError) -> String {
    match error {
        ModelError::Http { status, .. } => status.to_string(),
        ModelError::Provider { code, .. } => code.clone().unwrap_or_else(|| "provider".into()),
        ModelError::Transport(_) => "transport".into(),
        ModelError::Protocol(_) => "protocol".into(),
        ModelError::Unavailable(_) => "unavailable".into(),
    }
}

/// A finish reason as the conventions spell it.
fn finish_reason(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other,
    }
}
