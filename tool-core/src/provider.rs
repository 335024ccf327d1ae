//! Provider-native tools: tools the model provider runs itself (web search, code execution),
//! declared with `#[tool(provider, ...)]` and sent in each provider's own format.
//!
//! The fn under `#[tool(provider)]` returns a [`ProviderTool`]: the configuration object each
//! provider expects in its tool list. The registry calls it once, at collection, and checks it;
//! the OpenAI exports send the `openai` object as given, the Anthropic export the `anthropic`
//! object (with `name` set to the tool's model-facing name when it has none). A tool without a
//! configuration for a provider is left out of that provider's list, with a note.

use serde_json::{Value, json};

/// The per-provider configuration of a provider-native tool: what goes into each provider's tool
/// list in place of a function tool.
///
/// ```
/// use serde_json::json;
/// use toolwright_core::ProviderTool;
///
/// let tool = ProviderTool::new()
///     .openai(json!({ "type": "web_search" }))
///     .anthropic(json!({ "type": "web_search_20250305", "name": "web_search", "max_uses": 5 }));
/// assert_eq!(tool.openai_config().unwrap()["type"], "web_search");
/// assert_eq!(tool.anthropic_config().unwrap()["max_uses"], 5);
/// ```
///
/// The objects are passed through as written: check them against the provider's documentation
/// of the API you send the list to. The registry only checks that each is a JSON object with a
/// string `type`, and that an Anthropic `name` matches the tool's model-facing name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderTool {
    openai: Option<Value>,
    anthropic: Option<Value>,
}

impl ProviderTool {
    /// No configuration yet; add one per provider with [`ProviderTool::openai`] and
    /// [`ProviderTool::anthropic`].
    pub fn new() -> Self {
        ProviderTool::default()
    }

    /// Web search, run by the provider, with the providers' documented default configuration:
    /// OpenAI's hosted `{"type": "web_search"}` (Responses API) and Anthropic's server tool
    /// `{"type": "web_search_20250305", "name": "web_search"}`.
    ///
    /// Anthropic requires the name `web_search`, so the tool must be named `web_search` too (the
    /// registry refuses another name). Extend the objects with the builder methods to set
    /// options such as Anthropic's `max_uses` or `allowed_domains`.
    pub fn web_search() -> Self {
        ProviderTool::new()
            .openai(json!({ "type": "web_search" }))
            .anthropic(json!({ "type": "web_search_20250305", "name": "web_search" }))
    }

    /// Code execution in the provider's sandbox, with the providers' documented default
    /// configuration: OpenAI's hosted `{"type": "code_interpreter", "container": {"type":
    /// "auto"}}` (Responses API) and Anthropic's server tool `{"type":
    /// "code_execution_20250825", "name": "code_execution"}`.
    ///
    /// Anthropic requires the name `code_execution`, so the tool must be named
    /// `code_execution` too; at the time of writing this version of the tool also needs the
    /// request header `anthropic-beta: code-execution-2025-08-25`, which the host sets.
    pub fn code_execution() -> Self {
        ProviderTool::new()
            .openai(json!({ "type": "code_interpreter", "container": { "type": "auto" } }))
            .anthropic(json!({ "type": "code_execution_20250825", "name": "code_execution" }))
    }

    /// Sets the object sent in OpenAI tool lists (`Format::OpenAi`, `Format::OpenAiStrict` and
    /// `Format::OpenAiResponses`), e.g. `{"type": "web_search"}`. OpenAI runs its hosted tools
    /// in the Responses API, so write the object that API documents.
    pub fn openai(mut self, config: Value) -> Self {
        self.openai = Some(config);
        self
    }

    /// Sets the object sent in Anthropic tool lists, e.g. `{"type": "web_search_20250305",
    /// "name": "web_search", "max_uses": 5}`. A missing `name` is filled in with the tool's
    /// model-facing name; a different one is refused by the registry.
    pub fn anthropic(mut self, config: Value) -> Self {
        self.anthropic = Some(config);
        self
    }

    /// The OpenAI configuration, if any.
    pub fn openai_config(&self) -> Option<&Value> {
        self.openai.as_ref()
    }

    /// The Anthropic configuration as written (without the `name` the export may add), if any.
    pub fn anthropic_config(&self) -> Option<&Value> {
        self.anthropic.as_ref()
    }

    /// The Anthropic entry for a tool named `name`: the configuration with `name` set when it
    /// has none.
    pub fn anthropic_entry(&self, name: &str) -> Option<Value> {
        let mut entry = self.anthropic.clone()?;
        if let Value::Object(map) = &mut entry {
            map.entry("name").or_insert_with(|| json!(name));
        }
        Some(entry)
    }

    /// What is wrong with this configuration for a tool named `name`, one sentence per problem
    /// (empty when it is fine). The registry refuses a tool with problems.
    pub fn problems(&self, name: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.openai.is_none() && self.anthropic.is_none() {
            problems.push(
                "it has no configuration for any provider, so no tool list would carry it; add `.openai(json!({...}))` or `.anthropic(json!({...}))` to the `ProviderTool` it returns"
                    .to_owned(),
            );
        }
        for (provider, method, config) in [
            ("openai", "openai", &self.openai),
            ("anthropic", "anthropic", &self.anthropic),
        ] {
            let Some(config) = config else { continue };
            let Some(map) = config.as_object() else {
                problems.push(format!(
                    "its {provider} configuration is {}, not a JSON object; pass `.{method}(json!({{ \"type\": \"...\" }}))`",
                    kind_of(config)
                ));
                continue;
            };
            if !map.get("type").is_some_and(Value::is_string) {
                problems.push(format!(
                    "its {provider} configuration has no string `type`, which names the provider's tool (e.g. `\"type\": \"web_search\"`); add it"
                ));
            }
        }
        if let Some(Value::Object(map)) = &self.anthropic {
            match map.get("name") {
                None => {}
                Some(Value::String(given)) if given == name => {}
                Some(Value::String(given)) => problems.push(format!(
                    "its anthropic configuration names the tool `{given}`, but the tool is named `{name}`; Anthropic reports its calls under the configured name, so the two must agree: name the tool `{given}` (`name = \"{given}\"`, outside any `toolset`)"
                )),
                Some(other) => problems.push(format!(
                    "its anthropic configuration has a `name` that is {}, not a string; remove it (the export sets the tool's name)",
                    kind_of(other)
                )),
            }
        }
        problems
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_for_their_names() {
        assert!(ProviderTool::web_search().problems("web_search").is_empty());
        assert!(
            ProviderTool::code_execution()
                .problems("code_execution")
                .is_empty()
        );
        let wrong = ProviderTool::web_search().problems("search");
        assert_eq!(wrong.len(), 1);
        assert!(
            wrong[0].contains("names the tool `web_search`, but the tool is named `search`"),
            "{wrong:?}"
        );
    }

    #[test]
    fn anthropic_entry_sets_a_missing_name_only() {
        let tool = ProviderTool::new().anthropic(json!({ "type": "web_fetch_20250910" }));
        assert_eq!(
            tool.anthropic_entry("fetch").unwrap(),
            json!({ "type": "web_fetch_20250910", "name": "fetch" })
        );
        assert!(tool.problems("fetch").is_empty());
        let named = ProviderTool::web_search();
        assert_eq!(
            named.anthropic_entry("web_search").unwrap()["name"],
            "web_search"
        );
        assert!(ProviderTool::new().anthropic_entry("x").is_none());
    }

    #[test]
    fn malformed_configurations_say_what_to_write() {
        let problems = ProviderTool::new().problems("x");
        assert!(problems[0].contains("no configuration for any provider"));

        let problems = ProviderTool::new()
            .openai(json!("web_search"))
            .anthropic(json!({ "name": 5 }))
            .problems("x");
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("openai configuration is a string, not a JSON object"));
        assert!(problems[1].contains("anthropic configuration has no string `type`"));
        assert!(problems[2].contains("`name` that is a number"));
    }
}
