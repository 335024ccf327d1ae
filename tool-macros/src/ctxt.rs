//! Accumulates every problem found in one attribute so a user sees them all in one compile.

use std::fmt::Display;

use proc_macro2::Span;
use quote::ToTokens;

#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Option<syn::Error>,
}

impl Ctxt {
    pub(crate) fn error_at(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(crate) fn error_spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(all) => all.combine(error),
            None => self.errors = Some(error),
        }
    }

    #[cfg(test)]
    pub(crate) fn has_errors(&self) -> bool {
        self.errors.is_some()
    }

    pub(crate) fn into_result(self) -> Result<(), syn::Error> {
        match self.errors {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    #[cfg(test)]
    pub(crate) fn messages(&self) -> Vec<String> {
        self.errors
            .iter()
            .flat_map(|e| e.clone().into_iter())
            .map(|e| e.to_string())
            .collect()
    }
}

/// The closest of `candidates` to `word`, if close enough to be a likely typo.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| {
            (
                strsim::damerau_levenshtein(word, c),
                strsim::jaro_winkler(word, c),
                c,
            )
        })
        .filter(|(distance, similarity, c)| *distance <= 2.max(c.len() / 3) || *similarity >= 0.85)
        .min_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)))
        .map(|(_, _, c)| c)
}

/// `; did you mean `x`?` when a candidate is close to `word`, else `; ` and `otherwise` (the list
/// of valid choices), so a message offers either the likely fix or every option, not both.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    otherwise: &str,
) -> String {
    match closest(word, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => format!("; {otherwise}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_key() {
        let keys = ["durable", "ends_turn", "effect", "deferred", "description"];
        assert_eq!(closest("durabel", keys), Some("durable"));
        assert_eq!(closest("ends_trun", keys), Some("ends_turn"));
        assert_eq!(closest("efect", keys), Some("effect"));
        assert_eq!(closest("xyzzy", keys), None);
    }
}
