//! The OpenAI Chat Completions adapter, streaming over SSE; it also speaks to
//! OpenAI-compatible servers (vLLM, llama.cpp's server, Ollama) through
//! [`ChatCompletions::base_url`].

mod decode;
mod render;
mod wire;

use futures_util::future::BoxFuture;
use serde_json::value::RawValue;
use toolwright_core::Format;

use crate::http::{env_var, events, install_crypto_provider, post_sse};
use crate::model::{Model, ModelError, Request, ResponseStream};
use decode::Decoder;
use wire::{ChatRequest, StreamOptions};

/// OpenAI's API, where requests go unless [`ChatCompletions::base_url`] says otherwise.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// A model behind the Chat Completions API (`POST {base_url}/chat/completions` with
/// `stream: true`).
///
/// Tools go out in the registry's strict OpenAI export ([`Format::OpenAiStrict`]); a server that
/// rejects `strict` takes [`Format::OpenAi`] through [`ChatCompletions::tool_format`].
///
/// ```
/// use toolwright_agent::ChatCompletions;
///
/// let local = ChatCompletions::new("llama3.1")
///     .base_url("http://127.0.0.1:11434/v1")
///     .legacy_max_tokens();
/// # let _ = local;
/// ```
#[derive(Clone)]
pub struct ChatCompletions {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
    legacy_max_tokens: bool,
    format: Format,
}

impl std::fmt::Debug for ChatCompletions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("ChatCompletions")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl ChatCompletions {
    /// Model `model` on OpenAI's API, without a key (see [`ChatCompletions::api_key`] and
    /// [`ChatCompletions::from_env`]).
    pub fn new(model: impl Into<String>) -> Self {
        install_crypto_provider();
        ChatCompletions {
            client: reqwest::Client::new(),
            base_url: OPENAI_BASE_URL.to_owned(),
            model: model.into(),
            api_key: None,
            headers: Vec::new(),
            legacy_max_tokens: false,
            format: Format::OpenAiStrict,
        }
    }

    /// Model `model` with the key in `OPENAI_API_KEY` and, when it is set, the server in
    /// `OPENAI_BASE_URL`; fails saying what to set when the key is missing.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        let key = env_var("OPENAI_API_KEY").ok_or_else(|| {
            ModelError::Unavailable(
                "set OPENAI_API_KEY to the API key of the Chat Completions provider".into(),
            )
        })?;
        let mut model = Self::new(model).api_key(key);
        if let Some(url) = env_var("OPENAI_BASE_URL") {
            model = model.base_url(url);
        }
        Ok(model)
    }

    /// `self` sending to `url` (e.g. `http://localhost:8000/v1` for vLLM): the path
    /// `/chat/completions` is appended to it.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// `self` authenticating with `key` (`Authorization: Bearer`).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// `self` sending one more header with each request (e.g. `OpenAI-Organization`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `self` limiting the answer with `max_tokens` instead of `max_completion_tokens`, for
    /// servers that only know the older field.
    pub fn legacy_max_tokens(mut self) -> Self {
        self.legacy_max_tokens = true;
        self
    }

    /// `self` taking its tools in `format` ([`Format::OpenAi`] or [`Format::OpenAiStrict`]).
    pub fn tool_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// `self` on `client` (timeouts, proxies, TLS roots of the application's choosing).
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = client;
        self
    }

    fn body(&self, request: &Request) -> Result<String, ModelError> {
        let tools: Option<&RawValue> = if request.tools.is_empty() {
            None
        } else {
            Some(serde_json::from_str(request.tools.json()).map_err(|e| {
                ModelError::Unavailable(format!("the tool definitions are not a JSON array: {e}"))
            })?)
        };
        let settings = &request.settings;
        let max = settings.max_output_tokens;
        let body = ChatRequest {
            model: &self.model,
            messages: render::messages(request.instructions.as_deref(), &request.messages),
            tool_choice: tools.and(render::tool_choice(&request.tool_choice)),
            parallel_tool_calls: tools.and(settings.parallel_tool_calls),
            tools,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            max_completion_tokens: max.filter(|_| !self.legacy_max_tokens),
            max_tokens: max.filter(|_| self.legacy_max_tokens),
            temperature: settings.temperature,
            top_p: settings.top_p,
            stop: &settings.stop,
            extra: &settings.extra,
        };
        serde_json::to_string(&body).map_err(|e| ModelError::Protocol(e.to_string()))
    }

    async fn send(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let body = self.body(&request)?;
        let mut http = self
            .client
            .post(format!("{}/chat/completions", self.base_url));
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        let response = post_sse(http, &self.headers, body).await?;
        Ok(events(response, Decoder::default()))
    }
}

impl Model for ChatCompletions {
    fn tool_format(&self) -> Format {
        self.format
    }

    fn provider(&self) -> &str {
        "openai"
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        Box::pin(self.send(request))
    }
}
