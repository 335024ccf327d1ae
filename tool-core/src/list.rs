//! Model-facing tool lists: every tool an audience sees, exported in one format and serialized
//! once, with the meta-tools that audience needs; cached per audience and format, and MCP lists
//! (which carry titles) per locale too.

use std::sync::{Arc, OnceLock};

use crate::descriptor::ToolKind;
use crate::export::{self, Format};
use crate::tool::{Audience, Tool};
use crate::workflow::Entry;

/// A model-facing tool list, serialized once.
#[derive(Debug)]
pub struct ToolList {
    json: Box<str>,
    entries: Vec<ListEntry>,
    notes: Vec<String>,
}

/// One tool of a [`ToolList`], serialized alone (so a runtime can splice lists for conditional
/// tools without serializing again).
#[derive(Debug)]
pub struct ListEntry {
    /// The model-facing name (a meta-tool's name for `tool_search`/`tool_call`).
    pub name: String,
    /// Index into [`Registry::tools`](crate::Registry::tools), `None` for meta-tools.
    pub tool: Option<usize>,
    /// The serialized tool object.
    pub json: Box<serde_json::value::RawValue>,
}

impl ToolList {
    /// The whole list as a JSON array.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Each tool, serialized alone.
    pub fn entries(&self) -> &[ListEntry] {
        &self.entries
    }

    /// Remarks from the export (e.g. why a tool could not be made strict).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

/// The lists of one set of tools, one per audience and format, each built on first use.
#[derive(Default)]
pub(crate) struct Lists([[OnceLock<ToolList>; Format::COUNT]; Audience::ALL.len()]);

impl Lists {
    /// The list of `tools` for `audience` in `format`. `tools` must be the same on every call:
    /// the first call builds the list and later ones return it.
    pub(crate) fn get(&self, tools: &[Arc<Tool>], audience: Audience, format: Format) -> &ToolList {
        self.0[audience.index()][format.index()]
            .get_or_init(|| build(tools, audience, format, None))
    }
}

/// The MCP lists of one set of tools for each locale other than the default (the only format
/// that carries a user-facing text, the title), one per audience, each built on first use. The
/// default locale and locales the registry does not know list the base titles: the base lists.
pub(crate) struct LocalizedLists(Vec<[OnceLock<ToolList>; Audience::ALL.len()]>);

impl LocalizedLists {
    /// Room for the lists of `locales` locales.
    pub(crate) fn new(locales: usize) -> Self {
        LocalizedLists((0..locales).map(|_| Default::default()).collect())
    }

    /// The MCP list of `tools` for `audience` with the titles of locale `tag`, the `slot`-th
    /// other locale of a registry whose default locale is `default`.
    pub(crate) fn get(
        &self,
        tools: &[Arc<Tool>],
        audience: Audience,
        (slot, tag, default): (usize, &str, &str),
    ) -> &ToolList {
        self.0[slot][audience.index()]
            .get_or_init(|| build(tools, audience, Format::Mcp, Some((tag, default))))
    }
}

/// Whether `audience` has deferred tools among `tools` (and so the `tool_search`/`tool_call`
/// meta-tools).
pub(crate) fn has_deferred(tools: &[Arc<Tool>], audience: Audience) -> bool {
    audience != Audience::User
        && tools
            .iter()
            .any(|t| t.is_deferred() && t.visible_to(audience) && !t.is_withheld())
}

/// Whether `audience` can call `task` or `serve` workflow tools among `tools` (and so the
/// `task_wait` and `task_cancel` meta-tools).
pub(crate) fn has_tasks(tools: &[Arc<Tool>], audience: Audience) -> bool {
    audience != Audience::User
        && tools.iter().any(|t| {
            matches!(t.kind(), ToolKind::Workflow(Entry::Task | Entry::Serve))
                && t.visible_to(audience)
        })
}

/// The list of `tools` for `audience` in `format`: each listed tool in order, then the
/// meta-tools, each entry serialized alone and the whole list joined from them.
/// What gives a tool's title in a localized list.
/// With `title`, MCP entries carry the title it gives each tool (a locale's).
fn build(
    tools: &[Arc<Tool>],
    audience: Audience,
    format: Format,
    locale: Option<(&str, &str)>,
) -> ToolList {
    let mut entries = Vec::new();
    let mut notes = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        if !tool.listed_for(audience) {
            continue;
        }
        let (value, note) = match locale {
            Some(locale) => export::export_in(tool, audience, format, locale),
            None => export::export(tool, audience, format),
        };
        if let Some(note) = note {
            notes.push(format!("{}: {note}", tool.name()));
        }
        // A provider tool without a configuration for this provider has no entry here.
        let Some(value) = value else { continue };
        entries.push(ListEntry {
            name: tool.name().to_owned(),
            tool: Some(index),
            json: serde_json::value::to_raw_value(&value).expect("JSON values serialize"),
        });
    }
    let mut meta = Vec::new();
    if has_deferred(tools, audience) {
        meta.extend(export::meta_tools(format));
    }
    if has_tasks(tools, audience) {
        meta.extend(export::task_meta_tools(format));
    }
    for (name, value) in meta {
        entries.push(ListEntry {
            name: name.to_owned(),
            tool: None,
            json: serde_json::value::to_raw_value(&value).expect("JSON values serialize"),
        });
    }
    let mut json = String::from("[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(entry.json.get());
    }
    json.push(']');
    ToolList {
        json: json.into_boxed_str(),
        entries,
        notes,
    }
}
