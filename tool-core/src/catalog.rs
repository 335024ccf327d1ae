//! The catalog: the tools an audience may use, described for people in one locale (names,
//! resolved titles and summaries, effect, approval, visibility, kind and schemas), what a
//! review page or a settings page renders. Built once per audience and locale slot, and
//! serialized once.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::approval::RequestPolicy;
use crate::descriptor::ToolKind;
use crate::effect::Effect;
use crate::locale::{Slot, ToolTexts};
use crate::tool::{Audience, Tool};

/// The tools an audience may use, described in one locale: [`Registry::catalog`](crate::Registry::catalog).
///
/// Serializes as the JSON array of its entries (the text of [`Catalog::json`]).
///
/// ```
/// # use toolwright_core::{Audience, Registry};
/// let registry = Registry::from_tools([toolwright_core::ask_question()]).unwrap();
/// let catalog = registry.catalog(Audience::Model, "zh-CN");
/// assert_eq!(catalog.entries()[0].name, "ask_question");
/// assert!(catalog.json().starts_with('['));
/// ```
#[derive(Debug)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
    json: Box<str>,
}

/// One tool of a [`Catalog`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// The model-facing name (`toolset__name`): what calls name.
    pub name: String,
    /// The id (`toolset.name`).
    pub id: String,
    /// The toolset, or for a remote tool its connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset: Option<String>,
    /// The title and summary in the catalog's locale (flattened: `title`, `summary`, `locale`,
    /// `title_fallback`).
    #[serde(flatten)]
    pub texts: ToolTexts,
    /// What the tool does.
    pub effect: Effect,
    /// Whether a call waits for a person's approval.
    pub approval: ApprovalPolicy,
    /// Who sees the tool, and when.
    pub visibility: Visibility,
    /// Plain, durable or workflow (with its entry).
    pub kind: ToolKind,
    /// Where the tool comes from.
    pub origin: ToolOrigin,
    /// The model-facing input schema.
    pub input_schema: Value,
    /// The published output schema, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// The request policy of a tool, by name (a custom fn's details stay in the program).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Calls run without asking.
    Never,
    /// The first call per session and person asks; later ones run.
    Once,
    /// Every call asks.
    Always,
    /// A decider judges each call; anything but a clear yes asks a person.
    Auto,
    /// A fn of the program decides per call.
    Custom,
}

impl ApprovalPolicy {
    fn of(tool: &Tool) -> ApprovalPolicy {
        match tool.approval().map(|a| a.request) {
            None | Some(RequestPolicy::Never) => ApprovalPolicy::Never,
            Some(RequestPolicy::Once) => ApprovalPolicy::Once,
            Some(RequestPolicy::Always) => ApprovalPolicy::Always,
            Some(RequestPolicy::Auto(_)) => ApprovalPolicy::Auto,
            Some(RequestPolicy::Custom(_)) => ApprovalPolicy::Custom,
        }
    }
}

/// Who sees a tool, and when: everything the registry knows (a session's state and `prepare`
/// fns decide the rest at each step).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Visibility {
    /// Only people call it (`user_only`): the model never sees it.
    pub user_only: bool,
    /// Left out of the model's list, found through `tool_search` (`deferred`).
    pub deferred: bool,
    /// Hidden at a step when its `enabled` predicate is false or a `prepare` fn hides it.
    pub conditional: bool,
    /// A remote tool whose server changed its definition: listed nowhere, and every call
    /// waits for a person, until someone approves the new definition.
    pub withheld: bool,
    /// Offered in delegated (subagent) sessions.
    pub subagents: bool,
}

/// Where a tool comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOrigin {
    /// A `#[tool]` of this program, or a built-in.
    Local,
    /// A tool of a remote MCP server, through a connection.
    Remote,
    /// A provider-native tool: the model provider runs it.
    Provider,
    /// A tool the host defined from data at run time ([`crate::DynamicTool`]).
    Dynamic,
}

impl Catalog {
    /// Every entry, sorted by model-facing name.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// The entry of tool `name` (model-facing name or id).
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries.iter().find(|e| e.name == name || e.id == name)
    }

    /// The entries as a JSON array, serialized once.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// A catalog of the entries `keep` keeps (a session limited to some tools), serialized
    /// anew.
    pub fn filtered(&self, keep: impl Fn(&CatalogEntry) -> bool) -> Catalog {
        Catalog::of(self.entries.iter().filter(|e| keep(e)).cloned().collect())
    }

    fn of(entries: Vec<CatalogEntry>) -> Catalog {
        let json = serde_json::to_string(&entries).expect("catalog entries serialize");
        Catalog {
            entries,
            json: json.into_boxed_str(),
        }
    }
}

impl Serialize for Catalog {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.entries.serialize(serializer)
    }
}

/// The catalog of `tools` for `audience`, with texts for `locale` in a registry whose default
/// locale is `default`.
fn build(tools: &[Arc<Tool>], audience: Audience, locale: &str, default: &str) -> Catalog {
    let entries = tools
        .iter()
        .filter(|t| t.visible_to(audience))
        .map(|tool| entry(tool, locale, default))
        .collect();
    Catalog::of(entries)
}

fn entry(tool: &Tool, locale: &str, default: &str) -> CatalogEntry {
    let toolset = match (tool.descriptor(), tool.remote_tool()) {
        (Some(d), _) => d.toolset.map(str::to_owned),
        (None, Some(remote)) => Some(remote.connection().to_owned()),
        (None, None) => None,
    };
    let origin = if tool.provider().is_some() {
        ToolOrigin::Provider
    } else if tool.remote_tool().is_some() {
        ToolOrigin::Remote
    } else if tool.dynamic_tool().is_some() {
        ToolOrigin::Dynamic
    } else {
        ToolOrigin::Local
    };
    CatalogEntry {
        name: tool.name().to_owned(),
        id: tool.id().to_owned(),
        toolset,
        texts: tool.texts(locale, default),
        effect: tool.effect(),
        approval: ApprovalPolicy::of(tool),
        visibility: Visibility {
            user_only: tool.is_user_only(),
            deferred: tool.is_deferred(),
            conditional: tool.enabled().is_some() || tool.prepare().is_some(),
            withheld: tool.is_withheld(),
            subagents: tool.for_subagents(),
        },
        kind: tool.kind(),
        origin,
        input_schema: tool.input_schema().clone(),
        output_schema: tool.output_schema().cloned(),
    }
}

/// The catalogs of one set of tools: per locale slot (the default, unknown locales, then each
/// other locale the registry knows) and audience, each built on first use.
pub(crate) struct Catalogs(Vec<[OnceLock<Arc<Catalog>>; Audience::ALL.len()]>);

impl Catalogs {
    /// Room for the catalogs of a registry with `others` locales beside its default.
    pub(crate) fn new(others: usize) -> Self {
        Catalogs((0..others + 2).map(|_| Default::default()).collect())
    }

    /// The catalog of `tools` for `audience` in `slot`, `requested` being a locale that lands
    /// there (every such locale resolves every tool alike).
    pub(crate) fn get(
        &self,
        tools: &[Arc<Tool>],
        audience: Audience,
        (slot, requested, default): (Slot<'_>, &str, &str),
    ) -> Arc<Catalog> {
        let (index, locale) = match slot {
            Slot::Default => (0, default),
            Slot::Unknown => (1, requested),
            Slot::Other { index, tag } => (index + 2, tag),
        };
        let cell = &self.0[index][audience.index()];
        Arc::clone(cell.get_or_init(|| Arc::new(build(tools, audience, locale, default))))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::descriptor::{LocaleText, ToolDescriptor};
    use crate::export::Format;
    use crate::registry::Registry;
    use crate::tool::Audience;

    /// `ask_question`'s schema under another name, with the texts given.
    fn texts(
        name: &'static str,
        title: &'static str,
        summary: &'static str,
        i18n: &'static [LocaleText],
        deferred: bool,
    ) -> &'static ToolDescriptor {
        Box::leak(Box::new(ToolDescriptor {
            fn_name: name,
            name,
            title: Some(title),
            summary: Some(summary),
            i18n,
            deferred,
            ..*crate::builtin::ask_question()
        }))
    }

    fn registry() -> Registry {
        Registry::from_tools([
            texts(
                "restart",
                "重启服务",
                "重启一个服务",
                &[LocaleText {
                    locale: "en",
                    title: Some("Restart service"),
                    summary: Some("Restarts a service"),
                }],
                true,
            ),
            texts(
                "logs",
                "查看日志",
                "读取最近的日志",
                &[LocaleText {
                    locale: "en",
                    title: Some("Read logs"),
                    summary: None,
                }],
                false,
            ),
        ])
        .unwrap()
        .with_default_locale("zh")
        .unwrap()
    }

    fn summaries(registry: &Registry, locale: &str) -> Vec<(String, Option<String>)> {
        registry
            .catalog(Audience::Model, locale)
            .entries()
            .iter()
            .map(|e| (e.texts.title.clone().unwrap(), e.texts.summary.clone()))
            .collect()
    }

    #[test]
    fn catalogs_resolve_texts_per_locale_and_are_shared() {
        let registry = registry();
        let pair = |t: &str, s: Option<&str>| (t.to_owned(), s.map(str::to_owned));
        assert_eq!(
            summaries(&registry, "zh-CN"),
            [
                pair("查看日志", Some("读取最近的日志")),
                pair("重启服务", Some("重启一个服务")),
            ]
        );
        assert_eq!(
            summaries(&registry, "en-US"),
            [
                pair("Read logs", None),
                pair("Restart service", Some("Restarts a service")),
            ]
        );
        // A locale nobody wrote texts in: base titles, no summaries.
        assert_eq!(
            summaries(&registry, "fr"),
            [pair("查看日志", None), pair("重启服务", None)]
        );
        // Built once per locale the registry knows: `en` and `en-GB` share one.
        let en = registry.catalog(Audience::Model, "en");
        assert!(std::sync::Arc::ptr_eq(
            &en,
            &registry.catalog(Audience::Model, "EN_gb")
        ));
        let json: Value = serde_json::from_str(en.json()).unwrap();
        assert_eq!(json, serde_json::to_value(&*en).unwrap());
        assert_eq!(json[1]["title"], "Restart service");
        assert_eq!(json[1]["locale"], "en");
        assert_eq!(json[1]["visibility"]["deferred"], true);
        assert_eq!(json[1]["approval"], "never");
        assert_eq!(json[1]["kind"], "plain");
        assert_eq!(json[1]["origin"], "local");
        assert_eq!(json[1]["effect"], "read");
        assert!(json[0].get("summary").is_none(), "{json}");
    }

    #[test]
    fn mcp_lists_carry_the_locales_titles() {
        let registry = registry();
        let titles = |locale: &str| -> Vec<Value> {
            let list: Value =
                serde_json::from_str(registry.list_in(Audience::User, Format::Mcp, locale).json())
                    .unwrap();
            list.as_array()
                .unwrap()
                .iter()
                .map(|t| json!([t["title"], t["annotations"]["title"]]))
                .collect()
        };
        assert_eq!(
            titles("en-AU"),
            [
                json!(["Read logs", "Read logs"]),
                json!(["Restart service", "Restart service"])
            ]
        );
        assert_eq!(
            titles("zh"),
            [
                json!(["查看日志", "查看日志"]),
                json!(["重启服务", "重启服务"])
            ]
        );
        // The default locale's list is the base list; other formats have no titles.
        assert!(std::ptr::eq(
            registry.list_in(Audience::User, Format::Mcp, "zh-TW"),
            registry.list(Audience::User, Format::Mcp)
        ));
        assert!(std::ptr::eq(
            registry.list_in(Audience::Model, Format::Anthropic, "en"),
            registry.list(Audience::Model, Format::Anthropic)
        ));
        assert!(std::ptr::eq(
            registry.list_in(Audience::User, Format::Mcp, "en"),
            registry.list_in(Audience::User, Format::Mcp, "en-US")
        ));
    }

    #[test]
    fn search_matches_every_locales_texts() {
        let registry = registry();
        let found = |query: &str| -> Vec<String> {
            registry
                .search(query, Audience::Model)
                .iter()
                .map(|t| t.name().to_owned())
                .collect()
        };
        assert_eq!(found("restart service"), ["restart"]);
        assert_eq!(found("重启服务"), ["restart"]);
        assert_eq!(found("restarts"), ["restart"]);
        assert!(found("日志").is_empty(), "`logs` is not deferred");
    }

    #[test]
    fn the_default_locale_survives_derived_registries() {
        let registry = registry();
        let joined = registry.with_remote([], [], []);
        assert_eq!(joined.default_locale(), "zh");
        let described = joined.describe(&crate::Services::none()).unwrap();
        assert_eq!(described.default_locale(), "zh");
        let sandboxed = described.with_sandbox_tools(&[]).unwrap();
        assert_eq!(sandboxed.default_locale(), "zh");
        assert_eq!(
            sandboxed.texts("restart", "zh").unwrap().summary.as_deref(),
            Some("重启一个服务")
        );
        let error = registry.with_default_locale("zh hans").unwrap_err();
        assert!(
            error.to_string().contains("`zh hans` is not a locale"),
            "{error}"
        );
    }
}
