//! The descriptor fields every tool's expansion writes (name, texts, effect, policies, schemas),
//! the fields only some tools set (`flags`), and the assertions for rules that need another
//! item (`assertions`, the check that its templates show no sensitive field, C25, among them).

use super::*;

/// The descriptor fields of the attribute's keys that every kind of tool has; a field at its
/// default is left out (`DEFAULTS` has it).
pub(super) fn common_fields(input: &Input<'_>, tw: &Tw, names: &Names) -> TokenStream {
    let Input {
        attrs,
        sig,
        description,
        ..
    } = input;
    let some = |value: &dyn ToTokens| quote!(::core::option::Option::Some(#value));
    // Coerced to the fn pointer type in a typed `let` spanned at the path: a fn of another
    // signature is a "mismatched types" error there, showing the signature to write.
    let describe = match attrs.description.as_ref().map(|g| &g.value) {
        Some(Description::Fn(path)) => {
            let span = path.span();
            let tw = tw.at(span);
            let value = quote_spanned!(span=> ::core::option::Option::Some({
                let __describe: #tw::DescribeFn = #path;
                __describe
            }));
            Some(quote!(describe: #value,))
        }
        _ => None,
    };
    let enabled = attrs.enabled.as_ref().map(|g| {
        let path = &g.value;
        let value = quote_spanned!(path.span()=> ::core::option::Option::Some(#path));
        quote!(enabled: #value,)
    });
    let toolset = attrs.toolset.as_ref().map(|g| {
        let set = some(&g.value.value());
        quote!(toolset: #set,)
    });
    let title = attrs.title.as_ref().map(|g| {
        let title = some(&g.value);
        quote!(title: #title,)
    });
    let summary = attrs.summary.as_ref().map(|g| {
        let summary = some(&g.value);
        quote!(summary: #summary,)
    });
    let i18n = attrs.i18n.as_ref().map(|g| {
        let locales = g.value.iter().map(|locale| {
            let code = locale.locale.to_string();
            let title = option_str(locale.title.as_ref());
            let summary = option_str(locale.summary.as_ref());
            quote!(#tw::LocaleText { locale: #code, title: #title, summary: #summary })
        });
        quote!(i18n: &[#(#locales),*],)
    });
    let effect = Ident::new(
        match attrs
            .effect
            .as_ref()
            .expect("checked: effect is present")
            .value
        {
            Effect::Read => "Read",
            Effect::Write => "Write",
            Effect::Money => "Money",
            Effect::Public => "Public",
        },
        Span::call_site(),
    );
    let flag = |given: bool, field: &str| {
        let field = Ident::new(field, Span::call_site());
        given.then(|| quote!(#field: true,))
    };
    let untrusted = flag(Attrs::flag(&attrs.untrusted), "untrusted");
    let user_only = flag(Attrs::flag(&attrs.user_only), "user_only");
    let deferred = flag(Attrs::flag(&attrs.deferred), "deferred");
    let subagents = attrs
        .subagents
        .as_ref()
        .is_some_and(|g| !g.value)
        .then(|| quote!(subagents: false,));
    let input_retries = attrs.input_retries().map(|n| {
        let n = some(&n);
        quote!(input_retries: #n,)
    });
    let location = quote_spanned! {sig.ident.span()=>
        #tw::Location {
            file: ::core::file!(),
            line: ::core::line!(),
            column: ::core::column!(),
            module_path: ::core::module_path!(),
        }
    };
    let Names { fn_name, name, .. } = names;
    let description = LitStr::new(description, Span::call_site());
    quote! {
        fn_name: #fn_name,
        name: #name,
        #toolset
        description: #description,
        #describe
        #title
        #summary
        #i18n
        effect: #tw::Effect::#effect,
        #untrusted
        #user_only
        #deferred
        #subagents
        #input_retries
        #enabled
        location: #location,
    }
}

/// C25: labels and approval prompts are stored with the call and shown to people (in the
/// interface, the journal, the approval queue), where the runtime cannot redact a value the
/// template already formatted into text. One assertion per placeholder, at the template.
fn c25_templates_hide_sensitive(
    attrs: &Attrs,
    tw: &Tw,
    sensitive_fields: impl Fn() -> TokenStream,
    args_text: impl Fn() -> String,
) -> Vec<TokenStream> {
    let label = attrs.label.as_ref().map(|l| &l.value);
    let labels = label
        .into_iter()
        .flat_map(|l| [l.start.as_ref(), l.complete.as_ref()])
        .map(|text| (text, "a label"));
    let prompt = attrs
        .approval
        .as_ref()
        .map(|a| (a.prompt.as_ref(), "an approval prompt"));
    let mut assertions = Vec::new();
    for (text, shown_in) in labels.chain(prompt) {
        let Some(TextOrPath::Template(template)) = text else {
            continue;
        };
        let span = template.span();
        let tw = tw.at(span);
        let mut seen: Vec<&str> = Vec::new();
        for name in &template.fields {
            if seen.contains(&name.as_str()) {
                continue;
            }
            seen.push(name);
            let args_text = args_text();
            let sensitive_fields = sensitive_fields();
            // Braces doubled: the message is the format string of `assert!`.
            let message = LitStr::new(
                &format!(
                    "`{{{{{name}}}}}` shows the sensitive field `{name}` of `{args_text}` in {shown_in}; labels and approval prompts are stored and shown to people: leave it out of the template (the approver sees the input with sensitive fields redacted)"
                ),
                span,
            );
            assertions.push(quote_spanned! {span=>
                const _: () = ::core::assert!(!#tw::has_field(#sensitive_fields, #name), #message);
            });
        }
    }
    assertions
}

/// The descriptor fields that depend only on the attribute's keys and the kind of tool (how it
/// ends a turn, its annotations, whether it projects its output, a kind other than plain); a
/// field at its default is left out (`DEFAULTS` has it).
pub(super) fn flags(attrs: &Attrs, kind: Kind, tw: &Tw) -> TokenStream {
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
    quote! {
        #ends_turn_kind
        #annotations
        #projected
        #kind_tokens
    }
}

/// Assertions for rules that need another item, spanned at the user's tokens: a `serve` tool's
/// argument struct has no `task_id` field, its `Output` has a schema when `output_schema` asks
/// for one, and the templates show no sensitive field (C25).
pub(super) fn assertions(
    attrs: &Attrs,
    tw: &Tw,
    first: &Type,
    args: &adapters::Args,
) -> Vec<TokenStream> {
    let (first_span, tw_first, args_ty) = (args.span, &args.tw, &args.ty);
    let serve = args.serve_output.is_some();
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
    if let (Some(serve_output), true) = (&args.serve_output, Attrs::flag(&attrs.output_schema)) {
        // At the `Output` of `ServeCalls<Args, Output>`, the type that lacks the schema.
        let span = serve_generic(first, 1).map_or(first_span, Spanned::span);
        let tw = tw.at(span);
        assertions.push(quote_spanned! {span=>
            const _: () = #tw::assert_output_schema::<#serve_output>();
        });
    }
    assertions
}
