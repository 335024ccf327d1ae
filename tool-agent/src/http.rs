//! What the HTTP adapters share: refused requests as [`ModelError`]s, SSE bodies as
//! [`ResponseStream`]s through a provider's [`Decode`], and the TLS provider.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt, stream};
use serde::Deserialize;
use serde_json::Value;
use sse_stream::SseStream;

use crate::model::{ModelError, ResponseStream, StreamEvent};

/// A provider's SSE events into [`StreamEvent`]s.
pub(crate) trait Decode: Send + 'static {
    /// The events of one SSE event (its `event:` name, when it has one, and its `data:`);
    /// `Ok(true)` when it ends the response (Chat Completions' `[DONE]`, Anthropic's
    /// `message_stop`, Responses' `response.completed`).
    fn push(
        &mut self,
        event: Option<&str>,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError>;

    /// The last events once the body ended: `done` when an event said the response ended,
    /// else the connection closed first and the response broke off. A decoder never returns
    /// a tool call whose arguments may be cut short.
    fn finish(self, done: bool) -> Result<Vec<StreamEvent>, ModelError>;
}

/// The most bytes of an SSE body read. A model's longest answers take a few tens of megabytes
/// of events; a server that never ends an event, or never ends its body, fails the response
/// here instead of filling the memory (the idle timeout cannot tell: bytes keep coming).
const MAX_STREAM_BYTES: usize = 256 << 20;

/// The most bytes of an error body read (a JSON error object): the rest is left unread.
const MAX_ERROR_BYTES: usize = 64 << 10;

/// The events of the SSE body of `response`, decoded by `decoder`.
pub(crate) fn events<D: Decode>(response: reqwest::Response, decoder: D) -> ResponseStream {
    let body = capped(response.bytes_stream(), MAX_STREAM_BYTES);
    decode(SseStream::from_bytes_stream(body), decoder)
}

/// `body`'s chunks until more than `limit` bytes came, then an error.
fn capped<S, B, E>(body: S, limit: usize) -> impl futures_util::Stream<Item = std::io::Result<B>>
where
    S: futures_util::Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut seen = 0_usize;
    body.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        seen = seen.saturating_add(chunk.as_ref().len());
        if seen > limit {
            return Err(std::io::Error::other(format!(
                "the body passed {limit} bytes, more than any model's answer takes: the server \
                 at the base URL does not answer as the provider's API does"
            )));
        }
        Ok(chunk)
    })
}

fn decode<S, D>(sse: S, decoder: D) -> ResponseStream
where
    S: futures_util::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send + 'static,
    D: Decode,
{
    struct State<S, D> {
        sse: std::pin::Pin<Box<S>>,
        decoder: Option<D>,
        queue: VecDeque<Result<StreamEvent, ModelError>>,
    }
    let state = State {
        sse: Box::pin(sse),
        decoder: Some(decoder),
        queue: VecDeque::new(),
    };
    let stream = stream::unfold(state, |mut state| async move {
        loop {
            if let Some(next) = state.queue.pop_front() {
                if next.is_err() {
                    state.decoder = None;
                    state.queue.clear();
                }
                return Some((next, state));
            }
            let decoder = state.decoder.as_mut()?;
            let done = match state.sse.next().await {
                None => false,
                Some(Err(error)) => {
                    state.decoder = None;
                    let error = ModelError::Transport(format!("the response broke off: {error}"));
                    return Some((Err(error), state));
                }
                Some(Ok(sse)) => {
                    let Some(data) = sse.data else { continue };
                    let mut out = Vec::new();
                    let pushed = decoder.push(sse.event.as_deref(), &data, &mut out);
                    state.queue.extend(out.into_iter().map(Ok));
                    match pushed {
                        Ok(false) => continue,
                        Ok(true) => true,
                        Err(error) => {
                            state.queue.push_back(Err(error));
                            continue;
                        }
                    }
                }
            };
            let decoder = state.decoder.take()?;
            match decoder.finish(done) {
                Ok(events) => state.queue.extend(events.into_iter().map(Ok)),
                Err(error) => state.queue.push_back(Err(error)),
            }
        }
    });
    Box::pin(stream)
}

/// Sends `http` (a POST with the adapter's URL and authentication) with the JSON `body`
/// asking for an SSE answer, `headers` the host added last; a refused request is its
/// [`http_error`].
pub(crate) async fn post_sse(
    http: reqwest::RequestBuilder,
    headers: &[(String, String)],
    body: String,
) -> Result<reqwest::Response, ModelError> {
    let mut http = http
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body);
    for (name, value) in headers {
        http = http.header(name, value);
    }
    let response = http
        .send()
        .await
        .map_err(|e| ModelError::Transport(e.to_string()))?;
    if response.status().is_success() {
        Ok(response)
    } else {
        Err(http_error(response).await)
    }
}

/// The error of a refused request: the message and code of the documented error body
/// (`{"error": {"message", "type", "code"}}`, which OpenAI's and Anthropic's APIs share), else
/// the body's text; `Retry-After` in seconds or as an HTTP date.
async fn http_error(response: reqwest::Response) -> ModelError {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(retry_after);
    let text = error_text(response.bytes_stream()).await;
    let (message, code) = match serde_json::from_str::<ErrorBody>(&text) {
        Ok(body) => (body.error.message.clone(), body.error.code()),
        Err(_) => (text.trim().to_owned(), None),
    };
    ModelError::Http {
        status,
        message,
        code,
        retry_after,
    }
}

/// The first [`MAX_ERROR_BYTES`] of an error body, as text (what breaks off is lost).
async fn error_text<S, B, E>(body: S) -> String
where
    S: futures_util::Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    let mut body = std::pin::pin!(body);
    let mut text = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        let chunk = chunk.as_ref();
        let room = MAX_ERROR_BYTES - text.len();
        text.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if text.len() == MAX_ERROR_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// A `Retry-After` value: seconds (fractions accepted) or an HTTP date.
pub(crate) fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        // A wait too long for a `Duration` is as good as forever: no retry policy waits it.
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The error object of an error response or event (`{"error": {...}}`).
#[derive(Deserialize)]
pub(crate) struct ErrorBody {
    pub(crate) error: WireError,
}

/// An error as OpenAI's and Anthropic's APIs describe one.
#[derive(Deserialize)]
pub(crate) struct WireError {
    #[serde(default)]
    pub(crate) message: String,
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) code: Option<Value>,
}

impl WireError {
    /// The error's code, else its type.
    pub(crate) fn code(&self) -> Option<String> {
        match &self.code {
            Some(Value::String(code)) => Some(code.clone()),
            Some(Value::Number(code)) => Some(code.to_string()),
            _ => self.kind.clone(),
        }
    }
}

/// Environment variable `name`, unless it is unset or blank (an empty key is a missing one).
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// reqwest's rustls without a provider needs one installed: ring, unless the application
/// installed another first.
pub(crate) fn install_crypto_provider() {
    #[cfg(feature = "tls")]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(retry_after("-1"), None);
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon"), None);
    }

    /// A decoder that keeps the `data:` of every event.
    #[derive(Default)]
    struct Keep(Vec<String>);

    impl Decode for Keep {
        fn push(
            &mut self,
            _event: Option<&str>,
            data: &str,
            _out: &mut Vec<StreamEvent>,
        ) -> Result<bool, ModelError> {
            self.0.push(data.to_owned());
            Ok(false)
        }

        fn finish(self, _done: bool) -> Result<Vec<StreamEvent>, ModelError> {
            Ok(vec![StreamEvent::TextDelta(self.0.join("|"))])
        }
    }

    fn chunks(
        parts: &[&'static str],
    ) -> impl futures_util::Stream<Item = Result<&'static [u8], std::io::Error>> + Send + 'static
    {
        stream::iter(parts.iter().map(|p| Ok(p.as_bytes())).collect::<Vec<_>>())
    }

    #[tokio::test]
    async fn a_body_within_its_limit_is_read_whole() {
        // 18 bytes, the limit: read whole.
        let body = capped(chunks(&["data: a\n\n", "data: b\n\n"]), 18);
        let events: Vec<_> = decode(SseStream::from_bytes_stream(body), Keep::default())
            .collect()
            .await;
        assert!(
            matches!(&events[..], [Ok(StreamEvent::TextDelta(t))] if t == "a|b"),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn a_body_past_its_limit_breaks_off_at_it() {
        // An event that never ends: one line, chunk after chunk.
        let endless = stream::repeat_with(|| Ok::<_, std::io::Error>(b"xxxxxxxx".as_slice()));
        let body = capped(
            stream::once(async { Ok(b"data: ".as_slice()) }).chain(endless),
            1024,
        );
        let events: Vec<_> = decode(SseStream::from_bytes_stream(body), Keep::default())
            .collect()
            .await;
        let [Err(ModelError::Transport(message))] = &events[..] else {
            panic!("one error: {events:?}");
        };
        assert!(message.contains("passed 1024 bytes"), "{message}");
    }

    #[tokio::test]
    async fn an_error_body_is_read_up_to_its_limit() {
        let body = stream::repeat_with(|| Ok::<_, std::io::Error>(b"0123456789".as_slice()));
        let text = error_text(body).await;
        assert_eq!(text.len(), MAX_ERROR_BYTES);
        assert_eq!(
            error_text(chunks(&["{\"error\"", ": 1}"])).await,
            "{\"error\": 1}"
        );
    }

    #[test]
    fn a_retry_after_too_long_for_a_duration_is_the_longest_wait() {
        assert_eq!(retry_after("1e20"), Some(Duration::MAX));
        assert_eq!(retry_after("inf"), None);
        assert_eq!(retry_after("NaN"), None);
    }
}
