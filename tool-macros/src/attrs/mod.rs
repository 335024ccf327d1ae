//! Parses `#[tool(...)]` into a typed IR. Problems that concern one key alone (unknown key,
//! duplicate, bad value) are reported here; rules across keys live in `rules.rs`.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ExprPath, Ident, Lit, LitBool, LitInt, LitStr, Path, Token};

use crate::ctxt::{Ctxt, suggest};
use crate::template::Template;

mod auto;
mod doc;
mod groups;
mod guard;
mod values;

pub(crate) use auto::Auto;

pub(crate) use doc::doc_comment;
use groups::{parse_annotations, parse_approval, parse_i18n, parse_label};
use guard::parse_guardrails;
use values::*;

/// Every key of `#[tool(...)]`, with the form to write it in and what it means. The README's
/// attribute table is checked against this list.
pub(crate) const KEYS: &[(&str, &str, &str)] = &[
    (
        "description",
        "description = \"...\" | path",
        "text for the model (what it does, when to use it, when not to, what it returns), or a fn `fn(&Services<'_>) -> String` computing it from host services when the tool list is built; required unless the fn has a doc comment",
    ),
    (
        "name",
        "name = \"...\"",
        "model-facing name; default the fn name; must match `^[a-zA-Z0-9_-]{1,64}$`",
    ),
    (
        "toolset",
        "toolset = \"...\"",
        "groups tools: id `toolset.name`, model name `toolset__name`",
    ),
    ("title", "title = \"...\"", "user-facing name"),
    (
        "summary",
        "summary = \"...\"",
        "user-facing one-line summary, at most 80 characters",
    ),
    (
        "i18n",
        "i18n(en(title = \"...\", summary = \"...\"))",
        "per-locale user-facing text",
    ),
    (
        "effect",
        "effect = read | write | money | public",
        "exactly one, required: what kind of thing the tool does",
    ),
    (
        "untrusted",
        "untrusted",
        "the output is third-party text: the rest of the turn is tainted",
    ),
    (
        "user_only",
        "user_only",
        "invisible to the model; calls from the model or a schedule are rejected",
    ),
    (
        "deferred",
        "deferred",
        "left out of the model's list; found through `tool_search`, called through `tool_call`",
    ),
    (
        "subagents",
        "subagents = false",
        "not offered in delegated (subagent) sessions; default true",
    ),
    (
        "approval",
        "approval = never | once | always | auto | auto(...) | path, or approval(request = ..., prompt = \"...\" | path, response = path, require_auth = \"provider\")",
        "the request policy (`auto(instructions = \"...\", criteria(clear = \"...\", caution = \"...\"), model = \"...\")` tells the decider what to judge, every part optional); the object form adds what the approver sees and who may approve",
    ),
    (
        "approval_key",
        "approval_key = input | path",
        "what `once` remembers: a digest of the exact input, or a fn of the input",
    ),
    (
        "ends_turn",
        "ends_turn, or ends_turn = path",
        "success ends the turn (always, or when a fn of the output says so)",
    ),
    (
        "input_retries",
        "input_retries = N",
        "how many times the model may correct an invalid input of this tool before the turn fails, 0 to 10 (0: the first invalid input fails it); default: the model loop's",
    ),
    (
        "label",
        "label(start = \"...\" | path, delta = path, complete = \"...\" | path)",
        "user-facing activity text; `{field}` placeholders name argument fields",
    ),
    (
        "output_schema",
        "output_schema",
        "publish the output type's JSON Schema (MCP `outputSchema` and `structuredContent`)",
    ),
    (
        "to_model_output",
        "to_model_output = path",
        "what the model sees of the output; the raw output still goes to events and clients",
    ),
    (
        "workflow",
        "workflow = execute | task | serve",
        "a workflow tool: a durable body with `ask`, `sleep` and journaled steps",
    ),
    (
        "durable",
        "durable",
        "a plain tool whose side effects go through journaled `step(name, ...)`",
    ),
    (
        "enabled",
        "enabled = path",
        "a conditional tool: a predicate over session state, evaluated at each step",
    ),
    (
        "guardrails",
        "guardrails(input = path, output = path)",
        "checks around each call: `input` (a fn `fn(&InputCheck<'_>) -> InputVerdict`, or async) before it runs, `output` (`fn(&OutputCheck<'_>) -> OutputVerdict`, or async) before the model sees its result",
    ),
    (
        "prepare",
        "prepare = path",
        "a fn `fn(&PrepareContext<'_>) -> Preparation` evaluated at each step: keep the tool, hide it, or change its description for that step",
    ),
    (
        "provider",
        "provider",
        "a provider-native tool, run by the model provider: a plain fn without parameters returning its `ProviderTool` configuration",
    ),
    (
        "annotations",
        "annotations(read_only = bool, destructive = bool, idempotent = bool, open_world = bool)",
        "override the MCP annotations derived from the effect",
    ),
    (
        "crate",
        "crate = path",
        "the path of the `toolwright` crate, when it is re-exported under another name",
    ),
];

/// Names other tool frameworks give our keys, pointed to ours when used as a key: a typo search
/// would not find them (`retries` is far from `input_retries` by edit distance).
const KEY_ALIASES: &[(&str, &str)] = &[
    ("retries", "input_retries"),
    ("max_retries", "input_retries"),
    ("input_guardrail", "guardrails"),
    ("output_guardrail", "guardrails"),
    ("input_guardrails", "guardrails"),
    ("output_guardrails", "guardrails"),
    ("prepare_tools", "prepare"),
];

pub(crate) const EFFECTS: &[&str] = &["read", "write", "money", "public"];
pub(crate) const POLICIES: &[&str] = &["never", "once", "always", "auto"];
pub(crate) const ENTRIES: &[&str] = &["execute", "task", "serve"];

/// The largest `input_retries`. tool-core's `ToolDescriptor::MAX_INPUT_RETRIES` is the same
/// number (this crate depends on nothing of ours); `tests/ui/pass/input_retries.rs` checks that
/// they agree.
pub(crate) const MAX_INPUT_RETRIES: u8 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    Read,
    Write,
    Money,
    Public,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    Execute,
    Task,
    Serve,
}

#[derive(Clone)]
pub(crate) enum Policy {
    Never,
    Once,
    Always,
    Auto(Box<Auto>),
    Custom(Path),
}

impl Policy {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Policy::Never => "never",
            Policy::Once => "once",
            Policy::Always => "always",
            Policy::Auto(_) => "auto",
            Policy::Custom(_) => "custom",
        }
    }
}

/// The model-facing description: literal text, or the path of a fn computing it from host
/// services.
#[derive(Clone)]
pub(crate) enum Description {
    Text(LitStr),
    /// An expression path, so a qualified one (`<Catalog as Describe>::describe`) works too.
    Fn(ExprPath),
}

/// A string template with `{field}` placeholders, or the path of a fn.
#[derive(Clone)]
pub(crate) enum TextOrPath {
    Template(Template),
    Path(Path),
}

#[derive(Clone)]
pub(crate) struct Approval {
    /// The `approval` key itself.
    pub(crate) span: Span,
    pub(crate) request: Option<(Policy, Span)>,
    pub(crate) prompt: Option<TextOrPath>,
    pub(crate) response: Option<Path>,
    /// `require_auth = "provider"`: only a person holding that provider's token may approve.
    pub(crate) require_auth: Option<LitStr>,
    /// Whether the object form `approval(...)` was used.
    pub(crate) object_form: bool,
    /// A problem inside `approval(...)` was already reported, so rules about what it lacks stay
    /// quiet (a misspelt `requst` must not also read as a missing `request`).
    pub(crate) reported: bool,
}

#[derive(Clone)]
pub(crate) enum ApprovalKey {
    Input,
    Custom(Path),
}

#[derive(Clone)]
pub(crate) enum EndsTurn {
    Always,
    ByOutput(Path),
}

#[derive(Clone, Default)]
pub(crate) struct Label {
    pub(crate) start: Option<TextOrPath>,
    pub(crate) delta: Option<(Path, Span)>,
    pub(crate) complete: Option<TextOrPath>,
}

#[derive(Clone)]
pub(crate) struct Locale {
    pub(crate) locale: Ident,
    pub(crate) title: Option<LitStr>,
    pub(crate) summary: Option<LitStr>,
}

/// `guardrails(input = path, output = path)`.
#[derive(Clone, Default)]
pub(crate) struct Guardrails {
    pub(crate) input: Option<Path>,
    pub(crate) output: Option<Path>,
}

#[derive(Clone, Default)]
pub(crate) struct Annotations {
    pub(crate) read_only: Option<bool>,
    pub(crate) destructive: Option<bool>,
    pub(crate) idempotent: Option<bool>,
    pub(crate) open_world: Option<bool>,
}

/// A key that was given, with the span of the key for messages about it.
#[derive(Clone)]
pub(crate) struct Given<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// The typed IR of one `#[tool(...)]`.
#[derive(Default, Clone)]
pub(crate) struct Attrs {
    pub(crate) description: Option<Given<Description>>,
    /// Set when the `description` key was present, even with a bad value, so C4 does not also
    /// say the description is missing.
    pub(crate) description_key: Option<Span>,
    pub(crate) name: Option<Given<LitStr>>,
    pub(crate) toolset: Option<Given<LitStr>>,
    pub(crate) title: Option<Given<LitStr>>,
    pub(crate) summary: Option<Given<LitStr>>,
    pub(crate) i18n: Option<Given<Vec<Locale>>>,
    pub(crate) effect: Option<Given<Effect>>,
    /// Set when the `effect` key was present, even with a bad value, so C3 does not also say
    /// it is missing.
    pub(crate) effect_key: Option<Span>,
    pub(crate) untrusted: Option<Given<bool>>,
    pub(crate) user_only: Option<Given<bool>>,
    pub(crate) deferred: Option<Given<bool>>,
    pub(crate) subagents: Option<Given<bool>>,
    pub(crate) approval: Option<Approval>,
    pub(crate) approval_key: Option<Given<ApprovalKey>>,
    pub(crate) ends_turn: Option<Given<Option<EndsTurn>>>,
    /// The integer literal as written; its range is C20's.
    pub(crate) input_retries: Option<Given<LitInt>>,
    pub(crate) label: Option<Given<Label>>,
    pub(crate) output_schema: Option<Given<bool>>,
    pub(crate) to_model_output: Option<Given<Path>>,
    pub(crate) workflow: Option<Given<Option<Entry>>>,
    pub(crate) durable: Option<Given<bool>>,
    pub(crate) enabled: Option<Given<Path>>,
    pub(crate) guardrails: Option<Given<Guardrails>>,
    pub(crate) prepare: Option<Given<Path>>,
    pub(crate) provider: Option<Given<bool>>,
    pub(crate) annotations: Option<Given<Annotations>>,
    pub(crate) krate: Option<Given<Path>>,
}

impl Attrs {
    pub(crate) fn flag(value: &Option<Given<bool>>) -> bool {
        value.as_ref().is_some_and(|g| g.value)
    }

    /// The value of `input_retries`, when it is given and in range (C20 reports it otherwise).
    pub(crate) fn input_retries(&self) -> Option<u8> {
        let given = self.input_retries.as_ref()?;
        given
            .value
            .base10_parse::<u8>()
            .ok()
            .filter(|n| *n <= MAX_INPUT_RETRIES)
    }
}

/// Parses the attribute's arguments. Syntax errors stop parsing (the tokens cannot be trusted);
/// every other problem is recorded in `cx` and parsing goes on.
pub(crate) fn parse(args: TokenStream, cx: &mut Ctxt) -> Attrs {
    let mut attrs = Attrs::default();
    let parser = syn::meta::parser(|meta| parse_key(meta, &mut attrs, cx));
    if let Err(error) = syn::parse::Parser::parse2(parser, args) {
        cx.push(error);
    }
    attrs
}

fn key_name(meta: &ParseNestedMeta<'_>) -> String {
    meta.path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn set<T>(slot: &mut Option<Given<T>>, value: T, span: Span, key: &str, cx: &mut Ctxt) {
    if slot.is_some() {
        cx.error_at(span, format!("`{key}` is given twice; keep one"));
    } else {
        *slot = Some(Given { value, span });
    }
}

fn parse_key(meta: ParseNestedMeta<'_>, attrs: &mut Attrs, cx: &mut Ctxt) -> syn::Result<()> {
    let key = key_name(&meta);
    let span = meta.path.span();
    match key.as_str() {
        "description" => {
            attrs.description_key.get_or_insert(span);
            if let Some(description) = description_value(&meta, cx)? {
                set(&mut attrs.description, description, span, &key, cx);
            }
        }
        "name" | "toolset" | "title" | "summary" => {
            if let Some(lit) = string_value(&meta, &key, cx)? {
                let slot = match key.as_str() {
                    "name" => &mut attrs.name,
                    "toolset" => &mut attrs.toolset,
                    "title" => &mut attrs.title,
                    _ => &mut attrs.summary,
                };
                set(slot, lit, span, &key, cx);
            }
        }
        "untrusted" | "user_only" | "deferred" | "durable" | "output_schema" | "subagents"
        | "provider" => {
            let value = flag_value(&meta, &key, cx)?;
            let slot = match key.as_str() {
                "untrusted" => &mut attrs.untrusted,
                "user_only" => &mut attrs.user_only,
                "deferred" => &mut attrs.deferred,
                "durable" => &mut attrs.durable,
                "output_schema" => &mut attrs.output_schema,
                "provider" => &mut attrs.provider,
                _ => &mut attrs.subagents,
            };
            if let Some(value) = value {
                set(slot, value, span, &key, cx);
            }
        }
        "effect" => {
            if attrs.effect_key.is_some() {
                cx.error_at(span, "`effect` is given twice; a tool has exactly one effect: `read`, `write`, `money` or `public`");
                skip_value(&meta)?;
                return Ok(());
            }
            attrs.effect_key = Some(span);
            if !meta.input.peek(Token![=]) {
                cx.error_at(span, "`effect` needs a value: `effect = read`, `effect = write`, `effect = money` or `effect = public`");
                skip_value(&meta)?;
                return Ok(());
            }
            let expr: Expr = meta.value()?.parse()?;
            if let Some(effect) = parse_effect(&expr, cx) {
                attrs.effect = Some(Given {
                    value: effect,
                    span,
                });
            }
        }
        "approval" => {
            if attrs.approval.is_some() {
                cx.error_at(span, "`approval` is given twice; keep one");
                skip_value(&meta)?;
                return Ok(());
            }
            attrs.approval = Some(parse_approval(&meta, span, cx)?);
        }
        "approval_key" => {
            let Some(expr) = expr_value(&meta, &key, "approval_key = input", cx)? else {
                return Ok(());
            };
            let parsed = match &expr {
                Expr::Path(p) if p.path.is_ident("input") => Some(ApprovalKey::Input),
                Expr::Path(p) => Some(ApprovalKey::Custom(p.path.clone())),
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) if s.value() == "input" => {
                    cx.error_spanned(s, "write `approval_key = input` without quotes");
                    None
                }
                other => {
                    cx.error_spanned(
                        other,
                        "expected `approval_key = input` or the path of a fn `fn(&Args) -> String`",
                    );
                    None
                }
            };
            if let Some(parsed) = parsed {
                set(&mut attrs.approval_key, parsed, span, &key, cx);
            }
        }
        "ends_turn" => {
            let value = if meta.input.peek(Token![=]) {
                let expr: Expr = meta.value()?.parse()?;
                match &expr {
                    Expr::Lit(ExprLit {
                        lit: Lit::Bool(b), ..
                    }) => b.value.then_some(EndsTurn::Always),
                    Expr::Path(p) => Some(EndsTurn::ByOutput(p.path.clone())),
                    other => {
                        cx.error_spanned(other, "expected `ends_turn` alone, or `ends_turn = path` naming a fn `fn(&Output) -> bool`");
                        None
                    }
                }
            } else if meta.input.peek(syn::token::Paren) {
                cx.error_at(span, "write `ends_turn` alone, or `ends_turn = path`");
                skip_value(&meta)?;
                None
            } else {
                Some(EndsTurn::Always)
            };
            set(&mut attrs.ends_turn, value, span, &key, cx);
        }
        "input_retries" => {
            if !meta.input.peek(Token![=]) {
                cx.error_at(span, format!("`input_retries` needs a number of retries from 0 to {MAX_INPUT_RETRIES}: `input_retries = 3`"));
                skip_value(&meta)?;
                return Ok(());
            }
            let expr: Expr = meta.value()?.parse()?;
            if let Some(lit) = retries_value(&expr, cx) {
                set(&mut attrs.input_retries, lit, span, &key, cx);
            }
        }
        "label" => {
            let label = parse_label(&meta, cx)?;
            set(&mut attrs.label, label, span, &key, cx);
        }
        "to_model_output" | "enabled" => {
            if let Some(path) = path_value(&meta, &key, cx)? {
                let slot = if key == "enabled" {
                    &mut attrs.enabled
                } else {
                    &mut attrs.to_model_output
                };
                set(slot, path, span, &key, cx);
            }
        }
        "prepare" => {
            if let Some(path) = path_value(&meta, &key, cx)? {
                set(&mut attrs.prepare, path, span, &key, cx);
            }
        }
        "guardrails" => {
            if let Some(guardrails) = parse_guardrails(&meta, cx)? {
                set(&mut attrs.guardrails, guardrails, span, &key, cx);
            }
        }
        "workflow" => {
            if attrs.workflow.is_some() {
                cx.error_at(span, "`workflow` is given twice; a workflow tool has exactly one entry point: `execute`, `task` or `serve`");
                skip_value(&meta)?;
                return Ok(());
            }
            let entry = if meta.input.peek(Token![=]) {
                let expr: Expr = meta.value()?.parse()?;
                parse_entry(&expr, cx)
            } else {
                cx.error_at(span, "`workflow` needs an entry point: `workflow = execute` (blocks the turn), `workflow = task` (returns a receipt, result later) or `workflow = serve` (a task that takes further calls)");
                skip_value(&meta)?;
                None
            };
            set(&mut attrs.workflow, entry, span, &key, cx);
        }
        "i18n" => {
            let locales = parse_i18n(&meta, cx)?;
            set(&mut attrs.i18n, locales, span, &key, cx);
        }
        "annotations" => {
            let annotations = parse_annotations(&meta, cx)?;
            set(&mut attrs.annotations, annotations, span, &key, cx);
        }
        "crate" => {
            if !meta.input.peek(Token![=]) {
                cx.error_at(span, "`crate` needs the path of the `toolwright` crate: `crate = my_reexport::toolwright`");
                skip_value(&meta)?;
                return Ok(());
            }
            let path: Path = meta.value()?.call(Path::parse_mod_style)?;
            set(&mut attrs.krate, path, span, &key, cx);
        }
        _ => {
            let known = KEYS
                .iter()
                .map(|k| format!("`{}`", k.0))
                .collect::<Vec<_>>()
                .join(", ");
            let hint = match KEY_ALIASES.iter().find(|(alias, _)| *alias == key) {
                Some((_, ours)) => format!("; did you mean `{ours}`?"),
                None => suggest(
                    &key,
                    KEYS.iter().map(|k| k.0),
                    &format!("the keys are {known}"),
                ),
            };
            cx.error_at(span, format!("unknown key `{key}` in `#[tool]`{hint}"));
            skip_value(&meta)?;
        }
    }
    Ok(())
}

/// Parses a standalone stream for unit tests.
#[cfg(test)]
pub(crate) fn parse_str(src: &str) -> (Attrs, Ctxt) {
    let mut cx = Ctxt::default();
    let tokens: TokenStream = src.parse().expect("valid tokens");
    let attrs = parse(tokens, &mut cx);
    (attrs, cx)
}

#[cfg(test)]
mod tests {
    use super::doc::reflow;
    use super::groups::is_locale;
    use super::*;

    #[test]
    fn every_key_parses() {
        let (attrs, cx) = parse_str(
            r#"name = "n", toolset = "t", title = "T", summary = "S", description = "d",
               i18n(en(title = "T", summary = "S")), effect = money, untrusted, deferred,
               subagents = false, approval(request = once, prompt = "Pay {amount}?", response = only_me),
               approval_key = input, ends_turn = done, input_retries = 2, label(start = "Paying {amount}", delta = d, complete = c),
               output_schema, to_model_output = p, durable, enabled = e, provider,
               annotations(idempotent = true), crate = ::toolwright"#,
        );
        assert!(!cx.has_errors(), "{:?}", cx.messages());
        assert_eq!(attrs.input_retries(), Some(2));
        assert_eq!(attrs.effect.unwrap().value, Effect::Money);
        assert!(attrs.approval.unwrap().object_form);
        assert!(matches!(
            attrs.approval_key.unwrap().value,
            ApprovalKey::Input
        ));
        assert!(matches!(
            attrs.ends_turn.unwrap().value,
            Some(EndsTurn::ByOutput(_))
        ));
        assert!(!attrs.subagents.unwrap().value);
        assert_eq!(attrs.i18n.unwrap().value.len(), 1);
        assert_eq!(attrs.annotations.unwrap().value.idempotent, Some(true));
        assert!(Attrs::flag(&attrs.provider));
    }

    #[test]
    fn all_problems_are_reported_together() {
        let (_, cx) =
            parse_str("effect = reed, durabel, name = \"a\", name = \"b\", workflow = exec");
        let messages = cx.messages();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].contains("did you mean `read`"));
        assert!(messages[1].contains("did you mean `durable`"));
        assert!(messages[2].contains("given twice"));
        assert!(messages[3].contains("did you mean `execute`"));
    }

    #[test]
    fn policies() {
        let (attrs, cx) = parse_str("effect = write, approval = auto(instructions = \"x\")");
        assert!(!cx.has_errors());
        assert!(matches!(
            attrs.approval.unwrap().request,
            Some((Policy::Auto(auto), _)) if auto.instructions.is_some()
        ));
        let (_, cx) = parse_str("effect = write, approval = allways");
        assert!(cx.messages()[0].contains("did you mean `always`"));
        let (attrs, cx) = parse_str("effect = write, approval = policies::refund");
        assert!(!cx.has_errors());
        assert!(matches!(
            attrs.approval.unwrap().request,
            Some((Policy::Custom(_), _))
        ));
    }

    #[test]
    fn doc_comments_reflow() {
        let lines: Vec<String> = [
            "Reads logs of one",
            "service.",
            "",
            "Use when:",
            "- a",
            "- b",
            "",
            "Returns lines.",
        ]
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
        assert_eq!(
            reflow(&lines),
            "Reads logs of one service.\n\nUse when:\n- a\n- b\n\nReturns lines."
        );
    }

    #[test]
    fn two_effects() {
        let (_, cx) = parse_str("effect = read | write");
        assert!(cx.messages()[0].contains("exactly one effect"));
    }

    #[test]
    fn quoted_words_ask_for_bare_ones() {
        let (_, cx) = parse_str(
            r#"effect = "read", workflow = "task", approval = "once", approval_key = "input""#,
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(
            messages.iter().all(|m| m.contains("without quotes")),
            "{messages:?}"
        );
    }

    #[test]
    fn keys_without_values_are_reported_and_parsing_goes_on() {
        let (attrs, cx) =
            parse_str("approval_key, label(start, delta), approval(request), crate, effect = read");
        assert_eq!(cx.messages().len(), 5, "{:?}", cx.messages());
        assert!(attrs.effect.is_some());
        assert!(attrs.approval.unwrap().reported);
    }

    #[test]
    fn a_misspelt_nested_key_marks_the_approval_as_reported() {
        let (attrs, cx) = parse_str("effect = write, approval(requst = always)");
        assert_eq!(cx.messages().len(), 1);
        assert!(attrs.approval.unwrap().reported);
    }

    #[test]
    fn descriptions_are_text_or_a_fn() {
        let (attrs, cx) = parse_str("effect = read, description = \"Shows a UI.\"");
        assert!(!cx.has_errors(), "{:?}", cx.messages());
        assert!(matches!(
            attrs.description.unwrap().value,
            Description::Text(text) if text.value() == "Shows a UI."
        ));
        let (attrs, cx) = parse_str("effect = read, description = catalog::describe");
        assert!(!cx.has_errors(), "{:?}", cx.messages());
        assert!(matches!(
            attrs.description.unwrap().value,
            Description::Fn(path) if path.path.segments.len() == 2
        ));
        let (attrs, cx) = parse_str("effect = read, description = <Catalog as Describe>::describe");
        assert!(!cx.has_errors(), "{:?}", cx.messages());
        assert!(matches!(
            attrs.description.unwrap().value,
            Description::Fn(path) if path.qself.is_some()
        ));
    }

    #[test]
    fn descriptions_that_are_neither_are_refused() {
        let (attrs, cx) = parse_str(
            "description = |s| s.to_string(), description = 1, description, description = d, description = \"x\"",
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].contains("not an expression"), "{messages:?}");
        assert!(messages[1].contains("not an expression"), "{messages:?}");
        assert!(messages[2].contains("needs a value"), "{messages:?}");
        // The first description given wins; the second is C2.
        assert!(matches!(
            attrs.description.unwrap().value,
            Description::Fn(_)
        ));
        assert!(
            messages[3].contains("`description` is given twice"),
            "{messages:?}"
        );
    }

    #[test]
    fn ends_turn_false_is_never() {
        let (attrs, cx) = parse_str("effect = read, ends_turn = false");
        assert!(!cx.has_errors());
        assert!(attrs.ends_turn.unwrap().value.is_none());
    }

    #[test]
    fn input_retries_is_an_integer_literal() {
        for (src, value) in [("0", 0), ("3", 3), ("10", 10), ("4u8", 4), ("5_usize", 5)] {
            let (attrs, cx) = parse_str(&format!("effect = read, input_retries = {src}"));
            assert!(!cx.has_errors(), "{src}: {:?}", cx.messages());
            assert_eq!(attrs.input_retries(), Some(value), "{src}");
        }
        // Out of range is C20's: parsing keeps the literal, the value reads as none.
        let (attrs, cx) = parse_str("effect = read, input_retries = 11");
        assert!(!cx.has_errors());
        assert!(attrs.input_retries.is_some());
        assert_eq!(attrs.input_retries(), None);
    }

    #[test]
    fn input_retries_that_is_not_an_integer_literal_is_refused() {
        let (attrs, cx) = parse_str(
            r#"input_retries = "3", input_retries = -1, input_retries = MAX_RETRIES,
               input_retries = 2.5, input_retries = "many", input_retries = 3abc,
               input_retries, input_retries(3), effect = read"#,
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 8, "{messages:?}");
        assert!(messages[0].contains("without quotes: `input_retries = 3`"));
        assert!(messages[1].contains("cannot be negative"));
        assert!(messages[2].contains("not a path"));
        for message in &messages[3..6] {
            assert!(
                message.contains("takes an integer literal from 0 to 10"),
                "{message}"
            );
        }
        for message in &messages[6..] {
            assert!(message.contains("needs a number of retries"), "{message}");
        }
        assert!(attrs.input_retries.is_none());
        assert!(attrs.effect.is_some(), "parsing goes on");
    }

    #[test]
    fn other_frameworks_names_for_input_retries_point_to_it() {
        let (_, cx) = parse_str(
            r#"effect = read, retries = 3, max_retries = 3, input_retry = 3, input_retries = "30""#,
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 4, "{messages:?}");
        for message in &messages[..3] {
            assert!(
                message.ends_with("; did you mean `input_retries`?"),
                "{message}"
            );
        }
        // A quoted number out of range is not told to drop the quotes, only to mind the range.
        assert!(
            messages[3].contains("takes an integer literal from 0 to 10"),
            "{messages:?}"
        );
    }

    #[test]
    fn input_retries_given_twice_keeps_the_first() {
        let (attrs, cx) = parse_str("effect = read, input_retries = 1, input_retries = 2");
        assert_eq!(cx.messages(), ["`input_retries` is given twice; keep one"]);
        assert_eq!(attrs.input_retries(), Some(1));
    }

    #[test]
    fn guardrails_and_prepare_parse() {
        let (attrs, cx) = parse_str(
            "effect = write, guardrails(input = checks::input, output = scan), prepare = prep",
        );
        assert!(!cx.has_errors(), "{:?}", cx.messages());
        let guardrails = attrs.guardrails.unwrap().value;
        assert_eq!(guardrails.input.unwrap().segments.len(), 2);
        assert!(guardrails.output.is_some());
        assert!(attrs.prepare.is_some());
        let (attrs, cx) = parse_str("effect = write, guardrails(output = scan)");
        assert!(!cx.has_errors());
        assert!(attrs.guardrails.unwrap().value.input.is_none());
    }

    #[test]
    fn guardrails_problems_are_reported() {
        let (attrs, cx) = parse_str(
            r#"guardrails = scan, guardrails(), guardrails(inptu = a, output = |o| o, input = b, input = c),
               prepare, prepare = |c| c, input_guardrail = x, prepare_tools = y, effect = read"#,
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 9, "{messages:?}");
        assert!(messages[0].contains("`guardrails` takes the fns to run"));
        assert!(messages[1].contains("names no guardrail"));
        assert!(messages[2].contains("did you mean `input`?"));
        assert!(messages[3].contains("`output` takes the path of a guardrail fn"));
        assert!(messages[4].contains("`input` is given twice in `guardrails(...)`"));
        assert!(messages[5].contains("`prepare` needs the path of a fn"));
        assert!(messages[6].contains("`prepare` takes the path of a fn"));
        assert!(messages[7].ends_with("did you mean `guardrails`?"));
        assert!(messages[8].ends_with("did you mean `prepare`?"));
        assert!(attrs.guardrails.unwrap().value.input.is_some());
    }

    #[test]
    fn locales() {
        for good in ["en", "de", "zh_cn", "pt_BR", "sr_latn_rs", "yue"] {
            assert!(is_locale(good), "{good}");
        }
        for bad in ["english", "e", "EN", "en_", "en_x"] {
            assert!(!is_locale(bad), "{bad}");
        }
    }
}
