//! `#[derive(ToolInput)]`: checks at compile time that an argument struct is shaped like a JSON
//! object, and records its JSON field names (after serde's `rename` and `rename_all`) and which
//! of them are `#[toolwright(sensitive)]`.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Data, DeriveInput, Expr, ExprLit, Fields, Lit, Path, Token};

use crate::ctxt::{Ctxt, suggest};

pub(crate) fn expand(input: DeriveInput) -> TokenStream {
    let mut cx = Ctxt::default();
    let krate = crate_path(&input, &mut cx);
    let shape = shape(&input, &mut cx);
    // The impl is emitted even beside errors: without it every `#[tool]` taking this type would
    // add "is not a tool argument struct" to the one error that matters.
    let errors = cx.into_result().err().map(|e| e.to_compile_error());

    let Shape {
        fields,
        flattens,
        sensitive,
    } = shape;
    let sensitive_json = sensitive.iter().map(|s| &s.json);
    let sensitive_rust = sensitive.iter().map(|s| &s.rust);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let tw = quote!(#krate::__private);
    quote! {
        #errors

        #[automatically_derived]
        impl #impl_generics #tw::ToolInput for #ident #ty_generics #where_clause {
            const FIELDS: &'static [&'static str] = &[#(#fields),*];
            const FLATTENS: bool = #flattens;
            const SENSITIVE: &'static [&'static str] = &[#(#sensitive_json),*];
            const SENSITIVE_FIELDS: &'static [&'static str] = &[#(#sensitive_rust),*];
        }
    }
}

/// What the impl records about the struct.
#[derive(Debug, Default)]
struct Shape {
    /// The JSON names of the fields serde reads, the container's `tag` first.
    fields: Vec<String>,
    /// Whether some field is `#[serde(flatten)]`ed.
    flattens: bool,
    sensitive: Vec<Sensitive>,
}

/// A field marked `#[toolwright(sensitive)]`.
#[derive(Debug, PartialEq)]
struct Sensitive {
    /// The name in JSON, which the runtime redacts.
    json: String,
    /// The Rust name without `r#`, which `#[tool]` checks its templates against.
    rust: String,
}

fn shape(input: &DeriveInput, cx: &mut Ctxt) -> Shape {
    let container = serde_container(&input.attrs);
    if container.transparent {
        cx.error_spanned(&input.ident, "a `#[serde(transparent)]` struct is not a JSON object; a tool's arguments are a struct with named fields");
    }

    let mut shape = Shape {
        fields: container.tag.into_iter().collect(),
        ..Shape::default()
    };
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => {
                for field in &fields.named {
                    let marked = sensitive_marker(&field.attrs, &input.ident, cx);
                    let serde = serde_field(&field.attrs);
                    if serde.flatten {
                        shape.flattens = true;
                        if let Some(span) = marked {
                            // The derive sees only this struct's tokens, not the fields of the
                            // flattened type; the wrapper type carries the mark into the schema.
                            cx.error_at(span, "`#[toolwright(sensitive)]` on a `#[serde(flatten)]` field: the derive cannot see inside another type; mark the sensitive fields of the flattened struct instead by giving them the type `toolwright::Sensitive<T>`, which the runtime recognizes through the schema");
                        }
                        continue;
                    }
                    if let Some(key) = serde.skip {
                        if let Some(span) = marked {
                            cx.error_at(span, format!("`#[toolwright(sensitive)]` on a `#[serde({key})]` field: the field never comes from JSON, so there is nothing to keep out; remove `sensitive`"));
                        }
                        continue;
                    }
                    if let (true, Some(span)) = (serde.alias, marked) {
                        // The schema, and so the redaction, knows one name: a value sent under
                        // the alias would be kept as it came.
                        cx.error_at(span, "`#[toolwright(sensitive)]` on a field with `#[serde(alias = ...)]`: the schema names the field once, so a value sent under the alias would not be recognized as sensitive; remove the alias");
                    }
                    let Some(ident) = field.ident.as_ref() else {
                        continue;
                    };
                    let rust_name = ident.to_string().trim_start_matches("r#").to_owned();
                    let name = serde.rename.unwrap_or_else(|| match &container.rename_all {
                        Some(rule) => apply_rule(rule, &rust_name),
                        None => rust_name.clone(),
                    });
                    if marked.is_some() {
                        shape.sensitive.push(Sensitive {
                            json: name.clone(),
                            rust: rust_name,
                        });
                    }
                    shape.fields.push(name);
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
    shape
}

/// The container's `#[toolwright(crate = path)]`, or `::toolwright`.
fn crate_path(input: &DeriveInput, cx: &mut Ctxt) -> TokenStream {
    let mut found: Option<Path> = None;
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("toolwright"))
    {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let path = meta.value()?.call(Path::parse_mod_style)?;
                if found.is_some() {
                    cx.push(meta.error("`crate` is given twice; remove one"));
                } else {
                    found = Some(path);
                }
            } else if meta.path.is_ident("sensitive") {
                cx.push(meta.error("`sensitive` goes on a field, not on the struct: write `#[toolwright(sensitive)]` above each field whose value must be kept out of records"));
                skip(&meta)?;
            } else {
                let key = path_text(&meta.path);
                let hint = suggest(
                    &key,
                    ["crate"],
                    "the only struct key is `crate = path` (`sensitive` goes on a field)",
                );
                cx.push(meta.error(format!(
                    "unknown key `{key}` in `#[toolwright(...)]` on a struct{hint}"
                )));
                skip(&meta)?;
            }
            Ok(())
        });
        if let Err(error) = result {
            cx.push(error);
        }
    }
    match found {
        Some(path) => quote!(#path),
        None => quote!(::toolwright),
    }
}

/// A field's `#[toolwright(sensitive)]`: the span of its `sensitive` key, if given. Problems in
/// the attribute are reported and parsing goes on, so one compile shows all of them.
fn sensitive_marker(attrs: &[syn::Attribute], ty: &syn::Ident, cx: &mut Ctxt) -> Option<Span> {
    let mut marked: Option<Span> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("toolwright")) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("sensitive") {
                if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                    cx.push(meta.error("`sensitive` takes no value; write `#[toolwright(sensitive)]`"));
                    skip(&meta)?;
                }
                if marked.is_some() {
                    cx.push(meta.error("`sensitive` is given twice on this field; remove one"));
                } else {
                    marked = Some(syn::spanned::Spanned::span(&meta.path));
                }
            } else if meta.path.is_ident("crate") {
                cx.push(meta.error(format!(
                    "`crate = path` goes on the struct, not on a field: write `#[toolwright(crate = ...)]` above `struct {ty}`"
                )));
                skip(&meta)?;
            } else {
                let key = path_text(&meta.path);
                let hint = suggest(
                    &key,
                    ["sensitive"],
                    "the only field key is `sensitive` (`crate = path` goes on the struct)",
                );
                cx.push(meta.error(format!(
                    "unknown key `{key}` in `#[toolwright(...)]` on a field{hint}"
                )));
                skip(&meta)?;
            }
            Ok(())
        });
        if let Err(error) = result {
            cx.push(error);
        }
    }
    marked
}

fn path_text(path: &Path) -> String {
    quote!(#path).to_string().replace(' ', "")
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
    /// The serde key that keeps the field out of deserialization (`skip`, `skip_deserializing`).
    skip: Option<&'static str>,
    flatten: bool,
    /// Whether serde accepts the field under another name too.
    alias: bool,
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
            } else if meta.path.is_ident("skip") {
                field.skip = Some("skip");
            } else if meta.path.is_ident("skip_deserializing") {
                field.skip = Some("skip_deserializing");
            } else if meta.path.is_ident("flatten") {
                field.flatten = true;
            } else if meta.path.is_ident("alias") {
                field.alias = true;
                skip(&meta)?;
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

    /// The shape and the messages of `input`, as `expand` computes them.
    fn parse(input: DeriveInput) -> (Shape, Vec<String>) {
        let mut cx = Ctxt::default();
        let _ = crate_path(&input, &mut cx);
        let shape = shape(&input, &mut cx);
        (shape, cx.messages())
    }

    fn sensitive(pairs: &[(&str, &str)]) -> Vec<Sensitive> {
        pairs
            .iter()
            .map(|(json, rust)| Sensitive {
                json: (*json).to_owned(),
                rust: (*rust).to_owned(),
            })
            .collect()
    }

    /// The string-slice consts of the generated impl, by name.
    fn slice_consts(out: TokenStream) -> Vec<(String, Vec<String>)> {
        let item: syn::ItemImpl = syn::parse2(out).expect("an impl without errors");
        item.items
            .iter()
            .filter_map(|item| match item {
                syn::ImplItem::Const(c) => match &c.expr {
                    Expr::Reference(r) => match &*r.expr {
                        Expr::Array(array) => Some((
                            c.ident.to_string(),
                            array
                                .elems
                                .iter()
                                .map(|e| match e {
                                    Expr::Lit(ExprLit {
                                        lit: Lit::Str(s), ..
                                    }) => s.value(),
                                    other => panic!("not a string: {}", quote!(#other)),
                                })
                                .collect(),
                        )),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    #[test]
    fn sensitive_fields_follow_serde() {
        let (shape, messages) = parse(syn::parse_quote! {
            #[serde(rename_all = "camelCase")]
            struct Login {
                user_name: String,
                #[toolwright(sensitive)]
                api_key: String,
                #[serde(rename = "PIN")]
                #[toolwright(sensitive)]
                pin: String,
                #[toolwright(sensitive)]
                r#type: String,
                #[serde(flatten)]
                rest: Rest,
            }
        });
        assert!(messages.is_empty(), "{messages:?}");
        assert_eq!(shape.fields, ["userName", "apiKey", "PIN", "type"]);
        assert_eq!(
            shape.sensitive,
            sensitive(&[("apiKey", "api_key"), ("PIN", "pin"), ("type", "type")])
        );
    }

    #[test]
    fn the_impl_records_sensitive_fields() {
        let consts = slice_consts(expand(syn::parse_quote! {
            #[serde(rename_all = "kebab-case")]
            struct Login { user_name: String, #[toolwright(sensitive)] api_key: String }
        }));
        let get = |name: &str| {
            consts
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("FIELDS").unwrap(), ["user-name", "api-key"]);
        assert_eq!(get("SENSITIVE").unwrap(), ["api-key"]);
        assert_eq!(get("SENSITIVE_FIELDS").unwrap(), ["api_key"]);

        let consts = slice_consts(expand(syn::parse_quote! {
            struct Plain { a: String }
        }));
        let get = |name: &str| {
            consts
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("SENSITIVE").unwrap(), Vec::<String>::new());
        assert_eq!(get("SENSITIVE_FIELDS").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn sensitive_misuse_is_reported() {
        let (shape, messages) = parse(syn::parse_quote! {
            struct Login {
                #[serde(skip)]
                #[toolwright(sensitive)]
                a: String,
                #[serde(default, skip_deserializing)]
                #[toolwright(sensitive)]
                b: String,
                #[serde(flatten)]
                #[toolwright(sensitive)]
                c: Rest,
                #[toolwright(sensitive, sensitive)]
                d: String,
                #[toolwright(sensitive)]
                #[toolwright(sensitive)]
                e: String,
                #[toolwright(secret, crate = other)]
                f: String,
                #[toolwright(sensitve)]
                g: String,
                #[toolwright(sensitive = true)]
                h: String,
            }
        });
        assert_eq!(messages.len(), 9, "{messages:?}");
        assert!(
            messages[0].starts_with("`#[toolwright(sensitive)]` on a `#[serde(skip)]` field"),
            "{messages:?}"
        );
        assert!(
            messages[1].starts_with(
                "`#[toolwright(sensitive)]` on a `#[serde(skip_deserializing)]` field"
            ),
            "{messages:?}"
        );
        assert!(
            messages[2].starts_with("`#[toolwright(sensitive)]` on a `#[serde(flatten)]` field")
                && messages[2].contains("`toolwright::Sensitive<T>`"),
            "{messages:?}"
        );
        assert_eq!(
            messages[3],
            "`sensitive` is given twice on this field; remove one"
        );
        assert_eq!(messages[4], messages[3]);
        assert_eq!(
            messages[5],
            "unknown key `secret` in `#[toolwright(...)]` on a field; the only field key is `sensitive` (`crate = path` goes on the struct)"
        );
        assert!(
            messages[6].starts_with("`crate = path` goes on the struct, not on a field")
                && messages[6].ends_with("above `struct Login`"),
            "{messages:?}"
        );
        assert!(
            messages[7].ends_with("did you mean `sensitive`?"),
            "{messages:?}"
        );
        assert!(
            messages[8].starts_with("`sensitive` takes no value"),
            "{messages:?}"
        );
        // Fields marked in error are left out; the others stay recorded.
        assert_eq!(
            shape.sensitive,
            sensitive(&[("d", "d"), ("e", "e"), ("h", "h")])
        );
        assert_eq!(shape.fields, ["d", "e", "f", "g", "h"]);
    }

    #[test]
    fn container_keys_belong_on_the_struct() {
        let (_, messages) = parse(syn::parse_quote! {
            #[toolwright(sensitive, crate = a, crate = b, crat = c)]
            struct Login { a: String }
        });
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(
            messages[0].starts_with("`sensitive` goes on a field, not on the struct"),
            "{messages:?}"
        );
        assert_eq!(messages[1], "`crate` is given twice; remove one");
        assert!(
            messages[2].ends_with("did you mean `crate`?"),
            "{messages:?}"
        );
    }

    #[test]
    fn errors_keep_the_impl() {
        let out = expand(syn::parse_quote! {
            struct Login { #[toolwright(sensitive, secret)] a: String }
        });
        let file: syn::File = syn::parse2(out).unwrap();
        assert!(
            file.items
                .iter()
                .any(|item| matches!(item, syn::Item::Impl(_)))
        );
        assert!(
            file.items
                .iter()
                .any(|item| matches!(item, syn::Item::Macro(m) if m.mac.path.segments.last().is_some_and(|s| s.ident == "compile_error")))
        );
    }
}
