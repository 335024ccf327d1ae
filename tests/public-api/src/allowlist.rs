//! The unnameable types known today.

/// Workspace types that public signatures reachable from the facade mention although no public
/// path of `toolwright` reaches them, by their path in the defining crate. Each was there when
/// the check came in (issue 16); narrowing the facade empties this list, and the check fails on
/// an entry no longer needed, so it only shrinks. Add nothing here: re-export the type, or change
/// the signature.
pub const KNOWN_UNNAMEABLE: &[&str] = &[
    // `impl IntoDecision for ApprovalDecision`: the trait a policy fn's return type implements.
    "toolwright_core::approval::IntoDecision",
    // Fn-pointer aliases in the fields and variants of `ApprovalSpec`, `ApprovalKey::Custom` and
    // `RequestPolicy::Custom`.
    "toolwright_core::approval::KeyFn",
    "toolwright_core::approval::PolicyFn",
    "toolwright_core::approval::PromptFn",
    "toolwright_core::approval::ResponseFn",
    // The boxed closure of `step_in_store` (`CallHost`, `DurableContext`, `WorkflowContext`) and
    // of `runtime::Store::journal_in_transaction`.
    "toolwright_core::context::StoreWork",
    // `ToolDescriptor`'s public fields (what `#[tool]` generates), and `Tool::enabled` and
    // `Tool::label`.
    "toolwright_core::descriptor::DescribeFn",
    "toolwright_core::descriptor::EnabledFn",
    "toolwright_core::descriptor::InputSpec",
    "toolwright_core::descriptor::InvokeFn",
    "toolwright_core::descriptor::LabelSpec",
    "toolwright_core::descriptor::LocaleText",
    "toolwright_core::descriptor::ProviderFn",
    "toolwright_core::descriptor::SchemaFn",
    // `ToolList::entries`.
    "toolwright_core::registry::ListEntry",
    // The public field `runtime::ToolCall::provider_result`.
    "toolwright_runtime::runtime::ProviderResult",
];
