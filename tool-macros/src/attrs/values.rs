//! The value of one key: strings, flags, paths, expressions, and the effect, entry and policy
//! values, each checked and reported where it is written.

use super::*;

/// Consumes whatever follows a key (`= expr` or `(...)`), for keys being rejected.
pub(super) fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
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
pub(super) fn expr_value(
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

pub(super) fn string_value(
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

/// `input_retries = N`: an integer literal (with an integer suffix or none). Whether it is in
/// range is C20's check over the parsed value.
pub(super) fn retries_value(expr: &Expr, cx: &mut Ctxt) -> Option<LitInt> {
    const INTEGER_SUFFIXES: &[&str] = &[
        "", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
    ];
    let range = format!("0 to {MAX_INPUT_RETRIES}");
    let message = match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) if INTEGER_SUFFIXES.contains(&lit.suffix()) => return Some(lit.clone()),
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) if text
            .value()
            .trim()
            .parse::<u8>()
            .is_ok_and(|n| n <= MAX_INPUT_RETRIES) =>
        {
            format!(
                "write the number without quotes: `input_retries = {}`",
                text.value().trim()
            )
        }
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            ..
        }) => format!(
            "`input_retries` counts retries and cannot be negative; write {range} (0: the first invalid input fails the turn)"
        ),
        Expr::Path(_) => format!(
            "`input_retries` takes an integer literal from {range}, not a path (the macro cannot read a const's value); write the number: `input_retries = 3`"
        ),
        _ => format!("`input_retries` takes an integer literal from {range}: `input_retries = 3`"),
    };
    cx.error_spanned(expr, message);
    None
}

/// `description = "..."` or `description = path`.
pub(super) fn description_value(
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

pub(super) fn flag_value(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    cx: &mut Ctxt,
) -> syn::Result<Option<bool>> {
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

pub(super) fn path_value(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    cx: &mut Ctxt,
) -> syn::Result<Option<Path>> {
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

pub(super) fn single_ident(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => p.path.get_ident(),
        _ => None,
    }
}

/// The text of a string literal that spells one of `choices` (`effect = "read"`): the user meant
/// the bare word.
pub(super) fn quoted(expr: &Expr, choices: &[&str]) -> Option<String> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) if choices.contains(&s.value().as_str()) => Some(s.value()),
        _ => None,
    }
}

pub(super) fn parse_effect(expr: &Expr, cx: &mut Ctxt) -> Option<Effect> {
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

pub(super) fn parse_entry(expr: &Expr, cx: &mut Ctxt) -> Option<Entry> {
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

/// `never | once | always | auto | auto(...) | path` (with optional `()` after a built-in name,
/// as the seeds write them); `auto(...)`'s parts are `auto.rs`'s.
pub(super) fn parse_policy(expr: &Expr, cx: &mut Ctxt) -> Option<Policy> {
    let builtin = |name: &str| match name {
        "never" => Some(Policy::Never),
        "once" => Some(Policy::Once),
        "always" => Some(Policy::Always),
        "auto" => Some(Policy::Auto(Box::default())),
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
                Some(Policy::Auto(_)) => {
                    Some(Policy::Auto(Box::new(super::auto::parse_auto(call, cx))))
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

pub(super) fn text_or_path(expr: Expr, what: &str, cx: &mut Ctxt) -> Option<TextOrPath> {
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
