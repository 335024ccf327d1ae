//! A deterministic model for tests: it answers each request with the next reply of a script,
//! streamed the way a provider streams it (text and arguments in small pieces), and keeps the
//! requests it was sent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use futures_util::stream;
use toolwright_core::Format;

use crate::message::{AssistantMessage, ToolUse, Usage};
use crate::model::{Model, ModelError, Request, Response, ResponseStream, StreamEvent};

/// How many bytes of text or arguments each delta carries: small enough that every reply is
/// split, as a provider splits it.
const PIECE: usize = 7;

/// A model that answers from a script.
///
/// ```
/// use toolwright_agent::{Reply, ScriptedModel};
///
/// let model = ScriptedModel::new([
///     Reply::call("restart_service", serde_json::json!({ "service": "api" })),
///     Reply::text("Restarted."),
/// ]);
/// assert_eq!(model.remaining(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    inner: Arc<Mutex<Script>>,
    format: Format,
}

#[derive(Debug, Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Request>,
    calls: usize,
}

impl ScriptedModel {
    /// A model answering with `replies`, one per request, in order; a request past the end fails
    /// with [`ModelError::Unavailable`]. Its tools are in [`Format::OpenAiStrict`].
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        ScriptedModel {
            inner: Arc::new(Mutex::new(Script {
                replies: replies.into_iter().collect(),
                ..Script::default()
            })),
            format: Format::OpenAiStrict,
        }
    }

    /// `self` taking its tools in `format`.
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// The requests it was sent, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// How many replies are left.
    pub fn remaining(&self) -> usize {
        self.lock().replies.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        // A panic while the lock is held leaves a script that is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Model for ScriptedModel {
    fn tool_format(&self) -> Format {
        self.format
    }

    fn provider(&self) -> &str {
        "scripted"
    }

    fn model_name(&self) -> &str {
        "scripted"
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        let mut script = self.lock();
        script.requests.push(request);
        let next = script.replies.pop_front();
        let round = script.calls;
        script.calls += 1;
        drop(script);
        Box::pin(async move {
            let reply = next.ok_or_else(|| {
                ModelError::Unavailable(format!(
                    "the scripted model has no reply left for request {}",
                    round + 1
                ))
            })?;
            let events = reply.events(round);
            Ok(Box::pin(stream::iter(events)) as ResponseStream)
        })
    }
}

/// One scripted answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    message: AssistantMessage,
    failure: Option<ModelError>,
}

impl Reply {
    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Reply {
            message: AssistantMessage::text(text),
            failure: None,
        }
    }

    /// A call of `name` with `arguments`.
    pub fn call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Reply {
            message: AssistantMessage::default(),
            failure: None,
        }
        .and_call(name, arguments)
    }

    /// A refusal.
    pub fn refusal(text: impl Into<String>) -> Self {
        Reply {
            message: AssistantMessage {
                refusal: Some(text.into()),
                ..AssistantMessage::default()
            },
            failure: None,
        }
    }

    /// A request that fails with `error`.
    pub fn fail(error: ModelError) -> Self {
        Reply {
            message: AssistantMessage::default(),
            failure: Some(error),
        }
    }

    /// `self` with one more call (calls in one reply form one step, run concurrently). Call
    /// ids are `call_<round>_<position>`, from 1.
    pub fn and_call(mut self, name: impl Into<String>, arguments: serde_json::Value) -> Self {
        self.message
            .tool_calls
            .push(ToolUse::new(String::new(), name, arguments.to_string()));
        self
    }

    /// `self` with text before its calls.
    pub fn saying(mut self, text: impl Into<String>) -> Self {
        self.message.text = text.into();
        self
    }

    /// What the reply says and calls (empty for a failure).
    #[cfg(feature = "loopback")]
    pub(crate) fn message(&self) -> &AssistantMessage {
        &self.message
    }

    /// The error the request fails with, for a [`Reply::fail`].
    #[cfg(feature = "loopback")]
    pub(crate) fn failure(&self) -> Option<&ModelError> {
        self.failure.as_ref()
    }

    fn events(self, round: usize) -> Vec<Result<StreamEvent, ModelError>> {
        if let Some(error) = self.failure {
            return vec![Err(error)];
        }
        let mut message = self.message;
        for (position, call) in message.tool_calls.iter_mut().enumerate() {
            call.call_id = format!("call_{}_{}", round + 1, position + 1);
        }
        let mut events: Vec<_> = pieces(&message.text)
            .map(|p| Ok(StreamEvent::TextDelta(p.to_owned())))
            .collect();
        if let Some(refusal) = &message.refusal {
            events.extend(pieces(refusal).map(|p| Ok(StreamEvent::RefusalDelta(p.to_owned()))));
        }
        for (index, call) in message.tool_calls.iter().enumerate() {
            events.push(Ok(StreamEvent::ToolCallStart {
                index,
                call_id: call.call_id.clone(),
                name: call.name.clone(),
            }));
            events.extend(pieces(&call.arguments).map(|p| {
                Ok(StreamEvent::ToolCallDelta {
                    index,
                    arguments: p.to_owned(),
                })
            }));
            events.push(Ok(StreamEvent::ToolCallDone(call.clone())));
        }
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        };
        events.push(Ok(StreamEvent::Usage(usage)));
        let mut response = Response::new(message);
        response.usage = Some(usage);
        response.model = "scripted".into();
        response.id = format!("scripted-{}", round + 1);
        events.push(Ok(StreamEvent::Completed(response)));
        events
    }
}

/// `text` in pieces of at most [`PIECE`] bytes, cut at character boundaries.
pub(crate) fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = PIECE.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::complete;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn a_reply_streams_in_pieces_and_completes_with_the_whole_message() {
        let model = ScriptedModel::new([
            Reply::call(
                "get_service_status",
                serde_json::json!({ "service": "api" }),
            )
            .and_call("read_logs", serde_json::json!({ "service": "api" })),
            Reply::text("All good — 两 services."),
        ]);
        let mut stream = model.stream(Request::default()).await.unwrap();
        let mut arguments = String::new();
        let mut done = Vec::new();
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                StreamEvent::ToolCallDelta {
                    index: 0,
                    arguments: a,
                } => arguments.push_str(&a),
                StreamEvent::ToolCallDone(call) => done.push(call),
                _ => {}
            }
        }
        assert_eq!(arguments, r#"{"service":"api"}"#);
        assert_eq!(done[1].call_id, "call_1_2");
        let second = complete(&model, Request::default()).await.unwrap();
        assert_eq!(second.message.text, "All good — 两 services.");
        assert_eq!(model.requests().len(), 2);
        let third = complete(&model, Request::default()).await.unwrap_err();
        assert!(matches!(third, ModelError::Unavailable(_)), "{third:?}");
    }
}
