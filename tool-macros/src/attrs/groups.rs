//! The keys whose value is a group of sub-keys: `approval(...)`, `label(...)`, `i18n(...)` and
//! `annotations(...)`.

use super::values::*;
use super::*;

pub(super) fn parse_approval(
    meta: &ParseNestedMeta<'_>,
    span: Span,
    cx: &mut Ctxt,
) -> syn::Result<Approval> {
    let mut approval = Approval {
        span,
        request: None,
        prompt: None,
        response: None,
        require_auth: None,
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
            "require_auth" => {
                approval.require_auth = string_value(&inner, "require_auth", cx)?;
                approval.reported |= approval.require_auth.is_none();
            }
            other => {
                let hint = suggest(other, ["request", "prompt", "response", "require_auth"], "the keys are `request`, `prompt`, `response` and `require_auth`");
                cx.error_at(key_span, format!("unknown key `{other}` in `approval(...)`{hint}"));
                approval.reported = true;
                skip_value(&inner)?;
            }
        }
        Ok(())
    })?;
    Ok(approval)
}

pub(super) fn parse_label(meta: &ParseNestedMeta<'_>, cx: &mut Ctxt) -> syn::Result<Label> {
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

pub(super) fn parse_i18n(meta: &ParseNestedMeta<'_>, cx: &mut Ctxt) -> syn::Result<Vec<Locale>> {
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
pub(super) fn is_locale(text: &str) -> bool {
    let mut parts = text.split('_');
    let language = parts.next().unwrap_or_default();
    (2..=3).contains(&language.len())
        && language.chars().all(|c| c.is_ascii_lowercase())
        && parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

pub(super) fn parse_annotations(
    meta: &ParseNestedMeta<'_>,
    cx: &mut Ctxt,
) -> syn::Result<Annotations> {
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
