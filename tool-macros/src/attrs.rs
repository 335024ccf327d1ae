//! Parses `#[tool(...)]` into a typed IR. Problems that concern one key alone (unknown key,
//! duplicate, bad value) are reported here; rules across keys live in `rules.rs`.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ExprPath, Ident, Lit, LitBool, LitStr, Path, Token};

use crate::ctxt::{Ctxt, suggest};
use crate::template::Template;

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
        "approval = never | once | always | auto | path, or approval(request = ..., prompt = \"...\" | path, response = path)",
        "the request policy; the object form adds what the approver sees and who may approve",
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

pub(crate) const EFFECTS: &[&str] = &["read", "write", "money", "public"];
pub(crate) const POLICIES: &[&str] = &["never", "once", "always", "auto"];
pub(crate) const ENTRIES: &[&str] = &["execute", "task", "serve"];

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
    Auto { instructions: Option<LitStr> },
    Custom(Path),
}

impl Policy {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Policy::Never => "never",
            Policy::Once => "once",
            Policy::Always => "always",
            Policy::Auto { .. } => "auto",
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
    pub(crate) label: Option<Given<Label>>,
    pub(crate) output_schema: Option<Given<bool>>,
    pub(crate) to_model_output: Option<Given<Path>>,
    pub(crate) workflow: Option<Given<Option<Entry>>>,
    pub(crate) durable: Option<Given<bool>>,
    pub(crate) enabled: Option<Given<Path>>,
    pub(crate) provider: Option<Given<bool>>,
    pub(crate) annotations: Option<Given<Annotations>>,
    pub(crate) krate: Option<Given<Path>>,
}

impl Attrs {
    pub(crate) fn flag(value: &Option<Given<bool>>) -> bool {
        value.as_ref().is_some_and(|g| g.value)
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
            let hint = suggest(
                &key,
                KEYS.iter().map(|k| k.0),
                &format!("the keys are {known}"),
            );
            cx.error_at(span, format!("unknown key `{key}` in `#[tool]`{hint}"));
            skip_value(&meta)?;
        }
    }
    Ok(())
}

/// Consumes whatever follows a key (`= expr` or `(...)`), for keys being rejected.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        let _: Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        let _: TokenStream = content.parse()?;
    }
    Ok(())
}

/// The expression after `key =`, or an error showing `form` (and `None`) when there is none.
fn expr_value(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    form: &str,
    cx: &mut Ctxt,
) -> syn::Result<Option<Expr>> {
    if !meta.input.peek(Token![=]) {
        cx.error_at(meta.path.span(), format!("`{key}` needs a value: `{form}`"));
        skip_value(meta)?;
        return Ok(None);
    }
    Ok(Some(meta.value()?.parse()?))
}

fn string_value(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    cx: &mut Ctxt,
) -> syn::Result<Option<LitStr>> {
    if !meta.input.peek(Token![=]) {
        cx.error_at(
            meta.path.span(),
            format!("`{key}` needs a string: `{key} = \"...\"`"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let expr: Expr = meta.value()?.parse()?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(Some(lit)),
        other => {
            cx.error_spanned(
                &other,
                format!("`{key}` takes a string literal: `{key} = \"...\"`"),
            );
            Ok(None)
        }
    }
}

/// `description = "..."` or `description = path`.
fn description_value(
    meta: &ParseNestedMeta<'_>,
    cx: &mut Ctxt,
) -> syn::Result<Option<Description>> {
    let form = "`description = \"...\"`, or `description = path` naming a fn `fn(&Services<'_>) -> String` that computes it from host services";
    if !meta.input.peek(Token![=]) {
        cx.error_at(
            meta.path.span(),
            format!("`description` needs a value: {form}"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    match meta.value()?.parse()? {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(Some(Description::Text(lit))),
        Expr::Path(path) if path.attrs.is_empty() => Ok(Some(Description::Fn(path))),
        other => {
            cx.error_spanned(
                &other,
                format!("`description` takes a string literal or the path of a fn, not an expression: {form}; move the code into a named fn"),
            );
            Ok(None)
        }
    }
}

fn flag_value(meta: &ParseNestedMeta<'_>, key: &str, cx: &mut Ctxt) -> syn::Result<Option<bool>> {
    if meta.input.peek(Token![=]) {
        let value = meta.value()?;
        if value.peek(LitBool) {
            return Ok(Some(value.parse::<LitBool>()?.value));
        }
        let expr: Expr = value.parse()?;
        cx.error_spanned(
            &expr,
            format!("`{key}` takes `true` or `false`, or write `{key}` alone for `true`"),
        );
        return Ok(None);
    }
    if meta.input.peek(syn::token::Paren) {
        cx.error_at(
            meta.path.span(),
            format!("write `{key}` alone, or `{key} = false`"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    if key == "subagents" {
        // `subagents` alone would restate the default.
        cx.error_at(meta.path.span(), "tools are offered to subagents by default; write `subagents = false` to withhold this one");
        return Ok(None);
    }
    Ok(Some(true))
}

fn path_value(meta: &ParseNestedMeta<'_>, key: &str, cx: &mut Ctxt) -> syn::Result<Option<Path>> {
    if !meta.input.peek(Token![=]) {
        cx.error_at(
            meta.path.span(),
            format!("`{key}` needs the path of a fn: `{key} = my_fn`"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let expr: Expr = meta.value()?.parse()?;
    match expr {
        Expr::Path(p) => Ok(Some(p.path)),
        other => {
            cx.error_spanned(&other, format!("`{key}` takes the path of a fn (`{key} = my_fn`), not an expression; move the code into a named fn"));
            Ok(None)
        }
    }
}

fn single_ident(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => p.path.get_ident(),
        _ => None,
    }
}

/// The text of a string literal that spells one of `choices` (`effect = "read"`): the user meant
/// the bare word.
fn quoted(expr: &Expr, choices: &[&str]) -> Option<String> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) if choices.contains(&s.value().as_str()) => Some(s.value()),
        _ => None,
    }
}

fn parse_effect(expr: &Expr, cx: &mut Ctxt) -> Option<Effect> {
    let list = "`read`, `write`, `money` or `public`";
    if let Expr::Binary(_) = expr {
        cx.error_spanned(
            expr,
            format!("a tool has exactly one effect; choose the strongest of {list}"),
        );
        return None;
    }
    if let Some(text) = quoted(expr, EFFECTS) {
        cx.error_spanned(
            expr,
            format!("write the effect without quotes: `effect = {text}`"),
        );
        return None;
    }
    let Some(ident) = single_ident(expr) else {
        cx.error_spanned(expr, format!("expected one effect: {list}"));
        return None;
    };
    match ident.to_string().as_str() {
        "read" => Some(Effect::Read),
        "write" => Some(Effect::Write),
        "money" => Some(Effect::Money),
        "public" => Some(Effect::Public),
        other => {
            let hint = suggest(
                other,
                EFFECTS.iter().copied(),
                &format!("the effects are {list}"),
            );
            cx.error_spanned(ident, format!("unknown effect `{other}`{hint}"));
            None
        }
    }
}

fn parse_entry(expr: &Expr, cx: &mut Ctxt) -> Option<Entry> {
    let list = "`execute` (blocks the turn), `task` (returns a receipt, result later) or `serve` (a task that takes further calls)";
    if let Expr::Binary(_) = expr {
        cx.error_spanned(
            expr,
            format!("a workflow tool has exactly one entry point: {list}"),
        );
        return None;
    }
    if let Some(text) = quoted(expr, ENTRIES) {
        cx.error_spanned(
            expr,
            format!("write the entry point without quotes: `workflow = {text}`"),
        );
        return None;
    }
    let Some(ident) = single_ident(expr) else {
        cx.error_spanned(expr, format!("expected one entry point: {list}"));
        return None;
    };
    match ident.to_string().as_str() {
        "execute" => Some(Entry::Execute),
        "task" => Some(Entry::Task),
        "serve" => Some(Entry::Serve),
        other => {
            let hint = suggest(
                other,
                ENTRIES.iter().copied(),
                &format!("the entry points are {list}"),
            );
            cx.error_spanned(
                ident,
                format!("unknown workflow entry point `{other}`{hint}"),
            );
            None
        }
    }
}

/// `never | once | always | auto | auto(instructions = "...") | path` (with optional `()` after
/// a built-in name, as the seeds write them).
fn parse_policy(expr: &Expr, cx: &mut Ctxt) -> Option<Policy> {
    let builtin = |name: &str| match name {
        "never" => Some(Policy::Never),
        "once" => Some(Policy::Once),
        "always" => Some(Policy::Always),
        "auto" => Some(Policy::Auto { instructions: None }),
        _ => None,
    };
    match expr {
        Expr::Path(p) => {
            if let Some(ident) = p.path.get_ident() {
                let name = ident.to_string();
                if let Some(policy) = builtin(&name) {
                    return Some(policy);
                }
                // A bare name one typo away from a built-in is far likelier a typo than a fn
                // with that name; a qualified path (`self::onse`) still reaches such a fn.
                if let Some(close) = crate::ctxt::closest(&name, POLICIES.iter().copied()) {
                    cx.error_spanned(ident, format!("unknown approval policy `{name}`; did you mean `{close}`? (the built-in policies are `never`, `once`, `always` and `auto`; a fn of yours with this name is reached as `self::{name}`)"));
                    return None;
                }
            }
            Some(Policy::Custom(p.path.clone()))
        }
        Expr::Call(call) => {
            let Some(ident) = single_ident(&call.func) else {
                cx.error_spanned(expr, "expected a policy: `never`, `once`, `always`, `auto` or the path of a policy fn");
                return None;
            };
            let name = ident.to_string();
            match builtin(&name) {
                Some(Policy::Auto { .. }) => {
                    let mut instructions = None;
                    for arg in &call.args {
                        match arg {
                            Expr::Assign(assign)
                                if single_ident(&assign.left)
                                    .is_some_and(|i| i == "instructions") =>
                            {
                                match &*assign.right {
                                    Expr::Lit(ExprLit {
                                        lit: Lit::Str(s), ..
                                    }) => instructions = Some(s.clone()),
                                    other => cx.error_spanned(
                                        other,
                                        "`instructions` takes a string literal",
                                    ),
                                }
                            }
                            other => {
                                cx.error_spanned(other, "`auto` takes `instructions = \"...\"`")
                            }
                        }
                    }
                    Some(Policy::Auto { instructions })
                }
                Some(policy) if call.args.is_empty() => Some(policy),
                Some(_) => {
                    cx.error_spanned(&call.args, format!("`{name}` takes no arguments"));
                    None
                }
                None => {
                    cx.error_spanned(expr, format!("a policy fn is named by its path, not called: write `approval = {name}`"));
                    None
                }
            }
        }
        other if quoted(other, POLICIES).is_some() => {
            let text = quoted(other, POLICIES).unwrap_or_default();
            cx.error_spanned(other, format!("write the policy without quotes: `{text}`"));
            None
        }
        other => {
            cx.error_spanned(other, "expected a policy: `never`, `once`, `always`, `auto` or the path of a policy fn (closures are not accepted: name the fn)");
            None
        }
    }
}

fn text_or_path(expr: Expr, what: &str, cx: &mut Ctxt) -> Option<TextOrPath> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => match Template::parse(&lit) {
            Ok(template) => Some(TextOrPath::Template(template)),
            Err(error) => {
                cx.push(error);
                None
            }
        },
        Expr::Path(p) => Some(TextOrPath::Path(p.path)),
        other => {
            cx.error_spanned(&other, format!("`{what}` takes a string template (\"Restart {{service}}?\") or the path of a fn"));
            None
        }
    }
}

fn parse_approval(meta: &ParseNestedMeta<'_>, span: Span, cx: &mut Ctxt) -> syn::Result<Approval> {
    let mut approval = Approval {
        span,
        request: None,
        prompt: None,
        response: None,
        object_form: false,
        reported: false,
    };
    if meta.input.peek(Token![=]) {
        let expr: Expr = meta.value()?.parse()?;
        let expr_span = expr.span();
        approval.request = parse_policy(&expr, cx).map(|p| (p, expr_span));
        return Ok(approval);
    }
    if !meta.input.peek(syn::token::Paren) {
        cx.error_at(span, "`approval` needs a policy: `approval = always`, or `approval(request = always, prompt = \"...\")`");
        return Ok(approval);
    }
    approval.object_form = true;
    let mut seen: Vec<String> = Vec::new();
    meta.parse_nested_meta(|inner| {
        let key = key_name(&inner);
        let key_span = inner.path.span();
        if seen.contains(&key) {
            cx.error_at(key_span, format!("`{key}` is given twice in `approval(...)`; keep one"));
            approval.reported = true;
            return skip_value(&inner);
        }
        seen.push(key.clone());
        match key.as_str() {
            "request" => {
                let expr = expr_value(&inner, &key, "request = always", cx)?;
                let expr_span = expr.as_ref().map(Spanned::span);
                approval.request = expr.and_then(|e| parse_policy(&e, cx)).zip(expr_span);
                approval.reported |= approval.request.is_none();
            }
            "prompt" => {
                if let Some(expr) = expr_value(&inner, &key, "prompt = \"Restart {service}?\"", cx)? {
                    approval.prompt = text_or_path(expr, "prompt", cx);
                }
            }
            "response" => {
                let Some(expr) = expr_value(&inner, &key, "response = my_response_policy", cx)? else {
                    return Ok(());
                };
                match expr {
                    Expr::Path(p) => approval.response = Some(p.path),
                    other => cx.error_spanned(&other, "`response` takes the path of a response policy fn `fn(&ResponseContext<'_, Args>) -> ResponseVerdict`"),
                }
            }
            other => {
                let hint = suggest(other, ["request", "prompt", "response"], "the keys are `request`, `prompt` and `response`");
                cx.error_at(key_span, format!("unknown key `{other}` in `approval(...)`{hint}"));
                approval.reported = true;
                skip_value(&inner)?;
            }
        }
        Ok(())
    })?;
    Ok(approval)
}

fn parse_label(meta: &ParseNestedMeta<'_>, cx: &mut Ctxt) -> syn::Result<Label> {
    let mut label = Label::default();
    if !meta.input.peek(syn::token::Paren) {
        cx.error_at(
            meta.path.span(),
            "`label` takes parts: `label(start = \"...\", delta = path, complete = \"...\")`",
        );
        skip_value(meta)?;
        return Ok(label);
    }
    let mut seen: Vec<String> = Vec::new();
    meta.parse_nested_meta(|inner| {
        let key = key_name(&inner);
        let key_span = inner.path.span();
        if seen.contains(&key) {
            cx.error_at(key_span, format!("`{key}` is given twice in `label(...)`; keep one"));
            return skip_value(&inner);
        }
        seen.push(key.clone());
        match key.as_str() {
            "start" | "complete" => {
                let form = format!("{key} = \"Restarting {{service}}\"");
                let Some(expr) = expr_value(&inner, &key, &form, cx)? else {
                    return Ok(());
                };
                let parsed = text_or_path(expr, &key, cx);
                if key == "start" {
                    label.start = parsed;
                } else {
                    label.complete = parsed;
                }
            }
            "delta" => {
                let Some(expr) = expr_value(&inner, &key, "delta = my_delta_label", cx)? else {
                    return Ok(());
                };
                match expr {
                    Expr::Path(p) => label.delta = Some((p.path, key_span)),
                    other => cx.error_spanned(&other, "`delta` takes the path of a fn `fn(&Args, &serde_json::Value) -> String` (the partial snapshot is JSON)"),
                }
            }
            other => {
                let hint = suggest(other, ["start", "delta", "complete"], "the keys are `start`, `delta` and `complete`");
                cx.error_at(key_span, format!("unknown key `{other}` in `label(...)`{hint}"));
                skip_value(&inner)?;
            }
        }
        Ok(())
    })?;
    Ok(label)
}

fn parse_i18n(meta: &ParseNestedMeta<'_>, cx: &mut Ctxt) -> syn::Result<Vec<Locale>> {
    let mut locales: Vec<Locale> = Vec::new();
    if !meta.input.peek(syn::token::Paren) {
        cx.error_at(
            meta.path.span(),
            "`i18n` takes locales: `i18n(en(title = \"...\", summary = \"...\"))`",
        );
        skip_value(meta)?;
        return Ok(locales);
    }
    meta.parse_nested_meta(|locale_meta| {
        let Some(locale) = locale_meta.path.get_ident().cloned() else {
            cx.error_spanned(&locale_meta.path, "expected a locale such as `en` or `zh_cn`");
            return skip_value(&locale_meta);
        };
        if !is_locale(&locale.to_string()) {
            cx.error_spanned(&locale, format!("`{locale}` is not a locale; write a BCP 47 language tag with `_` for `-`, such as `en`, `de` or `pt_br`"));
            return skip_value(&locale_meta);
        }
        if locales.iter().any(|l| l.locale == locale) {
            cx.error_spanned(&locale, format!("locale `{locale}` is given twice; keep one"));
            return skip_value(&locale_meta);
        }
        let mut entry = Locale {
            locale: locale.clone(),
            title: None,
            summary: None,
        };
        if !locale_meta.input.peek(syn::token::Paren) {
            cx.error_spanned(&locale, format!("locale `{locale}` takes parts: `{locale}(title = \"...\", summary = \"...\")`"));
            return skip_value(&locale_meta);
        }
        locale_meta.parse_nested_meta(|field| {
            let key = key_name(&field);
            match key.as_str() {
                "title" | "summary" => {
                    let lit = string_value(&field, &key, cx)?;
                    let slot = if key == "title" { &mut entry.title } else { &mut entry.summary };
                    if slot.is_some() {
                        cx.error_at(field.path.span(), format!("`{key}` is given twice for locale `{locale}`"));
                    } else {
                        *slot = lit;
                    }
                }
                other => {
                    let hint = suggest(other, ["title", "summary"], "a locale takes `title` and `summary`");
                    cx.error_at(field.path.span(), format!("unknown key `{other}` in `{locale}(...)`{hint}"));
                    skip_value(&field)?;
                }
            }
            Ok(())
        })?;
        locales.push(entry);
        Ok(())
    })?;
    Ok(locales)
}

/// `en`, `zh_cn`, `sr_latn_rs`: a 2–3 letter lowercase language, then subtags of 2–8 letters or
/// digits.
fn is_locale(text: &str) -> bool {
    let mut parts = text.split('_');
    let language = parts.next().unwrap_or_default();
    (2..=3).contains(&language.len())
        && language.chars().all(|c| c.is_ascii_lowercase())
        && parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

fn parse_annotations(meta: &ParseNestedMeta<'_>, cx: &mut Ctxt) -> syn::Result<Annotations> {
    let mut annotations = Annotations::default();
    if !meta.input.peek(syn::token::Paren) {
        cx.error_at(
            meta.path.span(),
            "`annotations` takes hints: `annotations(read_only = true, idempotent = true)`",
        );
        skip_value(meta)?;
        return Ok(annotations);
    }
    meta.parse_nested_meta(|inner| {
        let key = key_name(&inner);
        let names = ["read_only", "destructive", "idempotent", "open_world"];
        let slot = match key.as_str() {
            "read_only" => &mut annotations.read_only,
            "destructive" => &mut annotations.destructive,
            "idempotent" => &mut annotations.idempotent,
            "open_world" => &mut annotations.open_world,
            other => {
                let hint = suggest(
                    other,
                    names,
                    "the annotations are `read_only`, `destructive`, `idempotent` and `open_world`",
                );
                cx.error_at(
                    inner.path.span(),
                    format!("unknown annotation `{other}`{hint}"),
                );
                return skip_value(&inner);
            }
        };
        if slot.is_some() {
            cx.error_at(
                inner.path.span(),
                format!("`{key}` is given twice in `annotations(...)`; keep one"),
            );
            return skip_value(&inner);
        }
        let form = format!("{key} = true");
        let Some(expr) = expr_value(&inner, &key, &form, cx)? else {
            return Ok(());
        };
        match expr {
            Expr::Lit(ExprLit {
                lit: Lit::Bool(b), ..
            }) => *slot = Some(b.value),
            other => cx.error_spanned(other, format!("`{key}` takes `true` or `false`")),
        }
        Ok(())
    })?;
    Ok(annotations)
}

/// The doc comment of the fn, as the description: lines joined, one leading space removed from
/// each, blank lines at both ends dropped.
pub(crate) fn doc_comment(attrs: &[syn::Attribute]) -> Option<(String, Span)> {
    let mut lines = Vec::new();
    let mut span = None;
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
        {
            span.get_or_insert(attr.span());
            let text = s.value();
            for line in text.lines() {
                lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
            }
        }
    }
    let text = reflow(&lines);
    (!text.is_empty()).then(|| (text, span.unwrap_or_else(Span::call_site)))
}

/// Joins the lines of a doc comment the way a reader sees them: lines wrapped within a paragraph
/// become one line (a model should not see mid-sentence breaks), blank lines separate paragraphs,
/// and list items, indented code and fenced code keep their own lines.
pub(crate) fn reflow(lines: &[String]) -> String {
    let mut out = String::new();
    let mut in_fence = false;
    let mut previous_blank = true;
    for line in lines {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```");
        if trimmed.is_empty() && !in_fence {
            if !previous_blank {
                out.push_str("\n\n");
            }
            previous_blank = true;
            continue;
        }
        let keeps_own_line = in_fence
            || fence
            || line.starts_with("    ")
            || trimmed.starts_with("- ")
            || trimmed.starts_with("* ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if !previous_blank {
            out.push(if keeps_own_line { '\n' } else { ' ' });
        }
        out.push_str(if in_fence || line.starts_with("    ") {
            line
        } else {
            trimmed
        });
        if fence {
            in_fence = !in_fence;
        }
        previous_blank = false;
    }
    out.trim().to_owned()
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
    use super::*;

    #[test]
    fn every_key_parses() {
        let (attrs, cx) = parse_str(
            r#"name = "n", toolset = "t", title = "T", summary = "S", description = "d",
               i18n(en(title = "T", summary = "S")), effect = money, untrusted, deferred,
               subagents = false, approval(request = once, prompt = "Pay {amount}?", response = only_me),
               approval_key = input, ends_turn = done, label(start = "Paying {amount}", delta = d, complete = c),
               output_schema, to_model_output = p, durable, enabled = e, provider,
               annotations(idempotent = true), crate = ::toolwright"#,
        );
        assert!(!cx.has_errors(), "{:?}", cx.messages());
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
            Some((
                Policy::Auto {
                    instructions: Some(_)
                },
                _
            ))
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
    fn locales() {
        for good in ["en", "de", "zh_cn", "pt_BR", "sr_latn_rs", "yue"] {
            assert!(is_locale(good), "{good}");
        }
        for bad in ["english", "e", "EN", "en_", "en_x"] {
            assert!(!is_locale(bad), "{bad}");
        }
    }
}
