//! The adapter fns of a tool's descriptor beside `__invoke`: its labels, its approval policy's
//! fns (a custom request policy, the prompt, the response policy, the approval key) and its
//! output schema. Each that reads the call's input parses the argument struct from it through
//! [`Args::parse`]; each is pushed to the items of the tool's impl, and the descriptor field
//! naming it is returned.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::{Tw, call_user_fn, option_str, render_text};
use crate::attrs::{Approval, ApprovalKey, Attrs, Label, Policy};

/// The argument struct as the adapters parse it.
pub(super) struct Args {
    /// The type: the first parameter, or for `serve` the `Args` of its call stream. Held as
    /// the type itself where it is the first parameter: interpolated, a type pushes its tokens
    /// one by one, where a `TokenStream` would be spliced in with a round trip to rustc.
    pub(super) ty: Box<dyn ToTokens>,
    /// The first parameter's span, where errors about the struct are reported.
    pub(super) span: Span,
    /// The facade's path, spanned at `span`.
    pub(super) tw: Tw,
    /// For `serve`: what each call replies with, the `Output` of `ServeCalls<Args, Output>`.
    pub(super) serve_output: Option<TokenStream>,
}

impl Args {
    /// Deserializes the argument struct in an adapter, with the facade's `function`. Beside
    /// the call, the same `ToolInput` projection the descriptor uses, at the same span: when
    /// the struct lacks its derives, each adapter then reports the one "is not a tool argument
    /// struct" error (identical errors are merged) and rustc drops the `DeserializeOwned` error
    /// it implies, instead of adding one per adapter at the attribute.
    pub(super) fn parse(&self, function: &str, input: TokenStream) -> TokenStream {
        let function = Ident::new(function, self.span);
        let (ty, tw) = (&self.ty, &self.tw);
        quote_spanned! {self.span=>
            {
                let _ = <#ty as #tw::ToolInput>::FIELDS;
                #tw::#function::<#ty>(#input)
            }
        }
    }

    /// Parses the struct from an adapter's `__input: &Value`.
    fn parse_ref_input(&self) -> TokenStream {
        self.parse("parse_ref", quote!(__input))
    }

    /// Parses the struct from the input of an adapter's `__call`.
    fn parse_call_input(&self) -> TokenStream {
        self.parse("parse_ref", quote!(__call.input))
    }
}

/// The `start` and `delta` fields of the descriptor's label, with their adapters.
pub(super) fn labels(
    label: Option<&Label>,
    tw: &Tw,
    args: &Args,
    adapters: &mut Vec<TokenStream>,
) -> (TokenStream, TokenStream) {
    let args_ty = &args.ty;
    let start = match label.and_then(|l| l.start.as_ref()) {
        Some(text) => {
            let render = render_text(text, tw, |path| call_user_fn(path, quote!(&__la)));
            let parse_ref = args.parse_ref_input();
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
    let delta = match label.and_then(|l| l.delta.as_ref()) {
        Some((path, _)) => {
            let delta = {
                let tw = tw.at(path.span());
                let called = call_user_fn(path, quote!(&__la, __partial));
                quote_spanned!(path.span()=> #tw::label(::core::convert::Into::<::std::string::String>::into(#called)))
            };
            let parse_ref = args.parse_ref_input();
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
    (start, delta)
}

/// The descriptor's `approval` field, when the tool has an `approval`, with the adapters of
/// its parts.
pub(super) fn approval(
    attrs: &Attrs,
    tw: &Tw,
    args: &Args,
    adapters: &mut Vec<TokenStream>,
) -> Option<TokenStream> {
    let approval = attrs.approval.as_ref()?;
    let request = request_policy(approval, tw, args, adapters);
    let prompt = prompt(approval, tw, args, adapters);
    let response = response_policy(approval, tw, args, adapters);
    let key = approval_key(attrs, tw, args, adapters);
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

/// The `RequestPolicy`, with the adapter of a custom policy.
fn request_policy(
    approval: &Approval,
    tw: &Tw,
    args: &Args,
    adapters: &mut Vec<TokenStream>,
) -> TokenStream {
    let Some((policy, _)) = approval.request.as_ref() else {
        // The checks give every `approval` a request policy; the default is the strictest.
        return quote!(#tw::RequestPolicy::Always);
    };
    let args_ty = &args.ty;
    match policy {
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
            let parse_call = args.parse_call_input();
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
    }
}

/// The prompt's renderer, if the approval has a prompt.
fn prompt(
    approval: &Approval,
    tw: &Tw,
    args: &Args,
    adapters: &mut Vec<TokenStream>,
) -> TokenStream {
    let Some(text) = &approval.prompt else {
        return quote!(::core::option::Option::None);
    };
    let args_ty = &args.ty;
    let render = render_text(text, tw, |path| {
        let tw = tw.at(path.span());
        call_user_fn(path, quote!(&#tw::PromptContext::new(__call, &__la)))
    });
    let parse_call = args.parse_call_input();
    adapters.push(quote! {
        fn __prompt(__call: &#tw::ApprovalCall<'_>) -> ::core::result::Result<::std::string::String, #tw::ToolError> {
            let __la: #args_ty = #parse_call?;
            ::core::result::Result::Ok(#render)
        }
    });
    quote!(::core::option::Option::Some(Self::__prompt))
}

/// The response policy's adapter, if the approval has one.
fn response_policy(
    approval: &Approval,
    tw: &Tw,
    args: &Args,
    adapters: &mut Vec<TokenStream>,
) -> TokenStream {
    let Some(path) = &approval.response else {
        return quote!(::core::option::Option::None);
    };
    let call = {
        let tw = tw.at(path.span());
        let called = call_user_fn(path, quote!(&#tw::ResponseContext::new(__call, &__la)));
        // Typed here so a fn returning something else is reported at the path.
        quote_spanned!(path.span()=> {
            let __verdict: #tw::ResponseVerdict = #called;
            __verdict
        })
    };
    let parse_call = args.parse_call_input();
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

/// The `ApprovalKey`, with the adapter of a custom key.
fn approval_key(
    attrs: &Attrs,
    tw: &Tw,
    args: &Args,
    adapters: &mut Vec<TokenStream>,
) -> TokenStream {
    match attrs.approval_key.as_ref().map(|g| &g.value) {
        None => quote!(#tw::ApprovalKey::ToolName),
        Some(ApprovalKey::Input) => quote!(#tw::ApprovalKey::Input),
        Some(ApprovalKey::Custom(path)) => {
            let args_ty = &args.ty;
            let called = call_user_fn(path, quote!(&__la));
            let call = quote_spanned!(path.span()=> ::core::convert::Into::<::std::string::String>::into(#called));
            let parse_ref = args.parse_ref_input();
            adapters.push(quote! {
                fn __approval_key(__input: &#tw::Value) -> ::core::result::Result<::std::string::String, #tw::ToolError> {
                    let __la: #args_ty = #parse_ref?;
                    ::core::result::Result::Ok(#call)
                }
            });
            quote!(#tw::ApprovalKey::Custom(Self::__approval_key))
        }
    }
}

/// The descriptor's `output_schema` field, when the tool asks for one, with its adapter: the
/// schema of the return type's output, or for `serve` of its calls' `Output`.
pub(super) fn output_schema(
    attrs: &Attrs,
    tw: &Tw,
    args: &Args,
    (ret_ty, ret_span): (&TokenStream, Span),
    adapters: &mut Vec<TokenStream>,
) -> Option<TokenStream> {
    if !Attrs::flag(&attrs.output_schema) {
        return None;
    }
    let body = match &args.serve_output {
        Some(serve_output) => {
            let tw_first = &args.tw;
            quote_spanned!(args.span=> #tw_first::output_schema_of::<#serve_output>(__inline))
        }
        None => quote_spanned! {ret_span=>
            let __ret = #tw::Ret::<#ret_ty>::new();
            (__ret.toolwright_tag().output_schema(&__ret))(__inline)
        },
    };
    adapters.push(quote! {
        fn __output_schema(__inline: bool) -> #tw::Schema {
            #body
        }
    });
    Some(quote!(output_schema: ::core::option::Option::Some(Self::__output_schema),))
}
