//! Code generation, run only after every check passed.
//!
//! The user's fn is emitted untouched (its tokens as they came in). Beside it: a braced struct
//! with the fn's name (type namespace only, so it cannot clash with the fn) whose `TOOL` const is
//! the descriptor (the fields the tool sets, the rest from `__private::DEFAULTS`), adapter fns in
//! that struct's impl, assertions for rules that need other items, and the `inventory`
//! submission. Every path is absolute through the facade's hidden `__private` module. A
//! `provider` tool gets the same frame with a descriptor of its own (`expand_provider`): its fn
//! builds a configuration and is never called by the runtime.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, LitStr, Path, Type};

use crate::attrs::{ApprovalKey, Attrs, Description, Effect, EndsTurn, Entry, Policy, TextOrPath};
use crate::item::ToolFn;
use crate::sig::Sig;

mod fields;
mod hooks;
mod tw;

use fields::{c25_templates_hide_sensitive, common_fields};
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
    let ident = &sig.ident;
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
    // Held as the type itself where it is the first parameter: interpolated, a type pushes its
    // tokens one by one, where a `TokenStream` would be spliced in with a round trip to rustc.
    let args_ty: Box<dyn ToTokens> = if serve {
        Box::new(quote_spanned!(first_span=> <#first as #tw_first::ServeInput>::Args))
    } else {
        Box::new(first.clone())
    };
    // Deserializes the argument struct in an adapter. Beside the call, the same `ToolInput`
    // projection the descriptor uses, at the same span: when the struct lacks its derives, each
    // adapter then reports the one "is not a tool argument struct" error (identical errors are
    // merged) and rustc drops the `DeserializeOwned` error it implies, instead of adding one per
    // adapter at the attribute.
    let parse = |function: &str, input: TokenStream| {
        let function = Ident::new(function, first_span);
        quote_spanned! {first_span=>
            {
                let _ = <#args_ty as #tw_first::ToolInput>::FIELDS;
                #tw_first::#function::<#args_ty>(#input)
            }
        }
    };
    let ret_ty: TokenStream = match &sig.output {
        Some(ty) => quote!(#ty),
        None => quote!(()),
    };
    let ret_span = sig
        .output
        .as_ref()
        .map(Spanned::span)
        .unwrap_or_else(|| sig.ident.span());

    let param_trait = match kind {
        Kind::Plain => quote!(PlainParam),
        Kind::Durable => quote!(DurableParam),
        Kind::Workflow(_) => quote!(WorkflowParam),
    };
    let param_names: Vec<Ident> = (0..sig.rest.len())
        .map(|i| format_ident!("__p{}", i))
        .collect();
    let param_extracts = sig.rest.iter().zip(&param_names).map(|(ty, name)| {
        let tw = tw.at(ty.span());
        quote_spanned!(ty.span()=> let #name = <#ty as #tw::#param_trait>::from_call(&__cx)?;)
    });
    let requirements = sig.rest.iter().map(|ty| {
        let tw = tw.at(ty.span());
        quote_spanned!(ty.span()=> <#ty as #tw::#param_trait>::REQUIREMENT)
    });

    let awaited = sig.asyncness.map(|span| quote_spanned!(span=> .await));
    let first_value = if serve {
        quote_spanned!(first_span=> <#first as #tw_first::ServeInput>::start(__args, ::core::clone::Clone::clone(&__cx), Self::__finish))
    } else {
        quote!(__args)
    };
    let call = quote!(#ident(#first_value #(, #param_names)*) #awaited);

    // What the adapter computes from the typed output.
    let label = attrs.label.as_ref().map(|l| &l.value);
    let complete_template = label.and_then(|l| l.complete.as_ref());
    let keep_input = complete_template.is_some() && !serve;
    let label_input =
        keep_input.then(|| quote!(let __label_input = ::core::clone::Clone::clone(&__input);));
    // What the adapter hands `finish` beside the output: `None` for a default (written as the
    // default value in the call, without a binding of its own).
    let ends_turn = match attrs.ends_turn.as_ref().and_then(|g| g.value.as_ref()) {
        None => None,
        Some(EndsTurn::Always) => Some(quote!(true)),
        // Typed here, at the path, so a fn returning something else is reported at the path.
        Some(EndsTurn::ByOutput(path)) => {
            let called = call_user_fn(path, quote!(&__out));
            Some(quote_spanned!(path.span()=> {
                let __ends: bool = #called;
                __ends
            }))
        }
    };
    let model = attrs.to_model_output.as_ref().map(|g| {
        let path = &g.value;
        let tw = tw.at(path.span());
        let called = call_user_fn(path, quote!(&__out));
        quote_spanned!(path.span()=> ::core::option::Option::Some(#tw::model_output(#called)))
    });
    let (invoke_model, finish_fn) = if serve {
        let serve_model = model.unwrap_or_else(|| quote!(::core::option::Option::None));
        let finish = quote! {
            fn __finish(__out: #serve_output) -> ::core::result::Result<#tw::CallOutput, #tw::ToolError> {
                let __model = #serve_model;
                #tw::finish(&__out, false, __model, ::core::option::Option::None)
            }
        };
        (None, Some(finish))
    } else {
        (model, None)
    };
    let complete = match complete_template {
        Some(text) if !serve => {
            let render = match text {
                TextOrPath::Template(t) => t.render(&format_ident!("__la")),
                TextOrPath::Path(path) => {
                    let called = call_user_fn(path, quote!(&__la, &__out));
                    quote_spanned!(path.span()=> ::core::convert::Into::<::std::string::String>::into(#called))
                }
            };
            // A label that fails (panics) falls back to the humanized name in the runtime; it
            // must never turn a successful call into a failed one.
            let parse_label_input = parse("parse_ref", quote!(&__label_input));
            Some(quote! {
                #tw::guard_label(|| #parse_label_input.ok().and_then(|__la| #tw::label(#render)))
            })
        }
        _ => None,
    };
    let into_output = quote_spanned!(ret_span=> .into_output(__ret));
    // At the same span as `into_output`, so rustc folds "`T: Serialize` is not satisfied" into the
    // `ToolOutput` error there instead of reporting it a second time at the attribute.
    let finish = if ends_turn.is_none() && invoke_model.is_none() && complete.is_none() {
        let tw = tw.at(ret_span);
        quote_spanned!(ret_span=> #tw::finish(&__out, false, ::core::option::Option::None, ::core::option::Option::None))
    } else {
        let tw = tw.at(ret_span);
        let none = || quote!(::core::option::Option::None);
        let (ends, model, complete) = (
            finish_arg("__ends", ends_turn, || quote!(false)),
            finish_arg("__model", invoke_model, none),
            finish_arg("__complete", complete, none),
        );
        let (ends_let, ends) = ends;
        let (model_let, model) = model;
        let (complete_let, complete) = complete;
        let call = quote_spanned!(ret_span=> #tw::finish(&__out, #ends, #model, #complete));
        quote!(#ends_let #model_let #complete_let #call)
    };

    let parse_input = parse("parse_input", quote!(__input));
    let invoke = quote! {
        fn __invoke(
            __input: #tw::Value,
            __cx: #tw::CallContext,
        ) -> #tw::Invoked {
            ::std::boxed::Box::pin(async move {
                #label_input
                let __args: #args_ty = #parse_input?;
                #(#param_extracts)*
                let __ret = #call;
                let __out = {
                    #[allow(unused_imports)]
                    use #tw::{ViaResult as _, ViaValue as _};
                    (&#tw::Ret::of(&__ret)).tag()
                }#into_output?;
                #finish
            })
        }
    };

    // Labels.
    let mut adapters = Vec::new();
    let parse_ref_input = || parse("parse_ref", quote!(__input));
    let parse_call_input = || parse("parse_ref", quote!(__call.input));
    let label_start = match label.and_then(|l| l.start.as_ref()) {
        Some(text) => {
            let render = render_text(text, tw, |path| call_user_fn(path, quote!(&__la)));
            let parse_ref = parse_ref_input();
            adapters.push(quote! {
                fn __label_start(__input: &#tw::Value) -> ::core::option::Option<::std::string::String> {
                    let __la: #args_ty = #parse_ref.ok()?;
                    #tw::label(#render)
                }
            });
            quote!(::core::option::Option::Some(Self::__label_start))
        }
        None => quote!(::core::option::Option::None),
    };
    let label_delta = match label.and_then(|l| l.delta.as_ref()) {
        Some((path, _)) => {
            let delta = {
                let tw = tw.at(path.span());
                let called = call_user_fn(path, quote!(&__la, __partial));
                quote_spanned!(path.span()=> #tw::label(::core::convert::Into::<::std::string::String>::into(#called)))
            };
            let parse_ref = parse_ref_input();
            adapters.push(quote! {
                fn __label_delta(__input: &#tw::Value, __partial: &#tw::Value) -> ::core::option::Option<::std::string::String> {
                    let __la: #args_ty = #parse_ref.ok()?;
                    #delta
                }
            });
            quote!(::core::option::Option::Some(Self::__label_delta))
        }
        None => quote!(::core::option::Option::None),
    };
    let label_complete = keep_input;

    // Approval.
    let approval = match &attrs.approval {
        None => None,
        Some(approval) => {
            let (policy, _) = approval
                .request
                .as_ref()
                .expect("checked: approval has a request policy");
            let request = match policy {
                Policy::Never => quote!(#tw::RequestPolicy::Never),
                Policy::Once => quote!(#tw::RequestPolicy::Once),
                Policy::Always => quote!(#tw::RequestPolicy::Always),
                Policy::Auto(auto) => {
                    let instructions = option_str(auto.instructions.as_ref());
                    let clear = option_str(auto.clear.as_ref());
                    let caution = option_str(auto.caution.as_ref());
                    let model = option_str(auto.model.as_ref());
                    quote!(#tw::RequestPolicy::Auto(#tw::AutoSpec {
                        instructions: #instructions,
                        criteria: #tw::AutoCriteria { clear: #clear, caution: #caution },
                        model: #model,
                    }))
                }
                Policy::Custom(path) => {
                    let call = {
                        let tw = tw.at(path.span());
                        let called = call_user_fn(path, quote!(&__pcx));
                        quote_spanned!(path.span()=> #tw::IntoDecision::into_decision(#called))
                    };
                    let parse_call = parse_call_input();
                    adapters.push(quote! {
                        fn __policy<'a>(__call: &'a #tw::ApprovalCall<'a>) -> #tw::BoxFuture<'a, #tw::ApprovalDecision> {
                            ::std::boxed::Box::pin(async move {
                                let __args: #args_ty = match #parse_call {
                                    ::core::result::Result::Ok(args) => args,
                                    ::core::result::Result::Err(error) => {
                                        return #tw::ApprovalDecision::denied(::std::string::ToString::to_string(&error));
                                    }
                                };
                                let __pcx = #tw::ApprovalContext::new(__call, &__args);
                                #call.await
                            })
                        }
                    });
                    quote!(#tw::RequestPolicy::Custom(Self::__policy))
                }
            };
            let prompt = match &approval.prompt {
                None => quote!(::core::option::Option::None),
                Some(text) => {
                    let render = render_text(text, tw, |path| {
                        let tw = tw.at(path.span());
                        call_user_fn(path, quote!(&#tw::PromptContext::new(__call, &__la)))
                    });
                    let parse_call = parse_call_input();
                    adapters.push(quote! {
                        fn __prompt(__call: &#tw::ApprovalCall<'_>) -> ::core::result::Result<::std::string::String, #tw::ToolError> {
                            let __la: #args_ty = #parse_call?;
                            ::core::result::Result::Ok(#render)
                        }
                    });
                    quote!(::core::option::Option::Some(Self::__prompt))
                }
            };
            let response = match &approval.response {
                None => quote!(::core::option::Option::None),
                Some(path) => {
                    let call = {
                        let tw = tw.at(path.span());
                        let called =
                            call_user_fn(path, quote!(&#tw::ResponseContext::new(__call, &__la)));
                        // Typed here so a fn returning something else is reported at the path.
                        quote_spanned!(path.span()=> {
                            let __verdict: #tw::ResponseVerdict = #called;
                            __verdict
                        })
                    };
                    let parse_call = parse_call_input();
                    adapters.push(quote! {
                        fn __response(__call: &#tw::ResponseCall<'_>) -> #tw::ResponseVerdict {
                            match #parse_call {
                                ::core::result::Result::Ok(__la) => #call,
                                ::core::result::Result::Err(error) => #tw::ResponseVerdict::rejected(::std::string::ToString::to_string(&error)),
                            }
                        }
                    });
                    quote!(::core::option::Option::Some(Self::__response))
                }
            };
            let key = match attrs.approval_key.as_ref().map(|g| &g.value) {
                None => quote!(#tw::ApprovalKey::ToolName),
                Some(ApprovalKey::Input) => quote!(#tw::ApprovalKey::Input),
                Some(ApprovalKey::Custom(path)) => {
                    let called = call_user_fn(path, quote!(&__la));
                    let call = quote_spanned!(path.span()=> ::core::convert::Into::<::std::string::String>::into(#called));
                    let parse_ref = parse_ref_input();
                    adapters.push(quote! {
                        fn __approval_key(__input: &#tw::Value) -> ::core::result::Result<::std::string::String, #tw::ToolError> {
                            let __la: #args_ty = #parse_ref?;
                            ::core::result::Result::Ok(#call)
                        }
                    });
                    quote!(#tw::ApprovalKey::Custom(Self::__approval_key))
                }
            };
            let require_auth = match &approval.require_auth {
                None => quote!(::core::option::Option::None),
                Some(provider) => quote!(::core::option::Option::Some(#provider)),
            };
            Some(quote! {
                approval: ::core::option::Option::Some(#tw::ApprovalSpec {
                    request: #request,
                    prompt: #prompt,
                    response: #response,
                    key: #key,
                    require_auth: #require_auth,
                }),
            })
        }
    };

    // Output schema.
    let output_schema = match &attrs.output_schema {
        Some(g) if g.value => {
            let body = if serve {
                quote_spanned!(first_span=> #tw_first::output_schema_of::<#serve_output>(__inline))
            } else {
                quote_spanned! {ret_span=>
                    #[allow(unused_imports)]
                    use #tw::{ViaResult as _, ViaValue as _};
                    let __ret = #tw::Ret::<#ret_ty>::new();
                    ((&__ret).tag().output_schema(&__ret))(__inline)
                }
            };
            adapters.push(quote! {
                fn __output_schema(__inline: bool) -> #tw::Schema {
                    #body
                }
            });
            Some(quote!(output_schema: ::core::option::Option::Some(Self::__output_schema),))
        }
        _ => None,
    };

    let ends_turn_kind = match attrs.ends_turn.as_ref().and_then(|g| g.value.as_ref()) {
        None => None,
        Some(EndsTurn::Always) => Some(quote!(ends_turn: #tw::EndsTurn::Always,)),
        Some(EndsTurn::ByOutput(_)) => Some(quote!(ends_turn: #tw::EndsTurn::ByOutput,)),
    };
    let annotations = attrs.annotations.as_ref().map(|given| {
        let a = &given.value;
        let hint = |v: Option<bool>| match v {
            Some(b) => quote!(::core::option::Option::Some(#b)),
            None => quote!(::core::option::Option::None),
        };
        let (r, d, i, o) = (
            hint(a.read_only),
            hint(a.destructive),
            hint(a.idempotent),
            hint(a.open_world),
        );
        quote!(annotations: #tw::Annotations { read_only: #r, destructive: #d, idempotent: #i, open_world: #o },)
    });
    let projected = attrs
        .to_model_output
        .is_some()
        .then(|| quote!(projected: true,));
    let kind_tokens = match kind {
        Kind::Plain => None,
        Kind::Durable => Some(quote!(kind: #tw::ToolKind::Durable,)),
        Kind::Workflow(Entry::Execute) => {
            Some(quote!(kind: #tw::ToolKind::Workflow(#tw::Entry::Execute),))
        }
        Kind::Workflow(Entry::Task) => {
            Some(quote!(kind: #tw::ToolKind::Workflow(#tw::Entry::Task),))
        }
        Kind::Workflow(Entry::Serve) => {
            Some(quote!(kind: #tw::ToolKind::Workflow(#tw::Entry::Serve),))
        }
    };
    let type_name = args_type_name(first, serve);
    let fields = quote_spanned!(first_span=> <#args_ty as #tw_first::ToolInput>::FIELDS);
    let sensitive = quote_spanned!(first_span=> <#args_ty as #tw_first::ToolInput>::SENSITIVE);
    let schema = quote_spanned!(first_span=> #tw_first::args_schema::<#args_ty>);

    // Assertions for rules that need another item, spanned at the user's tokens.
    let mut assertions = Vec::new();
    // The argument type needs no assertion of its own: `FIELDS` in the descriptor already names
    // `<Args as ToolInput>`, and one more use with another "required by" note would repeat the
    // same error.
    if serve {
        let args_span = serve_args_span(first).unwrap_or(first_span);
        let args_text = serve_args_text(first);
        let tw_args = tw.at(args_span);
        let message = LitStr::new(
            &format!(
                "`{args_text}` has a field named `task_id` in JSON, which the argument struct of a `serve` tool cannot have: the runtime adds `task_id` to route calls to the task; rename the field"
            ),
            args_span,
        );
        assertions.push(quote_spanned! {args_span=>
            const _: () = ::core::assert!(!#tw_args::has_field(<<#first as #tw_args::ServeInput>::Args as #tw_args::ToolInput>::FIELDS, "task_id"), #message);
        });
    }
    // At the argument type like `FIELDS` in the descriptor, so a struct without `ToolInput` is
    // still one error there, not another at each template.
    let sensitive_fields =
        || quote_spanned!(first_span=> <#args_ty as #tw_first::ToolInput>::SENSITIVE_FIELDS);
    assertions.extend(c25_templates_hide_sensitive(
        attrs,
        tw,
        sensitive_fields,
        || args_text(first, serve),
    ));
    if serve && Attrs::flag(&attrs.output_schema) {
        // At the `Output` of `ServeCalls<Args, Output>`, the type that lacks the schema.
        let span = serve_generic(first, 1).map_or(first_span, Spanned::span);
        let tw = tw.at(span);
        assertions.push(quote_spanned! {span=>
            const _: () = #tw::assert_output_schema::<#serve_output>();
        });
    }

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
    let requirements = (!sig.rest.is_empty()).then(|| quote!(requirements: &[#(#requirements),*],));
    // Only what differs from `__private::DEFAULTS`, which `emit` fills the rest from.
    let descriptor_fields = quote! {
        #approval
        #ends_turn_kind
        #label
        #annotations
        #output_schema
        #projected
        #kind_tokens
        input: #tw::InputSpec {
            schema: #schema,
            fields: #fields,
            sensitive: #sensitive,
            type_name: #type_name,
        },
        #requirements
        invoke: Self::__invoke,
    };
    let items = quote! {
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
/// `items` in its impl, the assertions (`assertions` and the reserved-name one), and the
/// `inventory` submission.
fn emit(
    input: &Input<'_>,
    tw: &Tw,
    fields: TokenStream,
    items: TokenStream,
    mut assertions: Vec<TokenStream>,
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
    assertions.push(reserved_name(input, tw, &names));
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
        #vis struct #ident {}

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

        #tw::inventory::submit! { #tw::Registration(#ident::TOOL) }
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

/// C13's reserved names: the list is the runtime's (`names::RESERVED_NAMES`), so the check is a
/// constant evaluated by rustc, at the name.
fn reserved_name(input: &Input<'_>, tw: &Tw, names: &Names) -> TokenStream {
    let attrs = input.attrs;
    let model_name = &names.model_name;
    let name_span = attrs
        .name
        .as_ref()
        .map(|g| g.value.span())
        .unwrap_or_else(|| input.sig.ident.span());
    let reserved_message = if attrs.name.is_some() {
        format!(
            "`{model_name}` is reserved for a meta-tool or built-in tool of the runtime; choose another `name`"
        )
    } else {
        format!(
            "the tool is named after the fn, and `{model_name}` is reserved for a meta-tool or built-in tool of the runtime; rename the fn or set `name = \"...\"`"
        )
    };
    let reserved_message = LitStr::new(&reserved_message, name_span);
    let tw_name = tw.at(name_span);
    quote_spanned! {name_span=>
        const _: () = ::core::assert!(!#tw_name::is_reserved(#model_name), #reserved_message);
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
