//! Registries built from another: remote tools joined, tools defined at run time in place of
//! the last ones, descriptions computed from the host's services, the sandbox's tools added.
//! Each shares the tools it keeps and builds and caches its own lists.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Registry, RegistryError, RegistryProblem, Tool};
use crate::approval::ApprovalSpec;
use crate::locale as locales;
use crate::services::Services;
use crate::tool::run_describe;

impl Registry {
    /// This registry's own tools (shared, not rebuilt) joined by the tools of remote
    /// connections. `unavailable` names remote tools that could not be built, with the reason
    /// (a call to one fails with it); `offline` names connections that have no tools now, with
    /// the reason (a call to any `<connection>__...` name fails with it).
    ///
    /// A remote tool that takes the name or id of a tool already here (a local one, or an
    /// earlier remote one: a server listing a name twice) is left out and named unavailable:
    /// one server's mistake never holds back the others' lists.
    pub fn with_remote(
        &self,
        remote: impl IntoIterator<Item = Arc<Tool>>,
        unavailable: impl IntoIterator<Item = (String, String)>,
        offline: impl IntoIterator<Item = (String, String)>,
    ) -> Registry {
        let mut unavailable: HashMap<String, String> = unavailable.into_iter().collect();
        let (tools, taken) = self.joined(|t| t.remote_tool().is_none(), remote);
        for tool in taken {
            unavailable.insert(
                tool.name().to_owned(),
                "another tool has its name; its server lists it twice, or a local tool took it"
                    .into(),
            );
        }
        Self::assemble(
            tools,
            unavailable,
            offline.into_iter().collect(),
            self.default_locale(),
        )
    }

    /// This registry with `dynamic` as its tools defined at run time ([`Tool::dynamic`]), in
    /// place of those it had; every other tool is shared as it is. Fails, naming the tool, when
    /// one of them takes the name or id of another tool (or of one before it in `dynamic`).
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolwright_core::{DynamicTool, Effect, Registry, Tool};
    /// let tool = |name: &str| {
    ///     let defined = DynamicTool::new(name, Effect::Read)
    ///         .description("Reads one thing.")
    ///         .input_schema(json!({ "type": "object" }))
    ///         .handler(|_, _| async { Ok(json!(1)) });
    ///     std::sync::Arc::new(Tool::dynamic(defined).unwrap())
    /// };
    /// let registry = Registry::from_tools([toolwright_core::ask_question()]).unwrap();
    /// let with = registry.with_dynamic([tool("read_one")]).unwrap();
    /// assert!(with.get("read_one").is_some());
    /// assert!(with.with_dynamic([]).unwrap().get("read_one").is_none());
    /// assert!(registry.with_dynamic([tool("read_one"), tool("read_one")]).is_err());
    /// ```
    pub fn with_dynamic(
        &self,
        dynamic: impl IntoIterator<Item = Arc<Tool>>,
    ) -> Result<Registry, RegistryError> {
        let (tools, taken) = self.joined(|t| t.dynamic_tool().is_none(), dynamic);
        if !taken.is_empty() {
            let problems = taken
                .iter()
                .map(|t| RegistryProblem::Taken {
                    name: t.name().to_owned(),
                })
                .collect();
            return Err(RegistryError { problems });
        }
        Ok(Self::assemble(
            tools,
            self.0.unavailable.clone(),
            self.0.offline.clone(),
            self.default_locale(),
        ))
    }

    /// This registry with the description of each tool that has a description fn
    /// (`#[tool(description = path)]`) computed again from the host's `services`: what a runtime
    /// does once, when it is built, so the model sees text that fits the host. Other tools are
    /// shared as they are, remote tools included; the new registry builds and caches its own
    /// lists (this one's stay as they were).
    ///
    /// Fails, naming each tool, when a description fn panics or returns blank text.
    ///
    /// ```
    /// # use toolwright_core::{Registry, Services};
    /// let registry = Registry::from_tools([]).unwrap();
    /// let described = registry.describe(&Services::none()).unwrap();
    /// assert!(!described.same(&registry));
    /// ```
    pub fn describe(&self, services: &Services<'_>) -> Result<Registry, RegistryError> {
        let mut problems = Vec::new();
        let mut tools = Vec::with_capacity(self.0.tools.len());
        for tool in &self.0.tools {
            let Some((descriptor, describe)) = tool
                .descriptor()
                .and_then(|d| d.describe.map(|describe| (d, describe)))
            else {
                tools.push(Arc::clone(tool));
                continue;
            };
            match run_describe(descriptor, describe, services, tool.name()) {
                Ok(text) => tools.push(Arc::new(tool.described_as(text))),
                Err(problem) => problems.push(problem),
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }
        // Same tools in the same order: only the lists, which hold descriptions, start afresh.
        Ok(Self::assemble(
            tools,
            self.0.unavailable.clone(),
            self.0.offline.clone(),
            self.default_locale(),
        ))
    }

    /// This registry's `#[tool]`s plus the built-in sandbox tools (`read`, `write`, `edit`,
    /// `bash`, `grep`, `glob`), each with the request policy `approvals` names for it (the last
    /// one given wins; otherwise `always` for `bash`, never for the others). What a runtime
    /// with a sandbox serves.
    pub fn with_sandbox_tools(
        &self,
        approvals: &[(&str, ApprovalSpec)],
    ) -> Result<Registry, RegistryError> {
        let descriptors = self
            .0
            .tools
            .iter()
            .filter_map(|t| t.descriptor())
            .chain(crate::sandbox_tools::sandbox_tools());
        let mut registry = Self::from_tools(descriptors)?;
        if !locales::same_locale(self.default_locale(), registry.default_locale()) {
            registry = registry.with_default_locale(self.default_locale())?;
        }
        let inner = Arc::get_mut(&mut registry.0).expect("a registry just built is not shared");
        for tool in &mut inner.tools {
            // Rebuilding described every tool without host services: keep the text this
            // registry has, which [`Registry::describe`] may have computed from the host's.
            if let Some(text) = self
                .get(tool.name())
                .and_then(|t| t.described_text().cloned())
                && let Some(tool) = Arc::get_mut(tool)
            {
                tool.keep_description(text);
            }
            // The last setting of a tool wins.
            let Some(&(_, approval)) = approvals
                .iter()
                .rev()
                .find(|(name, _)| *name == tool.name())
            else {
                continue;
            };
            if let Some(tool) = Arc::get_mut(tool)
                && tool
                    .descriptor()
                    .is_some_and(crate::sandbox_tools::is_sandbox_tool)
            {
                // `never` is no approval at all, as for `#[tool]`s.
                // The request policy is the host's; the prompt shows the call's command, file
                // or pattern unless the host gave one.
                let approval = crate::ApprovalSpec {
                    prompt: approval
                        .prompt
                        .or(Some(crate::sandbox_tools::approval_prompt)),
                    ..approval
                };
                tool.set_approval(
                    (!matches!(approval.request, crate::RequestPolicy::Never)).then_some(approval),
                );
            }
        }
        Ok(registry)
    }

    /// The tools of `self` that `keep` keeps, joined by `extra` in order; an extra tool whose
    /// name or id another has (a kept one, or one before it in `extra`) is left out and
    /// returned second. Sorted by name: lists are cached and compared across rebuilds.
    fn joined(
        &self,
        keep: impl Fn(&Tool) -> bool,
        extra: impl IntoIterator<Item = Arc<Tool>>,
    ) -> (Vec<Arc<Tool>>, Vec<Arc<Tool>>) {
        let mut tools: Vec<Arc<Tool>> = self.0.tools.iter().filter(|t| keep(t)).cloned().collect();
        let mut names: HashSet<String> = tools.iter().map(|t| t.name().to_owned()).collect();
        let mut ids: HashSet<String> = tools.iter().map(|t| t.id().to_owned()).collect();
        let mut taken = Vec::new();
        for tool in extra {
            if names.contains(tool.name()) || ids.contains(tool.id()) {
                taken.push(tool);
                continue;
            }
            names.insert(tool.name().to_owned());
            ids.insert(tool.id().to_owned());
            tools.push(tool);
        }
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        (tools, taken)
    }
}
