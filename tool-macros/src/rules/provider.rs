//! The rules of provider-native tools (`#[tool(provider)]`): C17, C18, C19 and C23. The
//! provider runs such a call itself, from the list it is sent, and hands the result to the
//! model; every key that acts before, around or instead of running the tool cannot apply.

use super::Tool;
use crate::attrs::{Attrs, Effect};
use crate::ctxt::Ctxt;

/// The provider runs a provider-native tool from the tool list it is sent; `deferred` leaves the
/// tool out of that list, and `tool_search` cannot hand the provider a tool it did not get.
pub(super) fn c17_provider_deferred(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    if !Attrs::flag(&a.provider) {
        return;
    }
    if let Some(g) = a.deferred.as_ref().filter(|g| g.value) {
        cx.error_at(g.span, "`deferred` on a `provider` tool: the provider runs only the tools in the list it is sent, and a deferred tool is left out of that list, so the model could never reach it; remove `deferred`");
    }
}

/// The provider runs the call and hands the result straight back to the model: the runtime
/// learns of it afterwards, so keys that act before, around or instead of running the tool
/// cannot apply.
pub(super) fn c18_provider_keys(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    if !Attrs::flag(&a.provider) {
        return;
    }
    let runs = "the model provider runs it";
    let mut refuse = |span, key: &str, why: &str| {
        cx.error_at(
            span,
            format!("`{key}` on a `provider` tool: {why}; remove `{key}`"),
        );
    };
    if let Some(g) = &a.workflow {
        refuse(
            g.span,
            "workflow",
            &format!("{runs}, so there is no body to run from a journal"),
        );
    }
    if let Some(g) = a.durable.as_ref().filter(|g| g.value) {
        refuse(
            g.span,
            "durable",
            &format!("{runs}, so there are no steps to journal"),
        );
    }
    let approve = "the provider runs the call before the runtime learns of it, so nobody can approve it first (a tool that needs approval cannot be provider-native)";
    if let Some(approval) = &a.approval {
        refuse(approval.span, "approval", approve);
    }
    if let Some(g) = &a.approval_key {
        refuse(g.span, "approval_key", approve);
    }
    if let Some(g) = a.ends_turn.as_ref().filter(|g| g.value.is_some()) {
        refuse(
            g.span,
            "ends_turn",
            "the provider hands the result straight back to the model, which goes on answering",
        );
    }
    if let Some(g) = &a.input_retries {
        refuse(
            g.span,
            "input_retries",
            "the provider checks the arguments it defines, and the runtime never validates them",
        );
    }
    if let Some(g) = a.user_only.as_ref().filter(|g| g.value) {
        refuse(
            g.span,
            "user_only",
            "only the model can reach a tool its provider runs",
        );
    }
    if let Some(g) = &a.label {
        refuse(
            g.span,
            "label",
            "labels render from arguments the runtime parses, and the provider defines this tool's arguments; the user sees the humanized tool name",
        );
    }
    if let Some(g) = a.output_schema.as_ref().filter(|g| g.value) {
        refuse(
            g.span,
            "output_schema",
            "the provider defines the shape of its result",
        );
    }
    if let Some(g) = &a.to_model_output {
        refuse(
            g.span,
            "to_model_output",
            "the provider hands the result to the model itself, before the runtime sees it",
        );
    }
    if let Some(g) = &a.annotations {
        refuse(
            g.span,
            "annotations",
            "annotations describe MCP tools, and a provider tool is never served over MCP",
        );
    }
    if let Some(effect) = &a.effect {
        let name = match effect.value {
            Effect::Money => "money",
            Effect::Public => "public",
            _ => return,
        };
        cx.error_at(
            effect.span,
            format!("`effect = {name}` on a `provider` tool: a `{name}` tool needs an approval policy, and nobody can approve a call the provider already ran; use `effect = read` or `effect = write`, or write a tool the runtime runs"),
        );
    }
}

/// The registry calls a provider tool's fn once, at collection, to build its configuration:
/// nothing passes it arguments, a context, or awaits it. The return type is checked by a
/// generated assertion, at the type as written (an alias of `ProviderTool` works).
pub(super) fn c19_provider_signature(tool: &Tool<'_>, cx: &mut Ctxt) {
    if !Attrs::flag(&tool.attrs.provider) {
        return;
    }
    let sig = tool.sig;
    for param in &sig.typed_params {
        cx.error_spanned(param, "a `provider` tool takes no parameters: the registry calls its fn once to build the configuration, and the provider runs the tool with arguments of its own; remove this parameter");
    }
    if let Some(span) = sig.asyncness {
        cx.error_at(span, "a `provider` tool is a plain `fn`: the registry calls it once, at collection, to build the configuration; remove `async`");
    }
    if sig.output.is_none() {
        cx.error_at(
            sig.ident.span(),
            "a `provider` tool returns its configuration: write `-> ProviderTool` and build it with `ProviderTool::new().openai(...).anthropic(...)`",
        );
    }
}

/// The provider runs a provider-native call and hands its result straight to the model: nothing
/// can check it before or after. Its list entry is the provider's configuration, with no
/// description of ours to change; `enabled` hides it.
pub(super) fn c23_provider_hooks(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    if !Attrs::flag(&a.provider) {
        return;
    }
    if let Some(g) = &a.guardrails {
        cx.error_at(g.span, "`guardrails` on a `provider` tool: the provider runs the call and hands its result to the model before the runtime sees either, so no guardrail can run; remove `guardrails`");
    }
    if let Some(g) = &a.prepare {
        cx.error_at(g.span, "`prepare` on a `provider` tool: its list entry is the provider's configuration, with no description to change; hide it per step with `enabled = path` instead");
    }
}
