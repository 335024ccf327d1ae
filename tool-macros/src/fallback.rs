//! What `#[tool]` emits when it reports errors: the user's fn untouched (so calls to it and IDE
//! features keep working) and the descriptor struct (so `name::TOOL` references do not cascade
//! into "cannot find" errors), beside the real errors.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ItemFn;

pub(crate) fn emit(item: &ItemFn, krate: &TokenStream, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    let ident = &item.sig.ident;
    let vis = &item.vis;
    quote! {
        #item

        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #ident {}

        #[allow(non_camel_case_types, dead_code, unused_qualifications)]
        impl #ident {
            /// Not available: `#[tool]` reported errors for this fn.
            #vis const TOOL: &'static #krate::__private::ToolDescriptor =
                ::core::panic!("`#[tool]` reported errors for this fn; fix them first");
        }

        #errors
    }
}
