//! The `#[tool]` attribute and `#[derive(ToolInput)]` of toolwright.
//!
//! Use them through the `toolwright` facade, which documents them in full. The macro parses its
//! keys into a typed IR (`attrs`), checks the rules C1–C26 over it (`rules`, `sig`), and only then
//! expands (`expand`); on any error it emits the user's fn untouched with every error at once
//! (`fallback`). It never panics on user input.

#![warn(missing_docs)]

mod attrs;
mod ctxt;
mod derive;
mod expand;
mod fallback;
mod item;
mod rules;
mod sig;
mod template;

use proc_macro::TokenStream;

/// Turns an `async fn` (or `fn`) into a registered tool. See the `toolwright` crate docs.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    tool_impl(args.into(), item.into()).into()
}

fn tool_impl(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let item_fn = match item::ToolFn::read(&item) {
        Ok(item_fn) => item_fn,
        Err(_) => return fallback::not_a_fn(item),
    };

    let mut cx = ctxt::Ctxt::default();
    let attrs = attrs::parse(args, &mut cx);
    let tw = expand::Tw::new(attrs.krate.as_ref().map(|given| &given.value));
    let sig = sig::analyze(&item_fn.sig, attrs::Attrs::flag(&attrs.provider), &mut cx);
    let doc = attrs::doc_comment(&item_fn.attrs);
    rules::check(
        &rules::Tool {
            attrs: &attrs,
            sig: &sig,
            doc: doc.is_some(),
        },
        &mut cx,
    );
    if let Err(errors) = cx.into_result() {
        return fallback::emit(item, &item_fn, &tw, errors);
    }

    // With a description fn, the doc comment (if any) stays in the descriptor for readers of
    // the code; the model sees what the fn computes.
    let description = match attrs.description.as_ref().map(|g| &g.value) {
        Some(attrs::Description::Text(text)) => text.value().trim().to_owned(),
        Some(attrs::Description::Fn(_)) | None => doc.map(|(text, _)| text).unwrap_or_default(),
    };
    expand::expand(&expand::Input {
        tokens: item,
        item: &item_fn,
        attrs: &attrs,
        sig: &sig,
        description,
        tw,
    })
}

/// Implements `ToolInput` for an argument struct with named fields; refuses other shapes at
/// compile time. Use beside `Deserialize` and `JsonSchema`.
///
/// Attributes: `#[toolwright(crate = path)]` on the struct names the facade when it is
/// re-exported under another path; `#[toolwright(sensitive)]` on a field keeps its value out of
/// records, events, approval prompts and logs while the tool still receives it (not on a
/// skipped, flattened or aliased field: rule C26; a label or prompt template cannot show it:
/// rule C25).
#[proc_macro_derive(ToolInput, attributes(toolwright))]
pub fn derive_tool_input(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item) {
        Ok(input) => derive::expand(input).into(),
        Err(error) => error.to_compile_error().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's rule table and attribute table must match the tables in code.
    #[test]
    fn readme_tables_match_the_code() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md at the workspace root");
        let cell = |text: &str| text.replace('|', "\\|");
        for rule in rules::RULES {
            let row = format!("| {} | {} |", rule.id, cell(rule.summary));
            assert!(
                readme.contains(&row),
                "README.md lacks the rule row:\n{row}"
            );
        }
        for (key, form, summary) in attrs::KEYS {
            let row = format!("| `{}` | {} |", cell(form), cell(summary));
            assert!(
                readme.contains(&row),
                "README.md lacks the row for `{key}`:\n{row}"
            );
        }
    }

    #[test]
    fn never_panics_on_odd_input() {
        for (args, item) in [
            ("", "struct S;"),
            ("effect", "fn f() {}"),
            ("effect = ", "fn f(a: A) {}"),
            ("approval(request = )", "fn f(a: A) {}"),
            ("label(start = 1)", "fn f(a: A) {}"),
            ("i18n(en)", "fn f(a: A) {}"),
            ("= =", "async fn f(self) {}"),
            ("effect = read, name = \"\"", "/// d\nfn f(a: A) {}"),
            ("provider", "fn f(a: A) {}"),
            (
                "provider = 1, effect = read",
                "/// d\nfn f() -> ProviderTool {}",
            ),
            (
                "provider, effect = read",
                "/// d\nasync fn f(self) -> impl Sized {}",
            ),
            ("provider, effect = read, deferred", "/// d\nfn f() {}"),
            ("effect = read, description", "fn f(a: A) {}"),
            ("effect = read, input_retries = ", "/// d\nfn f(a: A) {}"),
            ("effect = read, input_retries = -", "/// d\nfn f(a: A) {}"),
            (
                "effect = read, input_retries = 340282366920938463463374607431768211456",
                "/// d\nfn f(a: A) {}",
            ),
            ("effect = read, input_retries = 1e3", "/// d\nfn f(a: A) {}"),
            ("effect = read, description = ", "fn f(a: A) {}"),
            (
                "effect = write, approval = auto(model = )",
                "/// d\nfn f(a: A) {}",
            ),
            (
                "effect = write, approval = auto(criteria())",
                "/// d\nfn f(a: A) {}",
            ),
            (
                "effect = write, approval(request = auto(criteria(clear = \"\"), 1))",
                "/// d\nfn f(a: A) {}",
            ),
            ("effect = read, description = |s| s", "fn f(a: A) {}"),
            (
                "effect = read, description = d, description = d",
                "fn f(a: A) {}",
            ),
        ] {
            let out = tool_impl(args.parse().unwrap(), item.parse().unwrap());
            assert!(
                out.to_string().contains("compile_error"),
                "{args} / {item}: {out}"
            );
        }
    }
}
