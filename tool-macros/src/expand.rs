//! Code generation, run only after every check passed.
//!
//! The user's fn is emitted untouched. Beside it: a braced struct with the fn's name (type
//! namespace only, so it cannot clash with the fn) whose `TOOL` const is the descriptor, adapter
//! fns in that struct's impl, assertions for rules that need other items, and the `inventory`
//! submission. Every path is absolute through the facade's hidden `__private` module.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, LitStr, Path, Type};

use crate::attrs::{ApprovalKey, Attrs, Effect, EndsTurn, Entry, Policy, TextOrPath};
use crate::sig::Sig;

pub(crate) struct Input<'a> {
    pub(crate) item: &'a ItemFn,
    pub(crate) attrs: &'a Attrs,
    pub(crate) sig: &'a Sig,
    pub(crate) description: String,
    pub(crate) krate: TokenStream,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Durable,
    Workflow(Entry),
}

pub(crate) fn expand(input: &Input<'_>) -> TokenStream {
    let Input { item, attrs, sig, description, krate } = input;
    let tw = quote!(#krate::__private);
    let ident = &sig.ident;
    let vis = &item.vis;
    let first = sig.first.as_ref().expect("checked: a tool has a first parameter");

    let kind = match (&attrs.workflow, Attrs::flag(&attrs.durable)) {
        (Some(w), _) => Kind::Workflow(w.value.expect("checked: workflow has an entry point")),
        (None, true) => Kind::Durable,
        (None, false) => Kind::Plain,
    };
    let serve = kind == Kind::Workflow(Entry::Serve);
    let first_span = first.span();
    // The argument struct: the first parameter, or for `serve` the `Args` of its call stream.
    let args_ty: TokenStream = if serve {
        quote_spanned!(first_span=> <#first as #tw::ServeInput>::Args)
    } else {
        quote!(#first)
    };
    let ret_ty: TokenStream = match &sig.output {
        Some(ty) => quote!(#ty),
        None => quote!(()),
    };
    let ret_span = sig.output.as_ref().map(Spanned::span).unwrap_or_else(|| sig.ident.span());

    let param_trait = match kind {
        Kind::Plain => quote!(PlainParam),
        Kind::Durable => quote!(DurableParam),
        Kind::Workflow(_) => quote!(WorkflowParam),
    };
    let param_names: Vec<Ident> = (0..sig.rest.len()).map(|i| format_ident!("__p{}", i)).collect();
    let param_extracts = sig.rest.iter().zip(&param_names).map(|(ty, name)| {
        quote_spanned!(ty.span()=> let #name = <#ty as #tw::#param_trait>::from_call(&__cx)?;)
    });
    let requirements = sig.rest.iter().map(|ty| quote_spanned!(ty.span()=> <#ty as #tw::#param_trait>::REQUIREMENT));

    let awaited = sig.asyncness.map(|span| quote_spanned!(span=> .await));
    let first_value = if serve {
        quote_spanned!(first_span=> <#first as #tw::ServeInput>::start(__args, ::core::clone::Clone::clone(&__cx), Self::__finish))
    } else {
        quote!(__args)
    };
    let call = quote!(#ident(#first_value #(, #param_names)*) #awaited);

    // What the adapter computes from the typed output.
    let label = attrs.label.as_ref().map(|l| &l.value);
    let complete_template = label.and_then(|l| l.complete.as_ref());
    let keep_input = complete_template.is_some() && !serve;
    let label_input = keep_input.then(|| quote!(let __label_input = ::core::clone::Clone::clone(&__input);));
    let ends_turn = match attrs.ends_turn.as_ref().and_then(|g| g.value.as_ref()) {
        None => quote!(false),
        Some(EndsTurn::Always) => quote!(true),
        Some(EndsTurn::ByOutput(path)) => quote_spanned!(path.span()=> #path(&__out)),
    };
    let model = |out: &TokenStream| match &attrs.to_model_output {
        Some(g) => {
            let path = &g.value;
            quote_spanned!(path.span()=> ::core::option::Option::Some(#tw::model_output(#path(&#out))))
        }
        None => quote!(::core::option::Option::None),
    };
    let out_ident = quote!(__out);
    let (invoke_model, finish_fn) = if serve {
        let serve_model = model(&out_ident);
        let finish = quote! {
            fn __finish(__out: <#first as #tw::ServeInput>::Output) -> ::core::result::Result<#tw::CallOutput, #tw::ToolError> {
                let __model = #serve_model;
                #tw::finish(&__out, false, __model, ::core::option::Option::None)
            }
        };
        (quote!(::core::option::Option::None), finish)
    } else {
        (model(&out_ident), TokenStream::new())
    };
    let complete = match complete_template {
        Some(text) if !serve => {
            let render = match text {
                TextOrPath::Template(t) => t.render(&format_ident!("__la")),
                TextOrPath::Path(path) => quote_spanned!(path.span()=> ::core::convert::Into::<::std::string::String>::into(#path(&__la, &__out))),
            };
            quote! {
                #tw::parse_ref::<#args_ty>(&__label_input).ok().and_then(|__la| #tw::label(#render))
            }
        }
        _ => quote!(::core::option::Option::None),
    };
    let into_output = quote_spanned!(ret_span=> .into_output(__ret));

    let invoke = quote! {
        fn __invoke(
            __input: #tw::Value,
            __cx: #tw::CallContext,
        ) -> #tw::BoxFuture<'static, ::core::result::Result<#tw::CallOutput, #tw::ToolError>> {
            ::std::boxed::Box::pin(async move {
                #label_input
                let __args: #args_ty = #tw::parse_input(__input)?;
                #(#param_extracts)*
                let __ret = #call;
                let __out = {
                    #[allow(unused_imports)]
                    use #tw::{ViaResult as _, ViaValue as _};
                    (&#tw::Ret::of(&__ret)).tag()
                }#into_output?;
                let __ends = #ends_turn;
                let __model = #invoke_model;
                let __complete = #complete;
                #tw::finish(&__out, __ends, __model, __complete)
            })
        }
    };

    // Labels.
    let mut adapters = Vec::new();
    let label_start = match label.and_then(|l| l.start.as_ref()) {
        Some(text) => {
            let render = render_text(text, &tw, |path| quote_spanned!(path.span()=> #path(&__la)));
            adapters.push(quote! {
                fn __label_start(__input: &#tw::Value) -> ::core::option::Option<::std::string::String> {
                    let __la: #args_ty = #tw::parse_ref(__input).ok()?;
                    #tw::label(#render)
                }
            });
            quote!(::core::option::Option::Some(Self::__label_start))
        }
        None => quote!(::core::option::Option::None),
    };
    let label_delta = match label.and_then(|l| l.delta.as_ref()) {
        Some((path, _)) => {
            adapters.push(quote! {
                fn __label_delta(__input: &#tw::Value, __partial: &#tw::Value) -> ::core::option::Option<::std::string::String> {
                    let __la: #args_ty = #tw::parse_ref(__input).ok()?;
                    #tw::label(::core::convert::Into::<::std::string::String>::into(#path(&__la, __partial)))
                }
            });
            quote!(::core::option::Option::Some(Self::__label_delta))
        }
        None => quote!(::core::option::Option::None),
    };
    let label_complete = keep_input;

    // Approval.
    let approval = match &attrs.approval {
        None => quote!(::core::option::Option::None),
        Some(approval) => {
            let (policy, _) = approval.request.as_ref().expect("checked: approval has a request policy");
            let request = match policy {
                Policy::Never => quote!(#tw::RequestPolicy::Never),
                Policy::Once => quote!(#tw::RequestPolicy::Once),
                Policy::Always => quote!(#tw::RequestPolicy::Always),
                Policy::Auto { instructions } => {
                    let instructions = option_str(instructions.as_ref());
                    quote!(#tw::RequestPolicy::Auto { instructions: #instructions })
                }
                Policy::Custom(path) => {
                    let call = quote_spanned!(path.span()=> #path(&__pcx));
                    adapters.push(quote! {
                        fn __policy<'a>(__call: &'a #tw::ApprovalCall<'a>) -> #tw::BoxFuture<'a, #tw::ApprovalDecision> {
                            ::std::boxed::Box::pin(async move {
                                let __args: #args_ty = match #tw::parse_ref(__call.input) {
                                    ::core::result::Result::Ok(args) => args,
                                    ::core::result::Result::Err(error) => {
                                        return #tw::ApprovalDecision::denied(::std::string::ToString::to_string(&error));
                                    }
                                };
                                let __pcx = #tw::ApprovalContext::new(__call, &__args);
                                #tw::IntoDecision::into_decision(#call).await
                            })
                        }
                    });
                    quote!(#tw::RequestPolicy::Custom(Self::__policy))
                }
            };
            let prompt = match &approval.prompt {
                None => quote!(::core::option::Option::None),
                Some(text) => {
                    let render = render_text(text, &tw, |path| {
                        quote_spanned!(path.span()=> #path(&#tw::PromptContext::new(__call, &__la)))
                    });
                    adapters.push(quote! {
                        fn __prompt(__call: &#tw::ApprovalCall<'_>) -> ::core::result::Result<::std::string::String, #tw::ToolError> {
                            let __la: #args_ty = #tw::parse_ref(__call.input)?;
                            ::core::result::Result::Ok(#render)
                        }
                    });
                    quote!(::core::option::Option::Some(Self::__prompt))
                }
            };
            let response = match &approval.response {
                None => quote!(::core::option::Option::None),
                Some(path) => {
                    let call = quote_spanned!(path.span()=> #path(&#tw::ResponseContext::new(__call, &__la)));
                    adapters.push(quote! {
                        fn __response(__call: &#tw::ResponseCall<'_>) -> #tw::ResponseVerdict {
                            match #tw::parse_ref::<#args_ty>(__call.input) {
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
                    let call = quote_spanned!(path.span()=> ::core::convert::Into::<::std::string::String>::into(#path(&__la)));
                    adapters.push(quote! {
                        fn __approval_key(__input: &#tw::Value) -> ::core::result::Result<::std::string::String, #tw::ToolError> {
                            let __la: #args_ty = #tw::parse_ref(__input)?;
                            ::core::result::Result::Ok(#call)
                        }
                    });
                    quote!(#tw::ApprovalKey::Custom(Self::__approval_key))
                }
            };
            quote! {
                ::core::option::Option::Some(#tw::ApprovalSpec {
                    request: #request,
                    prompt: #prompt,
                    response: #response,
                    key: #key,
                })
            }
        }
    };

    // Output schema.
    let output_schema = match &attrs.output_schema {
        Some(g) if g.value => {
            let body = if serve {
                quote_spanned!(g.span=> #tw::schema_of::<<#first as #tw::ServeInput>::Output>(__inline))
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
            if serve {
                let assert = quote_spanned!(g.span=> const _: () = #tw::assert_output_schema::<<#first as #tw::ServeInput>::Output>(););
                adapters.push(quote!(#assert));
            }
            quote!(::core::option::Option::Some(Self::__output_schema))
        }
        _ => quote!(::core::option::Option::None),
    };

    let enabled = match &attrs.enabled {
        Some(g) => {
            let path = &g.value;
            quote_spanned!(path.span()=> ::core::option::Option::Some(#path))
        }
        None => quote!(::core::option::Option::None),
    };

    // Names and plain data.
    let fn_name = ident.to_string().trim_start_matches("r#").to_owned();
    let name = attrs.name.as_ref().map(|g| g.value.value()).unwrap_or_else(|| fn_name.clone());
    let toolset = attrs.toolset.as_ref().map(|g| g.value.value());
    let model_name = match &toolset {
        Some(set) => format!("{set}__{name}"),
        None => name.clone(),
    };
    let name_span = attrs.name.as_ref().map(|g| g.value.span()).unwrap_or_else(|| ident.span());
    let toolset_tokens = option_string(toolset.as_deref());
    let title = option_str(attrs.title.as_ref().map(|g| &g.value));
    let summary = option_str(attrs.summary.as_ref().map(|g| &g.value));
    let i18n = attrs.i18n.iter().flat_map(|g| g.value.iter()).map(|locale| {
        let code = locale.locale.to_string();
        let title = option_str(locale.title.as_ref());
        let summary = option_str(locale.summary.as_ref());
        quote!(#tw::LocaleText { locale: #code, title: #title, summary: #summary })
    });
    let effect = match attrs.effect.as_ref().expect("checked: effect is present").value {
        Effect::Read => quote!(#tw::Effect::Read),
        Effect::Write => quote!(#tw::Effect::Write),
        Effect::Money => quote!(#tw::Effect::Money),
        Effect::Public => quote!(#tw::Effect::Public),
    };
    let untrusted = Attrs::flag(&attrs.untrusted);
    let user_only = Attrs::flag(&attrs.user_only);
    let deferred = Attrs::flag(&attrs.deferred);
    let subagents = attrs.subagents.as_ref().is_none_or(|g| g.value);
    let ends_turn_kind = match attrs.ends_turn.as_ref().and_then(|g| g.value.as_ref()) {
        None => quote!(#tw::EndsTurn::Never),
        Some(EndsTurn::Always) => quote!(#tw::EndsTurn::Always),
        Some(EndsTurn::ByOutput(_)) => quote!(#tw::EndsTurn::ByOutput),
    };
    let annotations = {
        let a = attrs.annotations.as_ref().map(|g| g.value.clone()).unwrap_or_default();
        let hint = |v: Option<bool>| match v {
            Some(b) => quote!(::core::option::Option::Some(#b)),
            None => quote!(::core::option::Option::None),
        };
        let (r, d, i, o) = (hint(a.read_only), hint(a.destructive), hint(a.idempotent), hint(a.open_world));
        quote!(#tw::Annotations { read_only: #r, destructive: #d, idempotent: #i, open_world: #o })
    };
    let projected = attrs.to_model_output.is_some();
    let kind_tokens = match kind {
        Kind::Plain => quote!(#tw::ToolKind::Plain),
        Kind::Durable => quote!(#tw::ToolKind::Durable),
        Kind::Workflow(Entry::Execute) => quote!(#tw::ToolKind::Workflow(#tw::Entry::Execute)),
        Kind::Workflow(Entry::Task) => quote!(#tw::ToolKind::Workflow(#tw::Entry::Task)),
        Kind::Workflow(Entry::Serve) => quote!(#tw::ToolKind::Workflow(#tw::Entry::Serve)),
    };
    let type_name = args_type_name(first, serve);
    let fields = quote_spanned!(first_span=> <#args_ty as #tw::ToolInput>::FIELDS);
    let schema = quote_spanned!(first_span=> #tw::schema_of::<#args_ty>);
    let location = quote_spanned! {ident.span()=>
        #tw::Location {
            file: ::core::file!(),
            line: ::core::line!(),
            column: ::core::column!(),
            module_path: ::core::module_path!(),
        }
    };

    // Assertions for rules that need another item, spanned at the user's tokens.
    let mut assertions = Vec::new();
    let input_assert = if serve {
        quote_spanned!(first_span=> const _: () = #tw::assert_serve::<#first>();)
    } else {
        quote_spanned!(first_span=> const _: () = #tw::assert_input::<#first>();)
    };
    assertions.push(input_assert);
    if serve {
        let message = LitStr::new(
            "C7: the argument struct of a `serve` tool must not have a `task_id` field: the runtime adds `task_id` to the schema itself; rename the field",
            first_span,
        );
        assertions.push(quote_spanned! {first_span=>
            const _: () = ::core::assert!(!#tw::has_field(<<#first as #tw::ServeInput>::Args as #tw::ToolInput>::FIELDS, "task_id"), #message);
        });
    }
    let reserved_message = LitStr::new(
        &format!("C13: `{model_name}` is reserved for a meta-tool or built-in tool of the runtime; choose another `name`"),
        name_span,
    );
    assertions.push(quote_spanned! {name_span=>
        const _: () = ::core::assert!(!#tw::is_reserved(#model_name), #reserved_message);
    });

    let description = LitStr::new(description, Span::call_site());
    let struct_doc = format!("The registered descriptor of the tool `{model_name}`: `{fn_name}::TOOL`.");

    quote! {
        #item

        #[doc = #struct_doc]
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #ident {}

        #[allow(non_camel_case_types, unused_qualifications, clippy::all, clippy::pedantic)]
        impl #ident {
            /// The descriptor `#[tool]` registered for this fn.
            #vis const TOOL: &'static #tw::ToolDescriptor = &#tw::ToolDescriptor {
                fn_name: #fn_name,
                name: #name,
                toolset: #toolset_tokens,
                description: #description,
                title: #title,
                summary: #summary,
                i18n: &[#(#i18n),*],
                effect: #effect,
                untrusted: #untrusted,
                user_only: #user_only,
                deferred: #deferred,
                subagents: #subagents,
                approval: #approval,
                ends_turn: #ends_turn_kind,
                label: #tw::LabelSpec {
                    start: #label_start,
                    delta: #label_delta,
                    complete: #label_complete,
                },
                annotations: #annotations,
                output_schema: #output_schema,
                projected: #projected,
                kind: #kind_tokens,
                enabled: #enabled,
                input: #tw::InputSpec {
                    schema: #schema,
                    fields: #fields,
                    type_name: #type_name,
                },
                requirements: &[#(#requirements),*],
                invoke: Self::__invoke,
                location: #location,
            };

            #invoke
            #finish_fn
            #(#adapters)*
        }

        #[allow(unused_qualifications, clippy::all)]
        const _: () = {
            #(#assertions)*
        };

        #tw::inventory::submit! { #tw::Registration(#ident::TOOL) }
    }
}

fn render_text(text: &TextOrPath, _tw: &TokenStream, call: impl Fn(&Path) -> TokenStream) -> TokenStream {
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

fn option_string(text: Option<&str>) -> TokenStream {
    match text {
        Some(text) => quote!(::core::option::Option::Some(#text)),
        None => quote!(::core::option::Option::None),
    }
}

fn args_type_name(first: &Type, serve: bool) -> String {
    let text = quote!(#first).to_string().replace(' ', "");
    if serve { format!("<{text}asServeInput>::Args") } else { text }
}
