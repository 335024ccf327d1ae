//! Retries where they belong: a request the provider refused for now (429, 5xx, overloaded),
//! could not be reached for, or whose answer broke off or stalled, is sent again with backoff
//! and jitter, honouring `Retry-After`. Only a completed response is ever acted on, so a call
//! cut off mid-stream never runs: the whole request is sent again.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{StreamExt, stream};
use toolwright_core::Format;

use crate::model::{Model, ModelError, Request, ResponseStream, StreamEvent};

/// When and how often a model request is sent again.
///
/// The default: 3 attempts in all; backoff from 500 ms doubling to at most 20 s, with jitter
/// (each wait is between half and all of the backoff); a `Retry-After` up to 60 s is waited
/// exactly (a longer one fails the request, for the host to decide); a stream silent for
/// 120 s counts as broken off.
///
/// ```
/// use std::time::Duration;
/// use toolwright_agent::RetryPolicy;
///
/// let patient = RetryPolicy::default()
///     .attempts(6)
///     .backoff(Duration::from_secs(1), Duration::from_secs(60));
/// let never = RetryPolicy::none();
/// # let _ = (patient, never);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    attempts: u32,
    initial: Duration,
    max: Duration,
    max_retry_after: Duration,
    idle_timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
            idle_timeout: Some(Duration::from_secs(120)),
        }
    }
}

impl RetryPolicy {
    /// One attempt: nothing is retried (a stall still fails after the idle timeout).
    pub fn none() -> Self {
        RetryPolicy::default().attempts(1)
    }

    /// `self` making up to `attempts` attempts in all (at least one).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// `self` waiting `initial` before the second attempt, doubling up to `max`.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial = initial;
        self.max = max.max(initial);
        self
    }

    /// `self` waiting a provider's `Retry-After` up to `limit`; a longer wait fails the
    /// request at once.
    pub fn max_retry_after(mut self, limit: Duration) -> Self {
        self.max_retry_after = limit;
        self
    }

    /// `self` failing an attempt (and retrying it) when the answer is silent for `timeout`
    /// (`None`: wait as long as the connection lasts).
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How long to wait after failed attempt `attempt` (from 1) with `error`, or `None` when
    /// it is not retried.
    pub fn delay(&self, attempt: u32, error: &ModelError) -> Option<Duration> {
        if attempt >= self.attempts || !retryable(error) {
            return None;
        }
        if let ModelError::Http {
            retry_after: Some(wait),
            ..
        } = error
        {
            return (*wait <= self.max_retry_after).then_some(*wait);
        }
        let doubled = self
            .initial
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        let backoff = doubled.min(self.max);
        // Equal jitter: between half and all of the backoff, so retries of many clients
        // spread out but never come at once.
        Some(backoff.mul_f64(0.5 + fastrand::f64() * 0.5))
    }
}

/// Whether `error` may pass if the request is sent again.
fn retryable(error: &ModelError) -> bool {
    match error {
        // 408 timeout, 409 conflict (OpenAI's "try again"), 429 rate limit, 5xx, 529
        // Anthropic's overloaded.
        ModelError::Http { status, .. } => matches!(status, 408 | 409 | 429) || *status >= 500,
        ModelError::Transport(_) => true,
        // Errors inside a stream: retried when the provider names them transient.
        ModelError::Provider { code, .. } => code.as_deref().is_some_and(|code| {
            matches!(
                code,
                "overloaded_error"
                    | "rate_limit_error"
                    | "rate_limit_exceeded"
                    | "too_many_requests"
                    | "api_error"
                    | "server_error"
                    | "internal_error"
                    | "timeout"
            )
        }),
        ModelError::Protocol(_) | ModelError::Unavailable(_) => false,
    }
}

/// A model whose requests are retried per a [`RetryPolicy`]: the [`Agent`](crate::Agent)
/// wraps its model in one. Between attempts the stream carries
/// [`StreamEvent::Retrying`]: a user interface drops what the failed attempt showed.
#[derive(Clone)]
pub struct Retrying {
    inner: Arc<dyn Model>,
    policy: RetryPolicy,
}

impl std::fmt::Debug for Retrying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retrying")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Retrying {
    /// `inner` retried per `policy`.
    pub fn new(inner: Arc<dyn Model>, policy: RetryPolicy) -> Self {
        Retrying { inner, policy }
    }

    /// The model it retries.
    pub fn inner(&self) -> &Arc<dyn Model> {
        &self.inner
    }
}

/// Where a retried request is.
struct Attempts {
    inner: Arc<dyn Model>,
    policy: RetryPolicy,
    request: Request,
    attempt: u32,
    current: Option<ResponseStream>,
    /// The wait before the next attempt, announced already.
    wait: Option<Duration>,
    finished: bool,
}

impl Attempts {
    /// The next item: an event of the current attempt, a [`StreamEvent::Retrying`] after a
    /// failed one (once its wait is over), or the error that ends the request.
    async fn next(&mut self) -> Option<Result<StreamEvent, ModelError>> {
        if self.finished {
            return None;
        }
        if let Some(wait) = self.wait.take() {
            tokio::time::sleep(wait).await;
        }
        let failure = match self.current.as_mut() {
            None => match start(
                Arc::clone(&self.inner),
                self.request.clone(),
                self.policy.idle_timeout,
            )
            .await
            {
                Ok(stream) => {
                    self.current = Some(stream);
                    return Box::pin(self.next()).await;
                }
                Err(error) => error,
            },
            Some(stream) => match next_event(self.policy.idle_timeout, stream).await {
                Ok(StreamEvent::Completed(response)) => {
                    self.finished = true;
                    return Some(Ok(StreamEvent::Completed(response)));
                }
                Ok(event) => return Some(Ok(event)),
                Err(error) => error,
            },
        };
        self.current = None;
        let Some(delay) = self.policy.delay(self.attempt, &failure) else {
            self.finished = true;
            return Some(Err(failure));
        };
        tracing::warn!(
            attempt = self.attempt,
            delay_ms = delay.as_millis() as u64,
            error = %failure,
            "model request failed; retrying"
        );
        // Announced before the wait, which may be a provider's long `Retry-After`.
        self.wait = Some(delay);
        self.attempt += 1;
        Some(Ok(StreamEvent::Retrying {
            attempt: self.attempt,
            delay,
            error: failure,
        }))
    }
}

/// Sends `request` to `inner`; a provider that does not answer within `idle_timeout` failed.
async fn start(
    inner: Arc<dyn Model>,
    request: Request,
    idle_timeout: Option<Duration>,
) -> Result<ResponseStream, ModelError> {
    let sent = inner.stream(request);
    match idle_timeout {
        Some(limit) => tokio::time::timeout(limit, sent).await.map_err(|_| {
            ModelError::Transport(format!(
                "the provider did not answer the request for {} s",
                limit.as_secs_f64()
            ))
        })?,
        None => sent.await,
    }
}

/// The next event of `stream`; its end before completing, or a stall of `idle_timeout`, is an
/// error.
async fn next_event(
    idle_timeout: Option<Duration>,
    stream: &mut ResponseStream,
) -> Result<StreamEvent, ModelError> {
    let next = match idle_timeout {
        Some(limit) => tokio::time::timeout(limit, stream.next())
            .await
            .map_err(|_| {
                ModelError::Transport(format!(
                    "the answer stalled: nothing arrived for {} s",
                    limit.as_secs_f64()
                ))
            })?,
        None => stream.next().await,
    };
    next.unwrap_or_else(|| {
        Err(ModelError::Transport(
            "the response ended before it completed".into(),
        ))
    })
}

impl Model for Retrying {
    fn tool_format(&self) -> Format {
        self.inner.tool_format()
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        let attempts = Attempts {
            inner: Arc::clone(&self.inner),
            policy: self.policy.clone(),
            request,
            attempt: 1,
            current: None,
            wait: None,
            finished: false,
        };
        let events = stream::unfold(attempts, |mut attempts| async move {
            let next = attempts.next().await?;
            Some((next, attempts))
        });
        Box::pin(std::future::ready(Ok(Box::pin(events) as ResponseStream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::complete;
    use crate::scripted::{Reply, ScriptedModel};

    fn fast() -> RetryPolicy {
        RetryPolicy::default().backoff(Duration::from_millis(1), Duration::from_millis(2))
    }

    fn rate_limited(retry_after: Option<Duration>) -> ModelError {
        ModelError::Http {
            status: 429,
            message: "slow down".into(),
            code: Some("rate_limit_exceeded".into()),
            retry_after,
        }
    }

    #[test]
    fn backoff_doubles_within_its_jitter_and_retry_after_is_waited_exactly() {
        let policy = RetryPolicy::default()
            .attempts(5)
            .backoff(Duration::from_millis(100), Duration::from_millis(300));
        let error = ModelError::Transport("reset".into());
        for (attempt, full) in [(1, 100), (2, 200), (3, 300), (4, 300)] {
            let delay = policy.delay(attempt, &error).unwrap();
            assert!(
                delay >= Duration::from_millis(full / 2) && delay <= Duration::from_millis(full),
                "attempt {attempt}: {delay:?}"
            );
        }
        assert_eq!(
            policy.delay(5, &error),
            None,
            "the last attempt is the last"
        );
        let asked = rate_limited(Some(Duration::from_secs(7)));
        assert_eq!(policy.delay(1, &asked), Some(Duration::from_secs(7)));
        let too_long = rate_limited(Some(Duration::from_secs(3600)));
        assert_eq!(
            policy.delay(1, &too_long),
            None,
            "a long wait is the host's call"
        );
    }

    #[test]
    fn only_transient_errors_are_retried() {
        let policy = RetryPolicy::default();
        let http = |status| ModelError::Http {
            status,
            message: String::new(),
            code: None,
            retry_after: None,
        };
        for status in [408, 429, 500, 502, 503, 504, 529] {
            assert!(policy.delay(1, &http(status)).is_some(), "{status}");
        }
        for status in [400, 401, 403, 404, 422] {
            assert!(policy.delay(1, &http(status)).is_none(), "{status}");
        }
        let overloaded = ModelError::Provider {
            message: "Overloaded".into(),
            code: Some("overloaded_error".into()),
        };
        assert!(policy.delay(1, &overloaded).is_some());
        let refused = ModelError::Provider {
            message: "bad request".into(),
            code: Some("invalid_request_error".into()),
        };
        assert!(policy.delay(1, &refused).is_none());
        assert!(
            policy
                .delay(1, &ModelError::Protocol("junk".into()))
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_rate_limited_request_is_sent_again_and_its_retry_is_announced() {
        let script = ScriptedModel::new([
            Reply::fail(rate_limited(Some(Duration::from_millis(1)))),
            Reply::fail(ModelError::Transport("connection reset".into())),
            Reply::text("hello"),
        ]);
        let model = Retrying::new(Arc::new(script.clone()), fast());
        let mut stream = model.stream(Request::default()).await.unwrap();
        let mut retries = Vec::new();
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                StreamEvent::Retrying { attempt, .. } => retries.push(attempt),
                StreamEvent::TextDelta(delta) => text.push_str(&delta),
                _ => {}
            }
        }
        assert_eq!(retries, [2, 3]);
        assert_eq!(text, "hello");
        assert_eq!(script.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_refused_request_fails_at_once_and_the_last_failure_is_returned() {
        let unauthorized = ModelError::Http {
            status: 401,
            message: "bad key".into(),
            code: Some("invalid_api_key".into()),
            retry_after: None,
        };
        let script = ScriptedModel::new([Reply::fail(unauthorized.clone())]);
        let model = Retrying::new(Arc::new(script.clone()), fast());
        assert_eq!(
            complete(&model, Request::default()).await.unwrap_err(),
            unauthorized
        );
        assert_eq!(script.requests().len(), 1);

        let busy = ModelError::Transport("reset".into());
        let script = ScriptedModel::new([Reply::fail(busy.clone()), Reply::fail(busy.clone())]);
        let model = Retrying::new(Arc::new(script.clone()), fast().attempts(2));
        assert_eq!(
            complete(&model, Request::default()).await.unwrap_err(),
            busy
        );
        assert_eq!(script.requests().len(), 2);
    }

    /// A provider that takes the request and never answers it, then one that answers.
    struct Silent {
        then: ScriptedModel,
        calls: std::sync::atomic::AtomicUsize,
    }

    impl Model for Silent {
        fn tool_format(&self) -> Format {
            Format::OpenAiStrict
        }

        fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
            if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                return Box::pin(std::future::pending());
            }
            self.then.stream(request)
        }
    }

    #[tokio::test]
    async fn a_provider_that_never_answers_the_request_times_out_and_is_asked_again() {
        let model = Silent {
            then: ScriptedModel::new([Reply::text("late but here")]),
            calls: Default::default(),
        };
        let policy = fast().idle_timeout(Some(Duration::from_millis(20)));
        let model = Retrying::new(Arc::new(model), policy);
        let mut stream = model.stream(Request::default()).await.unwrap();
        let mut retried = None;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                StreamEvent::Retrying { error, .. } => retried = Some(error),
                StreamEvent::TextDelta(delta) => text.push_str(&delta),
                _ => {}
            }
        }
        let Some(ModelError::Transport(why)) = retried else {
            panic!("the silent attempt fails: {retried:?}");
        };
        assert!(why.contains("did not answer"), "{why}");
        assert_eq!(text, "late but here");
    }
}
