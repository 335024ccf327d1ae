//! The model behind `--provider`: each adapter reads its key from the environment and says what
//! to set when it is missing.

use std::sync::Arc;

use clap::ValueEnum;
use toolwright::agent::{Anthropic, ChatCompletions, Model, Responses};

/// Who answers.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Provider {
    /// OpenAI's Responses API: `OPENAI_API_KEY`, and `--base-url` or `OPENAI_BASE_URL` for a
    /// proxy.
    Openai,
    /// Anthropic's Messages API: `ANTHROPIC_API_KEY` (or `ANTHROPIC_AUTH_TOKEN`), and
    /// `--base-url` or `ANTHROPIC_BASE_URL` for a gateway.
    Anthropic,
    /// A server speaking OpenAI's Chat Completions (vLLM, llama.cpp's server, Ollama, or
    /// OpenAI's own): `--base-url` or `OPENAI_BASE_URL`, and `OPENAI_API_KEY` if it wants one.
    OpenaiCompatible,
}

/// The model `name` of `provider`, at `base_url` when given.
pub(crate) fn model(
    provider: Provider,
    name: &str,
    base_url: Option<&str>,
) -> Result<Arc<dyn Model>, String> {
    let env = |var: &str| std::env::var(var).ok().filter(|v| !v.trim().is_empty());
    match provider {
        Provider::Openai => {
            let mut model = Responses::from_env(name).map_err(|e| e.to_string())?;
            if let Some(url) = base_url {
                model = model.base_url(url);
            }
            Ok(Arc::new(model))
        }
        Provider::Anthropic => {
            let mut model = Anthropic::from_env(name).map_err(|e| e.to_string())?;
            if let Some(url) = base_url {
                model = model.base_url(url);
            }
            Ok(Arc::new(model))
        }
        Provider::OpenaiCompatible => {
            let url = base_url
                .map(str::to_owned)
                .or_else(|| env("OPENAI_BASE_URL"));
            let Some(url) = url else {
                return Err(
                    "an OpenAI-compatible server needs its URL: pass --base-url \
                     (e.g. http://127.0.0.1:11434/v1 for Ollama) or set OPENAI_BASE_URL"
                        .into(),
                );
            };
            // A local server may take no key; one that wants it gets OPENAI_API_KEY.
            let mut model = ChatCompletions::new(name).base_url(url);
            if let Some(key) = env("OPENAI_API_KEY") {
                model = model.api_key(key);
            }
            Ok(Arc::new(model))
        }
    }
}
