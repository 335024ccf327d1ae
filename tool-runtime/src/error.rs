//! Why the runtime refused an operation.

use crate::record::TurnStatus;
use crate::store::StoreError;

/// Why the runtime refused an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The runtime was built without a store. There is no default: a store in memory would
    /// lose parked turns, journals and approvals when the process exits, so the host says
    /// which it wants.
    #[error(
        "no store: call `.store(SqliteStore::open(\"toolwright.db\")?)` on the runtime builder to keep parked turns across restarts, or `.store(SqliteStore::in_memory()?)` to keep them in memory only (lost when the process exits)"
    )]
    NoStore,
    /// A model is installed already: tools ask one model.
    #[error(
        "the runtime has a model for `ctx.model()` already (from `RuntimeBuilder::model` or an earlier `install_model`); install one model per runtime"
    )]
    ModelInstalled,
    /// A tool needs application state that was not registered.
    #[error(
        "tool `{tool}` needs the state `{type_name}`, which is not registered; add `.state(...)` with a `{type_name}` to the runtime builder"
    )]
    MissingState {
        /// The tool.
        tool: String,
        /// The state's type.
        type_name: &'static str,
    },
    /// The registry refused a tool once the host's services were known (a description fn
    /// that panicked or returned nothing).
    #[error("{0}")]
    Registry(toolwright_core::RegistryError),
    /// A tool defined at run time breaks the rules `#[tool]` checks at compile time.
    #[error(transparent)]
    Definition(#[from] toolwright_core::DefinitionError),
    /// The sandbox or its built-in tools cannot be set up as declared.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// A session's locale that is not a BCP 47 language tag.
    #[error("`{0}` is not a locale; give a BCP 47 language tag such as `en`, `zh` or `pt-BR`")]
    InvalidLocale(String),
    /// A call from the user interface cannot be made.
    #[error("`{tool}` cannot be called from the user interface: {problem}")]
    UserCall {
        /// The tool as named.
        tool: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// A declared toolset cannot be used.
    #[error("toolset: {0}")]
    Toolset(String),
    /// A declared connection cannot be used.
    #[error("connection `{connection}`: {problem}")]
    Connection {
        /// The connection.
        connection: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// No session with that id.
    #[error("no session `{0}`; open it with `Runtime::open_session`")]
    UnknownSession(String),
    /// No turn with that id.
    #[error("no turn `{0}`")]
    UnknownTurn(String),
    /// No request with that id.
    #[error("no input request `{0}`; it may belong to another store, or never existed")]
    UnknownRequest(String),
    /// No workflow task with that id.
    #[error("no task `{0}`")]
    UnknownTask(String),
    /// The turn cannot end while workflow tasks owe it results.
    #[error(
        "turn `{turn}` cannot end while its tasks run: {tasks}; wait for their results with `Turn::wait_task_results` (or let the model call `task_wait`), or cancel them (`task_cancel`, `Runtime::cancel_task`)"
    )]
    TasksOpen {
        /// The turn.
        turn: String,
        /// The tasks and what each waits on.
        tasks: String,
    },
    /// The session has ended.
    #[error("session `{0}` has ended; open a new session")]
    SessionEnded(String),
    /// The task running a step or a resumption failed (a panic outside any tool).
    #[error("the runtime task failed: {0}; the turn is left as recorded, see `Runtime::recover`")]
    Task(String),
    /// A delivery to a hook was refused.
    #[error(transparent)]
    Hook(#[from] HookRefused),
    /// The turn cannot take this operation in its state.
    #[error("turn `{turn}` is {status:?}; {what}")]
    TurnState {
        /// The turn.
        turn: String,
        /// Its status.
        status: TurnStatus,
        /// What was refused and what to do.
        what: &'static str,
    },
}

/// Why a delivery to a hook ([`Runtime::resume_hook`](crate::Runtime::resume_hook)) was
/// refused. Nothing was recorded, and the waiting run was not touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HookRefused {
    /// No hook has the token.
    #[error(
        "no hook has this token: it was never made in this store, or the token was cut or copied wrong; deliver the token exactly as the workflow handed it out"
    )]
    Unknown,
    /// The hook took a delivery already: a hook takes one.
    #[error(
        "hook `{name}` took a delivery already; a hook takes one, so this one is refused (a workflow that waits for more makes a new hook for each)"
    )]
    Delivered {
        /// The hook's name.
        name: String,
    },
    /// The run that made the hook has ended: nothing would read the payload.
    #[error(
        "hook `{name}` no longer takes deliveries: the workflow that made it {ended}, so nothing would read this payload"
    )]
    Closed {
        /// The hook's name.
        name: String,
        /// How the run ended.
        ended: String,
    },
    /// The payload does not fit the hook's schema.
    #[error(
        "the payload does not fit the schema of hook `{name}`: {problems}; send a payload the schema accepts"
    )]
    Invalid {
        /// The hook's name.
        name: String,
        /// What is wrong, field by field (JSON pointers).
        problems: String,
    },
}
