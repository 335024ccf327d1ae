//! Why a registry refuses its tools: one [`RegistryProblem`] per mistake found while building
//! them (names, schemas, provider configurations, description fns) or while gathering them
//! (duplicates), all reported together in a [`RegistryError`].

use crate::descriptor::Location;

/// One reason the registry refused its tools.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryProblem {
    /// Two tools share a model-facing name.
    #[error(
        "two tools are named `{name}`: one at {first}, one at {second}; rename one with `name = \"...\"` or put it in a `toolset`"
    )]
    DuplicateName {
        /// The name.
        name: String,
        /// The first definition.
        first: Location,
        /// The second definition.
        second: Location,
    },
    /// A tool defined at run time takes a name another tool has.
    #[error(
        "a tool named `{name}` is registered already; unregister it first, or choose another name"
    )]
    Taken {
        /// The name.
        name: String,
    },
    /// A tool defined at run time takes a name in a connection's namespace.
    #[error(
        "the name `{name}` is in the namespace of connection `{connection}` (`{connection}__`), whose server's tools take such names; choose a name without that prefix"
    )]
    Namespace {
        /// The name.
        name: String,
        /// The connection.
        connection: String,
    },
    /// A default locale that is not a BCP 47 language tag.
    #[error(
        "`{locale}` is not a locale; give the default locale as a BCP 47 language tag such as `en`, `zh` or `pt-BR`"
    )]
    InvalidLocale {
        /// What was given.
        locale: String,
    },
    /// Two tools share an id.
    #[error("two tools have the id `{id}`: one at {first}, one at {second}; rename one")]
    DuplicateId {
        /// The id.
        id: String,
        /// The first definition.
        first: Location,
        /// The second definition.
        second: Location,
    },
    /// A reserved name.
    #[error(
        "tool `{name}` at {at} takes a name the runtime reserves for a meta-tool or built-in tool; choose another `name`"
    )]
    Reserved {
        /// The name.
        name: String,
        /// The definition.
        at: Location,
    },
    /// A name breaking `^[a-zA-Z0-9_-]{{1,64}}$`.
    #[error(
        "tool name `{name}` at {at} does not match ^[a-zA-Z0-9_-]{{1,64}}$ (toolset and name together must fit 64 characters)"
    )]
    InvalidName {
        /// The name.
        name: String,
        /// The definition.
        at: Location,
    },
    /// The argument type's schema is not an object.
    #[error(
        "tool `{tool}` at {at}: its argument type `{type_name}` is not described as a JSON object; use a struct with named fields"
    )]
    InputNotObject {
        /// The tool.
        tool: String,
        /// The argument type.
        type_name: &'static str,
        /// The definition.
        at: Location,
    },
    /// A `serve` tool's argument struct has a `task_id` (through `flatten`).
    #[error(
        "tool `{tool}` at {at} is a `serve` tool whose input has a `task_id` field; the runtime adds `task_id` itself, rename the field"
    )]
    ServeTaskId {
        /// The tool.
        tool: String,
        /// The definition.
        at: Location,
    },
    /// A description fn (`description = path`) that panicked or returned blank text.
    #[error("tool `{tool}` at {at}: {problem}")]
    Description {
        /// The tool.
        tool: String,
        /// What went wrong, and what to write instead.
        problem: String,
        /// The definition.
        at: Location,
    },
    /// A provider-native tool whose configuration or keys cannot work.
    #[error("provider tool `{tool}` at {at}: {problem}")]
    Provider {
        /// The tool.
        tool: String,
        /// What is wrong, and what to write instead.
        problem: String,
        /// The definition.
        at: Location,
    },
    /// An `input_retries` over [`crate::ToolDescriptor::MAX_INPUT_RETRIES`], in a descriptor
    /// built without `#[tool]` (which refuses it at compile time).
    #[error(
        "tool `{tool}` at {at} sets `input_retries` to {retries}, over the most a tool may set ({max}); set 0 to {max}, or leave it out for the model loop's default",
        max = crate::ToolDescriptor::MAX_INPUT_RETRIES
    )]
    InputRetries {
        /// The tool.
        tool: String,
        /// The value given.
        retries: u8,
        /// The definition.
        at: Location,
    },
    /// The output schema is not an object.
    #[error(
        "tool `{tool}` at {at} publishes an output schema that is not a JSON object (MCP `outputSchema` must be); return a struct, or drop `output_schema`"
    )]
    OutputNotObject {
        /// The tool.
        tool: String,
        /// The definition.
        at: Location,
    },
    /// A schema that does not compile into a validator.
    #[error(
        "tool `{tool}` at {at}: its {which} schema cannot be compiled into a validator: {error}"
    )]
    SchemaCompile {
        /// The tool.
        tool: String,
        /// `input` or `output`.
        which: &'static str,
        /// The compiler's message.
        error: String,
        /// The definition.
        at: Location,
    },
}

/// The registry refused its tools; every problem is listed.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistryError {
    /// Each problem found.
    pub problems: Vec<RegistryProblem>,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the tool registry has {} problem(s):",
            self.problems.len()
        )?;
        for problem in &self.problems {
            write!(f, "\n- {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RegistryError {}
