//! The descriptor fields and adapters of `guardrails(...)` and `prepare = path`.
//!
//! A guardrail fn may be sync or `async` (like a policy fn), so its adapter boxes what it
//! returns (a sync fn runs when the runtime starts the check, inside its panic guard); a `prepare` fn is sync (it runs while a tool list is built) and is coerced
//! to the fn pointer type. Either way the call or coercion is spanned at the user's path, so a
//! fn of another signature is reported there.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Path;
use syn::spanned::Spanned;

use super::{Tw, call_user_fn};
use crate::attrs::Attrs;

/// The `guardrails` and `prepare` fields of the descriptor (none for a tool without either key:
/// the defaults have neither), and the adapters they name.
pub(super) fn expand(attrs: &Attrs, tw: &Tw) -> (Option<TokenStream>, TokenStream) {
    let mut items = TokenStream::new();
    if attrs.guardrails.is_none() && attrs.prepare.is_none() {
        return (None, items);
    }
    let guardrails = attrs.guardrails.as_ref().map(|g| &g.value);
    let input = match guardrails.and_then(|g| g.input.as_ref()) {
        Some(path) => {
            let call = verdict(path, tw, "input_verdict");
            items.extend(quote! {
                fn __input_guardrail<'a>(__check: &'a #tw::InputCheck<'a>) -> #tw::BoxFuture<'a, #tw::InputVerdict> {
                    #call
                }
            });
            let name = path_text(path);
            quote!(::core::option::Option::Some((#name, Self::__input_guardrail)))
        }
        None => quote!(::core::option::Option::None),
    };
    let output = match guardrails.and_then(|g| g.output.as_ref()) {
        Some(path) => {
            let call = verdict(path, tw, "output_verdict");
            items.extend(quote! {
                fn __output_guardrail<'a>(__check: &'a #tw::OutputCheck<'a>) -> #tw::BoxFuture<'a, #tw::OutputVerdict> {
                    #call
                }
            });
            let name = path_text(path);
            quote!(::core::option::Option::Some((#name, Self::__output_guardrail)))
        }
        None => quote!(::core::option::Option::None),
    };
    let prepare = attrs.prepare.as_ref().map(|given| {
        let path = &given.value;
        let span = path.span();
        let tw = tw.at(span);
        let value = quote_spanned!(span=> ::core::option::Option::Some({
            let __prepare: #tw::PrepareFn = #path;
            __prepare
        }));
        quote!(prepare: #value,)
    });
    let guardrails = guardrails
        .is_some()
        .then(|| quote!(guardrails: #tw::GuardrailSpec { input: #input, output: #output },));
    (Some(quote!(#guardrails #prepare)), items)
}

/// `helper(path(__check))`, spanned at `path`: the helper boxes the verdict or its future, and
/// its bound reports another return type there.
fn verdict(path: &Path, tw: &Tw, helper: &str) -> TokenStream {
    let span = path.span();
    let tw = tw.at(span);
    let helper = syn::Ident::new(helper, span);
    let called = call_user_fn(path, quote!(__check));
    quote_spanned!(span=> #tw::#helper(#called))
}

/// The path as written, without spaces: the guardrail's name in events.
fn path_text(path: &Path) -> String {
    quote!(#path).to_string().replace(' ', "")
}
