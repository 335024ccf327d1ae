//! `__invoke`, the adapter the runtime calls: the argument struct parsed from the input, the
//! fn's other parameters taken from the call's context, the fn called, its output checked and
//! finished (`ends_turn`, `to_model_output`, the `complete` label), and for `serve` the
//! `__finish` each of its calls' outputs goes through. A tool that finishes its output as it
//! is, with at most three context parameters and a nameable return type, and is not `serve`,
//! calls a shared generic adapter instead (`ValueTag::invoke` and its kin in `__private`); every
//! other tool gets an `async` block.

use super::*;

/// What [`invoke`] writes.
pub(super) struct Invoke {
    /// The `__invoke` fn.
    pub(super) item: TokenStream,
    /// `serve`'s `__finish`.
    pub(super) finish_fn: Option<TokenStream>,
    /// The `REQUIREMENT` of each parameter after the first.
    pub(super) requirements: Vec<TokenStream>,
    /// Whether `__invoke` keeps a copy of the input for the `complete` label.
    pub(super) keep_input: bool,
}

/// The `__invoke` adapter of tool `input` of `kind`, whose argument struct is `args` and whose
/// return type, as written, is `ret_ty` at `ret_span`: the shared generic adapter where the
/// tool can take it ([`shared_adapter`]), an `async` block of its own otherwise
/// ([`async_block`]).
pub(super) fn invoke(
    input: &Input<'_>,
    kind: Kind,
    args: &adapters::Args,
    (ret_ty, ret_span): (&TokenStream, Span),
) -> Invoke {
    let Input { attrs, sig, tw, .. } = input;
    let param_trait = match kind {
        Kind::Plain => quote!(PlainParam),
        Kind::Durable => quote!(DurableParam),
        Kind::Workflow(_) => quote!(WorkflowParam),
    };
    let requirements = sig
        .rest
        .iter()
        .map(|ty| {
            let tw = tw.at(ty.span());
            quote_spanned!(ty.span()=> <#ty as #tw::#param_trait>::REQUIREMENT)
        })
        .collect();
    let finish = finish(attrs, tw, args, ret_span);
    let serve = args.serve_output.is_some();
    let shared =
        !serve && finish.plain && sig.rest.len() <= SHARED_MAX_PARAMS && !names_impl(ret_ty);
    let item = if shared {
        shared_adapter(input, args, &param_trait, (ret_ty, ret_span))
    } else {
        async_block(input, args, &param_trait, &finish, ret_span)
    };
    Invoke {
        item,
        finish_fn: finish.finish_fn,
        requirements,
        keep_input: finish.keep_input,
    }
}

/// The `__invoke` of any tool: an `async` block that parses the argument struct (keeping a copy
/// of the input for the `complete` label), extracts each context parameter with the kind's
/// `param_trait`, calls the fn (for `serve`, with its call stream) and finishes its output as
/// `finish` says.
fn async_block(
    input: &Input<'_>,
    args: &adapters::Args,
    param_trait: &TokenStream,
    finish: &Finish,
    ret_span: Span,
) -> TokenStream {
    let Input { sig, tw, .. } = input;
    let ident = &sig.ident;
    let (first_span, tw_first, args_ty) = (args.span, &args.tw, &args.ty);
    let first = sig
        .first
        .as_ref()
        .expect("checked: a tool has a first parameter");
    let param_names: Vec<Ident> = (0..sig.rest.len())
        .map(|i| format_ident!("__p{}", i))
        .collect();
    let param_extracts = sig.rest.iter().zip(&param_names).map(|(ty, name)| {
        let tw = tw.at(ty.span());
        quote_spanned!(ty.span()=> let #name = <#ty as #tw::#param_trait>::from_call(&__cx)?;)
    });
    let awaited = sig.asyncness.map(|span| quote_spanned!(span=> .await));
    let first_value = if args.serve_output.is_some() {
        quote_spanned!(first_span=> <#first as #tw_first::ServeInput>::start(__args, ::core::clone::Clone::clone(&__cx), Self::__finish))
    } else {
        quote!(__args)
    };
    let call = quote!(#ident(#first_value #(, #param_names)*) #awaited);
    let label_input = finish
        .keep_input
        .then(|| quote!(let __label_input = ::core::clone::Clone::clone(&__input);));
    let into_output = quote_spanned!(ret_span=> .into_output(__ret));
    let parse_input = args.parse("parse_input", quote!(__input));
    let finish = &finish.finish;
    quote! {
        fn __invoke(
            __input: #tw::Value,
            __cx: #tw::CallContext,
        ) -> #tw::Invoked {
            ::std::boxed::Box::pin(async move {
                #label_input
                let __args: #args_ty = #parse_input?;
                #(#param_extracts)*
                let __ret = #call;
                let __out = #tw::Ret::of(&__ret).toolwright_tag()#into_output?;
                #finish
            })
        }
    }
}

/// The most context parameters the generic adapters in `__private` take (`invoke_3`).
const SHARED_MAX_PARAMS: usize = 3;

/// The `__invoke` of a tool (not `serve`) that finishes its output as it is and takes at most
/// [`SHARED_MAX_PARAMS`] context parameters: a call of the generic adapter
/// `ValueTag::invoke`/`ResultTag::invoke` for its number of parameters (`invoke_2`,
/// `invoke_sync` for a plain `fn`, ...), chosen by the written return type, so the tool has no
/// `async` block of its own for rustc to check and lower on every build. The return type must
/// be nameable for that (not `impl Trait`). Each parameter's extractor is named at its type,
/// with the kind's parameter trait (`param_trait`).
fn shared_adapter(
    input: &Input<'_>,
    args: &adapters::Args,
    param_trait: &TokenStream,
    ret: (&TokenStream, Span),
) -> TokenStream {
    let Input { sig, tw, .. } = input;
    let ident = &sig.ident;
    let (first_span, tw_first, args_ty) = (args.span, &args.tw, &args.ty);
    let (ret_ty, ret_span) = ret;
    let stem = match sig.asyncness {
        Some(_) => "invoke",
        None => "invoke_sync",
    };
    let method = match sig.rest.len() {
        0 => Ident::new(stem, ret_span),
        n => Ident::new(&format!("{stem}_{n}"), ret_span),
    };
    let extractors = sig.rest.iter().map(|ty| {
        let tw = tw.at(ty.span());
        quote_spanned!(ty.span()=> <#ty as #tw::#param_trait>::from_call)
    });
    // At the parameter: a struct without its derives is reported there, once (beside the
    // descriptor's `ToolInput::FIELDS`, whose error rustc then keeps alone).
    let parse = quote_spanned!(first_span=> #tw_first::parse_input::<#args_ty>);
    let tw_ret = tw.at(ret_span);
    quote! {
        fn __invoke(__input: #tw::Value, __cx: #tw::CallContext) -> #tw::Invoked {
            #tw_ret::Ret::<#ret_ty>::new()
                .toolwright_tag()
                .#method(__input, __cx, #parse, #(#extractors,)* #ident)
        }
    }
}

/// What [`finish`] writes.
struct Finish {
    /// The expression that turns `__out` into the `CallOutput`, with its `let`s.
    finish: TokenStream,
    /// `serve`'s `__finish`.
    finish_fn: Option<TokenStream>,
    /// Whether the `complete` label needs a copy of the input.
    keep_input: bool,
    /// Whether the output is finished as it is: no `ends_turn` fn, projection or `complete`
    /// label.
    plain: bool,
}

/// How `__invoke` finishes the typed output `__out`: whether it ends the turn, its projection
/// for the model and the `complete` label, each only when the tool has it (for `serve`, the
/// projection goes to `__finish`, which each call's output goes through).
fn finish(attrs: &Attrs, tw: &Tw, args: &adapters::Args, ret_span: Span) -> Finish {
    let serve = args.serve_output.is_some();
    // What the adapter computes from the typed output.
    let label = attrs.label.as_ref().map(|l| &l.value);
    let complete_template = label.and_then(|l| l.complete.as_ref());
    let keep_input = complete_template.is_some() && !serve;
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
    let (invoke_model, finish_fn) = if let Some(serve_output) = &args.serve_output {
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
            let parse_label_input = args.parse("parse_ref", quote!(&__label_input));
            Some(quote! {
                #tw::guard_label(|| #parse_label_input.ok().and_then(|__la| #tw::label(#render)))
            })
        }
        _ => None,
    };
    // At the same span as `into_output`, so rustc folds "`T: Serialize` is not satisfied" into the
    // `ToolOutput` error there instead of reporting it a second time at the attribute.
    let plain = ends_turn.is_none() && invoke_model.is_none() && complete.is_none();
    let finish = if plain {
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
    Finish {
        finish,
        finish_fn,
        keep_input,
        plain,
    }
}

/// Whether the type `ty` has an `impl Trait` in it, which a turbofish cannot name.
fn names_impl(ty: &TokenStream) -> bool {
    ty.clone().into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => ident == "impl",
        TokenTree::Group(group) => names_impl(&group.stream()),
        _ => false,
    })
}
