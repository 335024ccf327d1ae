//! The compile-time rules C1–C26 (C21 is kept for `approval = auto(criteria)`). Each has an
//! id, the sentence the README's rule table shows, and where it is enforced: while parsing
//! keys, in a check over the whole attribute (the fns below, and those of provider-native tools
//! in `provider`), by assertions the expansion generates (for rules that need another item), or
//! by `#[derive(ToolInput)]` (C26, in `derive`).

use crate::attrs::{
    ApprovalKey, Attrs, Description, Effect, Entry, Given, MAX_INPUT_RETRIES, Policy,
};
use crate::ctxt::Ctxt;
use crate::sig::Sig;

mod provider;

use provider::{
    c17_provider_deferred, c18_provider_keys, c19_provider_signature, c23_provider_hooks,
};

/// Everything the checks look at.
pub(crate) struct Tool<'a> {
    pub(crate) attrs: &'a Attrs,
    pub(crate) sig: &'a Sig,
    /// Whether the fn has a doc comment.
    pub(crate) doc: bool,
}

#[cfg_attr(not(test), allow(dead_code))] // reason: `id` and `summary` are read by the README check
pub(crate) struct Rule {
    pub(crate) id: &'static str,
    pub(crate) summary: &'static str,
    /// The check over the parsed attribute, if the rule has one (parts of some rules are
    /// enforced while parsing, or by generated assertions).
    pub(crate) check: Option<fn(&Tool<'_>, &mut Ctxt)>,
}

pub(crate) const RULES: &[Rule] = &[
    Rule {
        id: "C1",
        summary: "unknown key → error naming the key and the closest valid one",
        check: None,
    },
    Rule {
        id: "C2",
        summary: "a key given twice → error at the second",
        check: None,
    },
    Rule {
        id: "C3",
        summary: "`effect` missing, or two effects → error listing the four effects",
        check: Some(c03_effect),
    },
    Rule {
        id: "C4",
        summary: "no description (no doc comment, no `description`) → error",
        check: Some(c04_description),
    },
    Rule {
        id: "C5",
        summary: "`workflow` + `ends_turn` → error (a workflow tool cannot end the turn)",
        check: Some(c05_workflow_ends_turn),
    },
    Rule {
        id: "C6",
        summary: "`workflow` without an entry point, with several, or with an unknown one → error listing `execute`, `task`, `serve`",
        check: None,
    },
    Rule {
        id: "C7",
        summary: "`serve` whose argument struct has a `task_id` field → error (the runtime adds it)",
        check: None,
    },
    Rule {
        id: "C8",
        summary: "`workflow` + `durable` → error (workflow bodies are already durable); a workflow tool's context type has no sandbox",
        check: Some(c08_workflow_durable),
    },
    Rule {
        id: "C9",
        summary: "`user_only` + `deferred`, `ends_turn`, `approval`, `subagents` or `input_retries` → error (the model never sees it)",
        check: Some(c09_user_only),
    },
    Rule {
        id: "C10",
        summary: "`effect = money` or `effect = public` with no `approval` key → error: state the policy, `approval = never` included",
        check: Some(c10_money_needs_policy),
    },
    Rule {
        id: "C11",
        summary: "`approval_key`, `approval(response = ...)` or `approval(require_auth = ...)` without a request policy → error",
        check: Some(c11_key_needs_request),
    },
    Rule {
        id: "C12",
        summary: "`label(delta = ...)` on a tool that cannot emit partial results, or a `{field}` placeholder naming no field → error",
        check: Some(c12_delta_needs_partials),
    },
    Rule {
        id: "C13",
        summary: "`name`/`toolset` not matching the name rule, or a reserved name → error",
        check: Some(c13_names),
    },
    Rule {
        id: "C14",
        summary: "`summary` over 80 characters, or an empty `title` → error",
        check: Some(c14_user_text),
    },
    Rule {
        id: "C15",
        summary: "argument type not an object-shaped struct, or not `Deserialize + JsonSchema`; output not `Serialize`; `output_schema` on an output that is not `JsonSchema` → error",
        check: None,
    },
    Rule {
        id: "C16",
        summary: "a workflow tool that is not `async`, generic fns, `self` receivers, or the wrong context type for the tool's kind → error",
        check: Some(c16_workflow_async),
    },
    Rule {
        id: "C17",
        summary: "`provider` + `deferred` → error (the provider runs only the tools in the list it is sent, and a deferred tool is not in it)",
        check: Some(c17_provider_deferred),
    },
    Rule {
        id: "C18",
        summary: "`provider` + a key for tools the runtime runs (`workflow`, `durable`, `approval`, `approval_key`, `ends_turn`, `input_retries`, `user_only`, `label`, `output_schema`, `to_model_output`, `annotations`), or `effect = money`/`public` → error (the provider runs the call: nobody can approve it first)",
        check: Some(c18_provider_keys),
    },
    Rule {
        id: "C19",
        summary: "a `provider` fn that takes parameters, is `async`, or does not return `ProviderTool` → error",
        check: Some(c19_provider_signature),
    },
    Rule {
        id: "C20",
        summary: "`input_retries` not an integer literal from 0 to 10 → error giving the range",
        check: Some(c20_input_retries),
    },
    Rule {
        id: "C22",
        summary: "`guardrails` or `prepare` on a `user_only` tool → error (the model never calls it nor sees it in a list; a call from the user interface is the user's own action)",
        check: Some(c22_user_only_hooks),
    },
    Rule {
        id: "C23",
        summary: "`guardrails` or `prepare` on a `provider` tool → error (the provider runs the call and hands its result to the model; hide it with `enabled`)",
        check: Some(c23_provider_hooks),
    },
    Rule {
        id: "C24",
        summary: "`approval(require_auth = \"...\")` with `request = never`, or naming no provider (1 to 64 letters, digits, `_`, `-`, `.`) → error",
        check: Some(c24_require_auth),
    },
    // Enforced by assertions the expansion generates: the template names Rust fields, and only
    // the argument struct's `ToolInput` impl knows which are sensitive.
    Rule {
        id: "C25",
        summary: "a label or approval prompt template naming a `#[toolwright(sensitive)]` field → error (templates are stored and shown to people)",
        check: None,
    },
    // Enforced by `#[derive(ToolInput)]` while it reads the field attributes.
    Rule {
        id: "C26",
        summary: "`#[toolwright(sensitive)]` on a skipped, flattened or aliased field or on the struct, `crate = path` on a field, an unknown key, or a key given twice → error",
        check: None,
    },
];

/// The rules whose checks run on a `provider` tool. The others concern keys C18 refuses on one
/// (or the argument struct it does not have), and would only repeat its errors in other words.
const PROVIDER_RULES: &[&str] = &["C3", "C4", "C13", "C14", "C17", "C18", "C19", "C23"];

pub(crate) fn check(tool: &Tool<'_>, cx: &mut Ctxt) {
    let provider = Attrs::flag(&tool.attrs.provider);
    for rule in RULES {
        if provider && !PROVIDER_RULES.contains(&rule.id) {
            continue;
        }
        if let Some(check) = rule.check {
            check(tool, cx);
        }
    }
}

/// Every tool declares what kind of thing it does: permissions, approvals and taint key on it.
fn c03_effect(tool: &Tool<'_>, cx: &mut Ctxt) {
    if tool.attrs.effect_key.is_none() {
        cx.error_at(
            tool.sig.ident.span(),
            "`#[tool]` needs an effect: add `effect = read`, `effect = write`, `effect = money` or `effect = public`",
        );
    }
}

/// The description is the model's only documentation of the tool. A description fn counts: the
/// compiler checks its signature, and the registry refuses blank text it returns.
fn c04_description(tool: &Tool<'_>, cx: &mut Ctxt) {
    match tool.attrs.description.as_ref().map(|g| &g.value) {
        Some(Description::Text(text)) if text.value().trim().is_empty() => cx.error_spanned(
            text,
            "`description` is empty; say what the tool does, when to use it, when not to, and what it returns",
        ),
        Some(_) => {}
        None if !tool.doc && tool.attrs.description_key.is_none() => cx.error_at(
            tool.sig.ident.span(),
            "a tool needs a description for the model: add a doc comment (`/// ...`) or `description = \"...\"` saying what it does, when to use it and what it returns",
        ),
        None => {}
    }
}

/// A workflow's result may arrive after the turn: it cannot also decide the turn ends.
fn c05_workflow_ends_turn(tool: &Tool<'_>, cx: &mut Ctxt) {
    if let (Some(_), Some(ends @ Given { value: Some(_), .. })) =
        (&tool.attrs.workflow, &tool.attrs.ends_turn)
    {
        cx.error_at(ends.span, "a `workflow` tool cannot end the turn: remove `ends_turn` (use `workflow = task` for work that outlives the turn)");
    }
}

/// A workflow body already runs from its journal; `durable` would journal it twice.
fn c08_workflow_durable(tool: &Tool<'_>, cx: &mut Ctxt) {
    if let (Some(_), Some(durable)) = (&tool.attrs.workflow, &tool.attrs.durable)
        && durable.value
    {
        cx.error_at(durable.span, "`durable` has no meaning on a `workflow` tool: workflow bodies are already durable (use `ctx.step(...)` in the body); remove `durable`");
    }
}

/// A user-only tool never reaches the model, so model-facing settings would be dead letters.
fn c09_user_only(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    if !Attrs::flag(&a.user_only) {
        return;
    }
    let why = "the model never sees a `user_only` tool";
    if let Some(g) = a.deferred.as_ref().filter(|g| g.value) {
        cx.error_at(
            g.span,
            format!("`deferred` with `user_only`: {why}, so there is nothing to defer; remove one"),
        );
    }
    if let Some(g) = a.ends_turn.as_ref().filter(|g| g.value.is_some()) {
        cx.error_at(
            g.span,
            format!(
                "`ends_turn` with `user_only`: {why}, so it cannot end the model's turn; remove one"
            ),
        );
    }
    if let Some(approval) = &a.approval {
        cx.error_at(
            approval.span,
            format!(
                "`approval` with `user_only`: {why}; the user calling it is the consent; remove one"
            ),
        );
    }
    if let Some(g) = &a.subagents {
        cx.error_at(
            g.span,
            format!("`subagents` with `user_only`: {why}, nor do subagents; remove one"),
        );
    }
    if let Some(g) = &a.input_retries {
        cx.error_at(
            g.span,
            format!("`input_retries` with `user_only`: {why}, so no model retries its invalid input (a person sees the error directly); remove one"),
        );
    }
}

/// Moving money or speaking in public must never run without a stated decision.
fn c10_money_needs_policy(tool: &Tool<'_>, cx: &mut Ctxt) {
    let Some(effect) = &tool.attrs.effect else {
        return;
    };
    let name = match effect.value {
        Effect::Money => "money",
        Effect::Public => "public",
        _ => return,
    };
    if tool.attrs.approval.is_none() && !Attrs::flag(&tool.attrs.user_only) {
        cx.error_at(
            effect.span,
            format!("`effect = {name}` needs an explicit approval policy: add `approval = always`, `once`, `auto`, a policy fn, or `approval = never` to run without asking"),
        );
    }
}

/// A memory key or a response policy only means something once a request policy asks.
fn c11_key_needs_request(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    let request = a.approval.as_ref().and_then(|ap| ap.request.as_ref());
    if let Some(approval) = &a.approval
        && approval.object_form
        && approval.request.is_none()
        && !approval.reported
    {
        let what = if approval.response.is_some() {
            "`response` decides who may answer a request, but"
        } else if approval.require_auth.is_some() {
            "`require_auth` decides who may approve a request, but"
        } else {
            "the object form needs a request policy:"
        };
        cx.error_at(approval.span, format!("{what} `approval(...)` has no `request = ...`; add `request = always` (or `once`, `auto`, a policy fn)"));
    }
    if let Some(key) = &a.approval_key {
        match request {
            None if a.approval.is_none() => cx.error_at(
                key.span,
                "`approval_key` keys the memory of `once`, but the tool has no `approval`; add `approval = once`",
            ),
            Some((policy @ (Policy::Never | Policy::Always | Policy::Auto(_)), _)) => cx.error_at(
                key.span,
                format!("`approval_key` keys the memory of `once`, and `{}` keeps no memory; use `approval = once` or remove `approval_key`", policy.name()),
            ),
            _ => {}
        }
        if let ApprovalKey::Custom(_) = key.value {
            // Signature checked by the compiler through the generated adapter.
        }
    }
}

/// Partial results come through the context; a tool without one has no deltas to label.
fn c12_delta_needs_partials(tool: &Tool<'_>, cx: &mut Ctxt) {
    let Some(label) = &tool.attrs.label else {
        return;
    };
    if let Some((_, span)) = &label.value.delta
        && tool.sig.rest.is_empty()
    {
        cx.error_at(
            *span,
            "`label(delta = ...)` labels partial results, but this tool takes no context and cannot emit any; take a `ToolContext` and call `ctx.partial(...)`, or remove `delta`",
        );
    }
}

/// Providers accept only `^[a-zA-Z0-9_-]{1,64}$`, and the runtime owns some names
/// ([`RESERVED_NAMES`]; the registry refuses them again when it is built).
fn c13_names(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    let rule = "names match `^[a-zA-Z0-9_-]{1,64}$`";
    let name_text = match &a.name {
        Some(given) => {
            let text = given.value.value();
            if let Some(problem) = name_problem(&text) {
                cx.error_spanned(
                    &given.value,
                    format!(
                        "tool name \"{text}\" {problem}; {rule}{}",
                        name_fix("name", &text)
                    ),
                );
            }
            text
        }
        None => {
            // The fn name is always an identifier, but it may be too long or not ASCII.
            let text = tool
                .sig
                .ident
                .to_string()
                .trim_start_matches("r#")
                .to_owned();
            if let Some(problem) = name_problem(&text) {
                cx.error_spanned(&tool.sig.ident, format!("the tool is named after the fn, and \"{text}\" {problem}; {rule}, so set `name = \"...\"`"));
            }
            text
        }
    };
    // With a toolset the model-facing name holds `__`, which no reserved name does.
    if a.toolset.is_none() && RESERVED_NAMES.contains(&name_text.as_str()) {
        match &a.name {
            Some(given) => cx.error_spanned(
                &given.value,
                format!("`{name_text}` is reserved for a meta-tool or built-in tool of the runtime; choose another `name`"),
            ),
            None => cx.error_spanned(
                &tool.sig.ident,
                format!("the tool is named after the fn, and `{name_text}` is reserved for a meta-tool or built-in tool of the runtime; rename the fn or set `name = \"...\"`"),
            ),
        }
    }
    if let Some(toolset) = &a.toolset {
        let text = toolset.value.value();
        if let Some(problem) = name_problem(&text) {
            cx.error_spanned(
                &toolset.value,
                format!(
                    "toolset \"{text}\" {problem}; {rule}{}",
                    name_fix("toolset", &text)
                ),
            );
        } else if text.len() + 2 + name_text.len() > 64 {
            cx.error_spanned(
                &toolset.value,
                format!("the model-facing name \"{text}__{name_text}\" is longer than 64 characters; shorten the toolset or the name"),
            );
        }
    }
}

/// The names of the runtime's meta-tools and built-in tools: the runtime's list
/// (`names::RESERVED_NAMES` in the core crate, which the registry checks again), here so the
/// macro refuses them where it reads the name (a test keeps the two equal).
const RESERVED_NAMES: &[&str] = &[
    "tool_search",
    "tool_call",
    "ask_question",
    "task_wait",
    "task_cancel",
    "task",
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "glob",
];

fn name_problem(text: &str) -> Option<String> {
    if text.is_empty() {
        return Some("is empty".into());
    }
    if let Some(c) = text.chars().find(|c| !is_name_char(*c)) {
        return Some(format!("contains {c:?}"));
    }
    (text.len() > 64).then(|| format!("is {} characters long", text.len()))
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `, e.g. `key = "fixed"`` (invalid characters replaced by `_`), for names that are not empty
/// and not too long.
fn name_fix(key: &str, text: &str) -> String {
    let fixed: String = text
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    if text.is_empty() || fixed.len() > 64 {
        return String::new();
    }
    format!(", e.g. `{key} = \"{fixed}\"`")
}

/// Users see titles and summaries in approval prompts, install pages and settings.
fn c14_user_text(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    let check_title = |title: &syn::LitStr, whose: &str, cx: &mut Ctxt| {
        if title.value().trim().is_empty() {
            cx.error_spanned(
                title,
                format!("`title`{whose} is empty; give the user-facing name, or remove `title`"),
            );
        }
    };
    let check_summary = |summary: &syn::LitStr, whose: &str, cx: &mut Ctxt| {
        let text = summary.value();
        let count = text.chars().count();
        if count > 80 {
            cx.error_spanned(summary, format!("`summary`{whose} is {count} characters; keep it to one line of at most 80 (details belong in the description)"));
        } else if text.contains('\n') {
            cx.error_spanned(summary, format!("`summary`{whose} spans several lines; keep it to one line of at most 80 characters (details belong in the description)"));
        }
    };
    if let Some(title) = &a.title {
        check_title(&title.value, "", cx);
    }
    if let Some(summary) = &a.summary {
        check_summary(&summary.value, "", cx);
    }
    if let Some(i18n) = &a.i18n {
        for locale in &i18n.value {
            let whose = format!(" of locale `{}`", locale.locale);
            if let Some(title) = &locale.title {
                check_title(title, &whose, cx);
            }
            if let Some(summary) = &locale.summary {
                check_summary(summary, &whose, cx);
            }
        }
    }
}

/// Workflow bodies suspend (ask, sleep) and resume from their journal: only an `async fn` can.
fn c16_workflow_async(tool: &Tool<'_>, cx: &mut Ctxt) {
    if let Some(workflow) = &tool.attrs.workflow
        && tool.sig.asyncness.is_none()
    {
        let entry = match workflow.value {
            Some(Entry::Execute) => "execute",
            Some(Entry::Task) => "task",
            Some(Entry::Serve) => "serve",
            None => "workflow",
        };
        cx.error_at(tool.sig.fn_span, format!("a `workflow = {entry}` tool must be an `async fn`: its body awaits `ask`, `sleep` and steps; write `async fn`"));
    }
}

/// Each retry is another model call that shows the model its validation error again; past ten
/// corrections a model that has not produced valid input will rarely produce it, and more
/// attempts only spend the turn. The literal's type is checked while parsing; this is its range.
fn c20_input_retries(tool: &Tool<'_>, cx: &mut Ctxt) {
    let Some(given) = &tool.attrs.input_retries else {
        return;
    };
    if tool.attrs.input_retries().is_none() {
        cx.error_spanned(
            &given.value,
            format!(
                "`input_retries = {}` is over the limit: write 0 to {MAX_INPUT_RETRIES} (a model that has not produced valid input after {MAX_INPUT_RETRIES} corrections rarely will, and each retry is another model call)",
                given.value.base10_digits()
            ),
        );
    }
}

/// Guardrails judge the calls the model makes and the results it reads, and `prepare` shapes
/// the list it is sent: a `user_only` tool is in no such list and only the user interface calls
/// it, where the user's call is their own action (as with approvals, C9).
fn c22_user_only_hooks(tool: &Tool<'_>, cx: &mut Ctxt) {
    let a = tool.attrs;
    if !Attrs::flag(&a.user_only) {
        return;
    }
    if let Some(g) = &a.guardrails {
        cx.error_at(g.span, "`guardrails` with `user_only`: the model never calls a `user_only` tool, and a call from the user interface is the user's own action, so no guardrail would ever run; remove one");
    }
    if let Some(g) = &a.prepare {
        cx.error_at(g.span, "`prepare` with `user_only`: a `user_only` tool is in no model-facing list, so there is nothing to prepare; remove one");
    }
}

/// `require_auth` says whose approval counts: it means something only when a request policy
/// asks a person, and it names a provider the credential broker knows.
fn c24_require_auth(tool: &Tool<'_>, cx: &mut Ctxt) {
    let Some(approval) = &tool.attrs.approval else {
        return;
    };
    let Some(provider) = &approval.require_auth else {
        return;
    };
    let name = provider.value();
    let valid = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        let what = if name.is_empty() {
            "it is empty".to_owned()
        } else {
            format!("`{name}` is not a provider name (1 to 64 letters, digits, `_`, `-` or `.`)")
        };
        cx.error_spanned(
            provider,
            format!("`require_auth` names the provider whose token an approver must hold, e.g. `require_auth = \"github\"`; {what}"),
        );
    }
    if let Some((Policy::Never, span)) = &approval.request {
        cx.error_at(
            *span,
            "`require_auth` decides who may approve, and `request = never` asks nobody; use `request = always` (or `once`, `auto`, a policy fn), or remove `require_auth`",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::parse_str;

    fn run(attr: &str, item: &str) -> Vec<String> {
        let (attrs, mut cx) = parse_str(attr);
        let item = crate::item::ToolFn::read(&item.parse().unwrap()).unwrap();
        let sig = crate::sig::analyze(&item.sig, Attrs::flag(&attrs.provider), &mut cx);
        let doc = crate::attrs::doc_comment(&item.attrs).is_some();
        check(
            &Tool {
                attrs: &attrs,
                sig: &sig,
                doc,
            },
            &mut cx,
        );
        cx.messages()
    }

    const F: &str = "/// d\nasync fn f(a: A, ctx: ToolContext) -> u8 { 0 }";

    /// The reserved names the macro refuses are the runtime's.
    #[test]
    fn reserved_names_are_the_runtimes() {
        assert_eq!(RESERVED_NAMES, toolwright_core::names::RESERVED_NAMES);
    }

    #[test]
    fn ids_are_in_order() {
        // Increasing without repeats; a gap is an id kept for a rule being written elsewhere
        // (C21: `approval = auto(criteria)`).
        let mut last = 0;
        for rule in RULES {
            let n: u32 = rule.id[1..].parse().expect("ids are `C<n>`");
            assert!(n > last, "{} after C{last}", rule.id);
            last = n;
        }
    }

    #[test]
    fn guardrails_and_prepare() {
        assert!(
            run(
                "effect = write, guardrails(input = i, output = o), prepare = p",
                F
            )
            .is_empty()
        );
        let messages = run(
            "effect = read, user_only, guardrails(output = o), prepare = p",
            F,
        );
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].starts_with("`guardrails` with `user_only`"));
        assert!(messages[1].starts_with("`prepare` with `user_only`"));
        let messages = run(
            "provider, effect = read, guardrails(input = i), prepare = p",
            P,
        );
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages.iter().all(|m| m.contains("on a `provider` tool")));
    }

    #[test]
    fn valid_combinations_pass() {
        assert!(run("effect = read", F).is_empty());
        assert!(run("effect = money, approval = never", F).is_empty());
        assert!(run("effect = write, approval = once, approval_key = input", F).is_empty());
        assert!(run("effect = write, workflow = task", F).is_empty());
        assert!(run("effect = public, user_only", F).is_empty());
        assert!(run("effect = write, label(start = \"x {a}\", delta = d)", F).is_empty());
        assert!(run("effect = read, input_retries = 0", F).is_empty());
        assert!(
            run(
                "effect = write, workflow = serve, deferred, input_retries = 10",
                F
            )
            .is_empty()
        );
        assert!(run("effect = read, user_only = false, input_retries = 2", F).is_empty());
    }

    #[test]
    fn each_rule_fires() {
        assert!(run("", F)[0].contains("needs an effect"));
        assert!(run("effect = read", "fn f(a: A) {}")[0].contains("needs a description"));
        assert!(
            run("effect = read, workflow = execute, ends_turn", F)[0]
                .contains("cannot end the turn")
        );
        assert!(
            run("effect = read, workflow = execute, durable", F)[0].contains("already durable")
        );
        assert_eq!(run("effect = read, user_only, deferred, ends_turn, approval = always, subagents = false, input_retries = 1", F).len(), 5);
        assert!(
            run("effect = read, user_only, input_retries = 0", F)[0]
                .starts_with("`input_retries` with `user_only`")
        );
        for over in ["11", "255", "256", "99999999999999999999999"] {
            let messages = run(&format!("effect = read, input_retries = {over}"), F);
            assert_eq!(messages.len(), 1, "{messages:?}");
            assert!(
                messages[0].starts_with(&format!(
                    "`input_retries = {over}` is over the limit: write 0 to 10"
                )),
                "{messages:?}"
            );
        }
        assert!(run("effect = money", F)[0].contains("explicit approval policy"));
        assert!(run("effect = write, approval_key = input", F)[0].contains("no `approval`"));
        assert!(
            run("effect = write, approval = always, approval_key = input", F)[0]
                .contains("keeps no memory")
        );
        assert!(run("effect = write, approval(response = p)", F)[0].contains("no `request"));
        assert!(
            run("effect = read, label(delta = d)", "/// d\nfn f(a: A) {}")[0]
                .contains("cannot emit")
        );
        assert!(run("effect = read, name = \"a b\"", F)[0].contains("contains ' '"));
        assert!(
            run(
                "effect = read, summary = \""
                    .to_owned()
                    .as_str()
                    .chars()
                    .chain(std::iter::repeat_n('x', 81))
                    .chain("\"".chars())
                    .collect::<String>()
                    .as_str(),
                F
            )[0]
            .contains("81 characters")
        );
        assert!(run("effect = read, title = \" \"", F)[0].contains("`title` is empty"));
        assert!(
            run("effect = read, workflow = serve", "/// d\nfn f(a: A) {}")[0]
                .contains("must be an `async fn`")
        );
        assert!(run("effect = read", "/// d\nfn f<T>(a: T) {}")[0].contains("cannot be generic"));
        assert!(run("effect = read", "/// d\nfn f(&self) {}")[0].contains("cannot take `self`"));
        assert!(run("effect = read", "/// d\nfn f(a: &A) {}")[0].contains("by value"));
    }

    const P: &str = "/// d\nfn web_search() -> ProviderTool { ProviderTool::new() }";

    #[test]
    fn provider_tools() {
        assert!(run("provider, effect = read, untrusted", P).is_empty());
        assert!(
            run(
                "provider, effect = write, name = \"search\", toolset = \"web\", title = \"Web search\", summary = \"s\", subagents = false, enabled = e",
                P
            )
            .is_empty()
        );
        // Flags set to `false` state the defaults: nothing to refuse.
        assert!(
            run(
                "provider, effect = read, deferred = false, durable = false, user_only = false, output_schema = false, ends_turn = false",
                P
            )
            .is_empty()
        );
        assert!(run("provider, effect = read, deferred", P)[0].contains("could never reach it"));
        let keys = run(
            "provider, effect = read, workflow = execute, durable, approval = always, approval_key = input, ends_turn, input_retries = 2, user_only, label(start = \"x\"), output_schema, to_model_output = p, annotations(read_only = true)",
            P,
        );
        assert_eq!(keys.len(), 11, "{keys:?}");
        assert!(
            keys.iter().all(|m| m.contains("on a `provider` tool")),
            "{keys:?}"
        );
        // C20 stays quiet: C18 already refuses the key, whatever its value.
        assert_eq!(
            run("provider, effect = read, input_retries = 99", P).len(),
            1
        );
        // C10 stays quiet: C18 says why no approval can work.
        let money = run("provider, effect = money", P);
        assert_eq!(money.len(), 1, "{money:?}");
        assert!(money[0].contains("nobody can approve a call the provider already ran"));
        // No argument struct is asked for; each parameter, `async` and a missing return type are.
        let signature = run(
            "provider, effect = read",
            "/// d\nasync fn web_search(a: A, ctx: ToolContext) {}",
        );
        assert_eq!(signature.len(), 4, "{signature:?}");
        assert!(signature[0].contains("takes no parameters"));
        assert!(signature[2].contains("remove `async`"));
        assert!(signature[3].contains("write `-> ProviderTool`"));
        // The rules about keys and argument structs of other tools stay quiet.
        assert_eq!(
            run("provider, effect = read, user_only, deferred", P).len(),
            2
        );
        assert!(
            run(
                "provider, effect = read",
                "fn web_search() -> ProviderTool { ProviderTool::new() }"
            )[0]
            .contains("needs a description")
        );
    }

    #[test]
    fn a_description_fn_is_a_description() {
        assert!(run("effect = read, description = describe", "fn f(a: A) {}").is_empty());
        assert!(run("provider, effect = read, description = describe", P).is_empty());
        assert!(
            run("effect = read, description = \" \"", "fn f(a: A) {}")[0]
                .contains("`description` is empty")
        );
        // A bad value is reported once, not again as a missing description.
        assert_eq!(
            run("effect = read, description = |s| s", "fn f(a: A) {}").len(),
            1
        );
        assert_eq!(
            run("effect = read, description = 1", "fn f(a: A) {}").len(),
            1
        );
    }

    #[test]
    fn no_cascades() {
        // A misspelt key inside `approval(...)` is one error, not also "no `request`".
        assert_eq!(run("effect = write, approval(requst = always)", F).len(), 1);
        // `ends_turn = false` and `deferred = false` state the defaults: nothing to conflict with.
        assert!(run("effect = read, workflow = task, ends_turn = false", F).is_empty());
        assert!(
            run(
                "effect = read, user_only, deferred = false, ends_turn = false",
                F
            )
            .is_empty()
        );
    }

    #[test]
    fn names_get_a_fix() {
        let messages = run("effect = read, name = \"restart service\"", F);
        assert!(
            messages[0].ends_with("e.g. `name = \"restart_service\"`"),
            "{messages:?}"
        );
        let long = format!("/// d\nasync fn {}(a: A) {{}}", "f".repeat(65));
        assert!(run("effect = read", &long)[0].contains("named after the fn"));
        assert!(run("effect = read, summary = \"two\nlines\"", F)[0].contains("several lines"));
        assert!(run("effect = read, i18n(de(title = \"\"))", F)[0].contains("of locale `de`"));
    }
}
