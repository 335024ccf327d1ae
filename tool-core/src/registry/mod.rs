//! The registry: every `#[tool]` of the program, collected once, with schemas, validators and
//! model-facing lists computed once.
//!
//! What a registry is built from lives in modules below this one: a tool ([`Tool`],
//! [`Audience`]), the model-facing lists ([`ToolList`]), the reasons a registry is refused
//! ([`RegistryProblem`]) and [`input_digest`]. They are re-exported here, their path from the
//! start.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::catalog::Catalogs;
use crate::context::{CallContext, CallContextBuilder};
use crate::descriptor::{Location, Registration, ToolDescriptor};
use crate::error::{ErrorCode, ToolError, quoted_prefix};
use crate::export::Format;
use crate::list::{self, Lists, LocalizedLists};
use crate::locale::{self as locales, Locales, Slot};
use crate::names;
use crate::output::CallOutput;
use crate::session::Caller;

mod derived;

pub use crate::catalog::{ApprovalPolicy, Catalog, CatalogEntry, ToolOrigin, Visibility};
pub use crate::digest::input_digest;
pub use crate::list::{ListEntry, ToolList};
pub use crate::locale::{DEFAULT_LOCALE, ToolTexts};
pub use crate::problem::{RegistryError, RegistryProblem};
pub use crate::tool::{Audience, ENDS_TURN_SENTENCE, SERVE_SENTENCE, Tool};

struct Inner {
    tools: Vec<Arc<Tool>>,
    /// Looked up on every call: hashed with foldhash, not SipHash (the keys are the registry's
    /// own names; a lookup inserts nothing, so a name the model makes up cannot flood it).
    by_name: foldhash::HashMap<String, usize>,
    by_id: HashMap<String, usize>,
    /// Remote tools that could not be made available, by model-facing name, with the reason.
    unavailable: HashMap<String, String>,
    /// Connections whose tools are missing altogether (down, refused), with the reason.
    offline: HashMap<String, String>,
    lists: Lists,
    /// The default locale (the tools' own texts are in it) and the others the tools have.
    locales: Locales,
    /// The MCP lists of the other locales.
    localized: LocalizedLists,
    catalogs: Catalogs,
}

/// Every tool of the program, collected once. Cheap to clone (an `Arc`).
///
/// ```
/// # use toolwright_core::Registry;
/// let registry = Registry::from_tools([]).unwrap();
/// assert!(registry.tools().is_empty());
/// ```
#[derive(Clone)]
pub struct Registry(Arc<Inner>);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl Registry {
    /// Every tool linked into the program through `#[tool]`.
    ///
    /// Fails, naming both definition sites, on duplicate names or ids, and on reserved names,
    /// invalid names and schemas that cannot be processed.
    ///
    /// Tools of another crate are collected when that crate is linked; a crate nothing else
    /// refers to may be dropped by the linker, so refer to it (`use other_tools as _;`).
    pub fn collect() -> Result<Registry, RegistryError> {
        Self::from_tools(inventory::iter::<Registration>.into_iter().map(|r| r.0))
    }

    /// A registry of exactly `tools` (e.g. `[read_logs::TOOL, restart_service::TOOL]`).
    pub fn from_tools(
        tools: impl IntoIterator<Item = &'static ToolDescriptor>,
    ) -> Result<Registry, RegistryError> {
        let mut descriptors: Vec<&'static ToolDescriptor> = tools.into_iter().collect();
        // Link order varies between builds; sort so lists and errors are deterministic.
        descriptors.sort_by_key(|d| (d.model_name(), d.location.file, d.location.line));
        descriptors.dedup_by(|a, b| std::ptr::eq(*a, *b));

        let mut problems = Vec::new();
        let mut built = Vec::with_capacity(descriptors.len());
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        let mut sites: Vec<Location> = Vec::new();
        for descriptor in descriptors {
            let name = descriptor.model_name();
            let id = descriptor.id();
            if let Some(&first) = by_name.get(&name) {
                problems.push(RegistryProblem::DuplicateName {
                    name,
                    first: sites[first],
                    second: descriptor.location,
                });
                continue;
            }
            if let Some(&first) = by_id.get(&id) {
                problems.push(RegistryProblem::DuplicateId {
                    id,
                    first: sites[first],
                    second: descriptor.location,
                });
                continue;
            }
            let index = sites.len();
            sites.push(descriptor.location);
            by_name.insert(name, index);
            by_id.insert(id, index);
            match Tool::build(descriptor) {
                Ok(tool) => built.push(tool),
                Err(mut found) => problems.append(&mut found),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }
        Ok(Self::assemble(
            built.into_iter().map(Arc::new).collect(),
            HashMap::new(),
            HashMap::new(),
            locales::DEFAULT_LOCALE,
        ))
    }

    fn assemble(
        tools: Vec<Arc<Tool>>,
        unavailable: HashMap<String, String>,
        offline: HashMap<String, String>,
        default_locale: &str,
    ) -> Registry {
        let locales = Locales::new(default_locale, tools.iter().map(|t| t.i18n()));
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name().to_owned(), i))
            .collect();
        let by_id = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id().to_owned(), i))
            .collect();
        Registry(Arc::new(Inner {
            tools,
            by_name,
            by_id,
            unavailable,
            offline,
            lists: Lists::default(),
            localized: LocalizedLists::new(locales.others()),
            catalogs: Catalogs::new(locales.others()),
            locales,
        }))
    }

    /// The locale the tools' own `title` and `summary` are written in: [`DEFAULT_LOCALE`]
    /// (`"en"`) unless [`Registry::with_default_locale`] set another. A request for it (or for
    /// a locale that falls back to it, `en-GB`) gets those texts.
    pub fn default_locale(&self) -> &str {
        self.0.locales.default_locale()
    }

    /// This registry (the same tools, shared) with `locale` as its default locale: the tools'
    /// `title` and `summary` are in it, `i18n(...)` gives the others. Registries built from
    /// this one (remote tools joined, descriptions computed, sandbox tools added) keep it.
    ///
    /// Fails when `locale` is not a BCP 47 language tag.
    ///
    /// ```
    /// # use toolwright_core::Registry;
    /// let registry = Registry::from_tools([]).unwrap().with_default_locale("zh-CN").unwrap();
    /// assert_eq!(registry.default_locale(), "zh-CN");
    /// assert!(Registry::from_tools([]).unwrap().with_default_locale("Chinese!").is_err());
    /// ```
    pub fn with_default_locale(&self, locale: &str) -> Result<Registry, RegistryError> {
        if !locales::is_locale(locale) {
            return Err(RegistryError {
                problems: vec![RegistryProblem::InvalidLocale {
                    locale: locale.to_owned(),
                }],
            });
        }
        Ok(Self::assemble(
            self.0.tools.clone(),
            self.0.unavailable.clone(),
            self.0.offline.clone(),
            locale,
        ))
    }

    /// The title and summary of tool `name` (model-facing name or id) for a person reading
    /// `locale`, by the [`locale`](crate::locale) module's rule; `None` for an unknown tool.
    ///
    /// ```
    /// # use toolwright_core::Registry;
    /// let registry = Registry::from_tools([toolwright_core::ask_question()]).unwrap();
    /// let texts = registry.texts("ask_question", "en-US").unwrap();
    /// assert_eq!(texts.locale.as_deref(), Some("en"));
    /// ```
    pub fn texts(&self, name: &str, locale: &str) -> Option<ToolTexts> {
        self.get(name)
            .or_else(|| self.by_id(name))
            .map(|t| t.texts(locale, self.default_locale()))
    }

    /// The tools `audience` may use, described for people reading `locale` (see [`Catalog`]):
    /// built and serialized on first use, then shared, per audience and per locale the
    /// registry knows (locales it does not know share one catalog: base titles, no summaries).
    pub fn catalog(&self, audience: Audience, locale: &str) -> Arc<Catalog> {
        let slot = self.0.locales.slot(locale);
        self.0.catalogs.get(
            &self.0.tools,
            audience,
            (slot, locale, self.default_locale()),
        )
    }

    /// The tool list for `audience` in `format` with its user-facing texts in `locale`: in
    /// [`Format::Mcp`], each tool's `title` (and its annotations' `title`) resolved as
    /// [`Registry::texts`] does; the other formats carry no user-facing text, so this is
    /// [`Registry::list`]. Serialized on first use and cached per locale the registry knows.
    pub fn list_in(&self, audience: Audience, format: Format, locale: &str) -> &ToolList {
        match self.0.locales.slot(locale) {
            Slot::Other { index, tag } if format == Format::Mcp => {
                self.0
                    .localized
                    .get(&self.0.tools, audience, (index, tag, self.default_locale()))
            }
            // The default locale's titles are the base ones, and so are those of a locale
            // no tool has texts in.
            _ => self.list(audience, format),
        }
    }

    /// Whether `self` and `other` are the same registry (clones of one build), not merely equal:
    /// what a cache built from a registry compares to know it is still current.
    pub fn same(&self, other: &Registry) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Every tool, sorted by model-facing name.
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.0.tools
    }

    /// Remote tools that are not available, with the reason, by model-facing name.
    pub fn unavailable(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .unavailable
            .iter()
            .map(|(name, reason)| (name.as_str(), reason.as_str()))
    }

    /// The tool with model-facing name `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.0.by_name.get(name).map(|&i| &*self.0.tools[i])
    }

    /// The position of tool `name` in [`Registry::tools`] (a hash lookup, not a scan).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.0.by_name.get(name).copied()
    }

    /// The tool with id `id` (`toolset.name`).
    pub fn by_id(&self, id: &str) -> Option<&Tool> {
        self.0.by_id.get(id).map(|&i| &*self.0.tools[i])
    }

    /// The tool `name` as `caller` may call it: an unknown name, or one not visible to the
    /// caller, is an error naming similar tools the caller can see.
    pub fn resolve(&self, name: &str, caller: Caller) -> Result<&Tool, ToolError> {
        self.resolve_indexed(name, caller).map(|(_, tool)| tool)
    }

    /// [`Registry::resolve`], with the tool's position in [`Registry::tools`]: one lookup for
    /// what a caller that keeps per-position state (the runtime's switched-off tools) needs.
    pub fn resolve_indexed(&self, name: &str, caller: Caller) -> Result<(usize, &Tool), ToolError> {
        let audience = Audience::of(caller);
        let found = self.index_of(name).map(|i| (i, &*self.0.tools[i]));
        match found {
            Some((i, tool)) if tool.visible_to(audience) => Ok((i, tool)),
            Some((_, tool)) if audience == Audience::User && tool.provider().is_some() => {
                Err(ToolError::with_code(
                    ErrorCode::NotVisible,
                    format!(
                        "tool `{name}` is run by the model provider while it answers; it cannot be called directly"
                    ),
                ))
            }
            Some((_, tool)) if audience == Audience::Subagent && !tool.is_user_only() => {
                Err(ToolError::with_code(
                    ErrorCode::NotVisible,
                    format!(
                        "tool `{name}` is not available in delegated sessions; ask the parent session to call it"
                    ),
                ))
            }
            _ => Err(self.unknown(name, audience)),
        }
    }

    fn unknown(&self, name: &str, audience: Audience) -> ToolError {
        if let Some(reason) = self.0.unavailable.get(name) {
            return ToolError::with_code(
                ErrorCode::UnknownTool,
                format!(
                    "tool `{}` is not available: {reason}; use another tool",
                    quoted_prefix(name)
                ),
            );
        }
        if let Some((connection, reason)) = name
            .split_once(names::TOOLSET_SEPARATOR)
            .and_then(|(prefix, _)| self.0.offline.get_key_value(prefix))
        {
            return ToolError::with_code(
                ErrorCode::Unavailable,
                format!(
                    "tool `{}` belongs to connection `{connection}`, which has no tools now: {reason}; try again later or use another tool",
                    quoted_prefix(name)
                ),
            );
        }
        if !names::is_valid_name(name) {
            // No tool can have such a name; do not score (or echo whole) arbitrary text.
            return ToolError::with_code(
                ErrorCode::UnknownTool,
                format!(
                    "no tool named `{}`; tool names match ^[a-zA-Z0-9_-]{{1,64}}$, check the tool list",
                    quoted_prefix(name)
                ),
            );
        }
        let visible = self
            .0
            .tools
            .iter()
            .filter(|t| t.visible_to(audience))
            .map(|t| t.name());
        let similar = names::similar(name, visible);
        let hint = match similar.as_slice() {
            [] => String::from("check the tool list for the right name"),
            [one] => format!("did you mean `{one}`?"),
            many => format!(
                "similar tools: {}",
                many.iter()
                    .take(5)
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        ToolError::with_code(
            ErrorCode::UnknownTool,
            format!("no tool named `{name}`; {hint}"),
        )
    }

    /// Calls tool `name` directly with `input` on a detached context (called by the model).
    ///
    /// For tests, examples and scripts: validation, defaults, execution and the output check,
    /// without the runtime's approvals, taint or events.
    pub async fn call(&self, name: &str, input: Value) -> Result<CallOutput, ToolError> {
        self.call_with(name, input, CallContext::builder()).await
    }

    /// Calls tool `name` with a context built from `context` (its tool name is set here).
    pub async fn call_with(
        &self,
        name: &str,
        input: Value,
        context: CallContextBuilder,
    ) -> Result<CallOutput, ToolError> {
        let tool = self.resolve(name, context.current_caller())?;
        let cx = context.shared_tool_name(tool.shared_name()).build();
        tool.call(input, cx).await
    }

    /// Deferred tools visible to `audience` that match `query` (words in the name, the
    /// description, and the title and summary in every locale the tool has), best first.
    pub fn search(&self, query: &str, audience: Audience) -> Vec<&Tool> {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let mut scored: Vec<(usize, &Tool)> = self
            .0
            .tools
            .iter()
            .filter(|t| t.is_deferred() && t.visible_to(audience) && !t.is_withheld())
            .filter_map(|t| {
                let haystack = search_text(t);
                let score = words
                    .iter()
                    .filter(|w| haystack.contains(w.as_str()))
                    .count();
                (score > 0 || words.is_empty()).then_some((score, &**t))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.name().cmp(b.1.name())));
        scored.into_iter().map(|(_, t)| t).collect()
    }

    /// Whether `audience` has deferred tools (and so the `tool_search`/`tool_call` meta-tools).
    pub fn has_deferred(&self, audience: Audience) -> bool {
        list::has_deferred(&self.0.tools, audience)
    }

    /// Whether `audience` can call `task` or `serve` workflow tools (and so the `task_wait` and
    /// `task_cancel` meta-tools).
    pub fn has_tasks(&self, audience: Audience) -> bool {
        list::has_tasks(&self.0.tools, audience)
    }

    /// The tool list for `audience` in `format`, serialized on first use and cached.
    pub fn list(&self, audience: Audience, format: Format) -> &ToolList {
        self.0.lists.get(&self.0.tools, audience, format)
    }
}

/// What [`Registry::search`] matches a query's words in: the tool's name, description, and
/// its titles and summaries in every locale, lowercased.
fn search_text(tool: &Tool) -> String {
    let mut text = format!("{} {}", tool.name(), tool.description());
    let localized = tool.i18n().iter().flat_map(|t| [t.title, t.summary]);
    for part in [tool.title(), tool.summary()]
        .into_iter()
        .chain(localized)
        .flatten()
    {
        text.push(' ');
        text.push_str(part);
    }
    text.to_lowercase()
}

#[cfg(test)]
mod tests {
    use crate::services::Services;
    use futures_util::FutureExt;
    use serde_json::json;

    use super::*;
    use crate::descriptor::DescribeFn;
    use crate::effect::Effect;
    use crate::provider::ProviderTool;
    use crate::remote::{RemoteDefinition, RemoteInvoke, RemotePolicy};

    fn web_search() -> ProviderTool {
        ProviderTool::web_search()
    }

    fn openai_only() -> ProviderTool {
        ProviderTool::new()
            .openai(json!({ "type": "code_interpreter", "container": { "type": "auto" } }))
    }

    fn nothing() -> ProviderTool {
        ProviderTool::new()
    }

    fn panics() -> ProviderTool {
        panic!("no API key configured")
    }

    const fn provider_tool(
        name: &'static str,
        build: crate::descriptor::ProviderFn,
    ) -> ToolDescriptor {
        let location = Location {
            file: file!(),
            line: line!(),
            column: column!(),
            module_path: module_path!(),
        };
        ToolDescriptor {
            untrusted: true,
            projected: false,
            provider: Some(build),
            ..ToolDescriptor::plain(
                name,
                "Runs at the provider.",
                Effect::Read,
                crate::private::PROVIDER_INPUT,
                crate::private::provider_invoke,
                location,
            )
        }
    }

    static WEB_SEARCH: ToolDescriptor = provider_tool("web_search", web_search);
    static RUN_CODE: ToolDescriptor = provider_tool("run_code", openai_only);
    static SEARCH: ToolDescriptor = provider_tool("search", web_search);
    static EMPTY: ToolDescriptor = provider_tool("empty", nothing);
    static PANICS: ToolDescriptor = provider_tool("panics", panics);
    static DEFERRED: ToolDescriptor = ToolDescriptor {
        deferred: true,
        ..provider_tool("deferred_search", openai_only)
    };

    fn problems(descriptor: &'static ToolDescriptor) -> Vec<String> {
        Registry::from_tools([descriptor])
            .expect_err("refused")
            .problems
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn provider_tools_are_listed_in_their_providers_format() {
        let registry = Registry::from_tools([&WEB_SEARCH, &RUN_CODE]).unwrap();
        let tool = registry.get("web_search").unwrap();
        assert_eq!(tool.provider(), Some(&ProviderTool::web_search()));
        assert!(tool.descriptor().is_some());

        let list = |format| -> Value {
            serde_json::from_str(registry.list(Audience::Model, format).json()).unwrap()
        };
        assert_eq!(
            list(Format::OpenAi),
            json!([
                { "type": "code_interpreter", "container": { "type": "auto" } },
                { "type": "web_search" }
            ])
        );
        assert_eq!(list(Format::OpenAiStrict), list(Format::OpenAi));
        assert_eq!(list(Format::OpenAiResponses), list(Format::OpenAi));
        assert_eq!(
            list(Format::Anthropic),
            json!([{ "type": "web_search_20250305", "name": "web_search" }])
        );
        assert_eq!(
            registry.list(Audience::Model, Format::Anthropic).notes(),
            ["run_code: not sent to Anthropic: no anthropic configuration"]
        );
        assert_eq!(list(Format::Mcp), json!([]));
        assert_eq!(registry.list(Audience::Model, Format::Mcp).notes().len(), 2);

        // Entries point at their tool, so a runtime can leave out a disabled one.
        let entries = registry.list(Audience::Model, Format::Anthropic).entries();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].tool, registry.index_of("web_search"));
    }

    #[test]
    fn provider_tools_are_the_models_only() {
        let registry = Registry::from_tools([&WEB_SEARCH]).unwrap();
        let tool = registry.get("web_search").unwrap();
        assert!(tool.visible_to(Audience::Model));
        assert!(tool.visible_to(Audience::Subagent));
        assert!(!tool.visible_to(Audience::User));
        for format in Format::ALL {
            assert_eq!(registry.list(Audience::User, format).json(), "[]");
            assert!(registry.list(Audience::User, format).notes().is_empty());
        }
        let error = registry.resolve("web_search", Caller::User).unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotVisible);
        assert!(
            error.message().contains("run by the model provider"),
            "{error}"
        );
        assert!(registry.resolve("web_search", Caller::Model).is_ok());
    }

    #[test]
    fn a_resolved_tool_comes_with_its_position() {
        let registry = Registry::from_tools([&WEB_SEARCH, &RUN_CODE]).unwrap();
        for (i, tool) in registry.tools().iter().enumerate() {
            let (at, found) = registry
                .resolve_indexed(tool.name(), Caller::Model)
                .unwrap();
            assert_eq!((at, found.name()), (i, tool.name()));
        }
        let hidden = registry.resolve_indexed("web_search", Caller::User);
        assert_eq!(hidden.unwrap_err().code(), ErrorCode::NotVisible);
        let unknown = registry
            .resolve_indexed("web_serch", Caller::Model)
            .unwrap_err();
        assert_eq!(unknown.code(), ErrorCode::UnknownTool);
        assert!(unknown.message().contains("web_search"), "{unknown}");
    }

    #[test]
    fn the_runtime_cannot_run_a_provider_tool() {
        let registry = Registry::from_tools([&WEB_SEARCH]).unwrap();
        let error = registry
            .call("web_search", json!({}))
            .now_or_never()
            .expect("nothing to wait for")
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotVisible);
        assert!(
            error
                .message()
                .starts_with("tool `web_search` is run by the model provider"),
            "{error}"
        );
    }

    #[test]
    fn provider_configurations_that_cannot_work_are_refused() {
        let mismatch = problems(&SEARCH);
        assert_eq!(mismatch.len(), 1, "{mismatch:?}");
        assert!(
            mismatch[0].starts_with("provider tool `search` at "),
            "{mismatch:?}"
        );
        assert!(
            mismatch[0].contains("names the tool `web_search`, but the tool is named `search`"),
            "{mismatch:?}"
        );
        assert!(problems(&EMPTY)[0].contains("no configuration for any provider"));
        assert!(
            problems(&PANICS)[0]
                .contains("panicked while building the configuration: no API key configured")
        );
        assert!(problems(&DEFERRED)[0].contains("it is `deferred`"));
    }

    /// The component catalog of a device: the host service a description reads.
    struct Catalog(&'static str);

    fn describe_catalog(services: &Services<'_>) -> String {
        match services.get::<Catalog>() {
            Some(catalog) => format!("Shows a native UI. Components: {}.", catalog.0),
            None => "Shows a native UI.".to_owned(),
        }
    }

    fn blank_with_a_host(services: &Services<'_>) -> String {
        match services.get::<Catalog>() {
            Some(_) => " \n".to_owned(),
            None => "Shows a native UI.".to_owned(),
        }
    }

    fn panics_without_a_host(services: &Services<'_>) -> String {
        services.get::<Catalog>().expect("no catalog").0.to_owned()
    }

    /// A plain tool (`ask_question`'s schema, another name) with the description fn `describe`.
    fn described(name: &'static str, describe: DescribeFn) -> &'static ToolDescriptor {
        Box::leak(Box::new(ToolDescriptor {
            fn_name: name,
            name,
            description: "The doc comment.",
            describe: Some(describe),
            ..*crate::builtin::ask_question()
        }))
    }

    fn host() -> HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>> {
        let mut states: HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>> =
            HashMap::new();
        states.insert(
            std::any::TypeId::of::<Catalog>(),
            Arc::new(Catalog("card, list")),
        );
        states
    }

    #[test]
    fn describe_recomputes_only_the_tools_with_a_description_fn() {
        let ui = described("native_ui", describe_catalog);
        let registry = Registry::from_tools([ui, crate::builtin::ask_question()]).unwrap();
        let before = registry
            .list(Audience::Model, Format::Anthropic)
            .json()
            .to_owned();
        assert_eq!(
            registry.get("native_ui").unwrap().description(),
            "Shows a native UI."
        );

        let states = host();
        let described = registry.describe(&Services::new(&states)).unwrap();
        assert!(!described.same(&registry));
        let text = "Shows a native UI. Components: card, list.";
        assert_eq!(described.get("native_ui").unwrap().description(), text);
        assert!(
            described
                .list(Audience::Model, Format::Anthropic)
                .json()
                .contains(text)
        );
        // Tools without a fn are shared, not rebuilt; the old registry and its lists stay.
        assert!(Arc::ptr_eq(&registry.tools()[0], &described.tools()[0]));
        assert_eq!(registry.tools()[0].name(), "ask_question");
        assert_eq!(
            registry.list(Audience::Model, Format::Anthropic).json(),
            before
        );
        assert_eq!(
            registry.get("native_ui").unwrap().description(),
            "Shows a native UI."
        );
        // The descriptor keeps the literal (the doc comment); `Tool::description` is the text.
        assert_eq!(
            described
                .get("native_ui")
                .unwrap()
                .descriptor()
                .unwrap()
                .description,
            "The doc comment."
        );
    }

    #[test]
    fn described_texts_survive_adding_sandbox_tools_and_remote_tools() {
        let registry = Registry::from_tools([described("native_ui", describe_catalog)]).unwrap();
        let states = host();
        let described = registry.describe(&Services::new(&states)).unwrap();
        let text = "Shows a native UI. Components: card, list.";
        let sandboxed = described.with_sandbox_tools(&[]).unwrap();
        assert_eq!(sandboxed.get("native_ui").unwrap().description(), text);
        let joined = described.with_remote([], [], []);
        assert_eq!(joined.get("native_ui").unwrap().description(), text);
    }

    struct NoServer;

    impl RemoteInvoke for NoServer {
        fn invoke(
            &self,
            _: Value,
            _: CallContext,
        ) -> futures_util::future::BoxFuture<'static, Result<CallOutput, ToolError>> {
            Box::pin(async { Err(ToolError::new("not called in these tests")) })
        }
    }

    #[test]
    fn describe_keeps_remote_tools_and_the_reasons_others_are_missing() {
        let remote = Tool::remote(
            "srv",
            RemoteDefinition {
                name: "lookup".into(),
                title: None,
                description: Some("Looks a thing up.".into()),
                input_schema: json!({ "type": "object" }),
                output_schema: None,
                annotations: None,
            },
            RemotePolicy::UNTRUSTED,
            Arc::new(NoServer),
            None,
        )
        .unwrap();
        let registry = Registry::from_tools([described("native_ui", describe_catalog)])
            .unwrap()
            .with_remote(
                [Arc::new(remote)],
                [("srv__broken".to_owned(), "its schema is broken".to_owned())],
                [("down".to_owned(), "it is down".to_owned())],
            );
        let states = host();
        let described = registry.describe(&Services::new(&states)).unwrap();
        assert!(Arc::ptr_eq(&registry.tools()[1], &described.tools()[1]));
        assert_eq!(
            described.get("srv__lookup").unwrap().description(),
            "Looks a thing up."
        );
        assert_eq!(
            described.unavailable().collect::<Vec<_>>(),
            [("srv__broken", "its schema is broken")]
        );
        let error = described.resolve("down__x", Caller::Model).unwrap_err();
        assert_eq!(error.code(), ErrorCode::Unavailable);
    }

    #[test]
    fn description_fns_that_fail_name_their_tool() {
        let registry = Registry::from_tools([described("blank_ui", blank_with_a_host)]).unwrap();
        let states = host();
        let error = registry.describe(&Services::new(&states)).unwrap_err();
        assert_eq!(error.problems.len(), 1, "{error}");
        let message = error.problems[0].to_string();
        assert!(message.starts_with("tool `blank_ui` at "), "{message}");
        assert!(
            message.contains("its description fn returned empty text; the model needs"),
            "{message}"
        );

        let error =
            Registry::from_tools([described("fragile_ui", panics_without_a_host)]).unwrap_err();
        let message = error.problems[0].to_string();
        assert!(message.starts_with("tool `fragile_ui` at "), "{message}");
        assert!(
            message.contains("panicked when called without host services"),
            "{message}"
        );
        assert!(
            message.contains(": no catalog; return a fallback"),
            "{message}"
        );
    }

    /// A plain tool (`ask_question`'s schema, another name) with `input_retries` set by hand.
    fn retrying(name: &'static str, input_retries: Option<u8>) -> &'static ToolDescriptor {
        Box::leak(Box::new(ToolDescriptor {
            fn_name: name,
            name,
            input_retries,
            ..*crate::builtin::ask_question()
        }))
    }

    #[test]
    fn tools_report_their_input_retries() {
        let registry = Registry::from_tools([
            retrying("strict", Some(0)),
            retrying("patient", Some(ToolDescriptor::MAX_INPUT_RETRIES)),
            retrying("unset", None),
        ])
        .unwrap();
        let retries = |name| registry.get(name).unwrap().input_retries();
        assert_eq!(retries("strict"), Some(0));
        assert_eq!(retries("patient"), Some(10));
        // Without the key, the model loop's default applies.
        assert_eq!(retries("unset"), None);
        assert_eq!(crate::builtin::ask_question().input_retries, None);
    }

    #[test]
    fn input_retries_the_macro_refuses_are_refused_by_hand_too() {
        let over = problems(retrying("eager", Some(11)));
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0].starts_with("tool `eager` at "), "{over:?}");
        assert!(
            over[0].contains("sets `input_retries` to 11, over the most a tool may set (10)"),
            "{over:?}"
        );
        let provider: &'static ToolDescriptor = Box::leak(Box::new(ToolDescriptor {
            input_retries: Some(1),
            ..provider_tool("retried_search", openai_only)
        }));
        let refused = problems(provider);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].contains("it sets `input_retries`, but the provider runs the call"),
            "{refused:?}"
        );
    }
}
