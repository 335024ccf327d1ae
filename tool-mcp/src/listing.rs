//! The model-facing tool list in MCP form, titles in the server's locale: converted once per
//! registry, served in pages.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{ListToolsResult, Tool};
use toolwright_core::{Audience, Format, Registry};
use toolwright_runtime::Runtime;

/// The runtime's model-facing tool list in MCP form, for one registry.
pub(crate) struct Listing {
    registry: Registry,
    /// The locale of the titles (`None`: the registry's default).
    locale: Option<Arc<str>>,
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
}

impl Listing {
    pub(crate) fn of(registry: Registry, locale: Option<Arc<str>>) -> Listing {
        let default = registry.default_locale().to_owned();
        let tools: Vec<Tool> = registry
            .list_in(
                Audience::Model,
                Format::Mcp,
                locale.as_deref().unwrap_or(&default),
            )
            .entries()
            .iter()
            .filter_map(|entry| match serde_json::from_str::<Tool>(entry.json.get()) {
                Ok(tool) => Some(tool),
                Err(error) => {
                    tracing::error!(tool = %entry.name, "cannot express the tool in MCP: {error}");
                    None
                }
            })
            .collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.to_string(), i))
            .collect();
        Listing {
            registry,
            locale,
            tools,
            by_name,
        }
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.to_string()).collect()
    }

    pub(crate) fn tool_count(&self) -> usize {
        self.tools.len()
    }

    /// The tool called `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// The page of at most `page_size` tools that starts at `cursor` (a number this method
    /// returned as the next cursor; `None`: the first page), leaving out the `unavailable` ones.
    pub(crate) fn page(
        &self,
        unavailable: &[String],
        cursor: Option<String>,
        page_size: usize,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<&Tool> = self
            .tools
            .iter()
            .filter(|t| !unavailable.iter().any(|u| t.name == u.as_str()))
            .collect();
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&i| i < tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("unknown cursor `{cursor}`; start again without a cursor"),
                        None,
                    )
                })?,
        };
        // Saturating: a page size may be `usize::MAX` (no paging).
        let end = start.saturating_add(page_size).min(tools.len());
        let mut result = ListToolsResult::with_all_items(
            tools[start..end].iter().map(|t| (*t).clone()).collect(),
        );
        if end < tools.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }
}

/// `cache`, or a new listing when the runtime's registry is no longer the one it was made from.
pub(crate) fn current_listing(
    runtime: &Runtime,
    cache: &arc_swap::ArcSwap<Listing>,
) -> Arc<Listing> {
    let current = cache.load_full();
    let registry = runtime.registry();
    if current.registry.same(&registry) {
        return current;
    }
    let fresh = Arc::new(Listing::of(registry, current.locale.clone()));
    cache.store(Arc::clone(&fresh));
    fresh
}
