//! `guardrails(input = path, output = path)` and `prepare = path`: the fns that check a call
//! before it runs and its output before the model sees it, and the fn that prepares the tool
//! for each step. Their signatures are checked by the compiler through the generated adapters.

use super::values::*;
use super::*;

/// `guardrails(input = path, output = path)`.
pub(super) fn parse_guardrails(
    meta: &ParseNestedMeta<'_>,
    cx: &mut Ctxt,
) -> syn::Result<Option<Guardrails>> {
    let form = "`guardrails(input = my_input_check, output = my_output_check)` (either or both)";
    if !meta.input.peek(syn::token::Paren) {
        cx.error_at(
            meta.path.span(),
            format!("`guardrails` takes the fns to run: {form}"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let content;
    syn::parenthesized!(content in meta.input);
    let tokens: TokenStream = content.parse()?;
    if tokens.is_empty() {
        cx.error_at(
            meta.path.span(),
            format!("`guardrails()` names no guardrail: {form}"),
        );
        return Ok(None);
    }
    let mut guardrails = Guardrails::default();
    let mut seen: Vec<String> = Vec::new();
    let parser = syn::meta::parser(|inner| {
        let key = key_name(&inner);
        let key_span = inner.path.span();
        if seen.contains(&key) {
            cx.error_at(
                key_span,
                format!("`{key}` is given twice in `guardrails(...)`; keep one"),
            );
            return skip_value(&inner);
        }
        seen.push(key.clone());
        let (slot, signature) = match key.as_str() {
            "input" => (&mut guardrails.input, "fn(&InputCheck<'_>) -> InputVerdict"),
            "output" => (
                &mut guardrails.output,
                "fn(&OutputCheck<'_>) -> OutputVerdict",
            ),
            other => {
                let hint = suggest(
                    other,
                    ["input", "output"],
                    "the keys are `input` (before the call runs) and `output` (before the model sees its result)",
                );
                cx.error_at(
                    key_span,
                    format!("unknown key `{other}` in `guardrails(...)`{hint}"),
                );
                return skip_value(&inner);
            }
        };
        let Some(expr) = expr_value(&inner, &key, &format!("{key} = my_{key}_check"), cx)? else {
            return Ok(());
        };
        match expr {
            Expr::Path(p) if p.qself.is_none() => *slot = Some(p.path),
            other => cx.error_spanned(
                &other,
                format!("`{key}` takes the path of a guardrail fn `{signature}` (or an `async fn`), not an expression; move the code into a named fn"),
            ),
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, tokens)?;
    Ok(Some(guardrails))
}
