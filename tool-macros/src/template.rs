//! `"Restart {service}?"` templates: placeholders name fields of the argument struct and expand
//! to field accesses, so a misspelt field is a compile error at the template.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote_spanned;
use syn::LitStr;

#[derive(Clone)]
pub(crate) struct Template {
    pub(crate) lit: LitStr,
    /// The `format!` string: each placeholder replaced by `{}`, braces still escaped.
    pub(crate) format: String,
    pub(crate) fields: Vec<String>,
}

impl Template {
    pub(crate) fn parse(lit: &LitStr) -> syn::Result<Template> {
        let text = lit.value();
        let mut format = String::with_capacity(text.len());
        let mut fields = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    format.push_str("{{");
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    format.push_str("}}");
                }
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    let name = name.trim().to_owned();
                    if !closed {
                        return Err(syn::Error::new(
                            lit.span(),
                            "unclosed `{` in template; write `{field}` for a field, `{{` for a literal brace",
                        ));
                    }
                    if !is_ident(&name) {
                        return Err(syn::Error::new(
                            lit.span(),
                            format!(
                                "`{{{name}}}` is not a placeholder: placeholders name a field of the argument struct, e.g. `{{service}}`; write `{{{{` for a literal brace"
                            ),
                        ));
                    }
                    format.push_str("{}");
                    fields.push(name);
                }
                '}' => {
                    return Err(syn::Error::new(
                        lit.span(),
                        "unmatched `}` in template; write `}}` for a literal brace",
                    ));
                }
                other => format.push(other),
            }
        }
        Ok(Template {
            lit: lit.clone(),
            format,
            fields,
        })
    }

    pub(crate) fn span(&self) -> Span {
        self.lit.span()
    }

    /// `::std::format!("...", &args.a as &dyn Display, ...)`, each access spanned at the template
    /// so a missing field, or a field that is not `Display`, is reported there (the cast makes
    /// the `Display` error land on the template rather than inside `format!`).
    pub(crate) fn render(&self, args: &Ident) -> TokenStream {
        let span = self.span();
        let format = &self.format;
        let mut args = args.clone();
        args.set_span(span);
        let accesses = self.fields.iter().map(|name| {
            let field = field_ident(name, span);
            quote_spanned!(span=> {
                let __field = &#args.#field;
                __field as &dyn ::core::fmt::Display
            })
        });
        quote_spanned!(span=> ::std::format!(#format #(, #accesses)*))
    }
}

fn is_ident(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
        && name != "_"
}

/// The field's ident, located at the template but resolved with `mixed_site` hygiene: fields
/// resolve the same, and rustc then does not offer its "a field with a similar name exists" fix,
/// which would replace the whole string literal with a bare field name.
fn field_ident(name: &str, span: Span) -> Ident {
    let span = Span::mixed_site().located_at(span);
    match syn::parse_str::<Ident>(name) {
        Ok(mut ident) => {
            ident.set_span(span);
            ident
        }
        // A keyword such as `type` is only reachable as a raw identifier.
        Err(_) => Ident::new_raw(name, span),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> syn::Result<Template> {
        Template::parse(&LitStr::new(text, Span::call_site()))
    }

    #[test]
    fn placeholders_and_escapes() {
        let t = parse("Restart {service} in {{env}}? {reason}").unwrap();
        assert_eq!(t.format, "Restart {} in {{env}}? {}");
        assert_eq!(t.fields, vec!["service", "reason"]);
    }

    #[test]
    fn bad_templates() {
        assert!(parse("Restart {service").is_err());
        assert!(parse("Restart {a.b}").is_err());
        assert!(parse("Restart {}").is_err());
        assert!(parse("a } b").is_err());
        assert!(parse("{type}").is_ok());
    }
}
