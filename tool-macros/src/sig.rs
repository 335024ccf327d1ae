//! What the macro needs from the fn signature, with the problems only the signature shows.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, PatType, ReturnType, Signature, Type};

use crate::ctxt::Ctxt;

pub(crate) struct Sig {
    pub(crate) ident: Ident,
    pub(crate) asyncness: Option<Span>,
    pub(crate) fn_span: Span,
    /// The first parameter's type: the argument struct (or, for `serve`, the call stream).
    pub(crate) first: Option<Type>,
    /// The parameters after it: contexts and state.
    pub(crate) rest: Vec<Type>,
    /// Each typed parameter as written (`name: Type`), for messages about the parameters.
    pub(crate) typed_params: Vec<PatType>,
    /// The written return type; `None` for `()`.
    pub(crate) output: Option<Type>,
}

/// `provider` says the fn is a provider-native tool's, which takes no argument struct: its
/// parameters are reported by the rules (C19), not here.
pub(crate) fn analyze(sig: &Signature, provider: bool, cx: &mut Ctxt) -> Sig {
    if let Some(unsafety) = &sig.unsafety {
        cx.error_spanned(
            unsafety,
            "a tool cannot be an `unsafe fn`; keep the unsafe code inside a safe fn",
        );
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned(abi, "a tool cannot have an `extern` ABI");
    }
    if let Some(constness) = &sig.constness {
        cx.error_spanned(constness, "a tool cannot be a `const fn`; remove `const`");
    }
    if let Some(variadic) = &sig.variadic {
        cx.error_spanned(variadic, "a tool cannot be variadic");
    }
    if !sig.generics.params.is_empty() {
        cx.error_spanned(
            &sig.generics,
            "a tool cannot be generic: its schema and descriptor are fixed at compile time; use concrete types (or a plain generic helper called from the tool)",
        );
    } else if let Some(where_clause) = &sig.generics.where_clause {
        cx.error_spanned(
            where_clause,
            "a tool cannot have a `where` clause; use concrete types",
        );
    }

    let mut params = Vec::new();
    let mut typed_params = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => cx.error_spanned(
                receiver,
                "a tool cannot take `self`: `#[tool]` goes on a free fn; reach shared state through a `State<T>` parameter",
            ),
            FnArg::Typed(typed) => {
                typed_params.push(typed.clone());
                if provider {
                    params.push((*typed.ty).clone());
                    continue;
                }
                if let Type::ImplTrait(_) = &*typed.ty {
                    cx.error_spanned(&typed.ty, "a tool cannot take `impl Trait` (that makes it generic); name a concrete type");
                    continue;
                }
                params.push((*typed.ty).clone());
            }
        }
    }

    let mut params = params.into_iter();
    let first = params.next();
    match &first {
        _ if provider => {}
        None => cx.error_spanned(
            &sig.ident,
            "a tool takes its argument struct as the first parameter; for a tool without arguments write `_: NoInput`",
        ),
        Some(ty) => check_argument_type(ty, cx),
    }

    let output = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => {
            if let Type::ImplTrait(_) = &**ty {
                let message = if provider {
                    "a `provider` tool returns `ProviderTool`, not `impl Trait`; write `-> ProviderTool`"
                } else {
                    "a tool's return type must be named (`Result<T, ToolError>` or `T`), not `impl Trait`"
                };
                cx.error_spanned(ty, message);
            }
            Some((**ty).clone())
        }
    };

    Sig {
        ident: sig.ident.clone(),
        asyncness: sig.asyncness.map(|a| a.span()),
        fn_span: sig.fn_token.span(),
        first,
        rest: params.collect(),
        typed_params,
        output,
    }
}

/// The shapes the signature alone shows cannot be a JSON object.
fn check_argument_type(ty: &Type, cx: &mut Ctxt) {
    let message = match ty {
        Type::Reference(_) => {
            "take the argument struct by value (`args: Args`), not by reference: the runtime hands each call its own input"
        }
        Type::Tuple(t) if t.elems.is_empty() => {
            "`()` is not an argument struct; for a tool without arguments write `_: NoInput`"
        }
        Type::Tuple(_) => {
            "a tuple is not an object-shaped argument struct (it is a JSON array); use a struct with named fields"
        }
        Type::Array(_) | Type::Slice(_) => {
            "an array is not an object-shaped argument struct; use a struct with named fields (one of them may be a `Vec`)"
        }
        Type::Ptr(_) | Type::BareFn(_) | Type::Never(_) | Type::TraitObject(_) => {
            "the argument must be a struct with named fields deriving `Deserialize, JsonSchema, ToolInput`"
        }
        _ => return,
    };
    cx.error_spanned(ty, message);
}
