//! A model provider on the loopback interface: a script of [`Reply`]s answered one per request
//! in the wire format of one of the HTTP adapters, for tests and benchmarks of the adapters and
//! of code built on them (the same script that drives a [`ScriptedModel`](crate::ScriptedModel)
//! drives an adapter over real HTTP and SSE).
//!
//! Each wire's module names the documentation its events follow: [`chat`] OpenAI's Chat
//! Completions, [`responses`] OpenAI's Responses API, [`anthropic`] Anthropic's Messages API.

mod anthropic;
mod chat;
mod responses;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use futures_util::stream;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::message::AssistantMessage;
use crate::model::ModelError;
use crate::scripted::Reply;

/// The wire format a [`LoopbackProvider`] answers in: one per HTTP adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Wire {
    /// OpenAI's Chat Completions, `POST /v1/chat/completions`, as
    /// [`ChatCompletions`](crate::ChatCompletions) speaks it: `data:` chunks, tool-call
    /// arguments split across chunks, the usage chunk when `stream_options.include_usage` asks
    /// for it, then `data: [DONE]`.
    ChatCompletions,
    /// OpenAI's Responses API, `POST /v1/responses`, as [`Responses`](crate::Responses) speaks
    /// it: typed events from `response.created` to `response.completed` (with the usage),
    /// function-call arguments in `response.function_call_arguments.delta` events.
    Responses,
    /// Anthropic's Messages API, `POST /v1/messages`, as [`Anthropic`](crate::Anthropic)
    /// speaks it: `message_start`, content blocks (`text_delta`, `input_json_delta`),
    /// `message_delta` with the stop reason and usage, `message_stop`.
    Anthropic,
}

impl Wire {
    /// Every wire, in the order above.
    pub const ALL: [Wire; 3] = [Wire::ChatCompletions, Wire::Responses, Wire::Anthropic];

    /// The path requests are answered at.
    pub fn path(self) -> &'static str {
        match self {
            Wire::ChatCompletions => "/v1/chat/completions",
            Wire::Responses => "/v1/responses",
            Wire::Anthropic => "/v1/messages",
        }
    }

    /// What an adapter's `base_url` holds before the path it appends: OpenAI's base URLs end in
    /// `/v1`, Anthropic's is the host alone.
    fn base_path(self) -> &'static str {
        match self {
            Wire::ChatCompletions | Wire::Responses => "/v1",
            Wire::Anthropic => "",
        }
    }
}

impl fmt::Display for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Wire::ChatCompletions => "Chat Completions",
            Wire::Responses => "Responses",
            Wire::Anthropic => "Anthropic Messages",
        })
    }
}

/// A model provider on `127.0.0.1` answering a script of [`Reply`]s, one per request, in the
/// chosen [`Wire`] format, over HTTP with SSE bodies: point an HTTP adapter's `base_url` at
/// [`LoopbackProvider::base_url`] and it runs as it would against the provider.
///
/// - A reply's text, refusal and tool calls stream in small pieces, each call's arguments split
///   across events, with usage (10 tokens in, 5 out, as [`ScriptedModel`](crate::ScriptedModel)
///   reports) and the model named by the request's `model`. Call ids are
///   `call_loopback_<request>_<position>` (`toolu_loopback_...` on [`Wire::Anthropic`]).
/// - [`Reply::fail`] answers with the failure: [`ModelError::Http`] with its status, the
///   wire's error body (its `code`, or a type for the status) and `retry-after` in whole
///   seconds; [`ModelError::Unavailable`] with a `503`; [`ModelError::Provider`] with an error
///   event inside a started stream; [`ModelError::Transport`] with a stream that ends before
///   its last event; [`ModelError::Protocol`] with an event that is not JSON.
/// - A request past the end of the script is refused with a `400` that says so; a request
///   without `"stream": true` is refused with a `400` and does not use a reply.
///
/// It records every request body ([`LoopbackProvider::requests`]) and stops when dropped. It
/// needs a tokio runtime with the I/O driver (`#[tokio::test]` has one).
///
/// ```
/// use toolwright_agent::{ChatCompletions, LoopbackProvider, Reply, Wire, complete, Request, Message};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let provider = LoopbackProvider::start(Wire::ChatCompletions, [Reply::text("Hello!")]).await?;
/// let model = ChatCompletions::new("gpt-4.1").base_url(provider.base_url());
/// let response = complete(&model, Request::new(vec![Message::user("Hi")])).await?;
/// assert_eq!(response.message.text, "Hello!");
/// assert_eq!(provider.requests()[0]["messages"][0]["content"], "Hi");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LoopbackProvider {
    wire: Wire,
    address: SocketAddr,
    shared: Arc<Shared>,
    /// Dropping it stops the server (see [`LoopbackProvider::start`]).
    _stop: oneshot::Sender<()>,
}

#[derive(Debug)]
struct Shared {
    wire: Wire,
    script: Mutex<Script>,
}

#[derive(Debug)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
    /// Streamed requests answered so far: the next one is number `answered + 1`.
    answered: usize,
}

impl LoopbackProvider {
    /// Binds `127.0.0.1` on a free port and serves `script` in the `wire` format until the
    /// provider is dropped. Fails when no port can be bound.
    pub async fn start(
        wire: Wire,
        script: impl IntoIterator<Item = Reply>,
    ) -> std::io::Result<LoopbackProvider> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            wire,
            script: Mutex::new(Script {
                replies: script.into_iter().collect(),
                requests: Vec::new(),
                answered: 0,
            }),
        });
        let app = Router::new()
            .route(wire.path(), post(answer))
            .fallback(elsewhere)
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // The sender is dropped with the provider, which ends `stopped`: the server stops
            // accepting and closes its connections once their answers are sent.
            let shutdown = async {
                let _ = stopped.await;
            };
            // Each event is a write of its own, as a provider streams them: without
            // `TCP_NODELAY` the small writes wait for the client's delayed ACKs (tens of ms
            // per answer on loopback).
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await;
        });
        Ok(LoopbackProvider {
            wire,
            address,
            shared,
            _stop: stop,
        })
    }

    /// The wire format it answers in.
    pub fn wire(&self) -> Wire {
        self.wire
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The base URL to give the adapter's `base_url`: `http://127.0.0.1:<port>/v1` for the
    /// OpenAI wires, `http://127.0.0.1:<port>` for Anthropic's.
    pub fn base_url(&self) -> String {
        format!("http://{}{}", self.address, self.wire.base_path())
    }

    /// The request bodies it received, in order (a body that is not JSON as a JSON string).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.clone()
    }

    /// How many replies are left.
    pub fn remaining(&self) -> usize {
        self.shared.lock().replies.len()
    }

    /// Adds `reply` at the end of the script.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().replies.push_back(reply);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Script> {
        // A panic while the lock is held leaves a script that is still consistent.
        self.script.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One answer being written: the request it answers and the reply's message.
struct Answer<'a> {
    /// The request's number among the streamed ones, from 1.
    round: usize,
    /// The request body.
    request: &'a Value,
    /// The model the request named, which the answer names back.
    model: &'a str,
    /// Seconds since the Unix epoch, for the `created` fields.
    created: u64,
    /// What the reply says and calls.
    message: &'a AssistantMessage,
}

/// The token counts every answer reports: those of [`ScriptedModel`](crate::ScriptedModel), so
/// that budgets come out the same on every wire.
const INPUT_TOKENS: u64 = 10;
const OUTPUT_TOKENS: u64 = 5;

/// One server-sent event.
struct Frame {
    event: Option<&'static str>,
    data: String,
}

impl Frame {
    /// A `data:` event without a name (Chat Completions').
    fn data(data: impl Into<String>) -> Frame {
        Frame {
            event: None,
            data: data.into(),
        }
    }

    /// An event named `event` (the Responses API's and Anthropic's name each event after the
    /// `type` its data holds).
    fn named(event: &'static str, data: impl Into<String>) -> Frame {
        Frame {
            event: Some(event),
            data: data.into(),
        }
    }

    fn encode(&self) -> String {
        match self.event {
            Some(event) => format!("event: {event}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// A wire's error object for a failure with `status`: its type for the status, or `code`.
struct Failure<'a> {
    status: u16,
    message: &'a str,
    code: Option<&'a str>,
}

async fn answer(State(shared): State<Arc<Shared>>, body: String) -> Response {
    let wire = shared.wire;
    let request = serde_json::from_str(&body).unwrap_or(Value::String(body));
    let mut script = shared.lock();
    script.requests.push(request.clone());
    if request.get("stream") != Some(&Value::Bool(true)) {
        let message =
            "the loopback provider answers streamed requests only: send `\"stream\": true`";
        return refused(wire, 400, message, None, None);
    }
    script.answered += 1;
    let round = script.answered;
    let Some(reply) = script.replies.pop_front() else {
        let message = format!(
            "the loopback provider has no reply left for request {round}: its script held {}; \
             give it one more `Reply`",
            round - 1
        );
        return refused(wire, 400, &message, Some("script_exhausted"), None);
    };
    drop(script);
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("loopback");
    let answer = Answer {
        round,
        request: &request,
        model,
        created,
        message: reply.message(),
    };
    let frames = match reply.failure() {
        None => match wire {
            Wire::ChatCompletions => chat::reply(&answer),
            Wire::Responses => responses::reply(&answer),
            Wire::Anthropic => anthropic::reply(&answer),
        },
        Some(ModelError::Http {
            status,
            message,
            code,
            retry_after,
        }) => {
            let seconds = retry_after.map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
            return refused(wire, *status, message, code.as_deref(), seconds);
        }
        Some(ModelError::Unavailable(message)) => {
            return refused(wire, 503, message, None, None);
        }
        Some(ModelError::Provider { message, code }) => {
            let failure = Failure {
                status: 500,
                message,
                code: code.as_deref(),
            };
            let mut frames = opening(wire, &answer);
            frames.extend(match wire {
                Wire::ChatCompletions => chat::failed(&failure),
                Wire::Responses => responses::failed(&answer, &failure),
                Wire::Anthropic => anthropic::failed(&failure),
            });
            frames
        }
        Some(ModelError::Transport(_)) => opening(wire, &answer),
        Some(ModelError::Protocol(_)) => {
            let mut frames = opening(wire, &answer);
            let garbled = "{\"type\": not JSON";
            frames.push(match wire {
                Wire::ChatCompletions => Frame::data(garbled),
                Wire::Responses => Frame::named("response.output_text.delta", garbled),
                Wire::Anthropic => Frame::named("content_block_delta", garbled),
            });
            frames
        }
    };
    streamed(frames)
}

/// The first events of a stream, before any content: what a failure inside the stream follows.
fn opening(wire: Wire, answer: &Answer<'_>) -> Vec<Frame> {
    match wire {
        Wire::ChatCompletions => chat::opening(answer),
        Wire::Responses => responses::opening(answer),
        Wire::Anthropic => anthropic::opening(answer),
    }
}

/// A `200` with `frames` as its SSE body, each event its own chunk of the body.
fn streamed(frames: Vec<Frame>) -> Response {
    let chunks = frames
        .into_iter()
        .map(|frame| Ok::<_, Infallible>(frame.encode()));
    let mut response = Response::new(Body::from_stream(stream::iter(chunks)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// An error response with `status` and the wire's error body.
fn refused(
    wire: Wire,
    status: u16,
    message: &str,
    code: Option<&str>,
    retry_after: Option<u64>,
) -> Response {
    let failure = Failure {
        status,
        message,
        code,
    };
    let body = match wire {
        Wire::ChatCompletions | Wire::Responses => chat::error_body(&failure),
        Wire::Anthropic => anthropic::error_body(&failure),
    };
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(seconds) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// Any other path or method: a `404` saying where the wire is served.
async fn elsewhere(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let wire = shared.wire;
    let message = format!(
        "the loopback provider speaks {wire} at `POST {}`, not `{method} {uri}`: give the \
         adapter the provider's `base_url()`",
        wire.path()
    );
    refused(wire, 404, &message, Some("not_found"), None)
}

#[cfg(test)]
mod tests;
