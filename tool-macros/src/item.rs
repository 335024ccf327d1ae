//! The fn under `#[tool]`, read as far as the macro needs it: its attributes, visibility and
//! signature. The body stays the tokens the user wrote: the macro never looks inside it, and
//! the expansion emits the fn as it came in, so parsing the body into syntax trees and printing
//! them back (most of the work of a `syn::ItemFn`, in the unoptimized build of the macro that
//! users get) would be spent on nothing. A body that is not valid Rust is reported by rustc
//! where it reads the emitted fn.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Signature, Visibility};

pub(crate) struct ToolFn {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
}

impl ToolFn {
    /// Reads `item` up to its body. The body is set aside before syn sees the tokens: syn copies
    /// every token it is given into a buffer of its own, nested groups included, and the body is
    /// most of them.
    pub(crate) fn read(item: &TokenStream) -> syn::Result<ToolFn> {
        let mut head: Vec<TokenTree> = item.clone().into_iter().collect();
        match head.pop() {
            // An invisible group: a body passed through a `macro_rules!` fragment (`$body:block`).
            Some(TokenTree::Group(body))
                if matches!(body.delimiter(), Delimiter::Brace | Delimiter::None) =>
            {
                syn::parse2(head.into_iter().collect())
            }
            _ => Err(syn::Error::new(
                proc_macro2::Span::call_site(),
                "expected a fn with a body",
            )),
        }
    }
}

/// The tokens before the body: attributes, visibility and signature.
impl Parse for ToolFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<ToolFn> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let sig: Signature = input.parse()?;
        Ok(ToolFn { attrs, vis, sig })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_signature_and_skips_the_body() {
        let read = |text: &str| ToolFn::read(&text.parse().unwrap());
        let item = read("/// d\npub async fn f(a: A) -> u8 { let x = ; 0 }").unwrap();
        assert_eq!(item.sig.ident, "f");
        assert_eq!(item.attrs.len(), 1);
        assert!(read("fn f(a: A);").is_err());
        assert!(read("fn f(a: A) {} fn g() {}").is_err());
        assert!(read("struct S {}").is_err());
        assert!(read("").is_err());
    }
}
