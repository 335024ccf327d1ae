//! The Anthropic Messages API adapter, streaming over SSE, with prompt caching on by default.

mod decode;
mod render;
mod wire;

use std::fmt;

use futures_util::future::BoxFuture;
use toolwright_core::Format;

use crate::http::{env_var, events, install_crypto_provider, post_sse};
use crate::model::{Model, ModelError, Request, ResponseStream};
use decode::Decoder;
use wire::{API_VERSION, MessagesRequest};

/// Anthropic's API, where requests go unless [`Anthropic::base_url`] says otherwise.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// The provider of the [`ProviderItem`](crate::ProviderItem)s this adapter keeps and reads back.
const PROVIDER: &str = "anthropic";

/// `max_tokens` when [`Settings::max_output_tokens`](crate::Settings::max_output_tokens) does not
/// set it: the API requires one, and this fits the output limit of every current model.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A model behind Anthropic's Messages API (`POST {base_url}/v1/messages` with
/// `stream: true`).
///
/// Tools go out in the registry's Anthropic export ([`Format::Anthropic`]). Thinking blocks
/// and server tools' blocks are kept with the model's message
/// ([`AssistantMessage::items`](crate::AssistantMessage::items)) and sent back as they came.
///
/// **Prompt caching** is on unless [`Anthropic::cache`] turns it off: the request marks three
/// cache breakpoints (of the four the API allows), on the last tool definition, on the system
/// prompt and on the last block of the conversation's last user message, so each step of a turn
/// reads the tools, the instructions and the history so far from the cache and pays full price
/// only for what is new. A prefix shorter than the model's minimum is simply not cached.
///
/// Settings the adapter has no field for go in [`Settings::extra`](crate::Settings::extra),
/// e.g. extended thinking:
///
/// ```
/// use serde_json::json;
/// use toolwright_agent::{Anthropic, Settings};
///
/// let model = Anthropic::new("claude-sonnet-4-5")
///     .api_key("sk-ant-...")
///     .max_tokens_default(8192);
/// let settings = Settings::new()
///     .extra("thinking", json!({ "type": "enabled", "budget_tokens": 4096 }));
/// # let _ = (model, settings);
/// ```
#[derive(Clone)]
pub struct Anthropic {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    auth_token: Option<String>,
    headers: Vec<(String, String)>,
    betas: Vec<String>,
    max_tokens: u32,
    cache: bool,
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The credentials stay out of logs.
        let set = |secret: &Option<String>| secret.as_ref().map(|_| "<set>");
        f.debug_struct("Anthropic")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &set(&self.api_key))
            .field("auth_token", &set(&self.auth_token))
            .field("headers", &self.headers)
            .field("betas", &self.betas)
            .field("max_tokens", &self.max_tokens)
            .field("cache", &self.cache)
            .finish()
    }
}

impl Anthropic {
    /// Model `model` (e.g. `claude-sonnet-4-5`) on Anthropic's API, without credentials (see
    /// [`Anthropic::api_key`], [`Anthropic::auth_token`] and [`Anthropic::from_env`]).
    pub fn new(model: impl Into<String>) -> Self {
        install_crypto_provider();
        Anthropic {
            client: reqwest::Client::new(),
            base_url: ANTHROPIC_BASE_URL.to_owned(),
            model: model.into(),
            api_key: None,
            auth_token: None,
            headers: Vec::new(),
            betas: Vec::new(),
            max_tokens: DEFAULT_MAX_TOKENS,
            cache: true,
        }
    }

    /// Model `model` with the API key in `ANTHROPIC_API_KEY`, else the bearer token in
    /// `ANTHROPIC_AUTH_TOKEN`, and the server in `ANTHROPIC_BASE_URL` when it is set (the
    /// variables Anthropic's own SDKs read); fails saying what to set when neither credential
    /// is.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), toolwright_agent::ModelError> {
    /// let model = toolwright_agent::Anthropic::from_env("claude-sonnet-4-5")?;
    /// # let _ = model;
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::from_vars(model.into(), env_var)
    }

    fn from_vars(model: String, var: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let var = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        let mut anthropic = Self::new(model);
        anthropic = match (var("ANTHROPIC_API_KEY"), var("ANTHROPIC_AUTH_TOKEN")) {
            (Some(key), _) => anthropic.api_key(key),
            (None, Some(token)) => anthropic.auth_token(token),
            (None, None) => {
                return Err(ModelError::Unavailable(
                    "set ANTHROPIC_API_KEY to an Anthropic API key (or ANTHROPIC_AUTH_TOKEN to a \
                     bearer token, for a gateway that takes one)"
                        .into(),
                ));
            }
        };
        if let Some(url) = var("ANTHROPIC_BASE_URL") {
            anthropic = anthropic.base_url(url);
        }
        Ok(anthropic)
    }

    /// `self` sending to `url` (a gateway or proxy speaking the Messages API): the path
    /// `/v1/messages` is appended to it.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// `self` authenticating with the API key `key` (the `x-api-key` header).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// `self` authenticating with the bearer token `token` (`Authorization: Bearer`), as
    /// Anthropic's SDKs do with `auth_token`, for gateways and proxies that take a token.
    pub fn auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// `self` sending one more header with each request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `self` asking for the beta feature `name` (the `anthropic-beta` header, which lists every
    /// beta asked for), e.g. `"code-execution-2025-08-25"` for the code execution tool.
    ///
    /// ```
    /// let model = toolwright_agent::Anthropic::new("claude-sonnet-4-5")
    ///     .beta("code-execution-2025-08-25")
    ///     .beta("interleaved-thinking-2025-05-14");
    /// # let _ = model;
    /// ```
    pub fn beta(mut self, name: impl Into<String>) -> Self {
        self.betas.push(name.into());
        self
    }

    /// `self` on `client` (timeouts, proxies, TLS roots of the application's choosing).
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = client;
        self
    }

    /// `self` sending `max_tokens: tokens` when the request's settings leave it unset (the API
    /// requires it; the default is 4096). [`Settings::max_output_tokens`] wins over it.
    ///
    /// [`Settings::max_output_tokens`]: crate::Settings::max_output_tokens
    pub fn max_tokens_default(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// `self` with prompt caching on (the default) or off: off, the requests carry no
    /// `cache_control` at all.
    pub fn cache(mut self, on: bool) -> Self {
        self.cache = on;
        self
    }

    fn body(&self, request: &Request) -> Result<String, ModelError> {
        let tools = if request.tools.is_empty() {
            None
        } else {
            Some(render::tools(request.tools.json(), self.cache)?)
        };
        let settings = &request.settings;
        let tool_choice = tools
            .as_ref()
            .and_then(|_| render::tool_choice(&request.tool_choice, settings.parallel_tool_calls));
        let body = MessagesRequest {
            model: &self.model,
            max_tokens: settings.max_output_tokens.unwrap_or(self.max_tokens),
            system: render::system(request.instructions.as_deref(), self.cache),
            messages: render::messages(&request.messages, self.cache),
            tools,
            tool_choice,
            stream: true,
            temperature: settings.temperature,
            top_p: settings.top_p,
            stop_sequences: &settings.stop,
            extra: &settings.extra,
        };
        serde_json::to_string(&body).map_err(|e| ModelError::Protocol(e.to_string()))
    }

    async fn send(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let body = self.body(&request)?;
        let mut http = self
            .client
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", API_VERSION);
        if let Some(key) = &self.api_key {
            http = http.header("x-api-key", key);
        }
        if let Some(token) = &self.auth_token {
            http = http.bearer_auth(token);
        }
        if !self.betas.is_empty() {
            http = http.header("anthropic-beta", self.betas.join(","));
        }
        let response = post_sse(http, &self.headers, body).await?;
        Ok(events(response, Decoder::default()))
    }
}

impl Model for Anthropic {
    fn tool_format(&self) -> Format {
        Format::Anthropic
    }

    fn provider(&self) -> &str {
        "anthropic"
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn stream(&self, request: Request) -> BoxFuture<'_, Result<ResponseStream, ModelError>> {
        Box::pin(self.send(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_environment_gives_a_key_else_a_token() {
        let both = vars(&[
            ("ANTHROPIC_API_KEY", "sk-ant-1"),
            ("ANTHROPIC_AUTH_TOKEN", "tok"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000/"),
        ]);
        let model = Anthropic::from_vars("m".into(), both).unwrap();
        assert_eq!(model.api_key.as_deref(), Some("sk-ant-1"));
        assert_eq!(model.auth_token, None);
        assert_eq!(model.base_url, "http://127.0.0.1:4000");

        let token = vars(&[("ANTHROPIC_API_KEY", " "), ("ANTHROPIC_AUTH_TOKEN", "tok")]);
        let model = Anthropic::from_vars("m".into(), token).unwrap();
        assert_eq!(model.auth_token.as_deref(), Some("tok"));
        assert_eq!(model.base_url, ANTHROPIC_BASE_URL);
    }

    #[test]
    fn without_credentials_the_error_says_what_to_set() {
        let error = Anthropic::from_vars("m".into(), vars(&[])).unwrap_err();
        assert!(
            matches!(&error, ModelError::Unavailable(m) if m.contains("ANTHROPIC_API_KEY") && m.contains("ANTHROPIC_AUTH_TOKEN")),
            "{error:?}"
        );
    }

    #[test]
    fn debug_output_hides_the_credentials() {
        let model = Anthropic::new("m").api_key("sk-ant-secret");
        let debug = format!("{model:?}");
        assert!(!debug.contains("sk-ant-secret"), "{debug}");
        assert!(debug.contains("<set>"), "{debug}");
    }
}
