//! Building a runtime: the registry, the host's services, the store, the decider, options,
//! the sandbox, connections and toolsets, each checked once.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::broadcast;
use toolwright_core::{Entry, Registry, RequestPolicy, Sandbox, Services, ToolKind};

use crate::decider::Decider;
use crate::engine::cache::ResultCache;
use crate::engine::{Engine, Parts};
use crate::error::RuntimeError;
use crate::options::Options;
use crate::remote::Connection;
use crate::remote::links::Remote;
use crate::runtime::Runtime;
use crate::services::States;
use crate::store::{SqliteStore, Store};
use crate::toolset::{Toolset, Toolsets};

/// The built-in sandbox tools, whose policies `sandbox_approval` may set.
const SANDBOX_TOOLS: [&str; 6] = ["read", "write", "edit", "bash", "grep", "glob"];

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    registry: Registry,
    states: States,
    store: Option<Arc<dyn Store>>,
    decider: Option<Arc<dyn Decider>>,
    options: Options,
    connections: Vec<Connection>,
    sandbox: Option<Arc<dyn Sandbox>>,
    sandbox_approvals: Vec<(&'static str, toolwright_core::ApprovalSpec)>,
    toolsets: Vec<Toolset>,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("registry", &self.registry)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// A builder over `registry`, with nothing else set.
    pub(crate) fn new(registry: Registry) -> Self {
        RuntimeBuilder {
            registry,
            states: HashMap::new(),
            store: None,
            decider: None,
            options: Options::default(),
            connections: Vec::new(),
            sandbox: None,
            sandbox_approvals: Vec::new(),
            toolsets: Vec::new(),
        }
    }

    /// Registers application state `T`, reached by `State<T>` parameters and `ctx.state::<T>()`.
    pub fn state<T: Send + Sync + 'static>(mut self, state: T) -> Self {
        self.states.insert(
            TypeId::of::<T>(),
            Arc::new(state) as Arc<dyn Any + Send + Sync>,
        );
        self
    }

    /// The store of sessions, parked turns and approval memory (default: an in-memory SQLite
    /// database, which does not survive the process).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The decider for `approval = auto` (without one, `auto` always asks a person).
    pub fn decider(mut self, decider: impl Decider) -> Self {
        self.decider = Some(Arc::new(decider));
        self
    }

    /// Limits and timeouts.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Installs the sandbox plain and durable tools reach through `ctx.sandbox()`, and offers
    /// the built-in tools `read`, `write`, `edit`, `bash`, `grep` and `glob` over it (`bash` asks
    /// every time, the others never, unless [`RuntimeBuilder::sandbox_approval`] says otherwise;
    /// the session's per-effect permissions apply as to any tool: `write`, `edit` and `bash`
    /// have effect `write`).
    pub fn sandbox(mut self, sandbox: impl Sandbox) -> Self {
        self.sandbox = Some(Arc::new(sandbox));
        self
    }

    /// The request policy of built-in sandbox tool `tool` (`"bash"`, `"write"`, ...), e.g.
    /// `RequestPolicy::Never` for `bash` in a sandbox that is itself isolated. The last setting
    /// of a tool wins; a name that is not a built-in tool is refused when the runtime is built.
    pub fn sandbox_approval(mut self, tool: &'static str, policy: RequestPolicy) -> Self {
        self.sandbox_approvals.push((
            tool,
            toolwright_core::ApprovalSpec {
                request: policy,
                prompt: None,
                response: None,
                key: toolwright_core::ApprovalKey::ToolName,
            },
        ));
        self
    }

    /// Declares a connection to a remote server whose allowed tools join the registry as
    /// `<connection>__<tool>` once [`Runtime::connect`] has started it.
    pub fn connection(mut self, connection: Connection) -> Self {
        self.connections.push(connection);
        self
    }

    /// Declares what toolset `toolset.name()` adds to the prompt: instructions for the system
    /// prompt ([`Runtime::instructions`]) and a per-turn context provider
    /// ([`crate::Turn::context`]). The name must be the toolset of some `#[tool]` or a declared
    /// connection; checked when the runtime is built.
    pub fn toolset(mut self, toolset: Toolset) -> Self {
        self.toolsets.push(toolset);
        self
    }

    /// The runtime. Fails when a tool needs state that was not registered, or a sandbox
    /// setting, a connection or a toolset cannot be used as declared.
    pub fn build(mut self) -> Result<Runtime, RuntimeError> {
        self.add_sandbox_tools()?;
        // Descriptions computed from host services are computed now, once; the lists built
        // from this registry are cached as any list is.
        self.registry = self
            .registry
            .describe(&Services::new(&self.states))
            .map_err(RuntimeError::Registry)?;
        self.check_requirements()?;
        self.check_connections()?;
        let names: Vec<&str> = self.connections.iter().map(|c| c.name()).collect();
        let audiences: Vec<(&str, [bool; 3])> = self
            .connections
            .iter()
            .map(|c| (c.name(), c.audiences()))
            .collect();
        let toolsets = Toolsets::new(self.toolsets, &self.registry, &audiences)
            .map_err(RuntimeError::Toolset)?;
        let cache = ResultCache::new(&self.registry, &names);
        let store = match self.store {
            Some(store) => store,
            None => Arc::new(SqliteStore::in_memory()?),
        };
        let (events, _) = broadcast::channel(1024);
        let remote = Remote::new(
            self.registry.clone(),
            self.connections,
            Arc::clone(&store),
            Arc::clone(&self.options.clock),
            events.clone(),
        );
        // Remote tools default to `once`, and their policies can be overridden at any time.
        let reads_approvals = !remote.is_empty()
            || self.registry.tools().iter().any(|t| {
                matches!(
                    t.approval().map(|a| a.request),
                    Some(RequestPolicy::Once | RequestPolicy::Custom(_))
                )
            });
        let runs_tasks = self
            .registry
            .tools()
            .iter()
            .any(|t| matches!(t.kind(), ToolKind::Workflow(Entry::Task | Entry::Serve)));
        let engine = Engine::new(Parts {
            store,
            options: self.options,
            events,
            services: Arc::new(self.states),
            sandbox: self.sandbox,
            decider: self.decider,
            remote,
            toolsets,
            cache,
            reads_approvals,
            runs_tasks,
        });
        Ok(Runtime::from_engine(engine))
    }

    /// With a sandbox, the built-in tools over it join the registry, with the approval
    /// policies `sandbox_approval` set.
    fn add_sandbox_tools(&mut self) -> Result<(), RuntimeError> {
        if let Some((tool, _)) = self
            .sandbox_approvals
            .iter()
            .find(|(tool, _)| !SANDBOX_TOOLS.contains(tool))
        {
            return Err(RuntimeError::Sandbox(format!(
                "`sandbox_approval(\"{tool}\", ...)` names no built-in sandbox tool; they are read, write, edit, bash, grep and glob"
            )));
        }
        if self.sandbox.is_some() {
            self.registry = self
                .registry
                .with_sandbox_tools(&self.sandbox_approvals)
                .map_err(|error| RuntimeError::Sandbox(error.to_string()))?;
        } else if !self.sandbox_approvals.is_empty() {
            return Err(RuntimeError::Sandbox(
                "`sandbox_approval` without a sandbox: install one with `RuntimeBuilder::sandbox`"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Every state a tool needs (`State<T>`) is registered.
    fn check_requirements(&self) -> Result<(), RuntimeError> {
        for tool in self.registry.tools() {
            for requirement in tool.requirements().iter().flatten() {
                if !self.states.contains_key(&(requirement.type_id)()) {
                    return Err(RuntimeError::MissingState {
                        tool: tool.name().to_owned(),
                        type_name: (requirement.type_name)(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Every connection's declaration fits beside the local tools and the other connections.
    fn check_connections(&self) -> Result<(), RuntimeError> {
        for (i, connection) in self.connections.iter().enumerate() {
            if let Some(problem) = connection.problem(&self.registry, &self.connections[..i]) {
                return Err(RuntimeError::Connection {
                    connection: connection.name().to_owned(),
                    problem,
                });
            }
        }
        Ok(())
    }
}
