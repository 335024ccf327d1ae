//! `#[derive(ToolInput)]`: checks at compile time that an argument struct is shaped like a JSON
//! object, and records its JSON field names (after serde's `rename` and `rename_all`).

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Expr, ExprLit, Fields, Lit, Path, Token};

use crate::ctxt::Ctxt;

pub(crate) fn expand(input: DeriveInput) -> TokenStream {
    let mut cx = Ctxt::default();
    let krate = crate_path(&input.attrs, &mut cx);
    let container = serde_container(&input.attrs);
    if container.transparent {
        cx.error_spanned(&input.ident, "a `#[serde(transparent)]` struct is not a JSON object; a tool's arguments are a struct with named fields");
    }

    let mut names: Vec<String> = container.tag.into_iter().collect();
    let mut flattens = false;
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => {
                for field in &fields.named {
                    let serde = serde_field(&field.attrs);
                    if serde.flatten {
                        flattens = true;
                        continue;
                    }
                    if serde.skip {
                        continue;
                    }
                    let ident = field.ident.as_ref().expect("named fields have idents");
                    let rust_name = ident.to_string().trim_start_matches("r#").to_owned();
                    let name = serde.rename.unwrap_or_else(|| match &container.rename_all {
                        Some(rule) => apply_rule(rule, &rust_name),
                        None => rust_name,
                    });
                    names.push(name);
                }
            }
            Fields::Unnamed(fields) => cx.error_spanned(
                fields,
                "a tuple struct is a JSON array (or, with one field, its inner value), not an object; name the fields: `struct Args { service: String }`",
            ),
            Fields::Unit => cx.error_spanned(
                &input.ident,
                format!("a unit struct is JSON `null`, not an object; write `struct {} {{}}` (or take `NoInput`)", input.ident),
            ),
        },
        Data::Enum(data) => cx.error_spanned(
            data.enum_token,
            "an enum is not an object-shaped argument struct; wrap it in a struct field: `struct Args { action: Action }`",
        ),
        Data::Union(data) => cx.error_spanned(data.union_token, "a union cannot be a tool's arguments; use a struct with named fields"),
    }
    // The impl is emitted even beside errors: without it every `#[tool]` taking this type would
    // add "is not a tool argument struct" to the one error that matters.
    let errors = cx.into_result().err().map(|e| e.to_compile_error());

    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let tw = quote!(#krate::__private);
    quote! {
        #errors

        #[automatically_derived]
        impl #impl_generics #tw::ToolInput for #ident #ty_generics #where_clause {
            const FIELDS: &'static [&'static str] = &[#(#names),*];
            const FLATTENS: bool = #flattens;
        }
    }
}

fn crate_path(attrs: &[syn::Attribute], cx: &mut Ctxt) -> TokenStream {
    for attr in attrs {
        if !attr.path().is_ident("toolwright") {
            continue;
        }
        let mut found = None;
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                found = Some(meta.value()?.call(Path::parse_mod_style)?);
                Ok(())
            } else {
                Err(meta
                    .error("unknown key in `#[toolwright(...)]`; the only key is `crate = path`"))
            }
        });
        if let Err(error) = result {
            cx.push(error);
        }
        if let Some(path) = found {
            return quote!(#path);
        }
    }
    quote!(::toolwright)
}

#[derive(Default)]
struct Container {
    rename_all: Option<String>,
    tag: Option<String>,
    transparent: bool,
}

#[derive(Default)]
struct Field {
    rename: Option<String>,
    skip: bool,
    flatten: bool,
}

/// Reads the serde attributes that change field names. Anything it does not understand is left
/// to serde, which reports its own errors.
fn serde_container(attrs: &[syn::Attribute]) -> Container {
    let mut container = Container::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename_all") {
                container.rename_all = deserialize_value(&meta)?;
            } else if meta.path.is_ident("tag") {
                container.tag = deserialize_value(&meta)?;
            } else if meta.path.is_ident("transparent") {
                container.transparent = true;
            } else {
                skip(&meta)?;
            }
            Ok(())
        });
    }
    container
}

fn serde_field(attrs: &[syn::Attribute]) -> Field {
    let mut field = Field::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                if let Some(name) = deserialize_value(&meta)? {
                    field.rename = Some(name);
                }
            } else if meta.path.is_ident("skip") || meta.path.is_ident("skip_deserializing") {
                field.skip = true;
            } else if meta.path.is_ident("flatten") {
                field.flatten = true;
            } else {
                skip(&meta)?;
            }
            Ok(())
        });
    }
    field
}

/// `key = "x"` → `x`; `key(deserialize = "x", serialize = "y")` → `x`.
fn deserialize_value(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Option<String>> {
    if meta.input.peek(Token![=]) {
        let expr: Expr = meta.value()?.parse()?;
        if let Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) = expr
        {
            return Ok(Some(s.value()));
        }
        return Ok(None);
    }
    let mut found = None;
    if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|inner| {
            if inner.path.is_ident("deserialize") {
                let expr: Expr = inner.value()?.parse()?;
                if let Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) = expr
                {
                    found = Some(s.value());
                }
            } else {
                skip(&inner)?;
            }
            Ok(())
        })?;
    }
    Ok(found)
}

fn skip(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        let _: Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        let _: TokenStream = content.parse()?;
    }
    Ok(())
}

/// serde's `rename_all` rules for fields (which serde assumes are `snake_case`).
fn apply_rule(rule: &str, field: &str) -> String {
    let pascal = || {
        let mut out = String::new();
        let mut upper = true;
        for c in field.chars() {
            if c == '_' {
                upper = true;
            } else if upper {
                out.extend(c.to_uppercase());
                upper = false;
            } else {
                out.push(c);
            }
        }
        out
    };
    match rule {
        "UPPERCASE" | "SCREAMING_SNAKE_CASE" => field.to_ascii_uppercase(),
        "PascalCase" => pascal(),
        "camelCase" => {
            let p = pascal();
            let mut chars = p.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => p,
            }
        }
        "kebab-case" => field.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => field.to_ascii_uppercase().replace('_', "-"),
        _ => field.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_rules_match_serde() {
        assert_eq!(apply_rule("camelCase", "task_id"), "taskId");
        assert_eq!(apply_rule("PascalCase", "task_id"), "TaskId");
        assert_eq!(apply_rule("kebab-case", "task_id"), "task-id");
        assert_eq!(apply_rule("SCREAMING-KEBAB-CASE", "task_id"), "TASK-ID");
        assert_eq!(apply_rule("SCREAMING_SNAKE_CASE", "task_id"), "TASK_ID");
        assert_eq!(apply_rule("lowercase", "task_id"), "task_id");
    }

    #[test]
    fn field_names_follow_serde() {
        let input: DeriveInput = syn::parse_quote! {
            #[serde(rename_all = "camelCase")]
            struct A { task_id: String, #[serde(rename = "x")] y: u8, #[serde(skip)] z: u8, #[serde(flatten)] rest: B }
        };
        let out = expand(input).to_string();
        assert!(out.contains("\"taskId\" , \"x\""), "{out}");
        assert!(out.contains("FLATTENS : bool = true"), "{out}");
    }
}
