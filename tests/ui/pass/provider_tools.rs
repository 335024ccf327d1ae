//! Provider-native tools: `provider` with the keys it keeps (description, name, toolset,
//! user-facing text, effects `read` and `write`, `untrusted`, `subagents`, `enabled`), an alias
//! of `ProviderTool` as the return type, and the code they expand to in a crate that denies the
//! lints generated code must not trip.

#![deny(
    unused_qualifications,
    unused_imports,
    unused_results,
    dead_code,
    missing_docs
)]

use serde_json::json;
use toolwright::prelude::*;
use toolwright::registry::{Audience, Format};

/// Searches the web for current information; results come with citations.
#[tool(provider, effect = read, untrusted)]
fn web_search() -> ProviderTool {
    ProviderTool::new()
        .openai(json!({ "type": "web_search" }))
        .anthropic(json!({ "type": "web_search_20250305", "name": "web_search", "max_uses": 5 }))
}

type Config = ProviderTool;

fn sandbox_on(cx: &EnabledContext<'_>) -> bool {
    cx.flag("sandbox")
}

/// Runs code in the provider's sandbox.
#[tool(
    provider,
    effect = write,
    name = "run_code",
    toolset = "sandbox",
    title = "Run code",
    summary = "Runs code in a sandbox",
    i18n(de(title = "Code ausführen")),
    subagents = false,
    enabled = sandbox_on,
)]
fn code() -> Config {
    ProviderTool::new().anthropic(json!({ "type": "code_execution_20250825" }))
}

fn main() {
    let registry = Registry::from_tools([web_search::TOOL, code::TOOL]).unwrap();

    let search = registry.get("web_search").unwrap();
    assert_eq!(search.provider(), Some(&web_search()));
    assert!(search.is_untrusted());
    let d = search.descriptor().unwrap();
    assert!(d.provider.is_some());
    assert_eq!(d.effect, toolwright::Effect::Read);

    let run_code = registry.get("sandbox__run_code").unwrap();
    assert_eq!(run_code.title(), Some("Run code"));
    assert!(!run_code.for_subagents());
    assert!(run_code.enabled().is_some());
    // The export names the Anthropic entry after the tool.
    let anthropic: serde_json::Value =
        serde_json::from_str(registry.list(Audience::Model, Format::Anthropic).json()).unwrap();
    assert_eq!(
        anthropic[0],
        json!({ "type": "code_execution_20250825", "name": "sandbox__run_code" })
    );
    assert_eq!(
        registry.list(Audience::Model, Format::OpenAi).notes(),
        ["sandbox__run_code: not sent to OpenAI: no openai configuration"]
    );
}
