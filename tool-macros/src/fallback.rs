//! What `#[tool]` emits when it reports errors: the user's fn untouched (so calls to it and IDE
//! features keep working) and a placeholder descriptor (so `name::TOOL` references do not cascade
//! into "cannot find" errors), beside the real errors.

use proc_macro2::TokenStream;
use quote::quote;
use syn::FnArg;

use crate::expand::Tw;
use crate::item::ToolFn;

/// `tokens` is the fn as written, `item` what the macro read of it.
pub(crate) fn emit(tokens: TokenStream, item: &ToolFn, tw: &Tw, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    // A fn taking `self` sits in an `impl` block, where a struct cannot be declared: emitting one
    // would bury the real error under "struct is not supported in `impl`s".
    if item
        .sig
        .inputs
        .iter()
        .any(|input| matches!(input, FnArg::Receiver(_)))
    {
        return quote!(#tokens #errors);
    }
    let ident = &item.sig.ident;
    let vis = &item.vis;
    // The placeholder is a valid constant, not a `panic!`: a panicking const would add an
    // "evaluation panicked" error at every use of `name::TOOL`. Nothing can run it, since the
    // crate does not compile.
    quote! {
        #tokens

        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #ident {}

        #[allow(non_camel_case_types, dead_code, unused_qualifications, clippy::all)]
        impl #ident {
            /// Not available: `#[tool]` reported errors for this fn.
            #vis const TOOL: &'static #tw::ToolDescriptor = &#tw::ERRORED;
        }

        #errors
    }
}

/// `#[tool]` on something other than a fn: the item untouched, and an error at its keyword and
/// name (not across the whole item).
pub(crate) fn not_a_fn(item: TokenStream) -> TokenStream {
    use syn::Item;
    fn pair(keyword: impl quote::ToTokens, name: impl quote::ToTokens) -> TokenStream {
        quote!(#keyword #name)
    }
    let (tokens, what) = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Struct(s)) => (pair(s.struct_token, s.ident), "a struct"),
        Ok(Item::Enum(e)) => (pair(e.enum_token, e.ident), "an enum"),
        Ok(Item::Impl(i)) => (pair(i.impl_token, i.self_ty), "an `impl` block"),
        Ok(Item::Trait(t)) => (pair(t.trait_token, t.ident), "a trait"),
        Ok(Item::Mod(m)) => (pair(m.mod_token, m.ident), "a module"),
        Ok(Item::Const(c)) => (pair(c.const_token, c.ident), "a const"),
        Ok(Item::Static(s)) => (pair(s.static_token, s.ident), "a static"),
        Ok(Item::Type(t)) => (pair(t.type_token, t.ident), "a type alias"),
        _ => (item.clone(), "this item"),
    };
    let error = syn::Error::new_spanned(
        tokens,
        format!("`#[tool]` goes on a fn, not on {what}: `#[tool(effect = read)] async fn name(args: Args) -> Result<T, ToolError>`"),
    )
    .to_compile_error();
    quote!(#item #error)
}
