//! Code generation, run only after every check passed.
//!
//! The user's fn is emitted untouched (its tokens as they came in). Beside it: a braced struct
//! with the fn's name (type namespace only, so it cannot clash with the fn) whose `TOOL` const is
//! the descriptor (the fields the tool sets, the rest from `__private::DEFAULTS`), adapter fns in
//! that struct's impl, assertions for rules that need other items, and the `inventory`
//! submission. Every path is absolute through the facade's hidden `__private` module. A
//! `provider` tool gets the same frame with a descriptor of its own (`expand_provider`): its fn
//! builds a configuration and is never called by the runtime.
//!
//! What rustc does with the expansion on every build of the tools' crate, incremental or not,
//! is part of the design (issue 28, item 4; BENCHMARKS.md, "Compile time"):
//! - each item costs: most tools' call adapter is one call of a generic adapter
//!   (`__private::ValueTag::invoke` and its kin, written by `invoke::invoke`), not an `async`
//!   block of its own, and the reserved-name rule is checked here (`rules::c13_names`), not by
//!   a `const` assertion;
//! - no fn pointer stored in a constant's value that a `static` reaches (the descriptor, the
//!   `inventory` node and its vtable) is an instance of a generic fn of another crate: rustc's
//!   monomorphization collector walks a static's value afresh on every build, and for such an
//!   instance it loads the exported generic symbols of every crate in the dependency tree (a
//!   tenth of a rebuild on the lean core, a fifth on the default features). What fn bodies call
//!   or name (`__invoke`'s `parse_input::<Args>`) is collected through rustc's incremental cache
//!   instead and costs nothing of the kind. So the schema fn is the tool's own `__schema`, and
//!   the `inventory` node holds the tool's struct, `repr(transparent)` over its `Registration`,
//!   whose `ErasedNode` impl is the tool's own, where `Registration`'s is `inventory`'s generic
//!   one (`emit`).

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, LitStr, Path, Type};

use crate::attrs::{Attrs, Description, Effect, EndsTurn, Entry, TextOrPath};
use crate::item::ToolFn;
use crate::sig::Sig;

mod adapters;
mod fields;
mod hooks;
mod invoke;
mod tw;

use fields::common_fields;
use invoke::Invoke;
pub(crate) use tw::Tw;

pub(crate) struct Input<'a> {
    /// The fn as written, emitted as it came in.
    pub(crate) tokens: TokenStream,
    pub(crate) item: &'a ToolFn,
    pub(crate) attrs: &'a Attrs,
    pub(crate) sig: &'a Sig,
    pub(crate) description: String,
    pub(crate) tw: Tw,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Durable,
    Workflow(Entry),
}

pub(crate) fn expand(input: &Input<'_>) -> TokenStream {
    let Input { attrs, sig, tw, .. } = input;
    if Attrs::flag(&attrs.provider) {
        return expand_provider(input, tw);
    }
    let first = sig
        .first
        .as_ref()
        .expect("checked: a tool has a first parameter");

    let kind = match (&attrs.workflow, Attrs::flag(&attrs.durable)) {
        (Some(w), _) => Kind::Workflow(w.value.expect("checked: workflow has an entry point")),
        (None, true) => Kind::Durable,
        (None, false) => Kind::Plain,
    };
    let serve = kind == Kind::Workflow(Entry::Serve);
    let first_span = first.span();
    // Every path to the facade inside an expression spanned at a user's token is respanned too:
    // rustc widens an expression whose tokens mix the attribute's span with the user's to the
    // whole attribute, which would move errors off the user's token.
    let tw_first = tw.at(first_span);
    // For `serve`: what each call replies with, the `Output` of `ServeCalls<Args, Output>`.
    let serve_output = quote_spanned!(first_span=> <#first as #tw_first::ServeInput>::Output);
    // The argument struct: the first parameter, or for `serve` the `Args` of its call stream.
    let args = adapters::Args {
        ty: if serve {
            Box::new(quote_spanned!(first_span=> <#first as #tw_first::ServeInput>::Args))
        } else {
            Box::new(first.clone())
        },
        span: first_span,
        tw: tw_first.clone(),
        serve_output: serve.then(|| serve_output.clone()),
    };
    let args_ty = &args.ty;
    let ret_ty: TokenStream = match &sig.output {
        Some(ty) => quote!(#ty),
        None => quote!(()),
    };
    let ret_span = sig
        .output
        .as_ref()
        .map(Spanned::span)
        .unwrap_or_else(|| sig.ident.span());

    let Invoke {
        item: invoke,
        finish_fn,
        requirements,
        keep_input,
    } = invoke::invoke(input, kind, &args, (&ret_ty, ret_span));
    let label = attrs.label.as_ref().map(|l| &l.value);

    let mut adapters = Vec::new();
    let (label_start, label_delta) = adapters::labels(label, tw, &args, &mut adapters);
    let label_complete = keep_input;
    let approval = adapters::approval(attrs, tw, &args, &mut adapters);
    let output_schema =
        adapters::output_schema(attrs, tw, &args, (&ret_ty, ret_span), &mut adapters);

    let flags = fields::flags(attrs, kind, tw);
    let type_name = args_type_name(first, serve);
    let fields = quote_spanned!(first_span=> <#args_ty as #tw_first::ToolInput>::FIELDS);
    let sensitive = quote_spanned!(first_span=> <#args_ty as #tw_first::ToolInput>::SENSITIVE);
    // The tool's own fn, not `args_schema::<Args>` itself (see the module docs).
    let schema_fn = quote_spanned! {first_span=>
        fn __schema(__inline: bool) -> #tw_first::Schema {
            #tw_first::args_schema::<#args_ty>(__inline)
        }
    };

    let assertions = fields::assertions(attrs, tw, first, &args);

    let label = (label.is_some_and(|l| l.start.is_some() || l.delta.is_some()) || label_complete)
        .then(|| {
            quote! {
                label: #tw::LabelSpec {
                    start: #label_start,
                    delta: #label_delta,
                    complete: #label_complete,
                },
            }
        });
    let requirements =
        (!requirements.is_empty()).then(|| quote!(requirements: &[#(#requirements),*],));
    // Only what differs from `__private::DEFAULTS`, which `emit` fills the rest from.
    let descriptor_fields = quote! {
        #approval
        #label
        #output_schema
        #flags
        input: #tw::InputSpec {
            schema: Self::__schema,
            fields: #fields,
            sensitive: #sensitive,
            type_name: #type_name,
        },
        #requirements
        invoke: Self::__invoke,
    };
    let items = quote! {
        #schema_fn
        #invoke
        #finish_fn
        #(#adapters)*
    };
    emit(input, tw, descriptor_fields, items, assertions)
}

/// A provider-native tool: the model provider runs it, so the descriptor carries no argument
/// struct, no policy and no adapters beyond the fn that builds the configuration, and an
/// `invoke` that only says the runtime cannot run it.
fn expand_provider(input: &Input<'_>, tw: &Tw) -> TokenStream {
    let ident = &input.sig.ident;
    let ret = input
        .sig
        .output
        .as_ref()
        .expect("checked: a provider tool has a return type");
    // `__config` is spanned at the return type as written: when that type is not
    // `ProviderTool`, the `ProviderOutput` error lands there (an alias of it is accepted).
    let ret_span = ret.span();
    let tw_ret = tw.at(ret_span);
    let build = quote_spanned! {ret_span=>
        let __config: #ret = #ident();
        #tw_ret::provider_tool(__config)
    };
    let descriptor_fields = quote! {
        provider: ::core::option::Option::Some(Self::__provider),
        input: #tw::PROVIDER_INPUT,
        invoke: #tw::provider_invoke,
    };
    let items = quote! {
        fn __provider() -> #tw::ProviderTool {
            #build
        }
    };
    emit(input, tw, descriptor_fields, items, Vec::new())
}

/// The output every tool shares: the user's fn, the struct carrying `TOOL` (the descriptor:
/// the fields every tool fills the same way, then `fields`, the rest from `__private::DEFAULTS`),
/// `items` in its impl, the `assertions`, and the `inventory` submission.
///
/// The submitted node holds the struct itself, which wraps the tool's `Registration`
/// (`repr(transparent)`, so `inventory::iter::<Registration>` reads it as one), and submits
/// itself through its own `ErasedNode` impl, which calls `Registration`'s: the node's vtable
/// then names only this crate's fn (see the module docs for why).
fn emit(
    input: &Input<'_>,
    tw: &Tw,
    fields: TokenStream,
    items: TokenStream,
    assertions: Vec<TokenStream>,
) -> TokenStream {
    let Input {
        tokens,
        item,
        attrs,
        sig,
        ..
    } = input;
    let ident = &sig.ident;
    let vis = &item.vis;
    let names = Names::of(input);
    let common = common_fields(input, tw, &names);
    let (hook_fields, hook_items) = hooks::expand(attrs, tw);
    let struct_doc = format!(
        "The registered descriptor of the tool `{}`: `{}::TOOL`.",
        names.model_name, names.fn_name
    );

    quote! {
        #tokens

        #[doc = #struct_doc]
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #[repr(transparent)]
        #vis struct #ident {
            __registration: #tw::Registration,
        }

        #[allow(non_camel_case_types, unused_qualifications, clippy::all, clippy::pedantic)]
        impl #ident {
            /// The descriptor `#[tool]` registered for this fn.
            #vis const TOOL: &'static #tw::ToolDescriptor = &#tw::ToolDescriptor {
                #common
                #hook_fields
                #fields
                ..#tw::DEFAULTS
            };

            #items
            #hook_items
        }

        // Each a `const _` of its own: the first failing one would stop a shared evaluation.
        #(
            #[allow(unused_qualifications, clippy::all)]
            #assertions
        )*

        impl #tw::inventory::ErasedNode for #ident {
            unsafe fn submit(&self, node: &'static #tw::inventory::Node) {
                // SAFETY: the node `inventory::submit!` makes below holds `self`, which
                // `inventory::iter::<Registration>` may read as the `Registration` it wraps.
                unsafe {
                    <#tw::Registration as #tw::inventory::ErasedNode>::submit(&self.__registration, node)
                }
            }
        }
        #tw::inventory::submit! {
            #ident { __registration: #tw::Registration(#ident::TOOL) }
        }
    }
}

/// The tool's names: the fn's, the one given (or the fn's), and the model-facing one.
struct Names {
    fn_name: String,
    name: String,
    model_name: String,
}

impl Names {
    fn of(input: &Input<'_>) -> Names {
        let attrs = input.attrs;
        let fn_name = input
            .sig
            .ident
            .to_string()
            .trim_start_matches("r#")
            .to_owned();
        let name = attrs
            .name
            .as_ref()
            .map(|g| g.value.value())
            .unwrap_or_else(|| fn_name.clone());
        let model_name = match &attrs.toolset {
            Some(set) => format!("{}__{name}", set.value.value()),
            None => name.clone(),
        };
        Names {
            fn_name,
            name,
            model_name,
        }
    }
}

/// The argument struct as written, for messages: the first parameter's type, or for `serve`
/// the `Args` of `ServeCalls<Args, Output>`.
fn args_text(first: &Type, serve: bool) -> String {
    if serve {
        serve_args_text(first)
    } else {
        quote!(#first).to_string().replace(' ', "")
    }
}

/// One of `finish`'s values beside the output: a binding named `name` and the name when the tool
/// computes it, else no binding and the default value.
fn finish_arg(
    name: &str,
    value: Option<TokenStream>,
    default: impl FnOnce() -> TokenStream,
) -> (Option<TokenStream>, TokenStream) {
    match value {
        Some(value) => {
            let name = Ident::new(name, Span::call_site());
            (Some(quote!(let #name = #value;)), quote!(#name))
        }
        None => (None, default()),
    }
}

fn render_text(text: &TextOrPath, _tw: &Tw, call: impl Fn(&Path) -> TokenStream) -> TokenStream {
    match text {
        TextOrPath::Template(template) => template.render(&format_ident!("__la")),
        TextOrPath::Path(path) => {
            let called = call(path);
            quote_spanned!(path.span()=> ::core::convert::Into::<::std::string::String>::into(#called))
        }
    }
}

fn option_str(lit: Option<&LitStr>) -> TokenStream {
    match lit {
        Some(lit) => quote!(::core::option::Option::Some(#lit)),
        None => quote!(::core::option::Option::None),
    }
}

fn args_type_name(first: &Type, serve: bool) -> String {
    let text = quote!(#first).to_string().replace(' ', "");
    if serve {
        format!("<{text}asServeInput>::Args")
    } else {
        text
    }
}

/// `path(args)`: a call of a fn the user named in the attribute, spanned at the path so errors
/// about its signature land there. The arguments are located at the path too but keep the
/// macro's hygiene, which keeps rustc from proposing edits to them (such as "remove the extra
/// argument", which would delete the path).
fn call_user_fn(path: &Path, args: TokenStream) -> TokenStream {
    let span = path.span();
    let args = respan(args, Span::call_site().located_at(span));
    quote_spanned!(span=> #path(#args))
}

/// `tokens` with every span set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Group(group) => {
                let mut respanned = Group::new(group.delimiter(), respan(group.stream(), span));
                respanned.set_span(span);
                TokenTree::Group(respanned)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

/// The `Args` of `ServeCalls<Args, Output>` as written, to point messages about the argument
/// struct at it rather than at `ServeCalls` (only a span: the type itself is checked through
/// `ServeInput`).
fn serve_args(first: &Type) -> Option<&Type> {
    serve_generic(first, 0)
}

/// The `index`th type argument of the first parameter's type as written.
fn serve_generic(first: &Type, index: usize) -> Option<&Type> {
    let Type::Path(path) = first else { return None };
    let last = path.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args
        .iter()
        .filter_map(|arg| match arg {
            syn::GenericArgument::Type(ty) => Some(ty),
            _ => None,
        })
        .nth(index)
}

fn serve_args_span(first: &Type) -> Option<Span> {
    serve_args(first).map(Spanned::span)
}

fn serve_args_text(first: &Type) -> String {
    match serve_args(first) {
        Some(ty) => quote!(#ty).to_string().replace(' ', ""),
        None => "the argument struct".to_owned(),
    }
}
