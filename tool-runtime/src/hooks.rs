//! The guardrails and tool preparation a host installs on the runtime, over every tool (see
//! [`crate::RuntimeBuilder::input_guardrail`], [`crate::RuntimeBuilder::output_guardrail`] and
//! [`crate::RuntimeBuilder::prepare_tools`]). Empty unless the host installs some: a runtime
//! without them checks nothing and allocates nothing for them.

use std::sync::Arc;

use toolwright_core::{InputGuardrail, OutputGuardrail, PrepareTools};

/// The runtime's own guardrails, in the order they were added, and its tool preparation.
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) input: Vec<(Arc<str>, Arc<dyn InputGuardrail>)>,
    pub(crate) output: Vec<(Arc<str>, Arc<dyn OutputGuardrail>)>,
    pub(crate) prepare: Option<Arc<dyn PrepareTools>>,
}
