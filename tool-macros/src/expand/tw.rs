//! The path of the facade's macro-support module, `::toolwright::__private` (or `path::__private`
//! with `crate = path`), written into the expansion token by token.
//!
//! The expansion names the module some thirty times. Held as a `TokenStream`, each use would
//! splice a stream into a stream, which inside the compiler is a round trip across the proc-macro
//! bridge (and re-spanning one, several); pushed as single tokens, it is appended to the
//! tokens `quote!` already holds and crosses the bridge once with them.

use proc_macro2::{Ident, Punct, Spacing, Span, TokenStream};
use quote::{ToTokens, TokenStreamExt};
use syn::Path;

#[derive(Clone)]
pub(crate) struct Tw {
    /// `crate = path`, when given.
    krate: Option<Path>,
    /// Where every token is located; `None`: at the call site, and a given crate path where the
    /// user wrote it.
    span: Option<Span>,
}

impl Tw {
    pub(crate) fn new(krate: Option<&Path>) -> Tw {
        Tw {
            krate: krate.cloned(),
            span: None,
        }
    }

    /// The same path with every token located at `span`: rustc widens an expression whose
    /// tokens mix the attribute's span with the user's to the whole attribute, so paths inside
    /// an expression spanned at a user's token are located there too.
    pub(crate) fn at(&self, span: Span) -> Tw {
        Tw {
            krate: self.krate.clone(),
            span: Some(span),
        }
    }
}

impl ToTokens for Tw {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let span = self.span.unwrap_or_else(Span::call_site);
        match (&self.krate, self.span) {
            (None, _) => {
                colon2(tokens, span);
                tokens.append(Ident::new("toolwright", span));
            }
            (Some(path), None) => path.to_tokens(tokens),
            (Some(path), Some(span)) => respanned(path, span).to_tokens(tokens),
        }
        colon2(tokens, span);
        tokens.append(Ident::new("__private", span));
    }
}

fn colon2(tokens: &mut TokenStream, span: Span) {
    let mut first = Punct::new(':', Spacing::Joint);
    first.set_span(span);
    let mut second = Punct::new(':', Spacing::Alone);
    second.set_span(span);
    tokens.append(first);
    tokens.append(second);
}

/// A module path (no generic arguments: `crate = path` is parsed in the module style) with
/// every token at `span`.
fn respanned(path: &Path, span: Span) -> Path {
    let mut path = path.clone();
    if let Some(colon) = &mut path.leading_colon {
        colon.spans = [span; 2];
    }
    for mut pair in path.segments.pairs_mut() {
        pair.value_mut().ident.set_span(span);
        if let Some(colon) = pair.punct_mut() {
            colon.spans = [span; 2];
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_support_path() {
        let tw = Tw::new(None);
        assert_eq!(
            tw.to_token_stream().to_string(),
            ":: toolwright :: __private"
        );
        let path: Path = syn::parse_str("::my::toolwright").unwrap();
        let tw = Tw::new(Some(&path)).at(Span::call_site());
        assert_eq!(
            tw.to_token_stream().to_string(),
            ":: my :: toolwright :: __private"
        );
    }
}
