//! The OpenAI Responses API adapter, streaming over SSE: reasoning models keep their reasoning
//! across tool calls, OpenAI's hosted tools run beside the registry's function tools, and a
//! stored conversation can be continued by `previous_response_id`.

mod decode;
mod render;
mod wire;

use futures_util::future::BoxFuture;
use serde_json::value::RawValue;
use toolwright_core::Format;

use crate::http::{env_var, events, install_crypto_provider, post_sse};
use crate::model::{Model, ModelError, Request, ResponseStream};
use crate::openai::OPENAI_BASE_URL;
use decode::Decoder;
use wire::{CreateResponse, Reasoning};

/// A model behind OpenAI's Responses API (`POST {base_url}/responses` with `stream: true`).
///
/// Tools go out in the registry's [`Format::OpenAiResponses`] export: flat function tools,
/// strict where the schema allows it and `strict: false` written out where it does not (the
/// Responses API makes a function strict when `strict` is left out), and OpenAI's hosted tools
/// (`#[tool(provider)]` with an `openai` configuration) beside them.
///
/// The conversation is kept by toolwright, so by default nothing is stored at OpenAI
/// (`store: false`): each request sends the whole conversation, and reasoning items come back
/// encrypted (`include: ["reasoning.encrypted_content"]`) and go out again with the next
/// request, which is what keeps a reasoning model's chain of thought across its tool calls.
///
/// ```
/// use toolwright_agent::{ReasoningEffort, ReasoningSummary, Responses};
///
/// let model = Responses::new("gpt-5")
///     .api_key("sk-...")
///     .reasoning_effort(ReasoningEffort::Low)
///     .reasoning_summary(ReasoningSummary::Auto);
/// # let _ = model;
/// ```
///
/// **Chaining.** With [`Responses::store`] and [`Responses::chain`] on, a request continues
/// the last stored response of the conversation by its id (`previous_response_id`) and sends
/// only the messages after it. That helps when the conversation is long and its requests are
/// many (an agent's tool loop): the request body stays small however long the conversation
/// grows. It does not make the prompt cheaper (the chained items are billed as input tokens as
/// if they had been sent), it needs the responses stored at OpenAI (which zero data retention
/// rules out), and it assumes the conversation before the chained response is unchanged. If
/// OpenAI no longer has that response (`previous_response_not_found`), the request is sent
/// again with the whole conversation.
#[derive(Clone)]
pub struct Responses {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
    format: Format,
    store: bool,
    chain: bool,
    reasoning: Reasoning,
    /// Whether to ask for encrypted reasoning; `None`: when it applies.
    encrypted_reasoning: Option<bool>,
}

impl std::fmt::Debug for Responses {
    // The key stays out of logs: only whether there is one is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responses")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("format", &self.format)
            .field("store", &self.store)
            .field("chain", &self.chain)
            .field("reasoning", &self.reasoning)
            .finish_non_exhaustive()
    }
}

/// How much a reasoning model reasons before it answers (`reasoning.effort`); not every model
/// takes every value (see OpenAI's reasoning guide). A value this enum does not name yet can be
/// sent with [`Settings::extra`](crate::Settings::extra) as `"reasoning"`, which replaces the
/// adapter's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasoningEffort {
    /// No reasoning.
    None,
    /// The least reasoning.
    Minimal,
    /// Little reasoning.
    Low,
    /// The API's default.
    Medium,
    /// More reasoning.
    High,
    /// The most reasoning (`xhigh`), where the model offers it.
    XHigh,
}

/// Whether and how a reasoning model summarises its reasoning (`reasoning.summary`); the
/// summaries arrive in the reasoning items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasoningSummary {
    /// The most detailed summary the model supports.
    Auto,
    /// A short summary.
    Concise,
    /// A detailed summary.
    Detailed,
}

impl ReasoningEffort {
    /// The value of `reasoning.effort`.
    pub(crate) const fn wire(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::XHigh => "xhigh",
        }
    }
}

impl ReasoningSummary {
    /// The value of `reasoning.summary`.
    pub(crate) const fn wire(self) -> &'static str {
        match self {
            ReasoningSummary::Auto => "auto",
            ReasoningSummary::Concise => "concise",
            ReasoningSummary::Detailed => "detailed",
        }
    }
}

impl Responses {
    /// Model `model` on OpenAI's API, without a key (see [`Responses::api_key`] and
    /// [`Responses::from_env`]).
    pub fn new(model: impl Into<String>) -> Self {
        install_crypto_provider();
        Responses {
            client: reqwest::Client::new(),
            base_url: OPENAI_BASE_URL.to_owned(),
            model: model.into(),
            api_key: None,
            headers: Vec::new(),
            format: Format::OpenAiResponses,
            store: false,
            chain: false,
            reasoning: Reasoning::default(),
            encrypted_reasoning: None,
        }
    }

    /// `self` asking for reasoning items with their reasoning encrypted
    /// (`include: ["reasoning.encrypted_content"]`), which is what carries a reasoning model's
    /// reasoning from one request to the next without storing it at OpenAI. By default it is
    /// asked for when the request is not stored and either a reasoning setting is given or the
    /// model's name is one of OpenAI's reasoning models (`o1`, `o3`, `o4`, `gpt-5` except its
    /// `-chat` models, `codex`): other models refuse the field.
    pub fn encrypted_reasoning(mut self, on: bool) -> Self {
        self.encrypted_reasoning = Some(on);
        self
    }

    fn wants_encrypted_reasoning(&self) -> bool {
        self.encrypted_reasoning
            .unwrap_or_else(|| !self.reasoning.is_empty() || is_reasoning_model(&self.model))
    }

    /// Model `model` with the key in `OPENAI_API_KEY` and, when it is set, the server in
    /// `OPENAI_BASE_URL`; fails saying what to set when the key is missing.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        let key = env_var("OPENAI_API_KEY").ok_or_else(|| {
            ModelError::Unavailable(
                "set OPENAI_API_KEY to an OpenAI API key to use the Responses API".into(),
            )
        })?;
        let mut model = Self::new(model).api_key(key);
        if let Some(url) = env_var("OPENAI_BASE_URL") {
            model = model.base_url(url);
        }
        Ok(model)
    }

    /// `self` sending to `url` (default `https://api.openai.com/v1`): the path `/responses` is
    /// appended to it.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// `self` authenticating with `key` (`Authorization: Bearer`).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// `self` sending one more header with each request (e.g. `OpenAI-Project`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `self` on `client` (timeouts, proxies, TLS roots of the application's choosing).
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = client;
        self
    }

    /// `self` taking its tools in `format` (default [`Format::OpenAiResponses`]; the Responses
    /// API takes no other tool format, so this is for a registry export of the same shape).
    pub fn tool_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// `self` asking OpenAI to store its responses (`store`, default `false`: the conversation
    /// is kept by toolwright). Stored responses can be chained to ([`Responses::chain`]), and
    /// their reasoning items are found by id instead of being sent encrypted.
    pub fn store(mut self, store: bool) -> Self {
        self.store = store;
        self
    }

    /// `self` continuing the conversation's last stored response by its id
    /// (`previous_response_id`) and sending only the messages after it; needs
    /// [`Responses::store`] on (a request fails saying so otherwise). See the type's
    /// documentation for when it helps.
    pub fn chain(mut self, chain: bool) -> Self {
        self.chain = chain;
        self
    }

    /// `self` asking a reasoning model for `effort` (`reasoning.effort`).
    pub fn reasoning_effort(mut self, effort: ReasoningEffort) -> Self {
        self.reasoning.effort = Some(effort.wire());
        self
    }

    /// `self` asking a reasoning model for a summary of its reasoning (`reasoning.summary`).
    pub fn reasoning_summary(mut self, summary: ReasoningSummary) -> Self {
        self.reasoning.summary = Some(summary.wire());
        self
    }

    /// The request body; `chain` continues the last stored response. A field of
    /// [`Settings::extra`](crate::Settings::extra) replaces the adapter's field of the same
    /// name.
    /// The request body; `chain` sends only what follows the last stored response. Without
    /// `chain` on a stored conversation whose chained response is gone, items go without their
    /// ids (`replay_ids` false): the stored items went with the response.
    fn body(&self, request: &Request, chain: bool, replay_ids: bool) -> Result<String, ModelError> {
        let settings = &request.settings;
        if !settings.stop.is_empty() {
            return Err(ModelError::Unavailable(
                "the Responses API takes no stop sequences; leave `Settings::stop` empty for this model, or use `ChatCompletions`".into(),
            ));
        }
        let tools: Option<&RawValue> = if request.tools.is_empty() {
            None
        } else {
            Some(serde_json::from_str(request.tools.json()).map_err(|e| {
                ModelError::Unavailable(format!("the tool definitions are not a JSON array: {e}"))
            })?)
        };
        let input = render::input(&request.messages, self.store && replay_ids, chain);
        let extra = &settings.extra;
        let ours = |name: &str| !extra.contains_key(name);
        let body = CreateResponse {
            model: Some(self.model.as_str()).filter(|_| ours("model")),
            instructions: request
                .instructions
                .as_deref()
                .filter(|t| !t.is_empty() && ours("instructions")),
            previous_response_id: input
                .previous_response_id
                .filter(|_| ours("previous_response_id")),
            input: Some(input.items).filter(|_| ours("input")),
            tool_choice: tools
                .and(render::tool_choice(&request.tool_choice))
                .filter(|_| ours("tool_choice")),
            parallel_tool_calls: tools
                .and(settings.parallel_tool_calls)
                .filter(|_| ours("parallel_tool_calls")),
            tools: tools.filter(|_| ours("tools")),
            stream: Some(true).filter(|_| ours("stream")),
            store: Some(self.store).filter(|_| ours("store")),
            // Without `store` a reasoning item is useless in the next request unless it
            // carries its reasoning, encrypted.
            include: (!self.store && self.wants_encrypted_reasoning() && ours("include"))
                .then(|| vec!["reasoning.encrypted_content"]),
            reasoning: Some(self.reasoning).filter(|r| !r.is_empty() && ours("reasoning")),
            max_output_tokens: settings
                .max_output_tokens
                .filter(|_| ours("max_output_tokens")),
            temperature: settings.temperature.filter(|_| ours("temperature")),
            top_p: settings.top_p.filter(|_| ours("top_p")),
            extra,
        };
        serde_json::to_string(&body).map_err(|e| ModelError::Protocol(e.to_string()))
    }

    async fn post(&self, body: String) -> Result<reqwest::Response, ModelError> {
        let mut http = self.client.post(format!("{}/responses", self.base_url));
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        post_sse(http, &self.headers, body).await
    }

    async fn send(&self, request: Request) -> Result<ResponseStream, ModelError> {
        if self.chain && !self.store {
            return Err(ModelError::Unavailable(
                "`Responses::chain(true)` needs `Responses::store(true)`: OpenAI keeps no response to chain to without it".into(),
            ));
        }
        let response = match self.post(self.body(&request, self.chain, true)?).await {
            // The chained response is gone (deleted, expired): the conversation is ours, so
            // the request is sent again whole.
            Err(ModelError::Http {
                code: Some(code), ..
            }) if self.chain && code == "previous_response_not_found" => {
                tracing::warn!(
                    "the chained response is no longer stored at OpenAI; sending the whole conversation"
                );
                self.post(self.body(&request, false, false)?).await?
            }
            response => response?,
        };
        Ok(events(response, Decoder::new(self.store)))
    }
}

impl Model for Responses {
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

/// Whether `model` is one of OpenAI's reasoning models, which take `reasoning` and return
/// encrypted reasoning on request.
fn is_reasoning_model(model: &str) -> bool {
    let model = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "codex"]
        .iter()
        .any(|prefix| model.starts_with(prefix))
        || (model.starts_with("gpt-5") && !model.contains("-chat"))
}

#[cfg(test)]
mod reasoning_models {
    use super::is_reasoning_model;

    #[test]
    fn reasoning_models_are_told_apart_by_name() {
        for model in [
            "o3",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini-2025-08-07",
            "codex-mini-latest",
        ] {
            assert!(is_reasoning_model(model), "{model}");
        }
        for model in ["gpt-4.1", "gpt-4o-mini", "gpt-5-chat-latest", "llama3.1"] {
            assert!(!is_reasoning_model(model), "{model}");
        }
    }
}
